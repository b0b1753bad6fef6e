/**
 * Writing a ResourceList to a directory.
 *
 * sinkToDirectory (`kpt fn sink DIR`, `fnr eval -o DIR`): DIR must not exist, not even empty
 * (kpt's rule and message: `directory "out" already exists, please delete the directory and
 * retry`); it is created with its parents.
 *
 * writePackage (in place, `fnr eval --input DIR --output DIR` or `fnr eval DIR`): DIR must exist.
 * Files are rewritten only when their content changes, and files that held resources before
 * (`previousPaths`, e.g. ResourceList.sourcePaths from readPackage) but hold none now are
 * deleted, as kpt does; directories left empty stay.
 *
 * Both: paths and indexes are defaulted and checked (see write.ts: no absolute path, no `..`; in
 * writePackage, no control character in a file the package did not have), and nothing is written outside DIR: no path component may be a symbolic
 * link, and a symbolic link in place of a file is never written through (a symbolic link whose
 * target already has the new content is left alone). Both are all or nothing: sinkToDirectory
 * fills a hidden sibling directory that is renamed to DIR at the end; writePackage plans every
 * create, replace and delete, checks them all and applies them with renames that it undoes on
 * any failure or interrupt (transaction.ts).
 */
import {randomBytes} from 'node:crypto'
import {lstat, mkdir, readFile, realpath, rename, rm, writeFile} from 'node:fs/promises'
import {basename, dirname, join, resolve} from 'node:path'

import type {YAMLMap} from 'yaml'

import {type ErrorKind, FnrError} from '../errors.js'
import {A} from './constants.js'
import {getAnnotation} from './meta.js'
import {parseResourceList, type ResourceList} from './read.js'
import {applyChanges, type FileChange, ioError} from './transaction.js'
import {checkNewFileName, checkRelativePath, renderPackageFilesInterruptible} from './write.js'

export interface WriteReport {
  /** Files created or changed (relative paths, sorted). */
  written: string[]
  /** Files left as they were because their content did not change. */
  unchanged: string[]
  /** Files deleted because no resource is left in them. */
  deleted: string[]
}

/**
 * `kpt fn sink DIR`: writes the resources of a ResourceList (bytes: wrapped or plain documents,
 * or an already parsed list) into a new directory. Atomic: the files are written into a hidden
 * sibling directory that is renamed to DIR at the end, so a failure leaves no DIR behind.
 */
export async function sinkToDirectory(input: Uint8Array | string | ResourceList, dir: string, signal?: AbortSignal): Promise<WriteReport> {
  await checkSinkTarget(dir)
  const list = typeof input === 'string' || input instanceof Uint8Array ? parseResourceList(input) : input
  const files = await renderPackageFilesInterruptible(list.items, 'InvalidArgument', signal)
  const parent = dirname(resolve(dir))
  try {
    await mkdir(parent, {recursive: true})
  } catch (error) {
    throw ioError(parent, error)
  }
  let staging: string
  try {
    // mkdir (not mkdtemp) so the directory gets the usual mode, as kpt's would.
    staging = join(parent, `.${basename(resolve(dir))}.fnr-${randomBytes(6).toString('hex')}`)
    await mkdir(staging)
  } catch (error) {
    throw ioError(parent, error)
  }
  try {
    const root = await realpath(staging)
    const plan = await planWrites(root, files, 'InvalidArgument')
    await writeNew(plan, signal)
    signal?.throwIfAborted()
    try {
      await rename(staging, dir)
    } catch (error) {
      throw ioError(dir, error)
    }
  } catch (error) {
    await rm(staging, {recursive: true, force: true})
    throw error
  }
  return {written: [...files.keys()], unchanged: [], deleted: []}
}

/** Refuses an existing DIR with kpt's message (checked before a function runs, too). */
export async function checkSinkTarget(dir: string): Promise<void> {
  try {
    await lstat(dir)
    // kpt checks it with the command line (its CLI library's `error: …` form, render included).
    throw new FnrError('InvalidArgument', `directory ${JSON.stringify(dir)} already exists, please delete the directory and retry`, {details: {commandLine: true}})
  } catch (error) {
    if (error instanceof FnrError) throw error
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(dir, error)
  }
}

export interface WritePackageOptions {
  /** Files that held resources before the function ran; those left without resources are deleted. */
  previousPaths?: Iterable<string>
  /** Error kind for bad paths in the items (default FunctionFailed: the function produced them). */
  errorKind?: ErrorKind
  /** An interrupt: before the changes are applied nothing is done, while they are they are undone. */
  signal?: AbortSignal
}

/**
 * Writes the items back into an existing package directory (see the module comment): every
 * path is checked, then every create, replace and delete (transaction.ts); on any failure or
 * interrupt the package is as it was.
 */
export async function writePackage(items: readonly YAMLMap[], dir: string, options: WritePackageOptions = {}): Promise<WriteReport> {
  const kind = options.errorKind ?? 'FunctionFailed'
  let root: string
  try {
    root = await realpath(dir)
    if (!(await lstat(root)).isDirectory()) throw new FnrError('InvalidArgument', `${dir}: not a directory`)
  } catch (error) {
    if (error instanceof FnrError) throw error
    throw ioError(dir, error)
  }
  const files = await renderPackageFilesInterruptible(items, kind, options.signal)
  const plan = await planWrites(root, files, kind)
  const previous = [...new Set(options.previousPaths ?? [])].sort()
  // A file the function named anew must have a sane name (write.ts, checkNewFileName); one the
  // package already had, even under a name with a control character, is the user's.
  const known = new Set(previous.map((p) => checkRelativePath(p, 'InvalidArgument')))
  for (const w of plan.writes) if (!w.exists && !known.has(w.rel)) checkNewFileName(w.rel, kind)
  const report: WriteReport = {written: [], unchanged: [], deleted: []}
  const changes: FileChange[] = []
  for (const w of plan.writes) {
    if (w.unchanged) {
      report.unchanged.push(w.rel)
      continue
    }
    report.written.push(w.rel)
    changes.push({rel: w.rel, target: w.target, action: w.exists ? 'replace' : 'create', bytes: w.bytes, mkdirs: w.mkdirs, previous: w.previous})
  }
  for (const p of previous) {
    const rel = checkRelativePath(p, 'InvalidArgument')
    if (files.has(rel)) continue
    const target = await checkParents(root, rel, kind)
    if (target === undefined) continue
    try {
      const st = await lstat(target)
      if (st.isDirectory()) continue
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
      throw ioError(join(dir, rel), error)
    }
    changes.push({rel, target, action: 'delete'})
    report.deleted.push(rel)
  }
  await applyChanges(changes, options.signal)
  return report
}

/** The package-relative paths of the files these items were read from. */
export function sourcePathsOf(items: readonly YAMLMap[]): string[] {
  const out = new Set<string>()
  for (const item of items) {
    const p = getAnnotation(item, A.path) ?? getAnnotation(item, A.legacyPath)
    if (p) out.add(p)
  }
  return [...out]
}

interface PlannedWrite {
  rel: string
  target: string
  bytes: Buffer
  /** The file already has this content (or is a symbolic link to a file that has it). */
  unchanged: boolean
  /** Something is at target (a file to replace). */
  exists: boolean
  /** The file's content before (for a file that must be written in place, undefined if unreadable). */
  previous?: Buffer
  /** Directories under root (absolute, outermost first) that must be made for this file. */
  mkdirs: string[]
}

interface WritePlan {
  writes: PlannedWrite[]
}

/**
 * Checks every path before anything is written: no directory on the way is a symbolic link or a
 * file, no target is a directory or (with new content) a symbolic link. Nothing is created.
 */
async function planWrites(root: string, files: Map<string, string>, kind: ErrorKind): Promise<WritePlan> {
  const writes: PlannedWrite[] = []
  const plannedDirs = new Set<string>()
  for (const [rel, content] of files) {
    const parts = rel.split('/')
    const mkdirs: string[] = []
    let cur = root
    let missing = false
    for (let i = 0; i < parts.length - 1; i++) {
      cur = join(cur, parts[i]!)
      const shown = parts.slice(0, i + 1).join('/')
      if (missing || plannedDirs.has(cur)) {
        missing = true
        if (!plannedDirs.has(cur)) mkdirs.push(cur)
        plannedDirs.add(cur)
        continue
      }
      let st
      try {
        st = await lstat(cur)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(cur, error)
        missing = true
        mkdirs.push(cur)
        plannedDirs.add(cur)
        continue
      }
      if (st.isSymbolicLink()) throw new FnrError(kind, `refusing to write ${rel}: ${shown} is a symbolic link`)
      if (!st.isDirectory()) throw new FnrError(kind, `cannot write ${rel}: ${shown} is not a directory`)
    }
    const target = join(cur, parts[parts.length - 1]!)
    const bytes = Buffer.from(content)
    let unchanged = false
    let previous: Buffer | undefined
    let exists = false
    if (!missing) {
      let st
      try {
        st = await lstat(target)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(target, error)
      }
      if (st?.isDirectory()) throw new FnrError(kind, `config.kubernetes.io/path cannot be a directory: ${rel}`)
      if (st) {
        exists = true
        try {
          previous = await readFile(target)
          unchanged = previous.equals(bytes)
        } catch {
          // unreadable or dangling: not unchanged
        }
        if (!unchanged && st.isSymbolicLink()) throw new FnrError(kind, `refusing to write ${rel}: it is a symbolic link`)
        if (!unchanged && !st.isFile()) throw new FnrError(kind, `refusing to write ${rel}: it is not a regular file`)
      }
    }
    writes.push({rel, target, bytes, unchanged, exists, previous, mkdirs})
  }
  return {writes}
}

/** Writes the files of a plan into a new, empty staging directory (sinkToDirectory). */
async function writeNew(plan: WritePlan, signal?: AbortSignal): Promise<void> {
  for (const w of plan.writes) {
    signal?.throwIfAborted()
    try {
      for (const d of w.mkdirs) await mkdir(d)
      await writeFile(w.target, w.bytes, {flag: 'wx'})
    } catch (error) {
      throw ioError(w.target, error)
    }
  }
}

/**
 * Resolves `rel` under `root`, checking that no directory on the way is a symbolic link or a
 * file; undefined when a directory on the way does not exist.
 */
async function checkParents(root: string, rel: string, kind: ErrorKind): Promise<string | undefined> {
  const parts = rel.split('/')
  let cur = root
  for (let i = 0; i < parts.length - 1; i++) {
    cur = join(cur, parts[i]!)
    const shown = parts.slice(0, i + 1).join('/')
    let st
    try {
      st = await lstat(cur)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(cur, error)
      return undefined
    }
    if (st.isSymbolicLink()) throw new FnrError(kind, `refusing to write ${rel}: ${shown} is a symbolic link`)
    if (!st.isDirectory()) throw new FnrError(kind, `cannot write ${rel}: ${shown} is not a directory`)
  }
  return join(cur, parts[parts.length - 1]!)
}
