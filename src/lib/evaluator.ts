/**
 * The contract shared by every evaluator (exec, pod, multi): take an image and ResourceList bytes,
 * return the function's stdout and stderr bytes, or throw an FnrError whose kind says what
 * happened (NotFound means "this evaluator does not know the image" and lets multi fall through).
 */
import type {FunctionResult} from './function-result.js'
import type {Headroom} from './headroom.js'

export interface EvaluationRequest {
  image: string
  /** ResourceList bytes, passed to the function untouched. */
  resourceList: Buffer
  /** Absolute deadline (ms since the epoch); undefined means none. */
  deadline?: number
  /** Aborted when the caller goes away. */
  signal?: AbortSignal
  /** W3C trace context for the next hop (lib/telemetry/trace.ts). */
  trace?: {traceparent: string; tracestate?: string}
  /**
   * Room the caller would like around the output, to wrap it without copying it (headroom.ts; the
   * gRPC server asks for its reply's, grpc/reply.ts). An evaluator that runs the function passes it
   * to the process runner; any other may ignore it.
   */
  outputHeadroom?: Headroom
}

/**
 * What served a call, declared by the evaluator that answered: a pod (by name, with the image
 * digest it was made for when known). The response cache stores a pod's answer only when that
 * digest is the one of its key.
 */
export interface ServedIdentity {
  runtime: 'pod'
  pod: string
  digest?: string
}

export interface EvaluationResponse {
  /** The function's stdout, byte for byte. */
  resourceList: Buffer
  /** The function's stderr (possibly only its tail). */
  log: Buffer
  /** Bytes of stderr dropped in front of `log` (the server says so in the log it sends). */
  logDropped?: number
  /** Which evaluator produced it (exec, pod). */
  evaluator: string
  /** Error-severity results found in a successful output, when the evaluator looked. */
  errorResults?: FunctionResult[]
  /** What served the call, when the evaluator says (the pod runtime does). */
  served?: ServedIdentity
  /** Set when the response came from the response cache (lib/cache/response-cache.ts). */
  cached?: true
}

/**
 * Which function would run for an image, declared by the evaluator that would run it (the
 * response cache's key): for exec the mapped binary, by path and a stat of it (a replaced or
 * rewritten binary is a new identity); for a pod the digest the tag resolves to, never the tag.
 */
export type ImageIdentity = {runtime: 'exec'; binary: string; stat: string} | {runtime: 'pod'; digest: string}

/** The identity as one stable string (the response cache's key prefix). */
export function identityKey(identity: ImageIdentity): string {
  return identity.runtime === 'exec' ? `exec:${identity.binary}:${identity.stat}` : `pod:${identity.digest}`
}

export interface Evaluator {
  readonly name: string
  evaluate(request: EvaluationRequest): Promise<EvaluationResponse>
  /**
   * Whether this evaluator knows an image, told at once without a call (exec: the image is in its
   * config). Absent: it may know any image. The multi evaluator passes over one that knows not
   * without the NotFound error being built and thrown, which every pod-path call would pay for.
   */
  knows?(image: string): boolean
  /** What would serve a call on `image` (undefined: not known, never cached); may throw (registry down). */
  identify?(image: string, signal?: AbortSignal): Promise<ImageIdentity | undefined>
  /** Stops background work and releases resources. */
  close(): Promise<void>
}
