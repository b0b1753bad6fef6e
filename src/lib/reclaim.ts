/**
 * Giving back the memory of finished calls (docs/limits.md: "Memory that returns").
 *
 * Request and response bytes live in buffers outside V8's heap, freed only when the objects
 * holding them are collected. Under traffic V8 collects by itself: every few MiB of new buffers
 * push its external memory past its limit and start a collection. A runner that goes quiet after
 * a burst (or after a slowloris client leaves) allocates nothing, so nothing starts one, and it
 * would keep hundreds of MiB that nothing uses. The reclaimer counts the bytes the budget
 * releases and asks for a full collection when V8 has not made one:
 *
 *   - when the runner goes idle after freeing at least IDLE_RECLAIM_BYTES, then a few more times
 *     while it stays idle (IDLE_FOLLOW_UPS); not if calls came meanwhile (a client sending one
 *     call after another makes the runner idle for a moment between them);
 *   - when `reclaimAfter` bytes were freed while busy, unless V8 has made a major collection of
 *     its own since the first of them. A forced collection is atomic (no incremental marking): it
 *     took 15 ms on average, 27 ms at most, while 8 calls of 5 MiB ran, when V8 was collecting
 *     several times a second anyway (docs/limits.md).
 */
import {PerformanceObserver, constants as perfConstants, performance, type PerformanceEntry} from 'node:perf_hooks'
import v8 from 'node:v8'
import vm from 'node:vm'

import {silentLogger, type Logger} from './telemetry/log.js'

const MiB = 1024 * 1024

/** Bytes an idle runner must have freed before it collects (a quiet runner answering small calls never does). */
export const IDLE_RECLAIM_BYTES = 16 * MiB

/** Collections after the one an idle runner asks for (at 0.4 s, 1.6 s and 6.4 s after it). */
export const IDLE_FOLLOW_UPS = 3

/** Delay of the first collection after the bytes were freed (one collection for a burst of releases). */
export const FIRST_DELAY_MS = 100

let gcFunction: (() => void) | null | undefined

/**
 * V8's full garbage collection, or null where it cannot be had. The servers run with --expose-gc
 * on their command line (bin/run.js adds it, the images pass it), which makes `gc` a global. A
 * process started without it (in-process tests, a Node without process.execve) turns the flag on
 * at run time instead, which Node's documentation warns may behave unpredictably, hence only as
 * the fallback.
 */
function fullGc(): (() => void) | null {
  if (gcFunction !== undefined) return gcFunction
  const global = (globalThis as {gc?: unknown}).gc
  if (typeof global === 'function') return (gcFunction = global as () => void)
  try {
    v8.setFlagsFromString('--expose-gc')
    gcFunction = vm.runInNewContext('gc') as () => void
  } catch {
    gcFunction = null
  }
  return gcFunction
}

let lastMajorGc = Number.NEGATIVE_INFINITY
let gcObserver: PerformanceObserver | undefined

/**
 * When (performance.now()) the last major collection of this process ended, V8's own or a forced
 * one; -Infinity before the first. Entries arrive a turn of the event loop after the collection.
 */
export function lastMajorGcAt(): number {
  if (!gcObserver) {
    gcObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if ((entry as PerformanceEntry & {detail?: {kind?: number}}).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
          lastMajorGc = Math.max(lastMajorGc, entry.startTime + entry.duration)
        }
      }
    })
    gcObserver.observe({entryTypes: ['gc']})
  }
  return lastMajorGc
}

export interface ReclaimerOptions {
  /** Freed bytes after which a collection is due while the runner is busy. */
  reclaimAfter: number
  /** True while calls are running, queued or being received. */
  busy: () => boolean
  logger?: Logger
  /** For tests: the collection to run, the clock of V8's major collections, the timer. */
  gc?: (() => void) | null
  lastMajorGcAt?: () => number
  schedule?: (run: () => void, ms: number) => void
}

/** A timer that does not keep the process alive. */
function unrefTimer(run: () => void, ms: number): void {
  setTimeout(run, ms).unref()
}

/** Counts freed bytes and runs a full collection when one is due (see the top of the file). */
export class MemoryReclaimer {
  private freed = 0
  /** When the first of the `freed` bytes was freed (performance.now()). */
  private freedSince = 0
  private pending = false
  private readonly logger: Logger
  private readonly gc: (() => void) | null
  private readonly majorGcAt: () => number
  private readonly schedule: (run: () => void, ms: number) => void
  /** Collections this reclaimer ran, and those it skipped because V8 had made one. */
  readonly stats = {collected: 0, skipped: 0}

  constructor(private readonly options: ReclaimerOptions) {
    this.logger = options.logger ?? silentLogger
    this.gc = options.gc === undefined ? fullGc() : options.gc
    this.majorGcAt = options.lastMajorGcAt ?? lastMajorGcAt
    this.schedule = options.schedule ?? unrefTimer
    if (this.gc) this.majorGcAt() // start watching now, so the first collections are seen
  }

  /** Notes `bytes` released. */
  noteFreed(bytes: number): void {
    if (this.freed === 0) this.freedSince = performance.now()
    this.freed += bytes
    const idleDue = !this.options.busy() && this.freed >= IDLE_RECLAIM_BYTES
    if ((this.freed < this.options.reclaimAfter && !idleDue) || this.pending) return
    this.collectSoon(FIRST_DELAY_MS, IDLE_FOLLOW_UPS)
  }

  /**
   * A full collection in `ms`; while the runner stays idle, `followUps` more, each a little later.
   * Bytes released while connections close (a slowloris client leaving: hundreds of streams reset
   * at once) are still reachable from sessions and streams Node finishes closing over the next
   * turns; a single collection right after the first release kept them, and an idle runner
   * allocates nothing that would start another one: RSS stayed at 570-880 MiB until V8's own
   * memory reducer ran, if it did (test/reliability/memory-limit.test.ts).
   */
  private collectSoon(ms: number, followUps: number): void {
    const gc = this.gc
    if (!gc) return
    this.pending = true
    this.schedule(() => {
      this.pending = false
      const busy = this.options.busy()
      if (busy && this.freed < this.options.reclaimAfter) {
        // Asked for by a runner that went idle and is busy again: an atomic collection now would
        // stall the calls that came (50-70 ms each on a loaded machine, behind every 5 MiB call of
        // a client sending one after another). Under traffic V8 collects by itself; the count
        // stays, so the runner collects when it is idle again, or once it passes reclaimAfter.
        this.stats.skipped++
        return
      }
      const v8Collected = this.majorGcAt()
      if (busy && v8Collected > this.freedSince) {
        // Busy, and V8 has collected since these bytes began to add up: it is collecting by
        // itself. The count stays, from V8's collection on: the next release checks again, and
        // a runner that goes idle next still collects what was freed after it.
        this.freedSince = v8Collected
        this.stats.skipped++
        return
      }
      this.freed = 0
      this.collect(gc)
      if (followUps > 0 && !busy) this.collectSoon(ms * 4, followUps - 1)
    }, ms)
  }

  /** Runs a full collection (logged at debug level with what it gave back). */
  private collect(gc: () => void): void {
    const before = process.memoryUsage().external
    gc()
    this.stats.collected++
    this.logger.debug('collected garbage', {externalBeforeMiB: Math.round(before / MiB), externalAfterMiB: Math.round(process.memoryUsage().external / MiB)})
  }
}
