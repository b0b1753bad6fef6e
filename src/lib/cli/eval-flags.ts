/**
 * `fnr eval`'s flags, as plain specs shared by the oclif command (help, manifest) and the
 * oclif-free fast path in bin/run.js, and the one function that turns parsed values into
 * EvalOptions.
 */
import {resolveExecPaths} from '../config/embedded.js'
import type {EvalOptions} from '../eval.js'
import {EXEC_FLAG_SPECS, type FlagSpecs, type FlagValue} from './spec.js'

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
  ...EXEC_FLAG_SPECS,
} satisfies FlagSpecs

export function evalOptionsFromFlags(values: Record<string, FlagValue>, given: ReadonlySet<string>, fnConfigArgs: string[]): Omit<EvalOptions, never> {
  const str = (name: string): string | undefined => values[name] as string | undefined
  return {
    inputs: (values.input as string[] | undefined) ?? [],
    image: str('image'),
    exec: str('exec'),
    fnConfigPath: str('fn-config'),
    fnConfigArgs,
    output: str('output') ?? 'stdout',
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
