/**
 * Flag specs in plain data: fnr's one way to define a flag. One definition serves oclif (help,
 * manifest, parsing: src/cli/flags.ts oclifFlags), the fast path of `fnr eval` (bin/run.js), which
 * parses with node:util instead of loading oclif (~80 ms of startup), and the packaged
 * wrapper-server (lib/wrapper.ts parseWrapperArgs), which cannot carry oclif. Nothing here imports
 * oclif.
 */
import {parseArgs} from 'node:util'

import {FnrError} from '../errors.js'
import {parseGoBool, parseGoDuration} from '../config/go-flags.js'
import {flagHint} from './suggest.js'
import {DEFAULT_IMAGE_PREFIX} from '../config/image-ref.js'

export interface FlagSpec {
  /** go-bool: a value-taking true|false (Go's flag package spellings), as Porch's boolean flags. */
  kind: 'string' | 'boolean' | 'integer' | 'duration' | 'go-bool'
  summary: string
  description?: string
  char?: string
  multiple?: boolean
  default?: string | number | boolean
  /** How the default reads in help (durations are stored in ms). */
  defaultHelp?: string
  /** Boolean flags that also accept --no-NAME. */
  allowNo?: boolean
  exclusive?: string[]
  min?: number
  max?: number
  /** The values a string flag accepts. */
  options?: readonly string[]
  /** Environment variable read when the flag is not given. */
  env?: string
  /** Repeated flags take one value each (`--f a --f b`), never the following arguments. */
  multipleNonGreedy?: boolean
  helpGroup?: string
}

export type FlagSpecs = Record<string, FlagSpec>

export const EXEC_FLAG_SPECS = {
  functions: {
    kind: 'string',
    summary: "Directory of the exec runtime's function binaries.",
    description: 'When neither --functions nor --config is given, eval, test and render use the functions fnr ships; serve uses ./config.yaml only when it exists and is an exec config (anything else there is ignored with a warning).',
    default: './functions',
    helpGroup: 'EXEC RUNTIME',
  },
  config: {
    kind: 'string',
    summary: 'Exec runtime config mapping images to binaries (Porch\'s config.yaml format); "" disables it.',
    default: './config.yaml',
    helpGroup: 'EXEC RUNTIME',
  },
  'default-image-prefix': {
    kind: 'string',
    summary: 'Registry prefix for image names without a "/" when matching exec functions.',
    default: DEFAULT_IMAGE_PREFIX,
    helpGroup: 'EXEC RUNTIME',
  },
} satisfies FlagSpecs

export type FlagValue = string | number | boolean | string[] | undefined

/** The value type a spec parses to (what oclif's parse and parseWithSpecs give). */
export type SpecValue<S extends FlagSpec> = S['kind'] extends 'boolean' | 'go-bool' ? boolean : S['kind'] extends 'integer' | 'duration' ? number : S['multiple'] extends true ? string[] : string

export interface ParsedFlags {
  values: Record<string, FlagValue>
  /** Flags the user gave (not defaults). */
  given: Set<string>
  positionals: string[]
}

/**
 * How parse errors read. 'cli': fnr's CLI wording (as oclif words them). 'wrapper': the packaged
 * wrapper-server's, as Porch's wrapper users know them: node:util's "Unknown option '--x'", integers
 * as Go's strconv reads them (a sign, surrounding blanks) with "between MIN and MAX".
 */
export type ParseDialect = 'cli' | 'wrapper'

/** A command-line error (src/lib/errors.ts FnrErrorDetails.commandLine). */
function usage(message: string, details: {unknownFlag?: string; missingValue?: string} = {}): FnrError {
  return new FnrError('Usage', message, {details: {commandLine: true, ...details}})
}

function wrapperInteger(name: string, spec: FlagSpec, raw: string): number {
  if (!/^[+-]?\d+$/.test(raw.trim())) throw usage(`--${name}: expected an integer, got ${JSON.stringify(raw)}`)
  const n = Number(raw)
  const min = spec.min ?? Number.MIN_SAFE_INTEGER
  const max = spec.max ?? Number.MAX_SAFE_INTEGER
  if (n < min || n > max) throw usage(`--${name}: expected an integer between ${min} and ${max}, got ${n}`)
  return n
}

/** What is wrong with an integer flag's value on the command line (both parsers' words), or undefined. */
export function integerProblem(spec: Pick<FlagSpec, 'min' | 'max'>, raw: string): string | undefined {
  if (!/^-?\d+$/.test(raw)) return `expected an integer, got ${JSON.stringify(raw)}`
  const n = Number(raw)
  if (spec.min !== undefined && n < spec.min) return `expected an integer greater than or equal to ${spec.min}, got ${raw}`
  if (spec.max !== undefined && n > spec.max) return `expected an integer less than or equal to ${spec.max}, got ${raw}`
  return undefined
}

function cliInteger(name: string, spec: FlagSpec, raw: string): number {
  const problem = integerProblem(spec, raw)
  if (problem !== undefined) throw usage(`Parsing --${name}: ${problem}`)
  return Number(raw)
}

/** Converts one raw string to the flag's type (durations to ms); throws Usage errors. */
export function convertFlagValue(name: string, spec: FlagSpec, raw: string, dialect: ParseDialect = 'cli'): string | number | boolean {
  if (spec.kind === 'integer') return dialect === 'wrapper' ? wrapperInteger(name, spec, raw) : cliInteger(name, spec, raw)
  if (spec.kind === 'go-bool') {
    const v = parseGoBool(raw)
    if (v === undefined) throw usage(`Parsing --${name}: expected true or false, got ${JSON.stringify(raw)}`)
    return v
  }
  if (spec.options && !spec.options.includes(raw)) throw usage(`Expected --${name}=${raw} to be one of: ${spec.options.join(', ')}`)
  if (spec.kind === 'duration') {
    const ms = parseGoDuration(raw)
    if (ms === undefined) throw usage(`Parsing --${name}: expected a duration like 30m, 1h30m or 500ms, got ${JSON.stringify(raw)}`)
    return ms
  }
  return raw
}

/**
 * `--flag=false` / `--flag=true` for boolean flags with a --no- form, as kpt spells them (kpt's own
 * hint says "use '--truncate-output=false' to disable"): rewritten to `--no-flag` / `--flag`.
 */
export function normalizeBooleanFlags(argv: readonly string[], specs: FlagSpecs): string[] {
  return argv.map((arg) => {
    const m = /^--([a-z0-9-]+)=(true|false)$/.exec(arg)
    if (!m || specs[m[1]!]?.kind !== 'boolean' || !specs[m[1]!]?.allowNo) return arg
    return m[2] === 'true' ? `--${m[1]}` : `--no-${m[1]}`
  })
}

type NodeOptions = Record<string, {type: 'string' | 'boolean'; short?: string; multiple?: boolean}>

/** node:util's option table for specs (with the --no-NAME forms). */
function nodeOptions(specs: FlagSpecs): NodeOptions {
  const options: NodeOptions = {}
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = {type: spec.kind === 'boolean' ? 'boolean' : 'string', ...(spec.char ? {short: spec.char} : {}), ...(spec.multiple ? {multiple: true} : {})}
    if (spec.allowNo) options[`no-${name}`] = {type: 'boolean'}
  }
  return options
}

/** node:util's parse error in fnr's words ("Unknown option '--exce'. To specify a positional …"). */
function parseError(err: unknown, options: NodeOptions, dialect: ParseDialect, argv: readonly string[]): FnrError {
  const message = (err as Error).message
  const unknown = /^Unknown option '([^']*)'/.exec(message)
  if (unknown && dialect === 'cli') return usage(`Nonexistent flag: ${unknown[1]}${flagHint(unknown[1]!, Object.keys(options))}`, {unknownFlag: unknown[1]!})
  // "Option '-o, --output <value>' argument missing": the flag ended the command line
  const missing = /^Option '(?:-(\w), )?--([\w-]+) <value>' argument missing/.exec(message)
  if (missing && dialect === 'cli') {
    const typed = argv.at(-1) === `-${missing[1]}` ? `-${missing[1]}` : `--${missing[2]}`
    return usage(`Flag --${missing[2]} expects a value`, {missingValue: typed})
  }
  return new FnrError('Usage', message.split('\n')[0]!.replace(/\. To specify a positional.*$/, ''), {cause: err, details: {commandLine: true}})
}

/** One flag's value: given (raw, or negated by --no-NAME), else its environment variable, else its default. */
function flagValue(name: string, spec: FlagSpec, parsedValues: Record<string, unknown>, dialect: ParseDialect): {value: FlagValue; given: boolean} {
  const raw = parsedValues[name] as string | boolean | string[] | undefined
  const negated = spec.allowNo ? parsedValues[`no-${name}`] : undefined
  if (negated !== undefined) return {value: false, given: true}
  if (raw === undefined) {
    const fromEnv = spec.env === undefined ? undefined : process.env[spec.env]
    return {value: fromEnv === undefined || spec.multiple ? spec.default : convertFlagValue(name, spec, fromEnv, dialect), given: false}
  }
  return {value: typeof raw === 'string' ? convertFlagValue(name, spec, raw, dialect) : raw, given: true}
}

/** Parses argv against specs with node:util (the oclif-free path). */
export function parseWithSpecs(argv: readonly string[], specs: FlagSpecs, dialect: ParseDialect = 'cli'): ParsedFlags {
  const options = nodeOptions(specs)
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({args: normalizeBooleanFlags(argv, specs), options, strict: true, allowPositionals: true})
  } catch (err) {
    throw parseError(err, options, dialect, argv)
  }
  const values: Record<string, FlagValue> = {}
  const given = new Set<string>()
  for (const [name, spec] of Object.entries(specs)) {
    const v = flagValue(name, spec, parsed.values, dialect)
    values[name] = v.value
    if (v.given) given.add(name)
  }
  for (const [name, spec] of Object.entries(specs)) {
    for (const other of spec.exclusive ?? []) {
      if (given.has(name) && given.has(other)) throw usage(`--${other}=${String(values[other])} cannot also be provided when using --${name}`)
    }
  }
  return {values, given, positionals: parsed.positionals}
}
