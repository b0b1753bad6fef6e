/**
 * Process lifecycle shared by `fnr serve` and `fnr wrapper-server`: the first SIGTERM/SIGINT
 * starts a graceful stop, a second one exits at once with code 1.
 */
import type {Logger} from '../telemetry/log.js'
import {killAllRunningFunctions} from '../process/sweep.js'

export interface StopHandle {
  /** Resolves when the graceful stop has finished. */
  done: Promise<{forced: boolean}>
  /** Starts the graceful stop (idempotent). */
  stop(): Promise<{forced: boolean}>
}

export function gracefulStopper(
  stopFn: () => Promise<{forced: boolean}>,
  forceFn: () => void,
  logger: Logger,
  handleSignals: boolean,
): StopHandle {
  let stopping: Promise<{forced: boolean}> | undefined
  let resolveDone!: (v: {forced: boolean}) => void
  const done = new Promise<{forced: boolean}>((r) => (resolveDone = r))

  const stop = (): Promise<{forced: boolean}> => {
    stopping ??= stopFn().then((result) => {
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
      killAllRunningFunctions()
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
