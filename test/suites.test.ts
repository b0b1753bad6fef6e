import {existsSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {REPO_ROOT} from './support/serve.js'
import {UNIT, mochaSelection} from './suites.mjs'

describe('test sets (test/suites.mjs)', () => {
  it('every unit spec listed exists (a renamed spec must not drop out of the unit set unseen)', () => {
    const missing = UNIT.filter((f) => !existsSync(path.join(REPO_ROOT, f)))
    expect(missing).to.deep.equal([])
  })

  it('the unit set loads the process guard; the integration set is every spec but the unit ones', () => {
    const unit = mochaSelection('unit')
    expect(unit).to.include('test/support/unit-guard.mjs')
    const integration = mochaSelection('integration')
    expect(integration.slice(0, 2)).to.deep.equal(['--spec', 'test/**/*.test.ts'])
    expect(integration.filter((a) => a !== '--ignore').slice(2)).to.deep.equal(UNIT)
    expect(mochaSelection('all')).to.deep.equal(['--spec', 'test/**/*.test.ts'])
  })
})
