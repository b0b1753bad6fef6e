/**
 * `fnr render` without oclif: bin/run.js calls this for `fnr render …` (not for --help or
 * --runner), sparing the ~200 ms oclif and the command's module graph cost to load, which kpt's
 * e2e scripts and CI loops pay on every render. Flags, their parsing and the error rendering are
 * the ones the oclif command uses (render-flags.ts, spec.ts, render-error.ts).
 */
import {runRender} from '../lib/render.js'
import {parseWithSpecs} from '../lib/flags/spec.js'
import {colorEnabled, consoleStream} from './color.js'
import {runFastCommand} from './interrupt.js'
import {RENDER_FLAG_SPECS, renderOptionsFromFlags} from './render-flags.js'

export function runRenderFast(argv: string[]): Promise<number> {
  return runFastCommand('render', argv, async (signal) => {
    const {values, given, positionals} = parseWithSpecs(argv, RENDER_FLAG_SPECS)
    // kpt fn render ignores arguments after PKG_PATH, as the oclif command does (strict = false).
    const options = renderOptionsFromFlags(values, given, positionals[0])
    await runRender({...options, signal}, {stdin: process.stdin, stdout: process.stdout, stderr: consoleStream(process.stderr, colorEnabled(process.stderr, values.color as boolean))})
  })
}
