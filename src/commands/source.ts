import {Args} from '@oclif/core'

import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {runInterruptible} from '../cli/interrupt.js'
import {errorFormFor, type ErrorForm} from '../cli/render-error.js'
import {SOURCE_FLAG_SPECS} from '../cli/source-sink-flags.js'
import {runSource} from '../lib/source-sink.js'

export default class Source extends FnrCommand {
  static summary = 'Print a package as a ResourceList, like kpt fn source (the start of a pipe).'

  static description = `kpt fn source's command line and output, byte for byte: DIR (default: the current directory;
a single file works too) is read as fnr eval and kpt read a package (every KRM file, subpackages,
.krmignore; documents that are not KRM pass through) and printed as a wrapped ResourceList whose
items carry their path and index annotations, so \`fnr source DIR | fnr eval - … | fnr sink OUT\`
runs a function on a package without writing to it. -o unwrap prints plain YAML documents without
those annotations; --fn-config FILE adds FILE's one object as the list's functionConfig.

Exit codes, as kpt: 0 printed, 1 any failure with kpt's "error: ..." line. With --exit-codes fnr (or
FNR_EXIT_CODES=fnr): fnr's codes by kind (docs/cli.md).`

  static examples = [
    {description: 'Run a function on a copy of a package:', command: '<%= config.bin %> <%= command.id %> my-pkg | fnr eval - -i fnr.local/set-namespace:v0.4 -- namespace=prod | fnr sink my-pkg-prod'},
    {description: 'Plain YAML for kubectl:', command: '<%= config.bin %> <%= command.id %> my-pkg -o unwrap | kubectl apply -f -'},
  ]

  static args = {
    dir: Args.string({description: 'The package directory or file (default: the current directory).', required: false}),
  }

  // kpt's "accepts at most 1 arg(s)" comes from the library, in kpt's words.
  static strict = false

  static flags = oclifFlags(SOURCE_FLAG_SPECS)

  protected errorForm(): ErrorForm {
    return errorFormFor('source', this.argv)
  }

  async run(): Promise<void> {
    const {flags, argv} = await this.parse(Source)
    await runInterruptible(
      (interrupt) => runSource({args: argv as string[], output: flags.output as string, fnConfigPath: flags['fn-config'] as string | undefined, signal: interrupt.signal}, {stdout: process.stdout}),
      (err, exitCode) => this.catch(err, exitCode),
    )
  }
}
