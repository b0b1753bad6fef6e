/**
 * Reading structured results out of a function's output without keeping the parsed document:
 * used on failure paths (exec evaluator, wrapper server) to report what went wrong. The YAML
 * parser is imported lazily so the success path never pays for it.
 */
import type {FunctionResult} from '../function-result.js'
import {nextTurn} from '../turns.js'

export type {FunctionResult, ResultResourceRef} from '../function-result.js'

function asRecord(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
}

/** A value as text; a nested value as bounded JSON (String() of a deeply nested array recurses). */
function scalarText(v: unknown): string {
  return v !== null && typeof v === 'object' ? JSON.stringify(boundedValue(v)) : String(v)
}

/** Normalises one result, accepting the legacy shapes kpt accepts (resourceRef.metadata, field.suggestedValue). */
export function normaliseResult(raw: unknown): FunctionResult | undefined {
  const r = asRecord(raw)
  if (!r) return undefined
  const out: FunctionResult = {message: typeof r.message === 'string' ? r.message : scalarText(r.message ?? '')}
  if (typeof r.severity === 'string' && r.severity !== '') out.severity = r.severity
  const ref = asRecord(r.resourceRef)
  if (ref) {
    const meta = asRecord(ref.metadata)
    out.resourceRef = {
      apiVersion: typeof ref.apiVersion === 'string' ? ref.apiVersion : undefined,
      kind: typeof ref.kind === 'string' ? ref.kind : undefined,
      name: typeof ref.name === 'string' ? ref.name : typeof meta?.name === 'string' ? meta.name : undefined,
      namespace: typeof ref.namespace === 'string' ? ref.namespace : typeof meta?.namespace === 'string' ? meta.namespace : undefined,
    }
  }
  const field = asRecord(r.field)
  if (field) {
    out.field = {
      path: typeof field.path === 'string' ? field.path : undefined,
      currentValue: field.currentValue,
      proposedValue: field.proposedValue ?? field.suggestedValue,
    }
  }
  const file = asRecord(r.file)
  if (file) out.file = {path: typeof file.path === 'string' ? file.path : undefined, index: typeof file.index === 'number' ? file.index : undefined}
  const tags = asRecord(r.tags)
  if (tags) out.tags = Object.fromEntries(Object.entries(tags).map(([k, v]) => [k, scalarText(v)]))
  return out
}

/** The results of a parsed ResourceList object (list form or the legacy {items: [...]} form), within RESULT_LIMITS. */
export function resultsOf(resourceList: unknown): FunctionResult[] {
  return fromParsed(resourceList, [])
}

/**
 * The top-level `results:` entry of a block-style YAML document (from the `results:` line at
 * column 0 to the next line that starts another top-level key or document), or undefined.
 */
export function resultsSection(text: string): string | undefined {
  const start = /^results[ \t]*:/m.exec(text)
  if (!start) return undefined
  let end = text.length
  for (let at = text.indexOf('\n', start.index); at >= 0 && at + 1 < text.length; at = text.indexOf('\n', at + 1)) {
    const c = text[at + 1]!
    const continues = c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '#' || (c === '-' && !text.startsWith('---', at + 1))
    if (!continues) {
      end = at + 1
      break
    }
  }
  return text.slice(start.index, end)
}

/**
 * Limits on reading results (docs/process.md, "Reading results: bounded work whatever the output"). A failing function's stdout is up to the message
 * limit (6 MiB) and is written by code fnr does not trust: reading its results must take
 * bounded time and memory whatever its shape. Before these limits, 3 MB of `- a` lines took
 * 25 s and 640 MB of heap, 6 MB of ordinary results 22 s and 430 MB (bench/results-parse.ts).
 */
export const RESULT_LIMITS = {
  /** Results read at most; the rest are counted and said to be left out. */
  maxResults: 1000,
  /**
   * YAML bytes handed to the parser at most, over all results of one output. The yaml package
   * reads about 0.5-1 MB/s on a loaded 2-core machine, so this bounds the blocked time.
   */
  maxParseBytes: 512 * 1024,
  /** A results section (or a whole output) this small is parsed in one go, as written. */
  wholeParseBytes: 64 * 1024,
  /** Results are parsed in batches of about this many bytes. */
  batchBytes: 64 * 1024,
  /** Deeper flow nesting (`[`, `{`) or block indentation is not parsed (the parser recurses). */
  maxFlowDepth: 64,
  maxIndent: 256,
  /** Entries of a failed batch parsed on their own, at most (per output). */
  maxRetries: 64,
  /** Values kept in a result (field values, tags) are cut at this depth and this many nodes. */
  maxValueDepth: 16,
  maxValueNodes: 1000,
} as const

/** The results read from an output, and what was left out and why (empty when nothing was). */
export interface ResultsReport {
  results: FunctionResult[]
  /** One sentence per kind of cut, e.g. "read 1000 of 750000 results (the limit is 1000)". */
  cuts: string[]
}

/** The deepest `[`/`{` nesting in the text (quotes not considered: an over-estimate at worst). */
function flowDepth(text: string, from = 0, to = text.length): number {
  let depth = 0
  let max = 0
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x5b || c === 0x7b) {
      if (++depth > max) max = depth
    } else if ((c === 0x5d || c === 0x7d) && depth > 0) depth--
  }
  return max
}

/** The deepest indentation of any line (spaces at a line start). */
function maxIndent(text: string, from = 0, to = text.length): number {
  let max = 0
  let run = -1
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x0a) run = 0
    else if (run >= 0 && c === 0x20) run++
    else if (run >= 0) {
      if (run > max) max = run
      run = -1
    }
  }
  return max
}

function tooDeep(text: string, from = 0, to = text.length): boolean {
  return flowDepth(text, from, to) > RESULT_LIMITS.maxFlowDepth || maxIndent(text, from, to) > RESULT_LIMITS.maxIndent
}

/** A copy of a parsed value cut at maxValueDepth and maxValueNodes, so later JSON/String calls are bounded. */
function boundedValue(value: unknown, budget = {nodes: RESULT_LIMITS.maxValueNodes}, depth = 0): unknown {
  if (value === null || typeof value !== 'object') return value
  if (depth >= RESULT_LIMITS.maxValueDepth || budget.nodes <= 0) return '…'
  if (Array.isArray(value)) {
    const out: unknown[] = []
    for (const v of value) {
      if (--budget.nodes < 0) {
        out.push('…')
        break
      }
      out.push(boundedValue(v, budget, depth + 1))
    }
    return out
  }
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (--budget.nodes < 0) {
      out['…'] = '…'
      break
    }
    out[k] = boundedValue(v, budget, depth + 1)
  }
  return out
}

/** normaliseResult, with field values cut to a bounded size and only scalar tag values kept. */
function boundedResult(raw: unknown): FunctionResult | undefined {
  const r = normaliseResult(raw)
  if (!r) return undefined
  if (r.field) {
    if (r.field.currentValue !== undefined) r.field.currentValue = boundedValue(r.field.currentValue)
    if (r.field.proposedValue !== undefined) r.field.proposedValue = boundedValue(r.field.proposedValue)
  }
  return r
}

/** The results list of a parsed ResourceList object, at most maxResults of it, and its length. */
function rawResults(resourceList: unknown): unknown[] {
  const rl = asRecord(resourceList)
  if (!rl) return []
  let raw = rl.results
  const wrapped = asRecord(raw)
  if (wrapped && Array.isArray(wrapped.items)) raw = wrapped.items
  return Array.isArray(raw) ? raw : []
}

function fromParsed(resourceList: unknown, cuts: string[]): FunctionResult[] {
  const raw = rawResults(resourceList)
  if (raw.length > RESULT_LIMITS.maxResults) cuts.push(`read ${RESULT_LIMITS.maxResults} of ${raw.length} results (the limit is ${RESULT_LIMITS.maxResults})`)
  const out: FunctionResult[] = []
  for (const r of raw.length > RESULT_LIMITS.maxResults ? raw.slice(0, RESULT_LIMITS.maxResults) : raw) {
    const n = boundedResult(r)
    if (n) out.push(n)
  }
  return out
}

/** The entries of a block sequence: [start, end) offsets of each `- …` entry in the text. */
interface BlockEntries {
  entries: Array<[number, number]>
  /** Entries seen in total (more than entries.length when counting stopped recording). */
  total: number
  indent: number
}

/**
 * Splits a block-style results section (`results:` then `- …` entries, or the legacy
 * `results:\n  items:\n  - …`) into its entries, in one pass over the lines. Undefined when the
 * section is not of that shape (flow style, a scalar): the caller then parses it whole or not at all.
 */
function splitBlockEntries(section: string, record: number): BlockEntries | undefined {
  let at = section.indexOf('\n')
  const first = at < 0 ? section : section.slice(0, at)
  const inline = first.replace(/^results[ \t]*:/, '').trim()
  if (inline !== '' && !inline.startsWith('#')) return undefined
  if (at < 0) return undefined
  let indent = -1
  let legacyItems = false
  const entries: Array<[number, number]> = []
  let total = 0
  let current = -1
  for (let lineStart = at + 1; lineStart < section.length; lineStart = at + 1) {
    at = section.indexOf('\n', lineStart)
    const lineEnd = at < 0 ? section.length : at
    let i = lineStart
    while (i < lineEnd && section[i] === ' ') i++
    const c = section[i]
    const blank = i >= lineEnd || c === '\r' || c === '#' || c === '\t'
    if (!blank) {
      const isEntry = c === '-' && (i + 1 >= lineEnd || section[i + 1] === ' ' || section[i + 1] === '\r' || section[i + 1] === '\t')
      const col = i - lineStart
      if (indent < 0) {
        if (isEntry) indent = col
        else if (!legacyItems && /^items[ \t]*:[ \t]*(#.*)?\r?$/.test(section.slice(i, lineEnd))) legacyItems = true
        else return undefined
      }
      if (col < indent) {
        if (current >= 0 && entries.length < record) entries.push([current, lineStart])
        current = -1
        break
      }
      if (col === indent && isEntry) {
        if (current >= 0 && entries.length < record) entries.push([current, lineStart])
        total++
        current = total <= record ? lineStart : -1
      } else if (col === indent) {
        // a key at the entries' indentation (legacy form: `items:`'s siblings): the list ended
        if (current >= 0 && entries.length < record) entries.push([current, lineStart])
        current = -1
        break
      }
    }
    if (at < 0) break
  }
  if (current >= 0 && entries.length < record) entries.push([current, section.length])
  return indent < 0 ? undefined : {entries, total, indent}
}

/**
 * Runs of blank lines cut to one: the yaml package slows down badly on long blank runs (a 1 MB
 * run took 10 s). Inside a block scalar this joins blank lines, which a message survives. A scan
 * rather than a regular expression: V8 runs a new expression in its interpreter first, 170 ms
 * for a 1 MB run, and each call's first reads of a results section paid that.
 */
export function collapseBlankRuns(text: string): string {
  const parts: string[] = []
  let from = 0
  for (let nl = text.indexOf('\n'); nl >= 0; ) {
    // blank lines (spaces, tabs, a CR) right after this newline
    let blank = 0
    let after = nl + 1
    for (;;) {
      let i = after
      while (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9) i++
      if (text.charCodeAt(i) === 13) i++
      if (text.charCodeAt(i) !== 10) break
      blank++
      after = i + 1
    }
    if (blank >= 2) {
      parts.push(text.slice(from, nl), '\n\n')
      from = after
      nl = text.indexOf('\n', after)
    } else {
      nl = text.indexOf('\n', nl + 1)
    }
  }
  if (from === 0) return text
  parts.push(text.slice(from))
  return parts.join('')
}

/** The entries from..to of a section as one YAML sequence, moved to column 0. */
function entriesText(section: string, from: number, to: number, indent: number): string {
  const text = collapseBlankRuns(section.slice(from, to))
  if (indent === 0) return text
  const pad = ' '.repeat(indent)
  return text
    .split('\n')
    .map((line) => (line.startsWith(pad) ? line.slice(indent) : line.trimStart()))
    .join('\n')
}

type Parse = (text: string) => unknown

/** Reads a large block-style results section entry by entry, in batches, within the limits. */
async function readEntries(section: string, split: BlockEntries, parse: Parse, cuts: string[]): Promise<FunctionResult[]> {
  const out: FunctionResult[] = []
  let budget = RESULT_LIMITS.maxParseBytes
  let deep = 0
  let unreadable = 0
  let overBudget = 0
  const take = (parsed: unknown): void => {
    for (const r of Array.isArray(parsed) ? parsed : []) {
      const n = boundedResult(r)
      if (n) out.push(n)
    }
  }
  let batch: string[] = []
  let batchBytes = 0
  // Entries parsed one by one after a batch failed: each parse has a fixed cost, so few.
  let retries = RESULT_LIMITS.maxRetries
  // Each batch is a few ms of parsing, and the event loop turns after each: several calls' results
  // read at once took turns of 0.7 s (40 hostile outputs together, test/reliability/memory-limit.test.ts) before they yielded.
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return
    const before = out.length
    try {
      take(parse(batch.join('')))
    } catch {
      // e.g. an alias to an anchor in another batch: entry by entry
      out.length = before
      for (const text of batch) {
        if (retries-- <= 0) {
          unreadable++
          continue
        }
        try {
          take(parse(text))
        } catch {
          unreadable++
        }
      }
    }
    batch = []
    batchBytes = 0
    await nextTurn()
  }
  const {entries, indent} = split
  for (let k = 0; k < entries.length; k++) {
    const [start, end] = entries[k]!
    // a large entry is read in a turn of its own (turns.ts)
    if (end - start > RESULT_LIMITS.batchBytes) await nextTurn()
    if (tooDeep(section, start, end)) {
      deep++
      continue
    }
    const text = entriesText(section, start, end, indent)
    if (text.length > budget) {
      // too large for what is left of the budget: left out, later (smaller) entries are still read
      overBudget++
      continue
    }
    budget -= text.length
    if (batchBytes + text.length > RESULT_LIMITS.batchBytes) await flush()
    batch.push(text.endsWith('\n') ? text : `${text}\n`)
    batchBytes += text.length
  }
  await flush()
  cuts.push(...entryCuts({read: entries.length, total: split.total, overBudget, deep, unreadable}))
  return out
}

/** What readEntries left out, one line each. */
function entryCuts(n: {read: number; total: number; overBudget: number; deep: number; unreadable: number}): string[] {
  const cuts: string[] = []
  if (n.total > n.read) cuts.push(`read ${n.read} of ${n.total} results (the limit is ${RESULT_LIMITS.maxResults})`)
  if (n.overBudget > 0) cuts.push(`${n.overBudget} result(s) left out: results are read up to ${RESULT_LIMITS.maxParseBytes} bytes in all`)
  if (n.deep > 0) cuts.push(`${n.deep} result(s) left out: nested deeper than ${RESULT_LIMITS.maxFlowDepth} levels`)
  if (n.unreadable > 0) cuts.push(`${n.unreadable} result(s) could not be read on their own (not YAML, or an alias to an anchor elsewhere)`)
  return cuts
}

/** A results section too large to parse whole: read entry by entry when it is a block list. */
async function readLargeSection(section: string, parse: Parse, cuts: string[]): Promise<FunctionResult[]> {
  await nextTurn()
  const split = splitBlockEntries(section, RESULT_LIMITS.maxResults)
  await nextTurn()
  if (split) return readEntries(section, split, parse, cuts)
  cuts.push(`results not read: a results section of ${section.length} bytes that is not a block list (more than ${RESULT_LIMITS.wholeParseBytes} bytes are read only as a block list)`)
  return []
}

/**
 * Reads the results of output bytes within RESULT_LIMITS, saying what was left out. Output that
 * does not parse has no results. Only the results are parsed when they can be found on their
 * own: parsing a whole 6 MiB output took about 9 s of blocked event loop. A large block-style
 * results list is read entry by entry up to the limits; the time and memory are linear in the
 * output and bounded by the limits, whatever its shape.
 */
export async function readResultsReport(output: Uint8Array): Promise<ResultsReport> {
  const cuts: string[] = []
  if (output.length === 0) return {results: [], cuts}
  // Many calls can end at once (turns.ts): each step below of a large output takes its own turn.
  const large = output.length > RESULT_LIMITS.wholeParseBytes
  if (large) await nextTurn()
  const text = Buffer.from(output.buffer, output.byteOffset, output.byteLength).toString('utf8')
  // Cheap pre-check: no results key, no results (skips the YAML parser on large outputs).
  if (!/(^|\n|[{,]\s*)"?results"?\s*:/.test(text)) return {results: [], cuts}
  if (/^\s*\{/.test(text)) {
    try {
      // V8's JSON parser is iterative: deep nesting does not overflow the stack.
      return {results: fromParsed(JSON.parse(text), cuts), cuts}
    } catch {
      // not JSON after all: YAML below
    }
  }
  const {parse: parseYaml} = await import('yaml')
  // uniqueKeys off: the yaml package's duplicate-key check compares every pair of keys of a map,
  // which blocks the event loop for seconds on a map of 20,000 keys.
  const options = {maxAliasCount: 100, uniqueKeys: false}
  const parse: Parse = (t) => parseYaml(t, options)
  if (large) await nextTurn()
  const section = resultsSection(text)
  if (section !== undefined && section.length > RESULT_LIMITS.wholeParseBytes) return {results: await readLargeSection(section, parse, cuts), cuts}
  if (section !== undefined) {
    if (tooDeep(section)) {
      cuts.push(`results not read: nested deeper than ${RESULT_LIMITS.maxFlowDepth} levels`)
      return {results: [], cuts}
    }
    try {
      const parsed = parse(collapseBlankRuns(section))
      return {results: fromParsed(parsed, cuts), cuts}
    } catch {
      // e.g. an alias to an anchor outside the section: parse the whole document below
    }
  }
  if (text.length > RESULT_LIMITS.wholeParseBytes) {
    cuts.push(`results not read: they could not be read on their own, and an output of ${text.length} bytes is not parsed whole (the limit is ${RESULT_LIMITS.wholeParseBytes})`)
    return {results: [], cuts}
  }
  if (tooDeep(text)) {
    cuts.push(`results not read: nested deeper than ${RESULT_LIMITS.maxFlowDepth} levels`)
    return {results: [], cuts}
  }
  try {
    return {results: fromParsed(parse(collapseBlankRuns(text)), cuts), cuts}
  } catch {
    return {results: [], cuts}
  }
}

/** The results of output bytes (readResultsReport without the account of what was left out). */
export async function readResults(output: Uint8Array): Promise<FunctionResult[]> {
  return (await readResultsReport(output)).results
}

export function errorResults(results: readonly FunctionResult[]): FunctionResult[] {
  return results.filter((r) => r.severity === 'error')
}

/**
 * One result as kpt prints it: `[severity] apiVersion/kind/namespace/name field.path: message`.
 * Empty parts are left out; the field part is there whenever the result has a `field`; no
 * severity prints as `[info]`.
 */
export function formatResult(r: FunctionResult): string {
  const ref = r.resourceRef
  const ids = ref ? [ref.apiVersion, ref.kind, ref.namespace, ref.name].filter((s): s is string => !!s) : []
  let line = `[${r.severity || 'info'}]`
  if (ids.length > 0) line += ` ${ids.join('/')}`
  if (r.field) line += ` ${r.field.path ?? ''}`
  return `${line}: ${r.message}`
}
