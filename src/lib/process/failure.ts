/**
 * What a caller learns when a function exits non-zero: the exit code (or signal), the error
 * results the function wrote to stdout, and the tail of its stderr. Upstream drops all of this
 * except stderr; fnr puts it in the status message and in a structured form (FunctionFailure).
 */
import {FnrError} from '../errors.js'
import type {FunctionFailure} from '../function-result.js'
import {errorResults, formatResult, readResultsReport} from './results.js'
import type {FunctionProcessResult} from './run.js'

export type {FunctionFailure} from '../function-result.js'

/**
 * Size of a failure's status message. Porch's client reads only the message, and Porch's
 * wrapper puts every result and all of stderr there (`failed to evaluate function … with
 * structured results: … and stderr: …`; docs/process.md, "What a failure says"). fnr fills the message
 * up to this size: the results (errors first), then as much of the stderr tail as is left, at
 * least MESSAGE_STDERR_MIN of it. The gRPC server caps status messages at 8 KiB
 * (grpc/server.ts MAX_STATUS_MESSAGE_BYTES: a larger trailer hangs grpc-js clients, whose header
 * list limit is 64 KiB after encoding), so this stays just under that.
 */
export const FAILURE_MESSAGE_BUDGET = 7 * 1024
const MESSAGE_STDERR_MIN = 2 * 1024
/** One result in the message is cut to this many characters (the structured form keeps it whole). */
const MAX_MESSAGE_RESULT_LINE = 1024
const MESSAGE_STDERR_TAIL = 1024

function tail(text: string, max: number): string {
  const trimmed = text.trimEnd()
  return trimmed.length > max ? `…${trimmed.slice(trimmed.length - max)}` : trimmed
}

function head(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text
}

/** Builds the FunctionFailed error for a process that exited non-zero or was killed by a signal. */
export async function functionFailedError(label: string, result: FunctionProcessResult): Promise<FnrError> {
  const {results, cuts} = await readResultsReport(result.stdout)
  const stderrText = result.stderr.toString('utf8').trimEnd()
  const how = result.exitCode === null ? `was killed by ${result.signal ?? 'a signal'}` : `exited with code ${result.exitCode}`
  const first = `function ${JSON.stringify(label)} ${how}`
  const cutLine = cuts.length > 0 ? `results left out: ${cuts.join('; ')}` : ''
  // what the stderr may take at least, so that many results cannot crowd it out
  const stderrReserve = stderrText.trim() === '' ? 0 : Math.min(stderrText.length, MESSAGE_STDERR_MIN) + 10
  let room = FAILURE_MESSAGE_BUDGET - first.length - cutLine.length - stderrReserve - 64
  const parts = [first]
  if (results.length > 0) {
    // errors first, then the other severities in their order (Porch shows them all)
    const ordered = [...errorResults(results), ...results.filter((r) => r.severity !== 'error')]
    const shown: string[] = []
    for (const r of ordered) {
      const line = head(formatResult(r), MAX_MESSAGE_RESULT_LINE)
      if (line.length + 1 > room) break
      shown.push(line)
      room -= line.length + 1
    }
    if (ordered.length > shown.length) shown.push(`… and ${ordered.length - shown.length} more result(s)`)
    parts.push(`results:\n${shown.join('\n')}`)
  }
  if (cutLine) parts.push(cutLine)
  if (stderrText.trim() !== '') {
    const used = parts.reduce((n, p) => n + p.length + 1, 0)
    parts.push(`stderr:\n${tail(stderrText, Math.max(MESSAGE_STDERR_TAIL, FAILURE_MESSAGE_BUDGET - used - 16))}`)
  }
  const failure: FunctionFailure = {
    exitCode: result.exitCode,
    signal: result.signal,
    results,
    stderrTail: tail(stderrText, 4096),
    truncated: cuts.length > 0,
    ...(cuts.length > 0 ? {resultsCut: cuts} : {}),
  }
  return new FnrError('FunctionFailed', parts.join('\n'), {details: {failure, stdout: result.stdout, stderr: result.stderr}})
}

/** True when the bytes are empty or only ASCII whitespace (space, tab, CR, LF, FF, VT). */
export function isBlank(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!
    if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09 && b !== 0x0c && b !== 0x0b) return false
  }
  return true
}

/**
 * For a function that exited 0: a FunctionFailed error when its stdout is empty or whitespace
 * only, else undefined. Such output reads as a ResourceList without items, and a client that
 * writes it back (Porch's porch-server hands the bytes to kpt) deletes every resource of the
 * package: a function's empty output is never an empty package.
 */
export function emptyOutputError(label: string, result: FunctionProcessResult): FnrError | undefined {
  if (!isBlank(result.stdout)) return undefined
  const stderrText = result.stderr.toString('utf8')
  const what = result.stdout.length === 0 ? 'no output' : `only whitespace (${result.stdout.length} bytes)`
  let message =
    `function ${JSON.stringify(label)} exited with code 0 but wrote ${what} to stdout, not a ResourceList: ` +
    'refusing to return it, because an empty output would delete every resource of the package'
  if (stderrText.trim() !== '') message += `\nstderr:\n${tail(stderrText, MESSAGE_STDERR_TAIL)}`
  return new FnrError('FunctionFailed', message, {details: {emptyOutput: true, stderr: result.stderr}})
}
