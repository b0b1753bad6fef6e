import {Args} from '@oclif/core'

import {resolveExecPaths} from '../lib/config/embedded.js'
import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {colorEnabled, consoleStream} from '../cli/color.js'
import {runInterruptible} from '../cli/interrupt.js'
import {checkImagePullPolicy, EXIT_CODES_SPEC} from '../cli/eval-flags.js'
import {errorFormFor, type ErrorForm} from '../cli/render-error.js'
import {EXEC_FLAG_SPECS, normalizeBooleanFlags, type FlagSpecs} from '../lib/flags/spec.js'
import {FnrError} from '../lib/errors.js'
import {runRender} from '../lib/render.js'

const RENDER_FLAG_SPECS = {
  'allow-exec': {kind: 'boolean', summary: 'Allow the pipeline\'s `exec:` functions (binaries run in the current directory, as kpt runs them).', default: false},
  'allow-network': {kind: 'boolean', summary: 'Let the functions use the network (kpt: container functions). The exec config\'s functions are local processes with the host\'s network already; an error with --runner, which cannot carry it.', default: false},
  'image-pull-policy': {kind: 'string', summary: 'Always, IfNotPresent or Never (any case), as kpt. Checked; fnr pulls no images (the exec config runs local binaries, and --runner\'s server pulls by its own policy), so it changes nothing.'},
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

export default class Render extends FnrCommand {
  static summary = 'Render a kpt package: run its Kptfile pipeline (and its subpackages\') like kpt fn render.'

  static description = `Runs the mutators, then the validators, of DIR's Kptfile pipeline, subpackages first
(depth-first, in name order), with kpt's functionConfig (configMap, configPath), selectors and
exclude, and writes the result back into DIR (or --output). Console output and results.yaml are
kpt's. Nothing is written when a function fails.

image: functions run through the exec config (the functions fnr ships, or --config), or through
--runner HOST:PORT (a running fnr serve, so CI renders a package exactly as Porch will). exec:
functions run only with --allow-exec. kpt's flags are all accepted (--allow-network,
--image-pull-policy, --allow-alpha-wasm: see each).

Exit codes, as kpt: 0 rendered, 1 any failure, with kpt's "Error: ..." line (none after a
function's [FAIL] block), 130 and 143 interrupted. With --exit-codes fnr (or FNR_EXIT_CODES=fnr):
fnr's codes by kind (docs/cli.md).`

  static examples = [
    {description: 'Render a package in place:', command: '<%= config.bin %> <%= command.id %> my-pkg'},
    {description: 'Render with exec functions and keep the results:', command: '<%= config.bin %> <%= command.id %> my-pkg --allow-exec --results-dir /tmp/res'},
    {description: 'Render through a running fnr serve, as Porch would:', command: '<%= config.bin %> <%= command.id %> my-pkg --runner 127.0.0.1:9445'},
  ]

  static args = {
    dir: Args.string({description: 'The package directory (default: the current directory).', required: false}),
  }

  // kpt fn render ignores arguments after PKG_PATH; so does fnr render.
  static strict = false

  static flags = oclifFlags(RENDER_FLAG_SPECS)

  protected errorForm(): ErrorForm {
    return errorFormFor('render', this.argv)
  }

  async run(): Promise<void> {
    const {args, flags, metadata} = await this.parse(Render, normalizeBooleanFlags(this.argv, RENDER_FLAG_SPECS))
    const given = new Set(Object.keys(flags).filter((name) => !metadata.flags[name]?.setFromDefault))
    const str = (name: string): string | undefined => (flags as Record<string, unknown>)[name] as string | undefined
    if (str('runner-ca-file') && !str('runner')) throw new FnrError('Usage', '--runner-ca-file needs --runner', {details: {commandLine: true}})
    checkImagePullPolicy(str('image-pull-policy'))
    if (flags['allow-network'] && str('runner')) {
      throw new FnrError('Usage', '--allow-network cannot be passed through --runner: the function evaluator protocol (proto/evaluator.proto, EvaluateFunctionRequest: resource_list and image only) carries no container options; the runner\'s own runtime decides them', {details: {commandLine: true}})
    }
    await runInterruptible(
      async (interrupt, onClose) => {
        let imageRunner
        if (str('runner')) {
          const remote = await import('../lib/fntest/remote.js')
          const client = await remote.connectRunner({address: str('runner')!, ...(str('runner-ca-file') ? {caFile: str('runner-ca-file')} : {})}, flags['max-output-size'] as number)
          onClose(() => client.close())
          imageRunner = (image: string, input: Buffer) => remote.callRunner(client, image, input, flags.timeout as number, interrupt.signal)
        }
        await runRender(
          {
            dir: args.dir ?? '.',
            allowExec: flags['allow-exec'] as boolean,
            output: str('output') ?? '',
            resultsDir: str('results-dir'),
            timeoutMs: flags.timeout as number,
            maxOutputBytes: flags['max-output-size'] as number,
            truncateOutput: flags['truncate-output'] as boolean,
            execPaths: {
              ...resolveExecPaths(str('config')!, str('functions')!, given.has('config'), given.has('functions'), {cli: true}),
              defaultImagePrefix: str('default-image-prefix')!,
            },
            imageRunner,
            signal: interrupt.signal,
          },
          {stdin: process.stdin, stdout: process.stdout, stderr: consoleStream(process.stderr, colorEnabled(process.stderr, flags.color as boolean))},
        )
      },
      (err, exitCode) => this.catch(err, exitCode),
    )
  }
}
