/**
 * The pod evaluator: runs a function in a pod of its own image (through the wrapper server on
 * port 9446), as Porch's pod runtime does, with the pod cache deciding which pod takes the call.
 *
 * - The caller's deadline and cancellation bound everything: waiting for a pod, connecting and
 *   the call itself.
 * - A call that fails with Unavailable (the pod went away or dropped the connection) evicts that
 *   pod and is retried on a fresh or other pod, `callRetries` times (default 1). Functions are
 *   pure transformations of their input, so a retry is safe. A stream the pod refused (HTTP/2
 *   REFUSED_STREAM: over the stream limit its wrapper had just lowered under load) is retried the
 *   same way but evicts nothing: the pod answered, it is alive and busy. Its budget refusals come
 *   as RESOURCE_EXHAUSTED statuses (grpc/hygiene.ts) and are not retried.
 * - It never answers NotFound: that code means "not an exec function" to the evaluator chain.
 *   An image the registry does not know, or a pod that cannot start, is FailedPrecondition with
 *   the image and the pod's last state in the message.
 */
import {FnrError, toFnrError} from '../errors.js'
import {readFailure} from '../grpc/metadata.js'
import {silentLogger, type Logger} from '../telemetry/log.js'
import type {Tracing} from '../telemetry/otel.js'
import type {Telemetry} from '../telemetry/telemetry.js'
import type {PodCache} from '../pods/runtime/cache.js'
import type {PodRuntime, PodRuntimeOptions} from '../pods/runtime/runtime.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator, ImageIdentity} from '../evaluator.js'

export interface PodEvaluatorOptions {
  cache: Pick<PodCache, 'acquire' | 'noteUnavailable' | 'describe'>
  /** Extra attempts after an Unavailable call (default 1). */
  callRetries?: number
  logger?: Logger
  /** The server's telemetry: with tracing, pod.acquire, pod.create and wrapper.call spans; default none. */
  telemetry?: Telemetry
  /** Resolves when the runtime is ready to report SERVING (warm-up finished). */
  ready?: Promise<unknown>
  /** Stops the runtime. */
  close?: () => Promise<void>
}

export class PodEvaluator implements Evaluator {
  readonly name = 'pod'
  readonly ready: Promise<void>
  private readonly logger: Logger
  private readonly retries: number
  private readonly tracing: Tracing | undefined

  constructor(private readonly options: PodEvaluatorOptions) {
    this.logger = options.logger ?? silentLogger
    this.tracing = options.telemetry?.tracing
    this.retries = Math.max(0, options.callRetries ?? 1)
    this.ready = (options.ready ?? Promise.resolve()).then(
      () => undefined,
      () => undefined,
    )
  }

  /**
   * The digest the image's tag resolves to (through the pod cache, which retires the image's pods
   * of another digest: PodCache.noteDigest); undefined when the registry gives none.
   */
  async identify(image: string, signal?: AbortSignal): Promise<ImageIdentity | undefined> {
    const {digest} = await this.options.cache.describe(image, {signal})
    return digest ? {runtime: 'pod', digest} : undefined
  }

  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    const {image, deadline, signal} = request
    const otel = this.tracing
    for (let attempt = 0; ; attempt++) {
      const lease = otel ? await this.tracedAcquire(otel, request, attempt) : await this.options.cache.acquire(image, {deadline, signal})
      const call = otel?.startSpan('wrapper.call', {parent: request.trace?.traceparent, kind: 'client', attributes: {'fn.image': image, 'fnr.pod.name': lease.slot.name, 'net.peer.name': lease.slot.address}})
      try {
        if (!lease.usable) throw new FnrError('Unavailable', `function pod ${lease.slot.name} was evicted (${lease.slot.goneReason ?? 'gone'})`)
        const trace = call ? {traceparent: call.context.traceparent, ...(request.trace?.tracestate ? {tracestate: request.trace.tracestate} : {})} : request.trace
        const res = await lease.client.evaluate(image, request.resourceList, {deadline, signal, trace})
        call?.end()
        const failure = readFailure(res.trailers)
        const response: EvaluationResponse = {
          resourceList: res.resourceList,
          log: res.log,
          evaluator: this.name,
          ...(failure?.results?.length ? {errorResults: failure.results} : {}),
          served: {runtime: 'pod', pod: lease.slot.name, ...(lease.slot.digest ? {digest: lease.slot.digest} : {})},
        }
        return response
      } catch (err) {
        const e = toFnrError(err)
        call?.end(`${e.kind}: ${e.message.slice(0, 500)}`)
        if (e.kind === 'Unavailable') {
          const refused = e.details.refusedStream === true
          if (!refused) this.options.cache.noteUnavailable(lease.slot, e.message)
          const timeLeft = deadline === undefined || deadline > Date.now()
          if (attempt < this.retries && timeLeft && !signal?.aborted) {
            this.logger.info(refused ? 'function pod refused the stream (busy); retrying' : 'function pod unavailable; retrying on another pod', {image, pod: lease.slot.name, error: e.message, attempt: attempt + 1})
            continue
          }
          const why = refused ? `refused the call (busy: over its stream limit; the pod stays): ${e.message}` : `is unavailable: ${e.message}`
          throw new FnrError('Unavailable', `function pod ${lease.slot.name} for image "${image}" ${why}`, {cause: e, details: e.details})
        }
        if (e.kind === 'NotFound') throw new FnrError('FailedPrecondition', e.message, {cause: e, details: e.details})
        throw e
      } finally {
        lease.release()
      }
    }
  }

  /** acquire() as an OpenTelemetry span, with a pod.create child when this call started the pod. */
  private async tracedAcquire(otel: Tracing, request: EvaluationRequest, attempt: number): Promise<Awaited<ReturnType<PodCache['acquire']>>> {
    const {image, deadline, signal} = request
    const started = Date.now()
    const span = otel.startSpan('pod.acquire', {parent: request.trace?.traceparent, attributes: {'fn.image': image, 'fnr.attempt': attempt}})
    try {
      const lease = await this.options.cache.acquire(image, {deadline, signal})
      const slot = lease.slot
      const startedHere = slot.since !== undefined && slot.since >= started
      span.setAttributes({'fnr.pod.name': slot.name, 'fnr.pod.started': startedHere, 'fnr.image.digest': slot.digest})
      if (startedHere) {
        const create = otel.startSpan('pod.create', {parent: span.context.traceparent, startTime: slot.since, attributes: {'fnr.pod.name': slot.name, 'fn.image': image, 'fnr.image.digest': slot.digest, ...Object.fromEntries(Object.entries(slot.timings ?? {}).map(([k, v]) => [`fnr.pod.${k}`, v]))}})
        create.end()
      }
      span.end()
      return lease
    } catch (err) {
      span.end((err as Error).message.slice(0, 500))
      throw err
    }
  }

  async close(): Promise<void> {
    await this.options.close?.()
  }
}

export interface PodEvaluatorRuntimeOptions extends PodRuntimeOptions {
  callRetries?: number
}

/** Starts the pod runtime (loading @kubernetes/client-node) and wraps it in an evaluator. */
export async function createPodEvaluator(options: PodEvaluatorRuntimeOptions): Promise<{evaluator: PodEvaluator; runtime: PodRuntime}> {
  const {startPodRuntime} = await import('../pods/runtime/runtime.js')
  const runtime = await startPodRuntime(options)
  const evaluator = new PodEvaluator({
    cache: runtime.cache,
    callRetries: options.callRetries,
    logger: options.logger,
    telemetry: options.telemetry,
    ready: runtime.warmedUp,
    close: () => runtime.close(),
  })
  return {evaluator, runtime}
}
