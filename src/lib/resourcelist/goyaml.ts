/**
 * Byte-compatible renderings of Go encoders kpt uses on plain values:
 *
 * - `goYaml`: go-yaml v3 `Marshal` of a struct/map tree with kyaml's encoder settings (indent 2,
 *   unlimited width, wide or compact sequences): scalar style selection (plain, single quoted,
 *   double quoted, literal) follows the emitter's analysis, so `results.yaml` matches kpt byte
 *   for byte. A `Map` stands for a Go struct (fields in insertion order, omitted when undefined);
 *   a plain object stands for a Go map (keys sorted).
 * - `goJson`: encoding/json `Encoder` with two-space indent (sorted keys, HTML escaping), used
 *   for resources written to `.json` files.
 */
import {FnrError} from '../errors.js'
import {resolvePlain} from './yaml.js'

// ---------------------------------------------------------------------------------------------
// JSON

export function goJson(value: unknown): string {
  const text = JSON.stringify(sortDeep(value), null, 2)
  return `${text.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`
}

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortDeep)
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new FnrError('InvalidArgument', `json: unsupported value: ${value}`)
  }
  if (value instanceof Map) return Object.fromEntries([...value.entries()].filter(([, v]) => v !== undefined).map(([k, v]) => [k, sortDeep(v)]))
  if (value !== null && typeof value === 'object') {
    // fromEntries keeps a "__proto__" key as a key (assignment would set the prototype).
    return Object.fromEntries(Object.keys(value).sort(compareBytes).map((k) => [k, sortDeep((value as Record<string, unknown>)[k])]))
  }
  return value
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b))
}

// ---------------------------------------------------------------------------------------------
// YAML

export interface GoYamlOptions {
  /** Sequences indented under their key (`  - x`), as kpt's results.yaml; default compact. */
  wideSeq?: boolean
}

/** go-yaml v3 Marshal (kyaml encoder settings) of a value tree. */
export function goYaml(value: unknown, options: GoYamlOptions = {}): string {
  const wide = options.wideSeq ?? false
  const v = normalise(value)
  if (isCollection(v) && !isEmptyCollection(v)) {
    return Array.isArray(v) ? seqBlock(v, 0, wide) : mapBlock(entriesOf(v), 0, wide)
  }
  const s = inlineValue(v, 0)
  return `${s.header}\n${s.body}`
}

type Value = null | boolean | number | string | Value[] | Map<string, Value>

/** Structs keep their field order, Go maps are sorted; undefined fields are omitted. */
function normalise(value: unknown): Value {
  if (value === undefined || value === null) return null
  if (Array.isArray(value)) return value.map(normalise)
  if (value instanceof Map) {
    const m = new Map<string, Value>()
    for (const [k, v] of value) if (v !== undefined) m.set(String(k), normalise(v))
    return m
  }
  if (typeof value === 'object') {
    const m = new Map<string, Value>()
    for (const k of Object.keys(value).sort(goKeyOrder)) {
      const v = (value as Record<string, unknown>)[k]
      if (v !== undefined) m.set(k, normalise(v))
    }
    return m
  }
  if (typeof value === 'boolean' || typeof value === 'number' || typeof value === 'string') return value
  return String(value)
}

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9'
const isLetter = (c: string): boolean => /\p{L}/u.test(c)

/** The number written in `r` from `i` on (its digits, after `start`), and where it ends. */
function digitsAt(r: string[], i: number, start: bigint): {n: bigint; end: number} {
  let end = i
  let n = start
  while (isDigit(r[end])) n = n * 10n + BigInt(Number(r[end++]))
  return {n, end}
}

/** The keys' runs of digits at `i` (their first difference) compared as numbers, as go-yaml does. */
function compareNumbersAt(ar: string[], br: string[], i: number): number {
  // a zero after non-zero digits counts: the numbers then start from 1
  let start = 0n
  if (ar[i] === '0' || br[i] === '0') {
    for (let j = i - 1; j >= 0 && isDigit(ar[j]); j--) {
      if (ar[j] !== '0') {
        start = 1n
        break
      }
    }
  }
  const xn = digitsAt(ar, i, start)
  const yn = digitsAt(br, i, start)
  if (xn.n !== yn.n) return xn.n < yn.n ? -1 : 1
  if (xn.end !== yn.end) return xn.end - yn.end
  return ar[i]!.codePointAt(0)! - br[i]!.codePointAt(0)!
}

/**
 * How go-yaml orders a Go map's string keys when it writes them (its keyList): rune by rune; at the
 * first difference two letters compare as runes, a letter against a non-letter goes after it unless
 * digits came just before, and runs of digits compare as numbers (a9 before a10). kpt's results.yaml
 * orders `tags` so: a_, a9, a10, aB.
 */
export function goKeyOrder(a: string, b: string): number {
  const ar = [...a]
  const br = [...b]
  let digits = false
  for (let i = 0; i < ar.length && i < br.length; i++) {
    const x = ar[i]!
    const y = br[i]!
    if (x === y) {
      digits = isDigit(x)
      continue
    }
    const xl = isLetter(x)
    const yl = isLetter(y)
    if (xl && yl) return x.codePointAt(0)! - y.codePointAt(0)!
    if (xl || yl) return (digits ? xl : yl) ? -1 : 1
    return compareNumbersAt(ar, br, i)
  }
  return ar.length - br.length
}

function isCollection(v: Value): v is Value[] | Map<string, Value> {
  return Array.isArray(v) || v instanceof Map
}

function isEmptyCollection(v: Value[] | Map<string, Value>): boolean {
  return Array.isArray(v) ? v.length === 0 : v.size === 0
}

function entriesOf(m: Map<string, Value>): Array<[string, Value]> {
  return [...m.entries()]
}

const sp = (n: number) => ' '.repeat(n)

/** A scalar or empty collection: the text after `key:`/`-` (header) and lines below it (body). */
function inlineValue(v: Value, indent: number): {header: string; body: string} {
  if (v instanceof Map) return {header: '{}', body: ''}
  if (Array.isArray(v)) return {header: '[]', body: ''}
  if (v === null) return {header: 'null', body: ''}
  if (typeof v === 'boolean') return {header: String(v), body: ''}
  if (typeof v === 'number') return {header: goFloat(v), body: ''}
  return stringValue(v, indent, false)
}

function mapBlock(entries: Array<[string, Value]>, indent: number, wide: boolean): string {
  let out = ''
  for (const [k, v] of entries) out += `${sp(indent)}${keyText(k)}:${valueAfterKey(v, indent, wide)}`
  return out
}

function valueAfterKey(v: Value, indent: number, wide: boolean): string {
  if (isCollection(v) && !isEmptyCollection(v)) {
    if (Array.isArray(v)) return `\n${seqBlock(v, wide ? indent + 2 : indent, wide)}`
    return `\n${mapBlock(entriesOf(v), indent + 2, wide)}`
  }
  const s = inlineValue(v, indent + 2)
  return ` ${s.header}\n${s.body}`
}

function seqBlock(items: Value[], indent: number, wide: boolean): string {
  let out = ''
  for (const item of items) {
    if (isCollection(item) && !isEmptyCollection(item)) {
      const inner = Array.isArray(item) ? seqBlock(item, indent + 2, wide) : mapBlock(entriesOf(item), indent + 2, wide)
      out += `${sp(indent)}- ${inner.slice(indent + 2)}`
    } else {
      const s = inlineValue(item, indent + 2)
      out += `${sp(indent)}- ${s.header}\n${s.body}`
    }
  }
  return out
}

function keyText(k: string): string {
  return stringValue(k, 0, true).header
}

/** go-yaml's float formatting (strconv 'g', shortest) for non-integers; integers as they are. */
export function goFloat(n: number): string {
  if (Number.isNaN(n)) return '.nan'
  if (n === Number.POSITIVE_INFINITY) return '.inf'
  if (n === Number.NEGATIVE_INFINITY) return '-.inf'
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return String(n)
  const [mantissa, expText] = n.toExponential().split('e') as [string, string]
  const exp = Number.parseInt(expText, 10)
  if (exp < -4 || exp >= 21 || (!Number.isInteger(n) && exp >= 6)) {
    const abs = Math.abs(exp)
    return `${mantissa}e${exp < 0 ? '-' : '+'}${abs < 10 ? `0${abs}` : abs}`
  }
  return String(n)
}

// --- strings ----------------------------------------------------------------------------------

const OLD_BOOL = /^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$/
const BASE60_FLOAT = /^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/
/**
 * The strings go-yaml reads back as a timestamp, and so quotes: those Go's time.Parse accepts in one of
 * its four layouts (2006-1-2T15:4:5.999999999Z07:00, the same with a lower-case t, 2006-1-2
 * 15:4:5.999999999, 2006-1-2), with the fields in range. Not every YAML 1.1 timestamp:
 * `2001-12-14T21:59:43` (no zone) or `2001-12-14 21:59:43.10 -5` stay plain, as kpt writes them.
 */
const GO_TIMESTAMP = /^(\d{4})-(\d\d?)-(\d\d?)(?:(?:[Tt](\d\d?):(\d\d?):(\d\d?)(?:[.,]\d+)?(?:Z|[-+](\d\d):(\d\d)))|(?: (\d\d?):(\d\d?):(\d\d?)(?:[.,]\d+)?))?$/

/** A date Go's time.Parse takes: month 1-12, the day within its month (leap years as Go counts them). */
function goDateInRange(year: number, month: number, day: number): boolean {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const days = month === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31
  return month >= 1 && month <= 12 && day >= 1 && day <= days
}

function isGoTimestamp(s: string): boolean {
  const m = GO_TIMESTAMP.exec(s)
  if (!m || !goDateInRange(Number(m[1]), Number(m[2]), Number(m[3]))) return false
  const [h, mi, sec] = (m[4] === undefined ? [m[9], m[10], m[11]] : [m[4], m[5], m[6]]).map((v) => Number(v ?? 0)) as [number, number, number]
  // a zone's hours and minutes: Go refuses an hour over 24 and minutes over 60
  return h <= 23 && mi <= 59 && sec <= 59 && Number(m[7] ?? 0) <= 24 && Number(m[8] ?? 0) <= 60
}

/** Whether go-yaml's Marshal would emit this string plain (it resolves back to a string). */
function canUsePlain(s: string, isKey: boolean): boolean {
  if (typeof resolvePlain(s) !== 'string') return false
  // go-yaml writes `<<` plain (kpt's results.yaml has `message: <<`). As a key, a YAML 1.1 reader
  // takes a plain `<<` for a merge, so fnr quotes it there on purpose (kpt writes it plain).
  if (s === '<<' && isKey) return false
  return !(BASE60_FLOAT.test(s) || OLD_BOOL.test(s) || isGoTimestamp(s))
}

interface Analysis {
  multiline: boolean
  blockPlainAllowed: boolean
  singleQuotedAllowed: boolean
  blockAllowed: boolean
}

const isBreak = (c: number) => c === 0x0a || c === 0x0d || c === 0x85 || c === 0x2028 || c === 0x2029
const isBlank = (c: number | undefined) => c === 0x20 || c === 0x09
const isPrintable = (c: number) =>
  c === 0x0a || (c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd && c !== 0xfeff)

/** The emitter's scalar analysis (yaml_emitter_analyze_scalar), block context only. */
function analyze(s: string): Analysis {
  if (s.length === 0) return {multiline: false, blockPlainAllowed: true, singleQuotedAllowed: true, blockAllowed: false}
  const cps = [...s].map((c) => c.codePointAt(0)!)
  let blockIndicators = s.startsWith('---') || s.startsWith('...')
  let lineBreaks = false
  let special = false
  let tabs = false
  let leadingSpace = false
  let leadingBreak = false
  let trailingSpace = false
  let trailingBreak = false
  let breakSpace = false
  let spaceBreak = false
  let previousSpace = false
  let previousBreak = false
  let precededByWhitespace = true
  for (let i = 0; i < cps.length; i++) {
    const c = cps[i]!
    const followedByWhitespace = i + 1 >= cps.length || isBlank(cps[i + 1])
    const ch = String.fromCodePoint(c)
    if (i === 0) {
      if ('#,[]{}&*!|>\'"%@`'.includes(ch)) blockIndicators = true
      else if ((ch === '?' || ch === ':' || ch === '-') && followedByWhitespace) blockIndicators = true
    } else if (ch === ':' && followedByWhitespace) blockIndicators = true
    else if (ch === '#' && precededByWhitespace) blockIndicators = true
    if (c === 0x09) tabs = true
    else if (!isPrintable(c)) special = true
    if (c === 0x20) {
      if (i === 0) leadingSpace = true
      if (i === cps.length - 1) trailingSpace = true
      if (previousBreak) breakSpace = true
      previousSpace = true
      previousBreak = false
    } else if (isBreak(c)) {
      lineBreaks = true
      if (i === 0) leadingBreak = true
      if (i === cps.length - 1) trailingBreak = true
      if (previousSpace) spaceBreak = true
      previousSpace = false
      previousBreak = true
    } else {
      previousSpace = false
      previousBreak = false
    }
    precededByWhitespace = isBlank(c) || isBreak(c)
  }
  let blockPlainAllowed = true
  let singleQuotedAllowed = true
  let blockAllowed = true
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) blockPlainAllowed = false
  if (trailingSpace) blockAllowed = false
  if (breakSpace) {
    blockPlainAllowed = false
    singleQuotedAllowed = false
  }
  if (spaceBreak || tabs || special) {
    blockPlainAllowed = false
    singleQuotedAllowed = false
  }
  if (spaceBreak || special) blockAllowed = false
  if (lineBreaks) blockPlainAllowed = false
  if (blockIndicators) blockPlainAllowed = false
  return {multiline: lineBreaks, blockPlainAllowed, singleQuotedAllowed, blockAllowed}
}

type Style = 'plain' | 'single' | 'double' | 'literal'

function stringValue(s: string, indent: number, isKey: boolean): {header: string; body: string} {
  let style: Style = s.includes('\n') ? 'literal' : canUsePlain(s, isKey) ? 'plain' : 'double'
  const a = analyze(s)
  if (isKey && a.multiline) style = 'double'
  if (style === 'plain') {
    if (!a.blockPlainAllowed) style = 'single'
    if (s.length === 0 && isKey) style = 'single'
  }
  if (style === 'single' && !a.singleQuotedAllowed) style = 'double'
  if (style === 'literal' && (!a.blockAllowed || isKey)) style = 'double'
  switch (style) {
    case 'plain':
      return {header: s, body: ''}
    case 'single':
      return {header: `'${s.replace(/'/g, "''")}'`, body: ''}
    case 'double':
      return {header: doubleQuoted(s), body: ''}
    case 'literal':
      return literal(s, indent)
  }
}

function doubleQuoted(s: string): string {
  let out = '"'
  for (const ch of s) {
    const c = ch.codePointAt(0)!
    if (isPrintable(c) && !isBreak(c) && c !== 0x22 && c !== 0x5c) {
      out += ch
      continue
    }
    switch (c) {
      case 0x00: out += '\\0'; break
      case 0x07: out += '\\a'; break
      case 0x08: out += '\\b'; break
      case 0x09: out += '\\t'; break
      case 0x0a: out += '\\n'; break
      case 0x0b: out += '\\v'; break
      case 0x0c: out += '\\f'; break
      case 0x0d: out += '\\r'; break
      case 0x1b: out += '\\e'; break
      case 0x22: out += '\\"'; break
      case 0x5c: out += '\\\\'; break
      case 0x85: out += '\\N'; break
      case 0xa0: out += '\\_'; break
      case 0x2028: out += '\\L'; break
      case 0x2029: out += '\\P'; break
      default: {
        const hex = c.toString(16).toUpperCase()
        if (c <= 0xff) out += `\\x${hex.padStart(2, '0')}`
        else if (c <= 0xffff) out += `\\u${hex.padStart(4, '0')}`
        else out += `\\U${hex.padStart(8, '0')}`
      }
    }
  }
  return `${out}"`
}

function literal(s: string, indent: number): {header: string; body: string} {
  let header = '|'
  const first = s.codePointAt(0)!
  if (first === 0x20 || isBreak(first)) header += '2'
  const last = s.charCodeAt(s.length - 1)
  if (!isBreak(last)) header += '-'
  else if (s.length === 1 || isBreak(s.charCodeAt(s.length - 2))) header += '+'
  const content = s.endsWith('\n') ? s.slice(0, -1) : s
  const body = content
    .split('\n')
    .map((line) => (line === '' ? '\n' : `${sp(indent)}${line}\n`))
    .join('')
  return {header, body}
}
