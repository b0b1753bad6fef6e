/**
 * Turns of the event loop for CPU work that many calls do at once.
 *
 * When several functions end together (their exits arrive in one message from the spawner), each
 * call's synchronous work (joining its output, decoding it, finding and reading its results) used
 * to run back to back in one drain of the microtask queue: 20 failing functions with 6 MB outputs
 * held the wrapper server's event loop for 1.6 s, and its health checks waited that long. A plain
 * `setImmediate` does not help there: every immediate queued in one phase runs in the next check
 * phase, one after the other, before any I/O is read.
 *
 * `nextTurn()` hands out turns one at a time: each waiter resumes in an immediate of its own, and
 * the next waiter's immediate is queued from inside it, so it runs in the next iteration of the
 * loop, after the poll phase. Between two pieces of such work the server therefore reads its
 * sockets and runs its timers (health checks, other calls, deadlines). Waiters resume in the order
 * they asked.
 */
const waiting: Array<() => void> = []
let scheduled = false

function release(): void {
  scheduled = false
  const next = waiting.shift()
  if (waiting.length > 0) {
    scheduled = true
    setImmediate(release)
  }
  next?.()
}

/** Resolves on a later turn of the event loop, at most one waiter per turn. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve)
    if (!scheduled) {
      scheduled = true
      setImmediate(release)
    }
  })
}

/** Waiters not yet resumed (tests). */
export function turnsWaiting(): number {
  return waiting.length
}
