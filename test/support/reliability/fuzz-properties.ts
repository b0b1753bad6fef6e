/**
 * Property-based tests (fast-check) of the ResourceList reader/writer behind `fnr eval`
 * (src/lib/resourcelist). They run in a child process (this module, forked with tsx and
 * FNR_FUZZ_CHILD=1): the test process watches the ticks the child sends before each generated
 * input and kills it when one input takes longer than the hang limit, which a synchronous parse
 * could otherwise never be interrupted from.
 *
 * A child process rather than a worker thread: a worker would load its own tsx, whose esbuild
 * service process is a child of the test process that nobody reaps once the worker is gone (a
 * zombie the reliability suites rightly count as a leak).
 *
 * Protocol: the test sends {property, numRuns, seed}; the child sends {tick} before each input
 * and {done, ok, numRuns, report} at the end.
 */
import {mkdir, mkdtemp, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import fc from 'fast-check'
import {Document, isMap, isSeq, parse as parseYaml, parseAllDocuments, type Node} from 'yaml'

import {FnrError} from '../../../src/lib/errors.js'
import * as rl from '../../../src/lib/resourcelist/index.js'

export interface RunRequest {
  property: string
  numRuns: number
  seed: number
}

export type WorkerMessage = {tick: string} | {done: string; ok: boolean; numRuns: number; report?: string}

/** The IPC channel to the test process when this module runs as the forked property runner. */
const channel = process.env.FNR_FUZZ_CHILD === '1' && process.send ? process : undefined

function send(message: WorkerMessage): void {
  channel?.send!(message)
}

function tick(label: string): void {
  send({tick: label})
}

function describeInput(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : v instanceof Uint8Array ? `bytes ${Buffer.from(v).toString('hex')}` : JSON.stringify(v)
  return (s ?? String(v)).slice(0, 400)
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Strings that mean something else to a YAML parser, or are easy to mangle. */
const TRICKY = [
  'true', 'false', 'True', 'yes', 'no', 'on', 'off', 'y', 'n', '~', 'null', 'Null', '', ' ', '0x1F', '1.50', '1e3', '-1', '+1', '017', '0o17', '.inf', '-.Inf', '.nan',
  '2001-12-14', ' leading', 'trailing ', 'a: b', 'a:b', '#x', 'x #y', '- x', '-', '*a', '&a', '!tag', '!!str', '%x', '@x', '`x', '{x}', '[x]', '"q"', "'q'",
  'a\nb', 'a\n', '\n', ' \n ', 'line\n\nline', 'tab\there', 'é', '😀', '\u2028', '\\', '\\n', '<<', '? x', '|', '>', '---', '...', 'x'.repeat(120),
]

// Left out: strings whose first line is only spaces. The yaml package writes " \n" as a
// keep-chomping literal block that it reads back as "\n" (yaml 2.9.1, `parse(stringify({k: ' \n'}))`),
// so such input is already wrong before fnr reads it.
const text = fc
  .oneof(fc.constantFrom(...TRICKY), fc.string({maxLength: 12}), fc.string({unit: 'grapheme', maxLength: 8}), fc.string({unit: 'binary-ascii', maxLength: 8}))
  .filter((s) => !/^[ \t]+\n/.test(s))
const key = fc.oneof(fc.constantFrom(...TRICKY.filter((t) => t !== '<<')), fc.string({unit: 'grapheme-ascii', minLength: 1, maxLength: 8}))
const scalar = fc.oneof(
  text,
  fc.integer(),
  fc.double({noNaN: true, noDefaultInfinity: true}).filter((d) => !Object.is(d, -0)),
  fc.boolean(),
  fc.constant(null),
)

const {value} = fc.letrec<{value: unknown; array: unknown[]; object: Record<string, unknown>}>((tie) => ({
  value: fc.oneof({depthSize: 'small', withCrossShrink: true}, scalar, tie('array'), tie('object')),
  array: fc.array(tie('value'), {maxLength: 4}),
  object: fc.dictionary(key, tie('value'), {maxKeys: 4}),
}))

const RESERVED = new Set(['apiVersion', 'kind', 'metadata'])
const dnsName = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/)

/** A KRM resource: apiVersion, kind, metadata.name (+ labels), and arbitrary other fields. */
const krm = fc
  .record({
    apiVersion: fc.constantFrom('v1', 'apps/v1', 'example.com/v1alpha1'),
    kind: fc.constantFrom('ConfigMap', 'Deployment', 'Thing', 'List2'),
    name: dnsName,
    labels: fc.option(fc.dictionary(dnsName, text, {minKeys: 1, maxKeys: 3}), {nil: undefined}),
    rest: fc.dictionary(key.filter((k) => !RESERVED.has(k)), value, {maxKeys: 4}),
  })
  .map(({apiVersion, kind, name, labels, rest}) => ({apiVersion, kind, metadata: labels ? {name, labels} : {name}, ...rest}))

/** Comment text that stays one line. */
const commentText = fc.stringMatching(/^[a-zA-Z0-9 .,:;!?'"()-]{0,24}$/)

interface Commented<T> {
  value: T
  /** Head comment of the item (written above it). */
  head?: string
  /** Comment after the value of the item's first key. */
  trailing?: string
}

const commentedKrm = fc.record({value: krm, head: fc.option(commentText, {nil: undefined}), trailing: fc.option(commentText, {nil: undefined})})

function commentId(kind: string, i: number, t: string): string {
  return `${kind}${i}: ${t}`.trim()
}

/** Attaches the generated comments to a map node. */
function decorate(node: unknown, c: Commented<unknown>, i: number): string[] {
  const expected: string[] = []
  if (!isMap(node)) return expected
  if (c.head !== undefined) {
    node.commentBefore = ` ${commentId('head', i, c.head)}`
    expected.push(commentId('head', i, c.head))
  }
  const first = node.items[0]
  if (c.trailing !== undefined && first && first.value && typeof first.value === 'object' && !isMap(first.value) && !isSeq(first.value)) {
    ;(first.value as Node).comment = ` ${commentId('trailing', i, c.trailing)}`
    expected.push(commentId('trailing', i, c.trailing))
  }
  return expected
}

const STRINGIFY = {lineWidth: 0, minContentWidth: 0} as const

/** A wrapped ResourceList text for the items, with their comments; returns the comments to find. */
function wrappedText(items: Array<Commented<unknown>>): {text: string; comments: string[]} {
  const doc = new Document({apiVersion: 'config.kubernetes.io/v1', kind: 'ResourceList', items: items.map((i) => i.value)})
  const seq = doc.get('items', true) as unknown as {items: unknown[]}
  const comments = items.flatMap((c, i) => decorate(seq.items[i], c, i))
  return {text: doc.toString(STRINGIFY), comments}
}

/** One YAML document per item, `---` between them. */
function streamText(items: Array<Commented<unknown>>, offset = 0): {text: string; comments: string[]} {
  const comments: string[] = []
  const docs = items.map((c, i) => {
    const doc = new Document(c.value)
    comments.push(...decorate(doc.contents, c, i + offset))
    return doc.toString(STRINGIFY)
  })
  return {text: docs.join('---\n'), comments}
}

function toPlain(text: string): unknown[] {
  return parseAllDocuments(text).map((d) => d.toJS({maxAliasCount: -1}))
}

function sameContent(actual: unknown, expected: unknown, what: string): void {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  if (a !== e) throw new Error(`${what}: content changed\n  expected ${e.slice(0, 600)}\n  actual   ${a.slice(0, 600)}`)
}

function hasComments(text: string, comments: string[], what: string): void {
  for (const c of comments) if (!text.includes(c)) throw new Error(`${what}: comment ${JSON.stringify(c)} was lost\n${text.slice(0, 1500)}`)
}

/** Runs f; anything thrown must be an FnrError (a clear error), never a crash. */
function onlyFnrErrors(what: string, f: () => unknown): void {
  try {
    f()
  } catch (err) {
    if (!(err instanceof FnrError)) throw new Error(`${what} threw ${(err as Error)?.name ?? typeof err}, not an FnrError: ${(err as Error)?.stack ?? String(err)}`, {cause: err})
  }
}

// ---------------------------------------------------------------------------------------------
// Properties

/** Arbitrary input through everything `fnr eval` does with bytes it reads. */
function exerciseBytes(input: Uint8Array | string): void {
  onlyFnrErrors('parseResourceList + stringifyResourceList', () => rl.stringifyResourceList(rl.parseResourceList(input).items))
  onlyFnrErrors('parseResourceList + wrapForStdout', () => rl.wrapForStdout(rl.parseResourceList(input)))
  onlyFnrErrors('parseResourceList + unwrapToYaml', () => rl.unwrapToYaml(rl.parseResourceList(input)))
  onlyFnrErrors('parseResourceList + renderPackageFiles', () => rl.renderPackageFiles(rl.parseResourceList(input).items, 'InvalidArgument'))
  onlyFnrErrors('buildFunctionInput', () => rl.buildFunctionInput(rl.parseResourceList(input).items))
  onlyFnrErrors('readFunctionOutput', () => rl.readFunctionOutput(input))
  onlyFnrErrors('readFunctionOutput + renderPackageFiles', () => rl.renderPackageFiles(rl.readFunctionOutput(input).list.items))
  onlyFnrErrors('parseFunctionConfig', () => rl.parseFunctionConfig(typeof input === 'string' ? input : Buffer.from(input).toString('utf8'), 'fn-config'))
}

const YAML_TOKENS = [
  '-', '- ', ':', ': ', '{', '}', '[', ']', ',', '&a ', '&b ', '*a', '*b', '<<: *a', '!!str ', '!!binary ', '!x ', '? ', '|', '|-', '>+', '#c', '\n', '\n  ', '  ', '\t', '---\n', '...\n',
  '"', "'", '\\', '%YAML 1.2\n', '%TAG ! x:\n', 'apiVersion: v1\n', 'kind: ResourceList\n', 'kind: List\n', 'kind: ConfigMap\n', 'items:\n', 'items: ', 'results:\n', 'functionConfig:\n',
  'metadata:\n  name: x\n', 'name: x', 'annotations:\n', 'config.kubernetes.io/path: ', 'internal.config.kubernetes.io/index: ', "'1'", 'a.json', '../x', '/abs', 'x.yaml', '\u0000', '\ufeff', 'é', '😀', '\r\n', '0x1F', '~', 'null',
]

const yamlSoup = fc.array(fc.constantFrom(...YAML_TOKENS), {maxLength: 80}).map((t) => t.join(''))

/** A valid ResourceList text with random edits applied (deletions, insertions, duplications). */
const mutatedResourceList = fc
  .tuple(fc.array(commentedKrm, {minLength: 1, maxLength: 4}), fc.array(fc.tuple(fc.nat(), fc.nat(40), fc.constantFrom(...YAML_TOKENS), fc.constantFrom('delete', 'insert', 'duplicate')), {minLength: 1, maxLength: 6}))
  .map(([items, edits]) => {
    let t = wrappedText(items).text
    for (const [at, len, token, op] of edits) {
      const i = at % (t.length + 1)
      if (op === 'delete') t = t.slice(0, i) + t.slice(i + len)
      else if (op === 'insert') t = t.slice(0, i) + token + t.slice(i)
      else t = t.slice(0, i) + t.slice(i, i + len) + t.slice(i)
    }
    return t
  })

/** Alias-heavy documents: `levels` anchors, each a list of `fan` aliases to the previous one. */
const aliasBomb = fc.tuple(fc.integer({min: 1, max: 14}), fc.integer({min: 2, max: 12}), fc.constantFrom('data', 'results-value', 'json-path', 'merge')).map(([levels, fan, where]) => {
  const lines = ['apiVersion: config.kubernetes.io/v1', 'kind: ResourceList', 'items:', '- apiVersion: v1', '  kind: ConfigMap', '  metadata:', '    name: bomb']
  if (where === 'json-path') lines.push('    annotations:', '      config.kubernetes.io/path: bomb.json')
  lines.push('  data:', '    l0: &l0 [lol]')
  for (let i = 1; i <= levels; i++) {
    const refs = Array.from({length: fan}, () => `*l${i - 1}`)
    lines.push(where === 'merge' ? `    l${i}: &l${i} {<<: [${refs.join(', ')}]}` : `    l${i}: &l${i} [${refs.join(', ')}]`)
  }
  if (where === 'results-value') lines.push('results:', '- message: bomb', '  severity: error', '  field:', '    path: x', `    currentValue: *l${levels}`)
  return `${lines.join('\n')}\n`
})

type Details = {failed: boolean; numRuns: number; errorInstance: unknown}
type Property = (numRuns: number, seed: number) => Details | Promise<Details>

// fast-check's RunDetails is invariant in its parameter; the reports only need the common part.
const PROPERTIES: Record<string, Property> = {
  /** parse → stringify of a wrapped ResourceList keeps every item's content, key order and comments. */
  'wrapped ResourceList round trip': (numRuns, seed) =>
    fc.check(
      fc.property(fc.array(fc.record({value: fc.oneof(krm, fc.dictionary(key, value, {minKeys: 1, maxKeys: 5})), head: fc.option(commentText, {nil: undefined}), trailing: fc.option(commentText, {nil: undefined})}), {maxLength: 5}), (items) => {
        const {text, comments} = wrappedText(items)
        tick(`wrapped: ${describeInput(text)}`)
        const list = rl.parseResourceList(text)
        const out = rl.stringifyResourceList(list.items)
        sameContent((parseYaml(out) as {items: unknown[]}).items, items.map((i) => i.value), 'items after parse → stringify')
        hasComments(out, comments, 'parse → stringify')
        // Writing what was read gives the same text again.
        const again = rl.stringifyResourceList(rl.parseResourceList(out).items)
        if (again !== out) throw new Error(`not a fixpoint:\n${out}\n---- became ----\n${again}`)
      }),
      {numRuns, seed},
    ),

  /** Plain YAML documents → items (annotated) → unwrapped documents: same content and comments. */
  'plain documents round trip': (numRuns, seed) =>
    fc.check(
      fc.property(fc.array(commentedKrm, {minLength: 1, maxLength: 5}), (items) => {
        const {text, comments} = streamText(items)
        tick(`plain: ${describeInput(text)}`)
        const out = rl.unwrapToYaml(rl.parseResourceList(text))
        sameContent(toPlain(out), items.map((i) => i.value), 'documents after read → unwrap')
        hasComments(out, comments, 'read → unwrap')
      }),
      {numRuns, seed},
    ),

  /** kpt fn source → kpt fn sink of a generated package reproduces its files (content, comments). */
  'package source → sink': (numRuns, seed) =>
    fc.check(
      fc.asyncProperty(
        fc.uniqueArray(fc.record({dir: fc.constantFrom('', 'sub/', 'a/b/'), name: dnsName, docs: fc.array(commentedKrm, {minLength: 1, maxLength: 3})}), {minLength: 1, maxLength: 4, selector: (f) => `${f.dir}${f.name}`}),
        async (files) => {
          tick(`package: ${describeInput(files.map((f) => `${f.dir}${f.name}.yaml`))}`)
          const root = await mkdtemp(path.join(os.tmpdir(), 'fnr-rel-fuzz-'))
          try {
            const pkg = path.join(root, 'pkg')
            const expected = new Map<string, {docs: unknown[]; comments: string[]; text: string}>()
            let n = 0
            for (const f of files) {
              const rel = `${f.dir}${f.name}.yaml`
              const {text, comments} = streamText(f.docs, n)
              n += f.docs.length
              await mkdir(path.dirname(path.join(pkg, rel)), {recursive: true})
              await writeFile(path.join(pkg, rel), text)
              expected.set(rel, {docs: f.docs.map((d) => d.value), comments, text})
            }
            const out = path.join(root, 'out')
            await rl.sinkToDirectory(await rl.readPackage([pkg]), out)
            const written = await listFiles(out)
            sameContent(written.sort(), [...expected.keys()].sort(), 'files written')
            for (const [rel, e] of expected) {
              const text = await readFile(path.join(out, rel), 'utf8')
              sameContent(toPlain(text), e.docs, `${rel} after source → sink`)
              hasComments(text, e.comments, `${rel} after source → sink`)
            }
            // And once more from what was written. (Not byte for byte: the list indentation is
            // guessed from the text like kpt does, and kpt's guess can flip on keys with ':'.)
            const out2 = path.join(root, 'out2')
            await rl.sinkToDirectory(await rl.readPackage([out]), out2)
            for (const [rel, e] of expected) {
              const text = await readFile(path.join(out2, rel), 'utf8')
              sameContent(toPlain(text), e.docs, `${rel} after a second source → sink`)
              hasComments(text, e.comments, `${rel} after a second source → sink`)
            }
          } finally {
            await rm(root, {recursive: true, force: true})
          }
        },
      ),
      {numRuns, seed},
    ),

  /** Arbitrary bytes: every reader and writer either works or throws an FnrError. */
  'arbitrary bytes never crash': (numRuns, seed) =>
    fc.check(
      fc.property(fc.uint8Array({maxLength: 3000}), (bytes) => {
        tick(`bytes: ${describeInput(bytes.subarray(0, 200))}`)
        exerciseBytes(bytes)
      }),
      {numRuns, seed},
    ),

  /** YAML-looking token soup: the same, deeper into the parser. */
  'YAML token soup never crashes': (numRuns, seed) =>
    fc.check(
      fc.property(yamlSoup, (t) => {
        tick(`soup: ${describeInput(t)}`)
        exerciseBytes(t)
      }),
      {numRuns, seed},
    ),

  /** Valid ResourceLists with random edits: the same. */
  'mutated ResourceLists never crash': (numRuns, seed) =>
    fc.check(
      fc.property(mutatedResourceList, (t) => {
        tick(`mutated: ${describeInput(t)}`)
        exerciseBytes(t)
      }),
      {numRuns, seed},
    ),

  /** Alias bombs: bounded work (the watchdog would see a hang) and FnrErrors only. */
  'alias bombs stay bounded': (numRuns, seed) =>
    fc.check(
      fc.property(aliasBomb, (t) => {
        tick(`bomb: ${describeInput(t.slice(0, 300))}`)
        exerciseBytes(t)
      }),
      {numRuns, seed},
    ),
}

async function listFiles(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = []
  for (const e of await readdir(path.join(dir, rel), {withFileTypes: true})) {
    const r = rel ? `${rel}/${e.name}` : e.name
    if (e.isDirectory()) out.push(...(await listFiles(dir, r)))
    else out.push(r)
  }
  return out
}

export const PROPERTY_NAMES = Object.keys(PROPERTIES)

channel?.on('message', (req: RunRequest) => {
  void (async () => {
    const run = PROPERTIES[req.property]
    if (!run) {
      send({done: req.property, ok: false, numRuns: 0, report: `no property ${req.property}`})
      return
    }
    const details = await run(req.numRuns, req.seed)
    const report = details.failed ? `${fc.defaultReportMessage(details as fc.RunDetails<unknown>) ?? 'failed'}\nError: ${(details.errorInstance as Error)?.message ?? String(details.errorInstance)}` : undefined
    send({done: req.property, ok: !details.failed, numRuns: details.numRuns, ...(report ? {report: report.slice(0, 6000)} : {})})
  })()
})
