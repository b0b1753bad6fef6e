/**
 * `fnr eval`'s flags, as plain specs shared by the oclif command (help, manifest) and the
 * oclif-free fast path in bin/run.js, and the one function that turns parsed values into
 * EvalOptions.
 */
import {resolveExecPaths} from '../lib/config/embedded.js'
import {FnrError} from '../lib/errors.js'
import type {EvalOptions} from '../lib/eval.js'
import type {Selector} from '../lib/resourcelist/select.js'
import {EXEC_FLAG_SPECS, type FlagSpec, type FlagSpecs, type FlagValue} from '../lib/flags/spec.js'
import {EXIT_CODE_STYLES} from './render-error.js'

/** --exit-codes on the kpt-compatible commands (read by render-error.ts errorFormFor; checked here). */
export const EXIT_CODES_SPEC = {
  kind: 'string',
  options: EXIT_CODE_STYLES,
  default: 'kpt',
  env: 'FNR_EXIT_CODES',
  summary: 'kpt: exit 1 on any failure, with kpt\'s error line (as kpt fn eval/render). fnr: fnr\'s own exit codes by kind (docs/cli.md) and "fnr: …" lines. --json implies fnr.',
} as const satisfies FlagSpec

/** kpt's image pull policies (matched in any case, as kpt does). */
const IMAGE_PULL_POLICIES = ['Always', 'IfNotPresent', 'Never']

/** --image-pull-policy checked as kpt checks it (the container runtimes use it: lib/container). */
export function checkImagePullPolicy(raw: string | undefined): void {
  if (raw === undefined || IMAGE_PULL_POLICIES.some((p) => p.toLowerCase() === raw.toLowerCase())) return
  throw new FnrError('Usage', `invalid argument ${JSON.stringify(raw)} for "--image-pull-policy" flag: must be one of: ${IMAGE_PULL_POLICIES.join(', ')}`, {details: {commandLine: true}})
}

export const EVAL_FLAG_SPECS = {
  image: {kind: 'string', char: 'i', summary: 'Function image (as kpt\'s -i), run through the exec config (the functions fnr ships, or --config), --runner, or else a container runtime (docker, podman, nerdctl, or fnr\'s own with runc; docs/container-runtime.md).', exclusive: ['exec']},
  exec: {kind: 'string', summary: 'Executable function and its arguments, e.g. "./fn --flag" (no shell).', exclusive: ['image']},
  'fn-config': {kind: 'string', summary: 'File holding the functionConfig resource.'},
  output: {kind: 'string', char: 'o', summary: 'stdout (wrapped ResourceList), unwrap (YAML documents) or a new directory; default: DIR, in place (stdout when reading stdin).'},
  'results-dir': {kind: 'string', summary: 'Write results.yaml (a kpt FunctionResultList) into this directory.'},
  save: {kind: 'boolean', char: 's', summary: 'After the function ran, add it to DIR\'s Kptfile pipeline (with its config and selectors), as kpt does: in .pipeline.mutators, or .pipeline.validators with --type validator. Needs --type.'},
  type: {kind: 'string', char: 't', summary: 'mutator or validator: the Kptfile list --save adds the function to.'},
  'include-meta-resources': {kind: 'boolean', char: 'm', summary: 'kpt\'s deprecated flag (the Kptfile and other meta resources are always included): an error, with kpt\'s message.'},
  'image-pull-policy': {kind: 'string', summary: 'Always, IfNotPresent (default) or Never (any case), as kpt: when a container runtime pulls the image. The exec config runs local binaries, and --runner\'s server pulls by its own policy.'},
  network: {kind: 'boolean', summary: 'Let a container function use the host\'s network (default: none but loopback), as kpt. The exec config\'s functions are local processes with the host\'s network already; an error with --exec (as kpt) and --runner.'},
  mount: {kind: 'string', multiple: true, multipleNonGreedy: true, summary: 'kpt\'s container mounts (docker --mount syntax; read-only unless rw=true); fnr\'s own runtime takes type=bind. An error for an image the exec config maps (no container), with --exec and with --runner.'},
  'as-current-user': {kind: 'boolean', summary: 'Run a container function with fnr\'s uid and gid instead of nobody, as kpt. The exec config\'s functions already do; an error with --exec (as kpt) and --runner.'},
  keywords: {kind: 'string', char: 'k', multiple: true, multipleNonGreedy: true, summary: 'kpt\'s function keywords for shell completion: accepted, no effect.'},
  'allow-alpha-wasm': {kind: 'boolean', summary: 'kpt\'s switch for alpha wasm functions: accepted, no effect (fnr runs no wasm functions).'},
  input: {kind: 'string', multiple: true, multipleNonGreedy: true, summary: 'File or directory of KRM resources (repeatable), read like kpt fn source, instead of DIR; "-" means stdin. (No short form: -i is --image, as in kpt.)'},
  timeout: {kind: 'duration', summary: 'Kill the function after this long.', default: 5 * 60_000, defaultHelp: '5m'},
  'max-output-size': {kind: 'integer', summary: 'Largest function output accepted, in bytes.', default: 256 * 1024 * 1024, min: 1024},
  'fail-on-error-results': {kind: 'boolean', summary: 'Exit 1 (and write nothing) when the function reports error-severity results.', default: false},
  'truncate-output': {kind: 'boolean', summary: 'Show at most 4 lines of results and stderr on the console.', default: true, allowNo: true},
  color: {kind: 'boolean', summary: 'Colour the console tags when stderr is a terminal (also off with NO_COLOR).', default: true, allowNo: true},
  runner: {kind: 'string', summary: 'Run --image through a running function runner (fnr serve, or Porch\'s) at HOST:PORT over gRPC, e.g. an image fnr does not ship.', exclusive: ['exec']},
  env: {kind: 'string', char: 'e', multiple: true, multipleNonGreedy: true, summary: 'KEY=VALUE added to the function\'s environment (repeatable; --exec and --image, not --runner); KEY alone passes fnr\'s own value.'},
  'exit-codes': EXIT_CODES_SPEC,
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
    [`${prefix}-labels`]: {kind: 'string', multiple: true, multipleNonGreedy: true, summary: `${what} with this label (KEY=VALUE, repeatable).`, helpGroup: group},
    [`${prefix}-annotations`]: {kind: 'string', multiple: true, multipleNonGreedy: true, summary: `${what} with this annotation (KEY=VALUE, repeatable).`, helpGroup: group},
  }
}

function selectorFrom(values: Record<string, FlagValue>, prefix: 'match' | 'exclude'): Selector {
  const pairs = (name: string): Record<string, string> | undefined => {
    const list = values[`${prefix}-${name}`] as string[] | undefined
    if (!list || list.length === 0) return undefined
    const out: Record<string, string> = {}
    for (const kv of list.flatMap((v) => v.split(','))) {
      const eq = kv.indexOf('=')
      if (eq <= 0) throw usage(`--${prefix}-${name} takes KEY=VALUE, got ${JSON.stringify(kv)}`)
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

/** A command-line error (kpt prints these in its CLI library's form, render-error.ts). */
function usage(message: string): FnrError {
  return new FnrError('Usage', message, {details: {commandLine: true}})
}

/**
 * The checks kpt makes of its own flags before anything runs, in kpt's order and words where a
 * script would match them (--include-meta-resources, --save and --type, the container-only flags
 * with --exec), and the flags fnr's runtimes cannot honour, each named with the runtime.
 */
function checkKptFlags(values: Record<string, FlagValue>, given: ReadonlySet<string>): void {
  if (values['include-meta-resources']) throw usage('--include-meta-resources is no longer necessary because meta resources are now included by default')
  const type = values.type as string | undefined
  if (values.save) {
    if (!type) throw usage('--type must be specified if saving functions to Kptfile (--save=true)')
    if (type !== 'mutator' && type !== 'validator') throw usage('--type must be either `mutator` or `validator`')
  }
  checkImagePullPolicy(values['image-pull-policy'] as string | undefined)
  const containerOnly = ['mount', 'as-current-user', 'network'].filter((name) => given.has(name) && (name !== 'mount' || (values.mount as string[]).length > 0))
  if (containerOnly.length === 0) return
  const named = containerOnly.map((n) => `--${n}`).join(', ')
  if (values.exec !== undefined) {
    throw usage(`${named}: --mount, --as-current-user and --network can only be used with container functions (--exec runs a local binary)`)
  }
  if (values.runner !== undefined) {
    throw usage(`${named} cannot be passed through --runner: the function evaluator protocol (proto/evaluator.proto, EvaluateFunctionRequest: resource_list and image only) carries no container options; the runner's own runtime decides them`)
  }
  // An image the exec config maps runs as a local binary as fnr's user with the host's network:
  // --network and --as-current-user already hold, and a mount has nowhere to go (eval.ts refuses
  // it then); any other image runs in a container runtime, which takes all three.
}

/** Where the resources come from (DIR, "-", --input, or the current directory) and go (--output, or DIR in place). */
function packageTarget(values: Record<string, FlagValue>, given: ReadonlySet<string>, positionals: readonly string[]): {inputs: string[]; output: string; dir?: string} {
  let inputs = (values.input as string[] | undefined) ?? []
  // an empty --output is kpt's default, as if not given
  const outputGiven = given.has('output') && values.output !== ''
  let output = outputGiven ? (values.output as string) : 'stdout'
  const dir = positionals[0] ?? (inputs.length === 0 ? '.' : undefined)
  if (dir !== undefined) {
    if (inputs.length > 0) throw usage(`give the package as DIR or as --input, not both (got ${JSON.stringify(dir)} and --input)`)
    inputs = dir === '-' ? [] : [dir]
    if (dir !== '-' && !outputGiven) output = dir
  }
  return {inputs, output, dir}
}

/**
 * EvalOptions from parsed flags. `positionals` is kpt's `fnr eval [DIR | -]`: DIR is read and
 * written in place (unless --output says otherwise), "-" is stdin, and no DIR (nor --input) means
 * the current directory, as in kpt.
 */
export function evalOptionsFromFlags(values: Record<string, FlagValue>, given: ReadonlySet<string>, fnConfigArgs: string[], positionals: string[] = []): Omit<EvalOptions, never> {
  const str = (name: string): string | undefined => values[name] as string | undefined
  checkKptFlags(values, given)
  if (positionals.length > 1) {
    throw usage(`0 or 1 arguments supported, function arguments go after '--' (got ${positionals.map((p) => JSON.stringify(p)).join(' ')}; give one DIR or -, and function config after "--", e.g. -- namespace=prod)`)
  }
  const {inputs, output, dir} = packageTarget(values, given, positionals)
  if (str('runner') !== undefined && str('exec') !== undefined) throw usage('--runner runs images: give --image, not --exec')
  const env = (values.env as string[] | undefined) ?? []
  if (env.length > 0 && str('runner') !== undefined) {
    throw usage('--env cannot be passed through --runner: the function evaluator protocol (proto/evaluator.proto, EvaluateFunctionRequest: resource_list and image only) carries no environment; start the runner with the variables and `fnr serve --exec-env NAME` instead')
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
    ...(values.save ? {save: {type: str('type') as 'mutator' | 'validator', dir: dir === undefined || dir === '-' ? '' : dir}} : {}),
    container: {
      pullPolicy: str('image-pull-policy'),
      network: values.network === true,
      asCurrentUser: values['as-current-user'] === true,
      mounts: (values.mount as string[] | undefined) ?? [],
    },
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
