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
 * Both: paths and indexes are defaulted and checked (see write.ts), and nothing is written
 * outside DIR: absolute paths and `..` are refused, no path component may be a symbolic link,
 * and a symbolic link in place of a file is never written through (a symbolic link whose target
 * already has the new content is left alone). Both are atomic: every path is checked before
 * anything is written, files are written to temporary siblings and renamed into place, and on
 * any failure the directory is as it was.
 */
import {constants} from 'node:fs'
import {randomBytes} from 'node:crypto'
import {lstat, mkdir, open, readFile, realpath, rename, rm, unlink, writeFile} from 'node:fs/promises'
import {basename, dirname, join, resolve} from 'node:path'

import type {YAMLMap} from 'yaml'

import {type ErrorKind, FnrError} from '../errors.js'
import {A} from './constants.js'
import {getAnnotation} from './meta.js'
import {parseResourceList, type ResourceList} from './read.js'
import {checkRelativePath, renderPackageFiles} from './write.js'

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
export async function sinkToDirectory(input: Uint8Array | string | ResourceList, dir: string): Promise<WriteReport> {
  await checkSinkTarget(dir)
  const list = typeof input === 'string' || input instanceof Uint8Array ? parseResourceList(input) : input
  const files = renderPackageFiles(list.items, 'InvalidArgument')
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
    await writeStaged(plan)
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
    throw new FnrError('InvalidArgument', `directory ${JSON.stringify(dir)} already exists, please delete the directory and retry`)
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
}

/**
 * Writes the items back into an existing package directory (see the module comment). Atomic as
 * far as a file system allows: every path is checked first; new contents go to temporary
 * siblings that are renamed over the files only when all were written; files to delete are
 * deleted last. On a failure before the renames nothing in DIR changed (temporaries and the
 * directories made for them are removed); a rename failing half way restores the renamed files.
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
  const files = renderPackageFiles(items, kind)
  const plan = await planWrites(root, files, kind)
  const report: WriteReport = {written: [], unchanged: [], deleted: []}
  const toDelete: Array<{rel: string; target: string}> = []
  const previous = [...new Set(options.previousPaths ?? [])].sort()
  for (const p of previous) {
    const rel = checkRelativePath(p, 'InvalidArgument')
    if (files.has(rel)) continue
    const target = await checkParents(root, rel, kind)
    if (target === undefined) continue
    try {
      const st = await lstat(target)
      if (!st.isDirectory()) toDelete.push({rel, target})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(join(dir, rel), error)
    }
  }
  await writeStaged(plan)
  for (const w of plan.writes) {
    if (w.unchanged) report.unchanged.push(w.rel)
    else report.written.push(w.rel)
  }
  for (const {rel, target} of toDelete) {
    try {
      await unlink(target)
      report.deleted.push(rel)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(join(dir, rel), error)
    }
  }
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
  /** The file's content before, for restoring it if a later rename fails (undefined: new file). */
  previous?: Buffer
  /** The file's mode, kept when it is replaced. */
  mode?: number
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
    let mode: number | undefined
    if (!missing) {
      let st
      try {
        st = await lstat(target)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(target, error)
      }
      if (st?.isDirectory()) throw new FnrError(kind, `config.kubernetes.io/path cannot be a directory: ${rel}`)
      if (st) {
        if (st.isFile()) mode = st.mode & 0o7777
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
    writes.push({rel, target, bytes, unchanged, previous, mode, mkdirs})
  }
  return {writes}
}

/** Writes every changed file to a temporary sibling, then renames them all into place. */
async function writeStaged(plan: WritePlan): Promise<void> {
  const made: string[] = []
  const temps: Array<{w: PlannedWrite; temp: string}> = []
  try {
    for (const w of plan.writes) {
      if (w.unchanged) continue
      for (const d of w.mkdirs) {
        try {
          await mkdir(d)
          made.push(d)
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError(d, error)
        }
      }
      const temp = join(dirname(w.target), `.${basename(w.target)}.fnr-${randomBytes(6).toString('hex')}`)
      let fh
      try {
        fh = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o666)
        temps.push({w, temp})
        await fh.writeFile(w.bytes)
        if (w.mode !== undefined) await fh.chmod(w.mode)
      } catch (error) {
        throw ioError(w.target, error)
      } finally {
        await fh?.close()
      }
    }
  } catch (error) {
    await Promise.all(temps.map(({temp}) => rm(temp, {force: true})))
    for (const d of made.reverse()) await rm(d, {recursive: true, force: true})
    throw error
  }
  const renamed: PlannedWrite[] = []
  try {
    for (const {w, temp} of temps) {
      await rename(temp, w.target)
      renamed.push(w)
    }
  } catch (error) {
    // Put back what was already replaced; remove what is left of the temporaries.
    for (const w of renamed) {
      if (w.previous === undefined) await rm(w.target, {force: true})
      else await writeFile(w.target, w.previous).catch(() => {})
    }
    await Promise.all(temps.map(({temp}) => rm(temp, {force: true})))
    for (const d of made.reverse()) await rm(d, {recursive: true, force: true})
    throw ioError(dirname(temps[renamed.length]?.w.target ?? '.'), error)
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

/** Problems with the path the user gave are InvalidArgument (or PermissionDenied); the rest Internal. */
const PATH_ERRORS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'a path component is not a directory',
  EISDIR: 'is a directory',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'name too long',
  EEXIST: 'already exists',
  EROFS: 'read-only file system',
}

function ioError(path: string, error: unknown): FnrError {
  const e = error as NodeJS.ErrnoException
  if (e.code === 'EACCES' || e.code === 'EPERM') return new FnrError('PermissionDenied', `${path}: permission denied (${e.code})`, {cause: error})
  const known = e.code === undefined ? undefined : PATH_ERRORS[e.code]
  if (known) return new FnrError('InvalidArgument', `${path}: ${known} (${e.code})`, {cause: error})
  return new FnrError('Internal', `${path}: ${e.code ?? e.message}`, {cause: error})
}
