/**
 * `fnr eval`'s flags, as plain specs shared by the oclif command (help, manifest) and the
 * oclif-free fast path in bin/run.js, and the one function that turns parsed values into
 * EvalOptions.
 */
import {resolveExecPaths} from '../lib/config/embedded.js'
import {FnrError} from '../lib/errors.js'
import type {EvalOptions} from '../lib/eval.js'
import type {Selector} from '../lib/resourcelist/select.js'
import {EXEC_FLAG_SPECS, type FlagSpecs, type FlagValue} from '../lib/flags/spec.js'

export const EVAL_FLAG_SPECS = {
  input: {kind: 'string', char: 'i', multiple: true, summary: 'File or directory of KRM resources (repeatable); "-" or none means stdin.'},
  image: {kind: 'string', summary: 'Function image, resolved through the exec config.', exclusive: ['exec']},
  exec: {kind: 'string', summary: 'Executable function and its arguments, e.g. "./fn --flag" (no shell).', exclusive: ['image']},
  'fn-config': {kind: 'string', summary: 'File holding the functionConfig resource.'},
  output: {kind: 'string', char: 'o', summary: 'stdout (wrapped ResourceList), unwrap (YAML documents) or a directory.', default: 'stdout'},
  'results-dir': {kind: 'string', summary: 'Write results.yaml (a kpt FunctionResultList) into this directory.'},
  timeout: {kind: 'duration', summary: 'Kill the function after this long.', default: 5 * 60_000, defaultHelp: '5m'},
  'max-output-size': {kind: 'integer', summary: 'Largest function output accepted, in bytes.', default: 256 * 1024 * 1024, min: 1024},
  'fail-on-error-results': {kind: 'boolean', summary: 'Exit 1 (and write nothing) when the function reports error-severity results.', default: false},
  'truncate-output': {kind: 'boolean', summary: 'Show at most 4 lines of results and stderr on the console.', default: true, allowNo: true},
  color: {kind: 'boolean', summary: 'Colour the console tags when stderr is a terminal (also off with NO_COLOR).', default: true, allowNo: true},
  runner: {kind: 'string', summary: 'Run --image through a running function runner (fnr serve, or Porch\'s) at HOST:PORT over gRPC, e.g. an image fnr does not ship.', exclusive: ['exec']},
  env: {kind: 'string', char: 'e', multiple: true, summary: 'KEY=VALUE added to the function\'s environment (repeatable; --exec and --image, not --runner); KEY alone passes fnr\'s own value.'},
  ...selectorSpecs('match', 'Send only resources'),
  ...selectorSpecs('exclude', 'Do not send resources'),
  ...EXEC_FLAG_SPECS,
} satisfies FlagSpecs

function selectorSpecs(prefix: 'match' | 'exclude', what: string): FlagSpecs {
  const group = prefix === 'match' ? 'SELECTORS' : 'SELECTORS'
  return {
    [`${prefix}-api-version`]: {kind: 'string', summary: `${what} with this apiVersion.`, helpGroup: group},
    [`${prefix}-kind`]: {kind: 'string', summary: `${what} of this kind.`, helpGroup: group},
    [`${prefix}-name`]: {kind: 'string', summary: `${what} with this name.`, helpGroup: group},
    [`${prefix}-namespace`]: {kind: 'string', summary: `${what} in this namespace.`, helpGroup: group},
    [`${prefix}-labels`]: {kind: 'string', multiple: true, summary: `${what} with this label (KEY=VALUE, repeatable).`, helpGroup: group},
    [`${prefix}-annotations`]: {kind: 'string', multiple: true, summary: `${what} with this annotation (KEY=VALUE, repeatable).`, helpGroup: group},
  }
}

function selectorFrom(values: Record<string, FlagValue>, prefix: 'match' | 'exclude'): Selector {
  const pairs = (name: string): Record<string, string> | undefined => {
    const list = values[`${prefix}-${name}`] as string[] | undefined
    if (!list || list.length === 0) return undefined
    const out: Record<string, string> = {}
    for (const kv of list.flatMap((v) => v.split(','))) {
      const eq = kv.indexOf('=')
      if (eq <= 0) throw new FnrError('Usage', `--${prefix}-${name} takes KEY=VALUE, got ${JSON.stringify(kv)}`)
      out[kv.slice(0, eq)] = kv.slice(eq + 1)
    }
    return out
  }
  return {
    apiVersion: values[`${prefix}-api-version`] as string | undefined,
    kind: values[`${prefix}-kind`] as string | undefined,
    name: values[`${prefix}-name`] as string | undefined,
    namespace: values[`${prefix}-namespace`] as string | undefined,
    labels: pairs('labels'),
    annotations: pairs('annotations'),
  }
}

/**
 * EvalOptions from parsed flags. `positionals` is kpt's `fnr eval [DIR | -]`: DIR is read and
 * written in place (unless --output says otherwise), "-" is stdin.
 */
export function evalOptionsFromFlags(values: Record<string, FlagValue>, given: ReadonlySet<string>, fnConfigArgs: string[], positionals: string[] = []): Omit<EvalOptions, never> {
  const str = (name: string): string | undefined => values[name] as string | undefined
  if (positionals.length > 1) {
    throw new FnrError('Usage', `unexpected argument ${JSON.stringify(positionals[1])}; give one DIR (or -), and function config after "--" (e.g. -- namespace=prod)`)
  }
  let inputs = (values.input as string[] | undefined) ?? []
  let output = str('output') ?? 'stdout'
  const dir = positionals[0]
  if (dir !== undefined) {
    if (inputs.length > 0) throw new FnrError('Usage', `give the package as DIR or as --input, not both (got ${JSON.stringify(dir)} and --input)`)
    inputs = dir === '-' ? [] : [dir]
    if (dir !== '-' && !given.has('output')) output = dir
  }
  if (str('runner') !== undefined && str('exec') !== undefined) throw new FnrError('Usage', '--runner runs images: give --image, not --exec')
  const env = (values.env as string[] | undefined) ?? []
  if (env.length > 0 && str('runner') !== undefined) {
    throw new FnrError('Usage', '--env cannot be passed through --runner: the function evaluator protocol (proto/evaluator.proto, EvaluateFunctionRequest: resource_list and image only) carries no environment; start the runner with the variables and `fnr serve --exec-env NAME` instead')
  }
  return {
    runnerAddress: str('runner'),
    env,
    selector: selectorFrom(values, 'match'),
    exclude: selectorFrom(values, 'exclude'),
    inputs,
    image: str('image'),
    exec: str('exec'),
    fnConfigPath: str('fn-config'),
    fnConfigArgs,
    output,
    resultsDir: str('results-dir'),
    timeoutMs: values.timeout as number,
    maxOutputBytes: values['max-output-size'] as number,
    failOnErrorResults: values['fail-on-error-results'] as boolean,
    truncateOutput: values['truncate-output'] as boolean,
    execPaths: {
      ...resolveExecPaths(str('config')!, str('functions')!, given.has('config'), given.has('functions'), {cli: true}),
      defaultImagePrefix: str('default-image-prefix')!,
    },
  }
}

/** Splits argv at the first "--": flags before it, function config (key=value) after it. */
export function splitFunctionConfigArgs(argv: readonly string[]): {flagArgs: string[]; fnConfigArgs: string[]} {
  const dash = argv.indexOf('--')
  return dash >= 0 ? {flagArgs: argv.slice(0, dash), fnConfigArgs: argv.slice(dash + 1)} : {flagArgs: [...argv], fnConfigArgs: []}
}
