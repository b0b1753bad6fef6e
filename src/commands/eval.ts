import {FnrCommand} from '../cli/command.js'
import {EVAL_FLAG_SPECS, evalOptionsFromFlags, splitFunctionConfigArgs} from '../cli/eval-flags.js'
import {oclifFlags} from '../cli/flags.js'
import {normalizeBooleanFlags} from '../lib/flags/spec.js'
import {colorEnabled, consoleStream} from '../cli/color.js'
import {runInterruptible} from '../cli/interrupt.js'
import {errorFormFor, type ErrorForm} from '../cli/render-error.js'
import {FnrError} from '../lib/errors.js'
import {runEval, type EvalReport, type FunctionRunner} from '../lib/eval.js'

export default class Eval extends FnrCommand {
  static summary = 'Run one KRM function on a ResourceList from stdin or on files, like kpt fn eval.'

  static description = `kpt fn eval's command line, unchanged: \`fnr eval [DIR]\` reads the package in DIR (default: the
current directory) and writes the result back into it; \`fnr eval -\` reads a ResourceList (or plain
KRM YAML documents) on stdin and writes one to stdout. --input files and directories (repeatable)
are read like \`kpt fn source\`, in place of DIR. The function is --exec "PATH ARGS" (run without a
shell) or -i/--image: an image fnr ships (or --config maps), any image through --runner
HOST:PORT (a running fnr serve), or else any image in a container runtime: docker, podman or
nerdctl as kpt runs them, or fnr's own with runc, which needs no daemon (FNR_CONTAINER_RUNTIME
chooses; docs/container-runtime.md). Its functionConfig comes from --fn-config FILE or from
"-- key=value ..." (a ConfigMap named function-input, as kpt builds it). --match-* and
--exclude-* send only some resources, merged back as kpt does. -s/--save -t mutator|validator
adds the function to DIR's Kptfile pipeline afterwards, as kpt does.

Output: in place for DIR; otherwise stdout as a wrapped ResourceList (so \`kpt fn source DIR | fnr
eval - ... | kpt fn sink OUT\` works), plain YAML documents with --output unwrap, or a new directory
with --output DIR (checked before the function runs). Writes are atomic: on any failure the package
is as it was. A function that exits 0 with an empty output fails (kpt would delete every file).
Progress, results and the function's stderr go to stderr in kpt's format.

--json prints a report on stdout: kpt's FunctionResultList (what --results-dir writes as
results.yaml: exitCode, items: [{image or exec, exitCode, stderr, results}]) plus "output": {to,
inPlace, written, unchanged, deleted}. The resources must then go to a directory (DIR in place, or
--output DIR): with --output stdout or unwrap, stdout is the resources, and --json is a usage
error. A failure prints {"error": {kind, message, exitCode}} (beside the FunctionResultList when
the function ran), with fnr's exit codes.

Exit codes, as kpt: 0 the function exited 0 (even with error-severity results, unless
--fail-on-error-results), 1 any failure, with kpt's "error: ..." line (none after a function's
[FAIL] block), 130 and 143 interrupted (SIGINT, SIGTERM). With --exit-codes fnr (or
FNR_EXIT_CODES=fnr, or --json): fnr's codes by kind (docs/cli.md): 1 the function failed or its
output was unusable, 2 usage or bad input, 4 --image not mapped, 6 --timeout passed.`

  static examples = [
    {description: 'Set a namespace on a package, in place (as kpt fn eval DIR):', command: '<%= config.bin %> <%= command.id %> my-pkg -i fnr.local/set-namespace:v0.4 -- namespace=prod'},
    {description: 'In a kpt pipeline:', command: 'kpt fn source my-pkg | <%= config.bin %> <%= command.id %> - --exec ./my-fn | kpt fn sink out'},
    {description: 'Print plain YAML for kubectl:', command: '<%= config.bin %> <%= command.id %> my-pkg -i fnr.local/set-labels:v0.2 -o unwrap -- app=web | kubectl apply -f -'},
    {description: 'Run it and add it to the package\'s Kptfile pipeline:', command: '<%= config.bin %> <%= command.id %> my-pkg -s -t mutator -i fnr.local/set-namespace:v0.4 -- namespace=prod'},
    {description: 'Only the Deployments, through a running fnr serve:', command: '<%= config.bin %> <%= command.id %> my-pkg --image ghcr.io/me/my-fn:v1 --runner 127.0.0.1:9445 --match-kind Deployment'},
  ]

  static strict = false

  // --json runs here (bin/run.js sends it to oclif, as --runner): the fast path has no JSON output.
  static enableJsonFlag = true

  // Shared with the oclif-free fast path in bin/run.js (src/cli/fast-eval.ts).
  static flags = oclifFlags(EVAL_FLAG_SPECS)

  protected errorForm(): ErrorForm {
    return errorFormFor('eval', this.argv)
  }

  async run(): Promise<EvalReport | undefined> {
    const {flagArgs, fnConfigArgs} = splitFunctionConfigArgs(this.argv)
    const {flags, argv, metadata} = await this.parse(Eval, normalizeBooleanFlags(flagArgs, EVAL_FLAG_SPECS))
    const given = new Set(Object.keys(flags).filter((name) => !metadata.flags[name]?.setFromDefault))
    let report: EvalReport | undefined
    await runInterruptible(
      async (interrupt, onClose) => {
        const options = {...evalOptionsFromFlags(flags, given, fnConfigArgs, argv as string[]), json: this.jsonEnabled(), signal: interrupt.signal}
        let runner: FunctionRunner | undefined
        if (options.runnerAddress !== undefined) {
          // Only here (bin/run.js sends --runner to oclif): the fast path never loads gRPC.
          if (options.image === undefined) throw new FnrError('Usage', '--runner runs images: give --image')
          const remote = await import('../lib/fntest/remote.js')
          const client = await remote.connectRunner({address: options.runnerAddress}, options.maxOutputBytes)
          onClose(() => client.close())
          const image = options.image
          runner = (_label, input) => remote.callRunner(client, image, input, options.timeoutMs, options.signal)
        }
        report = await runEval(options, {stdin: process.stdin, stdout: process.stdout, stderr: consoleStream(process.stderr, colorEnabled(process.stderr, flags.color as boolean))}, runner)
      },
      (err, exitCode) => this.catch(err, exitCode),
    )
    return report
  }
}
