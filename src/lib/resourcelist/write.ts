/**
 * Writing a ResourceList out: wrapped (stdin of a function, `-o stdout`), unwrapped (multi-doc
 * YAML) or as package files (`kpt fn sink`). Also the path/index bookkeeping kpt does on output:
 * default paths for new resources, next free index, and the invariants a function's output
 * must satisfy.
 *
 * These functions edit the item nodes in place (annotations are added or stripped); items are
 * the ones of a ResourceList that is being written out and not used afterwards.
 */
import {posix} from 'node:path'

import {isMap, type Node, type YAMLMap} from 'yaml'

import {FnrError, type ErrorKind} from '../errors.js'
import {A, BARE_SEQ_KEY, INTERNAL_PREFIX, RESOURCE_LIST_API_VERSION, RESOURCE_LIST_KIND, type SeqIndent} from './constants.js'
import {goJson} from './goyaml.js'
import {annotationsOf, clearEmptyAnnotations, deleteAnnotation, getAnnotation, metaOf, setAnnotation} from './meta.js'
import {copyLegacyAnnotations, type ResourceList} from './read.js'
import {getIn, indentLines, runSteps, runStepsInterruptible, stringifyNode, toTyped, type Steps} from './yaml.js'

// ---------------------------------------------------------------------------------------------
// Wrapped and unwrapped streams

export interface WrapOptions {
  /** Include this functionConfig (default: none). */
  functionConfig?: YAMLMap | null
  /** Receives each item's text in the list (its `- ` line and the lines under it), in order. */
  itemTexts?: string[]
}

/**
 * The wrapped ResourceList text (`apiVersion: config.kubernetes.io/v1`, `kind: ResourceList`,
 * items, optional functionConfig), items in compact list style with their head comments on the
 * `- ` line, the way kpt writes it. Items are not modified.
 */
export function stringifyResourceList(items: readonly Node[], options: WrapOptions = {}): string {
  return runSteps(stringifyResourceListSteps(items, options))
}

/** stringifyResourceList with a pause point per item (yaml.ts, runStepsInterruptible). */
export function* stringifyResourceListSteps(items: readonly Node[], options: WrapOptions = {}): Steps<string> {
  const parts = [`apiVersion: ${RESOURCE_LIST_API_VERSION}\nkind: ${RESOURCE_LIST_KIND}\n`]
  if (items.length === 0) parts.push('items: []\n')
  else {
    parts.push('items:\n')
    for (const item of items) {
      yield
      const text = indentLines(stringifyNode(item, 'compact'), '  ', '- ')
      options.itemTexts?.push(text)
      parts.push(text)
    }
  }
  if (options.functionConfig) {
    parts.push('functionConfig:\n', indentLines(stringifyNode(options.functionConfig, 'compact'), '  '))
  }
  return parts.join('')
}

/**
 * Output for stdout like `kpt fn eval -` / `-o stdout`: a wrapped ResourceList with the items
 * only (no functionConfig, no results); path, index and seqindent annotations are kept, ids are
 * removed.
 */
export function wrapForStdout(list: Pick<ResourceList, 'items'>): string {
  for (const item of list.items) {
    for (const key of [A.id, A.legacyId, A.migrationId, A.kptResourceId]) deleteAnnotation(item, key)
    clearEmptyAnnotations(item)
  }
  return stringifyResourceList(list.items)
}

/**
 * Output like `-o unwrap`: the items as a multi-document YAML stream (`---` between documents),
 * every orchestrator annotation removed, each document in its recorded list indentation.
 */
export function unwrapToYaml(list: Pick<ResourceList, 'items'>): string {
  return list.items.map((item) => renderDocument(item)).join('---\n')
}

/** Removes every orchestrator annotation (internal prefix, legacy path/index/id). */
export function stripOrchestratorAnnotations(item: Node): void {
  if (!isMap(item)) return
  for (const key of annotationsOf(item).keys()) {
    if (key.startsWith(INTERNAL_PREFIX) || key === A.legacyPath || key === A.legacyIndex || key === A.legacyId || key === A.kptResourceId) {
      deleteAnnotation(item, key)
    }
  }
  clearEmptyAnnotations(item)
}

/** One item as a file document: annotations stripped, bare sequences unwrapped, seqindent honoured. */
function renderDocument(item: YAMLMap): string {
  const seqIndent: SeqIndent = getAnnotation(item, A.seqIndent) === 'wide' ? 'wide' : 'compact'
  stripOrchestratorAnnotations(item)
  const bare = getIn(item, BARE_SEQ_KEY)
  return stringifyNode(bare && !isEmptyNode(bare) ? bare : item, seqIndent)
}

function isEmptyNode(n: Node): boolean {
  return 'items' in n && Array.isArray((n as {items: unknown[]}).items) && (n as {items: unknown[]}).items.length === 0
}

// ---------------------------------------------------------------------------------------------
// Paths and indexes

/** `<namespace>/<kind>_<name>.yaml` with a lower-case kind (kyaml CreatePathAnnotationValue). */
export function defaultPathFor(item: Node): string {
  const m = metaOf(item)
  return posix.join(m.namespace, `${m.kind.toLowerCase()}_${m.name}.yaml`)
}

/**
 * Gives items without a path annotation the default path (internal and legacy), after filling
 * in whichever of each legacy/internal pair is missing (kyaml DefaultPathAnnotation).
 */
export function defaultPaths(items: readonly YAMLMap[], kind: ErrorKind = 'FunctionFailed'): void {
  for (const item of items) {
    copyLegacyAnnotations(item, kind)
    if (getAnnotation(item, A.path) !== undefined) continue
    const p = defaultPathFor(item)
    setAnnotation(item, A.path, p, kind)
    setAnnotation(item, A.legacyPath, p, kind)
  }
}

/**
 * Default paths, then indexes for items without one: the next free index in their file (one
 * past the highest index already used there).
 */
export function defaultPathsAndIndexes(items: readonly YAMLMap[], kind: ErrorKind = 'FunctionFailed'): void {
  defaultPaths(items, kind)
  const next = new Map<string, number>()
  for (const item of items) {
    const p = getAnnotation(item, A.path)!
    const i = getAnnotation(item, A.index)
    if (i === undefined) continue
    const n = Number.parseInt(i, 10)
    if (Number.isFinite(n) && n + 1 > (next.get(p) ?? 0)) next.set(p, n + 1)
  }
  for (const item of items) {
    if (getAnnotation(item, A.index) !== undefined) continue
    const p = getAnnotation(item, A.path)!
    const n = next.get(p) ?? 0
    next.set(p, n + 1)
    setAnnotation(item, A.index, String(n), kind)
    setAnnotation(item, A.legacyIndex, String(n), kind)
  }
}

/** Cleans a slash path like Go's path.Clean. */
export function cleanPath(p: string): string {
  const c = posix.normalize(p)
  return c.length > 1 && c.endsWith('/') ? c.slice(0, -1) : c
}

// C0 controls, DEL and C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
// eslint-disable-next-line no-control-regex
const CONTROL_ALL = /[\u0000-\u001f\u007f-\u009f]/g

/** A path quoted for a message, every control character shown as an escape (`"a\nb.yaml"`). */
export function escapeControl(p: string): string {
  return JSON.stringify(p).replace(CONTROL_ALL, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * A file a write would create: its name holds no control character. A newline or another control
 * character in a new file's name is almost certainly a function's bug, and would break every
 * line-based tool that lists the package: refused before any write. A file already in the package
 * under such a name is the user's, and is read and rewritten as kpt does (the sink calls this for
 * new files only).
 */
export function checkNewFileName(rel: string, kind: ErrorKind): void {
  if (CONTROL.test(rel)) throw new FnrError(kind, `invalid resource path ${escapeControl(rel)}: it contains a control character (a new file; files already in the package keep their names)`)
}

/**
 * Checks a package-relative path: not absolute, not escaping the package, naming a file.
 * Returns the cleaned path.
 */
export function checkRelativePath(p: string, kind: ErrorKind): string {
  if (p === '' || p.includes('\0')) throw new FnrError(kind, `invalid resource path ${JSON.stringify(p)}`)
  if (p.startsWith('/') || /^[A-Za-z]:[\\/]/.test(p)) {
    throw new FnrError(kind, `function must not modify resources outside of package: resource has absolute path ${p}`)
  }
  const c = cleanPath(p)
  if (c === '..' || c.startsWith('../')) {
    throw new FnrError(kind, `function must not modify resources outside of package: resource has path ${p}`)
  }
  if (c === '.' || p.endsWith('/')) throw new FnrError(kind, `config.kubernetes.io/path cannot be a directory: ${p}`)
  return c
}

/**
 * kpt's path invariants (enforcePathInvariants): no path is absolute or escapes the package
 * (`function must not modify resources outside of package: ...`), and no two items share a
 * path and index (`resource at path "p" and index "i" already exists`).
 */
export function checkPathInvariants(items: readonly YAMLMap[], kind: ErrorKind = 'FunctionFailed'): void {
  const seen = new Set<string>()
  for (const item of items) {
    const p = getAnnotation(item, A.path) ?? getAnnotation(item, A.legacyPath) ?? ''
    const i = getAnnotation(item, A.index) ?? getAnnotation(item, A.legacyIndex) ?? ''
    const c = p === '' ? '.' : checkRelativePath(p, kind)
    // In render, paths are relative to each resource's package (package-path).
    const key = `${getAnnotation(item, A.packagePath) ?? ''}\u0000${c}\u0000${i}`
    if (seen.has(key)) throw new FnrError(kind, `resource at path ${JSON.stringify(c)} and index ${JSON.stringify(i)} already exists`)
    seen.add(key)
  }
}

// ---------------------------------------------------------------------------------------------
// Package files

/**
 * The files a package directory gets for these items (path -> contents), like kpt's
 * LocalPackageWriter: paths and indexes defaulted, items grouped by path and sorted by index,
 * orchestrator annotations stripped, documents joined with `---`, and a file holding a single
 * resource under a `.json` name written as JSON. Paths are cleaned and checked.
 */
export function renderPackageFiles(items: readonly YAMLMap[], kind: ErrorKind = 'FunctionFailed'): Map<string, string> {
  return runSteps(renderPackageFilesSteps(items, kind))
}

/** renderPackageFiles that lets SIGINT/SIGTERM handlers run and stops when the signal aborts. */
export function renderPackageFilesInterruptible(items: readonly YAMLMap[], kind: ErrorKind, signal: AbortSignal | undefined): Promise<Map<string, string>> {
  return runStepsInterruptible(renderPackageFilesSteps(items, kind), signal)
}

function* renderPackageFilesSteps(items: readonly YAMLMap[], kind: ErrorKind): Steps<Map<string, string>> {
  defaultPathsAndIndexes(items, kind)
  checkPathInvariants(items, kind)
  const byPath = new Map<string, Array<{item: YAMLMap; index: number; order: number}>>()
  items.forEach((item, order) => {
    const p = checkRelativePath(getAnnotation(item, A.path)!, kind)
    const raw = getAnnotation(item, A.index)!
    if (!/^[-+]?\d+$/.test(raw)) throw new FnrError(kind, `unable to parse config.kubernetes.io/index ${raw}`)
    const list = byPath.get(p) ?? []
    list.push({item, index: Number.parseInt(raw, 10), order})
    byPath.set(p, list)
  })
  const files = new Map<string, string>()
  const paths = [...byPath.keys()]
  // A path cannot be both a file and a directory holding other files.
  for (const p of paths) {
    for (let d = posix.dirname(p); d !== '.' && d !== '/'; d = posix.dirname(d)) {
      if (byPath.has(d)) throw new FnrError(kind, `config.kubernetes.io/path cannot be a directory: ${d}`)
    }
  }
  for (const p of paths.sort()) {
    const entries = byPath.get(p)!.sort((a, b) => a.index - b.index || a.order - b.order)
    if (entries.length === 1 && p.endsWith('.json')) {
      const item = entries[0]!.item
      stripOrchestratorAnnotations(item)
      const bare = getIn(item, BARE_SEQ_KEY)
      files.set(p, goJson(toTyped(bare && !isEmptyNode(bare) ? bare : item)))
      continue
    }
    const docs: string[] = []
    for (const e of entries) {
      yield
      docs.push(renderDocument(e.item))
    }
    files.set(p, docs.join('---\n'))
  }
  return files
}
