/**
 * Wires the response cache into `fnr serve`: decides whether it is on (--cache-ttl > 0, or an
 * image switched on in --pod-cache-config) and, only then, loads the cache module (lru-cache) and
 * wraps the evaluator chain in a CachingEvaluator.
 */
import {PodCacheConfig} from '../config/pod-cache-config.js'
import type {Evaluator} from '../evaluators/evaluator.js'
import {FnrError} from '../errors.js'
import type {Logger} from '../log.js'
import type {ResponseCacheSettings} from './response-cache.js'

export interface ResponseCacheSetup {
  settings: ResponseCacheSettings
  /** --pod-cache-config (per-image switches); '' for none. */
  cacheConfigPath: string
  /** True when the pod runtime is on (it reports a broken --pod-cache-config itself). */
  podRuntime: boolean
  /** The exec runtime, to identify its images by binary. */
  exec?: {binaryFor(image: string): string | undefined}
  /** The pod runtime's image metadata, to identify its images by digest. */
  podMetadata?: {describe(image: string, options?: {signal?: AbortSignal}): Promise<{digest?: string}>}
  /** The pod cache config is read as `fnr serve` reads it unless --strict-config (warnings, no error). */
  lenient?: boolean
}

export function validateResponseCacheSettings(s: ResponseCacheSettings): void {
  if (s.ttlMs < 0) throw new FnrError('Usage', '--cache-ttl must be 0 (off) or a positive duration')
  if (s.maxTtlMs <= 0) throw new FnrError('Usage', '--cache-max-ttl must be a positive duration')
  if (!(s.maxBytes >= 1024)) throw new FnrError('Usage', '--cache-max-bytes must be at least 1024')
  if (!(s.maxEntries >= 1)) throw new FnrError('Usage', '--cache-max-entries must be at least 1')
}

/** The evaluator to serve: `inner` itself when the cache is off, else a caching decorator around it. */
export async function withResponseCache(inner: Evaluator, setup: ResponseCacheSetup, logger: Logger): Promise<Evaluator> {
  const {settings} = setup
  validateResponseCacheSettings(settings)
  let config = PodCacheConfig.empty()
  try {
    config = (await PodCacheConfig.load(setup.cacheConfigPath, {lenient: setup.lenient === true})).config
  } catch (err) {
    if (setup.podRuntime) throw err
    logger.warn('response cache: ignoring the per-image switches of an unreadable pod cache config', {error: (err as Error).message})
  }
  if (settings.ttlMs <= 0 && !config.enablesResponseCache()) return inner
  const {CachingEvaluator, serveIdentityResolver} = await import('./response-cache.js')
  const hasPolicy = config.entries.some((e) => e.responseCache !== undefined)
  const cache = new CachingEvaluator({
    inner,
    settings,
    resolver: serveIdentityResolver(setup.exec, setup.podMetadata),
    policy: hasPolicy ? (image) => config.responseCacheFor(image) : undefined,
    logger,
  })
  logger.info('response cache on', {
    ttlMs: settings.ttlMs,
    maxTtlMs: settings.maxTtlMs,
    maxBytes: settings.maxBytes,
    maxEntries: settings.maxEntries,
    perImage: config.entries.filter((e) => e.responseCache !== undefined).length,
  })
  return cache
}
