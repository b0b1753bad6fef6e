/**
 * What the pod cache does with the pod watch's events (src/lib/pods/runtime/pod-watch.ts): a slot
 * whose pod was deleted or failed is evicted, a pod another replica took over is let go (disowned,
 * never deleted), and a ready pod `fnr pods warm` made is adopted once startup adoption is done.
 * The host is a fake; the pods are plain objects as the watch delivers them.
 */
import type {V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'

import type {OwnerState} from '../../src/lib/pods/model/gc.js'
import {ANNOTATION_IMAGE, LABEL_OWNER, WARM_OWNER} from '../../src/lib/pods/model/naming.js'
import {PodSlot} from '../../src/lib/pods/model/slot.js'
import type {TakeOverResult} from '../../src/lib/pods/runtime/adoption.js'
import {reactToPodEvent, type PodWatchHost} from '../../src/lib/pods/runtime/pod-watch.js'

const IMAGE = 'example.com/fn:v1'

class FakeHost implements PodWatchHost {
  readonly ownerLabel = 'runner-a'
  closed = false
  started = true
  readonly slots = new Map<string, PodSlot>()
  readonly evicted: Array<{pod: string; reason: string}> = []
  readonly takenOver: Array<{pod: string; state: OwnerState; why: string}> = []
  slotFor(name: string): PodSlot | undefined {
    return this.slots.get(name)
  }
  evict(slot: PodSlot, reason: string): void {
    this.evicted.push({pod: slot.name, reason})
  }
  async takeOver(pod: V1Pod, state: OwnerState, why: string): Promise<TakeOverResult> {
    this.takenOver.push({pod: pod.metadata!.name!, state, why})
    return 'adopted'
  }
  add(name: string, state: PodSlot['state'] = 'ready'): PodSlot {
    const s = new PodSlot(IMAGE, name, 'v1', 0)
    s.state = state
    s.created = true
    this.slots.set(name, s)
    return s
  }
}

function pod(name: string, options: {owner?: string; ready?: boolean; phase?: string; image?: string; deleting?: boolean} = {}): V1Pod {
  return {
    metadata: {
      name,
      labels: options.owner === undefined ? {} : {[LABEL_OWNER]: options.owner},
      annotations: options.image === undefined ? {} : {[ANNOTATION_IMAGE]: options.image},
      ...(options.deleting ? {deletionTimestamp: new Date(0)} : {}),
    },
    status: {
      phase: options.phase ?? 'Running',
      podIP: '10.0.0.7',
      conditions: [{type: 'Ready', status: options.ready === false ? 'False' : 'True'}],
    },
  }
}

describe('pod runtime: reactions to the pod watch', () => {
  it('evicts the slot of a deleted pod, and of a pod that ended', () => {
    const host = new FakeHost()
    host.add('p1')
    host.add('p2')
    reactToPodEvent(host, 'DELETED', pod('p1', {owner: 'runner-a'}))
    reactToPodEvent(host, 'MODIFIED', pod('p2', {owner: 'runner-a', phase: 'Failed'}))
    expect(host.evicted).to.deep.equal([
      {pod: 'p1', reason: 'the pod was deleted'},
      {pod: 'p2', reason: 'phase Failed'},
    ])
  })

  it('a pod being deleted is evicted; a ready pod of its own is left alone', () => {
    const host = new FakeHost()
    host.add('p1')
    host.add('p2')
    reactToPodEvent(host, 'MODIFIED', pod('p1', {owner: 'runner-a', deleting: true}))
    reactToPodEvent(host, 'MODIFIED', pod('p2', {owner: 'runner-a'}))
    expect(host.evicted).to.deep.equal([{pod: 'p1', reason: 'being deleted'}])
  })

  it('a pod another replica now owns is let go without deletion (disowned); the owner it was adopted from is not another replica', () => {
    const host = new FakeHost()
    const taken = host.add('taken')
    const adopted = host.add('adopted')
    adopted.adoptedFrom = 'runner-old'
    reactToPodEvent(host, 'MODIFIED', pod('taken', {owner: 'runner-b'}))
    reactToPodEvent(host, 'MODIFIED', pod('adopted', {owner: 'runner-old'}))
    expect(taken.disowned).to.equal(true)
    expect(adopted.disowned).to.equal(false)
    expect(host.evicted).to.deep.equal([{pod: 'taken', reason: 'taken over by replica runner-b'}])
  })

  it('ignores events for slots still starting or gone, and pods without a name', () => {
    const host = new FakeHost()
    host.add('starting', 'starting')
    host.add('gone', 'gone')
    reactToPodEvent(host, 'DELETED', pod('starting'))
    reactToPodEvent(host, 'DELETED', pod('gone'))
    reactToPodEvent(host, 'DELETED', {metadata: {}})
    expect(host.evicted).to.deep.equal([])
    expect(host.takenOver).to.deep.equal([])
  })

  it('adopts a ready pod `fnr pods warm` made, once startup is done, and nothing else', () => {
    const host = new FakeHost()
    reactToPodEvent(host, 'ADDED', pod('warm-ready', {owner: WARM_OWNER, image: IMAGE}))
    reactToPodEvent(host, 'ADDED', pod('warm-pending', {owner: WARM_OWNER, image: IMAGE, ready: false}))
    reactToPodEvent(host, 'MODIFIED', pod('warm-deleting', {owner: WARM_OWNER, image: IMAGE, deleting: true}))
    reactToPodEvent(host, 'DELETED', pod('warm-deleted', {owner: WARM_OWNER, image: IMAGE}))
    reactToPodEvent(host, 'ADDED', pod('warm-no-image', {owner: WARM_OWNER}))
    reactToPodEvent(host, 'ADDED', pod('other-owner', {owner: 'runner-b', image: IMAGE}))
    expect(host.takenOver).to.deep.equal([{pod: 'warm-ready', state: 'none', why: 'warmed by fnr pods warm'}])
    const early = new FakeHost()
    early.started = false
    reactToPodEvent(early, 'ADDED', pod('warm-ready', {owner: WARM_OWNER, image: IMAGE}))
    const closed = new FakeHost()
    closed.closed = true
    reactToPodEvent(closed, 'ADDED', pod('warm-ready', {owner: WARM_OWNER, image: IMAGE}))
    expect(early.takenOver).to.deep.equal([])
    expect(closed.takenOver).to.deep.equal([])
  })
})
