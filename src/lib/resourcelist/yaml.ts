/**
 * YAML plumbing shared by the ResourceList modules, on the `yaml` package's Document API.
 *
 * Documents are parsed with the failsafe schema: every scalar stays a string with its source
 * style (plain, single or double quoted, block), so writing a resource back reproduces `0x1F`,
 * `1.50`, `True` or `~` as they were written, the way kpt (go-yaml v3 nodes) does. When a typed
 * value is needed (JSON files, result values) `toTyped` resolves plain scalars the way go-yaml
 * does. Documents are split like kyaml's ByteReader (`\n---` lines), so indexes, empty
 * documents and the seqindent annotation match kpt.
 */
import {
  Alias,
  Composer,
  Document,
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  Lexer,
  parseAllDocuments,
  Parser,
  Scalar,
  type DocumentOptions,
  type Node,
  type ParseOptions,
  type SchemaOptions,
  type ToStringOptions,
  type CST,
  type YAMLMap,
} from 'yaml'

import {type ErrorKind, FnrError, firstLine} from '../errors.js'
import type {SeqIndent} from './constants.js'
import {pause, pauseRequested} from './test-pause.js'
import {nextTurn} from '../turns.js'

export const PARSE_OPTIONS: ParseOptions & DocumentOptions & SchemaOptions = {
  schema: 'failsafe',
  prettyErrors: false,
  logLevel: 'silent',
  // The yaml package checks for duplicate keys by comparing every pair of keys of a map, which
  // takes seconds on a map of 20,000 keys; parseStream checks them in linear time instead.
  uniqueKeys: false,
}

const TO_STRING: ToStringOptions = {
  lineWidth: 0,
  minContentWidth: 0,
  flowCollectionPadding: false,
  directives: false,
}

/** A document of a YAML stream as kpt reads it: its top-level node and the text it came from. */
export interface StreamDocument {
  node: Node
  /** The document's own text (between separators), used to derive the seqindent style. */
  text: string
}

/**
 * Splits a stream like kyaml's ByteReader: a separator is a line starting with `---` that is not
 * the first line; anything after `---` other than a comment is an error.
 */
export function splitDocuments(text: string): string[] {
  if (text.length === 0) return []
  const out: string[] = []
  const re = /\n---.*\n/g
  let prev = 0
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const after = m[0].slice(4).trim()
    if (after.length > 0 && !after.startsWith('#')) {
      throw new Error(`invalid document separator: ${m[0].trim()}`)
    }
    out.push(text.slice(prev, m.index))
    prev = m.index + m[0].length
  }
  out.push(text.slice(prev))
  return out
}

/** A plain `~`, `null`, `Null`, `NULL` or empty scalar, or one tagged !!null (go-yaml's null). */
export function isNullScalar(node: Node): boolean {
  if (!isScalar(node)) return false
  if (node.tag === 'tag:yaml.org,2002:null') return true
  if (node.type !== undefined && node.type !== Scalar.PLAIN) return false
  return node.tag === undefined && /^(~|null|Null|NULL|)$/.test(String(node.value))
}

/**
 * Parses a YAML stream into its non-empty documents (kyaml ByteReader semantics). Document-level
 * comments are moved onto the top-level node so the node can be moved into another document.
 * Errors are thrown as FnrError(kind) prefixed with `origin`.
 */
export function parseStream(input: string, origin: string, kind: ErrorKind): StreamDocument[] {
  // Run at once, a document is parsed whole: the token-by-token path is only worth its cost where
  // something can run between the steps (parseStreamInterruptible).
  return runSteps(parseStreamSteps(input, origin, kind, false))
}

/**
 * parseStream that gives the event loop a turn every few milliseconds (between documents, and
 * every few thousand tokens inside a large one), so a SIGINT/SIGTERM handler runs while a large
 * package is parsed; rejects with the signal's reason once it is aborted. What it cannot cut is
 * composing the nodes of one document from its tokens (about a third of that document's time).
 */
export function parseStreamInterruptible(input: string, origin: string, kind: ErrorKind, signal?: AbortSignal): Promise<StreamDocument[]> {
  return runStepsInterruptible(parseStreamSteps(input, origin, kind, true), signal)
}

/** A computation that yields (nothing) at the points where it may be paused. */
export type Steps<T> = Generator<void, T, void>

/** Runs steps to their end at once. */
export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next()
    if (r.done) return r.value
  }
}

/** How long steps run before the event loop gets a turn. */
const SLICE_MS = 20

/** Runs steps, giving the event loop a turn every SLICE_MS and stopping when the signal aborts. */
export async function runStepsInterruptible<T>(steps: Steps<T>, signal?: AbortSignal): Promise<T> {
  signal?.throwIfAborted()
  let since = performance.now()
  let paused = !pauseRequested('parse')
  for (;;) {
    const r = steps.next()
    if (r.done) return r.value
    if (!paused) {
      // Tests: once, after the first step (test-pause.ts).
      paused = true
      await pause('parse')
    } else if (performance.now() - since < SLICE_MS) continue
    await nextTurn()
    signal?.throwIfAborted()
    since = performance.now()
  }
}

/** Documents larger than this are parsed token by token, with pause points between tokens. */
const STEPPED_PARSE_BYTES = 64 * 1024
/** Tokens between two pause points. */
const TOKENS_PER_STEP = 2048

/** parseAllDocuments (without pretty errors, as PARSE_OPTIONS asks) with pause points. */
function* parseAllDocumentsSteps(source: string, stepped: boolean): Steps<ReturnType<typeof parseAllDocuments>> {
  if (!stepped || source.length < STEPPED_PARSE_BYTES) return parseAllDocuments(source, PARSE_OPTIONS)
  const parser = new Parser()
  const tokens: CST.Token[] = []
  let n = 0
  for (const lexeme of new Lexer().lex(source, false)) {
    for (const token of parser.next(lexeme)) tokens.push(token)
    if (++n % TOKENS_PER_STEP === 0) yield
  }
  for (const token of parser.end()) tokens.push(token)
  yield
  const composer = new Composer(PARSE_OPTIONS)
  const docs = Array.from(composer.compose(tokens))
  if (docs.length > 0) return docs as ReturnType<typeof parseAllDocuments>
  return Object.assign([], {empty: true}, composer.streamInfo()) as unknown as ReturnType<typeof parseAllDocuments>
}

export function* parseStreamSteps(input: string, origin: string, kind: ErrorKind, stepped: boolean): Steps<StreamDocument[]> {
  const text = input.includes('\r\n') ? input.replace(/\r\n/g, '\n') : input
  let chunks: string[]
  try {
    chunks = splitDocuments(text)
  } catch (error) {
    throw new FnrError(kind, `${origin}: ${(error as Error).message}`)
  }
  const out: StreamDocument[] = []
  // Line numbers in messages are the stream's (each separator line counts).
  let firstLine = 1
  for (let i = 0; i < chunks.length; i++) {
    yield
    const chunk = i === chunks.length - 1 ? chunks[i]! : `${chunks[i]!}\n`
    const lineOffset = firstLine - 1
    firstLine += countNewlines(chunks[i]!) + 2
    if (chunk.trim() === '') continue
    const parsed = yield* parseAllDocumentsSteps(chunk, stepped)
    const doc = parsed[0]
    if (doc === undefined) {
      // An empty stream (only comments); the yaml package may still report errors on it.
      const errors = (parsed as {errors?: YamlErrorLike[]}).errors ?? []
      if (errors.length > 0) throw malformed(kind, origin, atLine(errors[0]!, chunk, lineOffset))
      continue
    }
    if (doc.errors.length > 0) throw malformed(kind, origin, atLine(doc.errors[0]!, chunk, lineOffset))
    const node = doc.contents as Node | null
    if (node === null || isNullScalar(node)) continue
    const duplicate = duplicateKey(node)
    if (duplicate !== undefined) throw malformed(kind, origin, `Map keys must be unique; ${JSON.stringify(duplicate)} is repeated`)
    keepKeyLineComments(node, chunk)
    hoistHeadComment(node)
    if (doc.commentBefore) node.commentBefore = joinComments(doc.commentBefore, node.commentBefore, '\n\n')
    if (doc.comment) node.comment = joinComments(node.comment, doc.comment, '\n')
    out.push({node, text: chunk})
  }
  return out
}

/** The first scalar key that appears twice in one map of the tree, if any (iterative: no recursion limit). */
export function duplicateKey(root: Node): string | undefined {
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const n = stack.pop()
    if (isMap(n)) {
      const seen = new Set<string>()
      for (const pair of n.items) {
        if (isScalar(pair.key)) {
          const key = pair.key.value === null || pair.key.value === undefined ? '' : String(pair.key.value)
          if (seen.has(key)) return key
          seen.add(key)
        } else if (pair.key) stack.push(pair.key)
        if (pair.value) stack.push(pair.value)
      }
    } else if (isSeq(n)) {
      for (const item of n.items) stack.push(item)
    }
  }
  return undefined
}

/**
 * `key: # comment` over a block sequence or map: the yaml package reads that comment as the
 * value's commentBefore and would write it on its own line above the first item, where kyaml keeps
 * it on the key's line (and functions such as apply-setters look for it there). The first line of
 * such a commentBefore that stood on the key's line in `text` becomes the key's comment, which the
 * yaml package writes back after `key:`. Iterative: no recursion limit.
 */
export function keepKeyLineComments(root: Node, text: string): void {
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const n = stack.pop()
    if (isMap(n)) {
      for (const pair of n.items) {
        const key = pair.key as Node | null
        const value = pair.value as Node | null
        if (value) stack.push(value)
        if (!key || !value || !(isMap(value) || isSeq(value)) || value.flow || !value.commentBefore) continue
        if (!isScalar(key) || key.comment || !key.range || !value.range) continue
        const between = text.slice(key.range[1], value.range[0])
        const hash = between.indexOf('#')
        if (hash < 0 || between.slice(0, hash).includes('\n')) continue
        const [first, ...rest] = value.commentBefore.split('\n')
        key.comment = first
        value.commentBefore = rest.length > 0 ? rest.join('\n') : undefined
      }
    } else if (isSeq(n)) {
      for (const item of n.items) stack.push(item)
    }
  }
}

/**
 * Moves the comment above a top-level map's first key onto the map itself, where the yaml
 * package puts the head comment of a list item: an item then has its head comment in the same
 * place whether it was read from a file or from a ResourceList.
 */
export function hoistHeadComment(node: Node): void {
  if (!isMap(node)) return
  const first = node.items[0]
  const key = first && isPair(first) ? (first.key as Node | null) : null
  if (key && typeof key === 'object' && key.commentBefore) {
    node.commentBefore = joinComments(node.commentBefore, key.commentBefore, '\n')
    key.commentBefore = undefined
  }
}

interface YamlErrorLike {
  message: string
  pos?: [number, number]
}

function countNewlines(text: string): number {
  let n = 0
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++
  return n
}

/** The parser's message without its own position, then "line N, column C" of the whole stream. */
function atLine(error: YamlErrorLike, chunk: string, lineOffset: number): string {
  const message = firstLine(error.message).replace(/ at line \d+, column \d+:?$/, '')
  const pos = error.pos?.[0]
  if (pos === undefined || pos < 0 || pos > chunk.length) return message
  const line = countNewlines(chunk.slice(0, pos)) + 1 + lineOffset
  const column = pos - chunk.lastIndexOf('\n', pos - 1)
  return `line ${line}, column ${column}: ${message}`
}

function malformed(kind: ErrorKind, origin: string, message: string): FnrError {
  return new FnrError(kind, `${origin}: MalformedYAMLError: ${firstLine(message)}`)
}

function joinComments(a: string | null | undefined, b: string | null | undefined, sep: string): string {
  if (!a) return b ?? ''
  if (!b) return a
  return `${a}${sep}${b}`
}

/**
 * kyaml's DeriveSeqIndentStyle: the style of the first block sequence whose key line can be
 * found, `compact` when `- ` is at the key's column and `wide` when it is two columns further.
 */
export function deriveSeqIndent(text: string): SeqIndent {
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const at = line.indexOf('- ')
    if (at < 0) continue
    if (!/^ *$/.test(line.slice(0, at))) continue
    let keyLine: string | undefined
    for (let j = i - 1; j >= 0; j--) {
      const candidate = lines[j]!
      if (trimSpaces(candidate).startsWith('#')) continue
      keyLine = candidate.split('#', 1)[0]!
      break
    }
    if (keyLine === undefined || keyLine === '') continue
    const keyIndent = keyLine.length - keyLine.replace(/^ +/, '').length
    const trimmed = trimSpaces(keyLine)
    if ((trimmed.match(/:/g) ?? []).length !== 1 || !trimmed.endsWith(':')) continue
    if (at === keyIndent) return 'compact'
    if (at - keyIndent === 2) return 'wide'
  }
  return 'compact'
}

function trimSpaces(s: string): string {
  return s.replace(/^ +| +$/g, '')
}

/** Removes blank-line markers: kpt (go-yaml v3) does not keep blank lines between nodes. */
export function dropBlankLines(node: Node | null | undefined): void {
  if (!node) return
  node.spaceBefore = false
  if (isMap(node)) {
    for (const pair of node.items) {
      if (isPair(pair)) {
        dropBlankLines(pair.key as Node | null)
        dropBlankLines(pair.value as Node | null)
      }
    }
  } else if (isSeq(node)) {
    for (const item of node.items) dropBlankLines(item as Node | null)
  }
}

let renderDoc: Document | undefined

/**
 * Renders one node as a standalone YAML document (no `---`), in the given sequence indentation.
 * The node is not modified and stays usable in its own document.
 */
export function stringifyNode(node: Node, seqIndent: SeqIndent = 'compact'): string {
  renderDoc ??= new Document(null, PARSE_OPTIONS)
  renderDoc.contents = node
  try {
    return renderDoc.toString({...TO_STRING, indentSeq: seqIndent === 'wide'})
  } catch (error) {
    throw new FnrError('InvalidArgument', `cannot write resource: ${firstLine((error as Error).message)}`)
  } finally {
    renderDoc.contents = null
  }
}

/** Indents every non-empty line of a block of text. */
export function indentLines(text: string, prefix: string, firstPrefix = prefix): string {
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n')
  return lines.map((l, i) => (l === '' ? '' : (i === 0 ? firstPrefix : prefix) + l)).join('\n') + '\n'
}

// ---------------------------------------------------------------------------------------------
// Scalars

/** A string scalar that reads back as the same string in any YAML 1.1/1.2 parser. */
export function stringScalar(value: string): Scalar<string> {
  const s = new Scalar(value)
  if (needsQuotes(value)) s.type = Scalar.QUOTE_DOUBLE
  return s
}

/** A single-quoted string scalar, the style kpt uses for the annotations it adds. */
export function quotedScalar(value: string): Scalar<string> {
  const s = new Scalar(value)
  s.type = Scalar.QUOTE_SINGLE
  return s
}

const YAML11_BOOL = /^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$/

/** True when a plain scalar with this text would not read back as this string. */
export function needsQuotes(value: string): boolean {
  return typeof resolvePlain(value) !== 'string' || YAML11_BOOL.test(value)
}

const FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/
/** A plain scalar go-yaml v3 reads as an int (underscores removed first). */
export const GO_INT = /^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/

/** The value of a plain scalar as go-yaml v3 resolves it (null, bool, int, float or string). */
export function resolvePlain(text: string): string | number | boolean | null {
  switch (text) {
    case '':
    case '~':
    case 'null':
    case 'Null':
    case 'NULL':
      return null
    case 'true':
    case 'True':
    case 'TRUE':
      return true
    case 'false':
    case 'False':
    case 'FALSE':
      return false
    case '.inf':
    case '.Inf':
    case '.INF':
    case '+.inf':
    case '+.Inf':
    case '+.INF':
      return Number.POSITIVE_INFINITY
    case '-.inf':
    case '-.Inf':
    case '-.INF':
      return Number.NEGATIVE_INFINITY
    case '.nan':
    case '.NaN':
    case '.NAN':
      return Number.NaN
  }
  const c = text.charCodeAt(0)
  const numberish = (c >= 48 && c <= 57) || c === 43 || c === 45 || c === 46
  if (!numberish) return text
  const plain = text.replace(/_/g, '')
  if (GO_INT.test(plain)) {
    const sign = plain.startsWith('-') ? -1 : 1
    const digits = plain.replace(/^[-+]/, '')
    let n: number
    if (/^0[xX]/.test(digits)) n = Number.parseInt(digits.slice(2), 16)
    else if (/^0[oO]/.test(digits)) n = Number.parseInt(digits.slice(2), 8)
    else if (/^0[bB]/.test(digits)) n = Number.parseInt(digits.slice(2), 2)
    else if (digits.length > 1 && digits.startsWith('0')) n = Number.parseInt(digits, 8)
    else n = Number.parseInt(digits, 10)
    return sign * n
  }
  if (FLOAT.test(plain)) return Number.parseFloat(plain)
  return text
}

/** Most nodes that aliases may add when a document is turned into plain values ("billion laughs" guard). */
export const MAX_ALIAS_EXPANDED_NODES = 100_000

/**
 * The plain JavaScript value of a node, with scalars typed as go-yaml v3 would type them. Used
 * where types matter (JSON files, result values); metadata is read as strings elsewhere.
 * Aliases are expanded; a document whose aliases expand to more than MAX_ALIAS_EXPANDED_NODES
 * nodes is refused with FnrError('InvalidArgument') instead of being built.
 */
export function toTyped(node: unknown): unknown {
  const anchors = new Map<string, {value: unknown; size: number}>()
  // Nodes built so far (an expanded alias counts with every node it copies).
  let built = 0
  let expanded = 0
  const walk = (n: unknown): unknown => {
    if (n === null || n === undefined) return null
    const start = built
    built++
    if (isAlias(n)) {
      const target = anchors.get((n as Alias).source)
      if (target === undefined) return null
      expanded += target.size
      if (expanded > MAX_ALIAS_EXPANDED_NODES) {
        throw new FnrError('InvalidArgument', `YAML aliases expand to more than ${MAX_ALIAS_EXPANDED_NODES} nodes; refusing to expand them`)
      }
      built += target.size
      return structuredClone(target.value)
    }
    let v: unknown
    if (isScalar(n)) v = scalarValue(n)
    else if (isMap(n)) {
      const o: Record<string, unknown> = {}
      for (const pair of n.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : String(walk(pair.key))
        if (key === '<<' && isAlias(pair.value)) {
          const merged = walk(pair.value)
          if (merged && typeof merged === 'object' && !Array.isArray(merged)) {
            for (const [k, mv] of Object.entries(merged)) if (!Object.hasOwn(o, k)) setOwn(o, k, mv)
          }
          continue
        }
        setOwn(o, key, walk(pair.value))
      }
      v = o
    } else if (isSeq(n)) v = n.items.map((i) => walk(i))
    else v = null
    const anchor = (n as {anchor?: string}).anchor
    if (anchor) anchors.set(anchor, {value: v, size: built - start})
    return v
  }
  return walk(node)
}

/** o[key] = value, also for "__proto__" (which plain assignment would turn into the prototype). */
function setOwn(o: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(o, key, {value, enumerable: true, writable: true, configurable: true})
  else o[key] = value
}

function scalarValue(s: Scalar): unknown {
  const text = s.value === null || s.value === undefined ? '' : String(s.value)
  switch (s.tag) {
    case 'tag:yaml.org,2002:str':
      return text
    case 'tag:yaml.org,2002:null':
      return null
    case 'tag:yaml.org,2002:bool':
    case 'tag:yaml.org,2002:int':
    case 'tag:yaml.org,2002:float': {
      const r = resolvePlain(text)
      return typeof r === 'string' ? text : r
    }
  }
  if (s.type !== undefined && s.type !== Scalar.PLAIN) return text
  if (typeof s.value !== 'string') return s.value ?? null
  return resolvePlain(text)
}

/** The string value of a scalar node, or undefined for anything else. */
export function scalarString(node: unknown): string | undefined {
  if (!isScalar(node)) return undefined
  if (node.value === null || node.value === undefined) return ''
  return String(node.value)
}

/** The value node under `key` in a map node (undefined when absent or not a map). */
export function getIn(node: unknown, key: string): Node | undefined {
  if (!isMap(node)) return undefined
  for (const pair of node.items) {
    if (isScalar(pair.key) && String(pair.key.value) === key) return (pair.value ?? undefined) as Node | undefined
  }
  return undefined
}

/** The pair for `key` in a map node. */
export function pairOf(map: YAMLMap<unknown, unknown>, key: string) {
  for (const pair of map.items) {
    if (isScalar(pair.key) && String(pair.key.value) === key) return pair
  }
  return undefined
}
