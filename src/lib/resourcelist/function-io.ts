/**
 * The round trip through a function, as kpt's runner does it (kyaml FunctionFilter + Pipeline):
 *
 * buildFunctionInput: checks the items are KRM, tags each with the ids kpt sets
 * (`internal.config.kubernetes.io/id`, `config.k8s.io/id`, and the annotations-migration id) and
 * renders the wrapped ResourceList with the functionConfig.
 *
 * readFunctionOutput: parses what the function printed (a ResourceList, a List, plain documents
 * or nothing), restores comments the function dropped (matched by id, only where the output has
 * none, so nothing is duplicated), removes the ids, reconciles legacy and internal path/index
 * annotations, gives new resources a default path, and enforces kpt's output invariants.
 */
import {isMap, isScalar, isSeq, type Node, type YAMLMap} from 'yaml'

import {FnrError} from '../errors.js'
import {A} from './constants.js'
import {annotationsOf, deleteAnnotation, getAnnotation, krmError, setAnnotation} from './meta.js'
import {copyLegacyAnnotations, parseItemBlocksInterruptible, parseResourceList, parseResourceListInterruptible, type ResourceList} from './read.js'
import {extractResults, type FunctionResult} from './results.js'
import {mergeReused, planReuse} from './reuse.js'
import {checkPathInvariants, cleanPath, defaultPaths, stringifyResourceListSteps} from './write.js'
import {runSteps, runStepsInterruptible, type Steps} from './yaml.js'

export interface FunctionInput {
  /** The ResourceList text to write to the function's stdin. */
  text: string
  /** Input items by the id they were sent with (comment source for the output). */
  byId: Map<string, YAMLMap>
  /** Path/index annotations of each input item, by migration id. */
  original: Map<string, Map<string, string>>
  /** With `keepItemTexts`: the items sent and each one's text in `text` (for reuse.ts). */
  sent?: {items: readonly YAMLMap[]; texts: string[]}
}

export interface BuildInputOptions {
  functionConfig?: YAMLMap | null
  /**
   * Tag each item with kyaml's `annotations-migration-resource-id` (default true), as kpt's
   * function pipelines do; kpt fn render calls its validators directly, without it.
   */
  migrationIds?: boolean
  /**
   * Keep each item's text (FunctionInput.sent), so that readFunctionOutput with `reuseUnchanged`
   * keeps the items a function gives back unchanged instead of parsing them (fnr render).
   */
  keepItemTexts?: boolean
}

/**
 * Builds a function's stdin from the items (which must be KRM: apiVersion, kind, metadata.name,
 * else FnrError('InvalidArgument', 'input resource list must contain only KRM resources: ...')).
 * The items are annotated in place with ids; readFunctionOutput removes them from the output.
 */
export function buildFunctionInput(items: readonly YAMLMap[], options: BuildInputOptions = {}): FunctionInput {
  return runSteps(buildFunctionInputSteps(items, options))
}

/** buildFunctionInput that lets SIGINT/SIGTERM handlers run and stops when the signal aborts. */
export function buildFunctionInputInterruptible(items: readonly YAMLMap[], options: BuildInputOptions, signal: AbortSignal | undefined): Promise<FunctionInput> {
  return runStepsInterruptible(buildFunctionInputSteps(items, options), signal)
}

function* buildFunctionInputSteps(items: readonly YAMLMap[], options: BuildInputOptions): Steps<FunctionInput> {
  items.forEach((item) => {
    const bad = krmError(item, pathOf(item))
    if (bad) throw new FnrError('InvalidArgument', `input resource list must contain only KRM resources: ${pathOf(item)}: ${bad}`)
  })
  const byId = new Map<string, YAMLMap>()
  const original = new Map<string, Map<string, string>>()
  for (let i = 0; i < items.length; i++) {
    yield
    const item = items[i]!
    const rid = String(i)
    if (options.migrationIds ?? true) setAnnotation(item, A.migrationId, rid)
    copyLegacyAnnotations(item)
    const annos = annotationsOf(item)
    const kept = new Map<string, string>()
    for (const key of [A.path, A.index, A.id, A.legacyPath, A.legacyIndex, A.legacyId]) {
      const v = annos.get(key)
      if (v !== undefined) kept.set(key, v)
    }
    original.set(rid, kept)
    mismatched(annos, 'InvalidArgument')
    const id = String(i + 1)
    setAnnotation(item, A.id, id)
    setAnnotation(item, A.legacyId, id)
    byId.set(id, item)
  }
  const itemTexts: string[] | undefined = options.keepItemTexts ? [] : undefined
  const text = yield* stringifyResourceListSteps(items, {functionConfig: options.functionConfig ?? null, itemTexts})
  for (const item of items) {
    deleteAnnotation(item, A.id)
    deleteAnnotation(item, A.legacyId)
    deleteAnnotation(item, A.migrationId)
  }
  return {text, byId, original, ...(itemTexts ? {sent: {items, texts: itemTexts}} : {})}
}

function pathOf(item: YAMLMap): string {
  return getAnnotation(item, A.path) ?? getAnnotation(item, A.legacyPath) ?? ''
}

function mismatched(annos: Map<string, string>, kind: 'InvalidArgument' | 'FunctionFailed'): void {
  for (const [what, internal, legacy] of [
    ['path', A.path, A.legacyPath],
    ['index', A.index, A.legacyIndex],
    ['id', A.id, A.legacyId],
  ] as const) {
    const a = annos.get(internal) ?? ''
    const b = annos.get(legacy) ?? ''
    if (a !== '' && b !== '' && a !== b) {
      throw new FnrError(kind, `resource input to function has mismatched legacy and internal ${what} annotations`)
    }
  }
}

export interface FunctionOutput {
  list: ResourceList
  results: FunctionResult[]
}

/**
 * Reads a successful function's stdout. Empty output is an empty list (every resource deleted,
 * as kpt does). Errors in the output are FnrError('FunctionFailed', ...).
 */
const OUTPUT_PARSE = {origin: 'function output', errorKind: 'FunctionFailed', annotate: true, preserveSeqIndent: false} as const

/** How the output's paths are read: `packageRelativePaths` for render (see packageRelativePath). */
export interface OutputOptions {
  packageRelativePaths?: boolean
  /**
   * Keep the input's node for every item the function wrote back byte for byte, and parse only
   * the others (reuse.ts; needs an input built with `keepItemTexts`). The list is the same as
   * the whole parse's.
   */
  reuseUnchanged?: boolean
}

export function readFunctionOutput(output: Uint8Array | string, input?: FunctionInput, options: OutputOptions = {}): FunctionOutput {
  return functionOutputOf(parseResourceList(output, OUTPUT_PARSE), input, options)
}

/** readFunctionOutput whose parse lets SIGINT/SIGTERM handlers run and stops when the signal aborts. */
export async function readFunctionOutputInterruptible(output: Uint8Array | string, input: FunctionInput | undefined, signal: AbortSignal | undefined, options: OutputOptions = {}): Promise<FunctionOutput> {
  const reused = options.reuseUnchanged && input?.sent ? await parseReusing(output, input.sent, signal) : undefined
  return functionOutputOf(reused ?? (await parseResourceListInterruptible(output, {...OUTPUT_PARSE, signal})), input, options)
}

/** The output list read block by block, with the unchanged items kept (reuse.ts), or undefined to parse it whole. */
async function parseReusing(output: Uint8Array | string, sent: NonNullable<FunctionInput['sent']>, signal: AbortSignal | undefined): Promise<ResourceList | undefined> {
  const text = typeof output === 'string' ? output : Buffer.from(output.buffer, output.byteOffset, output.byteLength).toString('utf8')
  const plan = planReuse(text, sent.items, sent.texts)
  if (plan === undefined) return undefined
  let frame: ResourceList
  let parsed: YAMLMap[] | undefined
  try {
    frame = await parseResourceListInterruptible(plan.frame, {...OUTPUT_PARSE, signal})
    parsed = await parseItemBlocksInterruptible(plan.changed, signal)
  } catch (error) {
    // The whole parse gives the error with the output's own line numbers.
    if (signal?.aborted) throw error
    return undefined
  }
  return parsed && mergeReused(plan, frame, parsed)
}

function functionOutputOf(list: ResourceList, input: FunctionInput | undefined, options: OutputOptions): FunctionOutput {
  const results = extractResults(list)
  for (const item of list.items) {
    const id = getAnnotation(item, A.id) ?? getAnnotation(item, A.legacyId)
    const source = id === undefined ? undefined : input?.byId.get(id)
    if (source && source !== item) {
      copyComments(source, item)
      syncOrder(source, item)
    }
    deleteAnnotation(item, A.id)
    deleteAnnotation(item, A.legacyId)
    reconcile(item, input?.original)
    deleteAnnotation(item, A.migrationId)
  }
  defaultPaths(list.items, 'FunctionFailed')
  if (options.packageRelativePaths) for (const item of list.items) packageRelativePath(item)
  checkPathInvariants(list.items, 'FunctionFailed')
  for (const item of list.items) {
    const bad = krmError(item, pathOf(item))
    if (bad) throw new FnrError('FunctionFailed', `output resource list must contain only KRM resources: ${pathOf(item)}: ${bad}`)
  }
  return {list, results}
}

/**
 * For render (`packageRelativePaths`): an absolute path annotation (`/another/file/out.yaml`)
 * names a file inside the function's package, as in kpt beta.56, whose render joins every path
 * to its package's directory: it becomes `another/file/out.yaml` (cleaned first, so
 * `/../x.yaml` is `x.yaml`, as the join makes it). `kpt fn eval` refuses such a path ("package
 * paths may not be absolute paths"), and so does fnr eval.
 */
function packageRelativePath(item: YAMLMap): void {
  const p = getAnnotation(item, A.path)
  if (p === undefined || !p.startsWith('/')) return
  const rel = cleanPath(p).replace(/^\/+/, '')
  if (rel === '') return
  setAnnotation(item, A.path, rel, 'FunctionFailed')
  setAnnotation(item, A.legacyPath, rel, 'FunctionFailed')
}

/** kyaml ReconcileInternalAnnotations for one output item (both formats are always in use). */
function reconcile(item: YAMLMap, original: Map<string, Map<string, string>> | undefined): void {
  for (const [internal, legacy] of [
    [A.path, A.legacyPath],
    [A.index, A.legacyIndex],
  ] as const) {
    const v = getAnnotation(item, internal) ?? ''
    const lv = getAnnotation(item, legacy) ?? ''
    if (v === '' && lv !== '') setAnnotation(item, internal, lv, 'FunctionFailed')
    else if (v !== '' && lv === '') setAnnotation(item, legacy, v, 'FunctionFailed')
  }
  const rid = getAnnotation(item, A.migrationId)
  const before = rid === undefined ? undefined : original?.get(rid)
  if (before) {
    for (const [what, internal, legacy] of [
      ['path', A.path, A.legacyPath],
      ['index', A.index, A.legacyIndex],
    ] as const) {
      const was = before.get(internal) ?? before.get(legacy) ?? ''
      if (was === '') continue
      const now = getAnnotation(item, internal) ?? ''
      const nowLegacy = getAnnotation(item, legacy) ?? ''
      if (was !== now && was !== nowLegacy && now !== nowLegacy) {
        throw new FnrError('FunctionFailed', `resource input to function has mismatched legacy and internal ${what} annotations`)
      }
      if (was !== now) setAnnotation(item, legacy, now, 'FunctionFailed')
      else if (was !== nowLegacy) setAnnotation(item, internal, nowLegacy, 'FunctionFailed')
    }
  }
  mismatched(annotationsOf(item), 'FunctionFailed')
}

/**
 * Restores the input's key order on the function's version of a resource, as kpt does (kyaml
 * SyncOrder): in every map that has a counterpart in the input, keys the input had come first in
 * the input's order, then new keys in the order the function wrote them; lists are matched by
 * position. Measured against kpt 1.0.0-beta.56 (a function that reorders or inserts keys).
 */
export function syncOrder(from: Node | null | undefined, to: Node | null | undefined): void {
  if (!from || !to) return
  if (isMap(from) && isMap(to)) {
    const keyOf = (p: {key: unknown}): string | undefined => (isScalar(p.key) ? String(p.key.value) : undefined)
    const rank = new Map<string, number>()
    from.items.forEach((p, i) => {
      const k = keyOf(p)
      if (k !== undefined && !rank.has(k)) rank.set(k, i)
    })
    const known = to.items.filter((p) => rank.has(keyOf(p) ?? '\0'))
    const added = to.items.filter((p) => !rank.has(keyOf(p) ?? '\0'))
    known.sort((a, b) => rank.get(keyOf(a)!)! - rank.get(keyOf(b)!)!)
    to.items = [...known, ...added]
    for (const pair of known) {
      const src = from.items[rank.get(keyOf(pair)!)!]
      syncOrder(src?.value as Node | null, pair.value as Node | null)
    }
  } else if (isSeq(from) && isSeq(to)) {
    const n = Math.min(from.items.length, to.items.length)
    for (let i = 0; i < n; i++) syncOrder(from.items[i] as Node | null, to.items[i] as Node | null)
  }
}

/**
 * Copies comments from an input resource onto the function's version of it wherever the output
 * has none (kyaml comments.CopyComments): on the resource, on map keys and values, and on list
 * elements matched by position (scalars only when equal).
 */
export function copyComments(from: Node | null | undefined, to: Node | null | undefined): void {
  if (!from || !to) return
  if (!to.commentBefore && from.commentBefore) to.commentBefore = from.commentBefore
  if (!to.comment && from.comment) to.comment = from.comment
  if (isMap(from) && isMap(to)) {
    for (const pair of to.items) {
      if (!isScalar(pair.key)) continue
      const key = String(pair.key.value)
      const src = from.items.find((p) => isScalar(p.key) && String(p.key.value) === key)
      if (!src) continue
      copyComments(src.key as Node, pair.key as Node)
      copyComments(src.value as Node | null, pair.value as Node | null)
    }
  } else if (isSeq(from) && isSeq(to)) {
    const n = Math.min(from.items.length, to.items.length)
    for (let i = 0; i < n; i++) {
      const a = from.items[i] as Node | null
      const b = to.items[i] as Node | null
      if (isScalar(a) && isScalar(b)) {
        if (String(a.value) === String(b.value)) copyComments(a, b)
      } else if (isScalar(a) === isScalar(b)) {
        copyComments(a, b)
      }
    }
  }
}
