/**
 * The reliability suites' bookkeeping: every distinct bad input tried, every crash and every
 * hang, counted across all test files of one mocha run and printed once at the very end
 * (`bad inputs tried: N distinct, crashes: 0, hangs: 0`), then enforced:
 *
 *   - any crash or hang fails the run (a root-level `after` hook), whatever part of the set ran;
 *   - when the whole reliability set ran (every file of test/reliability loaded, every one of its
 *     tests run: no --grep, no single file), fewer than MIN_DISTINCT_BAD_INPUTS distinct bad
 *     inputs fails the run too.
 *
 * "Distinct" is keyed on the input itself (its bytes, its arguments), not on the test's label or
 * area: the same image name sent to two servers, or the same bytes in two suites, count once. Valid
 * inputs that are expected to succeed (e.g. a mapped name with white space around it) are counted
 * apart as controls, and injected faults (a function that hangs or floods) are not inputs at all.
 *
 * A hang is a call or command that gives no answer within a generous per-input limit (HANG_MS);
 * it is detected by that timeout, never by asserting how fast something was.
 */
import {createHash} from 'node:crypto'
import {readdirSync} from 'node:fs'
import path from 'node:path'

import {REPO_ROOT} from '../serve.js'

/** How long one input may take before it counts as a hang. */
export const HANG_MS = 10_000

/** The target for the whole reliability set: at least this many distinct bad inputs. */
export const MIN_DISTINCT_BAD_INPUTS = 200

export class HangError extends Error {}

/** A stable key for an input: strings, numbers, Buffers and plain objects/arrays of them. */
export function inputKey(input: unknown): string {
  const hash = createHash('sha256')
  const feed = (v: unknown): void => {
    if (Buffer.isBuffer(v) || v instanceof Uint8Array) {
      hash.update(`b${v.length}:`)
      hash.update(v)
    } else if (typeof v === 'string') {
      hash.update(`s${Buffer.byteLength(v)}:`)
      hash.update(v)
    } else if (Array.isArray(v)) {
      hash.update(`a${v.length}[`)
      for (const x of v) feed(x)
      hash.update(']')
    } else if (v && typeof v === 'object') {
      const keys = Object.keys(v).sort()
      hash.update(`o${keys.length}{`)
      for (const k of keys) {
        if ((v as Record<string, unknown>)[k] === undefined) continue
        feed(k)
        feed((v as Record<string, unknown>)[k])
      }
      hash.update('}')
    } else hash.update(`p${String(v)};`)
  }
  feed(input)
  return hash.digest('hex')
}

export class Tally {
  /** Bad inputs: key → the area it was first tried in. */
  private readonly inputs = new Map<string, string>()
  /** Valid inputs expected to succeed (controls): not counted as bad inputs. */
  private readonly valid = new Set<string>()
  private readonly faults = new Set<string>()
  private attempts = 0
  readonly crashes: string[] = []
  readonly hangs: string[] = []
  /** Generated inputs of property-based runs (fast-check), counted apart from the corpus. */
  generated = 0

  /**
   * Records one input tried. `input` is the input itself (bytes, strings, arguments: whatever
   * makes it that input), which is what makes it distinct. `valid`: an input expected to succeed
   * everywhere it is sent (a control), not counted as a bad one.
   */
  tried(area: string, input: unknown, options: {valid?: boolean} = {}): void {
    this.attempts++
    const key = inputKey(input)
    if (options.valid) {
      if (!this.inputs.has(key)) this.valid.add(key)
      return
    }
    this.valid.delete(key)
    if (!this.inputs.has(key)) this.inputs.set(key, area)
  }

  /** Records one injected fault (a faulty function, a killed server): reported, not an input. */
  fault(label: string): void {
    this.faults.add(label)
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
      `bad inputs tried: ${this.distinct} distinct, crashes: ${this.crashes.length}, hangs: ${this.hangs.length}`,
      `  distinct = keyed on the input itself; by area where first tried: ${areas || 'none'}`,
      `  not counted: ${this.valid.size} valid control inputs expected to succeed, ${this.faults.size} injected faults, ${this.generated} generated property-test inputs; attempts (with repeats against several targets): ${this.attempts}`,
    ]
    for (const c of this.crashes) lines.push(`  crash: ${c}`)
    for (const h of this.hangs) lines.push(`  hang: ${h}`)
    return lines.join('\n')
  }

  /** What is wrong with the run (empty when the target is met); `whole`: the whole set ran. */
  problems(whole: boolean): string[] {
    const out: string[] = []
    if (this.crashes.length > 0) out.push(`${this.crashes.length} crash(es)`)
    if (this.hangs.length > 0) out.push(`${this.hangs.length} hang(s)`)
    if (whole && this.distinct < MIN_DISTINCT_BAD_INPUTS) out.push(`only ${this.distinct} distinct bad inputs, fewer than ${MIN_DISTINCT_BAD_INPUTS}`)
    return out
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

export const RELIABILITY_DIR = path.join(REPO_ROOT, 'test', 'reliability')

/** The test files of the reliability set. */
export function reliabilityFiles(): string[] {
  return readdirSync(RELIABILITY_DIR)
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => path.join(RELIABILITY_DIR, f))
    .sort()
}

interface SuiteLike {
  file?: string
  suites: SuiteLike[]
  /** skipReason: the test ran and skipped itself, saying why (test/support/skip.ts): it counts as run. */
  tests: Array<{file?: string; state?: string; skipReason?: string}>
}

/**
 * Whether the whole reliability set ran in this mocha run: every file of test/reliability was
 * loaded and every test in them ran (passed, failed, or skipped itself with a reason because what
 * it checks cannot run here, like the npm audit; none filtered out by --grep or skipped otherwise).
 */
export function wholeSetRan(root: SuiteLike): {whole: boolean; why: string} {
  const files = reliabilityFiles()
  const loaded = new Set<string>()
  let notRun = 0
  const walk = (s: SuiteLike): void => {
    if (s.file) loaded.add(path.resolve(s.file))
    for (const t of s.tests) {
      if (!t.file) continue
      const f = path.resolve(t.file)
      loaded.add(f)
      if (files.includes(f) && t.state !== 'passed' && t.state !== 'failed' && t.skipReason === undefined) notRun++
    }
    for (const c of s.suites) walk(c)
  }
  walk(root)
  const missing = files.filter((f) => !loaded.has(f))
  if (missing.length > 0) return {whole: false, why: `${files.length - missing.length} of ${files.length} reliability files loaded`}
  if (notRun > 0) return {whole: false, why: `${notRun} reliability test(s) did not run`}
  return {whole: true, why: `all ${files.length} reliability files ran`}
}

/**
 * Registers (once per run) a root-level `after` hook that prints the summary when every test of
 * the run has finished, and fails the run when the target is missed (see the top of this file).
 * Call it at the top level of each reliability test file that tries inputs.
 */
export function registerSummary(): void {
  if (GLOBAL[SUMMARY]) return
  GLOBAL[SUMMARY] = true
  // A root-level hook: called outside any describe, it runs after the whole run.
  after(function (this: Mocha.Context) {
    let root = this.test?.parent as unknown as (SuiteLike & {parent?: unknown}) | undefined
    while (root && (root as {parent?: SuiteLike}).parent) root = (root as {parent?: SuiteLike}).parent as typeof root
    const {whole, why} = root ? wholeSetRan(root) : {whole: false, why: 'no mocha root suite'}
    const problems = tally.problems(whole)
    const verdict =
      problems.length > 0
        ? `target (≥ ${MIN_DISTINCT_BAD_INPUTS} distinct bad inputs, 0 crashes, 0 hangs) MISSED: ${problems.join(', ')}`
        : whole
          ? `target (≥ ${MIN_DISTINCT_BAD_INPUTS} distinct bad inputs, 0 crashes, 0 hangs) met (${why})`
          : `0 crashes, 0 hangs; the ≥ ${MIN_DISTINCT_BAD_INPUTS} target is checked only when the whole set runs (${why})`
    process.stdout.write(`\n${tally.summary()}\n${verdict}\n`)
    if (problems.length > 0) throw new Error(`reliability ${verdict}`)
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
