/**
 * Flag specs in plain data, so one definition serves both oclif (help, manifest, parsing) and the
 * fast path of `fnr eval` (bin/run.js), which parses with node:util instead of loading oclif
 * (~80 ms of startup). Nothing here imports oclif.
 */
import {parseArgs} from 'node:util'

import {FnrError} from '../errors.js'
import {parseGoDuration} from '../config/go-flags.js'
import {DEFAULT_IMAGE_PREFIX} from '../config/image-ref.js'

export interface FlagSpec {
  kind: 'string' | 'boolean' | 'integer' | 'duration'
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
export function convertFlagValue(name: string, spec: FlagSpec, raw: string): string | number {
  if (spec.kind === 'integer') {
    if (!/^-?\d+$/.test(raw)) throw usage(`Parsing --${name}: expected an integer, got ${JSON.stringify(raw)}`)
    const n = Number(raw)
    if (spec.min !== undefined && n < spec.min) throw usage(`Parsing --${name}: expected an integer greater than or equal to ${spec.min}, got ${raw}`)
    return n
  }
  if (spec.kind === 'duration') {
    const ms = parseGoDuration(raw)
    if (ms === undefined) throw usage(`Parsing --${name}: expected a duration like 30m, 1h30m or 500ms, got ${JSON.stringify(raw)}`)
    return ms
  }
  return raw
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
    parsed = parseArgs({args: argv, options, strict: true, allowPositionals: true})
  } catch (err) {
    throw usage((err as Error).message.replace(/^Unknown option '(.*)'.*$/s, 'Nonexistent flag: $1').split('\n')[0]!)
  }
  const values: Record<string, FlagValue> = {}
  const given = new Set<string>()
  for (const [name, spec] of Object.entries(specs)) {
    const raw = parsed.values[name] as string | boolean | string[] | undefined
    const negated = spec.allowNo ? parsed.values[`no-${name}`] : undefined
    if (raw === undefined && negated === undefined) {
      values[name] = spec.default
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
