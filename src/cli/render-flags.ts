/**
 * `fnr render`'s flags and what they mean, shared by the oclif command (src/commands/render.ts)
 * and the oclif-free fast path (fast-render.ts), so both read a command line the same way.
 */
import {resolveExecPaths} from '../lib/config/embedded.js'
import {EXEC_FLAG_SPECS, type FlagSpecs, type FlagValue} from '../lib/flags/spec.js'
import {FnrError} from '../lib/errors.js'
import type {RenderOptions} from '../lib/render.js'
import {checkImagePullPolicy, EXIT_CODES_SPEC} from './eval-flags.js'

export const RENDER_FLAG_SPECS = {
  'allow-exec': {kind: 'boolean', summary: 'Allow the pipeline\'s `exec:` functions (binaries run in the current directory, as kpt runs them).', default: false},
  'allow-network': {kind: 'boolean', summary: 'Let container functions use the host\'s network (default: none but loopback), as kpt. The exec config\'s functions are local processes with the host\'s network already; an error with --runner, which cannot carry it.', default: false},
  'image-pull-policy': {kind: 'string', summary: 'Always, IfNotPresent (default) or Never (any case), as kpt: when a container runtime pulls an image. The exec config runs local binaries, and --runner\'s server pulls by its own policy.'},
  'allow-alpha-wasm': {kind: 'boolean', summary: 'kpt\'s switch for alpha wasm functions: accepted, no effect (fnr runs no wasm functions).', default: false},
  'exit-codes': EXIT_CODES_SPEC,
  output: {kind: 'string', char: 'o', summary: 'stdout (wrapped ResourceList), unwrap (YAML documents) or a new directory; default: the package, in place.'},
  'results-dir': {kind: 'string', summary: 'Write results.yaml (a kpt FunctionResultList) into this directory.'},
  runner: {kind: 'string', summary: 'Run the pipeline\'s `image:` functions through a running function runner (fnr serve, or Porch\'s) at HOST:PORT, so CI renders as Porch will.'},
  'runner-ca-file': {kind: 'string', summary: 'Dial --runner with TLS, trusting the CAs in this PEM file.'},
  timeout: {kind: 'duration', summary: 'Kill a function after this long.', default: 5 * 60_000, defaultHelp: '5m'},
  'max-output-size': {kind: 'integer', summary: 'Largest function output accepted, in bytes.', default: 256 * 1024 * 1024, min: 1024},
  'truncate-output': {kind: 'boolean', summary: 'Show at most 4 lines of results and stderr on the console.', default: true, allowNo: true},
  color: {kind: 'boolean', summary: 'Colour the console tags when stderr is a terminal (also off with NO_COLOR).', default: true, allowNo: true},
  ...EXEC_FLAG_SPECS,
} satisfies FlagSpecs

/**
 * RenderOptions from parsed flags (everything but the runner, which the oclif command connects,
 * and the interrupt signal). The command-line checks run here, before anything is read.
 */
export function renderOptionsFromFlags(values: Record<string, FlagValue>, given: ReadonlySet<string>, dir: string | undefined): Omit<RenderOptions, 'imageRunner' | 'signal'> {
  const str = (name: string): string | undefined => values[name] as string | undefined
  if (str('runner-ca-file') && !str('runner')) throw new FnrError('Usage', '--runner-ca-file needs --runner', {details: {commandLine: true}})
  checkImagePullPolicy(str('image-pull-policy'))
  if (values['allow-network'] && str('runner')) {
    throw new FnrError('Usage', '--allow-network cannot be passed through --runner: the function evaluator protocol (proto/evaluator.proto, EvaluateFunctionRequest: resource_list and image only) carries no container options; the runner\'s own runtime decides them', {details: {commandLine: true}})
  }
  return {
    dir: dir ?? '.',
    allowExec: values['allow-exec'] as boolean,
    output: str('output') ?? '',
    resultsDir: str('results-dir'),
    timeoutMs: values.timeout as number,
    maxOutputBytes: values['max-output-size'] as number,
    truncateOutput: values['truncate-output'] as boolean,
    container: {pullPolicy: str('image-pull-policy'), network: values['allow-network'] === true},
    execPaths: {
      ...resolveExecPaths(str('config')!, str('functions')!, given.has('config'), given.has('functions'), {cli: true}),
      defaultImagePrefix: str('default-image-prefix')!,
    },
  }
}
