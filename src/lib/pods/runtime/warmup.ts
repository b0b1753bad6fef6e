/**
 * Warm-up: start one pod for every image of --pod-cache-config (upstream does this at startup,
 * blocking; fnr does it in the background and reports NOT_SERVING until it has finished). A
 * failing image is logged and does not stop the others.
 */
import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {PodCache} from './cache.js'

export interface WarmUpResult {
  ready: string[]
  failed: Array<{image: string; error: string}>
  ms: number
}

export async function warmUpPods(cache: Pick<PodCache, 'warm'>, images: readonly string[], options: {concurrency?: number; logger?: Logger} = {}): Promise<WarmUpResult> {
  const logger = options.logger ?? silentLogger
  const started = Date.now()
  const queue = [...images]
  const result: WarmUpResult = {ready: [], failed: [], ms: 0}
  const worker = async (): Promise<void> => {
    for (let image = queue.shift(); image !== undefined; image = queue.shift()) {
      try {
        await cache.warm(image)
        result.ready.push(image)
        logger.info('warmed up a function pod', {image})
      } catch (err) {
        result.failed.push({image, error: (err as Error).message})
        logger.warn('cannot warm up a function pod', {image, error: (err as Error).message})
      }
    }
  }
  await Promise.all(Array.from({length: Math.max(1, Math.min(options.concurrency ?? 8, images.length))}, worker))
  result.ms = Date.now() - started
  if (images.length > 0) logger.info('pod cache warm-up finished', {ready: result.ready.length, failed: result.failed.length, ms: result.ms})
  return result
}
