/**
 * Getting an image into the image cache with fnr's own registry client (docs/container-runtime.md,
 * "Pulls"): the reference is resolved to the manifest of the host's platform, every layer is
 * downloaded (its digest checked) and unpacked in order into a new root filesystem, and the blob
 * is dropped once unpacked (the cache keeps root filesystems, not blobs).
 *
 * The image pull policy is kpt's: IfNotPresent (the default) uses the digest the reference
 * resolved to on its last pull without asking the registry; Always asks the registry for the
 * reference's digest every run (a known digest is not downloaded again); Never uses the cache only.
 */
import path from 'node:path'

import {FnrError} from '../errors.js'
import {formatPlatform, requireFunctionCommand, type Platform} from '../registry/image-config.js'
import type {PullPlan, RegistryClient} from '../registry/client.js'
import {parseImageReference} from '../registry/reference.js'
import type {CachedImage, ImageCache} from './image-cache.js'
import {unpackLayer} from './layers.js'

export type PullPolicy = 'Always' | 'IfNotPresent' | 'Never'

export interface EnsureImageOptions {
  policy: PullPolicy
  platform: Platform
  signal?: AbortSignal
  /** How many layers download at once (default 3). */
  parallel?: number
}

export interface EnsuredImage {
  image: CachedImage
  /** Set when this call downloaded the image: bytes fetched and how long the pull took. */
  pulled?: {bytes: number; layers: number; ms: number}
}

/** kpt's spelling of a policy (any case) to fnr's; undefined stays undefined (the default). */
export function normalisePullPolicy(raw: string | undefined): PullPolicy | undefined {
  if (raw === undefined) return undefined
  const found = (['Always', 'IfNotPresent', 'Never'] as const).find((p) => p.toLowerCase() === raw.toLowerCase())
  if (found === undefined) throw new FnrError('Usage', `--image-pull-policy: ${JSON.stringify(raw)} is not Always, IfNotPresent or Never`)
  return found
}

/** The image in the cache, pulled first when the policy says so. */
export async function ensureImage(client: RegistryClient, cache: ImageCache, image: string, options: EnsureImageOptions): Promise<EnsuredImage> {
  const ref = parseImageReference(image)
  const reference = ref.toString()
  const platform = formatPlatform(options.platform)
  if (options.policy !== 'Always') {
    const known = await cache.resolvedDigest(reference, platform)
    const cached = known === undefined ? undefined : await cache.get(known)
    if (cached !== undefined) {
      requireFunctionCommand(image, cached.config.entrypoint, cached.config.cmd)
      return {image: cached}
    }
    if (options.policy === 'Never') {
      throw new FnrError('NotFound', `image "${image}" is not in fnr's image cache (${cache.dir}) and --image-pull-policy is Never: run once with IfNotPresent or Always to pull it`)
    }
  }
  let plan: PullPlan
  try {
    plan = await client.planPull(ref, {platform: options.platform, signal: options.signal})
  } catch (err) {
    throw pullError(image, err)
  }
  requireFunctionCommand(image, plan.config.entrypoint, plan.config.cmd)
  const cached = await cache.get(plan.meta.digest)
  if (cached !== undefined) {
    await cache.rememberDigest(reference, platform, plan.meta.digest)
    return {image: cached}
  }
  const started = performance.now()
  let bytes = 0
  const added = await cache.add({digest: plan.meta.digest, reference, platform: formatPlatform(plan.meta.platform), config: plan.config}, async (rootfs, work) => {
    const downloads = startDownloads(client, plan, work, options)
    let written = 0
    try {
      for (const [i, layer] of plan.layers.entries()) {
        const file = await downloads[i]!
        bytes += layer.size ?? 0
        const stats = await unpackLayer(rootfs, file, {label: `layer ${layer.digest} of image "${image}"`, maxBytes: cache.maxBytes, writtenBefore: written})
        written += stats.bytes
      }
    } finally {
      // A failed layer leaves the others' downloads to finish (or fail) before the work directory goes.
      await Promise.allSettled(downloads)
    }
    return written
  }).catch((err: unknown) => {
    throw pullError(image, err)
  })
  await cache.rememberDigest(reference, platform, plan.meta.digest)
  await cache.evict()
  return {image: added, pulled: {bytes, layers: plan.layers.length, ms: performance.now() - started}}
}

/** Starts every layer's download, at most `parallel` at a time; each promise gives its file. */
function startDownloads(client: RegistryClient, plan: PullPlan, work: string, options: EnsureImageOptions): Array<Promise<string>> {
  const ref = parseImageReference(plan.meta.pinnedReference)
  const limit = Math.max(1, options.parallel ?? 3)
  let running = 0
  const waiting: Array<() => void> = []
  const slot = async (): Promise<void> => {
    if (running < limit) {
      running++
      return
    }
    await new Promise<void>((resolve) => waiting.push(resolve))
  }
  const release = (): void => {
    const next = waiting.shift()
    if (next !== undefined) next()
    else running--
  }
  const downloads = plan.layers.map(async (layer, i) => {
    await slot()
    try {
      const file = path.join(work, `layer-${i}`)
      await client.downloadBlob(ref, layer.digest, file, {signal: options.signal, size: layer.size})
      return file
    } finally {
      release()
    }
  })
  // A download may fail before its layer's turn comes: the error is read then, not lost now.
  for (const d of downloads) d.catch(() => {})
  return downloads
}

/** A pull's failure, named as one, with the registry's reason and the kind it had. */
function pullError(image: string, err: unknown): FnrError {
  if (!(err instanceof FnrError)) return new FnrError('Internal', `cannot pull image "${image}": ${(err as Error).message}`, {cause: err, details: {pull: true}})
  if (err.details.pull === true) return err
  return new FnrError(err.kind, `cannot pull image "${image}": ${err.message}`, {cause: err, details: {...err.details, pull: true}})
}
