/**
 * Typed errors. Every failure in fnr is an FnrError with a kind; the kind decides the gRPC status
 * code a server returns and the exit code a CLI command ends with. Messages are one line, meant
 * for humans; extra structured data travels in `details`.
 */
import type {FunctionFailure} from './function-result.js'

export type ErrorKind =
  | 'InvalidArgument'
  | 'NotFound'
  | 'DeadlineExceeded'
  | 'Cancelled'
  | 'ResourceExhausted'
  | 'Unavailable'
  | 'FailedPrecondition'
  | 'Unauthenticated'
  | 'PermissionDenied'
  | 'Internal'
  | 'FunctionFailed'
  | 'Config'
  | 'Usage'
  /**
   * A package kpt refuses to render (a missing or invalid Kptfile, src/lib/kptfile.ts): the
   * message is the text kpt prints, several lines, and the CLI prints it as kpt does.
   */
  | 'InvalidPackage'

/** gRPC status code numbers (the wire values; see grpc/status.proto). */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const

const GRPC_BY_KIND: Record<ErrorKind, number> = {
  InvalidArgument: GrpcCode.INVALID_ARGUMENT,
  NotFound: GrpcCode.NOT_FOUND,
  DeadlineExceeded: GrpcCode.DEADLINE_EXCEEDED,
  Cancelled: GrpcCode.CANCELLED,
  ResourceExhausted: GrpcCode.RESOURCE_EXHAUSTED,
  Unavailable: GrpcCode.UNAVAILABLE,
  FailedPrecondition: GrpcCode.FAILED_PRECONDITION,
  Unauthenticated: GrpcCode.UNAUTHENTICATED,
  PermissionDenied: GrpcCode.PERMISSION_DENIED,
  Internal: GrpcCode.INTERNAL,
  // A function that ran and failed is reported as Internal, as Porch's runner does.
  FunctionFailed: GrpcCode.INTERNAL,
  Config: GrpcCode.FAILED_PRECONDITION,
  Usage: GrpcCode.INVALID_ARGUMENT,
  InvalidPackage: GrpcCode.INVALID_ARGUMENT,
}

/**
 * CLI exit codes. 1 is "the function failed", 2 is "you called the command wrong" (oclif's own
 * flag errors use 2 as well); the rest tell scripts what kind of trouble it was.
 */
export const EXIT_CODE_BY_KIND: Record<ErrorKind, number> = {
  FunctionFailed: 1,
  // kpt's exit code for a Kptfile it refuses.
  InvalidPackage: 1,
  Internal: 1,
  Usage: 2,
  InvalidArgument: 2,
  Config: 3,
  FailedPrecondition: 3,
  NotFound: 4,
  Unauthenticated: 5,
  PermissionDenied: 5,
  DeadlineExceeded: 6,
  Cancelled: 6,
  ResourceExhausted: 7,
  Unavailable: 8,
}

/**
 * What an FnrError carries besides its message. The keys code reads to decide what to do are
 * declared here with their types (a reader needs no cast, a writer cannot put the wrong type);
 * other keys are context for logs.
 */
export interface FnrErrorDetails {
  /**
   * A function that exited non-zero: exit code, results and stderr tail (function-result.ts, built by process/failure.ts);
   * partial when it was decoded from another runner's fnr-failure-bin trailer.
   */
  failure?: Partial<FunctionFailure>
  /** The runtime that produced the error (`exec`, `pod`, …): the evaluation metric's label. */
  runtime?: string
  /** HTTP status of a Kubernetes or registry answer. */
  status?: number
  /** Kubernetes Status reason, or the budget limit that refused a call. */
  reason?: string
  /** A pod name was taken (409 on create): pick another name and retry. */
  nameTaken?: boolean
  /**
   * The server refused the call's HTTP/2 stream (REFUSED_STREAM: it was over the stream limit the
   * server had just lowered): the call never ran and the server is alive (grpc/client.ts).
   */
  refusedStream?: boolean
  /** The caller cancelled or its deadline passed (not the pod's fault). */
  caller?: boolean
  /** A render stopped at a failing function (its results are written, like kpt). */
  renderFailed?: boolean
  /** The function process could not be started (spawn failed). */
  startFailed?: boolean
  /** A function binary that is not there, not a regular file or not executable (exec-config.ts resolveBinary). */
  missingBinary?: boolean
  /** No container runtime can run an image function here, or FNR_CONTAINER_RUNTIME is none (container/runtime-select.ts). */
  noRuntime?: boolean
  /** A failed image pull, its message already naming the image (container/pull.ts). */
  pull?: boolean
  /** A function pod's container terminated or is crash-looping: its log tail says why (pods/cluster/manager.ts). */
  containerExited?: boolean
  /** The FunctionConfig object (namespace/name) an error's message already names (config/function-config-crd.ts). */
  functionConfig?: string
  /**
   * A file or object that failed its schema (src/lib/schema/): every field error, one line each in kubectl's form
   * (`spec.image: Required value`); the message lists them too, joined by "; ".
   */
  fieldErrors?: string[]
  /**
   * What a command had done when it failed (pods gc's summary with a failed deletion, fnr eval's
   * FunctionResultList of a failed function): a command run with --json prints its fields with
   * the error beside them (src/cli/render-error.ts).
   */
  report?: object
  /**
   * The console already shows this failure in full (a function's [FAIL] block with its exit code):
   * kpt's CLI adds no line of its own after it, and neither does fnr's kpt form (src/cli/render-error.ts).
   */
  consoleShown?: boolean
  /**
   * An error in the command line itself (an unknown flag, a bad flag value, an extra argument), not
   * in the work it asked for: kpt prints these in its CLI library's form (`error: …`).
   */
  commandLine?: boolean
  /** The unknown flag of a command line, as given (`--bogus`): kpt words this `unknown flag: --bogus`. */
  unknownFlag?: string
  /** A flag given without its value, as typed (`-o`, `--output`). */
  missingValue?: string
  /** What the function wrote, where the error keeps it. */
  stdout?: Buffer
  stderr?: Buffer
  [key: string]: unknown
}

export interface FnrErrorOptions {
  cause?: unknown
  details?: FnrErrorDetails
}

/** Marks FnrErrors across copies of this module (see FnrError[Symbol.hasInstance]). */
const FNR_ERROR_BRAND = Symbol.for('fnr.FnrError')

export class FnrError extends Error {
  readonly kind: ErrorKind
  readonly details: FnrErrorDetails
  readonly [FNR_ERROR_BRAND] = true

  /**
   * `instanceof FnrError` holds for an FnrError made by any copy of this module: a process can
   * load it twice (under tsx, a CommonJS copy for static imports and an ESM copy for dynamic
   * ones, which the lazily loaded pod runtime uses), and errors must keep their kind across.
   */
  static [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[FNR_ERROR_BRAND] === true
  }

  constructor(kind: ErrorKind, message: string, options: FnrErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.name = 'FnrError'
    this.kind = kind
    this.details = options.details ?? {}
  }

  get grpcCode(): number {
    return GRPC_BY_KIND[this.kind]
  }

  get exitCode(): number {
    return EXIT_CODE_BY_KIND[this.kind]
  }
}

/**
 * Runs `make` with stack traces off: for errors made in bulk on hot paths whose stack says
 * nothing (a call cancelled while queued, a process group already gone), where capturing one
 * is most of the cost (thousands of streams reset at once; docs/limits.md).
 */
export function withoutStack<T>(make: () => T): T {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return make()
  } finally {
    Error.stackTraceLimit = limit
  }
}

export function isFnrError(err: unknown): err is FnrError {
  return err instanceof FnrError
}

const KIND_BY_GRPC = new Map<number, ErrorKind>([
  [GrpcCode.INVALID_ARGUMENT, 'InvalidArgument'],
  [GrpcCode.NOT_FOUND, 'NotFound'],
  [GrpcCode.DEADLINE_EXCEEDED, 'DeadlineExceeded'],
  [GrpcCode.CANCELLED, 'Cancelled'],
  [GrpcCode.RESOURCE_EXHAUSTED, 'ResourceExhausted'],
  [GrpcCode.UNAVAILABLE, 'Unavailable'],
  [GrpcCode.FAILED_PRECONDITION, 'FailedPrecondition'],
  [GrpcCode.UNAUTHENTICATED, 'Unauthenticated'],
  [GrpcCode.PERMISSION_DENIED, 'PermissionDenied'],
])

/** The error kind that corresponds to a gRPC status code (Internal for anything unlisted). */
export function kindForGrpcCode(code: number): ErrorKind {
  return KIND_BY_GRPC.get(code) ?? 'Internal'
}

/** Turns anything thrown into an FnrError, keeping the original as the cause. */
export function toFnrError(err: unknown, fallbackKind: ErrorKind = 'Internal'): FnrError {
  if (err instanceof FnrError) return err
  const message = err instanceof Error ? err.message : String(err)
  return new FnrError(fallbackKind, firstLine(message), {cause: err})
}

/** The first line of a message, trimmed and capped, for one-line human output. */
export function firstLine(text: string, max = 500): string {
  const line = text.split('\n', 1)[0]?.trim() ?? ''
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

/**
 * How a failure reads on the console: one "fnr: …" line (src/cli/render-error.ts, and fnr test's
 * case console); an InvalidPackage error is kpt's own text, ended as kpt's CLI ends it (" \n").
 */
export function errorLine(err: FnrError): string {
  if (err.kind === 'InvalidPackage') return `${err.message} \n`
  return `fnr: ${firstLine(err.message, 2000)}${err.kind === 'Usage' ? ' (see --help)' : ''}\n`
}
