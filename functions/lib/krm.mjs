// Shared plumbing for fnr's own KRM functions: read a ResourceList from stdin, hand its nodes to a
// transform, write the ResourceList back to stdout as block YAML, report results.
//
// Everything works on the `yaml` package's Document API so that comments, key order and scalar
// styles survive. Documents are parsed with the failsafe schema: every scalar stays a string and
// is written back exactly as it was read (`010`, `0x1F`, `yes`, `"42"` all round-trip unchanged).
// New string values are quoted where a YAML 1.1 or 1.2 reader would otherwise see a bool, null or
// number (see strScalar).
import {readFileSync} from 'node:fs'
import {Pair, Scalar, YAMLMap, YAMLSeq, isAlias, isMap, isScalar, isSeq, parseDocument, visit} from 'yaml'

export const LOCAL_CONFIG = 'config.kubernetes.io/local-config'
export const PATH_ANNOTATION = 'internal.config.kubernetes.io/path'
export const INDEX_ANNOTATION = 'internal.config.kubernetes.io/index'
export const LEGACY_PATH_ANNOTATION = 'config.kubernetes.io/path'
export const LEGACY_INDEX_ANNOTATION = 'config.kubernetes.io/index'

const OUTPUT_OPTIONS = {lineWidth: 0, minContentWidth: 0, flowCollectionPadding: false, indentSeq: false}

/** A failure the user can fix (bad functionConfig, unresolvable input): becomes an error result. */
export class KrmError extends Error {
  /** @param {string} message @param {object} [result] extra result fields (resourceRef, field, file) */
  constructor(message, result = {}) {
    super(message)
    this.result = result
  }
}

// ---------------------------------------------------------------------------------------------
// Scalars and paths

const AMBIGUOUS_PLAIN = /^(?:~|null|Null|NULL|y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|=|<<)$/
const NUMBER_LIKE = /^[-+]?(?:\.?[0-9]|\.(?:inf|Inf|INF)$)|^\.(?:nan|NaN|NAN)$/

/** True when a plain scalar with this text would not be read back as this string. */
export function needsQuotes(value) {
  return value === '' || AMBIGUOUS_PLAIN.test(value) || NUMBER_LIKE.test(value)
}

/** A string scalar node that any YAML reader (1.1 or 1.2) reads back as the same string. */
export function strScalar(value) {
  const s = new Scalar(String(value))
  if (needsQuotes(s.value)) s.type = Scalar.QUOTE_DOUBLE
  return s
}

/** Follow an alias to its anchored node. */
function deref(doc, node) {
  return isAlias(node) ? node.resolve(doc) : node
}

let currentDoc = null

/** The child node of a map (by key) or a sequence (by index); undefined when absent. */
export function child(node, key) {
  node = deref(currentDoc, node)
  if (isMap(node)) return deref(currentDoc, node.get(key, true))
  if (isSeq(node) && typeof key === 'number') return deref(currentDoc, node.get(key, true))
  return undefined
}

/** The node at a path of keys / indices. */
export function at(node, ...path) {
  let cur = node
  for (const key of path) {
    cur = child(cur, key)
    if (cur === undefined || cur === null) return undefined
  }
  return cur
}

/** The string value of a scalar node, or undefined for anything else. */
export function str(node) {
  node = deref(currentDoc, node)
  if (!isScalar(node)) return undefined
  return node.value === null || node.value === undefined ? '' : String(node.value)
}

export function strAt(node, ...path) {
  return str(at(node, ...path))
}

/** A plain scalar that means "nothing here" (`key:`, `key: null`, `key: ~`). */
export function isNullScalar(node) {
  return isScalar(node) && (node.value === null || node.value === undefined ||
    (node.type === Scalar.PLAIN && (node.value === '' || node.value === '~' || /^(?:null|Null|NULL)$/.test(node.value))))
}

function pairIndex(map, key) {
  return map.items.findIndex((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === key)
}

function insertPair(map, pair, after) {
  const i = after === undefined ? -1 : pairIndex(map, after)
  if (i >= 0) map.items.splice(i + 1, 0, pair)
  else map.items.push(pair)
}

/**
 * The map at `key` inside `map`, created (block style) when missing or null. An empty flow map
 * (`labels: {}`) is switched to block style since entries are about to be added.
 * Returns undefined when the field holds something other than a map.
 */
export function ensureMap(map, key, after) {
  const existing = child(map, key)
  if (isMap(existing)) {
    if (existing.flow && existing.items.length === 0) existing.flow = false
    return existing
  }
  if (existing !== undefined && !isNullScalar(existing)) return undefined
  const created = new YAMLMap()
  if (existing !== undefined) {
    const pair = map.items[pairIndex(map, key)]
    if (existing.comment) created.comment = existing.comment
    pair.value = created
  } else {
    insertPair(map, new Pair(strScalar(key), created), after)
  }
  return created
}

/** Like ensureMap for a whole path; undefined if something on the way is not a map. */
export function ensureMapPath(node, ...path) {
  let cur = deref(currentDoc, node)
  for (const key of path) {
    if (!isMap(cur)) return undefined
    cur = ensureMap(cur, key)
  }
  return isMap(cur) ? cur : undefined
}

/**
 * Set a string field, keeping the existing scalar node (and so its comments and quoting) when
 * there is one. Returns true when the value changed or the field was added.
 */
export function setStr(map, key, value, after) {
  const existing = child(map, key)
  if (isScalar(existing)) {
    if (str(existing) === value && !isNullScalar(existing)) return false
    existing.value = value
    normaliseStringScalar(existing)
    return true
  }
  if (existing !== undefined) {
    const pair = map.items[pairIndex(map, key)]
    const s = strScalar(value)
    if (existing && existing.comment) s.comment = existing.comment
    pair.value = s
    return true
  }
  insertPair(map, new Pair(strScalar(key), strScalar(value)), after)
  return true
}

/** After changing a scalar's value to a string: make sure it is still read back as that string. */
function normaliseStringScalar(node) {
  const value = String(node.value)
  if (node.tag && node.tag !== 'tag:yaml.org,2002:str' && node.tag !== '!!str') delete node.tag
  if (node.type === Scalar.BLOCK_LITERAL || node.type === Scalar.BLOCK_FOLDED) {
    if (!value.includes('\n')) node.type = needsQuotes(value) ? Scalar.QUOTE_DOUBLE : Scalar.PLAIN
  } else if (node.type !== Scalar.QUOTE_DOUBLE && node.type !== Scalar.QUOTE_SINGLE) {
    node.type = needsQuotes(value) ? Scalar.QUOTE_DOUBLE : Scalar.PLAIN
  }
}

/** A plain JS value (strings, numbers, booleans, arrays, objects) as block-style nodes. */
export function toNode(value) {
  if (Array.isArray(value)) {
    const seq = new YAMLSeq()
    for (const v of value) if (v !== undefined) seq.items.push(toNode(v))
    return seq
  }
  if (value !== null && typeof value === 'object') {
    const map = new YAMLMap()
    for (const [k, v] of Object.entries(value)) if (v !== undefined) map.items.push(new Pair(strScalar(k), toNode(v)))
    return map
  }
  if (typeof value === 'number' || typeof value === 'boolean') return new Scalar(String(value))
  return strScalar(value === null ? '' : value)
}

/** A map node's string entries as [key, value] pairs; throws KrmError for non-string values. */
export function stringEntries(map, what) {
  map = deref(currentDoc, map)
  if (map === undefined || isNullScalar(map)) return []
  if (!isMap(map)) throw new KrmError(`${what} must be a map of strings`)
  const out = []
  for (const pair of map.items) {
    const key = str(pair.key)
    const value = pair.value === null || pair.value === undefined ? '' : str(pair.value)
    if (key === undefined || value === undefined) {
      throw new KrmError(`${what} must be a map of strings, but ${JSON.stringify(key ?? String(pair.key))} is not a string`)
    }
    out.push([key, isNullScalar(pair.value) ? '' : value])
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Resources

export function apiGroup(apiVersion) {
  const i = apiVersion.indexOf('/')
  return i < 0 ? '' : apiVersion.slice(0, i)
}

export function apiVersionOnly(apiVersion) {
  const i = apiVersion.indexOf('/')
  return i < 0 ? apiVersion : apiVersion.slice(i + 1)
}

/** {apiVersion, kind, group, name, namespace} of a resource node (missing fields are ""). */
export function meta(item) {
  const apiVersion = strAt(item, 'apiVersion') ?? ''
  return {
    apiVersion,
    group: apiGroup(apiVersion),
    kind: strAt(item, 'kind') ?? '',
    name: strAt(item, 'metadata', 'name') ?? '',
    namespace: strAt(item, 'metadata', 'namespace') ?? '',
  }
}

export function annotation(item, key) {
  return strAt(item, 'metadata', 'annotations', key)
}

/** kpt's rule (`config.kubernetes.io/local-config` set to anything but "false"). */
export function isLocalConfig(item) {
  const v = annotation(item, LOCAL_CONFIG)
  return v !== undefined && v !== '' && v.toLowerCase() !== 'false'
}

/** A result resourceRef for a resource node. */
export function resourceRef(item) {
  const m = meta(item)
  const ref = {apiVersion: m.apiVersion, kind: m.kind, name: m.name}
  if (m.namespace) ref.namespace = m.namespace
  return ref
}

/** A result file reference (path + index) from the orchestrator's annotations, if any. */
export function fileRef(item) {
  const path = annotation(item, PATH_ANNOTATION) ?? annotation(item, LEGACY_PATH_ANNOTATION)
  if (!path) return undefined
  const ref = {path}
  const index = annotation(item, INDEX_ANNOTATION) ?? annotation(item, LEGACY_INDEX_ANNOTATION)
  if (index !== undefined && /^\d+$/.test(index)) ref.index = Number(index)
  return ref
}

// ---------------------------------------------------------------------------------------------
// Reading and writing the ResourceList

/**
 * Move comments that sat on the same line as a `key:` or a `- ` back onto that line.
 * The yaml package reads `key: # c` followed by a block collection as a comment before the
 * collection, and `- # c` followed by a mapping as a comment before the mapping; written back,
 * both land on a line of their own. kpt (and anything that re-attaches comments by position from
 * its own copy of the input) would then keep both copies and duplicate the comment in the file.
 */
function restoreSameLineComments(doc) {
  visit(doc, {
    Map(_, map) {
      const token = map.srcToken
      if (!token || token.type !== 'block-map') return
      const sepOf = new Map()
      for (const item of token.items) if (item.value) sepOf.set(item.value, item.sep)
      for (const pair of map.items) {
        const v = pair.value
        if (!v || !(isMap(v) || isSeq(v)) || v.flow || !v.commentBefore || !isScalar(pair.key)) continue
        const sep = sepOf.get(v.srcToken)
        if (!sep || !commentBeforeNewline(sep, 'map-value-ind')) continue
        const [first, ...rest] = v.commentBefore.split('\n')
        pair.key.comment = pair.key.comment ? `${pair.key.comment}\n${first}` : first
        v.commentBefore = rest.length ? rest.join('\n') : undefined
      }
    },
    Seq(_, seq) {
      const token = seq.srcToken
      if (!token || token.type !== 'block-seq') return
      const startOf = new Map()
      for (const item of token.items) if (item.value) startOf.set(item.value, item.start)
      for (const node of seq.items) {
        if (!isMap(node) || node.flow || !node.commentBefore || node.items.length === 0) continue
        const start = startOf.get(node.srcToken)
        if (!start || !commentBeforeNewline(start, 'seq-item-ind')) continue
        const firstKey = node.items[0].key
        if (!isScalar(firstKey)) continue
        // Lines above the `- ` stay before the item; the one after it and those below it (before
        // the first key) belong to the mapping's first key.
        const lines = node.commentBefore.split('\n')
        const before = commentLinesBefore(start, 'seq-item-ind')
        const inside = lines.slice(before).join('\n')
        firstKey.commentBefore = firstKey.commentBefore ? `${inside}\n${firstKey.commentBefore}` : inside
        node.commentBefore = before > 0 ? lines.slice(0, before).join('\n') : undefined
      }
    },
  })
}

/** Number of comment lines among `tokens` before the indicator. */
function commentLinesBefore(tokens, indicator) {
  let n = 0
  for (const t of tokens) {
    if (t.type === indicator) break
    if (t.type === 'comment') n++
  }
  return n
}

function commentBeforeNewline(tokens, indicator) {
  let seen = false
  for (const t of tokens) {
    if (t.type === indicator) seen = true
    else if (!seen) continue
    else if (t.type === 'comment') return true
    else if (t.type === 'newline') return false
  }
  return false
}

/**
 * JSON input is all flow collections and double-quoted strings; the output must be block YAML.
 * Strings that read back the same way unquoted lose their quotes (JSON numbers, booleans and
 * null are plain already and stay so).
 */
function toBlockStyle(doc) {
  visit(doc, {
    Map(_, n) { n.flow = false },
    Seq(_, n) { n.flow = false },
    Scalar(_, n) {
      if (n.type === Scalar.QUOTE_DOUBLE && !needsQuotes(String(n.value))) n.type = Scalar.PLAIN
    },
  })
}

/**
 * Parse a ResourceList. Returns {doc, root, items: YAMLSeq, functionConfig: YAMLMap | undefined}.
 * Throws Error (not KrmError) on malformed input: there is no ResourceList to attach results to.
 */
export function parseResourceList(text) {
  if (text.trim() === '') throw new Error('empty input: expected a ResourceList on stdin')
  const doc = parseDocument(text, {schema: 'failsafe', keepSourceTokens: true, prettyErrors: false})
  if (doc.errors.length > 0) throw new Error(`cannot parse input: ${doc.errors[0].message.split('\n')[0]}`)
  currentDoc = doc
  const root = doc.contents
  if (!isMap(root)) throw new Error('input is not a ResourceList: expected a mapping')
  const kind = strAt(root, 'kind')
  if (kind !== 'ResourceList') throw new Error(`input is not a ResourceList: kind is ${JSON.stringify(kind ?? '')}`)
  if (root.flow) toBlockStyle(doc)
  else restoreSameLineComments(doc)
  let items = child(root, 'items')
  if (items === undefined || isNullScalar(items)) {
    items = new YAMLSeq()
    if (child(root, 'items') === undefined) root.items.push(new Pair(strScalar('items'), items))
    else root.items[pairIndex(root, 'items')].value = items
  }
  if (!isSeq(items)) throw new Error('input is not a ResourceList: items must be a list')
  const fc = child(root, 'functionConfig')
  return {doc, root, items, functionConfig: isMap(fc) ? fc : undefined}
}

/** Serialise the ResourceList with the given results (replacing any the input carried). */
export function formatResourceList(rl, results) {
  const i = pairIndex(rl.root, 'results')
  if (i >= 0) rl.root.items.splice(i, 1)
  if (results.length > 0) rl.root.items.push(new Pair(strScalar('results'), toNode(results)))
  const out = rl.doc.toString(OUTPUT_OPTIONS)
  return out.endsWith('\n') ? out : `${out}\n`
}

/**
 * Run a function: `transform(ctx)` gets {doc, items, functionConfig, results, resources()} and
 * edits the nodes in place; it may replace `ctx.items.items` to drop or add resources.
 * A thrown KrmError becomes an error result. Any error result makes the exit code 1 (the
 * ResourceList, with its results, is still written so that kpt can show them).
 */
export function run(name, transform) {
  let rl
  try {
    rl = parseResourceList(readFileSync(0, 'utf8'))
  } catch (err) {
    process.stderr.write(`${name}: ${err.message}\n`)
    process.exitCode = 1
    return
  }
  const results = []
  const ctx = {
    doc: rl.doc,
    items: rl.items,
    functionConfig: rl.functionConfig,
    results,
    /** The items that are resources (mappings). */
    resources: () => rl.items.items.map((n) => deref(rl.doc, n)).filter((n) => isMap(n)),
  }
  try {
    transform(ctx)
  } catch (err) {
    if (!(err instanceof KrmError)) {
      process.stderr.write(`${name}: internal error: ${err && err.stack ? err.stack : err}\n`)
      process.exitCode = 1
      return
    }
    results.push({message: err.message, severity: 'error', ...err.result})
  }
  process.stdout.write(formatResourceList(rl, results))
  const errors = results.filter((r) => r.severity === 'error')
  if (errors.length > 0) {
    for (const r of errors) process.stderr.write(`${name}: error: ${r.message}\n`)
    process.exitCode = 1
  }
}

/** The resourceRef of a functionConfig for config error results (omitted when it has no name). */
export function configRef(fc) {
  if (!fc) return {}
  const m = meta(fc)
  if (!m.kind || !m.name) return {}
  return {resourceRef: resourceRef(fc)}
}
