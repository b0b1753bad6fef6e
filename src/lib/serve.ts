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
  if (runtimes.includes('pod') && !options.pod.wrapperServerImage) {
    throw new FnrError('Config', 'environment variable WRAPPER_SERVER_IMAGE must be set to use the pod runtime (or pass --disable-runtimes=pod)')
  }
  return runtimes
}

async function buildEvaluators(options: ServeOptions, runtimes: Runtime[], logger: Logger): Promise<Evaluator[]> {
  const evaluators: Evaluator[] = []
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
    throw new FnrError('Config', 'the pod runtime is not part of this build of fnr yet; start with --disable-runtimes=pod')
  }
  return evaluators
}

export interface RunningServer {
  server: EvaluatorServer
  port: number
  /** Resolves when the server has stopped (after a signal or stop()). */
  done: Promise<{forced: boolean}>
  stop(): Promise<{forced: boolean}>
}

/** Starts everything; the returned server is SERVING once this resolves. */
export async function startServe(options: ServeOptions, logger: Logger, handleSignals = true): Promise<RunningServer> {
  const runtimes = validateServeOptions(options)
  const evaluators = await buildEvaluators(options, runtimes, logger)
  const evaluator = new MultiEvaluator(evaluators)
  const server = new EvaluatorServer({
    evaluator,
    maxMessageSize: options.maxRequestBodySize,
    logger,
    host: options.host,
    port: options.port,
  })
  const port = await server.start()
  server.setServing(true)

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

  logger.lifecycle('fnr serve is ready', {port, runtimes, maxRequestBodySize: options.maxRequestBodySize})
  return {server, port, done, stop}
}
