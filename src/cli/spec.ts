/**
 * Flag specs in plain data: fnr's one way to define a flag. One definition serves both oclif
 * (help, manifest, parsing: flags.ts oclifFlags) and the fast path of `fnr eval` (bin/run.js),
 * which parses with node:util instead of loading oclif (~80 ms of startup). Nothing here imports
 * oclif.
 */
import {parseArgs} from 'node:util'

import {FnrError} from '../lib/errors.js'
import {flagHint} from './suggest.js'
import {parseGoBool, parseGoDuration} from '../lib/config/go-flags.js'
import {DEFAULT_IMAGE_PREFIX} from '../lib/config/image-ref.js'

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

function usage(message: string): FnrError {
  return new FnrError('Usage', message)
}

/** Converts one raw string to the flag's type (durations to ms); throws Usage errors. */
export function convertFlagValue(name: string, spec: FlagSpec, raw: string): string | number | boolean {
  if (spec.kind === 'integer') {
    if (!/^-?\d+$/.test(raw)) throw usage(`Parsing --${name}: expected an integer, got ${JSON.stringify(raw)}`)
    const n = Number(raw)
    if (spec.min !== undefined && n < spec.min) throw usage(`Parsing --${name}: expected an integer greater than or equal to ${spec.min}, got ${raw}`)
    if (spec.max !== undefined && n > spec.max) throw usage(`Parsing --${name}: expected an integer less than or equal to ${spec.max}, got ${raw}`)
    return n
  }
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

/** Parses argv against specs with node:util (the oclif-free path). */
export function parseWithSpecs(argv: string[], specs: FlagSpecs): ParsedFlags {
  const options: Record<string, {type: 'string' | 'boolean'; short?: string; multiple?: boolean}> = {}
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = {type: spec.kind === 'boolean' ? 'boolean' : 'string', ...(spec.char ? {short: spec.char} : {}), ...(spec.multiple ? {multiple: true} : {})}
    if (spec.allowNo) options[`no-${name}`] = {type: 'boolean'}
  }
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({args: normalizeBooleanFlags(argv, specs), options, strict: true, allowPositionals: true})
  } catch (err) {
    // node:util's messages: "Unknown option '--exce'. To specify a positional …"; say it in fnr's words.
    const message = (err as Error).message
    const unknown = /^Unknown option '([^']*)'/.exec(message)
    if (unknown) throw usage(`Nonexistent flag: ${unknown[1]}${flagHint(unknown[1]!, Object.keys(options))}`)
    throw usage(message.split('\n')[0]!.replace(/\. To specify a positional.*$/, ''))
  }
  const values: Record<string, FlagValue> = {}
  const given = new Set<string>()
  for (const [name, spec] of Object.entries(specs)) {
    const raw = parsed.values[name] as string | boolean | string[] | undefined
    const negated = spec.allowNo ? parsed.values[`no-${name}`] : undefined
    if (raw === undefined && negated === undefined) {
      const fromEnv = spec.env === undefined ? undefined : process.env[spec.env]
      values[name] = fromEnv === undefined || spec.multiple ? spec.default : convertFlagValue(name, spec, fromEnv)
      continue
    }
    given.add(name)
    if (negated !== undefined) values[name] = false
    else if (Array.isArray(raw)) values[name] = raw
    else if (typeof raw === 'boolean') values[name] = raw
    else values[name] = convertFlagValue(name, spec, raw as string)
  }
  for (const [name, spec] of Object.entries(specs)) {
    for (const other of spec.exclusive ?? []) {
      if (given.has(name) && given.has(other)) throw usage(`--${other}=${String(values[other])} cannot also be provided when using --${name}`)
    }
  }
  return {values, given, positionals: parsed.positionals}
}
