/**
 * A pod slot's starting state and the placement rule (src/lib/pods/model/slot.ts): least load wins,
 * ties go round-robin from the entry's index. The basic upstream findBestPod scenarios are in
 * test/pods/gc-rules.test.ts; these pin the index bookkeeping the cache relies on between calls.
 */
import {expect} from 'chai'

import {PodSlot, pickLeastLoaded} from '../../src/lib/pods/model/slot.js'

function slots(loads: number[]): PodSlot[] {
  return loads.map((load, i) => {
    const s = new PodSlot('img', `p${i}`, 'v1', 0)
    s.load = load
    return s
  })
}

describe('pod slots and least-loaded placement', () => {
  it('a new slot is starting, idle, not yet created, owned, and last used when it was made', () => {
    const s = new PodSlot('example.com/fn:v1', 'fn-v1-1-abc', 'inline-v1', 1234)
    expect(s).to.deep.include({image: 'example.com/fn:v1', name: 'fn-v1-1-abc', templateVersion: 'inline-v1', state: 'starting', load: 0, lastUsed: 1234, since: 1234, detail: 'starting', created: false, disowned: false, annotatedAt: 0})
    expect(s.timings).to.deep.equal({})
    expect(s.abort.signal.aborted).to.equal(false)
    expect(s.goneReason).to.equal(undefined)
    expect(s.gcCode).to.equal(undefined)
    // each slot has its own abort controller and timings
    const t = new PodSlot('x', 'y', 'v', 0)
    expect(t.abort).to.not.equal(s.abort)
    expect(t.timings).to.not.equal(s.timings)
  })

  it('moves the round-robin index just past the slot it picked', () => {
    const entry = {rr: 0}
    const live = slots([4, 2, 9])
    expect(pickLeastLoaded(entry, live)!.name).to.equal('p1')
    expect(entry.rr).to.equal(2)
  })

  it('among equally loaded slots, starts looking at the index and wraps around the end', () => {
    const entry = {rr: 2}
    const live = slots([1, 5, 5, 1])
    expect(pickLeastLoaded(entry, live)!.name).to.equal('p3')
    expect(entry.rr).to.equal(0)
    expect(pickLeastLoaded(entry, live)!.name).to.equal('p0')
    expect(entry.rr).to.equal(1)
    // from index 1, p3 is the next least loaded one after wrapping past p1 and p2
    expect(pickLeastLoaded(entry, live)!.name).to.equal('p3')
  })

  it('an index past the end of a list that shrank wraps instead of failing', () => {
    const entry = {rr: 7}
    const live = slots([0, 0, 0])
    expect(pickLeastLoaded(entry, live)!.name).to.equal('p1')
    expect(entry.rr).to.equal(2)
  })

  it('spreads calls counted on the picked slot over every slot (the cache counts load after each pick)', () => {
    const entry = {rr: 0}
    const live = slots([0, 0, 0])
    const picked: string[] = []
    for (let i = 0; i < 6; i++) {
      const s = pickLeastLoaded(entry, live)!
      s.load++
      picked.push(s.name)
    }
    expect(picked).to.deep.equal(['p0', 'p1', 'p2', 'p0', 'p1', 'p2'])
    expect(live.map((s) => s.load)).to.deep.equal([2, 2, 2])
  })

  it('leaves the index alone when there is nothing to pick', () => {
    const entry = {rr: 3}
    expect(pickLeastLoaded(entry, [])).to.equal(undefined)
    expect(entry.rr).to.equal(3)
  })
})
