/**
 * `npm audit --omit=dev` for the reliability suite: runs it on the repository's lockfile and reads
 * its JSON report (auditReportVersion 2), keeping the high and critical advisories of production
 * dependencies.
 */
import {execFile} from 'node:child_process'

import {REPO_ROOT} from '../serve.js'

export interface AuditFinding {
  name: string
  severity: string
  range: string
  /** Advisory titles and URLs (or the packages the problem comes through). */
  via: string[]
  fixAvailable: boolean
}

export type AuditOutcome =
  | {status: 'checked'; findings: AuditFinding[]; counts: Record<string, number>; dependencies: number}
  /** npm reached no advisory service (e.g. a registry mirror that refuses the audit endpoint). */
  | {status: 'unavailable'; reason: string}

const SEVERE = new Set(['high', 'critical'])

interface AuditReport {
  auditReportVersion?: number
  vulnerabilities?: Record<string, {name: string; severity: string; range?: string; via?: Array<string | {title?: string; url?: string; severity?: string}>; fixAvailable?: unknown}>
  metadata?: {vulnerabilities?: Record<string, number>; dependencies?: {prod?: number; total?: number}}
  error?: {code?: string; summary?: string; detail?: string}
  message?: string
  statusCode?: number
}

/** The high and critical entries of an `npm audit --json` report (version 2). */
export function severeFindings(report: AuditReport): AuditFinding[] {
  return Object.values(report.vulnerabilities ?? {})
    .filter((v) => SEVERE.has(v.severity))
    .map((v) => ({
      name: v.name,
      severity: v.severity,
      range: v.range ?? '*',
      via: (v.via ?? []).map((x) => (typeof x === 'string' ? `via ${x}` : `${x.title ?? 'advisory'}${x.url ? ` (${x.url})` : ''}`)),
      fixAvailable: Boolean(v.fixAvailable),
    }))
    .sort((a, b) => a.name.localeCompare(b.name))
}

export function formatFindings(findings: AuditFinding[]): string {
  return findings.map((f) => `${f.severity.padEnd(8)} ${f.name} ${f.range}: ${f.via.join('; ')}${f.fixAvailable ? ' [fix available]' : ''}`).join('\n')
}

/** Reads a report; an answer that is an error from the audit endpoint is 'unavailable'. */
export function interpretAudit(stdout: string): AuditOutcome {
  let report: AuditReport
  try {
    report = JSON.parse(stdout) as AuditReport
  } catch {
    throw new Error(`npm audit printed no JSON report:\n${stdout.slice(0, 2000)}`)
  }
  if (report.auditReportVersion === 2 && report.vulnerabilities) {
    return {status: 'checked', findings: severeFindings(report), counts: report.metadata?.vulnerabilities ?? {}, dependencies: report.metadata?.dependencies?.prod ?? 0}
  }
  const reason = report.message ?? report.error?.summary ?? JSON.stringify(report).slice(0, 300)
  // Only a failure to reach the advisory service counts as unavailable; anything else (a broken
  // lockfile, ELOCKVERIFY, ...) is a real failure.
  if (typeof report.statusCode === 'number' || /audit endpoint|ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|network/i.test(reason)) return {status: 'unavailable', reason}
  throw new Error(`npm audit failed: ${reason}`)
}

export function runNpmAudit(timeoutMs = 120_000): Promise<AuditOutcome> {
  return new Promise((resolve, reject) => {
    // --omit=dev: production dependencies only; exit code is non-zero on findings, so read the JSON.
    execFile('npm', ['audit', '--omit=dev', '--json'], {cwd: REPO_ROOT, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024}, (err, stdout, stderr) => {
      if (err && (err as {killed?: boolean}).killed) {
        reject(new Error(`npm audit did not finish in ${timeoutMs} ms`))
        return
      }
      try {
        resolve(interpretAudit(stdout || stderr))
      } catch (e) {
        reject(e)
      }
    })
  })
}
