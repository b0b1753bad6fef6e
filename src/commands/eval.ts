import {Flags} from '@oclif/core'

import {FnrCommand} from '../lib/cli/command.js'
import {execFlags, goDuration} from '../lib/cli/flags.js'
import {resolveExecPaths} from '../lib/config/embedded.js'
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
    {description: 'Set a namespace on a package, in place:', command: '<%= config.bin %> <%= command.id %> --input examples/hello --output examples/hello --image set-namespace:v0.4.1 -- namespace=prod'},
    {description: 'In a kpt pipeline:', command: 'kpt fn source examples/hello | <%= config.bin %> <%= command.id %> --exec ./my-fn | kpt fn sink out'},
    {description: 'Print plain YAML for kubectl:', command: '<%= config.bin %> <%= command.id %> -i examples/hello --image set-labels:v0.2.2 -o unwrap -- app=web | kubectl apply -f -'},
  ]

  static strict = false

  static flags = {
    input: Flags.string({char: 'i', summary: 'File or directory of KRM resources (repeatable); "-" or none means stdin.', multiple: true}),
    image: Flags.string({summary: 'Function image, resolved through the exec config.', exclusive: ['exec']}),
    exec: Flags.string({summary: 'Executable function and its arguments, e.g. "./fn --flag" (no shell).', exclusive: ['image']}),
    'fn-config': Flags.string({summary: 'File holding the functionConfig resource.'}),
    output: Flags.string({char: 'o', summary: 'stdout (wrapped ResourceList), unwrap (YAML documents) or a directory.', default: 'stdout'}),
    'results-dir': Flags.string({summary: 'Write results.yaml (a kpt FunctionResultList) into this directory.'}),
    timeout: goDuration({summary: 'Kill the function after this long.', default: 5 * 60_000, defaultHelp: async () => '5m'}),
    'max-output-size': Flags.integer({summary: 'Largest function output accepted, in bytes.', default: 256 * 1024 * 1024, min: 1024}),
    'fail-on-error-results': Flags.boolean({summary: 'Exit 1 (and write nothing) when the function reports error-severity results.', default: false}),
    'truncate-output': Flags.boolean({summary: 'Show at most 4 lines of results and stderr on the console.', default: true, allowNo: true}),
    ...execFlags,
  }

  async run(): Promise<void> {
    const dash = this.argv.indexOf('--')
    const fnConfigArgs = dash >= 0 ? this.argv.slice(dash + 1) : []
    const {flags, argv, metadata} = await this.parse(Eval, dash >= 0 ? this.argv.slice(0, dash) : this.argv)
    if (argv.length > 0) throw new FnrError('Usage', `unexpected argument ${JSON.stringify(argv[0])}; function config goes after "--" (e.g. -- namespace=prod)`)
    await runEval(
      {
        inputs: flags.input ?? [],
        image: flags.image,
        exec: flags.exec,
        fnConfigPath: flags['fn-config'],
        fnConfigArgs,
        output: flags.output,
        resultsDir: flags['results-dir'],
        timeoutMs: flags.timeout,
        maxOutputBytes: flags['max-output-size'],
        failOnErrorResults: flags['fail-on-error-results'],
        truncateOutput: flags['truncate-output'],
        execPaths: {
          ...resolveExecPaths(flags.config, flags.functions, !metadata.flags.config?.setFromDefault, !metadata.flags.functions?.setFromDefault),
          defaultImagePrefix: flags['default-image-prefix'],
        },
      },
      {stdin: process.stdin, stdout: process.stdout, stderr: process.stderr},
    )
  }
}
