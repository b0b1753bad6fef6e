import {FnrCommand} from '../lib/cli/command.js'
import {EVAL_FLAG_SPECS, evalOptionsFromFlags, splitFunctionConfigArgs} from '../lib/cli/eval-flags.js'
import {oclifFlags} from '../lib/cli/flags.js'
import {onInterrupt} from '../lib/cli/interrupt.js'
import {FnrError} from '../lib/errors.js'
import {runEval} from '../lib/eval.js'

export default class Eval extends FnrCommand {
  static summary = 'Run one KRM function on a ResourceList from stdin or on files, like kpt fn eval.'

  static description = `Input is a ResourceList on stdin (or plain KRM YAML documents), or --input files and
directories read like \`kpt fn source\`. The function is --exec "PATH ARGS" (run without a shell) or
--image, looked up in the exec runtime's config (by default the functions fnr ships). Its
functionConfig comes from --fn-config FILE or from "-- key=value ..." (a ConfigMap named
function-input, as kpt builds it).

Output goes to stdout as a wrapped ResourceList (so \`kpt fn source DIR | fnr eval ... | kpt fn sink
OUT\` works), as plain YAML documents with --output unwrap, or into a directory with --output DIR
(written like \`kpt fn sink\`: DIR must not exist; when DIR is the single --input directory, files
are updated in place). Progress, results and the function's stderr go to stderr in kpt's format.

Exit codes: 0 when the function exits 0 (even with error-severity results, as in kpt, unless
--fail-on-error-results), 1 when it exits non-zero (nothing is written), 2 for usage errors, 4
when --image is not mapped, 6 when --timeout passes.`

  static examples = [
    {description: 'Set a namespace on a package, in place:', command: '<%= config.bin %> <%= command.id %> --input examples/hello --output examples/hello --image fnr.local/set-namespace:v0.4 -- namespace=prod'},
    {description: 'In a kpt pipeline:', command: 'kpt fn source examples/hello | <%= config.bin %> <%= command.id %> --exec ./my-fn | kpt fn sink out'},
    {description: 'Print plain YAML for kubectl:', command: '<%= config.bin %> <%= command.id %> -i examples/hello --image fnr.local/set-labels:v0.2 -o unwrap -- app=web | kubectl apply -f -'},
  ]

  static strict = false

  // Shared with the oclif-free fast path in bin/run.js (src/lib/cli/fast-eval.ts).
  static flags = oclifFlags(EVAL_FLAG_SPECS)

  async run(): Promise<void> {
    const {flagArgs, fnConfigArgs} = splitFunctionConfigArgs(this.argv)
    const {flags, argv, metadata} = await this.parse(Eval, flagArgs)
    if (argv.length > 0) throw new FnrError('Usage', `unexpected argument ${JSON.stringify(argv[0])}; function config goes after "--" (e.g. -- namespace=prod)`)
    const given = new Set(Object.keys(flags).filter((name) => !metadata.flags[name]?.setFromDefault))
    const interrupt = onInterrupt()
    try {
      await runEval({...evalOptionsFromFlags(flags, given, fnConfigArgs), signal: interrupt.signal}, {stdin: process.stdin, stdout: process.stdout, stderr: process.stderr})
    } catch (err) {
      await this.catch(err as Error)
      if (interrupt.exitCode !== undefined) process.exitCode = interrupt.exitCode
    } finally {
      interrupt.dispose()
    }
  }
}
