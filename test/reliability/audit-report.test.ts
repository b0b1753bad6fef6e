/** How `npm audit --json` is read (test/support/reliability/audit.ts): pure; the live audit is in ./audit.test.ts. */
import {expect} from 'chai'

import {formatFindings, interpretAudit, severeFindings} from '../support/reliability/audit.js'

describe('reliability: npm audit of production dependencies', () => {
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
