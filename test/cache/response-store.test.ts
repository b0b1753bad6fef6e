import {expect} from 'chai'
import {utimes, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {CachingEvaluator, DEFAULT_PER_IMAGE_TTL_MS, ResponseStore, sha256, ttlFor, type ResponseCacheSettings} from '../../src/lib/cache/response-cache.js'
import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {identityKey, type EvaluationRequest, type EvaluationResponse, type Evaluator, type ImageIdentity} from '../../src/lib/evaluator.js'
import {binaryIdentity} from '../../src/lib/evaluators/exec.js'
import {createMetrics} from '../../src/lib/telemetry/metrics.js'
import {TempDirs} from '../support/tmp.js'
import {parseExposition} from '../metrics/prom-text.js'

const SETTINGS: ResponseCacheSettings = {ttlMs: 60_000, maxTtlMs: 3_600_000, maxBytes: 1024 * 1024, maxEntries: 100}

/** An evaluator that echoes its input with a counter in the log, and can be told to fail. */
class CountingEvaluator implements Evaluator {
  readonly name = 'multi'
  calls = 0
  fail = false
  identify?: (image: string) => Promise<ImageIdentity | undefined>
  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    this.calls++
    if (this.fail) throw new FnrError('Internal', 'function failed')
    return {resourceList: Buffer.from(request.resourceList), log: Buffer.from(`call ${this.calls}\n`), evaluator: 'exec'}
  }
  async close(): Promise<void> {}
}

/**
 * The inner evaluator's identify(), with an identity per image that the test can change (a tag
 * that moved): "pod:<digest>" is a pod runtime's, anything else an exec binary's.
 */
class FakeResolver {
  identities = new Map<string, string | undefined>()
  error: Error | undefined
  async identify(image: string): Promise<ImageIdentity | undefined> {
    if (this.error) throw this.error
    const id = this.identities.has(image) ? this.identities.get(image) : `digest-of-${image}`
    if (id === undefined) return undefined
    return id.startsWith('pod:') ? {runtime: 'pod', digest: id.slice(4)} : {runtime: 'exec', binary: id, stat: '1:1'}
  }
}

describe('response cache: store, keys and miss reasons', () => {
  let clock = 1_000_000
  const now = (): number => clock
  let metrics: Awaited<ReturnType<typeof createMetrics>>

  beforeEach(async () => {
    clock = 1_000_000
    metrics = await createMetrics({defaultMetrics: false})
  })

  async function counters(): Promise<ReturnType<typeof parseExposition>> {
    return parseExposition((await metrics.exposition()).body)
  }

  function build(settings: Partial<ResponseCacheSettings> = {}, policy?: (image: string) => boolean | number | undefined) {
    const inner = new CountingEvaluator()
    const resolver = new FakeResolver()
    inner.identify = (image) => resolver.identify(image)
    const cache = new CachingEvaluator({inner, settings: {...SETTINGS, ...settings}, policy, now, purgeIntervalMs: 0, telemetry: {metrics}})
    return {inner, resolver, cache}
  }

  const rl = (text: string): Buffer => Buffer.from(`apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [] # ${text}\n`)

  it('ttlFor: --cache-ttl, per-image switches, and the maximum clamps every TTL', () => {
    expect(ttlFor(SETTINGS, undefined, 'a')).to.equal(60_000)
    expect(ttlFor({...SETTINGS, ttlMs: 0}, undefined, 'a')).to.equal(0)
    expect(ttlFor(SETTINGS, () => false, 'a')).to.equal(0)
    expect(ttlFor({...SETTINGS, ttlMs: 0}, () => true, 'a')).to.equal(DEFAULT_PER_IMAGE_TTL_MS)
    expect(ttlFor(SETTINGS, () => true, 'a')).to.equal(60_000)
    expect(ttlFor(SETTINGS, () => 5000, 'a')).to.equal(5000)
    expect(ttlFor(SETTINGS, () => 0, 'a')).to.equal(0)
    expect(ttlFor({...SETTINGS, ttlMs: 10 * 3_600_000}, undefined, 'a')).to.equal(3_600_000)
    expect(ttlFor({...SETTINGS, maxTtlMs: 1000}, () => 5000, 'a')).to.equal(1000)
  })

  it('a hit returns the stored response without calling the evaluator; misses say why', async () => {
    const {inner, resolver, cache} = build()
    const first = await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    const second = await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    expect(inner.calls).to.equal(1)
    expect(second.resourceList.equals(first.resourceList)).to.equal(true)
    expect(second.log.toString()).to.equal('call 1\n')
    expect(second.evaluator).to.equal('exec')
    expect(second.cached).to.equal(true)
    expect(first.cached).to.equal(undefined)

    await cache.evaluate({image: 'img:v1', resourceList: rl('b')}) // input-changed
    resolver.identities.set('img:v1', 'digest-2') // the tag moved
    const moved = await cache.evaluate({image: 'img:v1', resourceList: rl('a')}) // image-changed
    expect(moved.log.toString()).to.equal('call 3\n')
    expect(inner.calls).to.equal(3)
    clock += 60_001
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')}) // expired
    expect(inner.calls).to.equal(4)

    const m = await counters()
    expect(m.value('fnr_response_cache_lookups_total', {result: 'hit'})).to.equal(1)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'absent'})).to.equal(1)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'input-changed'})).to.equal(1)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'image-changed'})).to.equal(1)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'expired'})).to.equal(1)
  })

  it('expired entries are purged and a later lookup still says "expired"', async () => {
    const store = new ResponseStore(SETTINGS, {now, purgeIntervalMs: 0, telemetry: {metrics}})
    const res: EvaluationResponse = {resourceList: rl('x'), log: Buffer.alloc(0), evaluator: 'pod'}
    store.store('id', 'img', 'h', res, 1000)
    clock += 1001
    ;(store as unknown as {entries: {purgeStale(): void}}).entries.purgeStale()
    expect(store.size).to.equal(0)
    expect(store.lookup('id', 'img', 'h')).to.deep.equal({hit: false, reason: 'expired'})
    expect((await counters()).value('fnr_response_cache_evictions_total', {reason: 'expire'})).to.equal(1)
    store.close()
  })

  it('only successful responses are stored; the image identity decides, and no identity means no caching', async () => {
    const {inner, resolver, cache} = build()
    inner.fail = true
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')}).catch(() => undefined)
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')}).catch(() => undefined)
    expect(inner.calls).to.equal(2)
    inner.fail = false
    resolver.identities.set('nodigest:v1', undefined)
    await cache.evaluate({image: 'nodigest:v1', resourceList: rl('a')})
    await cache.evaluate({image: 'nodigest:v1', resourceList: rl('a')})
    expect(inner.calls).to.equal(4)
    resolver.error = new FnrError('Unavailable', 'registry down')
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    expect(inner.calls).to.equal(5)
    const m = await counters()
    expect(m.value('fnr_response_cache_skipped_total', {reason: 'failed'})).to.equal(2)
    expect(m.value('fnr_response_cache_skipped_total', {reason: 'no-identity'})).to.equal(2)
    expect(m.value('fnr_response_cache_skipped_total', {reason: 'identity-error'})).to.equal(1)
  })

  it('pod identities: a response is stored only when the serving pod was made for the key\'s digest', async () => {
    const {resolver, cache} = build()
    let podDigest: string | undefined = 'sha256:old'
    const inner = (cache as unknown as {options: {inner: CountingEvaluator}}).options.inner
    const evaluate = inner.evaluate.bind(inner)
    inner.evaluate = async (request) => ({...(await evaluate(request)), evaluator: 'pod', served: {runtime: 'pod' as const, pod: 'p', ...(podDigest ? {digest: podDigest} : {})}})
    // The tag resolves to sha256:new, but the pod that answered still runs sha256:old: not stored.
    resolver.identities.set('img:v1', 'pod:sha256:new')
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    expect(inner.calls).to.equal(2)
    // A pod whose digest is unknown (made by an older fnr) never fills the cache either.
    podDigest = undefined
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    // The pod of the key's digest: stored, then a hit.
    podDigest = 'sha256:new'
    await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    const hit = await cache.evaluate({image: 'img:v1', resourceList: rl('a')})
    expect(inner.calls).to.equal(4)
    expect(hit.cached).to.equal(true)
    const m = await counters()
    expect(m.value('fnr_response_cache_skipped_total', {reason: 'digest-mismatch'})).to.equal(3)
    expect(m.value('fnr_response_cache_lookups_total', {result: 'hit'})).to.equal(1)
  })

  it('the byte bound evicts least recently used entries; an entry larger than the bound is not stored', async () => {
    const {inner, cache} = build({maxBytes: 3 * 10_000})
    const big = (c: string): Buffer => Buffer.alloc(9000, c)
    for (const c of 'abc') await cache.evaluate({image: 'img:v1', resourceList: big(c)})
    expect(cache.store.size).to.equal(3)
    expect(cache.store.bytes).to.be.at.most(30_000)
    await cache.evaluate({image: 'img:v1', resourceList: big('d')}) // evicts a
    expect(cache.store.size).to.equal(3)
    await cache.evaluate({image: 'img:v1', resourceList: big('a')}) // miss: evicted
    expect(inner.calls).to.equal(5)
    await cache.evaluate({image: 'img:v1', resourceList: Buffer.alloc(40_000, 'z')})
    await cache.evaluate({image: 'img:v1', resourceList: Buffer.alloc(40_000, 'z')})
    expect(inner.calls).to.equal(7)
    const m = await counters()
    expect(m.value('fnr_response_cache_lookups_total', {result: 'miss', reason: 'evicted'})).to.equal(1)
    expect(m.value('fnr_response_cache_evictions_total', {reason: 'evict'})).to.be.at.least(2)
    expect(m.value('fnr_response_cache_skipped_total', {reason: 'too-large'})).to.equal(2)
    expect(m.value('fnr_response_cache_bytes')).to.equal(cache.store.bytes)
    expect(m.value('fnr_response_cache_entries')).to.equal(3)
  })

  it('the entry bound evicts least recently used entries', async () => {
    const {inner, cache} = build({maxEntries: 2})
    for (const t of ['a', 'b', 'a', 'c', 'a', 'b']) await cache.evaluate({image: 'img:v1', resourceList: rl(t)})
    // a, b stored; a hit (a most recent); c evicts b; a hit; b misses (evicted)
    expect(inner.calls).to.equal(4)
    expect(cache.store.size).to.equal(2)
  })

  it('the per-image switch: false never caches, true caches while --cache-ttl is 0', async () => {
    const config = PodCacheConfig.parse('- name: on:v1\n  responseCache: true\n- name: off:v1\n  responseCache: false\n- name: short:v1\n  responseCache: 2s\n', 'test')
    const {inner, cache} = build({ttlMs: 0}, (image) => config.responseCacheFor(image))
    for (const image of ['on:v1', 'on:v1', 'off:v1', 'off:v1', 'other:v1', 'other:v1', 'short:v1', 'short:v1']) await cache.evaluate({image, resourceList: rl('a')})
    expect(inner.calls).to.equal(6)
    clock += 2001
    await cache.evaluate({image: 'short:v1', resourceList: rl('a')})
    await cache.evaluate({image: 'on:v1', resourceList: rl('a')})
    expect(inner.calls).to.equal(7)
  })

  it('keys use the sha256 of the request bytes (no YAML parsing: equivalent YAML is another key)', async () => {
    const {inner, cache} = build()
    await cache.evaluate({image: 'img:v1', resourceList: Buffer.from('items: []\n')})
    await cache.evaluate({image: 'img:v1', resourceList: Buffer.from('items:  []\n')})
    expect(inner.calls).to.equal(2)
    expect(sha256(Buffer.from('abc'))).to.equal('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
    expect(ResponseStore.key('pod:sha256:1', 'img', 'h')).to.equal('pod:sha256:1\nimg\nh')
  })
})

describe('response cache: exec binary identity', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('changes when the binary is rewritten or its times change, and not otherwise', async () => {
    const dir = await temp.make()
    const file = path.join(dir, 'fn')
    await writeFile(file, '#!/bin/sh\ncat\n')
    const key = (f: string): string => identityKey(binaryIdentity(f))
    const a = key(file)
    expect(key(file)).to.equal(a)
    await writeFile(file, '#!/bin/sh\nexec cat\n') // rewritten in place (same inode)
    const b = key(file)
    expect(b).not.to.equal(a)
    await utimes(file, new Date(0), new Date(0))
    expect(key(file)).not.to.equal(b)
    expect(a.startsWith(`exec:${file}:`)).to.equal(true)
  })
})

describe('pod-cache-config: the responseCache field', () => {
  it('parses true, false and durations, keeps Porch\'s format valid, and rejects other values', () => {
    const porch = PodCacheConfig.parse('- name: a:v1\n  timeToLive: 30m\n  maxWaitlistLength: 2\n', 'porch')
    expect(porch.responseCacheFor('a:v1')).to.equal(undefined)
    expect(porch.enablesResponseCache()).to.equal(false)
    const c = PodCacheConfig.parse('- name: a:v1\n  responseCache: true\n- name: b:v1\n  responseCache: false\n- name: c:v1\n  responseCache: 90s\n', 'x')
    expect([c.responseCacheFor('a:v1'), c.responseCacheFor('b:v1'), c.responseCacheFor('c:v1')]).to.deep.equal([true, false, 90_000])
    expect(c.enablesResponseCache()).to.equal(true)
    expect(c.settingsFor('a:v1', {ttlMs: 1, maxWaitlistLength: 2, maxParallelPods: 3})).to.deep.equal({ttlMs: 1, maxWaitlistLength: 2, maxParallelPods: 3})
    expect(() => PodCacheConfig.parse('- name: a:v1\n  responseCache: sometimes\n', 'x')).to.throw(/responseCache: Invalid value: "sometimes": must be a duration like 30m/)
  })
})
