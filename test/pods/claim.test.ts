/**
 * A call's claim on a pod slot (src/lib/pods/runtime/claim.ts): usable while the slot is ready or
 * retiring and has a channel, its client or an Unavailable error naming the pod, and a release
 * that reaches the cache exactly once however often it is called.
 */
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {FnrError} from '../../src/lib/errors.js'
import {PodSlot} from '../../src/lib/pods/model/slot.js'
import {PodClaim} from '../../src/lib/pods/runtime/claim.js'

describe('pod runtime: a call\'s claim on a slot', () => {
  const clients: EvaluatorClient[] = []
  after(() => {
    for (const c of clients) c.close()
  })

  it('releases the slot to the cache once, whatever the number of release() calls', () => {
    const released: PodSlot[] = []
    const slot = new PodSlot('example.com/fn:v1', 'fn-1', 'v1', 0)
    const claim = new PodClaim({releaseSlot: (s) => released.push(s)}, slot)
    claim.release()
    claim.release()
    claim.release()
    expect(released).to.deep.equal([slot])
  })

  it('is usable while the slot is ready or retiring with a channel; not starting, gone, or without one', () => {
    const slot = new PodSlot('example.com/fn:v1', 'fn-1', 'v1', 0)
    const claim = new PodClaim({releaseSlot: () => {}}, slot)
    slot.state = 'ready'
    expect(claim.usable, 'ready without a channel').to.equal(false)
    const client = new EvaluatorClient('127.0.0.1:9')
    clients.push(client)
    slot.client = client
    const usable: Record<string, boolean> = {}
    for (const state of ['starting', 'ready', 'retiring', 'gone'] as const) {
      slot.state = state
      usable[state] = claim.usable
    }
    expect(usable).to.deep.equal({starting: false, ready: true, retiring: true, gone: false})
    expect(claim.client).to.equal(client)
  })

  it('asking a claim without a channel for its client is Unavailable, naming the pod', () => {
    const claim = new PodClaim({releaseSlot: () => {}}, new PodSlot('example.com/fn:v1', 'fn-v1-1-abc', 'v1', 0))
    expect(() => claim.client).to.throw(FnrError, 'function pod fn-v1-1-abc has no connection').with.property('kind', 'Unavailable')
  })
})
