/**
 * Reading a ResourceList: a wrapped `ResourceList` (or `List`) in YAML or JSON, or a plain
 * multi-document YAML stream whose documents become the items, as `kpt fn eval -` and kpt's
 * function runner read them (kyaml ByteReader). Items stay YAML nodes so comments survive.
 */
import {Document, isMap, isScalar, isSeq, Pair, parseAllDocuments, Scalar, YAMLMap, YAMLSeq, type Node} from 'yaml'

import {FnrError, type ErrorKind} from '../errors.js'
import {A, BARE_SEQ_KEY, RESOURCE_LIST_API_VERSION, RESOURCE_LIST_KIND} from './constants.js'
import {getAnnotation, setAnnotation} from './meta.js'
import {
  deriveSeqIndent,
  dropBlankLines,
  duplicateKey,
  getIn,
  keepKeyLineComments,
  pairOf,
  PARSE_OPTIONS,
  parseStreamSteps,
  runSteps,
  runStepsInterruptible,
  scalarString,
  stringScalar,
  type Steps,
} from './yaml.js'

/** A ResourceList in memory: items and functionConfig are YAML nodes (comments included). */
export interface ResourceList {
  apiVersion: string
  kind: string
  items: YAMLMap[]
  functionConfig: YAMLMap | null
  /** The `results` node as the producer wrote it (list or legacy `{items: [...]}`), if any. */
  results: Node | null
  /** True when the input was a wrapped ResourceList/List, false for plain documents. */
  wrapped: boolean
}

export interface ParseResourceListOptions {
  /** Name used in error messages (default `stdin`). */
  origin?: string
  /** Error kind for malformed input (default InvalidArgument). */
  errorKind?: ErrorKind
  /**
   * For plain documents: set the index annotations (internal and legacy) and copy legacy
   * path/index annotations to the internal ones, as kpt's reader does. Default true.
   */
  annotate?: boolean
  /** For plain documents: record the seqindent style of each document. Default true. */
  preserveSeqIndent?: boolean
  /** Unwrap a single ResourceList/List document (default true). */
  unwrap?: boolean
  /**
   * Input that is JSON, or items in flow style (`{...}`), is turned into block style so files
   * are not written back in flow style (kpt keeps flow style). Default true.
   */
  blockStyle?: boolean
}

/** An empty ResourceList. */
export function emptyResourceList(): ResourceList {
  return {apiVersion: RESOURCE_LIST_API_VERSION, kind: RESOURCE_LIST_KIND, items: [], functionConfig: null, results: null, wrapped: true}
}

/**
 * Parses a ResourceList from bytes: a wrapped ResourceList (YAML or JSON), a `List`, or plain
 * multi-document KRM YAML. Comments are kept on the item nodes.
 */
export function parseResourceList(input: Uint8Array | string, options: ParseResourceListOptions = {}): ResourceList {
  return guardDepth(() => runSteps(parseSteps(input, options, false)), options)
}

/**
 * parseResourceList that lets SIGINT/SIGTERM handlers run while it parses (yaml.ts,
 * parseStreamInterruptible) and rejects with the signal's reason once it aborts.
 */
export async function parseResourceListInterruptible(input: Uint8Array | string, options: ParseResourceListOptions & {signal?: AbortSignal} = {}): Promise<ResourceList> {
  return guardDepth(() => runStepsInterruptible(parseSteps(input, options, true), options.signal), options)
}

/** Deeply nested input overflows the stack of the recursive builders: a clear error instead. */
function guardDepth<T>(parse: () => T, options: ParseResourceListOptions): T {
  const overflow = (error: unknown): never => {
    // The YAML parser reports its own overflow as a parse error; JSON input reaches fromJson and the tree walkers.
    if (error instanceof RangeError) {
      throw new FnrError(options.errorKind ?? 'InvalidArgument', `${options.origin ?? 'stdin'}: the document is nested too deeply to process (${error.message})`)
    }
    throw error
  }
  try {
    const r = parse()
    return (r instanceof Promise ? r.catch(overflow) : r) as T
  } catch (error) {
    return overflow(error)
  }
}

/** `stepped`: large documents token by token, for a caller that lets the event loop run between steps (yaml.ts). */
function* parseSteps(input: Uint8Array | string, options: ParseResourceListOptions, stepped: boolean): Steps<ResourceList> {
  const text = typeof input === 'string' ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength).toString('utf8')
  const origin = options.origin ?? 'stdin'
  const kind = options.errorKind ?? 'InvalidArgument'
  const blockStyle = options.blockStyle ?? true

  const json = blockStyle ? tryJson(text) : undefined
  const docs = json !== undefined ? [{node: json, text: ''}] : yield* parseStreamSteps(text, origin, kind, stepped)

  if ((options.unwrap ?? true) && docs.length === 1 && isMap(docs[0]!.node)) {
    const node = docs[0]!.node as YAMLMap
    const k = scalarString(getIn(node, 'kind'))
    if ((k === RESOURCE_LIST_KIND || k === 'List') && (pairOf(node, 'items') !== undefined || pairOf(node, 'functionConfig') !== undefined)) {
      return yield* unwrapList(node, origin, kind, blockStyle)
    }
  }

  const list = emptyResourceList()
  list.wrapped = false
  const annotate = options.annotate ?? true
  const seqIndent = options.preserveSeqIndent ?? true
  let index = 0
  for (const doc of docs) {
    yield
    const item = asItem(doc.node, origin, kind, true)
    if (blockStyle) toBlockStyle(item)
    dropBlankLines(item)
    if (annotate) {
      copyLegacyAnnotations(item, kind)
      setAnnotation(item, A.legacyIndex, String(index), kind)
      setAnnotation(item, A.index, String(index), kind)
      if (seqIndent) setAnnotation(item, A.seqIndent, doc.text === '' ? 'compact' : deriveSeqIndent(doc.text), kind)
    }
    list.items.push(item)
    index++
  }
  return list
}

function* unwrapList(node: YAMLMap, origin: string, kind: ErrorKind, blockStyle: boolean): Steps<ResourceList> {
  const list = emptyResourceList()
  list.apiVersion = scalarString(getIn(node, 'apiVersion')) ?? RESOURCE_LIST_API_VERSION
  list.kind = scalarString(getIn(node, 'kind')) ?? RESOURCE_LIST_KIND
  const items = getIn(node, 'items')
  if (isSeq(items)) {
    // The yaml package gives a comment above the first item to the list; kpt (go-yaml) gives it
    // to the item, and keeps it in the file the item is written to.
    const first = items.items[0] as Node | undefined
    if (items.commentBefore && first && isMap(first)) {
      first.commentBefore = first.commentBefore ? `${items.commentBefore}\n${first.commentBefore}` : items.commentBefore
      items.commentBefore = undefined
    }
    for (let i = 0; i < items.items.length; i++) {
      yield
      const item = asItem(items.items[i] as Node, `${origin}: items[${i}]`, kind, false)
      if (blockStyle) toBlockStyle(item)
      dropBlankLines(item)
      list.items.push(item)
    }
  } else if (items !== undefined && items !== null && !(isScalar(items) && (items.value === null || items.value === ''))) {
    throw new FnrError(kind, `${origin}: items must be a list`)
  }
  const fc = getIn(node, 'functionConfig')
  if (isMap(fc)) {
    if (blockStyle) toBlockStyle(fc)
    dropBlankLines(fc)
    list.functionConfig = fc
  }
  const results = getIn(node, 'results')
  list.results = results ?? null
  return list
}

/**
 * The items of a wrapped ResourceList's `items`, each block (`- ` at column 0 and the lines under
 * it, reuse.ts splitListItems) parsed on its own, each made an item as unwrapList makes one;
 * undefined when any block is not exactly one map without an error (the caller then parses the
 * whole text, which gives the message, and does so for anything this throws). Lets SIGINT/SIGTERM
 * handlers run between blocks.
 */
export async function parseItemBlocksInterruptible(blocks: readonly string[], signal?: AbortSignal): Promise<YAMLMap[] | undefined> {
  return runStepsInterruptible(parseItemBlocksSteps(blocks), signal)
}

function* parseItemBlocksSteps(blocks: readonly string[]): Steps<YAMLMap[] | undefined> {
  const items: YAMLMap[] = []
  for (const block of blocks) {
    yield
    const docs = parseAllDocuments(block, PARSE_OPTIONS)
    const doc = Array.isArray(docs) && docs.length === 1 ? docs[0]! : undefined
    if (!doc || doc.errors.length > 0 || doc.commentBefore || doc.comment) return undefined
    const seq = doc.contents
    if (!isSeq(seq) || seq.flow || seq.items.length !== 1 || seq.commentBefore || seq.comment) return undefined
    const item = seq.items[0]
    // The whole parse's checks and fixes of a document, on this item (parseStreamSteps).
    if (!isMap(item) || duplicateKey(item) !== undefined) return undefined
    keepKeyLineComments(item, block)
    toBlockStyle(item)
    dropBlankLines(item)
    items.push(item)
  }
  return items
}

/** A document or list element as an item: maps as they are, bare sequences wrapped as kpt does. */
function asItem(node: Node, origin: string, kind: ErrorKind, wrapBareSeq: boolean): YAMLMap {
  if (isMap(node)) return node
  if (isSeq(node) && wrapBareSeq) {
    const map = new YAMLMap()
    map.commentBefore = node.commentBefore
    node.commentBefore = undefined
    map.items.push(new Pair(new Scalar(BARE_SEQ_KEY), node))
    return map
  }
  const what = isSeq(node) ? 'SequenceNode' : isScalar(node) ? 'ScalarNode' : 'AliasNode'
  throw new FnrError(kind, `${origin}: wrong node kind: expected MappingNode but got ${what}${nodeContents(node)}`)
}

/**
 * kpt's (kyaml's) tail of a wrong-node-kind error: `: node contents:` and the node's YAML on the
 * lines after it (kpt's e2e case fn-eval/invalid-fn-config-file matches that text).
 */
export function nodeContents(node: Node): string {
  if (isScalar(node)) return `: node contents:\n${scalarString(node) ?? ''}`
  if (isSeq(node)) return `: node contents:\n${new Document(node).toString().trimEnd()}`
  return ''
}

/** kyaml CopyLegacyAnnotations: fills in whichever of each legacy/internal pair is missing. */
export function copyLegacyAnnotations(item: YAMLMap, kind: ErrorKind = 'InvalidArgument'): void {
  for (const [legacy, internal] of [
    [A.legacyPath, A.path],
    [A.legacyIndex, A.index],
    [A.legacyId, A.id],
  ] as const) {
    const nv = getAnnotation(item, internal) ?? ''
    const lv = getAnnotation(item, legacy) ?? ''
    if (nv !== '' && lv === '') setAnnotation(item, legacy, nv, kind)
    else if (nv === '' && lv !== '') setAnnotation(item, internal, lv, kind)
  }
}

/**
 * An item written entirely in flow style (JSON) is turned into block style, recursively; empty
 * collections stay `{}`/`[]`. Items in block style are left as they are (flow parts included).
 */
export function toBlockStyle(item: YAMLMap): void {
  if (item.flow) unflow(item)
}

function unflow(node: Node | null | undefined): void {
  if (isMap(node)) {
    if (node.items.length === 0) return
    node.flow = false
    for (const pair of node.items) unflow(pair.value as Node | null)
  } else if (isSeq(node)) {
    if (node.items.length === 0) return
    node.flow = false
    for (const item of node.items) unflow(item as Node | null)
  }
}

// ---------------------------------------------------------------------------------------------
// JSON fast path: JSON.parse is far cheaper than a YAML parse, and JSON has no comments to keep.

function tryJson(text: string): Node | undefined {
  const start = text.search(/\S/)
  if (start < 0 || text[start] !== '{') return undefined
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return undefined // not strict JSON (e.g. a flow mapping): the YAML parser handles it
  }
  return fromJson(value)
}

/** Builds YAML nodes from a JSON value, quoting strings that would otherwise change type. */
export function fromJson(value: unknown): Node {
  if (value === null) return new Scalar('null')
  if (Array.isArray(value)) {
    const seq = new YAMLSeq()
    for (const v of value) seq.items.push(fromJson(v))
    return seq
  }
  switch (typeof value) {
    case 'string':
      return stringScalar(value)
    case 'number':
    case 'boolean':
      return new Scalar(String(value))
    case 'object': {
      const map = new YAMLMap()
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        map.items.push(new Pair(stringScalar(k), fromJson(v)))
      }
      return map
    }
    default:
      return new Scalar('null')
  }
}
