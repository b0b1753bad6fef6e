/**
 * src/lib/fntest/report.ts: what `fnr test` prints per case, its summary line and its --json
 * summary (docs/fn-test.md). The counts feed the exit code and CI dashboards, so every status must
 * land in its own count.
 */
import {expect} from 'chai'

import {countResults, formatCaseResult, formatSummary, jsonSummary} from '../../src/lib/fntest/report.js'
import type {CaseResult, CaseStatus, FnTestRun} from '../../src/lib/fntest/run.js'

function result(status: CaseStatus, extra: Partial<CaseResult> = {}): CaseResult {
  return {name: `case-${status}`, dir: `/t/${status}`, function: 'example.com/fn:v1', status, durationMs: 12, exitCode: 0, timedOut: false, problems: [], updated: [], ...extra}
}

function run(results: CaseResult[], extra: Partial<FnTestRun> = {}): FnTestRun {
  return {cases: [], results, durationMs: 1234, notRun: 0, ...extra}
}

const ALL: CaseStatus[] = ['passed', 'failed', 'updated', 'skipped', 'error', 'interrupted']

describe('fntest/report: counts', () => {
  it('counts each status in its own field, total being the cases that ran', () => {
    const rs = [...ALL.map((s) => result(s)), result('passed'), result('error')]
    expect(countResults(rs)).to.deep.equal({total: 8, passed: 2, failed: 1, updated: 1, skipped: 1, errors: 2, interrupted: 1})
  })

  it('counts nothing for no results', () => {
    expect(countResults([])).to.deep.equal({total: 0, passed: 0, failed: 0, updated: 0, skipped: 0, errors: 0, interrupted: 0})
  })
})

describe('fntest/report: one case', () => {
  it('tags each status, padded to a column, with the duration in ms under a second', () => {
    const tags = ALL.map((s) => formatCaseResult(result(s)).split(' case-')[0])
    expect(tags).to.deep.equal(['PASS   ', 'FAIL   ', 'UPDATED', 'SKIP   ', 'ERROR  ', 'INTERRUPTED'])
    expect(formatCaseResult(result('passed', {durationMs: 12.6}))).to.equal('PASS    case-passed (13ms)\n')
  })

  it('gives durations of a second or more in seconds with one decimal', () => {
    expect(formatCaseResult(result('passed', {durationMs: 1000}))).to.equal('PASS    case-passed (1.0s)\n')
    // rounded before the unit is chosen: never "1000ms"
    expect(formatCaseResult(result('passed', {durationMs: 999.6}))).to.equal('PASS    case-passed (1.0s)\n')
    expect(formatCaseResult(result('passed', {durationMs: 999.4}))).to.equal('PASS    case-passed (999ms)\n')
    expect(formatCaseResult(result('passed', {durationMs: 61_449}))).to.equal('PASS    case-passed (61.4s)\n')
  })

  it('lists the files an update wrote, then warnings, then each problem with its detail', () => {
    const r = result('updated', {updated: ['.expected/diff.patch', '.expected/results.yaml'], warnings: ['ignored key "x"']})
    expect(formatCaseResult(r)).to.equal('UPDATED case-updated (12ms)\n        wrote .expected/diff.patch, .expected/results.yaml\n  ! ignored key "x"\n')
    const f = result('failed', {problems: [{message: 'diff differs', detail: '--- a\n+++ b'}, {message: 'exit code 1, want 0'}, {message: 'stderr', detail: 'line\n'}]})
    expect(formatCaseResult(f)).to.equal('FAIL    case-failed (12ms)\n  ✗ diff differs\n--- a\n+++ b\n  ✗ exit code 1, want 0\n  ✗ stderr\nline\n')
  })

  it('shows "wrote" only for updated cases', () => {
    expect(formatCaseResult(result('failed', {updated: ['x']}))).not.to.include('wrote')
  })
})

describe('fntest/report: summary line', () => {
  it('always says passed and failed, and the total with the run time', () => {
    expect(formatSummary(run([result('passed'), result('passed'), result('failed')]))).to.equal('2 passed, 1 failed (3 cases, 1.2s)\n')
    expect(formatSummary(run([], {durationMs: 5}))).to.equal('0 passed, 0 failed (0 cases, 5ms)\n')
    expect(formatSummary(run([result('passed')]))).to.equal('1 passed, 0 failed (1 case, 1.2s)\n')
  })

  it('adds the other counts only when not zero, with "error" in the singular for one', () => {
    expect(formatSummary(run(ALL.map((s) => result(s))))).to.equal('1 passed, 1 failed, 1 error, 1 updated, 1 skipped, 1 interrupted (6 cases, 1.2s)\n')
    expect(formatSummary(run([result('error'), result('error')]))).to.equal('0 passed, 0 failed, 2 errors (2 cases, 1.2s)\n')
  })

  it('starts an interrupted run with the signal, and counts the cases not run in the total', () => {
    expect(formatSummary(run([result('passed'), result('interrupted')], {interrupted: 'SIGINT', notRun: 3}))).to.equal(
      'interrupted by SIGINT: 1 passed, 0 failed, 1 interrupted, 3 not run (5 cases, 1.2s)\n',
    )
  })
})

describe('fntest/report: --json summary', () => {
  it('has the counts, the rounded durations, notRun, and each case', () => {
    const r = result('failed', {durationMs: 10.6, exitCode: 1, timedOut: true, problems: [{message: 'm', detail: 'd'}], updated: [], warnings: ['w']})
    expect(jsonSummary(run([r], {durationMs: 99.5}))).to.deep.equal({
      total: 1,
      passed: 0,
      failed: 1,
      updated: 0,
      skipped: 0,
      errors: 0,
      interrupted: 0,
      durationMs: 100,
      notRun: 0,
      cases: [{name: 'case-failed', dir: '/t/failed', function: 'example.com/fn:v1', status: 'failed', durationMs: 11, exitCode: 1, timedOut: true, problems: [{message: 'm', detail: 'd'}], updated: [], warnings: ['w']}],
    })
  })

  it('gives warnings as [] when a case has none, and the signal only for an interrupted run', () => {
    const plain = jsonSummary(run([result('passed')]))
    expect(plain.cases[0]!.warnings).to.deep.equal([])
    expect(plain).not.to.have.property('signal')
    const stopped = jsonSummary(run([], {interrupted: 'SIGTERM', notRun: 4}))
    expect(stopped.signal).to.equal('SIGTERM')
    expect(stopped.notRun).to.equal(4)
    expect(stopped.total).to.equal(0)
  })
})
