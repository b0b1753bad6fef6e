/**
 * `fnr serve`: builds the evaluators from the options, starts the gRPC server, reports health,
 * and drains on SIGTERM/SIGINT.
 */
import {FnrError} from './errors.js'
import {loadExecConfig} from './config/exec-config.js'
import type {ExecPaths} from './config/embedded.js'
import {ExecEvaluator} from './evaluators/exec.js'
import type {Evaluator} from './evaluators/evaluator.js'
import {MultiEvaluator} from './evaluators/multi.js'
import {gracefulStopper} from './grpc/lifecycle.js'
import {EvaluatorServer} from './grpc/server.js'
import {loadListenerTls, validateListenerTlsFlags, type ListenerTlsFiles} from './grpc/tls.js'
import type {Logger} from './log.js'

export type Runtime = 'exec' | 'pod'
export const RUNTIMES: readonly Runtime[] = ['exec', 'pod']

export interface ServeOptions {
  port: number
  host?: string
  disableRuntimes: string
  exec: ExecPaths & {defaultImagePrefix: string}
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
    podAddress?: 'service' | 'pod-ip'
    /** Cluster domain of Service DNS names; default cluster.local. */
    clusterDomain?: string
    /** A kubeconfig file; default in-cluster config, then $KUBECONFIG or ~/.kube/config. */
    kubeconfig?: string
    /** Requests and limits of the inline template's function container. */
    resources?: {requests?: Record<string, string>; limits?: Record<string, string>}
    /** Runner identity for the owner label; default $POD_NAME or the host name. */
    owner?: string
    /** Tests: a fixed image metadata source instead of the registry. */
    metadata?: import('./pods/metadata.js').ImageMetadataSource
    /** Tests: a ready client-node KubeConfig. */
    kubeConfig?: import('@kubernetes/client-node').KubeConfig
    /** Namespace of the --function-pod-template ConfigMap; default the runner's own. */
    runnerNamespace?: string
  }
  registry: {
    enablePrivateRegistries: boolean
    authSecretPath: string
    authSecretName: string
    enableTls: boolean
    tlsSecretPath: string
  }
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

/** Checks the options that do not depend on the environment; throws a Usage/Config error. */
export function validateServeOptions(options: ServeOptions): Runtime[] {
  const runtimes = enabledRuntimes(options.disableRuntimes)
  if (options.port < 0 || options.port > 65535) throw new FnrError('Usage', `--port must be between 0 and 65535, got ${options.port}`)
  if (options.registry.enableTls && !options.registry.enablePrivateRegistries) {
    throw new FnrError('Usage', '--enable-private-registries-tls needs --enable-private-registries=true')
  }
  if (options.pod.ttlMs <= 0) throw new FnrError('Usage', '--pod-ttl must be a positive duration')
  if (runtimes.includes('pod') && !options.pod.wrapperServerImage && !options.pod.templateConfigMap) {
    throw new FnrError('Config', 'environment variable WRAPPER_SERVER_IMAGE must be set to use the pod runtime (or pass --disable-runtimes=pod)')
  }
  if (options.pod.podReadyTimeoutMs !== undefined && options.pod.podReadyTimeoutMs <= 0) throw new FnrError('Usage', '--pod-ready-timeout must be a positive duration')
  if (options.pod.callRetries !== undefined && options.pod.callRetries < 0) throw new FnrError('Usage', '--pod-call-retries must be 0 or more')
  validateListenerTlsFlags(options.tls)
  return runtimes
}

interface BuiltEvaluators {
  evaluators: Evaluator[]
  /** Resolve when the evaluators are ready to report SERVING (pod warm-up). */
  ready: Array<Promise<unknown>>
}

async function buildEvaluators(options: ServeOptions, runtimes: Runtime[], logger: Logger): Promise<BuiltEvaluators> {
  const evaluators: Evaluator[] = []
  const ready: Array<Promise<unknown>> = []
  // Fixed order: exec first (fast, local), then pod.
  if (runtimes.includes('exec')) {
    const config = await loadExecConfig({
      configPath: options.exec.configPath,
      functionsDir: options.exec.functionsDir,
      defaultImagePrefix: options.exec.defaultImagePrefix,
    })
    for (const warning of config.warnings) logger.warn(warning)
    logger.info('exec runtime ready', {
      config: options.exec.configPath,
      functions: options.exec.functionsDir,
      embedded: options.exec.embedded,
      images: config.imageCount,
    })
    evaluators.push(new ExecEvaluator({config, maxOutputBytes: options.maxRequestBodySize, logger}))
  }
  if (runtimes.includes('pod')) {
    try {
      const pod = await buildPodEvaluator(options, logger)
      evaluators.push(pod)
      ready.push(pod.ready)
    } catch (err) {
      await Promise.allSettled(evaluators.map((e) => e.close()))
      throw err
    }
  }
  return {evaluators, ready}
}

/** The pod runtime: loaded only when enabled (it brings @kubernetes/client-node). */
async function buildPodEvaluator(options: ServeOptions, logger: Logger): Promise<Evaluator & {ready: Promise<void>}> {
  const [{createPodEvaluator}, {PodCacheConfig}, {RegistryMetadataSource}] = await Promise.all([
    import('./evaluators/pod.js'),
    import('./config/pod-cache-config.js'),
    import('./pods/metadata.js'),
  ])
  const pod = options.pod
  const {config: cacheConfig, missing} = await PodCacheConfig.load(pod.cacheConfigPath)
  if (missing) logger.info('no pod cache config; using the flag defaults for every image', {path: pod.cacheConfigPath})
  for (const warning of cacheConfig.warnings) logger.warn(warning)
  let metadata = pod.metadata
  let pullSecret: {name: string; dockerConfig: import('./registry/auth.js').DockerConfig; dockerConfigJson: Buffer} | undefined
  if (!metadata || options.registry.enablePrivateRegistries) {
    const {createRunnerRegistry} = await import('./registry/index.js')
    const registry = await createRunnerRegistry(options.registry, {logger})
    metadata ??= new RegistryMetadataSource(registry.client)
    if (options.registry.enablePrivateRegistries && registry.dockerConfigJson) {
      pullSecret = {name: options.registry.authSecretName, dockerConfig: registry.dockerConfig, dockerConfigJson: registry.dockerConfigJson}
    }
  }
  const evaluator = await createPodEvaluator({
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
    metadata,
    kube: {kubeconfig: pod.kubeconfig, kubeConfig: pod.kubeConfig},
    pullSecret,
    owner: pod.owner,
    runnerNamespace: pod.runnerNamespace,
    inlineResources: pod.resources,
    logger,
  })
  logger.info('pod runtime ready', {namespace: pod.namespace, kubernetes: evaluator.runtime.clients.server, config: evaluator.runtime.clients.source, warmUp: pod.warmUp, images: cacheConfig.images().length})
  return evaluator
}

export interface RunningServer {
  server: EvaluatorServer
  port: number
  /** Resolves when the server has stopped (after a signal or stop()). */
  done: Promise<{forced: boolean}>
  stop(): Promise<{forced: boolean}>
}

/**
 * Starts everything. The returned server is SERVING once this resolves, or, with the pod runtime
 * warming up, once warm-up has finished (NOT_SERVING until then).
 */
export async function startServe(options: ServeOptions, logger: Logger, handleSignals = true): Promise<RunningServer> {
  const runtimes = validateServeOptions(options)
  const tls = await loadListenerTls(options.tls)
  const built = await buildEvaluators(options, runtimes, logger)
  const evaluator = new MultiEvaluator(built.evaluators)
  const server = new EvaluatorServer({
    evaluator,
    maxMessageSize: options.maxRequestBodySize,
    logger,
    host: options.host,
    port: options.port,
    credentials: tls?.credentials,
  })
  let port: number
  try {
    port = await server.start()
  } catch (err) {
    await evaluator.close()
    throw err
  }
  // NOT_SERVING until every evaluator is ready (the pod runtime's warm-up).
  if (built.ready.length === 0) server.setServing(true)
  else {
    void Promise.all(built.ready).then(() => {
      server.setServing(true)
      logger.lifecycle('evaluators ready: SERVING')
    })
  }

  const {done, stop} = gracefulStopper(
    async () => {
      logger.lifecycle('draining', {activeCalls: server.activeCalls, gracePeriodMs: options.gracePeriodMs})
      const result = await server.shutdown(options.gracePeriodMs)
      await evaluator.close()
      logger.lifecycle('stopped', {forced: result.forced})
      return result
    },
    () => server.forceShutdown(),
    logger,
    handleSignals,
  )

  logger.lifecycle('fnr serve is ready', {port, runtimes, maxRequestBodySize: options.maxRequestBodySize, tls: tls?.mode ?? 'off'})
  return {server, port, done, stop}
}
