/**
 * `fnr test`: reporting. Console lines per case (with the diffs of failures), the summary line,
 * the `--json` summary, and JUnit XML (junit.ts).
 */
import type {CaseResult, FnTestRun} from './run.js'

export interface Counts {
  total: number
  passed: number
  failed: number
  updated: number
  skipped: number
  /** Cases that could not run (invalid layout or config, function not found, setup.sh failed). */
  errors: number
  /** Cases stopped by SIGINT/SIGTERM while they ran. */
  interrupted: number
}

const COUNT_OF: Record<CaseResult['status'], Exclude<keyof Counts, 'total'>> = {
  passed: 'passed',
  failed: 'failed',
  updated: 'updated',
  skipped: 'skipped',
  error: 'errors',
  interrupted: 'interrupted',
}

/** Counts of the results; `total` is the cases that ran (FnTestRun.notRun were not started). */
export function countResults(results: readonly CaseResult[]): Counts {
  const c: Counts = {total: results.length, passed: 0, failed: 0, updated: 0, skipped: 0, errors: 0, interrupted: 0}
  for (const r of results) c[COUNT_OF[r.status]]++
  return c
}

function seconds(ms: number): string {
  // rounded first, so 999.6 ms is 1.0s, never 1000ms
  return Math.round(ms) < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(1)}s`
}

const TAG: Record<CaseResult['status'], string> = {passed: 'PASS', failed: 'FAIL', updated: 'UPDATED', skipped: 'SKIP', error: 'ERROR', interrupted: 'INTERRUPTED'}

/** What the console shows for one case: a status line, then each problem and its diff. */
export function formatCaseResult(r: CaseResult): string {
  let out = `${TAG[r.status].padEnd(7)} ${r.name} (${seconds(r.durationMs)})\n`
  if (r.status === 'updated') out += `        wrote ${r.updated.join(', ')}\n`
  for (const w of r.warnings ?? []) out += `  ! ${w}\n`
  for (const p of r.problems) {
    out += `  ✗ ${p.message}\n`
    if (p.detail) out += `${p.detail.replace(/\n?$/, '\n')}`
  }
  return out
}

/**
 * "3 passed, 1 failed (4 cases, 1.2s)", with the other counts when they are not zero; an
 * interrupted run starts with "interrupted by SIGINT:" and says how many cases did not run.
 */
export function formatSummary(run: FnTestRun): string {
  const c = countResults(run.results)
  const parts = [`${c.passed} passed`, `${c.failed} failed`]
  if (c.errors > 0) parts.push(`${c.errors} error${c.errors === 1 ? '' : 's'}`)
  if (c.updated > 0) parts.push(`${c.updated} updated`)
  if (c.skipped > 0) parts.push(`${c.skipped} skipped`)
  if (c.interrupted > 0) parts.push(`${c.interrupted} interrupted`)
  if (run.notRun > 0) parts.push(`${run.notRun} not run`)
  const total = c.total + run.notRun
  return `${run.interrupted ? `interrupted by ${run.interrupted}: ` : ''}${parts.join(', ')} (${total} case${total === 1 ? '' : 's'}, ${seconds(run.durationMs)})\n`
}

export interface JsonSummary extends Counts {
  durationMs: number
  /** Cases found but not started (the run was interrupted). */
  notRun: number
  /** SIGINT or SIGTERM when the run was interrupted. */
  signal?: string
  cases: Array<{
    name: string
    dir: string
    function: string
    status: CaseResult['status']
    durationMs: number
    exitCode: number
    timedOut: boolean
    problems: CaseResult['problems']
    updated: string[]
    warnings: string[]
  }>
}

export function jsonSummary(run: FnTestRun): JsonSummary {
  return {
    ...countResults(run.results),
    durationMs: Math.round(run.durationMs),
    notRun: run.notRun,
    ...(run.interrupted ? {signal: run.interrupted} : {}),
    cases: run.results.map((r) => ({
      name: r.name,
      dir: r.dir,
      function: r.function,
      status: r.status,
      durationMs: Math.round(r.durationMs),
      exitCode: r.exitCode,
      timedOut: r.timedOut,
      problems: r.problems,
      updated: r.updated,
      warnings: r.warnings ?? [],
    })),
  }
}
