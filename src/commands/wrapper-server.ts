import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {normaliseGoStyleArgs} from '../lib/config/go-flags.js'
import {parseLimitFlags} from '../lib/grpc/limits.js'
import {createLogger} from '../lib/telemetry/log.js'
import {WRAPPER_FLAG_SPECS, WRAPPER_FLAGS, splitEntrypoint, startWrapperServer} from '../lib/wrapper.js'

export default class WrapperServer extends FnrCommand {
  static summary = 'Run the in-pod gRPC server that executes a function image\'s entrypoint.'

  static description = `Serves evaluator.FunctionEvaluator on --port (9446) and grpc.health.v1. Every
EvaluateFunction call runs the entrypoint given after "--" with the ResourceList on stdin; stdout
is the response, stderr the log. The function pod template starts it as
/wrapper-server-tools/wrapper-server. Accepts Porch's wrapper flags (--port,
--max-request-body-size, --verbosity). The packaged wrapper (scripts/package-wrapper.mjs) takes the
same flags.`

  static examples = ['<%= config.bin %> <%= command.id %> --port 9446 --max-request-body-size 6291456 -- /usr/local/bin/function']

  static strict = false

  // One definition with the packaged executable's parser (lib/wrapper.ts WRAPPER_FLAG_SPECS,
  // parseWrapperArgs); test/wrapper/flags.test.ts checks they agree.
  static flags = oclifFlags(WRAPPER_FLAG_SPECS)

  async run(): Promise<void> {
    const split = splitEntrypoint(this.argv)
    const {flags} = await this.parse(WrapperServer, normaliseGoStyleArgs(split.flagArgs, new Set(), new Set(WRAPPER_FLAGS)))
    const entrypoint = split.entrypoint
    this.verbosity = flags.verbosity ?? flags['log-level']
    const logger = createLogger({verbosity: this.verbosity, name: 'fnr-wrapper'})
    const running = await startWrapperServer(
      {
        port: flags.port,
        maxRequestBodySize: flags['max-request-body-size'],
        entrypoint,
        gracePeriodMs: flags['grace-period'],
        ...(flags['bind-address'] ? {host: flags['bind-address']} : {}),
        limits: parseLimitFlags((name) => flags[name] as string | undefined),
      },
      logger,
    )
    await running.done
  }
}
