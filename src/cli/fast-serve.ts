/**
 * `fnr serve` without oclif: bin/run.js calls this first for `fnr serve …` (not for --help),
 * saving oclif's load (~120 ms of a start; docs/performance.md "Start → SERVING"). It takes only
 * command lines it is sure to read as the oclif command does: every argument `--name=value`, or
 * a bare `--name` of a boolean flag, after the same Go-style normalisation. For anything else,
 * and for any flag or option error, it returns undefined before starting anything, and bin/run.js
 * runs the oclif command, which parses again and reports the error exactly as it always has.
 * Flag specs and the options they make are the oclif command's own (serve-flags.ts).
 */
import {normaliseGoStyleArgs} from '../lib/config/go-flags.js'
import {LOG_FORMAT_SPEC} from '../lib/flags/runner-flag-specs.js'
import {parseWithSpecs, type FlagSpecs} from '../lib/flags/spec.js'
import {startServe, validateServeOptions, type ServeOptions} from '../lib/serve.js'
import {createLogger, parseLogFormat, setLogFormat, type LogFormat} from '../lib/telemetry/log.js'
import {renderError} from './render-error.js'
import {SERVE_BOOLEAN_FLAG_NAMES, SERVE_FLAG_SPECS, serveOptionsFromFlags, type ServeFlagValues} from './serve-flags.js'

const SPECS: FlagSpecs = {...SERVE_FLAG_SPECS, 'log-format': LOG_FORMAT_SPEC}

/** The options and log settings, or undefined when oclif must read this command line. */
export function readServeArgs(argv: readonly string[]): {options: ServeOptions; verbosity: number; logFormat: LogFormat | undefined; warnings: string[]} | undefined {
  const args = normaliseGoStyleArgs(argv, SERVE_BOOLEAN_FLAG_NAMES, new Set(Object.keys(SERVE_FLAG_SPECS)))
  const seen = new Set<string>()
  for (const arg of args) {
    if (!arg.startsWith('--')) return undefined
    const eq = arg.indexOf('=')
    const name = arg.slice(2, eq < 0 ? undefined : eq)
    const spec = SPECS[name]
    if (!spec || (eq < 0 && spec.kind !== 'boolean')) return undefined
    // oclif refuses a flag given twice ("can only be specified once"); the last one must not win here.
    if (seen.has(name) && !spec.multiple) return undefined
    seen.add(name)
  }
  try {
    const {values, given, positionals} = parseWithSpecs(args, SPECS)
    if (positionals.length > 0) return undefined
    const flags = values as unknown as ServeFlagValues & {'log-format'?: string}
    // Held back until nothing can send this command line to oclif, which would print them again.
    const warnings: string[] = []
    const options = serveOptionsFromFlags(flags, (name) => given.has(name) || SPECS[name]!.default === undefined, (m) => warnings.push(m))
    validateServeOptions(options)
    const logFormat = flags['log-format'] === undefined ? undefined : parseLogFormat(flags['log-format'], '--log-format')
    return {options, verbosity: flags['log-level'], logFormat, warnings}
  } catch {
    return undefined
  }
}

/** The exit code, or undefined when bin/run.js must run the oclif command instead. */
export async function runServeFast(argv: string[]): Promise<number | undefined> {
  const parsed = readServeArgs(argv)
  if (!parsed) return undefined
  for (const m of parsed.warnings) process.stderr.write(`fnr: warning: ${m}\n`)
  if (parsed.logFormat !== undefined) setLogFormat(parsed.logFormat)
  try {
    const logger = createLogger({verbosity: parsed.verbosity, name: 'fnr-serve'})
    const running = await startServe(parsed.options, logger)
    await running.done
    return 0
  } catch (err) {
    return renderError(err, parsed.verbosity, process.stderr, 'fnr')
  }
}
