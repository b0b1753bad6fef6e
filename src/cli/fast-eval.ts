/**
 * `fnr eval` without oclif: bin/run.js calls this for `fnr eval …` (not for --help), saving the
 * ~80 ms oclif costs to load. Flags, their parsing and the error rendering are the same ones the
 * oclif command uses (eval-flags.ts, spec.ts, render-error.ts).
 */
import {runEval} from '../lib/eval.js'
import {EVAL_FLAG_SPECS, evalOptionsFromFlags, splitFunctionConfigArgs} from './eval-flags.js'
import {colorEnabled, consoleStream} from './color.js'
import {runFastCommand} from './interrupt.js'
import {parseWithSpecs} from '../lib/flags/spec.js'

export function runEvalFast(argv: string[]): Promise<number> {
  return runFastCommand('eval', argv, async (signal) => {
    const {flagArgs, fnConfigArgs} = splitFunctionConfigArgs(argv)
    const {values, given, positionals} = parseWithSpecs(flagArgs, EVAL_FLAG_SPECS)
    await runEval({...evalOptionsFromFlags(values, given, fnConfigArgs, positionals), signal}, {stdin: process.stdin, stdout: process.stdout, stderr: consoleStream(process.stderr, colorEnabled(process.stderr, values.color as boolean))})
  })
}
