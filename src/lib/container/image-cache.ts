/**
 * fnr's local image cache (docs/container-runtime.md, "The image cache"): unpacked root
 * filesystems, content-addressed by the digest of their image manifest, and the digest each
 * reference (tag or digest, per platform) resolved to when it was last pulled.
 *
 *   <dir>/images/sha256-<hex>/rootfs/     the image's files, read-only to functions
 *   <dir>/images/sha256-<hex>/image.json  its run config, platform, size; its mtime is its last use
 *   <dir>/refs/<sha256 of reference|platform>.json
 *   <dir>/tmp/                            pulls under way (renamed into images/ when complete)
 *
 * An image appears at once and whole (a rename), so a concurrent fnr sees it complete or not at
 * all. The cache holds at most maxBytes of file content: after a pull, the images used least
 * recently are removed until it fits, never one in use: each process using an image leaves a
 * marker named by its pid in the image's directory (users/<pid>) until it releases it, and an
 * image with a marker of a live process is kept.
 */
import {createHash, randomBytes} from 'node:crypto'
import {chmod, mkdir, readFile, readdir, rename, rm, stat, unlink, utimes, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {FnrError} from '../errors.js'
import type {ImageRunConfig} from '../registry/client.js'

/** The cache's size limit when FNR_IMAGE_CACHE_SIZE does not say (4 GiB). */
export const DEFAULT_CACHE_BYTES = 4 * 1024 ** 3

export interface CachedImage {
  /** Digest of the platform's image manifest. */
  digest: string
  /** The reference it was first pulled as (for messages). */
  reference: string
  platform: string
  config: ImageRunConfig
  /** Bytes of file content. */
  size: number
  /** The unpacked root filesystem. */
  rootfs: string
}

interface ImageRecord {
  digest: string
  reference: string
  platform: string
  config: ImageRunConfig
  size: number
  pulledAt: string
}

/** The cache directory: $FNR_IMAGE_CACHE_DIR, else $XDG_CACHE_HOME/fnr/images, else ~/.cache/fnr/images. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.FNR_IMAGE_CACHE_DIR) return path.resolve(env.FNR_IMAGE_CACHE_DIR)
  const base = env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : path.join(os.homedir(), '.cache')
  return path.join(base, 'fnr', 'images')
}

const UNITS: Record<string, number> = {'': 1, b: 1, k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9, t: 1e12, tb: 1e12, ki: 1024, kib: 1024, mi: 1024 ** 2, mib: 1024 ** 2, gi: 1024 ** 3, gib: 1024 ** 3, ti: 1024 ** 4, tib: 1024 ** 4}

/** A size such as "4GiB", "500M", "1.5G" or "1048576" (bytes); FnrError('Config') otherwise. */
export function parseSize(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text)
  const factor = m === null ? undefined : UNITS[m[2]!.toLowerCase()]
  if (m === null || factor === undefined) throw new FnrError('Config', `${what}: ${JSON.stringify(text)} is not a size (e.g. 4GiB, 500MB, 1048576)`)
  return Math.floor(Number(m[1]) * factor)
}

/** The cache's size limit: FNR_IMAGE_CACHE_SIZE, else DEFAULT_CACHE_BYTES. */
export function cacheLimit(env: NodeJS.ProcessEnv = process.env): number {
  return env.FNR_IMAGE_CACHE_SIZE ? parseSize(env.FNR_IMAGE_CACHE_SIZE, 'FNR_IMAGE_CACHE_SIZE') : DEFAULT_CACHE_BYTES
}

function dirName(digest: string): string {
  if (!/^sha(256|512):[a-f0-9]+$/.test(digest)) throw new FnrError('Internal', `not a digest: ${digest}`)
  return digest.replace(':', '-')
}

export class ImageCache {
  /** Digests this process uses: never evicted by it. */
  private readonly inUse = new Set<string>()

  constructor(
    readonly dir: string,
    readonly maxBytes: number = DEFAULT_CACHE_BYTES,
  ) {}

  private imageDir(digest: string): string {
    return path.join(this.dir, 'images', dirName(digest))
  }

  private refFile(reference: string, platform: string): string {
    return path.join(this.dir, 'refs', `${createHash('sha256').update(`${reference}|${platform}`).digest('hex')}.json`)
  }

  /** The manifest digest a reference resolved to on its last pull for this platform, if any. */
  async resolvedDigest(reference: string, platform: string): Promise<string | undefined> {
    try {
      const doc = JSON.parse(await readFile(this.refFile(reference, platform), 'utf8')) as {reference?: string; digest?: string}
      return doc.reference === reference && typeof doc.digest === 'string' ? doc.digest : undefined
    } catch {
      return undefined
    }
  }

  async rememberDigest(reference: string, platform: string, digest: string): Promise<void> {
    await mkdir(path.join(this.dir, 'refs'), {recursive: true})
    await writeAtomically(this.refFile(reference, platform), JSON.stringify({reference, platform, digest, at: new Date().toISOString()}))
  }

  /** The image, when cached whole; marks it used now (and by this process). */
  async get(digest: string): Promise<CachedImage | undefined> {
    const dir = this.imageDir(digest)
    let record: ImageRecord
    try {
      record = JSON.parse(await readFile(path.join(dir, 'image.json'), 'utf8')) as ImageRecord
      await stat(path.join(dir, 'rootfs'))
    } catch {
      return undefined
    }
    if (record.digest !== digest) return undefined
    if (!this.inUse.has(digest)) {
      await mkdir(path.join(dir, 'users'), {recursive: true})
      await writeFile(path.join(dir, 'users', String(process.pid)), '')
      this.inUse.add(digest)
    }
    const now = new Date()
    await utimes(path.join(dir, 'image.json'), now, now).catch(() => {})
    return {digest, reference: record.reference, platform: record.platform, config: record.config, size: record.size, rootfs: path.join(dir, 'rootfs')}
  }

  /**
   * Adds an image: `fill` unpacks it into the root filesystem it is given (and may put scratch
   * files into the work directory, removed afterwards) and returns the bytes written. When another
   * process added the same image meanwhile, that copy is kept and this one dropped.
   */
  async add(
    image: Omit<ImageRecord, 'size' | 'pulledAt'>,
    fill: (rootfs: string, work: string) => Promise<number>,
  ): Promise<CachedImage> {
    const tmpRoot = path.join(this.dir, 'tmp')
    await mkdir(tmpRoot, {recursive: true})
    await mkdir(path.join(this.dir, 'images'), {recursive: true})
    const work = path.join(tmpRoot, `${dirName(image.digest)}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const staged = path.join(work, 'image')
    const rootfs = path.join(staged, 'rootfs')
    try {
      await mkdir(rootfs, {recursive: true})
      const size = await fill(rootfs, work)
      // The container's "/": everyone may enter it, whatever mkdir's mode was.
      await chmod(rootfs, 0o755)
      const record: ImageRecord = {...image, size, pulledAt: new Date().toISOString()}
      await writeFile(path.join(staged, 'image.json'), JSON.stringify(record))
      try {
        await rename(staged, this.imageDir(image.digest))
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err
      }
    } finally {
      await rm(work, {recursive: true, force: true})
    }
    const added = await this.get(image.digest)
    if (added === undefined) throw new FnrError('Internal', `image ${image.digest} was unpacked into ${this.dir} but is not there`)
    return added
  }

  /** Drops this process's use markers (its images may be evicted by others from now on). */
  async release(): Promise<void> {
    for (const digest of this.inUse) await unlink(path.join(this.imageDir(digest), 'users', String(process.pid))).catch(() => {})
    this.inUse.clear()
  }

  /** Whether a live process other than this one has marked the image as in use. */
  private async usedElsewhere(digest: string): Promise<boolean> {
    const pids = await readdir(path.join(this.imageDir(digest), 'users')).catch(() => [] as string[])
    return pids.some((p) => /^\d+$/.test(p) && Number(p) !== process.pid && processAlive(Number(p)))
  }

  /** Every cached image: digest, size and last use (ms since the epoch). */
  async list(): Promise<Array<{digest: string; size: number; lastUsed: number}>> {
    const out: Array<{digest: string; size: number; lastUsed: number}> = []
    const names = await readdir(path.join(this.dir, 'images')).catch(() => [] as string[])
    for (const name of names) {
      const file = path.join(this.dir, 'images', name, 'image.json')
      try {
        const [text, st] = await Promise.all([readFile(file, 'utf8'), stat(file)])
        const record = JSON.parse(text) as ImageRecord
        out.push({digest: record.digest, size: record.size, lastUsed: st.mtimeMs})
      } catch {
        // Half removed, or not an image: not counted.
      }
    }
    return out
  }

  /**
   * Removes the images used least recently until the cache holds at most maxBytes, never one this
   * process uses; returns the digests removed.
   */
  async evict(): Promise<string[]> {
    const images = (await this.list()).sort((a, b) => a.lastUsed - b.lastUsed)
    let total = images.reduce((sum, i) => sum + i.size, 0)
    const removed: string[] = []
    for (const image of images) {
      if (total <= this.maxBytes) break
      if (this.inUse.has(image.digest) || (await this.usedElsewhere(image.digest))) continue
      // Renamed away first: another fnr never sees a half-removed image.
      const gone = path.join(this.dir, 'tmp', `evicted-${dirName(image.digest)}-${randomBytes(4).toString('hex')}`)
      try {
        await mkdir(path.join(this.dir, 'tmp'), {recursive: true})
        await rename(this.imageDir(image.digest), gone)
      } catch {
        continue
      }
      await rm(gone, {recursive: true, force: true})
      total -= image.size
      removed.push(image.digest)
    }
    return removed
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists, as another user's process.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`
  await writeFile(tmp, text)
  await rename(tmp, file)
}
