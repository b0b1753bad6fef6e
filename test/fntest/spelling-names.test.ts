/**
 * fnr test's spelling of function names (src/lib/fntest/run.ts): image references and exec paths
 * in results.yaml and the console's names normalised, so an expectation holds however the function
 * is spelled. The runs of `fnr test` are in ./spelling.test.ts.
 */
import {expect} from 'chai'

import {normaliseConsoleNames, normaliseFunctionNames} from '../../src/lib/fntest/run.js'

const PREFIX = 'ghcr.io/kptdev/krm-functions-catalog/'

describe('fnr test: expectations independent of how the function is spelled', () => {
  it('normalises image references and exec paths', () => {
    const a = normaliseFunctionNames('items:\n  - image: set-namespace:v0.4.1\n  - exec: ./fn --x\n', PREFIX)
    const b = normaliseFunctionNames(`items:\n  - image: ${PREFIX}set-namespace:v0.4.1\n  - exec: /home/me/repo/fn --x\n`, PREFIX)
    expect(a).to.equal(b)
    expect(normaliseConsoleNames('[FAIL] "set-namespace:v0.4.1" in 0s', PREFIX)).to.equal(normaliseConsoleNames(`[FAIL] "${PREFIX}set-namespace:v0.4.1" in 0s`, PREFIX))
    expect(normaliseConsoleNames('[RUNNING] "./fn"', PREFIX)).to.equal('[RUNNING] "fn"')
  })
})
