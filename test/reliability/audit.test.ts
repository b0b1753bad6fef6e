/**
 * `npm audit --omit=dev` (no high or critical advisories in production dependencies).
 *
 * The live test runs `npm audit --omit=dev --json` on the repository's lockfile and fails on any
 * high or critical advisory, listing them. npm needs its advisory service for that; a registry
 * that does not offer it (this project's build machines answer the audit endpoint with HTTP 405)
 * or no network means the audit cannot run. Then:
 *   - with FNR_AUDIT=required (`npm run reliability -- --audit`), the test fails;
 *   - otherwise the test is skipped (mocha's pending count, "N skipped" in npm test's summary),
 *     its title ending in "(skipped: audit could not run: <reason> ...)": nothing was checked.
 * The other tests pin how the JSON report is read.
 */
import {expect} from 'chai'

import {formatFindings, interpretAudit, runNpmAudit, severeFindings} from '../support/reliability/audit.js'
import {skipWithReason} from '../support/skip.js'

describe('reliability: npm audit of production dependencies', function () {
  this.timeout(180_000)

  it('npm audit --omit=dev finds no high or critical advisory', async function () {
    const required = process.env.FNR_AUDIT === 'required'
    const outcome = await runNpmAudit(90_000)
    if (outcome.status === 'unavailable') {
      const line = `audit could not run: ${outcome.reason}`
      expect(outcome.reason, 'the reason npm gave').to.not.equal('')
      if (required) expect.fail(`${line} (FNR_AUDIT=required, set by npm run reliability -- --audit)`)
      // Nothing was checked: the test is skipped (counted as skipped), its title carrying the reason.
      skipWithReason(this, `${line}; \`npm run reliability -- --audit\` fails here instead`)
    }
    process.stdout.write(`      (npm audit: ${outcome.dependencies} production dependencies checked; advisories by severity ${JSON.stringify(outcome.counts)})\n`)
    expect(outcome.findings, `high or critical advisories in production dependencies:\n${formatFindings(outcome.findings)}`).to.deep.equal([])
  })

  describe('reading npm audit --json (auditReportVersion 2)', () => {
    const report = {
      auditReportVersion: 2,
      vulnerabilities: {
        'left-pad': {name: 'left-pad', severity: 'moderate', range: '<1.3.0', via: [{title: 'Prototype pollution', url: 'https://github.com/advisories/GHSA-aaaa', severity: 'moderate'}], fixAvailable: true},
        'yaml-bomb': {name: 'yaml-bomb', severity: 'high', range: '<2.0.0', via: [{title: 'Uncontrolled resource consumption', url: 'https://github.com/advisories/GHSA-bbbb', severity: 'high'}], fixAvailable: false},
        wrapper: {name: 'wrapper', severity: 'critical', range: '*', via: ['yaml-bomb'], fixAvailable: {name: 'wrapper', version: '3.0.0'}},
      },
      metadata: {vulnerabilities: {info: 0, low: 0, moderate: 1, high: 1, critical: 1, total: 3}, dependencies: {prod: 42, total: 420}},
    }

    it('keeps the high and critical advisories, with titles, URLs and the packages they come through', () => {
      const findings = severeFindings(report)
      expect(findings.map((f) => [f.name, f.severity])).to.deep.equal([['wrapper', 'critical'], ['yaml-bomb', 'high']])
      const text = formatFindings(findings)
      expect(text).to.contain('critical wrapper *: via yaml-bomb [fix available]')
      expect(text).to.contain('high     yaml-bomb <2.0.0: Uncontrolled resource consumption (https://github.com/advisories/GHSA-bbbb)')
      expect(interpretAudit(JSON.stringify(report))).to.deep.include({status: 'checked', dependencies: 42})
    })

    it('a clean report has no findings', () => {
      const outcome = interpretAudit(JSON.stringify({auditReportVersion: 2, vulnerabilities: {}, metadata: {vulnerabilities: {total: 0}, dependencies: {prod: 42}}}))
      expect(outcome).to.deep.include({status: 'checked', findings: []})
    })

    it('an audit endpoint that refuses is "unavailable"; any other npm failure is an error', () => {
      const refused = {message: '405 Method Not Allowed - POST https://registry.example/-/npm/v1/security/advisories/bulk', statusCode: 405}
      expect(interpretAudit(JSON.stringify(refused))).to.deep.equal({status: 'unavailable', reason: refused.message})
      expect(() => interpretAudit(JSON.stringify({error: {code: 'ENOLOCK', summary: 'This command requires an existing lockfile.'}}))).to.throw(/requires an existing lockfile/)
      expect(() => interpretAudit('npm ERR! something')).to.throw(/no JSON report/)
    })
  })
})
