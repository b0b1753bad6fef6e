/**
 * The evaluator.FunctionEvaluator gRPC server used by `fnr serve` (port 9445) and
 * `fnr wrapper-server` (port 9446), with grpc.health.v1 and graceful draining.
 *
 * Request handling: the image and ResourceList are checked for presence, the caller's deadline
 * and cancellation are handed to the evaluator, the ResourceList bytes pass through untouched,
 * and errors become gRPC statuses by their kind (errors.ts). A failing function adds the
 * fnr-failure-bin trailer (metadata.ts).
 */
import * as grpc from '@grpc/grpc-js'
import {HealthImplementation, type ServingStatus} from 'grpc-health-check'

import {FnrError, GrpcCode, toFnrError} from '../errors.js'
import type {Evaluator} from '../evaluators/evaluator.js'
import {silentLogger, type Logger} from '../log.js'
import type {FunctionFailure} from '../process/failure.js'
import {EVALUATOR_TRAILER, failureMetadata, resultsMetadata} from './metadata.js'
import {EVALUATOR_SERVICE, evaluatorServiceDefinition, type EvaluateFunctionRequest, type EvaluateFunctionResponse} from './proto.js'

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
}

/** Bytes reserved in a response for protobuf framing. */
const RESPONSE_FRAMING = 64

export function defaultBindHost(): string {
  return process.env.FNR_BIND_ADDRESS || '0.0.0.0'
}

function formatHostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`
}

export class EvaluatorServer {
  readonly health = new HealthImplementation({'': 'NOT_SERVING', [EVALUATOR_SERVICE]: 'NOT_SERVING'})
  private readonly server: grpc.Server
  private readonly logger: Logger
  private inFlight = 0
  private draining = false
  private boundPort = 0
  private idleWaiters: Array<() => void> = []

  constructor(private readonly options: EvaluatorServerOptions) {
    this.logger = options.logger ?? silentLogger
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': options.maxMessageSize,
      'grpc.max_send_message_length': options.maxMessageSize,
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
    })
    this.server.addService(evaluatorServiceDefinition(), {EvaluateFunction: this.handle.bind(this)})
    this.health.addToServer(this.server)
  }

  get port(): number {
    return this.boundPort
  }

  get activeCalls(): number {
    return this.inFlight
  }

  /** Binds and starts serving. Health stays NOT_SERVING until setServing(true). */
  async start(): Promise<number> {
    const host = this.options.host ?? defaultBindHost()
    const address = formatHostPort(host, this.options.port)
    this.boundPort = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(address, this.options.credentials ?? grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) reject(new FnrError('Unavailable', `cannot listen on ${address}: ${err.message}`, {cause: err}))
        else resolve(port)
      })
    })
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
    this.server.forceShutdown()
    return {forced: !finished}
  }

  /** Immediate stop (tests, second signal). */
  forceShutdown(): void {
    this.draining = true
    this.server.forceShutdown()
  }

  private handle(
    call: grpc.ServerUnaryCall<EvaluateFunctionRequest, EvaluateFunctionResponse>,
    callback: grpc.sendUnaryData<EvaluateFunctionResponse>,
  ): void {
    const started = performance.now()
    const {image, resourceList} = call.request
    this.inFlight++
    const abort = new AbortController()
    const onCancel = (): void => abort.abort()
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
      this.logger.request('EvaluateFunction', {
        image,
        bytesIn: resourceList?.length ?? 0,
        bytesOut: response?.resourceList.length,
        code,
        evaluator,
        ms: Math.round((performance.now() - started) * 10) / 10,
        ...(err ? {error: err.details} : {}),
      })
      if (err) callback(err)
      else callback(null, response, trailers)
    }

    if (!image || image.trim() === '') {
      finish(statusError(new FnrError('InvalidArgument', 'image is empty: set the image of the function to evaluate')))
      return
    }
    if (!resourceList || resourceList.length === 0) {
      finish(statusError(new FnrError('InvalidArgument', `resource_list is empty: send a serialized ResourceList for ${JSON.stringify(image)}`)))
      return
    }
    if (this.logger.enabled(5)) this.logger.trace('request ResourceList', {image, resourceList: resourceList.toString('utf8')})

    const deadline = toEpochMs(call.getDeadline())
    this.options.evaluator
      .evaluate({image, resourceList, deadline, signal: abort.signal})
      .then((res) => {
        const budget = this.options.maxMessageSize - RESPONSE_FRAMING - res.resourceList.length
        if (budget < 0) {
          throw new FnrError('ResourceExhausted', `function ${JSON.stringify(image)} returned ${res.resourceList.length} bytes, more than the maximum message size ${this.options.maxMessageSize}`)
        }
        const log = res.log.length > budget ? res.log.subarray(res.log.length - budget) : res.log
        const trailers = res.errorResults?.length ? resultsMetadata(res.errorResults, res.evaluator) : evaluatorMetadata(res.evaluator)
        finish(null, {resourceList: res.resourceList, log}, res.evaluator, trailers)
      })
      .catch((err: unknown) => {
        const e = toFnrError(err)
        if (e.kind === 'Internal' && !(err instanceof FnrError)) this.logger.error('unexpected error while evaluating', {image, error: String(err)})
        finish(statusError(e))
      })
  }
}

function evaluatorMetadata(evaluator: string): grpc.Metadata {
  const md = new grpc.Metadata()
  md.set(EVALUATOR_TRAILER, evaluator)
  return md
}

function statusError(err: FnrError): grpc.ServerErrorResponse {
  const failure = err.details.failure as FunctionFailure | undefined
  const e = new Error(err.message) as grpc.ServerErrorResponse
  e.code = err.grpcCode
  e.details = err.message
  if (failure) e.metadata = failureMetadata(failure)
  return e
}

function toEpochMs(deadline: grpc.Deadline): number | undefined {
  const ms = deadline instanceof Date ? deadline.getTime() : deadline
  return Number.isFinite(ms) ? ms : undefined
}
