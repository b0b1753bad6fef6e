/**
 * HTTP/2 receive windows of fnr's gRPC servers (fnr serve and the wrapper server).
 *
 * grpc-js (1.14) leaves a server's windows at HTTP/2's default of 64 KiB, per connection and per
 * stream, and has no option to raise them (`grpc-node.flow_control_window` is read by its client
 * only). With many calls on one connection (Porch's runner client multiplexes every render over a
 * single connection) that window is not just slow for large requests, it stalls them: data buffered
 * for streams that are not read yet counts against the connection window, nghttp2 returns window
 * only once half of it has been received, and a connection with ~32 KiB held that way sits just
 * below that threshold, so the client may send nothing at all until something else happens. The
 * 10-minute soak (test/support/reliability/long-run.ts) saw ~1.4 % of its calls with 0.1-1 MiB
 * requests wait out their whole 60 s deadline this way.
 *
 * The fix is the one grpc-js's client applies to itself: on every new connection, raise the
 * connection window (setLocalWindowSize) and the initial stream window (SETTINGS) to the largest
 * message the server accepts plus framing. Memory stays bounded by that window per connection,
 * as the message size limit already bounds each call. grpc-js keeps its HTTP/2 servers in a
 * private field, which internals.ts reaches (a grpc-js without it fails the server's start and
 * the tests).
 *
 * The connection window is capped (CONNECTION_WINDOW, 1 MiB), below the stream windows: Node's
 * HTTP/2 session stops reading its socket while one of its own writes is not complete
 * (node_http2.cc, MaybeStopReading). When both ends are Node (fnr's own client, the pod runtime
 * calling a wrapper server, the tests) and each has more in flight towards the other than the
 * kernel's socket buffers hold, both writes wait for a read that never comes: a connection with
 * 40 x 6 MiB calls stopped for good (server and client sockets both full, both with MiBs not
 * sent; test/reliability/memory-limit.test.ts, under machine load). A client can have no more
 * unacknowledged request bytes in flight than the connection window, and 1 MiB fits the socket
 * buffers (Linux: up to 4 MiB send + 6 MiB receive by default), so a client's write always
 * completes, it reads again, and the server's write drains. A smaller connection window costs a
 * WINDOW_UPDATE round trip every 512 KiB. (fnr's client keeps a window as large as a response:
 * 1 MiB there made large responses wait out their deadline in the soak, client.ts.)
 */
import type {Http2Session} from 'node:http2'

import type * as grpc from '@grpc/grpc-js'

import type {Logger} from '../telemetry/log.js'
import {http2ServersOf} from './internals.js'

/** HTTP/2's largest window (2^31 - 1). */
const MAX_WINDOW = 2 ** 31 - 1

/** The receive window for a server whose largest message is `maxMessageSize` bytes. */
export function receiveWindowFor(maxMessageSize: number): number {
  return Math.min(MAX_WINDOW, Math.max(65_535, maxMessageSize + 64 * 1024))
}

/**
 * Largest connection receive window of fnr's servers and its client (see the top of the file:
 * larger, two Node peers can block each other for good).
 */
export const CONNECTION_WINDOW = 1024 * 1024

/** The connection window for a stream window of `streamWindow` bytes. */
export function connectionWindowFor(streamWindow: number): number {
  return Math.min(streamWindow, CONNECTION_WINDOW)
}

/** Raises the receive windows of every connection a started (bound) grpc-js server accepts from now on. */
export function raiseReceiveWindows(server: grpc.Server, windowBytes: number, logger?: Logger): void {
  for (const h2 of http2ServersOf(server)) h2.on('session', (session) => applyWindows(session, windowBytes, logger))
}

function applyWindows(session: Http2Session, windowBytes: number, logger?: Logger): void {
  try {
    // The connection's own window (a WINDOW_UPDATE on stream 0, queued) first: Node sends what is
    // queued when it sends the SETTINGS below; queued last, it would wait for the next write.
    session.setLocalWindowSize(connectionWindowFor(windowBytes))
    // SETTINGS_INITIAL_WINDOW_SIZE: each new stream's window.
    session.settings({initialWindowSize: windowBytes})
  } catch (err) {
    // A session that is already closing; nothing to do.
    logger?.debug('cannot raise the HTTP/2 receive windows of a connection', {error: (err as Error).message})
  }
}
