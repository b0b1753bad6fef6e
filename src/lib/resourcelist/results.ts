/**
 * Function results: reading them from a function's output, printing them the way kpt
 * 1.0.0-beta.56 does, counting error results, and the FunctionResultList kpt writes to
 * `<results-dir>/results.yaml` (byte-compatible with kpt's encoder).
 *
 * Rules (as kpt v1.0.0-beta.56 reads and writes results):
 * - `results` is a list, or the legacy `{items: [...]}` wrapping of the old TS SDK;
 *   `resourceRef.metadata.{name,namespace}` (old kyaml) and `field.suggestedValue` (renamed
 *   proposedValue) are accepted.
 * - A result without severity prints as `[info]`; only `severity: error` counts as an error
 *   result (the spec's default of `error` is not applied, as in kpt).
 * - Console line: `[severity] apiVersion/kind/namespace/name field.path: message`; parts that are
 *   empty are left out, the `field.path` part is there whenever the result has a `field`.
 * - Error results do not fail a run by themselves (kpt passes a function that exits 0 with error
 *   results); callers decide, using countErrorResults.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {isMap, isSeq, type Node} from 'yaml'

import {FnrError} from '../errors.js'
import {formatResult, type FunctionResult, type ResultResourceRef} from '../process/results.js'
import {goYaml} from './goyaml.js'
import type {ResourceList} from './read.js'
import {getIn, isNullScalar, scalarString, toTyped} from './yaml.js'

export type {FunctionResult, ResultResourceRef} from '../process/results.js'
export {formatResult} from '../process/results.js'

/**
 * The results of a function's output (a parsed ResourceList, or its `results` node). Throws
 * FnrError('FunctionFailed') when `results` is there but is not a list of results, as kpt fails
 * the function then.
 */
export function extractResults(source: ResourceList | Node | null | undefined): FunctionResult[] {
  let node: unknown = source && 'items' in source && 'wrapped' in source ? source.results : source
  if (node === null || node === undefined) return []
  if (isMap(node)) {
    const items = getIn(node, 'items')
    if (isSeq(items) && items.items.length > 0) node = items
    else if (node.items.length === 0) return []
  }
  // no results: an empty value, or go-yaml's null (`~`, `null`), which kpt reads as none
  if (scalarString(node) === '' || isNullScalar(node as Node)) return []
  if (!isSeq(node)) throw new FnrError('FunctionFailed', 'function results must be a list')
  return node.items.map((item, i) => resultOf(item as Node, i))
}

/**
 * A scalar's text; a YAML null is the empty string, as in kpt (go-yaml decodes null into a
 * string field as ""), never the text "null" (the failsafe schema keeps it as that string).
 */
function text(n: unknown): string | undefined {
  return n !== undefined && n !== null && isNullScalar(n as Node) ? '' : scalarString(n)
}

function str(n: unknown): string | undefined {
  const s = text(n)
  return s === undefined || s === '' ? undefined : s
}

function resultOf(node: Node, i: number): FunctionResult {
  if (!isMap(node)) throw new FnrError('FunctionFailed', `function results[${i}] must be a mapping`)
  const r: FunctionResult = {message: text(getIn(node, 'message')) ?? ''}
  const severity = str(getIn(node, 'severity'))
  if (severity !== undefined) r.severity = severity

  const ref = getIn(node, 'resourceRef')
  if (isMap(ref)) {
    const rr: ResultResourceRef = {}
    const apiVersion = str(getIn(ref, 'apiVersion'))
    const kind = str(getIn(ref, 'kind'))
    let name = str(getIn(ref, 'name'))
    let namespace = str(getIn(ref, 'namespace'))
    const meta = getIn(ref, 'metadata')
    // kpt reads the legacy metadata form from the YAML text: a null name is "null" there.
    if (isMap(meta)) {
      const n = getIn(meta, 'name')
      if (n !== undefined && n !== null) name = scalarString(n)?.trim() || undefined
      const ns = scalarString(getIn(meta, 'namespace'))?.trim()
      if (ns && ns !== "''") namespace = ns
    }
    if (apiVersion !== undefined) rr.apiVersion = apiVersion
    if (kind !== undefined) rr.kind = kind
    if (name !== undefined) rr.name = name
    if (namespace !== undefined) rr.namespace = namespace
    r.resourceRef = rr
  }

  const field = getIn(node, 'field')
  if (isMap(field)) {
    const f: NonNullable<FunctionResult['field']> = {}
    const path = str(getIn(field, 'path'))
    if (path !== undefined) f.path = path
    const current = getIn(field, 'currentValue')
    if (current !== undefined) f.currentValue = toTyped(current)
    const proposed = getIn(field, 'proposedValue') ?? getIn(field, 'suggestedValue')
    if (proposed !== undefined) f.proposedValue = toTyped(proposed)
    r.field = f
  }

  const file = getIn(node, 'file')
  if (isMap(file)) {
    const f: NonNullable<FunctionResult['file']> = {}
    const path = str(getIn(file, 'path'))
    if (path !== undefined) f.path = path
    const index = str(getIn(file, 'index'))
    if (index !== undefined) {
      const n = Number(index)
      if (!Number.isInteger(n)) throw new FnrError('FunctionFailed', `function results[${i}]: file.index must be an integer`)
      f.index = n
    }
    r.file = f
  }

  const tags = getIn(node, 'tags')
  if (isMap(tags)) {
    const t: Record<string, string> = {}
    for (const pair of tags.items) {
      const k = scalarString(pair.key)
      if (k !== undefined) t[k] = text(pair.value) ?? ''
    }
    r.tags = t
  }
  return r
}

/** Number of results with `severity: error`. */
export function countErrorResults(results: readonly FunctionResult[]): number {
  return results.filter((r) => r.severity === 'error').length
}

export interface BlockOptions {
  /** Show at most 4 lines, then a "...(N line(s) truncated...)" line (kpt's default). */
  truncate?: boolean
}

const MAX_LINES = 4

/** kpt's MultiLineFormatter: a titled, indented block of lines. */
function block(title: string, lines: readonly string[], quote: boolean, options: BlockOptions): string {
  const truncate = options.truncate ?? true
  let out = `  ${title}:\n`
  const shown = truncate ? lines.slice(0, MAX_LINES) : lines
  for (const raw of shown) {
    const line = raw.replace(/\n/g, ' ')
    out += `    ${quote ? goQuote(line) : line}\n`
  }
  if (lines.length > shown.length) {
    out += `    ...(${lines.length - shown.length} line(s) truncated, use '--truncate-output=false' to disable)\n`
  }
  return out
}

/** The `  Results:` block kpt prints under `[PASS]`/`[FAIL]` ('' when there are no results). */
export function formatResultsBlock(results: readonly FunctionResult[], options: BlockOptions = {}): string {
  if (results.length === 0) return ''
  return block('Results', results.map(formatResult), false, options)
}

/** The `  Stderr:` block kpt prints for a function's stderr ('' when empty): lines Go-quoted. */
export function formatStderrBlock(stderr: string, options: BlockOptions = {}): string {
  if (stderr.length === 0) return ''
  return block('Stderr', stderr.split('\n'), true, options)
}

/**
 * The stderr kpt keeps of an `image:` function (its container runtime's output read line by
 * line): each line without its `\r`, joined with `\n`, so a final newline is gone (no `""`
 * line on the console, `stderr: text` rather than `stderr: |` in results.yaml). An `exec:`
 * function's stderr is kept as it is, as kpt does.
 */
export function containerStderr(text: string): string {
  if (text === '') return ''
  const lines = text.split('\n')
  if (lines.at(-1) === '') lines.pop()
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l)).join('\n')
}

/**
 * A duration as kpt prints it in `[PASS] "fn" in 200ms`: truncated to 100 ms, in Go's
 * time.Duration format (`0s`, `100ms`, `1.2s`, `1m5s`, `1h0m0.5s`).
 */
export function formatKptDuration(ms: number): string {
  const tenths = Math.max(0, Math.floor(ms / 100))
  if (tenths === 0) return '0s'
  if (tenths < 10) return `${tenths * 100}ms`
  const h = Math.floor(tenths / 36_000)
  const m = Math.floor((tenths % 36_000) / 600)
  const secTenths = tenths % 600
  const sec = `${Math.floor(secTenths / 10)}${secTenths % 10 ? `.${secTenths % 10}` : ''}s`
  return h > 0 ? `${h}h${m}m${sec}` : m > 0 ? `${m}m${sec}` : sec
}

/** Go's %q (strconv.Quote) for a line of text. */
export function goQuote(s: string): string {
  let out = '"'
  for (const ch of s) {
    const c = ch.codePointAt(0)!
    switch (ch) {
      case '"': out += '\\"'; continue
      case '\\': out += '\\\\'; continue
      case '\x07': out += '\\a'; continue
      case '\b': out += '\\b'; continue
      case '\f': out += '\\f'; continue
      case '\n': out += '\\n'; continue
      case '\r': out += '\\r'; continue
      case '\t': out += '\\t'; continue
      case '\v': out += '\\v'; continue
    }
    if (ch === ' ' || !/[\p{C}\p{Z}]/u.test(ch)) {
      out += ch
    } else if (c < 0x80) {
      out += `\\x${c.toString(16).padStart(2, '0')}`
    } else if (c < 0x10000) {
      out += `\\u${c.toString(16).padStart(4, '0')}`
    } else {
      out += `\\U${c.toString(16).padStart(8, '0')}`
    }
  }
  return `${out}"`
}

// ---------------------------------------------------------------------------------------------
// FunctionResultList (results.yaml)

/** What one function run contributes to the FunctionResultList. */
export interface FunctionRunRecord {
  /** The image, for container functions (exclusive with exec). */
  image?: string
  /** The exec string exactly as given, for exec functions. */
  exec?: string
  /** The function's stderr (omitted when empty). */
  stderr?: string
  /** The function's own exit code. */
  exitCode: number
  results?: readonly FunctionResult[]
}

export interface FunctionResultList {
  apiVersion: 'kpt.dev/v1'
  kind: 'FunctionResultList'
  metadata: {name: 'fnresults'}
  /** The overall exit code of the command. */
  exitCode: number
  items: FunctionRunRecord[]
}

export function buildFunctionResultList(items: readonly FunctionRunRecord[], exitCode: number): FunctionResultList {
  return {apiVersion: 'kpt.dev/v1', kind: 'FunctionResultList', metadata: {name: 'fnresults'}, exitCode, items: [...items]}
}

/** results.yaml text, as kpt's encoder writes it (wide lists, go-yaml quoting). */
export function stringifyFunctionResultList(list: FunctionResultList): string {
  const top = new Map<string, unknown>([
    ['apiVersion', list.apiVersion],
    ['kind', list.kind],
    ['metadata', new Map([['name', list.metadata.name]])],
    ['exitCode', list.exitCode],
    ['items', list.items.length > 0 ? list.items.map(recordStruct) : undefined],
  ])
  return goYaml(top, {wideSeq: true})
}

function recordStruct(r: FunctionRunRecord): Map<string, unknown> {
  return new Map<string, unknown>([
    ['image', r.image || undefined],
    ['exec', r.exec || undefined],
    ['stderr', r.stderr || undefined],
    ['exitCode', r.exitCode],
    ['results', r.results && r.results.length > 0 ? r.results.map(resultStruct) : undefined],
  ])
}

function resultStruct(r: FunctionResult): Map<string, unknown> {
  const ref = r.resourceRef
  const field = r.field
  const file = r.file
  return new Map<string, unknown>([
    ['message', r.message || undefined],
    ['severity', r.severity || undefined],
    [
      'resourceRef',
      ref
        ? new Map<string, unknown>([
            ['apiVersion', ref.apiVersion || undefined],
            ['kind', ref.kind || undefined],
            ['name', ref.name || undefined],
            ['namespace', ref.namespace || undefined],
          ])
        : undefined,
    ],
    [
      'field',
      field
        ? new Map<string, unknown>([
            ['path', field.path || undefined],
            ['currentValue', field.currentValue ?? undefined],
            ['proposedValue', field.proposedValue ?? undefined],
          ])
        : undefined,
    ],
    [
      'file',
      file
        ? new Map<string, unknown>([
            ['path', file.path || undefined],
            ['index', file.index || undefined],
          ])
        : undefined,
    ],
    ['tags', r.tags && Object.keys(r.tags).length > 0 ? r.tags : undefined],
  ])
}

/** Writes `<dir>/results.yaml` (creating dir) and returns its path. */
export async function writeResultsFile(dir: string, list: FunctionResultList): Promise<string> {
  const file = join(dir, 'results.yaml')
  try {
    await mkdir(dir, {recursive: true})
    await writeFile(file, stringifyFunctionResultList(list))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const why = code === 'EEXIST' || code === 'ENOTDIR' ? 'not a directory' : code === 'EISDIR' ? `${file} is a directory` : (code ?? (error as Error).message)
    const kind = code === 'EACCES' || code === 'EPERM' ? 'PermissionDenied' : code === undefined ? 'Internal' : 'InvalidArgument'
    throw new FnrError(kind, `cannot write results to ${dir}: ${why}`, {cause: error})
  }
  return file
}
