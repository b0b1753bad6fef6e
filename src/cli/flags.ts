/**
 * oclif flags, made from the plain specs (spec.ts, runner-flag-specs.ts, eval-flags.ts, …): a
 * flag is defined once as a FlagSpec, and the oclif commands and the oclif-free paths (the eval
 * fast path) read the same definition. The named groups below are what the commands spread into
 * their `flags`.
 */
import {Flags, type Interfaces} from '@oclif/core'

import {FnrError} from '../lib/errors.js'
import {parseGoBool, parseGoDuration} from '../lib/config/go-flags.js'
import {
  CLUSTER_FLAG_SPECS,
  FUNCTION_CONFIG_FLAG_SPECS,
  LISTENER_LIMIT_FLAG_SPECS,
  LISTENER_TLS_FLAG_SPECS,
  LOG_FORMAT_SPEC,
  LOG_LEVEL_SPEC,
  MAX_REQUEST_BODY_SIZE_SPEC,
  METRICS_FLAG_SPECS,
  POD_FLAG_SPECS,
  REGISTRY_FLAG_SPECS,
  RESPONSE_CACHE_FLAG_SPECS,
  RUNNER_TEMPLATE_FLAG_SPECS,
} from '../lib/flags/runner-flag-specs.js'
import {EXEC_FLAG_SPECS, integerProblem, type FlagSpec, type FlagSpecs, type SpecValue} from '../lib/flags/spec.js'

export {DEFAULT_MAX_REQUEST_BODY_SIZE} from '../lib/flags/runner-flag-specs.js'

export const goBool = Flags.custom<boolean>({
  parse: async (input) => {
    const v = parseGoBool(input)
    if (v === undefined) throw new FnrError('Usage', `expected true or false, got ${JSON.stringify(input)}`)
    return v
  },
  helpValue: 'true|false',
})

/** A Go duration ("30m", "1h30m", "500ms") parsed to milliseconds. */
export const goDuration = Flags.custom<number>({
  parse: async (input) => {
    const v = parseGoDuration(input)
    if (v === undefined) throw new FnrError('Usage', `expected a duration like 30m, 1h30m or 500ms, got ${JSON.stringify(input)}`)
    return v
  },
  helpValue: '<duration>',
})

/** The oclif flag a spec makes: its value type, and undefined when it has no default. */
export type OclifFlagOf<S extends FlagSpec> = S['kind'] extends 'boolean'
  ? Interfaces.BooleanFlag<boolean>
  : Interfaces.OptionFlag<S extends {default: unknown} ? SpecValue<S> : SpecValue<S> | undefined>

/** oclif flags built from plain specs (spec.ts), so the oclif-free paths share them. */
export function oclifFlags<S extends FlagSpecs>(specs: S): {[K in keyof S]: OclifFlagOf<S[K]>} {
  return Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, oclifFlag(spec)])) as {[K in keyof S]: OclifFlagOf<S[K]>}
}

export function oclifFlag<S extends FlagSpec>(spec: S): OclifFlagOf<S> {
  const common = {
    summary: spec.summary,
    description: spec.description,
    char: spec.char as 'i' | undefined,
    helpGroup: spec.helpGroup,
    exclusive: spec.exclusive,
    env: spec.env,
  }
  const defaultHelp = spec.defaultHelp === undefined ? {} : {defaultHelp: async () => spec.defaultHelp!}
  switch (spec.kind) {
    case 'boolean':
      return Flags.boolean({...common, default: spec.default as boolean | undefined, allowNo: spec.allowNo}) as unknown as OclifFlagOf<S>
    case 'go-bool':
      return goBool({...common, default: spec.default as boolean | undefined}) as unknown as OclifFlagOf<S>
    case 'integer':
      // parsed with the oclif-free path's check, so both say the same (oclif adds "Parsing --NAME: ")
      return Flags.custom<number>({
        parse: async (input) => {
          const problem = integerProblem(spec, input)
          if (problem !== undefined) throw new FnrError('Usage', problem)
          return Number(input)
        },
        helpValue: '<value>',
      })({...common, default: spec.default as number | undefined}) as unknown as OclifFlagOf<S>
    case 'duration':
      return goDuration({...common, default: spec.default as number | undefined, ...defaultHelp}) as unknown as OclifFlagOf<S>
    default:
      return (spec.multiple
        ? Flags.string({...common, multiple: true, ...(spec.multipleNonGreedy ? {multipleNonGreedy: true} : {})})
        : Flags.string({...common, default: spec.default as string | undefined, ...(spec.options ? {options: [...spec.options]} : {})})) as unknown as OclifFlagOf<S>
  }
}

export const logLevelFlag = oclifFlag(LOG_LEVEL_SPEC)
export const logFormatFlag = oclifFlag(LOG_FORMAT_SPEC)
/**
 * oclif's --json (a command with `static enableJsonFlag = true`), described for fnr: the base
 * command gives it in place of oclif's own (which only says "Format output as json.").
 */
export const jsonFlag = oclifFlag({
  kind: 'boolean',
  summary: 'Print the result as one JSON object on stdout (also FNR_CONTENT_TYPE=json); a failure as {"error": {kind, message, exitCode}}, with the same exit code.',
  helpGroup: 'GLOBAL',
})
export const maxRequestBodySizeFlag = oclifFlag(MAX_REQUEST_BODY_SIZE_SPEC)
export const execFlags = oclifFlags(EXEC_FLAG_SPECS)
export const podFlags = oclifFlags(POD_FLAG_SPECS)
export const registryFlags = oclifFlags(REGISTRY_FLAG_SPECS)
/** Where the `fnr pods …` commands find the cluster and the function pods. */
export const clusterFlags = oclifFlags(CLUSTER_FLAG_SPECS)
export const runnerTemplateFlags = oclifFlags(RUNNER_TEMPLATE_FLAG_SPECS)
export const functionConfigFlags = oclifFlags(FUNCTION_CONFIG_FLAG_SPECS)
export const listenerLimitFlags = oclifFlags(LISTENER_LIMIT_FLAG_SPECS)
export const metricsFlags = oclifFlags(METRICS_FLAG_SPECS)
export const responseCacheFlags = oclifFlags(RESPONSE_CACHE_FLAG_SPECS)
export const listenerTlsFlags = oclifFlags(LISTENER_TLS_FLAG_SPECS)
