import path from 'node:path'

import {Args} from '@oclif/core'

import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {runInterruptible} from '../cli/interrupt.js'
import {runTestCommand, TEST_FLAG_SPECS, testOptionsFromFlags} from '../cli/test-command.js'
import type {JsonSummary} from '../lib/fntest/report.js'

export default class Test extends FnrCommand {
  static summary = 'Run a KRM function over a folder of test cases (kpt e2e layout) and compare with the expectations.'

  static description = `Every directory under the given folders that holds a .expected/ directory is a case (kpt's e2e
layout, as in kpt and the functions catalog), run on a scratch copy: testType render (kpt's
default) renders the package's Kptfile pipeline, testType eval (or a function from --exec/--image or
the case's image/execPath) runs one function like \`fnr eval\`, .expected/exec.sh runs instead of
the command (with a \`kpt\` on its PATH that maps \`kpt fn eval|render\` to fnr), .expected/setup.sh
runs first. A directory holding only resourcelist.yaml is a ResourceList case. .expected/ holds what
must come out: diff.patch (the change to the package; none means no change), resourcelist.yaml,
results.yaml, and config.yaml (kpt's keys: exitCode, stdErr, stdErrRegEx, stdOut, args, fnConfig,
image, execPath, skip, sequential, …; keys that are not kpt's are ignored, as kpt does; fnr adds
timeout).

--runner HOST:PORT evaluates each case's image through a running function runner (fnr serve, or
Porch's) over gRPC instead of locally, e.g. to test a shipped image through fnr serve's pod
runtime in CI; --runner-ca-file dials it with TLS.

Mismatches are printed as unified diffs. Cases run --concurrency at a time and are reported in name
order, then a summary line. A case that cannot run (invalid config, unmapped image, failing
setup.sh) is reported as an error and the others still run. --update rewrites the expectations
from the actual run.

--json sends the console to stderr and prints a JSON summary on stdout (the counts, durationMs,
notRun, signal when interrupted, and cases: [{name, dir, function, status, durationMs, exitCode,
timedOut, problems, updated, warnings}]), whatever the cases' outcome; a run that cannot start
(usage, no case found) prints {"error": {kind, message, exitCode}} instead. The exit codes are
the same with and without it.

Exit codes: 0 every case passed (or was updated or skipped), 1 some case failed or could not run,
2 usage, 3 no case found, 130/143 interrupted (SIGINT/SIGTERM: running cases are reported as
interrupted, no more start).`

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

  static enableJsonFlag = true

  static flags = oclifFlags(TEST_FLAG_SPECS)

  async run(): Promise<JsonSummary | undefined> {
    const {flags, argv, metadata} = await this.parse(Test)
    const given = new Set(Object.keys(flags).filter((name) => !metadata.flags[name]?.setFromDefault))
    let summary: JsonSummary | undefined
    await runInterruptible(
      async (interrupt) => {
        const fnrCommand = [process.execPath, path.join(this.config.root, 'bin', 'run.js')]
        const options = {...testOptionsFromFlags(flags, given, argv as string[]), json: this.jsonEnabled(), signal: interrupt.signal, fnrCommand}
        const outcome = await runTestCommand(options, {stdout: process.stdout, stderr: process.stderr})
        process.exitCode = outcome.exitCode
        summary = outcome.summary
      },
      (err, exitCode) => this.catch(err, exitCode),
    )
    return summary
  }
}
