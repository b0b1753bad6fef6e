/**
 * HTTP/2 hygiene of fnr's gRPC listeners (fnr serve, the wrapper server): what grpc-js 1.14 does
 * not bound by itself, added at the HTTP/2 session level (docs/limits.md).
 *
 * grpc-js 1.14 has server options for two of the limits, which server.ts sets:
 *   - grpc.max_concurrent_streams: SETTINGS_MAX_CONCURRENT_STREAMS per connection (clients queue
 *     streams beyond it themselves: grpc-go waits for stream quota, nghttp2 clients hold them;
 *     budget.ts sets it to the number of calls that may run at once);
 *   - grpc.max_connection_idle_ms: a connection with no stream for that long gets GOAWAY and is
 *     closed (a client with calls to make reconnects; Porch's connection, which sends calls, stays).
 * Everything else is here, on the HTTP/2 servers grpc-js keeps (reached through internals.ts):
 *   - request bytes being received count against the budget's held bytes (budget.ts) until the
 *     call claims them (the stream's reception id, in the fnr-reception header) or the stream
 *     closes; a data frame that would pass it refuses the request (a RESOURCE_EXHAUSTED status
 *     once the client has sent the rest, which is dropped: refuseWhenSent), so partial messages
 *     across streams and connections cannot exhaust memory (200 streams each sending 6,000,000 of
 *     a declared 6,200,000 bytes);
 *   - a request message not complete within the receive timeout (counted from the stream's
 *     opening) resets its stream (CANCEL) and frees what it held;
 *   - a connection that has not sent the HTTP/2 preface and SETTINGS within the handshake
 *     timeout is destroyed (sockets that never speak HTTP/2 no longer hold file descriptors);
 *   - an accept error (EMFILE, ENFILE: out of file descriptors) is logged and counted instead of
 *     being an unhandled 'error' event; libuv closes the pending connection, the client sees
 *     UNAVAILABLE, and the server goes on accepting once descriptors are free.
 */
import http2, {type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream} from 'node:http2'

import type * as grpc from '@grpc/grpc-js'

import {RECEPTION_HEADER, type CallBudget} from '../budget.js'
import type {Logger} from '../telemetry/log.js'
import {metrics} from '../telemetry/metrics.js'
import {http2ServersOf, sessionSocket} from './internals.js'
import {REFUSED_HELD_BYTES, REFUSED_TRAILER} from './metadata.js'

export interface GuardSettings {
  /** A request message must be complete this long after its stream opened; 0: no limit. */
  receiveTimeoutMs: number
  /** A connection must send the preface and SETTINGS within this; 0: no limit. */
  handshakeTimeoutMs: number
}

export const DEFAULT_GUARD: GuardSettings = {receiveTimeoutMs: 60_000, handshakeTimeoutMs: 10_000}
/** Default idle time after which a connection without streams is closed (GOAWAY). */
export const DEFAULT_CONNECTION_IDLE_MS = 5 * 60_000

/** At most one log line a second for repeated events of one kind. */
function rateLimited(logger: Logger): (key: string, msg: string, fields: Record<string, unknown>) => void {
  const last = new Map<string, {at: number; suppressed: number}>()
  return (key, msg, fields) => {
    const now = Date.now()
    const seen = last.get(key)
    if (seen && now - seen.at < 1000) {
      seen.suppressed++
      return
    }
    logger.warn(msg, {...fields, ...(seen?.suppressed ? {suppressedSinceLastLine: seen.suppressed} : {})})
    last.set(key, {at: now, suppressed: 0})
  }
}

/** Installs the guard on every HTTP/2 server of a started grpc-js server (reached through internals.ts). */
export function installGuard(server: grpc.Server, budget: CallBudget, settings: GuardSettings, logger: Logger): void {
  const warn = rateLimited(logger)
  for (const h2 of http2ServersOf(server)) {
    h2.on('error', (err) => {
      metrics().connectionGuard('accept-error')
      warn('accept', 'cannot accept a connection', {error: err.message, code: err.code, hint: err.code === 'EMFILE' || err.code === 'ENFILE' ? 'out of file descriptors: idle connections are closed after --handshake-timeout and --connection-idle-timeout' : undefined})
    })
    h2.on('session', (session) => guardSession(session, budget, settings, warn))
    // Before grpc-js's own listener: the stream's reception id goes into the headers grpc-js
    // reads the call's metadata from, and its bytes are counted before grpc-js buffers them.
    h2.prependListener('stream', (stream, headers) => guardStream(stream, headers, {budget, settings, warn}))
  }
}

function guardSession(session: Http2Session, budget: CallBudget, settings: GuardSettings, warn: ReturnType<typeof rateLimited>): void {
  // Its stream limit follows the calls asleep (budget.ts).
  budget.sessionOpened(session)
  // What the connection buffered is garbage once it closes: the budget collects when the runner is
  // idle (budget.ts, connectionClosed). session.socket is unbound by then; the net.Socket it wraps
  // (Node keeps it under a 'socket' symbol) still has its count.
  const socket = sessionSocket(session)
  session.once('close', () => budget.connectionClosed(socket?.bytesRead ?? 0))
  if (settings.handshakeTimeoutMs <= 0) return
  let spoke = false
  const close = (): void => {
    if (spoke || session.destroyed) return
    metrics().connectionGuard('handshake-timeout')
    warn('handshake', 'closing a connection that sent no HTTP/2 preface in time', {remote: session.socket?.remoteAddress, handshakeTimeoutMs: settings.handshakeTimeoutMs})
    session.destroy()
  }
  // Judged after one more poll of the sockets: timers run before the reads of a turn, so a runner
  // whose event loop was held up past the timeout would otherwise close connections whose preface
  // had arrived meanwhile and was waiting to be read.
  const timer = setTimeout(() => setImmediate(close), settings.handshakeTimeoutMs)
  timer.unref()
  session.once('remoteSettings', () => {
    spoke = true
    clearTimeout(timer)
  })
  session.once('close', () => clearTimeout(timer))
}

function guardStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, guard: {budget: CallBudget; settings: GuardSettings; warn: ReturnType<typeof rateLimited>}): void {
  const {budget, settings, warn} = guard
  const openedAt = Date.now()
  // The request's bytes are counted under this reception until the call claims them (server.ts,
  // through the header) or the stream closes (budget.ts).
  const reception = budget.openReception()
  headers[RECEPTION_HEADER] = reception.id
  let done = false
  /** The request is complete, or will never be: no more bytes to count, no timeout. */
  const stopReceiving = (): void => {
    if (done) return
    done = true
    if (timer) clearTimeout(timer)
    stream.removeListener('data', onData)
  }
  /** Refused: what the request held is released now. */
  const release = (): void => {
    stopReceiving()
    budget.closeReception(reception)
  }
  /** Refuses the request: counted, logged (at most once a second), its bytes released, then `end`. */
  const refuse = (action: string, msg: string, fields: Record<string, unknown>, end: () => void): void => {
    metrics().connectionGuard(action)
    warn(action, msg, {...fields, remote: stream.session?.socket?.remoteAddress})
    release()
    end()
  }
  const reset = (code: number): (() => void) => () => {
    if (!stream.destroyed) stream.close(code)
  }
  const onData = (chunk: Buffer): void => {
    if (budget.reserveReceive(chunk.length, reception)) return
    const s = budget.snapshot()
    const fields = {received: reception.bytes + chunk.length, heldBytes: s.heldBytes, maxInflightBytes: budget.settings.maxHeldBytes}
    const msg = 'refusing a request: receiving it would pass the budget of request bytes held'
    // A status can only go out while the response has not started; else the stream is reset.
    const end =
      stream.headersSent || stream.destroyed
        ? reset(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
        : () =>
            refuseWhenSent(stream, {code: RESOURCE_EXHAUSTED, message: `the runner is holding too many request bytes to receive this one (${fields.heldBytes} of ${fields.maxInflightBytes} held); retry later`, reason: REFUSED_HELD_BYTES}, settings.receiveTimeoutMs > 0 ? Math.max(0, openedAt + settings.receiveTimeoutMs - Date.now()) : 0)
    refuse('receive-budget', msg, fields, end)
  }
  const timer =
    settings.receiveTimeoutMs > 0
      ? setTimeout(() => {
          if (done) return
          refuse('receive-timeout', 'resetting a stream whose request did not complete in time', {received: reception.bytes, receiveTimeoutMs: settings.receiveTimeoutMs}, reset(http2.constants.NGHTTP2_CANCEL))
        }, settings.receiveTimeoutMs)
      : undefined
  timer?.unref()
  stream.on('data', onData)
  stream.once('end', () => stopReceiving())
  stream.once('close', () => release())
  // The response counts against the budget until the stream closes (all sent, or reset).
  let sending = 0
  const write = stream.write
  stream.write = function (this: ServerHttp2Stream, chunk: unknown, ...rest: unknown[]): boolean {
    if (chunk instanceof Uint8Array && chunk.length > 0) {
      budget.holdSend(chunk.length)
      sending += chunk.length
    }
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest)
  } as typeof stream.write
  stream.once('close', () => {
    if (sending > 0) budget.releaseSend(sending)
    sending = 0
  })
}

/** grpc.status.RESOURCE_EXHAUSTED (the numeric code: this module imports grpc-js's types only). */
const RESOURCE_EXHAUSTED = 8

/**
 * Refuses a request that is still arriving with a gRPC status (a trailers-only response, with
 * REFUSED_TRAILER set to `reason`: the call did not run) once the client has sent all of it; what
 * comes until then is dropped, never held (grpc-js no longer sees the stream's data or its end, so
 * it buffers nothing and runs nothing). The stream then ends the way a call's does: the client has
 * ended its side, the status ends the other, and both ends and nghttp2 agree that it is closed.
 *
 * Why not sooner: a status sent while the client is still sending, followed by a reset (the
 * client reads the status; "stop sending"), broke connections. nghttp2 ignores what arrives on a
 * stream once it has a reset queued, the client's END_STREAM included, and counts the stream until
 * the reset has left; a client that had read the status and finished its message had closed the
 * stream and opened the next one, and nghttp2 ended the whole connection (GOAWAY PROTOCOL_ERROR
 * "request HEADERS: max concurrent streams exceeded"; every call on it failed INTERNAL). Without a
 * reset, the client's END_STREAM closed a stream whose end Node had not read yet, and Node counts
 * such a stream until it has (it refused the next stream in the same read with ENHANCE_YOUR_CALM).
 * A reset sent together with the status makes nghttp2 drop the status whenever a write is in
 * progress (Node queues the reset; nghttp2 drops what a stream with a reset queued still has to
 * send), and a bare reset reaches grpc-js on Node 26 as UNAVAILABLE "Write error", which the pod
 * runtime took for a dead pod. A client that never finishes is reset (CANCEL) when the receive
 * timeout (`giveUpMs` from now; 0: none) runs out, as any request is.
 */
function refuseWhenSent(stream: ServerHttp2Stream, {code, message, reason}: {code: number; message: string; reason: string}, giveUpMs: number): void {
  stream.removeAllListeners('data')
  stream.removeAllListeners('end')
  const timer = giveUpMs > 0 ? setTimeout(() => stream.destroyed || stream.close(http2.constants.NGHTTP2_CANCEL), giveUpMs) : undefined
  timer?.unref()
  stream.once('close', () => clearTimeout(timer))
  stream.once('end', () => {
    clearTimeout(timer)
    if (stream.destroyed || stream.closed || stream.headersSent) return
    stream.respond({':status': 200, 'content-type': 'application/grpc+proto', 'grpc-status': String(code), 'grpc-message': percentEncode(message), [REFUSED_TRAILER]: reason}, {endStream: true})
  })
  stream.on('data', () => {})
  stream.resume()
}

/** gRPC's grpc-message encoding: bytes outside printable ASCII, and '%', as %XX. */
function percentEncode(text: string): string {
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  return out
}
