/**
 * One function pod as `fnr pods ls` describes it (src/lib/pods/admin/admin.ts describePod): its
 * state and detail as the runner would report them, age, last use, TTL and time left, template
 * version, owner and its Lease. The pods are objects as the API returns them; no API is called.
 */
import type {V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'

import {describePod} from '../../src/lib/pods/admin/admin.js'
import {functionPodAnnotations, functionPodLabels} from '../../src/lib/pods/model/naming.js'

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0)
const IMAGE = 'example.com/fn:v1'

function pod(options: {ready?: boolean; deleting?: boolean; phase?: string; lastUsedAgoMs?: number; ttlMs?: number} = {}): V1Pod {
  return {
    metadata: {
      name: 'fn-v1-1-abcde',
      creationTimestamp: new Date(NOW - 600_000),
      labels: functionPodLabels('fn-v1-1-abcde', IMAGE, 'runner-a'),
      annotations: functionPodAnnotations({templateVersion: 'inline-v3', image: IMAGE, owner: 'runner-a', now: NOW - (options.lastUsedAgoMs ?? 60_000), ttlMs: options.ttlMs ?? 1_800_000, creationId: 'c1'}),
      ...(options.deleting ? {deletionTimestamp: new Date(NOW)} : {}),
    },
    status: {phase: options.phase ?? 'Running', podIP: '10.0.0.9', conditions: [{type: 'Ready', status: options.ready === false ? 'False' : 'True'}]},
  }
}

describe('fnr pods ls: one function pod', () => {
  it('a ready pod: its service, image, times (age, last use, TTL and what is left of it), template, owner and Lease', () => {
    expect(describePod(pod(), 'fn-v1-1-abcde', NOW, 'live')).to.deep.equal({
      pod: 'fn-v1-1-abcde',
      service: 'fn-v1-1-abcde',
      image: IMAGE,
      phase: 'Running',
      ready: true,
      state: 'ready',
      detail: 'ready',
      created: new Date(NOW - 600_000).toISOString(),
      ageSeconds: 600,
      lastUsed: new Date(NOW - 60_000).toISOString(),
      ttlSeconds: 1800,
      ttlLeftSeconds: 1740,
      templateVersion: 'inline-v3',
      owner: 'runner-a',
      ownerLease: 'live',
      podIP: '10.0.0.9',
    })
  })

  it('an expired TTL is negative time left; no Service and unknown Leases are null', () => {
    const info = describePod(pod({lastUsedAgoMs: 2_000_000}), null, NOW)
    expect(info.ttlLeftSeconds).to.equal(-200)
    expect(info.service).to.equal(null)
    expect(info.ownerLease).to.equal(null)
  })

  it('starting, failed and being deleted, with the detail the runner reports', () => {
    const starting = describePod(pod({ready: false}), null, NOW)
    expect(starting).to.deep.include({state: 'starting', ready: false})
    expect(starting.detail).to.match(/^phase Running/)
    expect(describePod(pod({phase: 'Failed'}), null, NOW)).to.deep.include({state: 'failed', ready: false, detail: 'phase Failed'})
    expect(describePod(pod({deleting: true}), null, NOW)).to.deep.include({state: 'deleting', ready: false, detail: 'being deleted'})
  })

  it('a pod without fnr\'s annotations: nulls, and phase Pending when it has no status', () => {
    const info = describePod({metadata: {name: 'bare'}}, null, NOW)
    expect(info).to.deep.include({pod: 'bare', image: null, phase: 'Pending', created: null, ageSeconds: null, lastUsed: null, ttlSeconds: null, ttlLeftSeconds: null, templateVersion: null, owner: null, podIP: null})
  })
})
