/** The pure parts of running several replicas: Lease names and times, liveness judgement, GC rules by owner state. */
import {expect} from 'chai'

import type {V1Lease} from '@kubernetes/client-node'

import {planGc, type GcInput, type ObservedPod, type ObservedService, type OwnerState} from '../../src/lib/pods/model/gc.js'
import {LeaseObserver, judgeLeasesAt, leaseNameFor, leaseSeconds, microTime} from '../../src/lib/pods/cluster/lease.js'
import {defaultRunnerIdentity, labelValueFor} from '../../src/lib/pods/model/naming.js'

const NOW = 1_700_000_000_000
const TTL = 600_000

function pod(name: string, over: Partial<ObservedPod> = {}): ObservedPod {
  return {name, managed: true, deleting: false, phase: 'Running', owner: 'other', image: 'img', lastUsed: NOW - 1000, ttlMs: TTL, created: NOW - 60_000, ...over}
}

function service(name: string, over: Partial<ObservedService> = {}): ObservedService {
  return {name, managed: true, deleting: false, owner: 'other', pod: name, created: NOW - 3600_000, ...over}
}

function plan(states: Record<string, OwnerState>, over: Partial<GcInput> = {}) {
  return planGc({now: NOW, self: 'me', cached: [], pods: [], services: [], observedAt: NOW, orphanMinAgeMs: 0, foreignGraceMs: 0, ownerState: (o) => states[o ?? ''] ?? 'none', ...over})
}

function lease(name: string, owner: string, holder: string, rv: string, seconds = 10): V1Lease {
  return {metadata: {name, resourceVersion: rv, labels: {'fnr.dev/owner': owner}}, spec: {holderIdentity: holder, leaseDurationSeconds: seconds}}
}

describe('replicas: leases and GC rules', function () {
  it('Lease names are valid DNS subdomains, one per owner label, hashed when the label had to change', () => {
    expect(leaseNameFor('function-runner-7d9f-abcde')).to.equal('fnr-replica-function-runner-7d9f-abcde')
    const upper = leaseNameFor('Runner_A')
    expect(upper).to.match(/^fnr-replica-runner-a-[0-9a-f]{10}$/)
    expect(leaseNameFor('runner-a')).to.not.equal(upper)
    for (const n of [upper, leaseNameFor('_x_'), leaseNameFor(labelValueFor('a very long host name '.repeat(10)))]) {
      expect(n.length).to.be.at.most(253)
      expect(n).to.match(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
    }
  })

  it('MicroTimes have six fractional digits (what kube-apiserver parses) and durations are whole seconds', () => {
    expect(microTime(Date.UTC(2025, 0, 2, 3, 4, 5, 678))).to.equal('2025-01-02T03:04:05.678000Z')
    expect([leaseSeconds(1), leaseSeconds(1000), leaseSeconds(1500), leaseSeconds(30_000)]).to.deep.equal([1, 1, 2, 30])
  })

  it('the default identity is $POD_NAME (stable across container restarts), else the host name plus a random suffix per process', () => {
    expect(defaultRunnerIdentity({POD_NAME: 'function-runner-5b7c9-x2x4z'})).to.equal('function-runner-5b7c9-x2x4z')
    const a = defaultRunnerIdentity({})
    const b = defaultRunnerIdentity({})
    expect(a).to.match(/-[a-z0-9]{5}$/)
    expect(a).to.not.equal(b)
  })

  it('judges Leases by what this process observed, not by the holder\'s clock: live until unchanged for a lease duration; released when the holder is empty', () => {
    let now = NOW
    const observer = new LeaseObserver({k8s: {CoordinationV1Api: class {}} as never, kubeConfig: {makeApiClient: () => ({})} as never, namespace: 'ns', self: 'me', now: () => now})
    // renewTime far in the past by our clock (skew) does not matter: first seen counts as just renewed
    let view = observer.judge([lease('fnr-replica-a', 'a', 'a', '1'), lease('fnr-replica-b', 'b', '', '5'), lease('fnr-replica-me', 'me', 'me', '7')])
    expect(['a', 'b', 'me', 'c', undefined].map((o) => view.stateOf(o))).to.deep.equal(['live', 'released', 'self', 'none', 'none'])
    now += 9_000
    view = observer.judge([lease('fnr-replica-a', 'a', 'a', '1')])
    expect(view.stateOf('a')).to.equal('live')
    now += 1_000
    view = observer.judge([lease('fnr-replica-a', 'a', 'a', '1')])
    expect(view.stateOf('a')).to.equal('expired')
    // renewed (new resourceVersion): live again
    view = observer.judge([lease('fnr-replica-a', 'a', 'a', '2')])
    expect(view.stateOf('a')).to.equal('live')
    expect(view.leases.map((l) => [l.name, l.owner, l.state])).to.deep.equal([['fnr-replica-a', 'a', 'live']])
  })

  it('never touches a live replica\'s pods or Services, even failed, long expired or without a Service', () => {
    const p = plan(
      {other: 'live'},
      {
        pods: [pod('old', {lastUsed: NOW - 100 * TTL}), pod('failed', {phase: 'Failed'}), pod('no-annotations', {lastUsed: undefined, ttlMs: undefined})],
        services: [service('old'), service('gone-pod'), service('mine', {owner: 'me'})],
      },
    )
    expect(p).to.deep.equal({expire: [], deletePods: [], reclaim: [], adopt: [], deleteServices: [{name: 'mine', code: 'pod-gone', reason: 'orphan: its pod is gone'}]})
  })

  it('lists the pods of an expired or released replica for reclaim (failed ones are deleted); Services follow the orphan rule', () => {
    const p = plan(
      {dead: 'expired', stopped: 'released'},
      {
        pods: [pod('d1', {owner: 'dead'}), pod('d2', {owner: 'dead', phase: 'Succeeded'}), pod('s1', {owner: 'stopped', lastUsed: NOW})],
        services: [service('d1', {owner: 'dead'}), service('d3', {owner: 'dead'})],
      },
    )
    expect(p.reclaim).to.deep.equal([
      {name: 'd1', owner: 'dead', ownerState: 'expired', code: 'replica-gone', reason: 'its runner dead is gone (lease expired)'},
      {name: 's1', owner: 'stopped', ownerState: 'released', code: 'replica-gone', reason: 'its runner stopped is gone (lease released)'},
    ])
    expect(p.deletePods).to.deep.equal([{name: 'd2', code: 'ended', reason: 'the pod is Succeeded'}])
    expect(p.deleteServices).to.deep.equal([{name: 'd3', code: 'pod-gone', reason: 'orphan: its pod is gone'}])
  })

  it('owners without a Lease keep the lone-runner rule (TTL plus grace), as without replicas', () => {
    const p = plan({}, {pods: [pod('fresh', {owner: 'legacy'}), pod('abandoned', {owner: 'legacy', lastUsed: NOW - TTL - 1})]})
    expect(p.deletePods).to.deep.equal([{name: 'abandoned', code: 'foreign-expired', reason: 'expired pod of runner legacy'}])
    expect(p.reclaim).to.deep.equal([])
  })

  it('pods of `fnr pods warm` (owner fnr-pods-warm, no Lease) are adoption candidates for a running runner unless failed or past TTL + grace', () => {
    const p = plan({}, {
      foreignGraceMs: 60_000,
      pods: [
        pod('warm', {owner: 'fnr-pods-warm'}),
        pod('warm-failed', {owner: 'fnr-pods-warm', phase: 'Failed'}),
        pod('warm-old', {owner: 'fnr-pods-warm', lastUsed: NOW - TTL - 61_000}),
        pod('lone', {owner: 'lone-runner'}),
      ],
    })
    expect(p.adopt).to.deep.equal([{name: 'warm', code: 'warmed', reason: 'warmed by fnr pods warm'}])
    expect(p.deletePods.map((d) => d.name)).to.deep.equal(['warm-failed', 'warm-old'])
    expect(p.reclaim).to.deep.equal([])
  })

  it('from outside (fnr pods gc|ls), a Lease is judged by renewTime with one more duration of allowance for clock skew; live wins between two Leases of one owner', () => {
    const at = (owner: string, holder: string, renewedAgoMs: number | undefined, seconds = 10, name = `fnr-replica-${owner}`): V1Lease => ({
      metadata: {name, labels: {'fnr.dev/owner': owner}},
      spec: {holderIdentity: holder, leaseDurationSeconds: seconds, ...(renewedAgoMs === undefined ? {} : {renewTime: new Date(NOW - renewedAgoMs)})},
    })
    const states = judgeLeasesAt(
      [at('fresh', 'fresh', 1000), at('late', 'late', 15_000), at('dead', 'dead', 20_000), at('released', '', 0), at('never', 'never', undefined), at('twice', 'twice', 60_000), at('twice', 'twice', 0, 10, 'other'), at('', 'x', 0)],
      NOW,
    )
    expect(Object.fromEntries(states)).to.deep.equal({fresh: 'live', late: 'live', dead: 'expired', released: 'released', never: 'live', twice: 'live'})
    // the raw MicroTime string (as the API sends it) works too
    expect(judgeLeasesAt([{metadata: {labels: {'fnr.dev/owner': 'a'}}, spec: {holderIdentity: 'a', leaseDurationSeconds: 1, renewTime: microTime(NOW - 5000) as unknown as Date}}], NOW).get('a')).to.equal('expired')
  })
})
