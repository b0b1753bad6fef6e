/**
 * How `fnr serve` and `fnr wrapper-server` stop: on SIGTERM/SIGINT (or stop()) the server drains
 * (calls in flight may finish within the grace period, new ones are refused), then the caller's
 * own resources are released; a second signal forces the stop: the server is shut down, every
 * running function is killed and the process exits with code 1.
 */
import type {EvaluatorServer} from './grpc/server.js'
import type {ProcessLauncher} from './process/launcher.js'
import type {Logger} from './telemetry/log.js'

export interface DrainOptions {
  gracePeriodMs: number
  logger: Logger
  handleSignals: boolean
  /** Runs after the server has shut down: evaluators, tracing, metrics listener, … */
  release: () => Promise<void>
  /** Extra fields of the "draining" log line. */
  drainingFields?: Record<string, unknown>
  /** The server's launcher: a forced stop kills the functions it runs (and only those). */
  launcher: Pick<ProcessLauncher, 'killAll'>
}

export function drainOnStop(server: EvaluatorServer, options: DrainOptions): StopHandle {
  const {logger} = options
  return gracefulStopper(
    async () => {
      logger.lifecycle('draining', {activeCalls: server.activeCalls, ...options.drainingFields})
      const result = await server.shutdown(options.gracePeriodMs)
      await options.release()
      logger.lifecycle('stopped', {forced: result.forced})
      return result
    },
    () => {
      server.forceShutdown()
      options.launcher.killAll()
    },
    logger,
    options.handleSignals,
  )
}

export interface StopHandle {
  /** Resolves when the graceful stop has finished. */
  done: Promise<{forced: boolean}>
  /** Starts the graceful stop (idempotent). */
  stop(): Promise<{forced: boolean}>
}

/**
 * The first SIGTERM/SIGINT (or stop()) runs `stopFn`, once; a second signal runs `forceFn` and
 * exits at once with code 1. A `stopFn` that fails is logged and followed by `forceFn`; the stop
 * then ends as forced (never an unhandled rejection on the signal path).
 */
function gracefulStopper(
  stopFn: () => Promise<{forced: boolean}>,
  forceFn: () => void,
  logger: Logger,
  handleSignals: boolean,
): StopHandle {
  let stopping: Promise<{forced: boolean}> | undefined
  let resolveDone!: (v: {forced: boolean}) => void
  const done = new Promise<{forced: boolean}>((r) => (resolveDone = r))

  const stop = (): Promise<{forced: boolean}> => {
    stopping ??= stopFn()
      .catch((err: unknown) => {
        // a drain or release that fails still ends the stop (a signal's stop has no caller to tell):
        // said once, then the forced stop's work, so nothing is left running
        logger.error('the graceful stop failed: stopping at once', {error: err instanceof Error ? err.message : String(err)})
        forceFn()
        return {forced: true}
      })
      .then((result) => {
        removeSignalHandlers()
        resolveDone(result)
        return result
      })
    return stopping
  }

  let signals = 0
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++
    if (signals > 1) {
      logger.warn('second signal: exiting now', {signal})
      forceFn()
      process.exit(1)
    }
    logger.lifecycle('signal received', {signal})
    void stop()
  }
  const removeSignalHandlers = (): void => {
    process.removeListener('SIGTERM', onSignal)
    process.removeListener('SIGINT', onSignal)
  }
  if (handleSignals) {
    process.on('SIGTERM', onSignal)
    process.on('SIGINT', onSignal)
  }
  return {done, stop}
}
