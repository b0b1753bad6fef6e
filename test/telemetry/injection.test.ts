/**
 * Telemetry is handed to what a server builds (telemetry.ts), never read from a global: two
 * instances built with two recorders each count, and trace, only into their own, and an instance
 * built without one reports nowhere.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import http from 'node:http'
import type {AddressInfo} from 'node:net'

import {CallBudget, type BudgetSettings} from '../../src/lib/budget.js'
import {CachingEvaluator, type ResponseCacheSettings} from '../../src/lib/cache/response-cache.js'
import {FnrError} from '../../src/lib/errors.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from '../../src/lib/evaluator.js'
import {PodEvaluator} from '../../src/lib/evaluators/pod.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {PodEvents} from '../../src/lib/pods/model/events.js'
import {observePodEvents} from '../../src/lib/pods/runtime/event-sinks.js'
import {PodGarbageCollector} from '../../src/lib/pods/runtime/gc-scheduler.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {createMetrics, NO_METRICS, type PrometheusMetrics} from '../../src/lib/telemetry/metrics.js'
import type {Tracing} from '../../src/lib/telemetry/otel.js'
import {NO_TELEMETRY, type Telemetry} from '../../src/lib/telemetry/telemetry.js'
import {parseExposition, type Exposition} from '../metrics/prom-text.js'
import {SAMPLE_RL} from '../support/tmp.js'

const MiB = 1024 * 1024
const IMG = 'example.com/fn/cat:v1'
const CACHE: ResponseCacheSettings = {ttlMs: 60_000, maxTtlMs: 3_600_000, maxBytes: MiB, maxEntries: 100}

/** A Tracing that keeps the names of the spans it ended. */
function recordingTracing(): {tracing: Tracing; ended: string[]} {
  const ended: string[] = []
  let next = 0
  const tracing: Tracing = {
    startSpan(name) {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
      const spanId = (++next).toString(16).padStart(16, '0')
      return {context: {traceId, spanId, flags: '01', traceparent: `00-${traceId}-${spanId}-01`}, setAttributes() {}, end: () => void ended.push(name)}
    },
    shutdown: async () => {},
  }
  return {tracing, ended}
}

async function recorder(): Promise<{metrics: PrometheusMetrics; read(): Promise<Exposition>}> {
  const metrics = await createMetrics({defaultMetrics: false})
  return {metrics, read: async () => parseExposition((await metrics.exposition()).body)}
}

/** An evaluator that echoes its input; every image has an identity, so responses are cacheable. */
function echo(): Evaluator {
  return {
    name: 'exec',
    evaluate: async (request: EvaluationRequest): Promise<EvaluationResponse> => ({resourceList: request.resourceList, log: Buffer.alloc(0), evaluator: 'exec'}),
    identify: async (image: string) => ({runtime: 'exec', binary: `/fns/${image}`, stat: '1:1'}),
    async close() {},
  }
}

function budgetSettings(over: Partial<BudgetSettings> = {}): BudgetSettings {
  return {memoryLimit: {bytes: 1024 * MiB, source: 'flag'}, maxConcurrentCalls: 1, maxQueuedCalls: 0, maxHeldBytes: 100 * MiB, maxRunningBytes: 1000 * MiB, maxConcurrentStreams: 4, ...over}
}

describe('telemetry is injected: two instances share none', () => {
  it('two response caches count hits, misses and their size in their own metrics only', async () => {
    const [a, b] = [await recorder(), await recorder()]
    const cacheA = new CachingEvaluator({inner: echo(), settings: CACHE, purgeIntervalMs: 0, telemetry: {metrics: a.metrics}})
    const cacheB = new CachingEvaluator({inner: echo(), settings: CACHE, purgeIntervalMs: 0, telemetry: {metrics: b.metrics}})
    const unobserved = new CachingEvaluator({inner: echo(), settings: CACHE, purgeIntervalMs: 0})
    try {
      await cacheA.evaluate({image: IMG, resourceList: SAMPLE_RL})
      await cacheA.evaluate({image: IMG, resourceList: SAMPLE_RL})
      await cacheB.evaluate({image: IMG, resourceList: Buffer.from(`${SAMPLE_RL.toString()}# b\n`)})
      for (let i = 0; i < 3; i++) await unobserved.evaluate({image: IMG, resourceList: SAMPLE_RL})
      const [ma, mb] = [await a.read(), await b.read()]
      expect(ma.value('fnr_response_cache_lookups_total', {result: 'hit'})).to.equal(1)
      expect(ma.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'absent'})).to.equal(1)
      expect(mb.value('fnr_response_cache_lookups_total', {result: 'hit'})).to.equal(0)
      expect(mb.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'absent'})).to.equal(1)
      // The size gauges read each cache's own store.
      expect(ma.value('fnr_response_cache_bytes')).to.equal(cacheA.store.bytes)
      expect(mb.value('fnr_response_cache_bytes')).to.equal(cacheB.store.bytes)
      expect(cacheA.store.bytes).to.not.equal(cacheB.store.bytes)
    } finally {
      await Promise.all([cacheA.close(), cacheB.close(), unobserved.close()])
    }
  })

  it('two budgets count their refusals in their own metrics only', async () => {
    const [a, b] = [await recorder(), await recorder()]
    const budgetA = new CallBudget(budgetSettings(), silentLogger, {idle: null, paceStarts: false, telemetry: {metrics: a.metrics}})
    const budgetB = new CallBudget(budgetSettings(), silentLogger, {idle: null, paceStarts: false, telemetry: {metrics: b.metrics}})
    const release = await budgetA.admit(10, 'a')
    const refused = await budgetA.admit(10, 'b').then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(refused).to.be.instanceOf(FnrError)
    expect((refused as FnrError).kind).to.equal('ResourceExhausted')
    ;(await budgetB.admit(10, 'c'))()
    release()
    expect((await a.read()).value('fnr_admission_total', {outcome: 'rejected-queue-full'})).to.equal(1)
    expect((await b.read()).value('fnr_admission_total', {outcome: 'rejected-queue-full'})).to.equal(0)
  })

  it('two pod runtimes count their events and GC passes in their own metrics only', async () => {
    const [a, b] = [await recorder(), await recorder()]
    const [eventsA, eventsB] = [new PodEvents(), new PodEvents()]
    observePodEvents(eventsA, silentLogger, {metrics: a.metrics})
    observePodEvents(eventsB, silentLogger, {metrics: b.metrics})
    eventsA.emit({type: 'collected', kind: 'pod', name: 'p', code: 'ttl'})
    eventsB.emit({type: 'collected', kind: 'service', name: 's', code: 'orphan'})
    const gcA = new PodGarbageCollector({collectGarbage: async () => ({}) as never}, 0, silentLogger, {metrics: a.metrics})
    await gcA.runOnce()
    await gcA.runOnce()
    const [ma, mb] = [await a.read(), await b.read()]
    expect(ma.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'})).to.equal(1)
    expect(ma.value('fnr_pod_gc_deletions_total', {kind: 'service', reason: 'orphan'})).to.equal(0)
    expect(mb.value('fnr_pod_gc_deletions_total', {kind: 'service', reason: 'orphan'})).to.equal(1)
    expect(mb.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'})).to.equal(0)
    expect(ma.value('fnr_pod_gc_runs_total')).to.equal(2)
    expect(mb.value('fnr_pod_gc_runs_total')).to.equal(0)
  })

  it('two registry clients count their requests and metadata lookups in their own metrics only', async () => {
    // A registry on loopback that knows no image (plain HTTP: the clients fall back to it after their TLS probe).
    const server = http.createServer((_req, res) => res.writeHead(404, {'content-type': 'application/json'}).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}'))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const host = `127.0.0.1:${(server.address() as AddressInfo).port}`
    const [a, b] = [await recorder(), await recorder()]
    const clientA = new RegistryClient({insecureRegistries: [host], retries: 0, telemetry: {metrics: a.metrics}})
    const clientB = new RegistryClient({insecureRegistries: [host], retries: 0, telemetry: {metrics: b.metrics}})
    try {
      const missing = await clientA.inspect(`${host}/fn/none:v1`).catch((err: unknown) => err)
      expect(missing).to.be.instanceOf(FnrError)
      const [ma, mb] = [await a.read(), await b.read()]
      expect(ma.value('fnr_registry_requests_total', {status: '404'})).to.be.greaterThan(0)
      expect(ma.value('fnr_registry_metadata_lookups_total', {result: 'miss'})).to.equal(1)
      expect(mb.value('fnr_registry_requests_total')).to.equal(0)
      expect(mb.value('fnr_registry_metadata_lookups_total')).to.equal(0)
    } finally {
      clientA.close()
      clientB.close()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('two pod evaluators trace into their own tracing only; without telemetry, none', async () => {
    const client = {evaluate: async (_image: string, resourceList: Buffer) => ({resourceList, log: Buffer.alloc(0), trailers: new grpc.Metadata()})}
    const cache = {
      acquire: async () => ({usable: true, client, slot: {name: 'fake-pod', address: '10.0.0.1:9446'}, release: () => {}}),
      noteUnavailable: () => {},
      describe: async () => ({}),
    } as unknown as ConstructorParameters<typeof PodEvaluator>[0]['cache']
    const [ta, tb] = [recordingTracing(), recordingTracing()]
    const podA = new PodEvaluator({cache, telemetry: {metrics: NO_METRICS, tracing: ta.tracing}})
    const podB = new PodEvaluator({cache, telemetry: {metrics: NO_METRICS, tracing: tb.tracing}})
    const untraced = new PodEvaluator({cache})
    await podA.evaluate({image: IMG, resourceList: SAMPLE_RL})
    await podA.evaluate({image: IMG, resourceList: SAMPLE_RL})
    await untraced.evaluate({image: IMG, resourceList: SAMPLE_RL})
    expect(ta.ended).to.deep.equal(['pod.acquire', 'wrapper.call', 'pod.acquire', 'wrapper.call'])
    expect(tb.ended).to.deep.equal([])
    await podB.evaluate({image: IMG, resourceList: SAMPLE_RL})
    expect(tb.ended).to.deep.equal(['pod.acquire', 'wrapper.call'])
    expect(ta.ended).to.have.length(4)
  })

  it('two gRPC servers in one process count and trace their own calls only', async () => {
    const [a, b] = [await recorder(), await recorder()]
    const [ta, tb] = [recordingTracing(), recordingTracing()]
    const telemetryA: Telemetry = {metrics: a.metrics, tracing: ta.tracing}
    const telemetryB: Telemetry = {metrics: b.metrics, tracing: tb.tracing}
    const serverA = new EvaluatorServer({evaluator: echo(), maxMessageSize: 4 * MiB, host: '127.0.0.1', port: 0, telemetry: telemetryA})
    const serverB = new EvaluatorServer({evaluator: echo(), maxMessageSize: 4 * MiB, host: '127.0.0.1', port: 0, telemetry: telemetryB})
    const plain = new EvaluatorServer({evaluator: echo(), maxMessageSize: 4 * MiB, host: '127.0.0.1', port: 0})
    const clients: EvaluatorClient[] = []
    try {
      for (const s of [serverA, serverB, plain]) {
        const port = await s.start()
        s.setServing(true)
        clients.push(new EvaluatorClient(`127.0.0.1:${port}`))
      }
      const [toA, toB, toPlain] = clients as [EvaluatorClient, EvaluatorClient, EvaluatorClient]
      await toA.evaluateRaw(IMG, SAMPLE_RL)
      await toA.evaluateRaw(IMG, SAMPLE_RL)
      await toB.evaluateRaw(IMG, SAMPLE_RL)
      await toPlain.evaluateRaw(IMG, SAMPLE_RL)
      expect(serverA.telemetry).to.equal(telemetryA)
      expect(plain.telemetry).to.equal(NO_TELEMETRY)
      const [ma, mb] = [await a.read(), await b.read()]
      expect(ma.value('fnr_evaluations_total', {runtime: 'exec', code: 'OK'})).to.equal(2)
      expect(mb.value('fnr_evaluations_total', {runtime: 'exec', code: 'OK'})).to.equal(1)
      expect(ta.ended).to.deep.equal(['EvaluateFunction', 'EvaluateFunction'])
      expect(tb.ended).to.deep.equal(['EvaluateFunction'])
    } finally {
      for (const c of clients) c.close()
      for (const s of [serverA, serverB, plain]) s.forceShutdown()
    }
  })
})
