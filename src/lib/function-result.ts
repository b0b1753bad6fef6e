/**
 * What a KRM function reports besides its output: its structured results, and when it failed, the
 * failure fnr passes on (exit code or signal, error results, stderr tail). Types only, at the
 * bottom of src/lib: errors.ts carries a failure in FnrErrorDetails, process/results.ts reads the
 * results and process/failure.ts builds the failure.
 */

export interface ResultResourceRef {
  apiVersion?: string
  kind?: string
  name?: string
  namespace?: string
}

/** One structured result, as the KRM functions spec defines it (legacy shapes normalised). */
export interface FunctionResult {
  message: string
  /** As the function wrote it (`error`, `warning`, `info`, or anything else); absent means info. */
  severity?: string
  resourceRef?: ResultResourceRef
  field?: {path?: string; currentValue?: unknown; proposedValue?: unknown}
  file?: {path?: string; index?: number}
  tags?: Record<string, string>
}

/** Structured form of a failed function call; sent to gRPC callers in the fnr-failure-bin trailer. */
export interface FunctionFailure {
  exitCode: number | null
  signal: string | null
  results: FunctionResult[]
  stderrTail: string
  /** True when results were left out (by the reading limits, or to keep the structure small). */
  truncated: boolean
  /** What reading the results left out and why (process/results.ts RESULT_LIMITS), if anything. */
  resultsCut?: string[]
}
