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
 * outside DIR: absolute paths and `..` are refused, no path component may be a symbolic link
 * (directories are created one level at a time and checked), and files are opened with
 * O_NOFOLLOW so a symbolic link in place of a file is never written through. A symbolic link
 * whose target already has the new content is left alone.
 */
import {constants} from 'node:fs'
import {lstat, mkdir, open, readFile, realpath, unlink} from 'node:fs/promises'
import {join} from 'node:path'

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
 * or an already parsed list) into a new directory.
 */
export async function sinkToDirectory(input: Uint8Array | string | ResourceList, dir: string): Promise<WriteReport> {
  try {
    await lstat(dir)
    throw new FnrError('InvalidArgument', `directory ${JSON.stringify(dir)} already exists, please delete the directory and retry`)
  } catch (error) {
    if (error instanceof FnrError) throw error
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(dir, error)
  }
  const list = typeof input === 'string' || input instanceof Uint8Array ? parseResourceList(input) : input
  const files = renderPackageFiles(list.items, 'InvalidArgument')
  try {
    await mkdir(dir, {recursive: true})
  } catch (error) {
    throw ioError(dir, error)
  }
  const root = await realpath(dir)
  const report: WriteReport = {written: [], unchanged: [], deleted: []}
  for (const [rel, content] of files) {
    await safeWrite(root, rel, content, 'InvalidArgument')
    report.written.push(rel)
  }
  return report
}

export interface WritePackageOptions {
  /** Files that held resources before the function ran; those left without resources are deleted. */
  previousPaths?: Iterable<string>
  /** Error kind for bad paths in the items (default FunctionFailed: the function produced them). */
  errorKind?: ErrorKind
}

/** Writes the items back into an existing package directory (see the module comment). */
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
  const report: WriteReport = {written: [], unchanged: [], deleted: []}
  for (const [rel, content] of files) {
    if (await safeWrite(root, rel, content, kind)) report.written.push(rel)
    else report.unchanged.push(rel)
  }
  const previous = [...new Set(options.previousPaths ?? [])].sort()
  for (const p of previous) {
    const rel = checkRelativePath(p, 'InvalidArgument')
    if (files.has(rel)) continue
    const target = await safeParent(root, rel, kind, false)
    if (target === undefined) continue
    try {
      const st = await lstat(target)
      if (st.isDirectory()) continue
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

/**
 * Resolves `rel` under `root`, checking that no directory on the way is a symbolic link or a
 * file. With `create`, missing directories are made; without, undefined is returned for them.
 */
async function safeParent(root: string, rel: string, kind: ErrorKind, create: boolean): Promise<string | undefined> {
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
      if (!create) return undefined
      try {
        await mkdir(cur)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError(cur, e)
      }
      st = await lstat(cur)
    }
    if (st.isSymbolicLink()) throw new FnrError(kind, `refusing to write ${rel}: ${shown} is a symbolic link`)
    if (!st.isDirectory()) throw new FnrError(kind, `cannot write ${rel}: ${shown} is not a directory`)
  }
  return join(cur, parts[parts.length - 1]!)
}

/** Writes a file under root unless it already has this content; returns whether it wrote. */
async function safeWrite(root: string, rel: string, content: string, kind: ErrorKind): Promise<boolean> {
  const target = (await safeParent(root, rel, kind, true))!
  const bytes = Buffer.from(content)
  let st
  try {
    st = await lstat(target)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(target, error)
  }
  if (st?.isDirectory()) throw new FnrError(kind, `config.kubernetes.io/path cannot be a directory: ${rel}`)
  if (st && (st.isFile() || st.isSymbolicLink())) {
    try {
      if ((await readFile(target)).equals(bytes)) return false
    } catch {
      // unreadable or dangling: fall through and let the write decide
    }
  }
  if (st?.isSymbolicLink()) throw new FnrError(kind, `refusing to write ${rel}: it is a symbolic link`)
  let fh
  try {
    fh = await open(target, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o666)
    await fh.writeFile(bytes)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw new FnrError(kind, `refusing to write ${rel}: it is a symbolic link`)
    throw ioError(target, error)
  } finally {
    await fh?.close()
  }
  return true
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
