/**
 * What a caller learns when a function exits non-zero: the exit code (or signal), the error
 * results the function wrote to stdout, and the tail of its stderr. Upstream drops all of this
 * except stderr; fnr puts it in the status message and in a structured form (FunctionFailure).
 */
import {FnrError} from '../errors.js'
import {errorResults, formatResult, readResults, type FunctionResult} from './results.js'
import type {FunctionProcessResult} from './run.js'

/** Structured form of a failed function call; sent to gRPC callers in the fnr-failure-bin trailer. */
export interface FunctionFailure {
  exitCode: number | null
  signal: string | null
  results: FunctionResult[]
  stderrTail: string
  /** True when results were left out to keep the structure small. */
  truncated: boolean
}

const MESSAGE_STDERR_TAIL = 1024
const MAX_MESSAGE_RESULTS = 10
/** One result in the message is cut to this many characters (the structured form keeps it whole). */
const MAX_MESSAGE_RESULT_LINE = 512

function tail(text: string, max: number): string {
  const trimmed = text.trimEnd()
  return trimmed.length > max ? `…${trimmed.slice(trimmed.length - max)}` : trimmed
}

function head(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text
}

/** Builds the FunctionFailed error for a process that exited non-zero or was killed by a signal. */
export async function functionFailedError(label: string, result: FunctionProcessResult): Promise<FnrError> {
  const results = await readResults(result.stdout)
  const stderrText = result.stderr.toString('utf8')
  const errors = errorResults(results)
  const how = result.exitCode === null ? `was killed by ${result.signal ?? 'a signal'}` : `exited with code ${result.exitCode}`
  const parts = [`function ${JSON.stringify(label)} ${how}`]
  if (errors.length > 0) {
    const shown = errors.slice(0, MAX_MESSAGE_RESULTS).map((r) => head(formatResult(r), MAX_MESSAGE_RESULT_LINE))
    if (errors.length > shown.length) shown.push(`… and ${errors.length - shown.length} more error result(s)`)
    parts.push(`error results:\n${shown.join('\n')}`)
  }
  if (stderrText.trim() !== '') parts.push(`stderr:\n${tail(stderrText, MESSAGE_STDERR_TAIL)}`)
  const failure: FunctionFailure = {
    exitCode: result.exitCode,
    signal: result.signal,
    results,
    stderrTail: tail(stderrText, 4096),
    truncated: false,
  }
  return new FnrError('FunctionFailed', parts.join('\n'), {details: {failure, stdout: result.stdout, stderr: result.stderr}})
}
