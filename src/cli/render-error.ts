/**
 * How every fnr command reports a failure: one line on stderr ("fnr: <message>"), the exit code
 * of the error's kind, and a stack trace only with FNR_DEBUG or a high --log-level; with --json,
 * also one JSON object on stdout (errorJson). No oclif import, so the oclif-free fast paths use
 * it too.
 */
import {errorLine, FnrError, toFnrError} from '../lib/errors.js'

export function renderError(err: unknown, verbosity = 0, stderr: NodeJS.WritableStream = process.stderr): number {
  const fnrError = err instanceof FnrError ? err : toFnrError(err)
  stderr.write(errorLine(fnrError))
  if (verbosity >= 4 || process.env.FNR_DEBUG) {
    stderr.write(`${(fnrError.cause instanceof Error ? fnrError.cause : fnrError).stack ?? ''}\n`)
  }
  return fnrError.exitCode
}

/** The `error` member of a failure's JSON. */
export interface ErrorJson {
  /** The error's kind (src/lib/errors.ts), e.g. Usage, NotFound, FunctionFailed. */
  kind: string
  /** The message the stderr line shows (kpt's whole text for InvalidPackage). */
  message: string
  /** The code the process exits with (the same as without --json). */
  exitCode: number
}

/**
 * What a command run with --json prints on stdout when it fails: `{"error": {kind, message,
 * exitCode}}`. An error that carries the command's report (details.report: pods gc's summary with
 * a failed deletion, fnr eval's FunctionResultList) prints the report's fields with `error` beside
 * them, so the success shape stays and a failure adds one key. `exitCode` is the process's, which
 * an interrupt (130, 143) decides over the error's kind.
 */
export function errorJson(err: unknown, exitCode?: number): Record<string, unknown> & {error: ErrorJson} {
  const fnrError = err instanceof FnrError ? err : toFnrError(err)
  const report = fnrError.details.report
  return {
    ...(report !== null && typeof report === 'object' && !Array.isArray(report) ? report : {}),
    error: {kind: fnrError.kind, message: fnrError.message, exitCode: exitCode ?? fnrError.exitCode},
  }
}
