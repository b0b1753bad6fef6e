/**
 * The response cache (opt-in): renders call the same function on the same package again and
 * again, so a successful response is kept and returned for the same function and the same
 * request bytes, without running the function (model: Crossplane's function response cache).
 *
 * - Key: the image's resolved identity + the image name + the sha256 of the request's
 *   resource_list bytes (the bytes as received; no YAML is parsed).
 *   Identity (Evaluator.identify, declared by the evaluator that would serve the call; the multi
 *   evaluator asks the one its order picks): for the exec runtime the binary the image maps to, by
 *   path, device, inode, size and modification/change times (a replaced or rewritten binary is a
 *   new identity); for the pod runtime the image's digest from the registry client, never the tag
 *   (a tag that moved resolves to another digest and misses). An image with no known identity
 *   (no digest) is never cached.
 * - Stored: for the pod runtime, only a response whose serving pod was made for the key's digest
 *   (the pod evaluator reports the pod's fnr.dev/image-digest): a pod of another digest, or of an
 *   unknown one, never fills the cache (skip reason digest-mismatch). The lookup that resolved the
 *   digest also retires the image's pods of other digests (PodCache.noteDigest).
 * - Stored: successful responses only (the function exited 0), including those whose function
 *   reported results, warnings or error-severity results (exit 0 is a success for kpt and Porch,
 *   and the function is a deterministic transformation of its input). The stored response is
 *   resource_list, log, the evaluator name and those results, so the gRPC response and its
 *   trailers (fnr-evaluator, fnr-failure-bin) are byte-identical to the original.
 * - Bounded: `maxBytes` (resource_list + log + key per entry) and `maxEntries` (LRU), TTL per
 *   entry clamped by `maxTtlMs`; expired entries are purged every minute.
 * - Metrics: hits, misses with a reason (absent, expired, evicted, input-changed, image-changed),
 *   skips (no-identity, identity-error, failed, too-large, digest-mismatch), evictions, entries and bytes.
 */
import {createHash} from 'node:crypto'

import {LRUCache} from 'lru-cache'

import {identityKey, type EvaluationRequest, type EvaluationResponse, type Evaluator, type ImageIdentity} from '../evaluator.js'
import {silentLogger, type Logger} from '../telemetry/log.js'
import type {Metrics, ResponseCacheMissReason} from '../telemetry/metrics.js'
import {metricsOf, NO_TELEMETRY, type Telemetry} from '../telemetry/telemetry.js'

export interface ResponseCacheSettings {
  /** --cache-ttl: TTL of every image's responses; 0 caches only images switched on per image. */
  ttlMs: number
  /** --cache-max-ttl: no entry lives longer than this. */
  maxTtlMs: number
  /** --cache-max-bytes: total size bound. */
  maxBytes: number
  /** --cache-max-entries: entry count bound. */
  maxEntries: number
}

export const DEFAULT_RESPONSE_CACHE: ResponseCacheSettings = {ttlMs: 0, maxTtlMs: 60 * 60_000, maxBytes: 256 * 1024 * 1024, maxEntries: 10_000}

/** TTL of an image switched on per image (`responseCache: true`) while --cache-ttl is 0. */
export const DEFAULT_PER_IMAGE_TTL_MS = 5 * 60_000

/** How often expired entries are dropped. */
const PURGE_INTERVAL_MS = 60_000

/** Bytes counted per entry besides its payload (key, object overhead). */
const ENTRY_OVERHEAD = 256

/**
 * The per-image switch (pod-cache-config `responseCache`): false never caches the image, true
 * caches it with --cache-ttl (or DEFAULT_PER_IMAGE_TTL_MS when that is 0), a number is its TTL
 * in ms (0: never), undefined follows --cache-ttl.
 */
export type ImageCachePolicy = (image: string) => boolean | number | undefined

/** The TTL for an image (0: not cached). */
export function ttlFor(settings: ResponseCacheSettings, policy: ImageCachePolicy | undefined, image: string): number {
  const p = policy?.(image)
  let ttl: number
  if (p === false) return 0
  if (typeof p === 'number') ttl = p
  else if (p === true) ttl = settings.ttlMs > 0 ? settings.ttlMs : DEFAULT_PER_IMAGE_TTL_MS
  else ttl = settings.ttlMs
  return ttl > 0 ? Math.min(ttl, settings.maxTtlMs) : 0
}

interface Entry {
  resourceList: Buffer
  log: Buffer
  evaluator: string
  errorResults?: EvaluationResponse['errorResults']
  size: number
}

export type LookupResult = {hit: true; response: EvaluationResponse} | {hit: false; reason: ResponseCacheMissReason}

/** The store: bounded LRU with per-entry TTL, and what it needs to say why a lookup missed. */
export class ResponseStore {
  private readonly entries: LRUCache<string, Entry>
  /** Keys recently dropped, and why (to tell "evicted" and "expired" from "absent"). */
  private readonly dropped: LRUCache<string, 'evicted' | 'expired'>
  /** The identity each image last had (to tell "image-changed" from "input-changed"). */
  private readonly lastIdentity: LRUCache<string, string>
  private timer: NodeJS.Timeout | undefined

  constructor(
    readonly settings: ResponseCacheSettings,
    /** telemetry: where evictions are counted (the server's); default none. */
    options: {now?: () => number; purgeIntervalMs?: number; telemetry?: Telemetry} = {},
  ) {
    const metrics = metricsOf(options.telemetry)
    const perf = options.now ? {now: options.now} : undefined
    this.entries = new LRUCache<string, Entry>({
      max: Math.max(1, settings.maxEntries),
      maxSize: Math.max(1, settings.maxBytes),
      sizeCalculation: (e) => e.size,
      ttl: settings.maxTtlMs,
      allowStale: false,
      updateAgeOnGet: false,
      ...(perf ? {perf, ttlResolution: 0} : {}),
      dispose: (_value, key, reason) => {
        if (reason === 'evict' || reason === 'expire') {
          this.dropped.set(key, reason === 'evict' ? 'evicted' : 'expired')
          metrics.responseCacheEviction(reason)
        }
      },
    })
    this.dropped = new LRUCache({max: Math.max(1, settings.maxEntries)})
    this.lastIdentity = new LRUCache({max: Math.max(1, Math.min(settings.maxEntries, 10_000))})
    const interval = options.purgeIntervalMs ?? PURGE_INTERVAL_MS
    if (interval > 0) {
      this.timer = setInterval(() => this.entries.purgeStale(), interval)
      this.timer.unref()
    }
  }

  static key(identity: string, image: string, inputHash: string): string {
    return `${identity}\n${image}\n${inputHash}`
  }

  lookup(identity: string, image: string, inputHash: string): LookupResult {
    const key = ResponseStore.key(identity, image, inputHash)
    const status: LRUCache.Status<string, Entry> = {}
    const entry = this.entries.get(key, {status})
    const previous = this.lastIdentity.get(image)
    if (previous !== identity) this.lastIdentity.set(image, identity)
    if (entry) return {hit: true, response: responseOf(entry)}
    let reason: ResponseCacheMissReason
    const dropped = this.dropped.get(key)
    if (status.get === 'stale' || dropped === 'expired') reason = 'expired'
    else if (dropped === 'evicted') reason = 'evicted'
    else if (previous === undefined) reason = 'absent'
    else reason = previous === identity ? 'input-changed' : 'image-changed'
    return {hit: false, reason}
  }

  /** Stores a successful response (copies of its bytes); false when it is larger than the store. */
  store(identity: string, image: string, inputHash: string, response: EvaluationResponse, ttlMs: number): boolean {
    const key = ResponseStore.key(identity, image, inputHash)
    const size = response.resourceList.length + response.log.length + key.length + ENTRY_OVERHEAD
    if (size > this.settings.maxBytes) return false
    const entry: Entry = {
      // Own compact copies: the function's output may be a view into a larger buffer.
      resourceList: Buffer.from(response.resourceList),
      log: Buffer.from(response.log),
      evaluator: response.evaluator,
      ...(response.errorResults ? {errorResults: response.errorResults} : {}),
      size,
    }
    this.dropped.delete(key)
    this.entries.set(key, entry, {ttl: Math.min(ttlMs, this.settings.maxTtlMs)})
    return true
  }

  get size(): number {
    return this.entries.size
  }

  get bytes(): number {
    return this.entries.calculatedSize
  }

  close(): void {
    clearInterval(this.timer)
    this.entries.clear()
  }
}

function responseOf(entry: Entry): EvaluationResponse {
  return {
    resourceList: entry.resourceList,
    log: entry.log,
    evaluator: entry.evaluator,
    ...(entry.errorResults ? {errorResults: entry.errorResults} : {}),
    cached: true,
  }
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

export interface CachingEvaluatorOptions {
  /** The evaluator chain; its identify() keys the entries (without it nothing is cached). */
  inner: Evaluator
  settings: ResponseCacheSettings
  policy?: ImageCachePolicy
  logger?: Logger
  /** Where hits, misses, skips, evictions and the size are reported (the server's); default none. */
  telemetry?: Telemetry
  /** Tests: the store's clock (ms) and purge interval. */
  now?: () => number
  purgeIntervalMs?: number
}

/** An Evaluator decorator: answers from the store when it can, stores what the inner evaluator returns. */
export class CachingEvaluator implements Evaluator {
  readonly name: string
  readonly store: ResponseStore
  private readonly logger: Logger
  private readonly metrics: Metrics

  constructor(private readonly options: CachingEvaluatorOptions) {
    this.name = options.inner.name
    this.logger = options.logger ?? silentLogger
    const telemetry = options.telemetry ?? NO_TELEMETRY
    this.metrics = telemetry.metrics
    this.store = new ResponseStore(options.settings, {now: options.now, purgeIntervalMs: options.purgeIntervalMs, telemetry})
    this.metrics.setResponseCacheSource(() => ({entries: this.store.size, bytes: this.store.bytes}))
  }

  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    const {inner, settings, policy} = this.options
    const ttl = ttlFor(settings, policy, request.image)
    if (ttl <= 0) return inner.evaluate(request)
    let identity: ImageIdentity | undefined
    try {
      identity = await inner.identify?.(request.image, request.signal)
    } catch (err) {
      // The evaluator reports the problem (unknown image, registry down) in its own words.
      this.logger.debug('response cache: cannot identify the image; not cached', {image: request.image, error: (err as Error).message})
      this.metrics.responseCacheSkip('identity-error')
      return inner.evaluate(request)
    }
    if (identity === undefined) {
      this.metrics.responseCacheSkip('no-identity')
      return inner.evaluate(request)
    }
    const key = identityKey(identity)
    const inputHash = sha256(request.resourceList)
    const found = this.store.lookup(key, request.image, inputHash)
    if (found.hit) {
      this.metrics.responseCacheHit()
      if (this.logger.enabled(4)) this.logger.debug('response cache hit', {image: request.image, bytes: found.response.resourceList.length})
      return found.response
    }
    this.metrics.responseCacheMiss(found.reason)
    let response: EvaluationResponse
    try {
      response = await inner.evaluate(request)
    } catch (err) {
      this.metrics.responseCacheSkip('failed')
      throw err
    }
    const servedDigest = response.served?.runtime === 'pod' ? response.served.digest : undefined
    if (identity.runtime === 'pod' && servedDigest !== identity.digest) {
      // The pod that answered was made for another (or an unknown) digest than the key's.
      this.metrics.responseCacheSkip('digest-mismatch')
      if (this.logger.enabled(4)) this.logger.debug('response cache: the serving pod was made for another digest; not stored', {image: request.image, key, pod: response.served?.pod, digest: servedDigest})
      return response
    }
    if (!this.store.store(key, request.image, inputHash, response, ttl)) this.metrics.responseCacheSkip('too-large')
    return response
  }

  async close(): Promise<void> {
    this.store.close()
    await this.options.inner.close()
  }
}
