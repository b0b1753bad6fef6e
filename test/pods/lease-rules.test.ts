/**
 * The replica Leases' pure rules (src/lib/pods/cluster/lease.ts): the Lease name of an owner, the
 * API server's MicroTime, whole-second durations, the view without Leases, and how `fnr pods gc|ls`
 * judge Leases from outside the runners (live, expired after two durations, released). The Leases
 * on a real control plane are in test/pods/replicas.test.ts and test/operator/pods-gc-leases.test.ts.
 */
import type {V1Lease} from '@kubernetes/client-node'
import {expect} from 'chai'

import {DEFAULT_LEASE_DURATION_MS, judgeLeasesAt, LEASE_SELECTOR, leaseNameFor, leaseSeconds, microTime, noLeaseView} from '../../src/lib/pods/cluster/lease.js'
import {sha256Hex} from '../../src/lib/pods/model/naming.js'

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0)

function lease(owner: string | undefined, o: {holder?: string; durationS?: number; renewedAgoMs?: number} = {}): V1Lease {
  return {
    metadata: {name: `fnr-replica-${owner}`, labels: owner === undefined ? {} : {'fnr.dev/owner': owner}},
    spec: {
      holderIdentity: o.holder ?? owner,
      ...(o.durationS === undefined ? {} : {leaseDurationSeconds: o.durationS}),
      ...(o.renewedAgoMs === undefined ? {} : {renewTime: new Date(NOW - o.renewedAgoMs)}),
    },
  }
}

describe('replica Leases: names, times and judgement from outside', () => {
  it('names a Lease fnr-replica-<owner>; an owner that is not already a DNS name gets a slug and a hash', () => {
    expect(leaseNameFor('runner-a')).to.equal('fnr-replica-runner-a')
    expect(leaseNameFor('Runner_A')).to.equal(`fnr-replica-runner-a-${sha256Hex('Runner_A').slice(0, 10)}`)
    expect(leaseNameFor('__')).to.equal(`fnr-replica-${sha256Hex('__').slice(0, 10)}`)
    expect(leaseNameFor('Runner_A')).to.not.equal(leaseNameFor('runner_a'))
    expect(LEASE_SELECTOR).to.equal('app.kubernetes.io/managed-by=fnr,app.kubernetes.io/component=replica-lease')
  })

  it('MicroTime has six fractional digits; durations are whole seconds, at least one', () => {
    expect(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).to.equal('2026-01-02T03:04:05.678000Z')
    expect(microTime(0)).to.equal('1970-01-01T00:00:00.000000Z')
    expect([0, 1, 999, 1000, 1001, 30_000].map(leaseSeconds)).to.deep.equal([1, 1, 1, 1, 2, 30])
  })

  it('without Leases, this runner is self and every other owner none', () => {
    const view = noLeaseView('runner-a')
    expect(view.stateOf('runner-a')).to.equal('self')
    expect(view.stateOf('runner-b')).to.equal('none')
    expect(view.stateOf(undefined)).to.equal('none')
    expect(view.leases).to.deep.equal([])
  })

  it('judges from outside: released without a holder, expired after two durations without renewal, live otherwise', () => {
    const states = judgeLeasesAt(
      [
        lease('fresh', {durationS: 10, renewedAgoMs: 5_000}),
        lease('late', {durationS: 10, renewedAgoMs: 19_999}),
        lease('gone', {durationS: 10, renewedAgoMs: 20_000}),
        lease('released', {holder: '', renewedAgoMs: 1_000}),
        lease('never-renewed', {durationS: 10}),
        lease('default-duration', {renewedAgoMs: 2 * DEFAULT_LEASE_DURATION_MS - 1}),
        lease(undefined, {renewedAgoMs: 1e9}),
      ],
      NOW,
    )
    expect(Object.fromEntries(states)).to.deep.equal({fresh: 'live', late: 'live', gone: 'expired', released: 'released', 'never-renewed': 'live', 'default-duration': 'live'})
  })

  it('two Leases of one owner: live wins', () => {
    expect(judgeLeasesAt([lease('dup', {durationS: 1, renewedAgoMs: 60_000}), lease('dup', {durationS: 60, renewedAgoMs: 1_000})], NOW).get('dup')).to.equal('live')
    expect(judgeLeasesAt([lease('dup', {durationS: 60, renewedAgoMs: 1_000}), lease('dup', {durationS: 1, renewedAgoMs: 60_000})], NOW).get('dup')).to.equal('live')
  })
})
