/**
 * `fnr source` and `fnr sink` without oclif: bin/run.js calls these (not for --help), so the two
 * ends of a pipe start as fast as `fnr eval` does. Flags, their parsing and the error rendering are
 * the ones the oclif commands use (source-sink-flags.ts, spec.ts, render-error.ts).
 */
import {parseWithSpecs} from '../lib/flags/spec.js'
import {runSink, runSource} from '../lib/source-sink.js'
import {runFastCommand} from './interrupt.js'
import {SINK_FLAG_SPECS, SOURCE_FLAG_SPECS} from './source-sink-flags.js'

export function runSourceFast(argv: string[]): Promise<number> {
  return runFastCommand('source', argv, async (signal) => {
    const {values, positionals} = parseWithSpecs(argv, SOURCE_FLAG_SPECS)
    await runSource({args: positionals, output: values.output as string, fnConfigPath: values['fn-config'] as string | undefined, signal}, {stdout: process.stdout})
  })
}

export function runSinkFast(argv: string[]): Promise<number> {
  return runFastCommand('sink', argv, async (signal) => {
    const {positionals} = parseWithSpecs(argv, SINK_FLAG_SPECS)
    await runSink({args: positionals, signal}, {stdin: process.stdin})
  })
}

