/**
 * Unpacking an image's layers into a root filesystem, bottom layer first (docs/container-runtime.md,
 * "Images").
 *
 * - A layer is a tar archive, gzip- or zstd-compressed or plain (told by its first bytes, whatever
 *   the media type says); tar-stream reads it (ustar, pax and GNU long names).
 * - Whiteouts: `.wh.<name>` deletes <name> as the layers below left it; `.wh..wh..opq` empties its
 *   directory of what the layers below put there. Neither is written.
 * - Nothing is written outside the root: an entry (or a hard link's target) with a `..` component
 *   refuses the whole image; a symbolic link met on the way to an entry is followed inside the root
 *   only (an absolute target starts at the root, `..` stops there), as if the root were `/`; an
 *   entry's own final component is never followed (a link in its place is replaced, not written
 *   through).
 * - Regular files, directories, symbolic and hard links are made; device nodes and FIFOs are
 *   skipped (a function's /dev is the runtime's). Modes are kept; owners too when fnr runs as
 *   root, else every file is the user's and setuid/setgid bits are dropped.
 */
import {createReadStream, type Stats} from 'node:fs'
import {chmod, lchown, link, lstat, mkdir, open, readdir, readlink, rm, symlink} from 'node:fs/promises'
import path from 'node:path'
import type {Readable} from 'node:stream'
import zlib from 'node:zlib'

import {extract, type Header} from 'tar-stream'

import {FnrError} from '../errors.js'

export interface UnpackOptions {
  /** Names the layer in errors: the image and the layer's digest. */
  label: string
  /** The most bytes of file content all layers together may write (a decompression bomb stops here). */
  maxBytes?: number
  /** Bytes written by the layers before this one (for maxBytes). */
  writtenBefore?: number
}

export interface UnpackStats {
  /** Bytes of file content written. */
  bytes: number
  entries: number
  /** Entries skipped (device nodes, FIFOs). */
  skipped: number
}

const OPAQUE = '.wh..wh..opq'
const WHITEOUT = '.wh.'
const MAX_LINK_HOPS = 40
/** The entry types written; the others (device nodes, FIFOs) are skipped. */
const MADE_TYPES = new Set<Header['type']>(['directory', 'file', 'contiguous-file', 'symlink', 'link'])
const asRoot = process.getuid?.() === 0

/** The kind of compression a blob starts with. */
export function compressionOf(head: Buffer): 'gzip' | 'zstd' | 'none' {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip'
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd'
  return 'none'
}

async function readHead(file: string): Promise<Buffer> {
  const fh = await open(file, 'r')
  try {
    const buf = Buffer.alloc(4)
    const {bytesRead} = await fh.read(buf, 0, 4, 0)
    return buf.subarray(0, bytesRead)
  } finally {
    await fh.close()
  }
}

/** The path components of a tar entry name, or undefined when it leaves the root (`..`). */
export function entryComponents(name: string): string[] | undefined {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.')
  return parts.includes('..') ? undefined : parts
}

/**
 * The host path of `components` under `root`, following symbolic links met on the way as if `root`
 * were `/` (never above it); the last component itself is not followed. Missing directories are
 * not created here.
 */
export async function resolveInRoot(root: string, components: readonly string[]): Promise<string> {
  if (components.length === 0) return root
  const resolved: string[] = []
  const pending = components.slice(0, -1)
  let hops = 0
  while (pending.length > 0) {
    const c = pending.shift()!
    if (c === '' || c === '.') continue
    if (c === '..') {
      resolved.pop()
      continue
    }
    const host = path.join(root, ...resolved, c)
    const st = await lstat(host).catch(() => undefined)
    if (st?.isSymbolicLink()) {
      if (++hops > MAX_LINK_HOPS) throw new FnrError('FailedPrecondition', `too many levels of symbolic links under ${path.join('/', ...resolved, c)}`)
      const target = await readlink(host)
      if (target.startsWith('/')) resolved.length = 0
      pending.unshift(...target.split('/'))
      continue
    }
    resolved.push(c)
  }
  return path.join(root, ...resolved, components[components.length - 1]!)
}

async function removeAll(target: string): Promise<void> {
  await rm(target, {recursive: true, force: true})
}

function refuse(options: UnpackOptions, why: string): FnrError {
  return new FnrError('FailedPrecondition', `${options.label}: ${why}; the image is refused`)
}

/** A decompressed tar stream of a layer blob, its compression told by its first bytes. */
async function openLayer(file: string, options: UnpackOptions): Promise<{extractor: ReturnType<typeof extract>; source: Readable}> {
  const compression = compressionOf(await readHead(file))
  const source: Readable = createReadStream(file)
  let stream: Readable = source
  if (compression === 'gzip') stream = source.pipe(zlib.createGunzip())
  else if (compression === 'zstd') stream = source.pipe(zlib.createZstdDecompress())
  const extractor = extract()
  source.on('error', (err) => extractor.destroy(err))
  if (stream !== source) stream.on('error', (err) => extractor.destroy(new FnrError('FailedPrecondition', `${options.label}: the layer is not valid ${compression} data (${err.message})`)))
  stream.pipe(extractor as unknown as NodeJS.WritableStream)
  return {extractor, source}
}

/**
 * Unpacks one layer blob (a file, its digest already checked) into `root`, applying its whiteouts
 * to what the layers below left.
 */
export async function unpackLayer(root: string, file: string, options: UnpackOptions): Promise<UnpackStats> {
  const {extractor, source} = await openLayer(file, options)
  const unpacker = new LayerUnpacker(root, options)
  try {
    for await (const entry of extractor) await unpacker.entry(entry.header, entry as unknown as AsyncIterable<Buffer> & {resume(): void})
  } catch (err) {
    source.destroy()
    if (err instanceof FnrError) throw err
    throw new FnrError('FailedPrecondition', `${options.label}: cannot unpack the layer: ${(err as Error).message}`, {cause: err})
  }
  return unpacker.stats
}

type EntryStream = AsyncIterable<Buffer> & {resume(): void}

/** Writes one layer's entries, in archive order. */
class LayerUnpacker {
  readonly stats: UnpackStats = {bytes: 0, entries: 0, skipped: 0}
  /** What this layer made: its whiteouts delete only what the layers below made. */
  private readonly made = new Set<string>()
  private readonly limit: number
  private readonly before: number

  constructor(
    private readonly root: string,
    private readonly options: UnpackOptions,
  ) {
    this.limit = options.maxBytes ?? Number.POSITIVE_INFINITY
    this.before = options.writtenBefore ?? 0
  }

  async entry(header: Header, content: EntryStream): Promise<void> {
    const parts = entryComponents(header.name)
    if (parts === undefined) throw refuse(this.options, `entry ${JSON.stringify(header.name)} leaves the root filesystem`)
    this.stats.entries++
    const base = parts[parts.length - 1]
    if (base === undefined) return content.resume()
    if (base === OPAQUE) {
      await this.opaque(parts.slice(0, -1))
      return content.resume()
    }
    if (base.startsWith(WHITEOUT)) {
      const victim = [...parts.slice(0, -1), base.slice(WHITEOUT.length)]
      if (victim[victim.length - 1] !== '' && !this.made.has(victim.join('/'))) await removeAll(await resolveInRoot(this.root, victim))
      return content.resume()
    }
    if (!MADE_TYPES.has(header.type)) {
      // Device nodes and FIFOs: the runtime gives the function its own /dev.
      this.stats.skipped++
      return content.resume()
    }
    const target = await resolveInRoot(this.root, parts)
    await mkdir(path.dirname(target), {recursive: true})
    const existing = await lstat(target).catch(() => undefined)
    this.made.add(parts.join('/'))
    switch (header.type) {
      case 'directory':
        await this.directory(target, header, existing)
        return content.resume()
      case 'file':
      case 'contiguous-file':
        return this.file(target, header, existing, content)
      case 'symlink':
        if (existing !== undefined) await removeAll(target)
        await symlink(header.linkname, target)
        if (asRoot) await lchown(target, header.uid, header.gid)
        return content.resume()
      default:
        await this.hardLink(target, header, existing)
        return content.resume()
    }
  }

  /** `.wh..wh..opq`: empties the directory of what the layers below put there. */
  private async opaque(dirParts: string[]): Promise<void> {
    // The directory itself, links on the way followed inside the root ('.' is dropped by the join).
    const dir = await resolveInRoot(this.root, [...dirParts, '.'])
    const prefix = dirParts.join('/')
    for (const child of await readdir(dir).catch(() => [] as string[])) {
      if (!this.made.has(prefix === '' ? child : `${prefix}/${child}`)) await removeAll(path.join(dir, child))
    }
  }

  private async directory(target: string, header: Header, existing: Stats | undefined): Promise<void> {
    if (existing !== undefined && !existing.isDirectory()) await removeAll(target)
    if (existing === undefined || !existing.isDirectory()) await mkdir(target)
    await own(target, header)
    // Not root: the owner keeps write permission, so later layers can still write into it.
    await chmod(target, asRoot ? modeOf(header) : modeOf(header) | 0o700)
  }

  private async file(target: string, header: Header, existing: Stats | undefined, content: EntryStream): Promise<void> {
    if (existing !== undefined) await removeAll(target)
    const tooBig = (): FnrError => new FnrError('ResourceExhausted', `${this.options.label}: the image unpacks to more than ${this.limit} bytes (the image cache's size limit)`)
    this.stats.bytes += await writeEntry(content, target, modeOf(header), (written) => {
      if (this.before + this.stats.bytes + written > this.limit) throw tooBig()
    })
    await own(target, header)
    // chown clears setuid/setgid bits: the mode is set again after it.
    await chmod(target, modeOf(header))
  }

  private async hardLink(target: string, header: Header, existing: Stats | undefined): Promise<void> {
    const from = entryComponents(header.linkname)
    if (from === undefined || from.length === 0) throw refuse(this.options, `hard link ${JSON.stringify(header.name)} points at ${JSON.stringify(header.linkname)}, outside the root filesystem`)
    const source = await resolveInRoot(this.root, from)
    const st = await lstat(source).catch(() => undefined)
    if (st === undefined || st.isDirectory()) throw refuse(this.options, `hard link ${JSON.stringify(header.name)} points at ${JSON.stringify(header.linkname)}, which is ${st === undefined ? 'not there' : 'a directory'}`)
    if (source === target) return
    if (existing !== undefined) await removeAll(target)
    await link(source, target)
  }
}

function modeOf(header: Header): number {
  return header.mode & (asRoot ? 0o7777 : 0o1777)
}

async function own(target: string, header: Header): Promise<void> {
  if (asRoot) await lchown(target, header.uid, header.gid)
}

/** Writes an entry's content to a new file; `check` runs after each chunk. Returns the bytes written. */
async function writeEntry(entry: AsyncIterable<Buffer>, target: string, mode: number, check: (written: number) => void): Promise<number> {
  const fh = await open(target, 'wx', mode & 0o777)
  let written = 0
  try {
    for await (const chunk of entry) {
      await fh.write(chunk)
      written += chunk.length
      check(written)
    }
  } finally {
    await fh.close()
  }
  return written
}
