/**
 * The runner's GC schedule: one collection (list, plan with model/gc.ts planGc, apply) every
 * --scan-interval, one at a time, its plan counted in the metrics.
 */
import {silentLogger, type Logger} from '../../telemetry/log.js'
import {NO_TELEMETRY, type Telemetry} from '../../telemetry/telemetry.js'
import type {GcPlan} from '../model/gc.js'

export interface GcTarget {
  /** One collection: list, plan, apply. */
  collectGarbage(): Promise<GcPlan>
}

/** Runs GC every interval (none when the interval is ≤ 0); one run at a time. */
export class PodGarbageCollector {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<unknown> | undefined
  private stopped = false
  runs = 0

  constructor(
    private readonly target: GcTarget,
    private readonly intervalMs: number,
    private readonly logger: Logger = silentLogger,
    /** Where each completed pass is counted (the server's); default none. */
    private readonly telemetry: Telemetry = NO_TELEMETRY,
  ) {}

  start(): void {
    if (this.intervalMs <= 0 || this.stopped) return
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs)
    this.timer.unref()
  }

  /** Runs one collection now (or joins the one running). */
  async runOnce(): Promise<GcPlan | undefined> {
    if (this.stopped) return undefined
    if (this.running) return (await this.running) as GcPlan | undefined
    const run = this.target.collectGarbage().then(
      (plan) => {
        this.runs++
        this.telemetry.metrics.podGc(plan)
        return plan
      },
      (err: unknown) => {
        this.logger.warn('pod garbage collection failed', {error: (err as Error).message})
        return undefined
      },
    )
    this.running = run
    try {
      return await run
    } finally {
      this.running = undefined
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.timer)
    await this.running
  }
}
