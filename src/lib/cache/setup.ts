/**
 * Wires the response cache into `fnr serve`: decides, once, whether it is on (--cache-ttl > 0, or
 * an image switched on in --pod-cache-config) and, only then, loads the cache module (lru-cache)
 * and wraps the evaluator chain in a CachingEvaluator. The pod cache config is read once by
 * serve (config/serve-config.ts) and handed here.
 */
import type {PodCacheConfig} from '../config/pod-cache-config.js'
import type {Evaluator} from '../evaluator.js'
import {FnrError} from '../errors.js'
import type {Logger} from '../telemetry/log.js'
import {NO_TELEMETRY, type Telemetry} from '../telemetry/telemetry.js'
import type {ResponseCacheSettings} from './response-cache.js'

/** The response cache as `fnr serve` runs it: the flags and the per-image switches of the pod cache config. */
export interface ResponseCacheSetup {
  settings: ResponseCacheSettings
  config: PodCacheConfig
}

export function validateResponseCacheSettings(s: ResponseCacheSettings): void {
  if (s.ttlMs < 0) throw new FnrError('Usage', '--cache-ttl must be 0 (off) or a positive duration')
  if (s.maxTtlMs <= 0) throw new FnrError('Usage', '--cache-max-ttl must be a positive duration')
  if (!(s.maxBytes >= 1024)) throw new FnrError('Usage', '--cache-max-bytes must be at least 1024')
  if (!(s.maxEntries >= 1)) throw new FnrError('Usage', '--cache-max-entries must be at least 1')
}

/**
 * The one decision whether the response cache is on: --cache-ttl > 0, or a per-image switch in the
 * pod cache config. Undefined (off) otherwise; the pod runtime pins digests (auto) by it too.
 */
export function responseCacheSetup(settings: ResponseCacheSettings | undefined, config: PodCacheConfig): ResponseCacheSetup | undefined {
  if (!settings) return undefined
  return settings.ttlMs > 0 || config.enablesResponseCache() ? {settings, config} : undefined
}

/**
 * A caching decorator around `inner`, keyed by what inner.identify() says would serve each image,
 * reporting to the server's telemetry.
 */
export async function withResponseCache(inner: Evaluator, {settings, config}: ResponseCacheSetup, logger: Logger, telemetry: Telemetry = NO_TELEMETRY): Promise<Evaluator> {
  validateResponseCacheSettings(settings)
  const {CachingEvaluator} = await import('./response-cache.js')
  const perImage = config.entries.filter((e) => e.responseCache !== undefined).length
  const cache = new CachingEvaluator({
    inner,
    settings,
    policy: perImage > 0 ? (image) => config.responseCacheFor(image) : undefined,
    logger,
    telemetry,
  })
  logger.info('response cache on', {
    ttlMs: settings.ttlMs,
    maxTtlMs: settings.maxTtlMs,
    maxBytes: settings.maxBytes,
    maxEntries: settings.maxEntries,
    perImage,
  })
  return cache
}
