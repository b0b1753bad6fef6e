/**
 * The reliability suites' bookkeeping: every distinct bad input tried, every crash and every
 * hang, counted across all test files of one mocha run and printed once at the very end
 * (`bad inputs tried: N, crashes: 0, hangs: 0`).
 *
 * A hang is a call or command that gives no answer within a generous per-input limit (HANG_MS);
 * it is detected by that timeout, never by asserting how fast something was.
 */

/** How long one input may take before it counts as a hang. */
export const HANG_MS = 10_000

export class HangError extends Error {}

class Tally {
  private readonly inputs = new Map<string, string>()
  private attempts = 0
  readonly crashes: string[] = []
  readonly hangs: string[] = []
  /** Generated inputs of property-based runs (fast-check), counted apart from the corpus. */
  generated = 0

  /** Records one bad input (by a unique label within its area). */
  tried(area: string, label: string): void {
    this.attempts++
    this.inputs.set(`${area}: ${label}`, area)
  }

  crash(label: string, why: string): void {
    this.crashes.push(`${label}: ${why}`)
  }

  hang(label: string): void {
    this.hangs.push(label)
  }

  get distinct(): number {
    return this.inputs.size
  }

  byArea(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const area of this.inputs.values()) out[area] = (out[area] ?? 0) + 1
    return out
  }

  summary(): string {
    const areas = Object.entries(this.byArea())
      .map(([a, n]) => `${a} ${n}`)
      .join(', ')
    const lines = [
      `bad inputs tried: ${this.distinct}, crashes: ${this.crashes.length}, hangs: ${this.hangs.length}`,
      `  by area: ${areas || 'none'}; attempts (with repeats against several targets): ${this.attempts}; generated property-test inputs: ${this.generated}`,
    ]
    for (const c of this.crashes) lines.push(`  crash: ${c}`)
    for (const h of this.hangs) lines.push(`  hang: ${h}`)
    return lines.join('\n')
  }
}

/**
 * Shared state lives on globalThis: under tsx, mocha may load one test file as CommonJS and
 * another as ESM, which gives each its own copy of this module.
 */
const GLOBAL = globalThis as typeof globalThis & {[key: symbol]: unknown}
const TALLY = Symbol.for('fnr.reliability.tally')
const SUMMARY = Symbol.for('fnr.reliability.summary')

export const tally: Tally = (GLOBAL[TALLY] ??= new Tally()) as Tally

/** True when the long versions run (scripts/reliability.mjs sets FNR_RELIABILITY=long). */
export const LONG = process.env.FNR_RELIABILITY === 'long'

/**
 * Registers (once per run) a root-level `after` hook that prints the summary when every test of
 * the run has finished. Call it at the top level of each reliability test file.
 */
export function registerSummary(): void {
  if (GLOBAL[SUMMARY]) return
  GLOBAL[SUMMARY] = true
  // A root-level hook: called outside any describe, it runs after the whole run.
  after(() => {
    process.stdout.write(`\n${tally.summary()}\n`)
  })
}

/**
 * Awaits `work` for at most HANG_MS (or `ms`); past that the input counts as a hang and the
 * returned promise rejects with a HangError naming it.
 */
export async function withinHangLimit<T>(label: string, work: Promise<T>, ms = HANG_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      tally.hang(label)
      reject(new HangError(`${label}: no answer within ${ms} ms (counted as a hang)`))
    }, ms)
  })
  try {
    return await Promise.race([work, limit])
  } finally {
    clearTimeout(timer)
  }
}

/** Polls `check` until it returns true or `ms` pass; returns its last answer. */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 5_000, every = 20): Promise<boolean> {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return true
    if (Date.now() >= end) return false
    await new Promise((r) => setTimeout(r, every))
  }
}
