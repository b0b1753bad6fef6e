import path from 'node:path'

import {Args} from '@oclif/core'

import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {runInterruptible} from '../cli/interrupt.js'
import {runTestCommand, TEST_FLAG_SPECS, testOptionsFromFlags} from '../cli/test-command.js'

export default class Test extends FnrCommand {
  static summary = 'Run a KRM function over a folder of test cases (kpt e2e layout) and compare with the expectations.'

  static description = `Every directory under the given folders that holds a .expected/ directory is a case: the
directory is the input package (or holds only resourcelist.yaml, a ResourceList), run through the
function like \`fnr eval\` (in place on a scratch copy). .expected/ holds what must come out:
diff.patch (the change to the package, as in kpt's e2e tests; none means no change),
resourcelist.yaml (the output of a ResourceList case), results.yaml (kpt's FunctionResultList), and
config.yaml (exitCode, stdErr, stdErrRegEx, args, fnConfig, image, execPath, timeout).
fn-config.yaml in .expected/ is the functionConfig when config.yaml names none.

--runner HOST:PORT evaluates each case's image through a running function runner (fnr serve, or
Porch's) over gRPC instead of locally, e.g. to test a shipped image through fnr serve's pod
runtime in CI; --runner-ca-file dials it with TLS.

Mismatches are printed as unified diffs. Cases run --concurrency at a time and are reported in name
order, then a summary line. --update rewrites the expectations from the actual run.

Exit codes: 0 every case passed (or was updated), 1 some case failed, 2 usage, 3 a case's layout or
config is invalid, 4 the function (--image, --exec) was not found.`

  static examples = [
    {description: 'Test a function under development in CI, with a JUnit report:', command: '<%= config.bin %> <%= command.id %> testdata --exec ./my-fn --junit reports/fn.xml'},
    {description: 'Test the shipped set-namespace function:', command: '<%= config.bin %> <%= command.id %> functions/testdata/set-namespace --image fnr.local/set-namespace:v0.4'},
    {description: 'Test a container image through a running fnr serve (its pod runtime runs the image):', command: '<%= config.bin %> <%= command.id %> testdata --image ghcr.io/me/my-fn:v1 --runner 127.0.0.1:9445'},
    {description: 'Rewrite the expectations after an intended change:', command: '<%= config.bin %> <%= command.id %> testdata --exec ./my-fn --update'},
  ]

  static strict = false

  static args = {
    folders: Args.string({description: 'Folders of test cases, or case directories (several may be given).', ignoreStdin: true}),
  }

  static flags = oclifFlags(TEST_FLAG_SPECS)

  async run(): Promise<void> {
    const {flags, argv, metadata} = await this.parse(Test)
    const given = new Set(Object.keys(flags).filter((name) => !metadata.flags[name]?.setFromDefault))
    await runInterruptible(
      async (interrupt) => {
        const fnrCommand = [process.execPath, path.join(this.config.root, 'bin', 'run.js')]
        const options = {...testOptionsFromFlags(flags, given, argv as string[]), signal: interrupt.signal, fnrCommand}
        process.exitCode = await runTestCommand(options, {stdout: process.stdout, stderr: process.stderr})
      },
      (err) => this.catch(err),
    )
  }
}
