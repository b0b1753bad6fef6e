/**
 * The pod runtime's events (events.ts) and their subscribers (event-sinks.ts): the log lines and
 * metrics PodCache, adoption and the GC pass used to write themselves now follow the events.
 */
import {expect} from 'chai'

import {createMetrics} from '../../src/lib/telemetry/metrics.js'
import {countPodEvent, logPodEvent, observePodEvents} from '../../src/lib/pods/runtime/event-sinks.js'
import {PodEvents, type PodEvent} from '../../src/lib/pods/model/events.js'
import {memoryLogger} from '../support/memory-logger.js'
import {parseExposition} from '../metrics/prom-text.js'

const IMG = 'example.com/fn/cat:v1'

describe('pod runtime events', () => {
  it('calls every listener in order; a listener that throws changes nothing for the others, and unsubscribing stops it', () => {
    const events = new PodEvents()
    const seen: string[] = []
    events.on(() => {
      throw new Error('a broken subscriber')
    })
    const off = events.on((e) => seen.push(`first ${e.type}`))
    events.on((e) => seen.push(`second ${e.type}`))
    events.emit({type: 'created', image: IMG, pod: 'p'})
    off()
    events.emit({type: 'evicted', image: IMG, pod: 'p', reason: 'gone', load: 0})
    expect(seen).to.deep.equal(['first created', 'second created', 'second evicted'])
  })

  it('the log subscriber writes the runtime\'s lines (messages and fields operators and tests rely on)', () => {
    const logger = memoryLogger()
    const all: PodEvent[] = [
      {type: 'placed', image: IMG, pod: 'p', result: 'miss', why: 'no-pod', live: 0},
      {type: 'placed', image: IMG, pod: 'p', result: 'hit', live: 1, load: 0},
      {type: 'created', image: IMG, pod: 'p'},
      {type: 'ready', image: IMG, pod: 'p', address: '10.0.0.1:9446', timings: {createMs: 5, totalMs: 9}},
      {type: 'failed', image: IMG, pod: 'q', error: 'exit code 3'},
      {type: 'adopted', image: IMG, pod: 'r', owner: 'runner-b', ownerState: 'expired', why: 'found at startup'},
      {type: 'retired', image: IMG, pod: 'p', reason: 'the image now resolves to sha256:b', cause: {kind: 'digest', from: 'sha256:a', to: 'sha256:b'}},
      {type: 'templates-changed', from: 'v1', to: 'v2', origin: 'the inline template'},
      {type: 'evicted', image: IMG, pod: 'p', reason: 'the pod was deleted', load: 1},
      {type: 'collected', kind: 'service', name: 's', code: 'orphan'},
      {type: 'collected', kind: 'pod', name: 'p', code: 'ttl'},
    ]
    for (const e of all) logPodEvent(logger, e)
    expect(logger.lines.map((l) => [l.level, l.msg])).to.deep.equal([
      ['debug', 'no pod for the image; starting one'],
      ['info', 'function pod ready'],
      ['warn', 'function pod failed to start'],
      ['info', 'adopted function pod'],
      ['info', 'function image changed; retiring its pod'],
      ['info', 'function pod template changed; replacing pods as they go idle'],
      ['info', 'function pod evicted'],
      ['info', 'deleted orphan Service'],
    ])
    expect(logger.lines[1]!.fields).to.deep.equal({image: IMG, pod: 'p', address: '10.0.0.1:9446', createMs: 5, totalMs: 9})
    expect(logger.lines[6]!.fields).to.deep.equal({image: IMG, pod: 'p', reason: 'the pod was deleted', load: 1})
  })

  it('the metrics subscriber counts pod cache lookups and GC deletions by reason code', async () => {
    const metrics = await createMetrics({defaultMetrics: false})
    const events = new PodEvents()
    observePodEvents(events, memoryLogger(), {metrics})
    events.emit({type: 'placed', image: IMG, pod: 'p', result: 'miss', why: 'no-pod', live: 0})
    events.emit({type: 'placed', image: IMG, pod: 'p', result: 'hit', live: 1, load: 0})
    events.emit({type: 'placed', image: IMG, pod: 'p', result: 'hit', live: 1, load: 1})
    countPodEvent(metrics, {type: 'collected', kind: 'pod', name: 'p', code: 'ttl'})
    countPodEvent(metrics, {type: 'collected', kind: 'service', name: 's', code: 'orphan'})
    const m = parseExposition((await metrics.exposition()).body)
    expect(m.value('fnr_pod_cache_lookups_total', {image: IMG, result: 'hit'})).to.equal(2)
    expect(m.value('fnr_pod_cache_lookups_total', {image: IMG, result: 'miss'})).to.equal(1)
    expect(m.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'})).to.equal(1)
    expect(m.value('fnr_pod_gc_deletions_total', {kind: 'service', reason: 'orphan'})).to.equal(1)
  })
})
