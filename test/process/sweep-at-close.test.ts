/**
 * When a call's end is swept (src/lib/process/run.ts sweepAtClose): only when the native helper
 * could not tell that it left nothing, or the call did not end normally (docs/process.md, "The
 * sweep runs only when a call left something").
 */
import {expect} from 'chai'

import {sweepAtClose} from '../../src/lib/process/run.js'

describe('sweepAtClose: the end-of-call sweep only when something may be left', () => {
  it('skips a call that ended normally when the helper counted no orphan', () => {
    expect(sweepAtClose({leftNothing: true, sweepRequested: false})).to.equal(false)
  })

  it('sweeps when nobody could tell (the Node spawner, a direct start) or the helper saw an orphan or could not count', () => {
    expect(sweepAtClose({leftNothing: undefined, sweepRequested: false})).to.equal(true)
    expect(sweepAtClose({leftNothing: false, sweepRequested: false})).to.equal(true)
  })

  it('sweeps a call that ended at its deadline, was cancelled or went over its stdout cap, even when nothing was left', () => {
    for (const ending of ['deadline', 'cancelled', 'stdout-limit']) expect(sweepAtClose({ending, leftNothing: true, sweepRequested: false}), ending).to.equal(true)
  })

  it('sweeps once more a call already swept because its stdio stayed open past its exit', () => {
    expect(sweepAtClose({leftNothing: true, sweepRequested: true})).to.equal(true)
  })
})
