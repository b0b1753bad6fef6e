import {FnrCommand} from '../cli/command.js'
import {oclifFlags} from '../cli/flags.js'
import {SERVE_BOOLEAN_FLAG_NAMES, SERVE_FLAG_SPECS, serveOptionsFromFlags, type ServeFlagValues} from '../cli/serve-flags.js'
import {normaliseGoStyleArgs} from '../lib/config/go-flags.js'
import {createLogger} from '../lib/telemetry/log.js'
import {startServe, validateServeOptions} from '../lib/serve.js'

export default class Serve extends FnrCommand {
  static summary = 'Run the function runner gRPC service (a drop-in for Porch\'s function runner).'

  static description = `Serves evaluator.FunctionEvaluator/EvaluateFunction and grpc.health.v1 on --port.
Flags and defaults are those of Porch's function runner, so its Deployment args work unchanged
(Go-style "-flag=value" and bare boolean flags are accepted too). Functions are tried in a fixed
order: the exec runtime (local binaries from --config), then the pod runtime.

Health is NOT_SERVING until the evaluators are ready and while draining. On SIGTERM or SIGINT the
server stops accepting calls, lets calls in flight finish within --grace-period, and exits 0; a
second signal exits at once.

Environment: WRAPPER_SERVER_IMAGE (required by the pod runtime's inline template), FNR_BIND_ADDRESS
(listen address unless --bind-address is given; default every address family), OTEL_METRICS_EXPORTER=prometheus
with OTEL_EXPORTER_PROMETHEUS_HOST/PORT (Prometheus metrics there, as Porch; --metrics-port wins), POD_NAME (the replica's identity on the pods it owns,
unless --replica-id is given), KUBECONFIG, FNR_SPAWNER=off|on (exec functions are forked by the server itself, or by
its spawner process even under a 256 MiB memory limit; docs/process.md).`

  static examples = [
    {description: 'Serve the functions fnr ships, exec runtime only:', command: '<%= config.bin %> <%= command.id %> --disable-runtimes=pod'},
    {
      description: 'As Porch\'s Deployment runs it:',
      command: '<%= config.bin %> <%= command.id %> --config=/home/nonroot/config.yaml --functions=/home/nonroot/functions --pod-namespace=porch-fn-system --max-request-body-size=6291456',
    },
  ]

  static flags = oclifFlags(SERVE_FLAG_SPECS)

  static booleanFlagNames = SERVE_BOOLEAN_FLAG_NAMES

  async run(): Promise<void> {
    this.argv = normaliseGoStyleArgs(this.argv, Serve.booleanFlagNames, new Set(Object.keys(Serve.flags)))
    const {flags, metadata} = await this.parse(Serve)
    this.verbosity = flags['log-level']
    const options = serveOptionsFromFlags(flags as ServeFlagValues, (name) => !metadata.flags[name]?.setFromDefault)
    validateServeOptions(options)
    const logger = createLogger({verbosity: flags['log-level'], name: 'fnr-serve'})
    const running = await startServe(options, logger)
    await running.done
  }
}
