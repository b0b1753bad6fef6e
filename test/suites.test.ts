import {existsSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {REPO_ROOT} from './support/serve.js'
import {OPT_IN_SUITES, PEER_SUITES, UNIT, mochaSelection} from './suites.mjs'

describe('test sets (test/suites.mjs)', () => {
  it('every unit spec listed exists (a renamed spec must not drop out of the unit set unseen)', () => {
    const missing = UNIT.filter((f) => !existsSync(path.join(REPO_ROOT, f)))
    expect(missing).to.deep.equal([])
  })

  it('the unit set loads the process guard; the integration set is every spec but the unit ones', () => {
    const unit = mochaSelection('unit')
    expect(unit).to.include('test/support/unit-guard.mjs')
    const all = mochaSelection('all')
    const integration = mochaSelection('integration')
    expect(integration.slice(0, all.length)).to.deep.equal(all)
    expect(integration.slice(all.length).filter((a) => a !== '--ignore')).to.deep.equal(UNIT)
  })

  it('all: every spec folder once, the suites that need Go peers last (they build in the background meanwhile)', () => {
    const globs = mochaSelection('all').filter((a) => a !== '--spec')
    expect(globs[0]).to.equal('test/*.test.ts')
    expect(globs.slice(-PEER_SUITES.length)).to.deep.equal(PEER_SUITES.map((f) => `test/${f}/**/*.test.ts`))
    expect(new Set(globs).size).to.equal(globs.length)
    for (const folder of ['cache', 'commands', 'pods', 'wrapper']) expect(globs).to.include(`test/${folder}/**/*.test.ts`)
  })

  it('the opt-in suites (npm run porch-e2e) are in no set: their specs exist but npm test never selects them', () => {
    expect(OPT_IN_SUITES).to.deep.equal(['porch-e2e'])
    expect(existsSync(path.join(REPO_ROOT, 'test', 'porch-e2e', 'porch-server.test.ts'))).to.equal(true)
    for (const set of ['all', 'unit', 'integration'] as const) expect(mochaSelection(set).filter((a) => a.includes('porch-e2e')), set).to.deep.equal([])
  })
})
