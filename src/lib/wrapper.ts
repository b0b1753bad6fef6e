/**
 * `fnr wrapper-server`: the gRPC server inside each function pod (port 9446). It serves the
 * same evaluator.FunctionEvaluator service as `fnr serve`, running the image's entrypoint for
 * every call, plus grpc.health.v1; SIGTERM drains calls in flight.
 */
import {EntrypointEvaluator} from './evaluators/entrypoint.js'
import {gracefulStopper, type StopHandle} from './grpc/lifecycle.js'
import {EvaluatorServer} from './grpc/server.js'
import type {Logger} from './log.js'

export interface WrapperOptions {
  port: number
  host?: string
  maxRequestBodySize: number
  entrypoint: string[]
  gracePeriodMs: number
}

export interface RunningWrapper extends StopHandle {
  server: EvaluatorServer
  port: number
}

export async function startWrapperServer(options: WrapperOptions, logger: Logger, handleSignals = true): Promise<RunningWrapper> {
  // Validates the entrypoint before anything listens: no entrypoint is a startup error.
  const evaluator = new EntrypointEvaluator({entrypoint: options.entrypoint, maxOutputBytes: options.maxRequestBodySize, logger})
  const server = new EvaluatorServer({evaluator, maxMessageSize: options.maxRequestBodySize, logger, host: options.host, port: options.port})
  const port = await server.start()
  server.setServing(true)
  const handle = gracefulStopper(
    async () => {
      logger.lifecycle('draining', {activeCalls: server.activeCalls})
      const result = await server.shutdown(options.gracePeriodMs)
      logger.lifecycle('stopped', {forced: result.forced})
      return result
    },
    () => server.forceShutdown(),
    logger,
    handleSignals,
  )
  logger.lifecycle('wrapper server is ready', {port, entrypoint: options.entrypoint})
  return {server, port, ...handle}
}
