/**
 * Tables of bad inputs, generated systematically: image names, ResourceList payloads and
 * malformed protobuf messages. Every entry has a unique label (used in test titles and failure
 * messages) and the outcomes it may have.
 */
import {randomBytes} from 'node:crypto'
import {gzipSync} from 'node:zlib'

import * as grpc from '@grpc/grpc-js'

import {bytesField, requestBytes, varint, varintField} from './wire.js'

const S = grpc.status

export interface ImageCase {
  label: string
  image: string
  /** Status codes it may end with. */
  codes: number[]
  /** What the status message must say. */
  message?: RegExp
}

const NOT_FOUND_MESSAGE = /^function ".*" not found$/s
const EMPTY_IMAGE = /image is empty/
const TOO_LONG = /image is \d+ characters long, more than the limit of 4096/

const SHELL_METACHARACTERS = [' ', '\t', ';', '|', '&', '$', '`', '(', ')', '<', '>', '*', '?', '[', ']', '{', '}', '!', '#', '~', "'", '"', '\\', '\n', '\r', '%', '^', '=', ',', '+']

function hex(n: number, char = 'a'): string {
  return char.repeat(n)
}

/** Image names for `fnr serve` (exec runtime): the mapped image is example.com/cat:v1. */
export function imageCases(): ImageCase[] {
  const out: ImageCase[] = []
  const notFound = (label: string, image: string): void => {
    out.push({label, image, codes: [S.NOT_FOUND], message: NOT_FOUND_MESSAGE})
  }
  // Empty and blank.
  for (const [label, image] of [
    ['empty', ''],
    ['one space', ' '],
    ['tab', '\t'],
    ['newline', '\n'],
    ['spaces and newlines', '  \n \r\n '],
  ] as const) {
    out.push({label: `blank image: ${label}`, image, codes: [S.INVALID_ARGUMENT], message: EMPTY_IMAGE})
  }
  // Every shell metacharacter inside a mapped name.
  for (const m of SHELL_METACHARACTERS) notFound(`metacharacter ${JSON.stringify(m)} inside the name`, `example.com/c${m}at:v1`)
  // Shell syntax that would run something if a shell were involved.
  for (const image of [
    '$(touch canary.ran)',
    '`touch canary.ran`',
    'example.com/cat:v1;touch canary.ran',
    'example.com/cat:v1 && touch canary.ran',
    'example.com/cat:v1 | sh',
    '; sh -c "touch canary.ran"',
    '${IFS}touch${IFS}canary.ran',
    'example.com/cat:v1\ntouch canary.ran',
  ]) {
    notFound(`shell command ${JSON.stringify(image)}`, image)
  }
  // Names of files on disk, relative and absolute, and traversal.
  for (const image of [
    'canary',
    './canary',
    'functions/canary',
    '../functions/canary',
    'cat',
    './cat',
    '/bin/sh',
    '/bin/sh -c touch canary.ran',
    '..',
    '../..',
    '../../../../../../bin/sh',
    'example.com/../cat:v1',
    'example.com/cat/..:v1',
    'example.com/cat:../../v1',
    'example.com/%2e%2e/cat:v1',
    '....//....//bin/sh',
    'file:///bin/sh',
  ]) {
    notFound(`path ${JSON.stringify(image)}`, image)
  }
  // Case: the registry host is matched case-insensitively (README "Image matching"), the rest is not.
  out.push({label: 'upper-case registry host (matches, as documented)', image: 'EXAMPLE.COM/cat:v1', codes: [S.OK]})
  for (const image of ['example.com/CAT:v1', 'example.com/cat:V1', 'Example.Com/Cat:V1', 'EXAMPLE.COM/CAT:V1']) notFound(`upper case ${image}`, image)
  // Lengths: at the limit is looked up; over it is refused without echoing the whole name.
  for (const n of [255, 256, 300, 1000, 4096]) notFound(`${n}-character name`, `example.com/${hex(n - 'example.com/'.length, 'n')}`)
  notFound('300-character tag', `example.com/cat:${hex(300, 't')}`)
  notFound('300-character path component', `example.com/${hex(300, 'p')}/cat:v1`)
  for (const n of [4097, 100_000, 900_000]) out.push({label: `${n}-character name`, image: `example.com/${hex(n - 'example.com/'.length, 'n')}`, codes: [S.INVALID_ARGUMENT], message: TOO_LONG})
  // Digests: wrong lengths, wrong alphabet, wrong algorithm.
  for (const n of [0, 1, 32, 63, 65, 128]) notFound(`sha256 digest of ${n} hex digits`, `example.com/cat@sha256:${hex(n)}`)
  notFound('sha256 digest with non-hex digits', `example.com/cat@sha256:${hex(64, 'z')}`)
  notFound('sha256 digest in upper case', `example.com/cat@sha256:${hex(64, 'A')}`)
  notFound('sha512 digest of 64 digits', `example.com/cat@sha512:${hex(64)}`)
  notFound('md5 digest', `example.com/cat@md5:${hex(32)}`)
  notFound('digest without algorithm', `example.com/cat@${hex(64)}`)
  notFound('lone @', 'example.com/cat@')
  notFound('two digests', `example.com/cat@sha256:${hex(64)}@sha256:${hex(64)}`)
  notFound('tag and digest', `example.com/cat:v1@sha256:${hex(64)}`)
  // Control characters and unusual Unicode.
  for (const [label, image] of [
    ['NUL', 'example.com/c\0at:v1'],
    ['only NUL', '\0'],
    ['DEL', 'example.com/c\x7fat:v1'],
    ['ANSI escape', 'example.com/\x1b[2Jcat:v1'],
    ['bell and backspace', 'example.com/\x07\bcat:v1'],
    ['right-to-left override', 'example.com/\u202ecat:v1'],
    ['zero-width space', 'example.com/\u200bcat:v1'],
    ['full-width colon', 'example.com/cat\uff1av1'],
    ['non-Latin letters', 'пример.рф/функция:v1'],
    ['emoji', 'example.com/😀:v1'],
    ['lone surrogate', 'example.com/\ud800cat:v1'],
  ] as const) {
    notFound(`control/unicode: ${label}`, image)
  }
  // Leading and trailing white space is trimmed before matching (a byte-order mark counts as such).
  for (const [label, image] of [
    ['leading byte-order mark', '\ufeffexample.com/cat:v1'],
    ['trailing space', 'example.com/cat:v1 '],
    ['leading newline', '\nexample.com/cat:v1'],
  ] as const) {
    out.push({label: `white space around a mapped name (trimmed, matches): ${label}`, image, codes: [S.OK]})
  }
  // Odd structure.
  for (const image of [':', '::', ':v1', '/', '//', 'example.com/', 'example.com//cat:v1', 'example.com/cat:', 'example.com/cat:v1:v2', 'localhost', 'http://example.com/cat:v1', 'docker://example.com/cat:v1', '-', '--help', '-rf', '@', 'example.com:99999/cat:v1', '[::1]/cat:v1']) {
    notFound(`structure ${JSON.stringify(image)}`, image)
  }
  return out
}

export interface PayloadCase {
  label: string
  payload: Buffer
  /**
   * What the wrapper server (whose entrypoint echoes its input) answers: it checks its function's
   * output cheaply, without parsing it (src/lib/evaluators/entrypoint.ts): blank output, or output
   * with a `kind: ResourceList` key (at a line start or after `{` or `,`), is accepted (OK); anything
   * else is INTERNAL "is not a ResourceList". Output with results is parsed for them only.
   * `blank`: whitespace-only output, which the wrapper and the exec runtime of serve both refuse
   * (INTERNAL, "wrote only whitespace"): an empty ResourceList would delete the package (docs/process.md, "Empty output is an error").
   */
  wrapper: 'accepts' | 'rejects' | 'blank'
  /** A well-formed ResourceList, only big or unusual (a control): not counted as a bad input. */
  valid?: boolean
}

function billionLaughs(levels: number, fan: number): string {
  const lines = ['apiVersion: config.kubernetes.io/v1', 'kind: ResourceList', 'items:', '- apiVersion: v1', '  kind: ConfigMap', '  metadata:', '    name: bomb', '  data:', '    l0: &l0 "lol"']
  for (let i = 1; i <= levels; i++) lines.push(`    l${i}: &l${i} [${Array.from({length: fan}, () => `*l${i - 1}`).join(', ')}]`)
  return `${lines.join('\n')}\n`
}

function deepBlock(depth: number): string {
  let s = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: deep\n  data:\n'
  for (let i = 0; i < depth; i++) s += `${' '.repeat(4 + i)}k${i}:\n`
  return `${s}${' '.repeat(4 + depth)}v\n`
}

const RL_HEAD = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n'
const ITEM = '- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm\n'

function seeded(seed: number, n: number): Buffer {
  // A small deterministic generator (xorshift), so failures are reproducible.
  let x = seed >>> 0 || 1
  const out = Buffer.alloc(n)
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}

/** ResourceList payloads (none of them is the empty one; that is its own case). */
export function payloadCases(): PayloadCase[] {
  const out: PayloadCase[] = []
  const add = (label: string, payload: Buffer | string, wrapper: PayloadCase['wrapper'] = 'accepts', valid = false): void => {
    out.push({label, payload: Buffer.isBuffer(payload) ? payload : Buffer.from(payload), wrapper, ...(valid ? {valid} : {})})
  }
  const rejects = 'rejects' as const
  // A well-formed ResourceList (a stress case, not a bad input): accepted everywhere.
  const stress = (label: string, payload: string): void => add(label, payload, 'accepts', true)
  // A blank output is refused by the wrapper and by serve's exec runtime (never an empty package).
  for (const b of [0x00, 0xff, 0x0a, 0x20, 0x7f]) add(`single byte 0x${b.toString(16).padStart(2, '0')}`, Buffer.from([b]), b === 0x0a || b === 0x20 ? 'blank' : rejects)
  for (const s of ['-', '---', '...', '{', '[', '"', "'", '&a', '*a', '!', '%YAML 1.2', '? ', '|', '>', '#', ':', '~', 'null']) add(`YAML token ${JSON.stringify(s)}`, s, rejects)
  for (const [seed, n] of [
    [1, 1024],
    [2, 1024],
    [3, 65_536],
    [4, 512 * 1024],
  ] as const) {
    add(`random bytes (seed ${seed}, ${n} B)`, seeded(seed, n), rejects)
  }
  add('random bytes from the OS (4 KiB)', randomBytes(4096), rejects)
  for (const [label, bytes] of [
    ['lone continuation byte', [0x80]],
    ['truncated 2-byte sequence', [0xc3]],
    ['truncated 4-byte sequence', [0xf0, 0x9f, 0x98]],
    ['overlong slash', [0xc0, 0xaf]],
    ['encoded surrogate', [0xed, 0xa0, 0x80]],
    ['0xfe 0xff', [0xfe, 0xff]],
    ['code point above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
  ] as const) {
    add(`invalid UTF-8 in a value: ${label}`, Buffer.concat([Buffer.from(`${RL_HEAD}items:\n${ITEM}  data:\n    k: "`), Buffer.from(bytes), Buffer.from('"\n')]))
  }
  add('invalid UTF-8 in a key', Buffer.concat([Buffer.from(`${RL_HEAD}items:\n${ITEM}  data:\n    `), Buffer.from([0xff, 0xfe]), Buffer.from(': v\n')]))
  add('UTF-16LE with BOM', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`${RL_HEAD}items: []\n`, 'utf16le')]), rejects)
  stress('UTF-8 BOM', `\ufeff${RL_HEAD}items: []\n`)
  add('NUL bytes inside', `${RL_HEAD}items:\n${ITEM}  data:\n    k: "a\0b"\n\0\0\0`)
  // Alias bombs.
  add('billion laughs (9 levels x 10)', billionLaughs(9, 10))
  add('billion laughs (30 levels x 2)', billionLaughs(30, 2))
  add('billion laughs with merge keys', `${RL_HEAD}items:\n${ITEM}  a: &a {x: 1, y: 2}\n  b: &b {<<: [*a, *a, *a, *a]}\n  c: &c {<<: [*b, *b, *b, *b]}\n  d: {<<: [*c, *c, *c, *c]}\n`)
  add('bomb in functionConfig', billionLaughs(9, 10).replace('items:', 'functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: fc}\n  data: {a: &fa [x, x], b: &fb [*fa, *fa], c: [*fb, *fb]}\nitems:'))
  add('alias to an undefined anchor', `${RL_HEAD}items:\n${ITEM}  data: *nowhere\n`)
  add('recursive alias', `${RL_HEAD}items:\n- &self [*self]\n`)
  // Deep nesting.
  add('flow sequences nested 10,000 deep', `${RL_HEAD}items: ${'['.repeat(10_000)}${']'.repeat(10_000)}\n`)
  add('flow maps nested 5,000 deep', `${RL_HEAD}items: [${'{a: '.repeat(5000)}1${'}'.repeat(5000)}]\n`)
  add('block maps nested 1,000 deep', deepBlock(1000))
  add('JSON nested 50,000 deep', `{"apiVersion":"config.kubernetes.io/v1","kind":"ResourceList","items":[${'['.repeat(50_000)}${']'.repeat(50_000)}]}`)
  add('unclosed brackets 100,000', '['.repeat(100_000), rejects)
  // Wrong kinds and shapes.
  // Wrong shapes the cheap check cannot see (a `kind: ResourceList` key) pass the wrapper.
  for (const [label, text, wrapper] of [
    ['kind List', `apiVersion: v1\nkind: List\nitems:\n${ITEM}`, rejects],
    ['a single Deployment', 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n', rejects],
    ['items is a string', `${RL_HEAD}items: not-a-list\n`, 'accepts'],
    ['items is a map', `${RL_HEAD}items: {a: b}\n`, 'accepts'],
    ['items are scalars', `${RL_HEAD}items: [1, two, null]\n`, 'accepts'],
    ['items are lists', `${RL_HEAD}items: [[a], [b]]\n`, 'accepts'],
    ['kind is a number', 'apiVersion: config.kubernetes.io/v1\nkind: 42\nitems: []\n', rejects],
    ['kind is a map', 'apiVersion: config.kubernetes.io/v1\nkind: {a: b}\nitems: []\n', rejects],
    ['no kind', 'apiVersion: config.kubernetes.io/v1\nitems: []\n', rejects],
    ['wrong apiVersion', 'apiVersion: nope/v0\nkind: ResourceList\nitems: []\n', 'accepts'],
    ['three ResourceLists in one stream', `${RL_HEAD}items: []\n---\n${RL_HEAD}items: []\n---\n${RL_HEAD}items: []\n`, 'accepts'],
    ['top level is a list', `- ${RL_HEAD.replace('\n', '\n  ')}`, 'accepts'],
    ['top level is a scalar', 'just some text\n', rejects],
  ] as const) {
    add(`wrong shape: ${label}`, text, wrapper)
  }
  // Output with results is parsed by the wrapper (and by serve for a failing function).
  add('results: billion laughs', `${billionLaughs(9, 10)}results:\n- message: *l9\n  severity: error\n`)
  stress('results: 10,000 error results', `${RL_HEAD}items: []\nresults:\n${'- {severity: error, message: bad}\n'.repeat(10_000)}`)
  stress('results: a result with 50,000 tags', `${RL_HEAD}items: []\nresults:\n- message: many tags\n  severity: error\n  tags:\n${Array.from({length: 50_000}, (_, i) => `    k${i}: v\n`).join('')}`)
  stress('results: after 15,000 items', `${RL_HEAD}items:\n${'- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n'.repeat(15_000)}results:\n- {message: last, severity: error}\n`)
  add('results: nested 5,000 deep', `${RL_HEAD}items: []\nresults: ${'['.repeat(5000)}${']'.repeat(5000)}\n`)
  add('results: not a list', `${RL_HEAD}items: []\nresults: 42\n`)
  add('results: legacy shape with junk', `${RL_HEAD}items: []\nresults: {items: [1, null, {message: {a: b}}, [x]]}\n`)
  // Size and length extremes (all under the 1 MiB message size).
  stress('one 900 kB scalar', `${RL_HEAD}items:\n${ITEM}  data:\n    big: ${'x'.repeat(900_000)}\n`)
  stress('15,000 items', `${RL_HEAD}items:\n${'- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n'.repeat(15_000)}`)
  add('one 900 kB line without newline', 'x'.repeat(900_000), rejects)
  stress('50,000 keys in one map', `${RL_HEAD}items:\n${ITEM}  data:\n${Array.from({length: 50_000}, (_, i) => `    k${i}: v\n`).join('')}`)
  stress('a 100 kB key', `${RL_HEAD}items:\n${ITEM}  data:\n    ${'k'.repeat(100_000)}: v\n`)
  // Other formats.
  for (const [label, bytes] of [
    ['JSON array', '[1, 2, 3]'],
    ['JSON with trailing garbage', '{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": []} }}}'],
    ['a number', '12345678901234567890'],
    ['XML', '<?xml version="1.0"?><ResourceList><items/></ResourceList>'],
    ['HTML', '<!doctype html><html><body>ResourceList</body></html>'],
    ['base64', Buffer.from(`${RL_HEAD}items: []\n`).toString('base64')],
    ['gzip', gzipSync(`${RL_HEAD}items: []\n`)],
    ['ELF header', Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0])],
    ['an EvaluateFunctionRequest inside', requestBytes('example.com/cat:v1', `${RL_HEAD}items: []\n`)],
  ] as const) {
    // JSON with trailing garbage and the request message still hold a `"kind": "ResourceList"` key.
    add(`other format: ${label}`, Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes), /trailing garbage|EvaluateFunctionRequest/.test(label) ? 'accepts' : rejects)
  }
  // YAML syntax errors and oddities.
  for (const [label, text] of [
    ['duplicate keys', `${RL_HEAD}kind: ResourceList\nitems: []\n`],
    ['tab indentation', `${RL_HEAD}items:\n\t- a: b\n`],
    ['unterminated double quote', `${RL_HEAD}items:\n${ITEM}  data: {k: "open}\n`],
    ['unterminated flow sequence', `${RL_HEAD}items: [a, b\n`],
    ['invalid escape', `${RL_HEAD}items:\n${ITEM}  data: {k: "\\q"}\n`],
    ['invalid !!binary', `${RL_HEAD}items:\n${ITEM}  data: {k: !!binary "***"}\n`],
    ['unsafe language tag', `${RL_HEAD}items:\n- !!python/object/apply:os.system ["touch canary.ran"]\n`],
    ['custom %TAG directive', `%TAG ! tag:evil.example,2000:\n---\n${RL_HEAD}items: [!x y]\n`],
    ['only document markers', '---\n...\n---\n...\n'],
    ['CRLF line endings', `${RL_HEAD}items:\n${ITEM}`.replace(/\n/g, '\r\n')],
    ['CR-only line endings', `${RL_HEAD}items:\n${ITEM}`.replace(/\n/g, '\r')],
    ['bad document separator', `${RL_HEAD}items: []\n--- garbage\n${RL_HEAD}`],
    ['complex keys', `${RL_HEAD}items:\n- ? [a, b]\n  : c\n`],
  ] as const) {
    if (label === 'CRLF line endings') stress(`YAML: ${label}`, text)
    // No newline before "kind" (CR only), or no key at all: not a ResourceList to the cheap check.
    else add(`YAML: ${label}`, text, label === 'only document markers' || label === 'CR-only line endings' ? rejects : 'accepts')
  }
  return out
}

export interface FrameCase {
  label: string
  bytes: Buffer
  /** The exact status each server answers with. */
  serve: number
  wrapper: number
  /** What the status message says (for both). */
  message?: RegExp
}

/**
 * Request messages that are not valid EvaluateFunctionRequest protobuf, or barely valid. fnr reads
 * them as Go's protobuf does (src/lib/grpc/wire.ts), so as Porch's runner does
 * (test/porch-side-by-side/request-frames.test.ts sends these to both): a message it cannot read
 * (field 0, wire types 6 and 7, a broken group, a string that is not UTF-8, …) is INTERNAL "Error
 * deserializing request" on both fnr servers; a field of an unknown number, or of a known number
 * but another wire type, is skipped, which can leave the request without an image or a
 * resource_list (INVALID_ARGUMENT, fnr's own checks); a repeated field keeps its last value. Where
 * serve looks up an image it has not mapped (NOT_FOUND), the wrapper runs its entrypoint whatever
 * the image: its echo of a resource_list that is no ResourceList is INTERNAL "is not a
 * ResourceList".
 */
export function frameCases(): FrameCase[] {
  const good = requestBytes('example.com/cat:v1', 'apiVersion: v1\nkind: ResourceList\nitems: []\n')
  const tag = (field: number, wire: number): Buffer => varint((field << 3) | wire)
  const undecodable = (label: string, bytes: Buffer): FrameCase => ({label, bytes, serve: S.INTERNAL, wrapper: S.INTERNAL, message: /^Error deserializing request/})
  const noImage = (label: string, bytes: Buffer): FrameCase => ({label, bytes, serve: S.INVALID_ARGUMENT, wrapper: S.INVALID_ARGUMENT, message: EMPTY_IMAGE})
  return [
    undecodable('four 0xff bytes', Buffer.alloc(4, 0xff)),
    undecodable('64 0xff bytes', Buffer.alloc(64, 0xff)),
    // seeded, so always the same bytes (they start with an invalid tag)
    undecodable('random 256 bytes', seeded(7, 256)),
    undecodable('random 64 KiB', seeded(8, 65_536)),
    undecodable('truncated varint', Buffer.from([0x0a, 0x80])),
    undecodable('length longer than the message', Buffer.concat([Buffer.from([0x0a, 100]), Buffer.from('short')])),
    undecodable('length of 2^64-1', Buffer.concat([Buffer.from([0x0a]), varint(2n ** 64n - 1n), Buffer.from('x')])),
    // field 0 and wire types 6 and 7 do not exist: Go's protobuf (and so fnr) cannot read the message
    undecodable('field number 0', Buffer.from([0x02, 0x01, 0x41])),
    undecodable('wire type 6', Buffer.from([0x0e, 0x00])),
    undecodable('wire type 7', Buffer.from([0x0f, 0x00])),
    undecodable('group start without end', Buffer.concat([tag(5, 3), varintField(1, 1)])),
    undecodable('unexpected group end', tag(5, 4)),
    undecodable('groups nested 20,000 deep', Buffer.concat([...Array.from({length: 20_000}, () => tag(5, 3)), ...Array.from({length: 20_000}, () => tag(5, 4))])),
    // image (a string field) sent as a varint: skipped, so the request has no image
    noImage('image as a varint', Buffer.concat([bytesField(1, 'x'), varintField(2, 7)])),
    // resource_list (bytes) sent as a fixed32: skipped as Go skips it, so the request has no resource_list
    {label: 'resource_list as fixed32', bytes: Buffer.concat([tag(1, 5), Buffer.from([1, 2, 3, 4]), bytesField(2, 'example.com/cat:v1')]), serve: S.INVALID_ARGUMENT, wrapper: S.INVALID_ARGUMENT, message: /resource_list is empty/},
    noImage('only unknown fields', Buffer.concat([varintField(15, 1), bytesField(99, 'zzz')])),
    noImage('empty message', Buffer.alloc(0)),
    undecodable('valid request plus trailing garbage', Buffer.concat([good, Buffer.from([0xff, 0xff, 0xff])])),
    // the last image wins: one serve has not mapped; the wrapper runs its echo on a real ResourceList
    {label: 'image given twice', bytes: Buffer.concat([good, bytesField(2, 'example.com/nope:v1')]), serve: S.NOT_FOUND, wrapper: S.OK, message: /^function "example\.com\/nope:v1" not found$/},
    // the last resource_list wins ("a: b"): serve's cat echoes it, the wrapper's echo is no ResourceList
    {label: 'resource_list given 1,000 times', bytes: Buffer.concat([...Array.from({length: 1000}, () => bytesField(1, 'a: b\n')), bytesField(2, 'example.com/cat:v1')]), serve: S.OK, wrapper: S.INTERNAL, message: /is not a ResourceList/},
    undecodable('ten-byte varint tag', Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])),
    // an image (a proto3 string) that is not UTF-8: Go's protobuf refuses the message, and so does fnr
    undecodable('image of invalid UTF-8 (0xc3 0x28)', requestBytes(Buffer.from([0xc3, 0x28]), 'a: b\n')),
    undecodable('image of invalid UTF-8 (0xff)', requestBytes(Buffer.from([0x65, 0xff, 0x65]), 'a: b\n')),
    undecodable('image of an encoded surrogate', requestBytes(Buffer.from([0xed, 0xa0, 0x80]), 'a: b\n')),
    undecodable('image of an overlong encoding', requestBytes(Buffer.from([0xc0, 0xaf, 0x62, 0x69, 0x6e]), 'a: b\n')),
  ]
}
