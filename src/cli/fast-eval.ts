/**
 * `fnr eval` without oclif: bin/run.js calls this for `fnr eval …` (not for --help), saving the
 * ~80 ms oclif costs to load. Flags, their parsing and the error rendering are the same ones the
 * oclif command uses (eval-flags.ts, spec.ts, render-error.ts).
 */
import {runEval} from '../lib/eval.js'
import {EVAL_FLAG_SPECS, evalOptionsFromFlags, splitFunctionConfigArgs} from './eval-flags.js'
import {colorEnabled, consoleStream} from './color.js'
import {onInterrupt} from './interrupt.js'
import {errorFormFor, renderError} from './render-error.js'
import {parseWithSpecs} from '../lib/flags/spec.js'

export async function runEvalFast(argv: string[]): Promise<number> {
  const interrupt = onInterrupt()
  try {
    const {flagArgs, fnConfigArgs} = splitFunctionConfigArgs(argv)
    const {values, given, positionals} = parseWithSpecs(flagArgs, EVAL_FLAG_SPECS)
    await runEval({...evalOptionsFromFlags(values, given, fnConfigArgs, positionals), signal: interrupt.signal}, {stdin: process.stdin, stdout: process.stdout, stderr: consoleStream(process.stderr, colorEnabled(process.stderr, values.color as boolean))})
    return 0
  } catch (err) {
    const code = renderError(err, 0, process.stderr, errorFormFor('eval', argv))
    return interrupt.exitCode ?? code
  } finally {
    interrupt.dispose()
  }
}
