import {expect} from 'chai'

import {PodSlot, pickLeastLoaded} from '../../src/lib/pods/runtime/cache.js'
import {planGc, type CachedPodState, type GcInput, type ObservedPod} from '../../src/lib/pods/model/gc.js'

const NOW = 10_000_000
const TTL = 600_000

function cached(name: string, over: Partial<CachedPodState> = {}): CachedPodState {
  return {name, image: 'img', load: 0, lastUsed: NOW - 1000, ttlMs: TTL, starting: false, since: NOW - 60_000, ...over}
}

function observed(name: string, over: Partial<ObservedPod> = {}): ObservedPod {
  return {name, managed: true, deleting: false, phase: 'Running', owner: 'me', image: 'img', lastUsed: NOW - 1000, ttlMs: TTL, created: NOW - 60_000, ...over}
}

function plan(over: Partial<GcInput>) {
  return planGc({now: NOW, self: 'me', cached: [], pods: [], services: [], observedAt: NOW, orphanMinAgeMs: 0, foreignGraceMs: 60_000, ...over})
}

describe('pod GC rules', () => {
  it('expires an idle pod past its TTL and keeps a fresh one (upstream: GC of expired and fresh pods)', () => {
    const p = plan({cached: [cached('old', {lastUsed: NOW - TTL - 1}), cached('fresh')], pods: [observed('old'), observed('fresh')]})
    expect(p.expire.map((e) => e.name)).to.deep.equal(['old'])
    expect(p.deletePods).to.deep.equal([])
  })

  it('never touches a pod with calls in flight, or one still starting', () => {
    const p = plan({
      cached: [cached('busy', {lastUsed: NOW - 10 * TTL, load: 1}), cached('starting', {starting: true, lastUsed: NOW - 10 * TTL})],
      pods: [observed('busy', {phase: 'Failed'})],
    })
    expect(p.expire).to.deep.equal([])
  })

  it('expires cached pods that failed, ended or vanished (upstream: removeUnhealthyPods)', () => {
    const p = plan({
      cached: [cached('failed'), cached('done'), cached('gone'), cached('new', {since: NOW + 1})],
      pods: [observed('failed', {phase: 'Failed'}), observed('done', {phase: 'Succeeded'})],
    })
    expect(p.expire.map((e) => e.name).sort()).to.deep.equal(['done', 'failed', 'gone'])
  })

  it('deletes its own orphans and failed fnr pods, never pods that are not fnr\'s', () => {
    const p = plan({
      pods: [
        observed('orphan'),
        observed('failed-other', {owner: 'other', phase: 'Failed'}),
        observed('porch-pod', {managed: false, owner: undefined, phase: 'Failed'}),
        observed('deleting', {deleting: true}),
      ],
    })
    expect(p.deletePods.map((d) => d.name).sort()).to.deep.equal(['failed-other', 'orphan'])
  })

  it('leaves another runner\'s pods alone until they are well past their TTL', () => {
    const p = plan({
      pods: [
        observed('alive', {owner: 'other', lastUsed: NOW - TTL - 1000}),
        observed('abandoned', {owner: 'other', lastUsed: NOW - TTL - 120_000}),
        observed('no-annotations', {owner: 'other', lastUsed: undefined, ttlMs: undefined}),
      ],
    })
    expect(p.deletePods.map((d) => d.name)).to.deep.equal(['abandoned'])
  })

  it('deletes Services whose pod is gone, once they are old enough', () => {
    const services = [
      {name: 'a', managed: true, deleting: false, pod: 'a', created: NOW - 120_000},
      {name: 'b', managed: true, deleting: false, pod: 'b', created: NOW - 1000},
      {name: 'c', managed: true, deleting: false, pod: 'c', created: NOW - 120_000},
      {name: 'd', managed: true, deleting: false, pod: 'd', created: NOW - 120_000},
      {name: 'mine', managed: false, deleting: false, pod: 'x', created: NOW - 120_000},
    ]
    const p = plan({services, pods: [observed('c', {owner: 'other'})], cached: [cached('d', {starting: true})], orphanMinAgeMs: 60_000})
    expect(p.deleteServices.map((s) => s.name)).to.deep.equal(['a'])
  })

  it('does not delete Services of pods it deletes (they go with the pod)', () => {
    const p = plan({pods: [observed('orphan')], services: [{name: 'orphan', managed: true, deleting: false, pod: 'orphan', created: NOW - 120_000}]})
    expect(p.deletePods.map((d) => d.name)).to.deep.equal(['orphan'])
    expect(p.deleteServices).to.deep.equal([])
  })
})

// Upstream's findBestPod scenarios (Porch's podcachemanager_unit_test).
describe('least-loaded pod choice with round-robin ties', () => {
  function slots(loads: number[]): PodSlot[] {
    return loads.map((load, i) => {
      const s = new PodSlot('img', `p${i}`, 'v', 0)
      s.load = load
      return s
    })
  }

  it('no pods → none', () => {
    expect(pickLeastLoaded({rr: 0}, [])).to.equal(undefined)
  })

  it('picks the least loaded', () => {
    expect(pickLeastLoaded({rr: 0}, slots([5]))!.name).to.equal('p0')
    expect(pickLeastLoaded({rr: 0}, slots([5, 1, 8]))!.name).to.equal('p1')
    expect(pickLeastLoaded({rr: 0}, slots([10, 7, 2]))!.name).to.equal('p2')
  })

  it('rotates among equally loaded pods', () => {
    const entry = {rr: 0}
    const s = slots([3, 3, 3])
    expect([0, 1, 2, 3].map(() => pickLeastLoaded(entry, s)!.name)).to.deep.equal(['p0', 'p1', 'p2', 'p0'])
  })
})
