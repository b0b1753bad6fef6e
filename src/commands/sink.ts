import {Args} from '@oclif/core'

import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {runInterruptible} from '../cli/interrupt.js'
import {errorFormFor, type ErrorForm} from '../cli/render-error.js'
import {SINK_FLAG_SPECS} from '../cli/source-sink-flags.js'
import {runSink} from '../lib/source-sink.js'

export default class Sink extends FnrCommand {
  static summary = 'Write a ResourceList from stdin into a new directory, like kpt fn sink (the end of a pipe).'

  static description = `kpt fn sink's command line and files, byte for byte: the resources of a ResourceList (or of
plain YAML documents) on stdin are written into DIR, each to the file its path annotation names
(resources without one get kpt's default file names). DIR must not exist; it appears whole, or not
at all when anything fails. Unlike kpt, an empty stdin (the command before fnr sink in the pipe
gave nothing, e.g. it failed) is an error and writes nothing, where kpt would make an empty DIR; a
list with "items: []" still makes the empty DIR.

Exit codes, as kpt: 0 written, 1 any failure with kpt's "error: ..." line. With --exit-codes fnr (or
FNR_EXIT_CODES=fnr): fnr's codes by kind (docs/cli.md).`

  static examples = [
    {description: 'Run a function on a copy of a package:', command: 'fnr source my-pkg | fnr eval - -i fnr.local/set-labels:v0.2 -- app=web | <%= config.bin %> <%= command.id %> my-pkg-web'},
  ]

  static args = {
    dir: Args.string({description: 'The directory to create.', required: false}),
  }

  // kpt ignores arguments after DIR; its "requires at least 1 arg(s)" comes from the library.
  static strict = false

  static flags = oclifFlags(SINK_FLAG_SPECS)

  protected errorForm(): ErrorForm {
    return errorFormFor('sink', this.argv)
  }

  async run(): Promise<void> {
    const {argv} = await this.parse(Sink)
    await runInterruptible(
      (interrupt) => runSink({args: argv as string[], signal: interrupt.signal}, {stdin: process.stdin}).then(() => undefined),
      (err, exitCode) => this.catch(err, exitCode),
    )
  }
}
