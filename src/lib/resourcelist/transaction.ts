/**
 * Changing the files of an existing package all or nothing (`fnr eval DIR`, `fnr render DIR`).
 *
 * 1. **Check** (nothing touched): for every file to create, replace or delete, the directory it
 *    is in (or, for a new directory, the nearest existing one) must be writable and searchable;
 *    a file to replace must itself be writable (kpt opens it for writing, so a 0444 file fails
 *    with EACCES unless the user is root); neither may be a mount point (a rename cannot replace
 *    it); in a sticky directory only the owner of a file, of the directory, or root may delete.
 * 2. **Stage**: directories to make are made, and every new content goes to a temporary sibling
 *    (`.NAME.fnr-HEX`) with the old file's mode, owner and group. When the owner cannot be given
 *    (a file of another user that the user may write, not as root), that file is written
 *    through in place instead, as kpt does, and its old content is kept in memory.
 * 3. **Apply**: for each change, the old file is kept under a backup name (`.NAME.fnr-bak-HEX`:
 *    a hard link, or the file itself renamed when the file system refuses the link), then the
 *    temporary is renamed over it; a deleted file is renamed to its backup name.
 * 4. **Commit**: the backups are removed. Until then, any failure or an interrupt (the
 *    AbortSignal) undoes what was applied in reverse order: backups renamed back, new files
 *    removed, in-place files rewritten with their old content, temporaries and the directories
 *    made removed. The package is then as it was, byte for byte, with the same inodes for the
 *    files that were replaced or deleted.
 *
 * While stage, apply or undo run, `holdsPackageWrites()` is true: the CLI's interrupt handling
 * (src/cli/interrupt.ts) then waits for them before it forces an exit.
 *
 * For tests, the steps `staged`, `apply:REL` and `undo:REL` can pause the writer (test-pause.ts).
 */
import {constants} from 'node:fs'
import {randomBytes} from 'node:crypto'
import {access, link, lstat, mkdir, open, readFile, rename, rmdir, unlink, type FileHandle} from 'node:fs/promises'
import {basename, dirname, join} from 'node:path'

import {FnrError} from '../errors.js'
import {pause} from './test-pause.js'

/** One file to create, replace or delete; paths are absolute and were checked for symbolic links. */
export interface FileChange {
  rel: string
  target: string
  action: 'create' | 'replace' | 'delete'
  /** The new content (create, replace). */
  bytes?: Buffer
  /** Directories under the package (absolute, outermost first) to make for a new file. */
  mkdirs?: string[]
  /** For replace: the old file's content (written back if the file has to be written in place). */
  previous?: Buffer
}

let holding = 0
const waiting: Array<() => void> = []

/** Whether a package is being changed or restored right now (an exit would leave it half done). */
export function holdsPackageWrites(): boolean {
  return holding > 0
}

/** Calls `fn` once no package is being changed (at once when none is). */
export function afterPackageWrites(fn: () => void): void {
  if (holding === 0) fn()
  else waiting.push(fn)
}

function release(): void {
  holding--
  if (holding === 0) for (const fn of waiting.splice(0)) fn()
}

/** What the checks learned about a file to replace. */
interface Replaced {
  mode: number
  uid: number
  gid: number
}

type DirInfo = (dir: string) => Promise<{dev: number; uid: number; mode: number}>

/**
 * Checks every change without touching anything (step 1 of the module comment). Returns what
 * the replace steps need to know about the old files.
 */
export async function checkChanges(changes: readonly FileChange[]): Promise<Map<FileChange, Replaced>> {
  const replaced = new Map<FileChange, Replaced>()
  const dirs = new Map<string, ReturnType<DirInfo>>()
  const dirInfo: DirInfo = (d) => {
    let p = dirs.get(d)
    if (!p) {
      p = (async () => {
        try {
          await access(d, constants.W_OK | constants.X_OK)
          const st = await lstat(d)
          return {dev: st.dev, uid: st.uid, mode: st.mode}
        } catch (error) {
          throw ioError(d, error)
        }
      })()
      dirs.set(d, p)
    }
    return p
  }
  const mounts = await mountPoints()
  // Directories that a change makes: a later file in one of them is checked at the nearest existing directory.
  const planned = new Set(changes.flatMap((c) => c.mkdirs ?? []))
  for (const c of changes) {
    try {
      if (c.action !== 'create' && mounts.has(c.target)) throw new FnrError('InvalidArgument', `${c.target} is a mount point (a rename cannot replace it)`)
      const old = await checkOne(c, dirInfo, planned)
      if (old) replaced.set(c, old)
    } catch (error) {
      // Say which change it was: `cannot delete sub/b.yaml: /pkg/sub: permission denied (EACCES)`.
      const e = ioError(c.target, error)
      throw new FnrError(e.kind, `cannot ${c.action} ${c.rel}: ${e.message}`, {cause: e.cause ?? e})
    }
  }
  return replaced
}

/**
 * The mount points of this process's mount namespace (/proc/self/mountinfo; empty where there is
 * none). A file bind-mounted from the same file system has the same st_dev as its directory, so
 * the device check alone does not see it.
 */
async function mountPoints(): Promise<Set<string>> {
  let text: string
  try {
    text = await readFile('/proc/self/mountinfo', 'utf8')
  } catch {
    return new Set()
  }
  const out = new Set<string>()
  for (const line of text.split('\n')) {
    const field = line.split(' ')[4]
    if (field) out.add(field.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(Number.parseInt(oct, 8))))
  }
  return out
}

async function checkOne(c: FileChange, dirInfo: DirInfo, planned: ReadonlySet<string>): Promise<Replaced | undefined> {
  const madeDirs = c.mkdirs ?? []
  // A new directory goes into the nearest existing one; so does a new file in a directory that
  // another change makes (only the first file of a new directory lists it in its mkdirs).
  let parent = madeDirs.length > 0 ? dirname(madeDirs[0]!) : dirname(c.target)
  while (planned.has(parent)) parent = dirname(parent)
  const d = await dirInfo(parent)
  if (c.action === 'create') return undefined
  let st
  try {
    st = await lstat(c.target)
  } catch (error) {
    throw ioError(c.target, error)
  }
  if (st.dev !== d.dev) throw new FnrError('InvalidArgument', `${c.target} is a mount point (a rename cannot replace it)`)
  if (c.action === 'replace') {
    try {
      await access(c.target, constants.W_OK)
    } catch (error) {
      throw ioError(c.target, error)
    }
    return {mode: st.mode & 0o7777, uid: st.uid, gid: st.gid}
  }
  const euid = process.geteuid?.() ?? 0
  if ((d.mode & 0o1000) !== 0 && euid !== 0 && st.uid !== euid && d.uid !== euid) {
    throw new FnrError('PermissionDenied', `${c.target}: permission denied (EPERM: the directory is sticky and the file is another user's)`)
  }
  return undefined
}

interface Staged {
  change: FileChange
  /** The temporary sibling holding the new content (undefined: written in place, or a delete). */
  temp?: string
  /** Write the new content through the existing file (its owner cannot be given to a new file). */
  inPlace?: boolean
}

interface Applied {
  staged: Staged
  /** Where the old file is kept until the commit. */
  backup?: string
  /** The backup is a hard link (the old file is still at target until the rename). */
  linked?: boolean
}

/**
 * Checks, stages, applies and commits the changes (see the module comment). Throws the first
 * failure, or the signal's reason when it aborted, with the package as it was.
 */
export async function applyChanges(changes: readonly FileChange[], signal?: AbortSignal): Promise<void> {
  const tx: Transaction = {replaced: await checkChanges(changes), made: [], staged: [], applied: []}
  signal?.throwIfAborted()
  holding++
  try {
    try {
      await stage(changes, tx, signal)
      await pause('staged')
      signal?.throwIfAborted()
      for (const s of tx.staged) {
        await applyOne(s, tx.applied)
        await pause(`apply:${s.change.rel}`)
        signal?.throwIfAborted()
      }
    } catch (error) {
      await undo(tx)
      throw error
    }
    // Committed: the backups go.
    for (const a of tx.applied) if (a.backup) await unlink(a.backup).catch(() => {})
  } finally {
    release()
  }
}

interface Transaction {
  replaced: Map<FileChange, Replaced>
  /** Directories made (outermost first). */
  made: string[]
  staged: Staged[]
  applied: Applied[]
}

/** Temporaries written at once while staging. */
const STAGE_CONCURRENCY = 8

/**
 * Makes the directories (in order, each one's parent first), then writes the temporaries a few
 * at a time. Once all have ended, tx.staged lists every temporary made, in the changes' order
 * (apply and undo follow it), so an undo removes them all; the error thrown is the first one in
 * the changes' order, as when they were written one after the other.
 */
async function stage(changes: readonly FileChange[], tx: Transaction, signal?: AbortSignal): Promise<void> {
  let failed: {at: number; error: unknown} | undefined
  let upTo = changes.length
  for (const [i, c] of changes.entries()) {
    try {
      signal?.throwIfAborted()
      await makeDirs(c, tx)
    } catch (error) {
      failed = {at: i, error}
      upTo = i
      break
    }
  }
  const slots: Array<Staged | undefined> = Array.from({length: upTo})
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < upTo) {
      const i = next++
      if (failed !== undefined && failed.at < i) return
      const c = changes[i]!
      try {
        signal?.throwIfAborted()
        if (c.action === 'delete') slots[i] = {change: c}
        else await stageContent(c, tx, (s) => (slots[i] = s))
      } catch (error) {
        if (failed === undefined || i < failed.at) failed = {at: i, error}
      }
    }
  }
  await Promise.all(Array.from({length: Math.min(STAGE_CONCURRENCY, upTo)}, worker))
  for (const s of slots) if (s) tx.staged.push(s)
  if (failed !== undefined) throw failed.error
}

/** Makes the directories a change needs that do not exist yet (recorded in tx.made). */
async function makeDirs(c: FileChange, tx: Transaction): Promise<void> {
  for (const d of c.mkdirs ?? []) {
    try {
      await mkdir(d)
      tx.made.push(d)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError(d, error)
    }
  }
}

/** Writes the new content of c to a temporary sibling with the old file's owner, group and mode. */
async function stageContent(c: FileChange, tx: Transaction, made: (s: Staged) => void): Promise<void> {
  const old = tx.replaced.get(c)
  const s: Staged = {change: c, temp: siblingName(c.target, 'fnr')}
  let fh: FileHandle | undefined
  try {
    fh = await open(s.temp!, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o666)
    made(s)
    if (old && (old.uid !== process.geteuid?.() || old.gid !== process.getegid?.())) {
      // Not root: a new file cannot have another user's ownership; it is written through, like kpt.
      s.inPlace = !(await fh.chown(old.uid, old.gid).then(
        () => true,
        () => false,
      ))
    }
    if (!s.inPlace) {
      await fh.writeFile(c.bytes!)
      if (old) await fh.chmod(old.mode)
    }
  } catch (error) {
    throw ioError(c.target, error)
  } finally {
    await fh?.close()
  }
  if (s.inPlace) {
    await unlink(s.temp!).catch(() => {})
    s.temp = undefined
    if (c.previous === undefined) throw new FnrError('PermissionDenied', `${c.target}: cannot replace another user's file without reading it first (permission denied)`)
  }
}

async function applyOne(s: Staged, applied: Applied[]): Promise<void> {
  const c = s.change
  const a: Applied = {staged: s}
  try {
    if (c.action === 'create') {
      applied.push(a)
      await rename(s.temp!, c.target)
      s.temp = undefined
      return
    }
    if (s.inPlace) {
      applied.push(a)
      await writeThrough(c.target, c.bytes!)
      return
    }
    const backup = siblingName(c.target, 'fnr-bak')
    if (c.action === 'replace') {
      try {
        await link(c.target, backup)
        a.linked = true
      } catch {
        // No hard links here: move the old file aside instead.
        await rename(c.target, backup)
      }
      a.backup = backup
      applied.push(a)
      await rename(s.temp!, c.target)
      s.temp = undefined
      return
    }
    await rename(c.target, backup)
    a.backup = backup
    applied.push(a)
  } catch (error) {
    throw ioError(c.target, error)
  }
}

/** Undoes the applied changes in reverse order and removes the temporaries and directories made. */
async function undo({applied, staged, made}: Transaction): Promise<void> {
  for (const a of [...applied].reverse()) {
    const c = a.staged.change
    try {
      if (c.action === 'create') await unlink(c.target).catch(ignoreMissing)
      else if (a.staged.inPlace) await writeThrough(c.target, c.previous!)
      else if (a.backup) {
        await rename(a.backup, c.target)
        // A hard link renamed onto its own file stays where it was (rename(2) does nothing then).
        if (a.linked) await unlink(a.backup).catch(() => {})
      }
    } catch {
      // Nothing better to do: go on restoring the others.
    }
    await pause(`undo:${c.rel}`)
  }
  for (const s of staged) if (s.temp) await unlink(s.temp).catch(() => {})
  for (const d of [...made].reverse()) await rmdir(d).catch(() => {})
}

function ignoreMissing(error: unknown): void {
  if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
}

async function writeThrough(target: string, bytes: Buffer): Promise<void> {
  const fh = await open(target, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW)
  try {
    await fh.writeFile(bytes)
  } finally {
    await fh.close()
  }
}

function siblingName(target: string, tag: string): string {
  return join(dirname(target), `.${basename(target)}.${tag}-${randomBytes(6).toString('hex')}`)
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
const SPACE_ERRORS: Record<string, string> = {ENOSPC: 'no space left on device', EDQUOT: 'disk quota exceeded'}

export function ioError(path: string, error: unknown): FnrError {
  if (error instanceof FnrError) return error
  const e = error as NodeJS.ErrnoException
  if (e.code === 'EACCES' || e.code === 'EPERM') return new FnrError('PermissionDenied', `${path}: permission denied (${e.code})`, {cause: error})
  const space = e.code === undefined ? undefined : SPACE_ERRORS[e.code]
  if (space) return new FnrError('ResourceExhausted', `${path}: ${space} (${e.code})`, {cause: error})
  const known = e.code === undefined ? undefined : PATH_ERRORS[e.code]
  if (known) return new FnrError('InvalidArgument', `${path}: ${known} (${e.code})`, {cause: error})
  return new FnrError('Internal', `${path}: ${e.code ?? e.message}`, {cause: error})
}
