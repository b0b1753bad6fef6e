import {Args} from '@oclif/core'

import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {colorEnabled, consoleStream} from '../cli/color.js'
import {runInterruptible} from '../cli/interrupt.js'
import {RENDER_FLAG_SPECS, renderOptionsFromFlags} from '../cli/render-flags.js'
import {errorFormFor, type ErrorForm} from '../cli/render-error.js'
import {normalizeBooleanFlags, type FlagValue} from '../lib/flags/spec.js'
import {runRender} from '../lib/render.js'


export default class Render extends FnrCommand {
  static summary = 'Render a kpt package: run its Kptfile pipeline (and its subpackages\') like kpt fn render.'

  static description = `Runs the mutators, then the validators, of DIR's Kptfile pipeline, subpackages first
(depth-first, in name order), with kpt's functionConfig (configMap, configPath), selectors and
exclude, and writes the result back into DIR (or --output). Console output and results.yaml are
kpt's. Nothing is written when a function fails.

image: functions run through the exec config (the functions fnr ships, or --config), through
--runner HOST:PORT (a running fnr serve, so CI renders a package exactly as Porch will), or else
in a container runtime: docker, podman or nerdctl as kpt runs them, or fnr's own with runc, which
needs no daemon (FNR_CONTAINER_RUNTIME chooses; docs/container-runtime.md). exec:
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
    const options = renderOptionsFromFlags(flags as Record<string, FlagValue>, given, args.dir)
    const runner = flags.runner as string | undefined
    const caFile = flags['runner-ca-file'] as string | undefined
    await runInterruptible(
      async (interrupt, onClose) => {
        let imageRunner
        if (runner) {
          const remote = await import('../lib/fntest/remote.js')
          const client = await remote.connectRunner({address: runner, ...(caFile ? {caFile} : {})}, options.maxOutputBytes)
          onClose(() => client.close())
          imageRunner = (image: string, input: Buffer) => remote.callRunner(client, image, input, options.timeoutMs, interrupt.signal)
        }
        await runRender({...options, imageRunner, signal: interrupt.signal}, {stdin: process.stdin, stdout: process.stdout, stderr: consoleStream(process.stderr, colorEnabled(process.stderr, flags.color as boolean))})
      },
      (err, exitCode) => this.catch(err, exitCode),
    )
  }
}
