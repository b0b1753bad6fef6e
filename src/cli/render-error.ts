/**
 * How every fnr command reports a failure: one line on stderr ("fnr: <message>"), the exit code
 * of the error's kind, and a stack trace only with FNR_DEBUG or a high --log-level; with --json,
 * also one JSON object on stdout (errorJson). No oclif import, so the oclif-free fast paths use
 * it too.
 *
 * The kpt-compatible commands (`fnr eval`, `fnr render`) report as kpt does unless asked for
 * fnr's form (errorFormFor): exit 1 for every failure, and kpt's line (kptErrorLine). The error
 * stays typed; only this module decides how it reads and which code it exits with.
 */
import {errorLine, FnrError, toFnrError} from '../lib/errors.js'

/**
 * How a failure is reported. `fnr`: "fnr: …" and the exit code of the error's kind (docs/cli.md).
 * `kpt-eval` / `kpt-render`: kpt 1.0's form for `kpt fn eval` / `kpt fn render`, exit 1.
 */
export type ErrorForm = 'fnr' | 'kpt-eval' | 'kpt-render'

/** The values of --exit-codes (and FNR_EXIT_CODES) on the kpt-compatible commands. */
export const EXIT_CODE_STYLES = ['kpt', 'fnr'] as const

/**
 * The form a kpt-compatible command (eval, render, source, sink) reports in, read from its own argv (before "--") and the
 * environment, so that a failure to parse the command line is reported in it too: fnr's form with
 * `--exit-codes fnr` (or `--exit-codes=fnr`, the last one given wins), else with FNR_EXIT_CODES=fnr,
 * and, on eval, with --json (or FNR_CONTENT_TYPE=json: fnr's JSON output, which kpt does not have); kpt's
 * form otherwise.
 */
export function errorFormFor(command: 'eval' | 'render' | 'source' | 'sink', argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ErrorForm {
  const dash = argv.indexOf('--')
  const flags = dash >= 0 ? argv.slice(0, dash) : argv
  let style = env.FNR_EXIT_CODES
  let json = env.FNR_CONTENT_TYPE?.toLowerCase() === 'json'
  for (let i = 0; i < flags.length; i++) {
    const arg = flags[i]!
    if (arg === '--exit-codes') style = flags[++i]
    else if (arg.startsWith('--exit-codes=')) style = arg.slice('--exit-codes='.length)
    else if (arg === '--json' || arg === '--json=true') json = true
  }
  // Only eval has --json (render would refuse the flag, in kpt's form).
  if (style === 'fnr' || (json && command === 'eval')) return 'fnr'
  // kpt fn source and sink print their errors as kpt fn eval does (its CLI library's `error: …`).
  return command === 'render' ? 'kpt-render' : 'kpt-eval'
}

/**
 * kpt's line for a failure (empty when kpt prints none): a Kptfile kpt refuses reads as kpt's
 * own text; a function whose [FAIL] block the console already shows gets no line; a command-line
 * error reads as kpt's CLI library prints it (`error: unknown flag: --x`), as does every
 * `kpt fn eval` error; `kpt fn render`'s other errors read `Error: … ` (kpt ends them with a
 * blank).
 */
export function kptErrorLine(err: FnrError, form: Exclude<ErrorForm, 'fnr'>): string {
  if (err.kind === 'InvalidPackage') return `${err.message} \n`
  if (err.details.consoleShown) return ''
  // kpt prints the whole message, lines and all (a YAML error ends with the node's contents).
  const message = err.details.unknownFlag !== undefined ? `unknown flag: ${err.details.unknownFlag}` : err.details.missingValue !== undefined ? missingValueLine(err.details.missingValue) : wholeMessage(err.message)
  if (form === 'kpt-render' && !err.details.commandLine) return `Error: ${message} \n`
  return `error: ${message}\n`
}

/** kpt's CLI library's words for a flag that ends the command line without its value. */
function missingValueLine(typed: string): string {
  return typed.startsWith('--') ? `flag needs an argument: ${typed}` : `flag needs an argument: '${typed.slice(1)}' in ${typed}`
}

/** The exit code of a failure in a form: kpt exits 1 for every failure. */
export function exitCodeIn(err: FnrError, form: ErrorForm): number {
  return form === 'fnr' ? err.exitCode : 1
}

export function renderError(err: unknown, verbosity = 0, stderr: NodeJS.WritableStream = process.stderr, form: ErrorForm = 'fnr'): number {
  const fnrError = err instanceof FnrError ? err : toFnrError(err)
  stderr.write(form === 'fnr' ? errorLine(fnrError) : kptErrorLine(fnrError, form))
  if (verbosity >= 4 || process.env.FNR_DEBUG) {
    stderr.write(`${(fnrError.cause instanceof Error ? fnrError.cause : fnrError).stack ?? ''}\n`)
  }
  return exitCodeIn(fnrError, form)
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

/** A message as kpt prints it: every line, trailing blanks trimmed, at most 8,000 characters. */
function wholeMessage(text: string): string {
  const trimmed = text.trimEnd()
  return trimmed.length > 8000 ? `${trimmed.slice(0, 7999)}…` : trimmed
}
