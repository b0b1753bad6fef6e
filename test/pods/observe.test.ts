/**
 * What garbage collection reads from a pod or Service object (src/lib/pods/model/gc.ts observePod,
 * observeService): fnr's own objects by their labels, owner, image, last use and TTL from the
 * annotations, creation time as a Date or an RFC 3339 string, and a deletion under way. The rules
 * applied to these are in ./gc-rules.test.ts.
 */
import type {V1Pod, V1Service} from '@kubernetes/client-node'
import {expect} from 'chai'

import {observePod, observeService} from '../../src/lib/pods/model/gc.js'
import {functionPodAnnotations, functionPodLabels, functionServiceLabels} from '../../src/lib/pods/model/naming.js'

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0)

describe('garbage collection: what it reads from an object', () => {
  it('a function pod of fnr: managed, owner, image, last use and TTL from its annotations, phase, creation time', () => {
    const pod: V1Pod = {
      metadata: {
        name: 'fn-1',
        creationTimestamp: new Date(NOW - 60_000),
        labels: functionPodLabels('fn-1', 'example.com/fn:v1', 'runner-a'),
        annotations: functionPodAnnotations({templateVersion: 'v1', image: 'example.com/fn:v1', owner: 'runner-a', now: NOW - 5_000, ttlMs: 1_800_000, creationId: 'c'}),
      },
      status: {phase: 'Running'},
    }
    expect(observePod(pod)).to.deep.equal({name: 'fn-1', managed: true, deleting: false, phase: 'Running', owner: 'runner-a', image: 'example.com/fn:v1', lastUsed: NOW - 5_000, ttlMs: 1_800_000, created: NOW - 60_000})
  })

  it('a pod that is not fnr\'s, one being deleted, a creation time as a string, and annotations that do not parse', () => {
    const porch = observePod({metadata: {name: 'porch-fn', labels: {'fn.kpt.dev/image': 'x'}, creationTimestamp: '2026-11-30T11:00:00Z' as unknown as Date}})
    expect(porch).to.deep.include({managed: false, created: Date.UTC(2026, 10, 30, 11, 0, 0)})
    const bad = observePod({metadata: {name: 'p', deletionTimestamp: new Date(NOW), labels: functionPodLabels('p', 'i', 'o'), annotations: {'fnr.dev/ttl-seconds': '0', 'fnr.dev/last-used': 'yesterday'}}})
    expect(bad).to.deep.include({managed: true, deleting: true, ttlMs: undefined, lastUsed: undefined, created: undefined})
    expect(observePod({}).name).to.equal('')
  })

  it('a Service of fnr: managed, the pod it fronts, owner; another Service is not fnr\'s', () => {
    const svc: V1Service = {metadata: {name: 'fn-1', labels: functionServiceLabels('fn-1', 'runner-a'), creationTimestamp: new Date(NOW)}}
    expect(observeService(svc)).to.deep.equal({name: 'fn-1', managed: true, deleting: false, owner: 'runner-a', pod: 'fn-1', created: NOW})
    expect(observeService({metadata: {name: 'other', labels: {'app.kubernetes.io/managed-by': 'fnr'}}})).to.deep.include({managed: false, pod: undefined})
  })
})
