/**
 * `fnr serve`: builds the evaluators from the options, starts the gRPC server, reports health,
 * and drains on SIGTERM/SIGINT.
 */
import {existsSync} from 'node:fs'

import {responseCacheSetup, validateResponseCacheSettings, type ResponseCacheSetup} from './cache/setup.js'
import {FnrError} from './errors.js'
import {checkPodResources} from './k8s/quantity.js'
import {loadExecConfig} from './config/exec-config.js'
import type {ExecPaths} from './config/embedded.js'
import type {PodCacheConfig} from './config/pod-cache-config.js'
import type {FunctionConfigWatch} from './config/function-config-watch.js'
import {pinsImageDigests, podRuntimeEnv, type PinImageDigests, type PodAddressMode} from './config/serve-config.js'
import {ExecEvaluator} from './evaluators/exec.js'
import type {Evaluator} from './evaluator.js'
import {MultiEvaluator} from './evaluators/multi.js'
import {defaultBindHost, EvaluatorServer} from './grpc/server.js'
import {drainOnStop} from './drain.js'
import {primeFirstCall} from './first-call.js'
import {detectMemoryLimit} from './budget.js'
import {serverLimits, type ListenerLimits} from './grpc/limits.js'
import {loadListenerTls, validateListenerTlsFlags, type ListenerTlsFiles} from './grpc/tls.js'
import type {Logger} from './telemetry/log.js'
import {NO_METRICS, prometheusFromOtelEnv, startServeMetrics} from './telemetry/metrics.js'
import {startProcessTracing} from './telemetry/otel.js'
import type {Telemetry} from './telemetry/telemetry.js'
import {logEscapedProcesses} from './process/sweep.js'
import {ProcessLauncher} from './process/launcher.js'
import {serverLaunchMode} from './process/spawner.js'

export type Runtime = 'exec' | 'pod'
export const RUNTIMES: readonly Runtime[] = ['exec', 'pod']

export interface ServeOptions {
  port: number
  host?: string
  disableRuntimes: string
  exec: ExecPaths & {defaultImagePrefix: string; /** --exec-env: more runner variables for exec functions */ passEnv?: string[]; /** --prestart-functions, --prestart-idle-ttl (process/prestart.ts) */ prestart?: {perImage: number; idleTtlMs: number}}
  maxRequestBodySize: number
  gracePeriodMs: number
  /** TLS (or mTLS, with a client CA) on the listener; default plaintext, as Porch. */
  tls?: ListenerTlsFiles
  pod: {
    namespace: string
    ttlMs: number
    scanIntervalMs: number
    cacheConfigPath: string
    warmUp: boolean
    templateConfigMap: string
    maxWaitlistLength: number
    maxParallelPodsPerFunction: number
    wrapperServerImage?: string
    /** How long a new pod may take to become ready (always capped by the caller's deadline); default 60 s. */
    podReadyTimeoutMs?: number
    /** Extra attempts of a call whose pod turned out unavailable; default 1. */
    callRetries?: number
    /** How fnr reaches function pods: their Service's DNS name (default) or the pod IP. */
    podAddress?: PodAddressMode
    /** Cluster domain of Service DNS names; default cluster.local. */
    clusterDomain?: string
    /** DNS server (`ip[:port]`) for Service names; default $FNR_DNS_SERVER, else the system resolver. */
    dnsServer?: string
    /** A kubeconfig file; default in-cluster config, then $KUBECONFIG or ~/.kube/config. */
    kubeconfig?: string
    /** Requests and limits of the inline template's function container. */
    resources?: {requests?: Record<string, string>; limits?: Record<string, string>}
    /** --strict-config: a bad --pod-cache-config stops the start (default: a warning, as Porch). */
    strictConfig?: boolean
    /** --harden-pod-templates: fnr's security defaults on a user's template (default: used as written). */
    hardenTemplates?: boolean
    /** --collect-porch-pods: delete the function pods Porch's runner left (default: only counted). */
    collectPorchPods?: boolean
    /** --replica-id: identity on owned pods and the Lease; default $POD_NAME, else the host name plus a random suffix. */
    owner?: string
    /** --replica-lease-duration (default 30 s; 0 holds no Lease). */
    leaseDurationMs?: number
    /** Tests: a fixed image metadata source instead of the registry. */
    metadata?: import('./pods/cluster/image-metadata.js').ImageMetadataSource
    /** Tests: a ready client-node KubeConfig. */
    kubeConfig?: import('@kubernetes/client-node').KubeConfig
    /** Namespace of the --function-pod-template ConfigMap; default the runner's own. */
    runnerNamespace?: string
    /** --pin-image-digests: run function containers as repo@digest; auto (default): when the response cache is on. */
    pinImageDigests?: PinImageDigests
  }
  /**
   * Where exec mappings, per-image pod settings and pod template changes come from: `files` (config.yaml,
   * --pod-cache-config), `crd` (FunctionConfig objects, watched), `both` (FunctionConfig first) or `auto` (the
   * default: see resolveFunctionConfigSource). `filesGiven`: --config or --pod-cache-config was given explicitly.
   */
  functionConfig?: {source: 'files' | 'crd' | 'both' | 'auto'; namespace?: string; writeStatus?: boolean; filesGiven?: boolean}
  registry: {
    enablePrivateRegistries: boolean
    authSecretPath: string
    authSecretName: string
    enableTls: boolean
    tlsSecretPath: string
  }
  /** --metrics-port: Prometheus endpoint on the gRPC listen address; 0 or absent: off. */
  metricsPort?: number
  /** The budget and HTTP/2 limits (--max-concurrent-calls, ...; grpc/limits.ts). */
  limits?: ListenerLimits
  /** --cache-ttl, --cache-max-ttl, --cache-max-bytes, --cache-max-entries; absent: off. */
  responseCache?: import('./cache/response-cache.js').ResponseCacheSettings
}

/**
 * The runtimes left after --disable-runtimes. Values are comma separated and trimmed (upstream
 * does not trim, so "exec, pod" leaves pod enabled there); unknown names are an error.
 */
export function enabledRuntimes(disable: string): Runtime[] {
  const names = disable.split(',').map((s) => s.trim()).filter((s) => s !== '')
  for (const name of names) {
    if (!RUNTIMES.includes(name as Runtime)) {
      throw new FnrError('Usage', `--disable-runtimes: unknown runtime ${JSON.stringify(name)} (expected exec and/or pod)`)
    }
  }
  const enabled = RUNTIMES.filter((r) => !names.includes(r))
  if (enabled.length === 0) {
    throw new FnrError('Config', 'every runtime is disabled (--disable-runtimes); enable exec or pod, or there is nothing to serve')
  }
  return enabled
}

/**
 * Bounds the exec runtime's pre-started functions (process/prestart.ts) by the call budget: half
 * the concurrent-call slots at most, and one more only while the running calls and the waiting
 * processes together leave a slot free.
 */
function bindPrestartBudget(evaluators: readonly Evaluator[], server: EvaluatorServer): void {
  const pool = evaluators.find((e): e is ExecEvaluator => e instanceof ExecEvaluator)?.prestart
  if (!pool) return
  const slots = server.budget.settings.maxConcurrentCalls
  pool.bindBudget(() => server.budget.snapshot().running + pool.size < slots, Math.max(1, Math.floor(slots / 2)))
}

/** Checks the options that do not depend on the environment; throws a Usage/Config error. */
export function validateServeOptions(options: ServeOptions): Runtime[] {
  const runtimes = enabledRuntimes(options.disableRuntimes)
  if (options.port < 0 || options.port > 65535) throw new FnrError('Usage', `--port must be between 0 and 65535, got ${options.port}`)
  if (options.registry.enableTls && !options.registry.enablePrivateRegistries) {
    throw new FnrError('Usage', '--enable-private-registries-tls needs --enable-private-registries=true')
  }
  if (options.pod.ttlMs <= 0) throw new FnrError('Usage', '--pod-ttl must be a positive duration')
  if (options.exec.prestart && options.exec.prestart.idleTtlMs <= 0) throw new FnrError('Usage', '--prestart-idle-ttl must be a positive duration (--prestart-functions=0 turns pre-starting off)')
  if (runtimes.includes('pod') && !options.pod.wrapperServerImage && !options.pod.templateConfigMap) {
    throw new FnrError('Config', 'environment variable WRAPPER_SERVER_IMAGE must be set to use the pod runtime (or pass --disable-runtimes=pod)')
  }
  if (options.pod.podReadyTimeoutMs !== undefined && options.pod.podReadyTimeoutMs <= 0) throw new FnrError('Usage', '--pod-ready-timeout must be a positive duration')
  checkPodResources(options.pod.resources) // the library's pod.resources as --pod-requests/--pod-limits: at start, not on every call
  if (options.pod.callRetries !== undefined && options.pod.callRetries < 0) throw new FnrError('Usage', '--pod-call-retries must be 0 or more')
  if (options.pod.leaseDurationMs !== undefined && options.pod.leaseDurationMs < 0) throw new FnrError('Usage', '--replica-lease-duration must be 0 (no Lease) or a positive duration')
  if (options.responseCache) validateResponseCacheSettings(options.responseCache)
  validateListenerTlsFlags(options.tls)
  return runtimes
}

interface BuiltEvaluators {
  evaluators: Evaluator[]
  /** The response cache to put around them, when on (decided once, with the pod cache config read once). */
  responseCache?: ResponseCacheSetup
  /** Resolve when the evaluators are ready to report SERVING (pod warm-up). */
  ready: Array<Promise<unknown>>
  /** Stops what the evaluators share (the FunctionConfig watch). */
  close?: () => void
  /** The FunctionConfig source in effect (auto resolved). */
  source: 'files' | 'crd' | 'both'
}

/**
 * True when this runner is pointed at a cluster on purpose (--kubeconfig, or the in-cluster service
 * account), without loading client-node. $KUBECONFIG and ~/.kube/config do not count: they are a
 * developer's ambient settings, and an exec-only `fnr serve` on a laptop must neither call that
 * cluster at start nor let its FunctionConfigs change what config.yaml maps.
 */
export function clusterConfigured(options: ServeOptions, env: NodeJS.ProcessEnv = process.env): boolean {
  if (options.pod.kubeConfig || options.pod.kubeconfig) return true
  return !!env.KUBERNETES_SERVICE_HOST && !!env.KUBERNETES_SERVICE_PORT && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token')
}

/**
 * --function-config-source=auto, decided once at startup so that Porch's Deployments of either
 * version work unchanged:
 *   - without the pod runtime and without an explicitly configured cluster: files (client-node is
 *     never loaded, an exec-only start stays as fast as before);
 *   - otherwise discovery: when the API server serves functionconfigs.config.porch.kpt.dev (Porch
 *     at HEAD installs the CRD), crd, which is what Porch's runner at HEAD reads (it has no
 *     --config and no --pod-cache-config; docs/function-config.md), so fnr's own config.yaml cannot map images
 *     Porch would run in pods; both instead when --config or --pod-cache-config was given
 *     explicitly (an older Deployment on a cluster that has the CRD: its files keep working,
 *     FunctionConfigs win);
 *   - no CRD, or discovery failing: files (with a warning when it failed).
 */
export async function resolveFunctionConfigSource(options: ServeOptions, runtimes: readonly Runtime[], logger: Logger): Promise<'files' | 'crd' | 'both'> {
  const fc = options.functionConfig
  const source = fc?.source ?? 'files'
  if (source !== 'auto') return source
  if (!runtimes.includes('pod') && !clusterConfigured(options)) {
    logger.info('--function-config-source=auto: files (no pod runtime and no cluster configured)')
    return 'files'
  }
  const {functionConfigApiServed} = await import('./config/function-config-watch.js')
  try {
    const {served, server} = await functionConfigApiServed({kubeconfig: options.pod.kubeconfig, kubeConfig: options.pod.kubeConfig})
    const chosen = !served ? 'files' : fc?.filesGiven ? 'both' : 'crd'
    logger.info(`--function-config-source=auto: ${chosen}`, {
      kubernetes: server,
      functionConfigCrd: served ? 'served' : 'not served',
      ...(chosen === 'both' ? {why: '--config or --pod-cache-config given explicitly'} : {}),
    })
    return chosen
  } catch (err) {
    logger.warn('--function-config-source=auto: cannot tell whether the API server serves FunctionConfigs; using files', {error: (err as Error).message})
    return 'files'
  }
}

/** The FunctionConfig watch, when the source is crd or both (loads client-node). */
async function startFunctionConfigs(options: ServeOptions, source: 'files' | 'crd' | 'both', logger: Logger): Promise<FunctionConfigWatch | undefined> {
  const fc = options.functionConfig
  if (!fc || source === 'files') return undefined
  const {FunctionConfigWatch} = await import('./config/function-config-watch.js')
  return FunctionConfigWatch.start({
    kube: {kubeconfig: options.pod.kubeconfig, kubeConfig: options.pod.kubeConfig},
    namespace: fc.namespace ?? options.pod.namespace,
    functionsDir: options.exec.functionsDir,
    defaultImagePrefix: options.exec.defaultImagePrefix,
    writeStatus: fc.writeStatus,
    logger,
  })
}

/** The exec runtime: its config (files, FunctionConfigs or both, as `source` says) and its evaluator. */
async function buildExecEvaluator(options: ServeOptions, functionConfigs: FunctionConfigWatch | undefined, source: 'files' | 'crd' | 'both', {logger, launcher}: {logger: Logger; launcher: ProcessLauncher}): Promise<ExecEvaluator> {
  const files = functionConfigs && source === 'crd'
    ? undefined
    : await loadExecConfig({
        configPath: options.exec.configPath,
        functionsDir: options.exec.functionsDir,
        defaultImagePrefix: options.exec.defaultImagePrefix,
      })
  const config = functionConfigs
    ? new (await import('./config/function-config-crd.js')).FunctionConfigExecConfig(functionConfigs.store, files, options.exec.functionsDir, options.exec.defaultImagePrefix)
    : files!
  for (const warning of config.warnings) logger.warn(warning)
  logger.info('exec runtime ready', {
    config: options.exec.configPath,
    functions: options.exec.functionsDir,
    embedded: options.exec.embedded,
    images: config.imageCount,
  })
  if (config.imageCount === 0) logger.warn('the exec runtime serves no images: its config maps none; every exec call will be NOT_FOUND', {config: options.exec.configPath})
  // The launcher's spawner starts once the listener is up (startServe): until then, and until it
  // is ready, calls start directly (process/launcher.ts).
  const exec = new ExecEvaluator({config, maxOutputBytes: options.maxRequestBodySize, logger, passEnv: options.exec.passEnv, prestart: options.exec.prestart, launcher})
  // A FunctionConfig change kills pre-started processes it made stale (exec.ts configChanged).
  if (functionConfigs && exec.prestart) functionConfigs.store.onChange(() => exec.configChanged())
  return exec
}

async function buildEvaluators(options: ServeOptions, runtimes: Runtime[], {logger, launcher, telemetry}: {logger: Logger; launcher: ProcessLauncher; telemetry: Telemetry}): Promise<BuiltEvaluators> {
  const evaluators: Evaluator[] = []
  const ready: Array<Promise<unknown>> = []
  let source = await resolveFunctionConfigSource(options, runtimes, logger)
  const functionConfigs = await startFunctionConfigs(options, source, logger).catch(async (err: unknown) => {
    // auto chose FunctionConfigs from discovery, but RBAC does not let this runner read them: files, as
    // without the CRD (warned here, once), instead of a start that fails on every restart. An explicit
    // --function-config-source=crd or both keeps the error (it says what to grant).
    if (options.functionConfig?.source !== 'auto' || (await import('./k8s/errors.js')).apiStatusCode(err) !== 403) throw err
    logger.warn('--function-config-source=auto: the API server serves FunctionConfigs but this runner may not list them (forbidden); using files (config.yaml and --pod-cache-config). Grant get, list and watch on functionconfigs.config.porch.kpt.dev (manifests/function-config/rbac.yaml) to use them', {
      error: (err as Error).message,
    })
    source = 'files'
    return undefined
  })
  const close = (): void => functionConfigs?.close()
  if (functionConfigs && source === 'crd') {
    logger.info('--function-config-source=crd: config.yaml and --pod-cache-config are not read', {config: options.exec.configPath, podCacheConfig: options.pod.cacheConfigPath})
  }
  // Fixed order: exec first (fast, local), then pod.
  if (runtimes.includes('exec')) evaluators.push(await buildExecEvaluator(options, functionConfigs, source, {logger, launcher}).catch((err: unknown) => {
    close()
    throw err
  }))
  let responseCache: ResponseCacheSetup | undefined
  try {
    // --pod-cache-config, read once for the pod runtime and the response cache.
    const {loadServePodCacheConfig} = await import('./config/serve-config.js')
    const podRuntime = runtimes.includes('pod')
    const cacheConfig = await loadServePodCacheConfig({
      path: options.pod.cacheConfigPath,
      podRuntime,
      responseCache: options.responseCache !== undefined,
      // With FunctionConfigs as the only source the file is not read: its per-image responseCache
      // switches do not apply (FunctionConfig has no such field); --cache-ttl does.
      crdOnly: functionConfigs !== undefined && source === 'crd',
      strict: options.pod.strictConfig === true,
    }, logger)
    responseCache = responseCacheSetup(options.responseCache, cacheConfig)
    if (podRuntime) {
      const {evaluator: pod, runtime} = await buildPodEvaluator(options, logger, {cacheConfig, responseCacheOn: responseCache !== undefined, functionConfigs: functionConfigs?.store, telemetry})
      telemetry.metrics.setPodSource(() => runtime.cache.snapshot())
      evaluators.push(pod)
      ready.push(pod.ready)
    }
  } catch (err) {
    await Promise.allSettled(evaluators.map((e) => e.close()))
    close()
    throw err
  }
  return {evaluators, ready, close, source, ...(responseCache ? {responseCache} : {})}
}

/** The pod runtime: loaded only when enabled (it brings @kubernetes/client-node). */
async function buildPodEvaluator(
  options: ServeOptions,
  logger: Logger,
  {cacheConfig, responseCacheOn, functionConfigs, telemetry}: {cacheConfig: PodCacheConfig; responseCacheOn: boolean; functionConfigs?: import('./config/function-config-crd.js').FunctionConfigStore; telemetry: Telemetry},
): Promise<Awaited<ReturnType<typeof import('./evaluators/pod.js').createPodEvaluator>>> {
  const [{createPodEvaluator}, {podRegistry}] = await Promise.all([import('./evaluators/pod.js'), import('./pods/cluster/launcher.js')])
  const pod = options.pod
  // auto: pinned when the response cache may serve this runtime's responses (its correctness rests on
  // the pod running exactly the digest of the key).
  const pinDigests = pinsImageDigests(pod.pinImageDigests, responseCacheOn)
  const {metadata, pullSecret} = await podRegistry(options.registry, {metadata: pod.metadata, logger, telemetry})
  const built = await createPodEvaluator({
    namespace: pod.namespace,
    ttlMs: pod.ttlMs,
    scanIntervalMs: pod.scanIntervalMs,
    cacheConfig,
    warmUp: pod.warmUp,
    templateConfigMap: pod.templateConfigMap,
    maxWaitlistLength: pod.maxWaitlistLength,
    maxParallelPods: pod.maxParallelPodsPerFunction,
    wrapperServerImage: pod.wrapperServerImage,
    maxRequestBodySize: options.maxRequestBodySize,
    podReadyTimeoutMs: pod.podReadyTimeoutMs ?? 60_000,
    callRetries: pod.callRetries ?? 1,
    addressMode: pod.podAddress ?? 'service',
    clusterDomain: pod.clusterDomain ?? 'cluster.local',
    dnsServer: pod.dnsServer ?? podRuntimeEnv().dnsServer,
    metadata,
    kube: {kubeconfig: pod.kubeconfig, kubeConfig: pod.kubeConfig},
    pullSecret,
    owner: pod.owner,
    leaseDurationMs: pod.leaseDurationMs,
    runnerNamespace: pod.runnerNamespace,
    inlineResources: pod.resources,
    pinImageDigests: pinDigests,
    hardenTemplates: pod.hardenTemplates === true,
    collectPorchPods: pod.collectPorchPods === true,
    // The runner's --log-level 3 and up (request lines with trace ids) is passed on to the wrappers.
    wrapperVerbosity: logger.enabled(5) ? 5 : logger.enabled(4) ? 4 : logger.enabled(3) ? 3 : undefined,
    logger,
    telemetry,
    ...(functionConfigs ? {extension: (await import('./pods/runtime/function-configs.js')).podRuntimeExtension(functionConfigs, {namespace: pod.namespace, logger})} : {}),
  })
  logger.info('pod runtime ready', {namespace: pod.namespace, kubernetes: built.runtime.clients.server, config: built.runtime.clients.source, warmUp: pod.warmUp, images: cacheConfig.images().length, pinImageDigests: pinDigests})
  return built
}

export interface RunningServer {
  server: EvaluatorServer
  port: number
  /** Resolves when the server has stopped (after a signal or stop()). */
  done: Promise<{forced: boolean}>
  stop(): Promise<{forced: boolean}>
  /** The exec runtime's launcher: its running and waiting function processes (diagnostics, tests). */
  launcher: ProcessLauncher
  /** This server's metrics and tracing, handed to everything it built. */
  telemetry: Telemetry
}

/**
 * The server's telemetry: metrics (--metrics-port, else Porch's OTEL_METRICS_EXPORTER=prometheus
 * with OTEL_EXPORTER_PROMETHEUS_HOST/PORT) and OpenTelemetry export, only when the OTEL_*
 * environment asks for it (nothing is loaded otherwise). stop() closes the endpoint and flushes.
 */
async function startTelemetry(options: ServeOptions, logger: Logger): Promise<{telemetry: Telemetry; metricsPort?: number; stop(): Promise<void>}> {
  const otelMetrics = options.metricsPort ? undefined : prometheusFromOtelEnv(process.env, logger)
  const observed = options.metricsPort
    ? await startServeMetrics(options.metricsPort, options.host || defaultBindHost(), logger)
    : otelMetrics
      ? await startServeMetrics(otelMetrics.port, otelMetrics.host, logger)
      : undefined
  const traced = await startProcessTracing('fnr-serve', logger)
  return {
    telemetry: {metrics: observed?.metrics ?? NO_METRICS, ...(traced.tracing ? {tracing: traced.tracing} : {})},
    ...(observed ? {metricsPort: observed.port} : {}),
    stop: async () => {
      await observed?.stop()
      await traced.stop()
    },
  }
}

/**
 * Starts everything. The returned server is SERVING once this resolves, or, with the pod runtime
 * warming up, once warm-up has finished (NOT_SERVING until then).
 */
export async function startServe(options: ServeOptions, logger: Logger, handleSignals = true): Promise<RunningServer> {
  const runtimes = validateServeOptions(options)
  const tls = await loadListenerTls(options.tls)
  // This server's metrics and tracing, handed to what it builds.
  const observed = await startTelemetry(options, logger)
  const {telemetry} = observed
  let built: BuiltEvaluators
  let evaluator: Evaluator
  let closeBuilt: (() => void) | undefined
  // The exec runtime's function processes: this server's own (two servers in one process share none).
  const launcher = new ProcessLauncher(serverLaunchMode(detectMemoryLimit().bytes))
  try {
    built = await buildEvaluators(options, runtimes, {logger, launcher, telemetry})
    closeBuilt = built.close
    evaluator = await withResponseCacheIfOn(new MultiEvaluator(built.evaluators), built.responseCache, logger, telemetry)
  } catch (err) {
    closeBuilt?.()
    await launcher.close()
    await observed.stop()
    throw err
  }
  const server = new EvaluatorServer({
    evaluator,
    maxMessageSize: options.maxRequestBodySize,
    logger,
    host: options.host,
    port: options.port,
    credentials: tls?.credentials,
    telemetry,
    ...serverLimits(options.limits, logger, {runningPids: () => launcher.sleepCandidates(), paceStarts: launcher.startsInRunner, telemetry}),
  })
  let port: number
  try {
    port = await server.start()
  } catch (err) {
    await evaluator.close()
    built.close?.()
    await launcher.close()
    await observed.stop()
    throw err
  }
  // The exec runtime's spawner (a second process: the native helper, or a Node spawner that takes
  // ~100 ms of CPU to start) starts after the listener, on the next turn, so that on a busy node
  // it does not compete with the start for CPU (docs/performance.md "bench S").
  const startSpawner = setImmediate(() => {
    const exec = runtimes.includes('exec')
    if (exec) launcher.start((why) => logger.warn(why))
    void primeFirstCall({port, host: server.host, tls: tls !== undefined}, exec ? launcher : undefined, logger)
  })
  telemetry.metrics.setInFlightSource(() => server.activeCalls)
  telemetry.metrics.setBudgetSource(() => server.budget.snapshot())
  bindPrestartBudget(built.evaluators, server)
  const unlogEscapes = logEscapedProcesses(logger)
  // NOT_SERVING until every evaluator is ready (the pod runtime's warm-up).
  if (built.ready.length === 0) server.setServing(true)
  else {
    void Promise.all(built.ready).then(() => {
      server.setServing(true)
      logger.lifecycle('evaluators ready: SERVING')
    })
  }

  const {done, stop} = drainOnStop(server, {
    gracePeriodMs: options.gracePeriodMs,
    logger,
    handleSignals,
    drainingFields: {gracePeriodMs: options.gracePeriodMs},
    launcher,
    release: async () => {
      clearImmediate(startSpawner)
      await evaluator.close()
      built.close?.()
      await launcher.close()
      await observed.stop()
      unlogEscapes()
    },
  })

  logger.lifecycle('fnr serve is ready', {port, runtimes, maxRequestBodySize: options.maxRequestBodySize, tls: tls?.mode ?? 'off', ...(observed.metricsPort !== undefined ? {metricsPort: observed.metricsPort} : {})})
  return {server, port, done, stop, launcher, telemetry}
}

/** The response cache around the evaluator chain, when on (built.responseCache), reporting to the server's telemetry. */
async function withResponseCacheIfOn(inner: Evaluator, setup: ResponseCacheSetup | undefined, logger: Logger, telemetry: Telemetry): Promise<Evaluator> {
  if (!setup) return inner
  const {withResponseCache} = await import('./cache/setup.js')
  try {
    return await withResponseCache(inner, setup, logger, telemetry)
  } catch (err) {
    await inner.close()
    throw err
  }
}
