/**
 * A client for evaluator.FunctionEvaluator (fnr serve, fnr wrapper-server, or Porch's own
 * servers). One channel per address, reused across calls.
 */
import {setTimeout as delay} from 'node:timers/promises'

import * as grpc from '@grpc/grpc-js'

import {FnrError, kindForGrpcCode} from '../errors.js'
import {receiveWindowFor} from './flow-control.js'
import {REFUSED_HELD_BYTES, REFUSED_TRAILER, readFailure} from './metadata.js'
import {evaluatorClientConstructor, type EvaluateFunctionRequest, type EvaluateFunctionResponse} from './proto.js'

export interface EvaluatorClientOptions {
  maxMessageSize?: number
  credentials?: grpc.ChannelCredentials
  channelOptions?: grpc.ChannelOptions
}

export interface CallOptions {
  /** Absolute deadline (ms since the epoch or a Date). */
  deadline?: number | Date
  signal?: AbortSignal
  /** W3C trace context sent as the traceparent / tracestate metadata (lib/telemetry/trace.ts). */
  trace?: {traceparent: string; tracestate?: string}
}

export interface EvaluateResult extends EvaluateFunctionResponse {
  trailers: grpc.Metadata
}

type RawClient = grpc.Client & {
  EvaluateFunction(
    req: EvaluateFunctionRequest,
    md: grpc.Metadata,
    opts: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, res?: EvaluateFunctionResponse) => void,
  ): grpc.ClientUnaryCall
}

export const DEFAULT_MAX_MESSAGE_SIZE = 6 * 1024 * 1024

function traceMetadata(trace: CallOptions['trace']): grpc.Metadata {
  const md = new grpc.Metadata()
  if (trace) {
    md.set('traceparent', trace.traceparent)
    if (trace.tracestate) md.set('tracestate', trace.tracestate)
  }
  return md
}

export class EvaluatorClient {
  private readonly client: RawClient

  constructor(
    readonly address: string,
    options: EvaluatorClientOptions = {},
  ) {
    const max = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE
    const Ctor = evaluatorClientConstructor()
    this.client = new Ctor(address, options.credentials ?? grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': max,
      'grpc.max_send_message_length': max,
      // An HTTP/2 receive window as large as the largest response (grpc-js uses it for each stream
      // and the connection), instead of the 64 KiB default: a large response arrives without a
      // WINDOW_UPDATE round trip every 64 KiB. Not 1 MiB, like the servers' connection window
      // (flow-control.ts): with 1 MiB here, the 2-minute soak (long-run.ts) had 32 calls whose large
      // responses (a function flooding stderr) waited out their 60 s deadline. The servers' 1 MiB
      // connection window is what keeps two Node peers from blocking each other.
      'grpc-node.flow_control_window': receiveWindowFor(max),
      // Channelz keeps per-call counters nothing here reads: off, the client spends ~10% less
      // CPU per small call (the pod path makes one such call per request).
      'grpc.enable_channelz': 0,
      ...options.channelOptions,
    }) as unknown as RawClient
  }

  /**
   * Calls EvaluateFunction; rejects with the grpc ServiceError (code, details, metadata). A call
   * the server refused before running it (isRefusal) is sent again within its deadline
   * (refusedRetryDelay): gRPC's transparent retry, which grpc-js does at most once and only for
   * messages under its 256 KiB retry buffer. A client that sends its first calls before the
   * server's SETTINGS arrive (grpc-js does; grpc-go waits for them) gets those over the server's
   * stream limit refused with REFUSED_STREAM; under load that was half of a burst of 4 MB calls.
   */
  async evaluateRaw(image: string, resourceList: Buffer, options: CallOptions = {}): Promise<EvaluateResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.callOnce(image, resourceList, options)
      } catch (err) {
        const pause = refusedRetryDelay(err as grpc.ServiceError, attempt, options)
        if (pause === undefined) throw err
        // Aborted meanwhile: the next attempt is cancelled at once and rejects CANCELLED.
        await delay(pause, undefined, {signal: options.signal}).catch(() => undefined)
      }
    }
  }

  private callOnce(image: string, resourceList: Buffer, options: CallOptions): Promise<EvaluateResult> {
    return new Promise((resolve, reject) => {
      // grpc-js calls back before it emits 'status' (which carries the trailers on success).
      let response: EvaluateFunctionResponse | undefined
      let trailers: grpc.Metadata | undefined
      const settle = (): void => {
        if (response && trailers) resolve({resourceList: response.resourceList, log: response.log, trailers})
      }
      const callOptions: grpc.CallOptions = {}
      if (options.deadline !== undefined) callOptions.deadline = options.deadline
      const call = this.client.EvaluateFunction({image, resourceList}, traceMetadata(options.trace), callOptions, (err, res) => {
        options.signal?.removeEventListener('abort', onAbort)
        if (err) {
          reject(err)
          return
        }
        response = res!
        settle()
      })
      call.on('status', (status: grpc.StatusObject) => {
        trailers = status.metadata
        settle()
      })
      const onAbort = (): void => call.cancel()
      if (options.signal?.aborted) call.cancel()
      else options.signal?.addEventListener('abort', onAbort, {once: true})
    })
  }

  /** Like evaluateRaw, but failures are FnrErrors (kind from the status code, failure details kept). */
  async evaluate(image: string, resourceList: Buffer, options: CallOptions = {}): Promise<EvaluateResult> {
    try {
      return await this.evaluateRaw(image, resourceList, options)
    } catch (err) {
      throw fnrErrorFromStatus(err as grpc.ServiceError)
    }
  }

  /** Resolves once the channel is connected, or rejects at the deadline. */
  waitForReady(deadline: number | Date): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.waitForReady(deadline, (err) => (err ? reject(new FnrError('Unavailable', `${this.address} is not reachable: ${err.message}`, {cause: err})) : resolve()))
    })
  }

  close(): void {
    this.client.close()
  }
}

export function fnrErrorFromStatus(err: grpc.ServiceError): FnrError {
  const failure = readFailure(err.metadata)
  // INTERNAL is a function's failure, unless grpc-js made it up for a broken HTTP/2 stream or
  // session (e.g. the server's GOAWAY(INTERNAL_ERROR) once its peer reset more than nghttp2's
  // rapid-reset budget of streams): the call never ran to its end, so it is Unavailable and the
  // caller may retry it. test/reliability/rapid-reset.test.ts.
  const transport = err.code === grpc.status.INTERNAL && !failure && isTransportFailure(err.details)
  const kind = transport ? 'Unavailable' : err.code === grpc.status.INTERNAL ? 'FunctionFailed' : kindForGrpcCode(err.code)
  const refused = err.code === grpc.status.UNAVAILABLE && isRefusedStream(err.details)
  return new FnrError(kind, err.details || err.message, {cause: err, details: {grpcCode: err.code, ...(failure ? {failure} : {}), ...(refused ? {refusedStream: true} : {})}})
}

/**
 * grpc-js's UNAVAILABLE for a stream the server refused before running it: REFUSED_STREAM ("Stream
 * refused by server" when the reset arrives first), or, when the client's write of the message
 * fails first (Node 26), "Write error: …" with REFUSED_STREAM or ENHANCE_YOUR_CALM, which is how a
 * Node server refuses a stream over its stream count (fnr's own budget answers with a status:
 * hygiene.ts). grpc-js keeps the reset code to itself (only its transparent retry of small messages
 * sees it), so its text is the one signal; it is read here, beside isTransportFailure, and travels
 * on as the typed details.refusedStream.
 */
export function isRefusedStream(details: string | undefined): boolean {
  return /^Stream refused by server|^Write error: .*NGHTTP2_(REFUSED_STREAM|ENHANCE_YOUR_CALM)/.test(details ?? '')
}

/**
 * How many times a refused call is sent again (evaluateRaw) when it has no deadline; the pauses
 * grow from 20 ms to 640 ms. With a deadline, a call refused over the runner's held request bytes
 * is sent again for as long as the deadline allows (below).
 */
export const REFUSED_RETRIES = 6
/** The longest pause between two attempts of a call refused over the runner's held request bytes. */
export const HELD_BYTES_MAX_PAUSE_MS = 1000

/**
 * A status for a call the server refused before its application saw it, so that sending it again
 * cannot run it twice: REFUSED_STREAM and a Node server's ENHANCE_YOUR_CALM refusal of a stream
 * (isRefusedStream), an ENHANCE_YOUR_CALM reset that reached grpc-js before its write failed
 * (its RESOURCE_EXHAUSTED "Bandwidth exhausted…"), or an fnr runner's refusal of a request over
 * its budget of held request bytes (RESOURCE_EXHAUSTED with the fnr-refused trailer: the request
 * was dropped unread). Other RESOURCE_EXHAUSTED statuses (a full queue) are not retried.
 */
export function isRefusal(err: Pick<grpc.ServiceError, 'code' | 'details'> & {metadata?: grpc.Metadata}): boolean {
  if (err.code === grpc.status.UNAVAILABLE) return isRefusedStream(err.details)
  return err.code === grpc.status.RESOURCE_EXHAUSTED && (err.details === 'Bandwidth exhausted or memory limit exceeded' || refusedOverHeldBytes(err))
}

/** The runner refused the request over its held request bytes (its fnr-refused trailer says so). */
export function refusedOverHeldBytes(err: {metadata?: grpc.Metadata}): boolean {
  return err.metadata?.get(REFUSED_TRAILER).includes(REFUSED_HELD_BYTES) ?? false
}

/**
 * The pause before sending a refused call again, or undefined: not a refusal, no attempt left, no
 * time left. A refused stream is retried REFUSED_RETRIES times (20 ms doubling). A request refused
 * over the runner's held bytes waits for other calls to finish: the pauses double up to
 * HELD_BYTES_MAX_PAUSE_MS, spread by a random half so that the calls refused together do not come
 * back together, and a call with a deadline is sent again until it would pass it.
 */
export function refusedRetryDelay(
  err: Pick<grpc.ServiceError, 'code' | 'details'> & {metadata?: grpc.Metadata},
  attempt: number,
  options: Pick<CallOptions, 'deadline' | 'signal'> = {},
  {now = Date.now(), random = Math.random}: {now?: number; random?: () => number} = {},
): number | undefined {
  if (options.signal?.aborted || !isRefusal(err)) return undefined
  const deadline = options.deadline === undefined ? Infinity : new Date(options.deadline).getTime()
  const heldBytes = refusedOverHeldBytes(err)
  if (attempt >= REFUSED_RETRIES && !(heldBytes && deadline !== Infinity)) return undefined
  const pause = heldBytes ? Math.round(Math.min(20 * 2 ** attempt, HELD_BYTES_MAX_PAUSE_MS) * (0.5 + random() / 2)) : 20 * 2 ** attempt
  return now + pause < deadline ? pause : undefined
}

/** grpc-js's own INTERNAL statuses for a stream or session that broke underneath the call. */
export function isTransportFailure(details: string | undefined): boolean {
  return /^Received RST_STREAM with code \d+|^Stream refused by server|^Connection dropped/.test(details ?? '')
}
