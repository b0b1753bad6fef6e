/**
 * `fnr test --junit FILE`: JUnit XML as CI systems read it (Jenkins, GitLab, GitHub actions that
 * publish test reports): one <testsuite> with one <testcase> per case; a failed case has a
 * <failure> whose message is its first problem and whose text holds every problem with its diff;
 * a case that could not run or was interrupted has an <error>, a skipped one (or one an interrupt
 * kept from starting) a <skipped>.
 * Text and attributes are escaped, and characters XML 1.0 cannot carry (control characters other
 * than tab, newline and carriage return; lone surrogates) are replaced by U+FFFD.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {countResults} from './report.js'
import type {CaseResult, FnTestRun} from './run.js'

const INVALID_XML = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu

export function xmlText(s: string): string {
  // \r is written as a reference: a parser would turn a raw one into \n.
  return s.replace(INVALID_XML, '\uFFFD').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#13;')
}

export function xmlAttr(s: string): string {
  return xmlText(s).replace(/"/g, '&quot;').replace(/'/g, '&apos;').replace(/\t/g, '&#9;').replace(/\n/g, '&#10;')
}

function secs(ms: number): string {
  return (ms / 1000).toFixed(3)
}

function testcaseXml(r: CaseResult): string {
  const open = `    <testcase name="${xmlAttr(r.name)}" classname="${xmlAttr(r.function)}" time="${secs(r.durationMs)}" file="${xmlAttr(r.dir)}"`
  const message = xmlAttr(r.problems[0]?.message ?? r.warnings?.[0] ?? r.status)
  const body = r.problems.map((p) => `${p.message}\n${p.detail ? p.detail.replace(/\n?$/, '\n') : ''}`).join('\n')
  if (r.status === 'failed') {
    const type = r.timedOut ? 'timeout' : 'mismatch'
    return `${open}>\n      <failure message="${message}" type="${type}">${xmlText(body)}</failure>\n    </testcase>\n`
  }
  if (r.status === 'error' || r.status === 'interrupted') {
    return `${open}>\n      <error message="${message}" type="${r.status}">${xmlText(body)}</error>\n    </testcase>\n`
  }
  if (r.status === 'skipped') return `${open}>\n      <skipped message="${message}"/>\n    </testcase>\n`
  return `${open}/>\n`
}

export function junitXml(run: FnTestRun, suiteName = 'fnr test', timestamp = new Date()): string {
  const c = countResults(run.results)
  const notRun = run.cases.filter((tc) => !run.results.some((r) => r.name === tc.name))
  const tests = c.total + notRun.length
  // Interrupted cases are errors of the run (they did not finish), not failures of the function.
  const attrs = `tests="${tests}" failures="${c.failed}" errors="${c.errors + c.interrupted}" skipped="${c.skipped + notRun.length}" time="${secs(run.durationMs)}"`
  let out = '<?xml version="1.0" encoding="UTF-8"?>\n'
  out += `<testsuites name="${xmlAttr(suiteName)}" ${attrs}>\n`
  out += `  <testsuite name="${xmlAttr(suiteName)}" ${attrs} timestamp="${timestamp.toISOString().replace(/\.\d+Z$/, '')}">\n`
  for (const r of run.results) out += testcaseXml(r)
  for (const tc of notRun) {
    out += `    <testcase name="${xmlAttr(tc.name)}" classname="" time="0.000" file="${xmlAttr(tc.dir)}">\n      <skipped message="${xmlAttr(`not run: the run was interrupted by ${run.interrupted ?? 'a signal'}`)}"/>\n    </testcase>\n`
  }
  out += '  </testsuite>\n</testsuites>\n'
  return out
}

export async function writeJunit(file: string, run: FnTestRun): Promise<void> {
  await mkdir(path.dirname(path.resolve(file)), {recursive: true})
  await writeFile(file, junitXml(run))
}
