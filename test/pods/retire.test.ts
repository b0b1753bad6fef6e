/**
 * Retiring pods whose content is no longer what a new pod would run (src/lib/pods/runtime/retire.ts):
 * an idle ready pod is evicted at once, a busy one stops taking calls (retiring), a starting one is
 * retired once ready, and only the pods of another digest or template version are touched. The
 * host is a fake holding slots; nothing talks to Kubernetes.
 */
import {expect} from 'chai'

import {PodEvents, type PodEvent} from '../../src/lib/pods/model/events.js'
import {PodSlot} from '../../src/lib/pods/model/slot.js'
import {retire, retireOtherDigests, retireOtherTemplates, type RetireHost} from '../../src/lib/pods/runtime/retire.js'

class FakeHost implements RetireHost {
  readonly events = new PodEvents()
  readonly seen: PodEvent[] = []
  readonly evicted: Array<{pod: string; reason: string}> = []
  constructor(readonly all: PodSlot[]) {
    this.events.on((e) => this.seen.push(e))
  }
  slots(image?: string): PodSlot[] {
    return image === undefined ? this.all : this.all.filter((s) => s.image === image)
  }
  evict(slot: PodSlot, reason: string): void {
    slot.state = 'gone'
    this.evicted.push({pod: slot.name, reason})
  }
}

function slot(name: string, options: {image?: string; state?: PodSlot['state']; load?: number; digest?: string; version?: string} = {}): PodSlot {
  const s = new PodSlot(options.image ?? 'example.com/fn:v1', name, options.version ?? 'v1', 0)
  s.state = options.state ?? 'ready'
  s.load = options.load ?? 0
  s.digest = options.digest
  s.ready = Promise.resolve()
  return s
}

describe('pod runtime: retiring pods', () => {
  it('evicts an idle ready pod at once, with a retired event carrying the cause', () => {
    const s = slot('idle')
    const host = new FakeHost([s])
    retire(host, s, 'because', {kind: 'template'})
    expect(s.retireReason).to.equal('because')
    expect(host.evicted).to.deep.equal([{pod: 'idle', reason: 'because'}])
    expect(host.seen).to.deep.equal([{type: 'retired', image: 'example.com/fn:v1', pod: 'idle', reason: 'because', cause: {kind: 'template'}}])
  })

  it('a busy pod stops taking calls (retiring) and is not evicted yet', () => {
    const s = slot('busy', {load: 2})
    const host = new FakeHost([s])
    retire(host, s, 'because', {kind: 'template'})
    expect(s.state).to.equal('retiring')
    expect(host.evicted).to.deep.equal([])
    expect(host.seen.map((e) => e.type)).to.deep.equal(['retired'])
  })

  it('leaves a pod that is already retiring or gone alone', () => {
    for (const state of ['retiring', 'gone'] as const) {
      const s = slot(state, {state})
      const host = new FakeHost([s])
      retire(host, s, 'because', {kind: 'template'})
      expect(s.state, state).to.equal(state)
      expect(s.retireReason, state).to.equal(undefined)
      expect(host.seen, state).to.deep.equal([])
      expect(host.evicted, state).to.deep.equal([])
    }
  })

  it('a starting pod is retired once ready, and never when it fails to start', async () => {
    let becomeReady!: () => void
    const starting = slot('starting', {state: 'starting'})
    starting.ready = new Promise<void>((resolve) => (becomeReady = resolve))
    let failToStart!: (e: Error) => void
    const failing = slot('failing', {state: 'starting'})
    failing.ready = new Promise<void>((_, reject) => (failToStart = reject))
    const host = new FakeHost([starting, failing])
    retire(host, starting, 'new digest', {kind: 'digest', from: 'sha256:a', to: 'sha256:b'})
    retire(host, failing, 'new digest', {kind: 'digest', from: 'sha256:a', to: 'sha256:b'})
    expect(starting.retireReason).to.equal('new digest')
    expect(host.seen).to.deep.equal([])
    starting.state = 'ready'
    becomeReady()
    failing.state = 'gone'
    failToStart(new Error('no'))
    await new Promise((r) => setImmediate(r))
    expect(host.evicted).to.deep.equal([{pod: 'starting', reason: 'new digest'}])
    expect(host.seen).to.deep.equal([{type: 'retired', image: 'example.com/fn:v1', pod: 'starting', reason: 'new digest', cause: {kind: 'digest', from: 'sha256:a', to: 'sha256:b'}}])
  })

  it('retireOtherDigests: only the image\'s pods of another known digest, never the one excepted', () => {
    const old = slot('old', {digest: 'sha256:old'})
    const current = slot('current', {digest: 'sha256:new'})
    const unknown = slot('unknown')
    const excepted = slot('excepted', {digest: 'sha256:old'})
    const other = slot('other-image', {image: 'example.com/other:v1', digest: 'sha256:old'})
    const host = new FakeHost([old, current, unknown, excepted, other])
    retireOtherDigests(host, 'example.com/fn:v1', 'sha256:new', excepted)
    expect(host.evicted).to.deep.equal([{pod: 'old', reason: 'the image now resolves to sha256:new, not sha256:old'}])
    expect(host.seen).to.deep.equal([
      {type: 'retired', image: 'example.com/fn:v1', pod: 'old', reason: 'the image now resolves to sha256:new, not sha256:old', cause: {kind: 'digest', from: 'sha256:old', to: 'sha256:new'}},
    ])
    for (const s of [current, unknown, excepted, other]) expect(s.state, s.name).to.equal('ready')
  })

  it('retireOtherTemplates: every image\'s pods of another template version, keeping a reason already given', () => {
    const v1 = slot('v1-pod', {version: 'v1'})
    const v2 = slot('v2-pod', {version: 'v2'})
    const busy = slot('v1-busy', {version: 'v1', image: 'example.com/other:v1', load: 1})
    busy.retireReason = 'the image now resolves to sha256:b, not sha256:a'
    const host = new FakeHost([v1, v2, busy])
    retireOtherTemplates(host, 'v2')
    expect(host.evicted).to.deep.equal([{pod: 'v1-pod', reason: 'replaced by a new template version'}])
    expect(busy.state).to.equal('retiring')
    expect(busy.retireReason).to.equal('the image now resolves to sha256:b, not sha256:a')
    expect(v2.state).to.equal('ready')
    expect(host.seen.map((e) => (e.type === 'retired' ? [e.pod, e.reason] : []))).to.deep.equal([
      ['v1-pod', 'replaced by a new template version'],
      ['v1-busy', 'the image now resolves to sha256:b, not sha256:a'],
    ])
  })
})
