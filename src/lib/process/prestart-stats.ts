/**
 * The counts of the pre-started function pool (prestart.ts), kept apart from it so that the
 * metrics (telemetry/metrics.ts) read them without loading the pool and the spawner.
 */

/** Why a pre-started process was killed or dropped without serving a call (docs/process.md "Pre-started functions"). */
export type PrestartDiscardReason = 'exited' | 'died' | 'binary-changed' | 'config-changed' | 'idle' | 'evicted' | 'shutdown' | 'start-failed'

export const PRESTART_DISCARD_REASONS: readonly PrestartDiscardReason[] = ['exited', 'died', 'binary-changed', 'config-changed', 'idle', 'evicted', 'shutdown', 'start-failed']

export interface PrestartStats {
  /** Calls that took a pre-started process. */
  hits: number
  /** Calls of a pooled image that found none and started one as usual. */
  misses: number
  discarded: Record<PrestartDiscardReason, number>
  /** Processes waiting in the pool now (all pools of this runner process). */
  size: number
}

function emptyDiscarded(): Record<PrestartDiscardReason, number> {
  return Object.fromEntries(PRESTART_DISCARD_REASONS.map((r) => [r, 0])) as Record<PrestartDiscardReason, number>
}

const stats: PrestartStats = {hits: 0, misses: 0, discarded: emptyDiscarded(), size: 0}

/** The counts so far (a live object: read, do not keep). */
export function prestartStats(): Readonly<PrestartStats> {
  return stats
}

/** For the pool: the object it counts in. */
export function prestartCounters(): PrestartStats {
  return stats
}
