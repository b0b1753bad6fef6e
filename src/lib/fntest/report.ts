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
}

export function countResults(results: readonly CaseResult[]): Counts {
  const c: Counts = {total: results.length, passed: 0, failed: 0, updated: 0}
  for (const r of results) c[r.status]++
  return c
}

function seconds(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)}ms` : `${(ms / 1000).toFixed(1)}s`
}

/** What the console shows for one case: a status line, then each problem and its diff. */
export function formatCaseResult(r: CaseResult): string {
  const tag = r.status === 'passed' ? 'PASS' : r.status === 'updated' ? 'UPDATED' : 'FAIL'
  let out = `${tag.padEnd(7)} ${r.name} (${seconds(r.durationMs)})\n`
  if (r.status === 'updated') out += `        wrote ${r.updated.join(', ')}\n`
  for (const w of r.warnings ?? []) out += `  ! ${w}\n`
  for (const p of r.problems) {
    out += `  ✗ ${p.message}\n`
    if (p.detail) out += `${p.detail.replace(/\n?$/, '\n')}`
  }
  return out
}

/** "3 passed, 1 failed (4 cases, 1.2s)", with "N updated" when some were. */
export function formatSummary(run: FnTestRun): string {
  const c = countResults(run.results)
  const parts = [`${c.passed} passed`, `${c.failed} failed`]
  if (c.updated > 0) parts.push(`${c.updated} updated`)
  return `${parts.join(', ')} (${c.total} case${c.total === 1 ? '' : 's'}, ${seconds(run.durationMs)})\n`
}

export interface JsonSummary extends Counts {
  durationMs: number
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
  }>
}

export function jsonSummary(run: FnTestRun): JsonSummary {
  return {
    ...countResults(run.results),
    durationMs: Math.round(run.durationMs),
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
    })),
  }
}
