/**
 * The evaluator.FunctionEvaluator gRPC server used by `fnr serve` (port 9445) and
 * `fnr wrapper-server` (port 9446), with grpc.health.v1 and graceful draining.
 *
 * Request handling: the image and ResourceList are checked for presence, the caller's deadline
 * and cancellation are handed to the evaluator, the ResourceList bytes pass through untouched,
 * and errors become gRPC statuses by their kind (errors.ts). A failing function adds the
 * fnr-failure-bin trailer (metadata.ts).
 */
import {constants as http2constants} from 'node:http2'
import {format} from 'node:util'

import * as grpc from '@grpc/grpc-js'

import {CallBudget, deriveBudget, RECEPTION_HEADER} from '../budget.js'
import {FnrError, GrpcCode, toFnrError} from '../errors.js'
import {peerKey} from '../fair-queue.js'
import type {EvaluationRequest, Evaluator} from '../evaluator.js'
import {silentLogger, type Logger} from '../telemetry/log.js'
import {NO_TELEMETRY, type Telemetry} from '../telemetry/telemetry.js'
import {continueTrace, TRACEPARENT, TRACESTATE} from '../telemetry/trace.js'
import type {FunctionFailure} from '../process/failure.js'
import {raiseReceiveWindows, receiveWindowFor} from './flow-control.js'
import {DEFAULT_CONNECTION_IDLE_MS, DEFAULT_GUARD, installGuard, type GuardSettings} from './hygiene.js'
import {EVALUATOR_TRAILER, failureMetadata, resultsMetadata} from './metadata.js'
import {EVALUATOR_SERVICE, evaluatorServiceDefinition, type EvaluateFunctionRequest, type EvaluateFunctionResponse} from './proto.js'
import {frameResponsesInPlace, grpcJsVersion} from './internals.js'
import {HealthService, type ServingStatus} from './health.js'
import {fitLog, framedResponseSerializer, REPLY_HEADROOM, takePrefixed} from './reply.js'

export interface EvaluatorServerOptions {
  evaluator: Evaluator
  /** gRPC max message size for receive and send (Porch: --max-request-body-size). */
  maxMessageSize: number
  logger?: Logger
  /** Listen address; default FNR_BIND_ADDRESS or all interfaces. */
  host?: string
  port: number
  /** Credentials; default insecure (plaintext h2c, as Porch). */
  credentials?: grpc.ServerCredentials
  /** The memory and concurrency budget (budget.ts); default derived from the memory limit, with this server's telemetry. */
  budget?: CallBudget
  /** Where calls are counted and traced (and the HTTP/2 guard's actions counted); default none. */
  telemetry?: Telemetry
  /**
   * --default-deadline: the deadline of a call that came without one, in ms from its arrival; past it
   * the call fails DEADLINE_EXCEEDED and its function is killed. 0 or absent: none (the caller's
   * cancellation alone ends such a call).
   */
  defaultDeadlineMs?: number
  /** HTTP/2 limits (hygiene.ts); defaults DEFAULT_GUARD, DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_CONNECTION_IDLE_MS. */
  http2?: Partial<GuardSettings> & {maxConcurrentStreams?: number; connectionIdleMs?: number}
}

/** The --log-level at which each call is logged (log.ts: LOG_LEVELS[3] is 'request'). */
const REQUEST_LOG_VERBOSITY = 3
/** The abort reason of every call its caller cancelled (the caller gets no answer to read it in). */
const CALL_CANCELLED = new FnrError('Cancelled', 'the caller cancelled the call')
/** The abort reason of a call without a deadline that ran past --default-deadline (server.ts turns it into its error). */
/** The reception id hygiene.ts gave the call's stream: its request's bytes, held until admission claims them. */
function receptionOf(metadata: grpc.Metadata): string | undefined {
  const value = metadata.get(RECEPTION_HEADER)[0]
  return typeof value === 'string' ? value : undefined
}

const DEFAULT_DEADLINE_PASSED = new FnrError('DeadlineExceeded', 'the call ran past the runner\'s --default-deadline')

/**
 * Longest image name accepted. Real references are a few hundred characters at most (Docker
 * caps the repository name at 255); the limit keeps every message that quotes the image small.
 */
export const MAX_IMAGE_LENGTH = 4096

/**
 * Largest status message sent, in bytes. The message travels in an HTTP/2 trailer: a trailer
 * larger than the client's header list limit (64 KiB after HPACK in grpc-js) is never delivered,
 * and the call and every later call on that connection hang. The full details of a failure are
 * in the fnr-failure-bin trailer, which metadata.ts keeps under 6 KiB.
 */
export const MAX_STATUS_MESSAGE_BYTES = 8 * 1024

/**
 * The listen address when no flag chooses one: FNR_BIND_ADDRESS, else every address family, as
 * Go's ":port" (Porch listens on ":9445"): "::" is a dual-stack socket on Linux (IPv4 clients
 * arrive as ::ffff:a.b.c.d); on a machine without IPv6, startListening falls back to 0.0.0.0.
 */
export function defaultBindHost(): string {
  return process.env.FNR_BIND_ADDRESS || ANY_ADDRESS
}

/** "Every address family" (see defaultBindHost). */
export const ANY_ADDRESS = '::'

/**
 * Sends grpc-js's own log lines (by default "E …" lines on stderr, such as "No address added out
 * of total 1 resolved" before fnr's own error for a port in use) to fnr's logger at debug level:
 * fnr reports what matters to it through its own errors. GRPC_VERBOSITY and GRPC_TRACE still
 * choose what grpc-js logs. The grpc-js logger is process-wide; the last server built sets it.
 */
export function routeGrpcLogging(logger: Logger): void {
  const to = (severity: string) => (...args: unknown[]) => logger.debug('grpc-js', {severity, message: format(...args)})
  grpc.setLogger({error: to('error'), info: to('info'), debug: to('debug')})
}

function formatHostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`
}

export class EvaluatorServer {
  readonly health = new HealthService({'': 'NOT_SERVING', [EVALUATOR_SERVICE]: 'NOT_SERVING'})
  private readonly server: grpc.Server
  private readonly logger: Logger
  private inFlight = 0
  private draining = false
  private boundPort = 0
  private boundHost = ''
  private idleWaiters: Array<() => void> = []
  readonly budget: CallBudget
  readonly telemetry: Telemetry

  constructor(private readonly options: EvaluatorServerOptions) {
    this.logger = options.logger ?? silentLogger
    this.telemetry = options.telemetry ?? NO_TELEMETRY
    this.budget = options.budget ?? new CallBudget(deriveBudget(), this.logger, {telemetry: this.telemetry})
    routeGrpcLogging(this.logger)
    this.server = new grpc.Server({
      'grpc.max_concurrent_streams': options.http2?.maxConcurrentStreams ?? this.budget.settings.maxConcurrentStreams,
      'grpc.max_connection_idle_ms': options.http2?.connectionIdleMs ?? DEFAULT_CONNECTION_IDLE_MS,
      'grpc.max_receive_message_length': options.maxMessageSize,
      'grpc.max_send_message_length': options.maxMessageSize,
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
      // Off: channelz's bookkeeping took ~10% of the server's CPU per small call, and nothing reads
      // it. Without it grpc-js 1.14 no longer lists its sessions for forceShutdown, which then left
      // the calls in flight running: the server ends the sessions the budget lists (forceSessions).
      'grpc.enable_channelz': 0,
    })
    const definition = evaluatorServiceDefinition()
    const method = definition.EvaluateFunction!
    this.server.addService(
      {...definition, EvaluateFunction: {...method, responseSerialize: framedResponseSerializer(method.responseSerialize)}},
      {EvaluateFunction: this.handle.bind(this)},
    )
    this.health.addToServer(this.server)
  }

  get port(): number {
    return this.boundPort
  }

  /** The address the server listens on (after start: --bind-address, its default, or 0.0.0.0 where IPv6 is missing). */
  get host(): string {
    return this.boundHost
  }

  get activeCalls(): number {
    return this.inFlight
  }

  /** Binds and starts serving. Health stays NOT_SERVING until setServing(true). */
  async start(): Promise<number> {
    const host = this.options.host || defaultBindHost()
    const bind = (h: string): Promise<number> => {
      const address = formatHostPort(h, this.options.port)
      return new Promise<number>((resolve, reject) => {
        this.server.bindAsync(address, this.options.credentials ?? grpc.ServerCredentials.createInsecure(), (err, port) => {
          if (err) reject(new FnrError('Unavailable', `cannot listen on ${address}: ${bindFailure(err.message)}`, {cause: err}))
          else resolve(port)
        })
      })
    }
    try {
      this.boundPort = await bind(host)
      this.boundHost = host
    } catch (err) {
      // "::" on a machine without IPv6: every IPv4 address instead. grpc-js's bind error carries no
      // errno code, so a plain socket asks the system whether IPv6 can listen at all.
      if (host !== ANY_ADDRESS || (await ipv6CanListen())) throw err
      this.logger.info('IPv6 is not available: listening on IPv4 only', {error: (err as Error).message})
      this.boundPort = await bind('0.0.0.0')
      this.boundHost = '0.0.0.0'
    }
    // HTTP/2 windows as large as a message (flow-control.ts: the 64 KiB defaults stall large
    // requests on a busy connection).
    raiseReceiveWindows(this.server, receiveWindowFor(this.options.maxMessageSize), this.logger)
    // Partial messages, slow senders, silent sockets, accept errors (hygiene.ts).
    installGuard(this.server, this.budget, {...DEFAULT_GUARD, ...stripUndefined(this.options.http2)}, {logger: this.logger, telemetry: this.telemetry})
    // A large output goes out from where the process runner put it, not copied into grpc-js's frame.
    if (!frameResponsesInPlace(takePrefixed)) this.logger.debug('grpc-js frames responses by copying them (its framing method was not found)', {grpcJs: grpcJsVersion()})
    return this.boundPort
  }

  setServing(serving: boolean): void {
    const status: ServingStatus = serving && !this.draining ? 'SERVING' : 'NOT_SERVING'
    this.health.setStatus('', status)
    this.health.setStatus(EVALUATOR_SERVICE, status)
  }

  /**
   * Graceful stop: report NOT_SERVING, refuse new calls, let calls in flight finish for up to
   * graceMs, then cancel whatever is left (which kills the function processes).
   */
  async shutdown(graceMs: number): Promise<{forced: boolean}> {
    this.draining = true
    this.setServing(false)
    // tryShutdown stops new calls; it would also wait for open health Watch streams, which
    // never end by themselves, so the wait is for EvaluateFunction calls only.
    const closed = new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()))
    const idle = this.inFlight === 0 ? Promise.resolve(true) : new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true)))
    const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), Math.max(0, graceMs)).unref())
    const finished = await Promise.race([idle, timeout])
    // Let the last responses flush; sessions holding only Watch streams are then cut.
    if (finished) await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 250).unref())])
    this.forceSessions()
    return {forced: !finished}
  }

  /** Immediate stop (tests, second signal). */
  forceShutdown(): void {
    this.draining = true
    this.forceSessions()
  }

  /**
   * grpc-js's forceShutdown, then every session still open (the budget's list, which the guard
   * keeps: hygiene.ts) reset with NGHTTP2_CANCEL, as grpc-js does with channelz on: its calls end CANCELLED.
   */
  private forceSessions(): void {
    this.server.forceShutdown()
    for (const session of this.budget.openSessions()) if (!session.destroyed) session.destroy(undefined, http2constants.NGHTTP2_CANCEL)
  }

  private handle(
    call: grpc.ServerUnaryCall<EvaluateFunctionRequest, EvaluateFunctionResponse>,
    callback: grpc.sendUnaryData<EvaluateFunctionResponse>,
  ): void {
    const started = performance.now()
    const {resourceList} = call.request
    // White space around a name is never part of an image reference: trimmed once here, so every
    // runtime (and the response cache) sees the same name; the exec runtime always matched trimmed.
    const image = call.request.image?.trim()
    const traceparent = call.metadata.get(TRACEPARENT)[0]?.toString()
    const tracestate = call.metadata.get(TRACESTATE)[0]?.toString()
    // With OpenTelemetry on (otel.ts), the call is a SERVER span and its ids are the trace context.
    const span = this.telemetry.tracing?.startSpan('EvaluateFunction', {parent: traceparent, tracestate, kind: 'server', attributes: {'rpc.system': 'grpc', 'rpc.service': 'evaluator.FunctionEvaluator', 'rpc.method': 'EvaluateFunction', 'fn.image': image}})
    const trace = span?.context ?? continueTrace(traceparent, tracestate)
    this.inFlight++
    const abort = new AbortController()
    // With a reason made once: abort() without one builds a DOMException and captures its stack,
    // most of the cost of a reset stream when a client cancels thousands at once.
    const onCancel = (): void => abort.abort(CALL_CANCELLED)
    call.once('cancelled', onCancel)

    const finish = (
      err: grpc.ServerErrorResponse | null,
      response?: EvaluateFunctionResponse,
      evaluator?: string,
      trailers?: grpc.Metadata,
    ): void => {
      if (--this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake()
      call.removeListener('cancelled', onCancel)
      const code = err ? (err.code ?? GrpcCode.UNKNOWN) : GrpcCode.OK
      // A call no evaluator took (refused before, or an image none knows): 'none' in the metric, the span and the log alike.
      const runtime = evaluator ?? 'none'
      this.telemetry.metrics.evaluation(runtime, image ?? '', grpc.status[code] ?? String(code), (performance.now() - started) / 1000)
      if (span) {
        span.setAttributes({'rpc.grpc.status_code': code, 'fnr.runtime': runtime, 'fnr.bytes_in': resourceList?.length ?? 0, 'fnr.bytes_out': response?.resourceList.length})
        span.end(err ? `${grpc.status[code] ?? code}: ${String(err.details ?? '').slice(0, 500)}` : undefined)
      }
      if (this.logger.enabled(REQUEST_LOG_VERBOSITY)) {
        this.logger.request('EvaluateFunction', {
          image: image && image.length > MAX_IMAGE_LENGTH ? `${image.slice(0, 64)}…` : image,
          bytesIn: resourceList?.length ?? 0,
          bytesOut: response?.resourceList.length,
          code,
          evaluator: runtime,
          ms: Math.round((performance.now() - started) * 10) / 10,
          traceId: trace.traceId,
          spanId: trace.spanId,
          ...(trace.parentSpanId ? {parentSpanId: trace.parentSpanId} : {}),
          ...(err ? {error: err.details} : {}),
        })
      }
      if (err) callback(err)
      else callback(null, response, trailers)
    }

    if (!image || image.trim() === '') {
      finish(statusError(new FnrError('InvalidArgument', 'image is empty: set the image of the function to evaluate')))
      return
    }
    if (image.length > MAX_IMAGE_LENGTH) {
      finish(statusError(new FnrError('InvalidArgument', `image is ${image.length} characters long, more than the limit of ${MAX_IMAGE_LENGTH}: ${JSON.stringify(image.slice(0, 64))}…`)))
      return
    }
    if (!resourceList || resourceList.length === 0) {
      finish(statusError(new FnrError('InvalidArgument', `resource_list is empty: send a serialized ResourceList for ${JSON.stringify(image)}`)))
      return
    }
    if (this.logger.enabled(5)) this.logger.trace('request ResourceList', {image, resourceList: resourceList.toString('utf8')})

    this.run({image, resourceList, trace, signal: abort.signal}, call, abort, finish)
  }

  /**
   * Admits and evaluates a checked call. A call without a deadline gets the server's
   * (--default-deadline): when it passes, the call is aborted with a DeadlineExceeded reason, so it
   * leaves the queue, or its function is killed; the call fails DEADLINE_EXCEEDED saying so.
   */
  private run(
    request: {image: string; resourceList: Buffer; trace: EvaluationRequest['trace']; signal: AbortSignal},
    call: grpc.ServerUnaryCall<EvaluateFunctionRequest, EvaluateFunctionResponse>,
    abort: AbortController,
    finish: (err: grpc.ServerErrorResponse | null, response?: EvaluateFunctionResponse, evaluator?: string, trailers?: grpc.Metadata) => void,
  ): void {
    const {image, resourceList} = request
    const callerDeadline = toEpochMs(call.getDeadline())
    const limitMs = callerDeadline === undefined ? (this.options.defaultDeadlineMs ?? 0) : 0
    const deadline = limitMs > 0 ? Date.now() + limitMs : callerDeadline
    const limitTimer = limitMs > 0 ? setTimeout(() => abort.abort(DEFAULT_DEADLINE_PASSED), limitMs).unref() : undefined
    // The budget (budget.ts): run now, wait in the queue (in turn with other clients), or RESOURCE_EXHAUSTED.
    let release: (() => void) | undefined
    this.budget
      .admit(resourceList.length, image, abort.signal, {...peerKey(call.getPeer()), handover: this.budget.claimReception(receptionOf(call.metadata))})
      .then((r) => {
        release = r
        // the room the reply needs around the output, so that it is not copied once more (reply.ts)
        return this.options.evaluator.evaluate({...request, deadline, outputHeadroom: REPLY_HEADROOM})
      })
      .then((res) => {
        release?.()
        clearTimeout(limitTimer)
        // only the real framing counts; a log that does not fit is cut at its start, saying so (reply.ts)
        const log = fitLog(this.options.maxMessageSize, image, res)
        const trailers = res.errorResults?.length ? resultsMetadata(res.errorResults, res.evaluator) : evaluatorMetadata(res.evaluator)
        finish(null, {resourceList: res.resourceList, log}, res.cached ? 'cache' : res.evaluator, trailers)
      })
      .catch((err: unknown) => {
        release?.()
        clearTimeout(limitTimer)
        // Past the server's deadline the function was killed (by the deadline given to it, or by
        // the abort): either way the call failed on the runner's --default-deadline.
        const past = limitMs > 0 && (abort.signal.reason === DEFAULT_DEADLINE_PASSED || (err instanceof FnrError && err.kind === 'DeadlineExceeded'))
        const e = past ? this.pastDefaultDeadline(image, limitMs) : toFnrError(err)
        if (e.kind === 'Internal' && !(err instanceof FnrError)) this.logger.error('unexpected error while evaluating', {image, error: String(err)})
        finish(statusError(e), undefined, e.details.runtime)
      })
  }

  /** The error of a call without a deadline that ran past --default-deadline (counted: fnr_hung_calls_killed_total). */
  private pastDefaultDeadline(image: string, limitMs: number): FnrError {
    this.telemetry.metrics.hungCallKilled()
    this.logger.warn('call without a deadline ran past --default-deadline: its function was killed', {image, defaultDeadlineMs: limitMs})
    return new FnrError('DeadlineExceeded', `the call came without a deadline and did not finish within the runner's --default-deadline (${limitMs / 1000}s): its function was killed`)
  }
}

function evaluatorMetadata(evaluator: string): grpc.Metadata {
  const md = new grpc.Metadata()
  md.set(EVALUATOR_TRAILER, evaluator)
  return md
}

function statusError(err: FnrError): grpc.ServerErrorResponse {
  const failure = err.details.failure as FunctionFailure | undefined
  const message = capStatusMessage(err.message)
  const e = new Error(message) as grpc.ServerErrorResponse
  e.code = err.grpcCode
  e.details = message
  if (failure) e.metadata = failureMetadata(failure)
  return e
}

/** Cuts a status message down to MAX_STATUS_MESSAGE_BYTES, saying how much was left out. */
export function capStatusMessage(message: string): string {
  const total = Buffer.byteLength(message)
  if (total <= MAX_STATUS_MESSAGE_BYTES) return message
  const room = MAX_STATUS_MESSAGE_BYTES - 96
  let head = message.slice(0, room)
  while (Buffer.byteLength(head) > room) head = head.slice(0, Math.floor(head.length * 0.9))
  // Do not end on half of a surrogate pair.
  if (/[\ud800-\udbff]$/.test(head)) head = head.slice(0, -1)
  return `${head}… (${total - Buffer.byteLength(head)} more bytes left out)`
}

/** The useful part of a grpc-js bind error ("… errors: [listen EADDRINUSE: address already in use …]"). */
/** False when this machine cannot listen on IPv6 (EAFNOSUPPORT or EADDRNOTAVAIL for "::"). */
async function ipv6CanListen(): Promise<boolean> {
  const {createServer} = await import('node:net')
  return new Promise((resolve) => {
    const probe = createServer()
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code !== 'EAFNOSUPPORT' && err.code !== 'EADDRNOTAVAIL'))
    probe.listen({host: '::', port: 0, ipv6Only: true}, () => probe.close(() => resolve(true)))
  })
}

function bindFailure(message: string): string {
  const inner = /errors: \[(.*)\]\s*$/s.exec(message)?.[1]
  if (!inner) return message
  return /EADDRINUSE/.test(inner) ? `the address is already in use (${inner.replace(/^listen /, '')})` : inner.replace(/^listen /, '')
}

function stripUndefined<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>
}

function toEpochMs(deadline: grpc.Deadline): number | undefined {
  const ms = deadline instanceof Date ? deadline.getTime() : deadline
  return Number.isFinite(ms) ? ms : undefined
}
