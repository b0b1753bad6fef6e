/** The conformance suite's counts and the category of each case fnr fails where kpt passes. */
import {FLAGS, FORM, UNMAPPED_KPT} from './categories.js'
import {KNOWN_FAILURES} from './known-failures.js'
import type {Outcome} from './kpt-runner.js'

export interface CaseReport {
  name: string
  /** Why the case does not run here (its function is not built, skip, runtimes). */
  notRun?: string
  kpt?: Outcome
  fnr?: Outcome
  /** Where fnr fails: the known list's category, else the first check that failed. */
  category?: string
}


/** A failure's category: the known list's reason, else what the failure shows. */
export function categorize(name: string, fnr: Outcome): string {
  const known = KNOWN_FAILURES[name] as string | undefined
  if (known) return known
  const stderr = fnr.stderr ?? ''
  if (/^kpt \(fnr test\): '.*' is not available here/m.test(stderr)) return UNMAPPED_KPT
  if (/Nonexistent flag|Unexpected argument|stdin is empty/.test(stderr)) return FLAGS
  if (fnr.formOnly) return FORM
  switch (fnr.mismatch) {
    case 'exit code':
      return 'exit code'
    case 'stderr':
    case 'stdout':
      return 'message'
    case 'results':
      return 'results.yaml differs'
    case 'diff':
      return 'output differs (package diff)'
    default:
      return fnr.mismatch ?? 'unknown'
  }
}

/** fnr's first run did what kpt's did: exit code (zero or not), results and package diff. */
export function sameObserved(r: CaseReport): boolean {
  const k = r.kpt?.observed
  const f = r.fnr?.observed
  return !!k && !!f && k.exitCode === 0 === (f.exitCode === 0) && k.results === f.results && k.diff === f.diff
}

const count = <T>(items: readonly T[], key: (t: T) => string): Array<[string, number]> => {
  const m = new Map<string, number>()
  for (const i of items) m.set(key(i), (m.get(key(i)) ?? 0) + 1)
  return [...m].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
}

export function formatReport(reports: readonly CaseReport[]): string {
  const ran = reports.filter((r) => !r.notRun)
  const kptPassed = ran.filter((r) => r.kpt?.passed)
  const fnrPassed = ran.filter((r) => r.fnr?.passed)
  const both = ran.filter((r) => r.kpt?.passed && r.fnr?.passed)
  const fnrFailsKptPasses = kptPassed.filter((r) => !r.fnr?.passed)
  const kptFails = ran.filter((r) => !r.kpt?.passed)
  const lines = [
    '',
    `  kpt conformance: ${reports.length} cases, ${ran.length} run, ${reports.length - ran.length} not runnable`,
    `    kpt passed ${kptPassed.length}, fnr passed ${fnrPassed.length}, both ${both.length}; fnr fails ${fnrFailsKptPasses.length} that kpt passes (${fnrFailsKptPasses.filter((r) => r.name in KNOWN_FAILURES).length} on the known list)`,
  ]
  if (fnrFailsKptPasses.length > 0) {
    lines.push('    fnr fails where kpt passes, per category:')
    for (const [cat, n] of count(fnrFailsKptPasses, (r) => r.category ?? 'unknown')) lines.push(`      ${n}  ${cat}`)
    for (const r of fnrFailsKptPasses) {
      lines.push(`        ${r.name} [${r.category}] ${r.fnr?.message?.split('\n')[0].slice(0, 200)}`)
      const err = r.fnr?.stderr?.trim()
      if (err && process.env.FNR_CONFORMANCE_VERBOSE) lines.push(...err.split('\n').slice(-6).map((l) => `          | ${l.slice(0, 200)}`))
    }
  }
  if (kptFails.length > 0) {
    const same = kptFails.filter((r) => sameObserved(r))
    lines.push(`    kpt fails here (reported, not asserted): ${kptFails.length}, fnr passes ${kptFails.filter((r) => r.fnr?.passed).length} of them; fnr does what kpt does (exit code, results, package diff) in ${same.length}`)
    for (const r of kptFails) {
      lines.push(`        ${r.name} [kpt: ${r.kpt?.mismatch}${r.fnr?.passed ? '; fnr passes' : `; fnr: ${r.fnr?.mismatch}`}${sameObserved(r) ? '; same as kpt' : ''}] ${r.kpt?.message?.split('\n')[0].slice(0, 160)}`)
      const err = r.fnr?.stderr?.trim()
      if (err && r.fnr?.mismatch !== r.kpt?.mismatch && process.env.FNR_CONFORMANCE_VERBOSE) lines.push(...err.split('\n').slice(-4).map((l) => `          fnr | ${l.slice(0, 200)}`))
    }
  }
  const notRun = reports.filter((r) => r.notRun)
  if (notRun.length > 0) {
    lines.push(`    not runnable here: ${notRun.length}`)
    for (const [why, n] of count(notRun, (r) => r.notRun ?? '')) lines.push(`      ${n}  ${why}`)
  }
  return `${lines.join('\n')}\n\n`
}
