import {FnrCommand} from '../cli/command.js'
import {execFlags, functionConfigFlags, listenerLimitFlags, listenerTlsFlags, logLevelFlag, maxRequestBodySizeFlag, metricsFlags, oclifFlag, podFlags, registryFlags, responseCacheFlags} from '../cli/flags.js'
import {resolveExecPaths} from '../lib/config/embedded.js'
import {parseResourceFlags} from '../lib/config/pod-cache-config.js'
import {DEFAULT_MAX_PARALLEL_PODS, DEFAULT_MAX_WAITLIST_LENGTH, parseFunctionConfigSource, parsePinImageDigests, parsePodAddress, podRuntimeEnv, positiveOr} from '../lib/config/serve-config.js'
import {normaliseGoStyleArgs} from '../lib/config/go-flags.js'
import {registrySettings} from '../lib/flags/runner-flag-specs.js'
import {parseLimitFlags} from '../lib/grpc/limits.js'
import {createLogger} from '../lib/telemetry/log.js'
import {startServe, validateServeOptions, type ServeOptions} from '../lib/serve.js'
import {parsePassEnv} from '../lib/process/run.js'

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

  static flags = {
    port: oclifFlag({kind: 'integer', summary: 'gRPC listen port.', default: 9445, min: 0, max: 65535}),
    'disable-runtimes': oclifFlag({kind: 'string', summary: 'Comma-separated runtimes to disable: exec, pod.', default: ''}),
    'log-level': logLevelFlag,
    'max-request-body-size': maxRequestBodySizeFlag,
    'grace-period': oclifFlag({kind: 'duration', summary: 'How long calls in flight may run after SIGTERM before they are cancelled.', default: 25_000, defaultHelp: '25s'}),
    ...execFlags,
    'exec-env': oclifFlag({kind: 'string', summary: 'Runner environment variables to pass to exec functions, besides HTTP_PROXY, HTTPS_PROXY and NO_PROXY (any case), which always pass (comma-separated or repeated).', multiple: true}),
    ...podFlags,
    ...registryFlags,
    ...functionConfigFlags,
    ...metricsFlags,
    ...responseCacheFlags,
    ...listenerTlsFlags,
    ...listenerLimitFlags,
  }

  static booleanFlagNames = new Set(['warm-up-pod-cache', 'enable-private-registries', 'enable-private-registries-tls', 'strict-config', 'harden-pod-templates', 'collect-porch-pods'])

  async run(): Promise<void> {
    this.argv = normaliseGoStyleArgs(this.argv, Serve.booleanFlagNames, new Set(Object.keys(Serve.flags)))
    const {flags, metadata} = await this.parse(Serve)
    this.verbosity = flags['log-level']
    const options: ServeOptions = {
      port: flags.port,
      ...(flags['bind-address'] ? {host: flags['bind-address']} : {}),
      limits: parseLimitFlags((name) => flags[name] as string | undefined),
      disableRuntimes: flags['disable-runtimes'],
      maxRequestBodySize: flags['max-request-body-size'],
      gracePeriodMs: flags['grace-period'],
      tls: {certFile: flags['tls-cert-file'], keyFile: flags['tls-key-file'], clientCaFile: flags['tls-client-ca-file']},
      exec: {
        ...resolveExecPaths(flags.config, flags.functions, !metadata.flags.config?.setFromDefault, !metadata.flags.functions?.setFromDefault),
        defaultImagePrefix: flags['default-image-prefix'],
        passEnv: parsePassEnv(flags['exec-env'] ?? []),
      },
      pod: {
        namespace: flags['pod-namespace'],
        ttlMs: flags['pod-ttl'],
        scanIntervalMs: flags['scan-interval'],
        cacheConfigPath: flags['pod-cache-config'],
        warmUp: flags['warm-up-pod-cache'],
        templateConfigMap: flags['function-pod-template'],
        maxWaitlistLength: positiveOr(flags['max-waitlist-length'], DEFAULT_MAX_WAITLIST_LENGTH),
        maxParallelPodsPerFunction: positiveOr(flags['max-parallel-pods-per-function'], DEFAULT_MAX_PARALLEL_PODS),
        wrapperServerImage: podRuntimeEnv().wrapperServerImage,
        podReadyTimeoutMs: flags['pod-ready-timeout'],
        callRetries: flags['pod-call-retries'],
        podAddress: parsePodAddress(flags['pod-address']),
        clusterDomain: flags['cluster-domain'],
        kubeconfig: flags.kubeconfig || undefined,
        resources: parseResourceFlags(flags['pod-requests'], flags['pod-limits']),
        strictConfig: flags['strict-config'],
        hardenTemplates: flags['harden-pod-templates'],
        collectPorchPods: flags['collect-porch-pods'],
        owner: flags['replica-id'] || undefined,
        leaseDurationMs: flags['replica-lease-duration'],
        pinImageDigests: parsePinImageDigests(flags['pin-image-digests']),
      },
      functionConfig: {
        source: parseFunctionConfigSource(flags['function-config-source']),
        filesGiven: !metadata.flags.config?.setFromDefault || !metadata.flags['pod-cache-config']?.setFromDefault,
        ...(flags['function-config-namespace'] ? {namespace: flags['function-config-namespace']} : {}),
      },
      registry: registrySettings(flags),
      metricsPort: flags['metrics-port'],
      responseCache: {ttlMs: flags['cache-ttl'], maxTtlMs: flags['cache-max-ttl'], maxBytes: flags['cache-max-bytes'], maxEntries: flags['cache-max-entries']},
    }
    validateServeOptions(options)
    const logger = createLogger({verbosity: flags['log-level'], name: 'fnr-serve'})
    const running = await startServe(options, logger)
    await running.done
  }
}
