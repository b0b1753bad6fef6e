/**
 * How `fnr serve` and `fnr wrapper-server` stop: on SIGTERM/SIGINT (or stop()) the server drains
 * (calls in flight may finish within the grace period, new ones are refused), then the caller's
 * own resources are released, and a second signal forces the stop (grpc/lifecycle.ts).
 */
import {gracefulStopper, type StopHandle} from './grpc/lifecycle.js'
import type {EvaluatorServer} from './grpc/server.js'
import type {Logger} from './telemetry/log.js'

export interface DrainOptions {
  gracePeriodMs: number
  logger: Logger
  handleSignals: boolean
  /** Runs after the server has shut down: evaluators, tracing, metrics listener, … */
  release: () => Promise<void>
  /** Extra fields of the "draining" log line. */
  drainingFields?: Record<string, unknown>
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
    () => server.forceShutdown(),
    logger,
    options.handleSignals,
  )
}
