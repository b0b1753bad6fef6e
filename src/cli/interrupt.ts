/**
 * SIGINT/SIGTERM for the one-shot commands (eval, test, render): the first signal aborts the
 * run's AbortSignal, which kills the running function's whole process group (process/run.ts) and
 * lets the command clean up (fnr test removes its scratch folders) and end with 128 + the
 * signal's number (130 for SIGINT, 143 for SIGTERM), writing nothing. If the command is still
 * running a few seconds later (e.g. blocked on a stdin that never ends), or on a second signal,
 * the process exits at once with that code, except while a package's files are being changed or
 * restored (resourcelist/transaction.ts): the exit then waits for that to end, so the package is
 * never left half written.
 */
import {FnrError} from '../lib/errors.js'
import {afterPackageWrites, holdsPackageWrites} from '../lib/resourcelist/transaction.js'
import {errorFormFor, renderError} from './render-error.js'

const SIGNALS = ['SIGINT', 'SIGTERM'] as const
const EXIT_CODE: Record<(typeof SIGNALS)[number], number> = {SIGINT: 130, SIGTERM: 143}
/** How long a command gets to clean up after the first signal. */
const GRACE_MS = 3000

export interface Interrupt {
  signal: AbortSignal
  /** The signal received, if any. */
  readonly received: (typeof SIGNALS)[number] | undefined
  /** 130 or 143 once a signal came, else undefined. */
  readonly exitCode: number | undefined
  /** Throws the Cancelled error of an interrupted run (use before writing anything). */
  throwIfInterrupted(): void
  /** Removes the handlers. */
  dispose(): void
}

export function onInterrupt(stderr: NodeJS.WritableStream = process.stderr): Interrupt {
  const controller = new AbortController()
  let received: (typeof SIGNALS)[number] | undefined
  const handlers = new Map<string, () => void>()
  for (const sig of SIGNALS) {
    const exit = (code: number): void => {
      if (holdsPackageWrites()) stderr.write('fnr: restoring the package before exiting\n')
      afterPackageWrites(() => process.exit(code))
    }
    const handler = (): void => {
      if (received !== undefined) {
        exit(EXIT_CODE[received])
        return
      }
      received = sig
      controller.abort(interruptedError(sig))
      setTimeout(() => {
        stderr.write(`fnr: still running ${GRACE_MS / 1000}s after ${sig}; exiting\n`)
        exit(EXIT_CODE[sig])
      }, GRACE_MS).unref()
    }
    handlers.set(sig, handler)
    process.on(sig, handler)
  }
  return {
    signal: controller.signal,
    get received() {
      return received
    },
    get exitCode() {
      return received === undefined ? undefined : EXIT_CODE[received]
    },
    throwIfInterrupted() {
      if (received !== undefined) throw interruptedError(received)
    },
    dispose() {
      for (const [sig, handler] of handlers) process.off(sig, handler)
    },
  }
}

export function interruptedError(sig: string): FnrError {
  return new FnrError('Cancelled', `interrupted by ${sig}: the function was killed and nothing was written`, {details: {interrupted: sig}})
}

/**
 * Runs a one-shot command's body under onInterrupt: an error is rendered by `render` (the
 * command's catch) with the interrupt's exit code (130, 143), which wins over the error's; what the
 * body registered with onClose (a runner connection) and the signal handlers go at the end,
 * whatever happened.
 */
export async function runInterruptible(
  body: (interrupt: Interrupt, onClose: (close: () => void) => void) => Promise<void>,
  render: (err: Error, exitCode: number | undefined) => Promise<void>,
): Promise<void> {
  const interrupt = onInterrupt()
  const closers: Array<() => void> = []
  try {
    await body(interrupt, (close) => closers.push(close))
  } catch (err) {
    await render(err as Error, interrupt.exitCode)
  } finally {
    for (const close of closers) close()
    interrupt.dispose()
  }
}

/**
 * A kpt-compatible command on its oclif-free path (fast-eval.ts, fast-render.ts): runs `body` with
 * the interrupt's signal; resolves with the exit code: 0, the failure's in the command's error
 * form (render-error.ts), or an interrupt's 130/143.
 */
export async function runFastCommand(command: 'eval' | 'render' | 'source' | 'sink', argv: readonly string[], body: (signal: AbortSignal) => Promise<void>): Promise<number> {
  const interrupt = onInterrupt()
  try {
    await body(interrupt.signal)
    return 0
  } catch (err) {
    const code = renderError(err, 0, process.stderr, errorFormFor(command, argv))
    return interrupt.exitCode ?? code
  } finally {
    interrupt.dispose()
  }
}
