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
 *   - a request message that stalls resets its stream (CANCEL) and frees what it held: one that
 *     received less than MIN_RECEIVE_RATE's share (1 KiB a second) in a whole receive timeout
 *     while still incomplete (watchReceiveProgress). A request that keeps arriving is never reset,
 *     however long it takes: under load the server itself reads slowly, and many large requests
 *     share a connection's window, so a whole-message time limit reset valid uploads;
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
import type {Metrics} from '../telemetry/metrics.js'
import {NO_TELEMETRY, type Telemetry} from '../telemetry/telemetry.js'
import {http2ServersOf, sessionSocket} from './internals.js'
import {REFUSED_HELD_BYTES, REFUSED_TRAILER} from './metadata.js'

export interface GuardSettings {
  /**
   * A request message still incomplete must have received at least MIN_RECEIVE_RATE's share of
   * bytes in every window this long since its stream opened, or its stream is reset; 0: no limit.
   */
  receiveTimeoutMs: number
  /** A connection must send the preface and SETTINGS within this; 0: no limit. */
  handshakeTimeoutMs: number
}

export const DEFAULT_GUARD: GuardSettings = {receiveTimeoutMs: 60_000, handshakeTimeoutMs: 10_000}
/**
 * The slowest a request may arrive, in bytes a second, averaged over each receive-timeout window: a
 * stalled client (gone without closing, or a slowloris) falls below it; a valid upload slowed by a
 * busy server or by sharing its connection's window with other large requests does not.
 */
export const MIN_RECEIVE_RATE = 1024

/** Judgements of a request's progress per receive-timeout window (sliding: each a slice of it). */
const PROGRESS_SLICES = 4

/**
 * Calls `stalled` once a request still arriving has received fewer than MIN_RECEIVE_RATE's share of
 * bytes (`received()`, a running total) in the last whole window of `windowMs`. The window slides:
 * it is judged every quarter of it, so a request that stops is reset between one window and a
 * quarter more after its last bytes. Each judgement comes after one more poll of the sockets: a
 * runner whose event loop was held up past it would otherwise count bytes that had arrived, unread,
 * as missing. `ended()` true: the request is complete or refused otherwise, and the watch stops.
 * Returns what stops it early.
 */
export function watchReceiveProgress(windowMs: number, received: () => number, ended: () => boolean, stalled: () => void): () => void {
  const minBytes = Math.max(1, Math.ceil((MIN_RECEIVE_RATE * windowMs) / 1000))
  // The running total at the stream's opening and at each judgement since, the last window's worth:
  // once full, its first entry is the total a whole window ago.
  const totals: number[] = [0]
  let timer: NodeJS.Timeout | undefined
  const judge = (): void => {
    if (ended()) return
    const now = received()
    totals.push(now)
    if (totals.length > PROGRESS_SLICES + 1) totals.shift()
    if (totals.length === PROGRESS_SLICES + 1 && now - (totals[0] ?? 0) < minBytes) return stalled()
    arm()
  }
  const arm = (): void => {
    timer = setTimeout(() => setImmediate(judge), windowMs / PROGRESS_SLICES)
    timer.unref()
  }
  arm()
  return () => clearTimeout(timer)
}

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

/** What the guard of one server works with: its budget, its settings, its warnings and its metrics. */
interface Guard {
  budget: CallBudget
  settings: GuardSettings
  warn: ReturnType<typeof rateLimited>
  metrics: Metrics
}

/**
 * Installs the guard on every HTTP/2 server of a started grpc-js server (reached through
 * internals.ts), counting what it does in the server's telemetry.
 */
export function installGuard(server: grpc.Server, budget: CallBudget, settings: GuardSettings, {logger, telemetry = NO_TELEMETRY}: {logger: Logger; telemetry?: Telemetry}): void {
  const warn = rateLimited(logger)
  const guard: Guard = {budget, settings, warn, metrics: telemetry.metrics}
  for (const h2 of http2ServersOf(server)) {
    h2.on('error', (err) => {
      guard.metrics.connectionGuard('accept-error')
      warn('accept', 'cannot accept a connection', {error: err.message, code: err.code, hint: err.code === 'EMFILE' || err.code === 'ENFILE' ? 'out of file descriptors: idle connections are closed after --handshake-timeout and --connection-idle-timeout' : undefined})
    })
    h2.on('session', (session) => guardSession(session, guard))
    // Before grpc-js's own listener: the stream's reception id goes into the headers grpc-js
    // reads the call's metadata from, and its bytes are counted before grpc-js buffers them.
    h2.prependListener('stream', (stream, headers) => guardStream(stream, headers, guard))
  }
}

function guardSession(session: Http2Session, {budget, settings, warn, metrics}: Guard): void {
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
    metrics.connectionGuard('handshake-timeout')
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

function guardStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, guard: Guard): void {
  const {budget, settings, warn, metrics} = guard
  const openedAt = Date.now()
  // The request's bytes are counted under this reception until the call claims them (server.ts,
  // through the header) or the stream closes (budget.ts).
  const reception = budget.openReception()
  headers[RECEPTION_HEADER] = reception.id
  let done = false
  /** Request bytes that arrived on the stream. */
  let received = 0
  /** The request is complete, or will never be: no more bytes to count, no timeout. */
  const stopReceiving = (): void => {
    if (done) return
    done = true
    stopWatch?.()
    stream.removeListener('data', onData)
  }
  /** Refused: what the request held is released now. */
  const release = (): void => {
    stopReceiving()
    budget.closeReception(reception)
  }
  /** Refuses the request: counted, logged (at most once a second), its bytes released, then `end`. */
  const refuse = (action: string, msg: string, fields: Record<string, unknown>, end: () => void): void => {
    metrics.connectionGuard(action)
    warn(action, msg, {...fields, remote: stream.session?.socket?.remoteAddress})
    release()
    end()
  }
  const reset = (code: number): (() => void) => () => {
    if (!stream.destroyed) stream.close(code)
  }
  const onData = (chunk: Buffer): void => {
    received += chunk.length
    if (budget.reserveReceive(chunk.length, reception)) return
    const s = budget.snapshot()
    const fields = {received: reception.bytes + chunk.length, heldBytes: s.heldBytes, maxInflightBytes: budget.settings.maxHeldBytes}
    const msg = 'refusing a request: receiving it would pass the budget of request bytes held'
    // A status can only go out while the response has not started; else the stream is reset.
    const end =
      stream.headersSent || stream.destroyed
        ? reset(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM)
        : () =>
            refuseWhenSent(stream, {code: RESOURCE_EXHAUSTED, message: `the runner is holding too many request bytes to receive this one (${fields.heldBytes} of ${fields.maxInflightBytes} held); retry later`, reason: REFUSED_HELD_BYTES}, settings.receiveTimeoutMs)
    refuse('receive-budget', msg, fields, end)
  }
  const stopWatch =
    settings.receiveTimeoutMs > 0
      ? watchReceiveProgress(
          settings.receiveTimeoutMs,
          () => received,
          () => done,
          () => refuse('receive-timeout', 'resetting a stream whose request stalled', {received, receiveTimeoutMs: settings.receiveTimeoutMs, minBytesPerSecond: MIN_RECEIVE_RATE, openForMs: Date.now() - openedAt}, reset(http2.constants.NGHTTP2_CANCEL)),
        )
      : undefined
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
 * runtime took for a dead pod. A client that stalls while sending the rest is reset (CANCEL) by
 * the same rule as any request (watchReceiveProgress over windows of `windowMs`; 0: never).
 */
function refuseWhenSent(stream: ServerHttp2Stream, {code, message, reason}: {code: number; message: string; reason: string}, windowMs: number): void {
  stream.removeAllListeners('data')
  stream.removeAllListeners('end')
  let dropped = 0
  const stopWatch = windowMs > 0 ? watchReceiveProgress(windowMs, () => dropped, () => stream.destroyed || stream.closed, () => stream.close(http2.constants.NGHTTP2_CANCEL)) : undefined
  stream.once('close', () => stopWatch?.())
  stream.once('end', () => {
    stopWatch?.()
    if (stream.destroyed || stream.closed || stream.headersSent) return
    stream.respond({':status': 200, 'content-type': 'application/grpc+proto', 'grpc-status': String(code), 'grpc-message': percentEncode(message), [REFUSED_TRAILER]: reason}, {endStream: true})
  })
  stream.on('data', (chunk: Buffer) => {
    dropped += chunk.length
  })
  stream.resume()
}

/** gRPC's grpc-message encoding: bytes outside printable ASCII, and '%', as %XX. */
function percentEncode(text: string): string {
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  return out
}
