/**
 * A hook for tests that must signal the process at an exact point (never set in normal use):
 * FNR_TEST_WRITE_PAUSE is a comma-separated list of step names (transaction.ts: `staged`,
 * `apply:REL`, `undo:REL`; yaml.ts: `parse`) and FNR_TEST_WRITE_FIFO a FIFO. At a named step the
 * process writes the step's name and a newline to the FIFO, then waits for its next SIGINT or
 * SIGTERM, so a test signals it exactly between two steps without sleeping.
 */
import {writeFile} from 'node:fs/promises'

/** Whether the environment asks to pause at this step (cheap: no await when it does not). */
export function pauseRequested(step: string): boolean {
  const steps = process.env.FNR_TEST_WRITE_PAUSE
  return steps !== undefined && process.env.FNR_TEST_WRITE_FIFO !== undefined && steps.split(',').includes(step)
}

/** Pauses at the step if asked to (see the module comment). */
export async function pause(step: string): Promise<void> {
  if (!pauseRequested(step)) return
  let resume: () => void = () => {}
  const signalled = new Promise<void>((resolve) => {
    resume = resolve
  })
  process.once('SIGINT', resume)
  process.once('SIGTERM', resume)
  // Signal listeners do not keep the process alive; this does, until the signal comes.
  const alive = setInterval(() => {}, 60_000)
  try {
    await writeFile(process.env.FNR_TEST_WRITE_FIFO!, `${step}\n`)
    await signalled
  } finally {
    clearInterval(alive)
    process.off('SIGINT', resume)
    process.off('SIGTERM', resume)
  }
}
