/**
 * Reading packages into a ResourceList, like `kpt fn source` (and the reader of `kpt fn eval DIR`):
 *
 * - Files named `Kptfile`, `*.yaml`, `*.yml` and `*.json` are read, in directory-walk order
 *   (names sorted byte-wise in each directory, which equals sorting by path segment by
 *   segment), documents in file order. Hidden files and directories are read too (kpt does).
 *   Symbolic links to files are read; symbolic links to directories are not followed.
 * - `.krmignore` is read at the root of each input directory and of every subpackage (a
 *   directory with a Kptfile); its patterns apply inside that package only (see krmignore.ts).
 * - Every item gets `internal.config.kubernetes.io/path` + `index` + `seqindent` and the legacy
 *   `config.kubernetes.io/path` + `index`. Empty documents are skipped and do not take an index.
 *   A document that is a bare list becomes `{bareSeqNodeWrappingKey: [...]}` as in kpt.
 *
 * Path relativity with several inputs: each path is relative to the input it came from. For a
 * directory, paths are relative to that directory (`pkg/sub/cm.yaml` read from `pkg` is
 * `sub/cm.yaml`); a file given directly is named by its base name. Inputs are read in the
 * order given; two inputs yielding the same relative path is an error, because the resources
 * could not be written back unambiguously.
 */
import {lstat, readdir, readFile, realpath, stat} from 'node:fs/promises'
import {basename, join, resolve} from 'node:path'

import {isMap, isScalar, isSeq, Pair, Scalar, YAMLMap} from 'yaml'

import {FnrError} from '../errors.js'
import {A, BARE_SEQ_KEY, isResourceFileName, KPTFILE, KRMIGNORE} from './constants.js'
import {IgnoreMatcher} from './krmignore.js'
import {krmError, setAnnotation} from './meta.js'
import {copyLegacyAnnotations, emptyResourceList, nodeContents, type ResourceList} from './read.js'
import {stringifyResourceList} from './write.js'
import {deriveSeqIndent, dropBlankLines, parseStreamSteps, runStepsInterruptible, type Steps} from './yaml.js'

export interface SourceOptions {
  /**
   * Fail on a resource that is not KRM (no apiVersion, kind or metadata.name) with
   * FnrError('InvalidArgument', 'input resource list must contain only KRM resources: <path>:
   * ...'), as `kpt fn eval` does. Default true; false reads like `kpt fn source`, which passes
   * such documents through (bare lists included).
   */
  requireKrm?: boolean
  /**
   * Called with each Kptfile's path (relative to its input) and text before the file is
   * parsed, in reading order; what it throws stops the read (render checks Kptfiles as kpt does).
   */
  onKptfile?: (rel: string, text: string) => void
  /** Maximum number of files read at once (default 32). */
  concurrency?: number
  /**
   * An interrupt: parsing gives the event loop a turn every few milliseconds (yaml.ts,
   * parseStreamInterruptible) and stops with the signal's reason once it aborts.
   */
  signal?: AbortSignal
}

/** One file to read: where it is, and the path it gets inside the ResourceList. */
interface SourceFile {
  abs: string
  rel: string
  /** How to name the file in messages (the input path joined with rel). */
  display: string
}

/**
 * Reads files and directories into a ResourceList (items only). See the module comment for the
 * rules; errors are FnrError('InvalidArgument').
 */
/**
 * kpt's first check of its DIR argument (`kpt fn eval DIR`, `kpt fn render DIR`): a DIR that is
 * not there is a command-line error in kpt's words (`lstat DIR: no such file or directory`).
 */
export async function checkPackageArgument(dir: string): Promise<void> {
  try {
    await lstat(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return
    throw new FnrError('InvalidArgument', `lstat ${dir}: no such file or directory`, {cause: err, details: {commandLine: true}})
  }
}

export async function readPackage(paths: readonly string[], options: SourceOptions = {}): Promise<ResourceList> {
  if (paths.length === 0) throw new FnrError('InvalidArgument', 'no input path given')
  const files: SourceFile[] = []
  const seen = new Map<string, string>()
  for (const input of paths) {
    for (const f of await listInput(input)) {
      const other = seen.get(f.rel)
      if (other !== undefined) {
        throw new FnrError('InvalidArgument', `input paths overlap: ${JSON.stringify(f.rel)} is both ${other} and ${f.display}`)
      }
      seen.set(f.rel, f.display)
      files.push(f)
    }
  }
  const texts = await readAll(files, options.concurrency ?? 32)
  const list = emptyResourceList()
  const requireKrm = options.requireKrm ?? true
  for (let i = 0; i < files.length; i++) {
    const f = files[i]!
    if (options.onKptfile && basename(f.rel) === KPTFILE) options.onKptfile(f.rel, texts[i]!)
    const items = await fileItems(texts[i]!, f, options.signal)
    for (const item of items) {
      if (requireKrm) {
        const bad = krmError(item, f.rel)
        if (bad) throw new FnrError('InvalidArgument', `input resource list must contain only KRM resources: ${f.rel}: ${bad}`)
      }
      list.items.push(item)
    }
  }
  return list
}

/**
 * `kpt fn source`: the wrapped ResourceList text for files and directories (see readPackage).
 * Non-KRM documents are rejected as `fnr eval` needs; `requireKrm: false` passes them through
 * as `kpt fn source` does.
 */
export async function sourcePackage(paths: readonly string[], options: SourceOptions = {}): Promise<string> {
  const list = await readPackage(paths, options)
  return stringifyResourceList(list.items)
}

/** The items of one file, annotated as kpt's package reader does. */
function fileItems(text: string, f: SourceFile, signal: AbortSignal | undefined): Promise<YAMLMap[]> {
  return runStepsInterruptible(fileItemsSteps(text, f), signal)
}

function* fileItemsSteps(text: string, f: SourceFile): Steps<YAMLMap[]> {
  const docs = yield* parseStreamSteps(text, f.display, 'InvalidArgument', true)
  const out: YAMLMap[] = []
  for (let index = 0; index < docs.length; index++) {
    yield
    const doc = docs[index]!
    let item: YAMLMap
    if (isMap(doc.node)) item = doc.node
    else if (isSeq(doc.node)) {
      item = new YAMLMap()
      item.commentBefore = doc.node.commentBefore
      doc.node.commentBefore = undefined
      item.items.push(new Pair(new Scalar(BARE_SEQ_KEY), doc.node))
    } else {
      const what = isScalar(doc.node) ? `ScalarNode${nodeContents(doc.node)}` : 'AliasNode'
      throw new FnrError('InvalidArgument', `${f.display}: wrong node kind: expected MappingNode but got ${what}`)
    }
    dropBlankLines(item)
    try {
      copyLegacyAnnotations(item)
      // kyaml sets these in sorted key order
      setAnnotation(item, A.legacyIndex, String(index))
      setAnnotation(item, A.legacyPath, f.rel)
      setAnnotation(item, A.index, String(index))
      setAnnotation(item, A.path, f.rel)
      setAnnotation(item, A.seqIndent, deriveSeqIndent(doc.text))
    } catch (error) {
      if (error instanceof FnrError) throw new FnrError('InvalidArgument', `${f.display}: ${error.message}`)
      throw error
    }
    out.push(item)
  }
  return out
}

async function listInput(input: string): Promise<SourceFile[]> {
  let root: string
  try {
    root = await realpath(resolve(input))
  } catch (error) {
    throw ioError(input, error)
  }
  const st = await stat(root)
  // Devices and sockets are refused (reading /dev/zero would never end); a FIFO is read like a
  // file, so process substitution (-i <(...)) works.
  if (!st.isDirectory() && !st.isFile() && !st.isFIFO()) throw new FnrError('InvalidArgument', `${input}: not a regular file or directory`)
  if (!st.isDirectory()) {
    const rel = basename(root)
    return [{abs: root, rel, display: input}]
  }
  const out: SourceFile[] = []
  const matcher = await loadIgnore(root, input)
  await walk(root, '', matcher, '', input, out)
  return out
}

async function loadIgnore(dir: string, display: string): Promise<IgnoreMatcher | undefined> {
  try {
    return new IgnoreMatcher(await readFile(join(dir, KRMIGNORE), 'utf8'))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw ioError(join(display, KRMIGNORE), error)
  }
}

const byteOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Walks `dir` (at `rel` inside the input), collecting resource files. `matcher` belongs to the
 * package that contains `dir`, whose root is at `pkgRel`.
 */
async function walk(
  dir: string,
  rel: string,
  matcher: IgnoreMatcher | undefined,
  pkgRel: string,
  input: string,
  out: SourceFile[],
): Promise<void> {
  let entries
  try {
    entries = await readdir(dir, {withFileTypes: true})
  } catch (error) {
    throw ioError(join(input, rel), error)
  }
  entries.sort((a, b) => byteOrder(a.name, b.name))
  for (const e of entries) {
    const childRel = rel === '' ? e.name : `${rel}/${e.name}`
    const inPkg = pkgRel === '' ? childRel : childRel.slice(pkgRel.length + 1)
    const abs = join(dir, e.name)
    if (e.isDirectory()) {
      if (matcher?.ignores(inPkg, true)) continue
      const isSubpackage = await pathExists(join(abs, KPTFILE))
      if (isSubpackage) await walk(abs, childRel, await loadIgnore(abs, join(input, childRel)), childRel, input, out)
      else await walk(abs, childRel, matcher, pkgRel, input, out)
      continue
    }
    if (matcher?.ignores(inPkg, false)) continue
    if (!isResourceFileName(e.name)) continue
    out.push({abs, rel: childRel, display: join(input, childRel)})
  }
}

/** Whether anything is at p (lstat: a dangling symlink counts). */
export async function pathExists(p: string): Promise<boolean> {
  try {
    await lstat(p)
    return true
  } catch {
    return false
  }
}

async function readAll(files: readonly SourceFile[], concurrency: number): Promise<string[]> {
  const out = new Array<string>(files.length)
  let next = 0
  const worker = async () => {
    while (next < files.length) {
      const i = next++
      const f = files[i]!
      try {
        out[i] = await readFile(f.abs, 'utf8')
      } catch (error) {
        throw ioError(f.display, error)
      }
    }
  }
  await Promise.all(Array.from({length: Math.min(concurrency, files.length)}, worker))
  return out
}

function ioError(path: string, error: unknown): FnrError {
  const e = error as NodeJS.ErrnoException
  const reason =
    e.code === 'ENOENT' ? 'no such file or directory' : e.code === 'EISDIR' ? 'is a directory' : e.code === 'EACCES' ? 'permission denied' : (e.code ?? e.message)
  // Permission problems have their own kind (exit code 5), as the README's table says.
  const kind = e.code === 'EACCES' || e.code === 'EPERM' ? 'PermissionDenied' : 'InvalidArgument'
  return new FnrError(kind, `${path}: ${reason}`, {cause: error})
}
