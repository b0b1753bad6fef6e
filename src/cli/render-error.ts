/**
 * How every fnr command reports a failure: one line on stderr ("fnr: <message>"), the exit code
 * of the error's kind, and a stack trace only with FNR_DEBUG or a high --log-level. No oclif
 * import, so the oclif-free fast paths use it too.
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
