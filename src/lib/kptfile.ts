/**
 * Reading and validating a Kptfile the way `kpt fn render` (1.0.0-beta.56) does, before any
 * function runs, with kpt's messages (docs/cli.md, "What render refuses"):
 *
 * 1. The version check: the first document's apiVersion and kind must be `kpt.dev/v1` `Kptfile`
 *    (v1alpha1/v1alpha2 get kpt's upgrade hint, anything else "unknown resource type").
 * 2. The strict decode: every field is checked against kpt's Kptfile schema (KptFile and the
 *    types under it) as go-yaml v3 does with KnownFields: an unknown field, or a value of the
 *    wrong shape (a map or list where a string is expected, a string where a map is expected, …)
 *    is an error, all of them reported at once with their lines, in go-yaml's words (kpt's text
 *    line for line), then fnr's `Field paths:` (`line 9: pipeline.mutators[0].configMap.a`). Scalars
 *    of any type are accepted where a string is expected and keep their source text
 *    (`replicas: 0x1F` is "0x1F", as kpt sends it); null is "" in a map, dropped from a list.
 * 3. kpt's pipeline validation (`Kptfile is invalid: Field: … Value: … Reason: …`): exactly one
 *    of `image`/`exec`, a valid image name, not both `configMap` and `configPath`, and a
 *    `configPath` that is relative, inside the package, and a file holding exactly one KRM
 *    resource.
 *
 * Every failure is FnrError('InvalidPackage') whose message is the text kpt prints.
 */
import {readFileSync} from 'node:fs'
import path from 'node:path'

import {isAlias, isMap, isScalar, isSeq, LineCounter, parseAllDocuments, Scalar, type Document, type Node, type Pair, type YAMLMap} from 'yaml'

import {FnrError} from './errors.js'
import {krmError} from './resourcelist/meta.js'
import {goQuote} from './resourcelist/results.js'
import {GO_INT, MAX_ALIAS_EXPANDED_NODES, PARSE_OPTIONS, parseStream, resolvePlain} from './resourcelist/yaml.js'
import type {Selector} from './resourcelist/select.js'

export interface KptfileFunction {
  /** '' when absent. */
  image: string
  exec: string
  configPath: string
  /** In the Kptfile's order; empty when absent (kpt then sends no functionConfig). */
  configMap: Array<[string, string]>
  name: string
  selectors: Selector[]
  exclude: Selector[]
  /** The configPath file's resource as it is on disk (set by validatePipeline). */
  configFile?: YAMLMap
}

export interface KptfilePipeline {
  mutators: KptfileFunction[]
  validators: KptfileFunction[]
}

/** What render needs of a decoded Kptfile (the other fields are checked, not kept). */
export interface Kptfile {
  apiVersion: string
  kind: string
  name: string
  pipeline: KptfilePipeline
}

/** How kpt names a package directory in its messages: the absolute path. */
function kptfileAt(pkgAbs: string): string {
  return `Kptfile at ${goQuote(pkgAbs)}`
}

function invalidPackage(message: string): FnrError {
  return new FnrError('InvalidPackage', message)
}

/** `Error: No Kptfile found at "<dir>".` */
export function missingKptfileError(pkgAbs: string): FnrError {
  return invalidPackage(`Error: No Kptfile found at ${goQuote(pkgAbs)}.`)
}

function unreadable(pkgAbs: string, details: string): FnrError {
  return invalidPackage(`Error: ${kptfileAt(pkgAbs)} can't be read.\n\nDetails:\n${details}`)
}

/** kpt's ValidateError text. */
export function validateError(field: string, reason: string, value?: string): FnrError {
  return invalidPackage(`Kptfile is invalid:\nField: \`${field}\`\n${value ? `Value: ${goQuote(value)}\n` : ''}Reason: ${reason}\n`)
}

// ---------------------------------------------------------------------------------------------
// The schema (kpt's pkg/api/kptfile/v1 types, beta.56), as go-yaml sees it.

type Schema =
  | {t: 'string'; go: string}
  | {t: 'map'}
  | {t: 'list'; go: string; item: Schema}
  | {t: 'struct'; go: string; fields: Record<string, Schema>}

const str = (go = 'string'): Schema => ({t: 'string', go})
const strMap: Schema = {t: 'map'}
const list = (go: string, item: Schema): Schema => ({t: 'list', go, item})
const struct = (go: string, fields: Record<string, Schema>): Schema => ({t: 'struct', go, fields})

const SELECTOR = struct('v1.Selector', {apiVersion: str(), kind: str(), name: str(), namespace: str(), labels: strMap, annotations: strMap})
const FUNCTION = struct('v1.Function', {
  image: str(),
  exec: str(),
  configPath: str(),
  configMap: strMap,
  name: str(),
  selectors: list('[]v1.Selector', SELECTOR),
  exclude: list('[]v1.Selector', SELECTOR),
})
const UPSTREAM = struct('v1.Upstream', {
  type: str('v1.OriginType'),
  git: struct('v1.Git', {repo: str(), directory: str(), ref: str()}),
  updateStrategy: str('v1.UpdateStrategyType'),
})
const KPTFILE = struct('v1.KptFile', {
  apiVersion: str(),
  kind: str(),
  metadata: struct('yaml.ObjectMeta', {name: str(), namespace: str(), labels: strMap, annotations: strMap}),
  upstream: UPSTREAM,
  upstreamLock: struct('v1.UpstreamLock', {
    type: str('v1.OriginType'),
    git: struct('v1.GitLock', {repo: str(), directory: str(), ref: str(), commit: str()}),
  }),
  info: struct('v1.PackageInfo', {
    site: str(),
    emails: list('[]string', str()),
    license: str(),
    licenseFile: str(),
    description: str(),
    keywords: list('[]string', str()),
    man: str(),
    readinessGates: list('[]v1.ReadinessGate', struct('v1.ReadinessGate', {conditionType: str()})),
  }),
  pipeline: struct('v1.Pipeline', {mutators: list('[]v1.Function', FUNCTION), validators: list('[]v1.Function', FUNCTION)}),
  inventory: struct('v1.Inventory', {namespace: str(), name: str(), inventoryID: str(), labels: strMap, annotations: strMap}),
  status: struct('v1.Status', {
    conditions: list('[]v1.Condition', struct('v1.Condition', {type: str(), status: str('v1.ConditionStatus'), reason: str(), message: str()})),
  }),
})

// ---------------------------------------------------------------------------------------------
// The decoder.

/** A decoded value: a string, a list, an ordered map (string maps) or a struct (known fields set). */
type Value = string | Value[] | Array<[string, string]> | {[field: string]: Value}

class Decoder {
  /** go-yaml's lines (`line 9: cannot unmarshal …`). */
  readonly errors: string[] = []
  /** The field path of each error that has one (`line 9: pipeline.mutators[0].configMap.a`). */
  readonly paths: string[] = []
  private visited = 0

  constructor(
    private readonly doc: Document,
    private readonly lines: LineCounter,
  ) {}

  private line(node: Node | Pair['key']): number {
    const range = (node as {range?: [number, number, number]}).range
    return range ? this.lines.linePos(range[0]).line : 0
  }

  /** The node an alias stands for (go-yaml decodes the anchored node in its place). */
  private deref(node: unknown): Node | null {
    if (node === null || node === undefined) return null
    if (++this.visited > MAX_ALIAS_EXPANDED_NODES) {
      throw new FnrError('InvalidArgument', `YAML aliases expand to more than ${MAX_ALIAS_EXPANDED_NODES} nodes; refusing to expand them`)
    }
    if (isAlias(node)) return (node.resolve(this.doc) as Node | undefined) ?? null
    return node as Node
  }

  private report(line: number, message: string, at?: string): void {
    this.errors.push(`line ${line}: ${message}`)
    if (at) this.paths.push(`line ${line}: ${at}`)
  }

  /** go-yaml's tag of a node as its messages show it (`!!str`, `!!int`, `!!map`, …). */
  private tagOf(node: Node): string {
    const explicit = (node as {tag?: string}).tag
    if (explicit) return explicit.startsWith('tag:yaml.org,2002:') ? `!!${explicit.slice('tag:yaml.org,2002:'.length)}` : explicit
    if (isMap(node)) return '!!map'
    if (isSeq(node)) return '!!seq'
    const s = node as Scalar
    if (s.type !== undefined && s.type !== Scalar.PLAIN) return '!!str'
    const v = resolvePlain(String(s.value ?? ''))
    if (v === null) return '!!null'
    if (typeof v === 'boolean') return '!!bool'
    if (typeof v === 'number') return GO_INT.test(String(s.value).replace(/_/g, '')) ? '!!int' : '!!float'
    return '!!str'
  }

  private isNull(node: Node | null): boolean {
    return node === null || (isScalar(node) && this.tagOf(node) === '!!null')
  }

  /** go-yaml's "cannot unmarshal" message, with fnr's field path after it. */
  private typeError(node: Node, go: string, at: string): void {
    const tag = this.tagOf(node)
    let value = ''
    if (tag !== '!!seq' && tag !== '!!map') {
      const text = String((node as Scalar).value ?? '')
      value = text.length > 10 ? ` \`${text.slice(0, 7)}...\`` : ` \`${text}\``
    }
    this.report(this.line(node), `cannot unmarshal ${tag}${value} into ${go}`, at)
  }

  /** Decodes `raw` into `schema`; undefined when go-yaml would leave the target unset. */
  decode(raw: unknown, schema: Schema, at: string): Value | undefined {
    const node = this.deref(raw)
    if (node === null || this.isNull(node)) return undefined
    switch (schema.t) {
      case 'string':
        if (isScalar(node)) return String(node.value ?? '')
        this.typeError(node, schema.go, at)
        return undefined
      case 'map':
        return this.stringMap(node, at)
      case 'list':
        return this.list(node, schema, at)
      case 'struct':
        return this.struct(node, schema, at)
    }
  }

  private stringMap(node: Node, at: string): Value | undefined {
    if (!isMap(node)) {
      this.typeError(node, 'map[string]string', at)
      return undefined
    }
    if (this.duplicates(node)) return undefined
    const out: Array<[string, string]> = []
    for (const pair of node.items) {
      const key = this.key(pair, at)
      if (key === undefined) continue
      const value = this.deref(pair.value)
      // go-yaml sets a null value as "" (a null list item, by contrast, is dropped).
      if (value === null || this.isNull(value)) out.push([key, ''])
      else if (isScalar(value)) out.push([key, String(value.value ?? '')])
      else this.typeError(value, 'string', `${at}.${key}`)
    }
    return out
  }

  private list(node: Node, schema: Schema & {t: 'list'}, at: string): Value | undefined {
    if (!isSeq(node)) {
      this.typeError(node, schema.go, at)
      return undefined
    }
    const out: Value[] = []
    node.items.forEach((item, i) => {
      const v = this.decode(item, schema.item, `${at}[${i}]`)
      if (v !== undefined) out.push(v)
    })
    return out
  }

  private struct(node: Node, schema: Schema & {t: 'struct'}, at: string): Value | undefined {
    if (!isMap(node)) {
      this.typeError(node, schema.go, at)
      return undefined
    }
    if (this.duplicates(node)) return undefined
    const out: {[field: string]: Value} = {}
    const explicit = new Set(node.items.map((p) => (isScalar(p.key) ? String(p.key.value ?? '') : undefined)))
    for (const pair of node.items) {
      if (isScalar(pair.key) && pair.key.value === '<<' && (pair.key.type === undefined || pair.key.type === Scalar.PLAIN)) {
        this.merge(pair.value, {schema, at, out, explicit})
        continue
      }
      const key = this.key(pair, at)
      if (key === undefined) continue
      const path = at === '' ? key : `${at}.${key}`
      const field = Object.hasOwn(schema.fields, key) ? schema.fields[key] : undefined
      if (field === undefined) {
        this.report(this.line(pair.key as Node), `field ${key} not found in type ${schema.go}`, path)
        continue
      }
      const v = this.decode(pair.value, field, path)
      if (v !== undefined) out[key] = v
    }
    return out
  }

  /** A `<<: *anchor` merge: the merged map's fields, where the map itself does not set them. */
  private merge(raw: unknown, into: {schema: Schema & {t: 'struct'}; at: string; out: {[field: string]: Value}; explicit: Set<string | undefined>}): void {
    const node = this.deref(raw)
    const sources = isSeq(node) ? node.items.map((n) => this.deref(n)) : [node]
    for (const source of sources) {
      if (!isMap(source)) {
        this.report(node ? this.line(node) : 0, 'map merge requires map or sequence of maps as the value', into.at)
        return
      }
      const merged = this.struct(source, into.schema, into.at) as {[field: string]: Value} | undefined
      for (const [k, v] of Object.entries(merged ?? {})) if (!into.explicit.has(k) && !Object.hasOwn(into.out, k)) into.out[k] = v
    }
  }

  private key(pair: Pair, at: string): string | undefined {
    const key = this.deref(pair.key)
    if (this.isNull(key)) return ''
    if (!isScalar(key)) {
      this.typeError(key!, 'string', at)
      return undefined
    }
    return String(key.value ?? '')
  }

  /** go-yaml refuses a map with a repeated key (and decodes nothing of it). */
  private duplicates(node: Node & {items: Pair[]}): boolean {
    const before = this.errors.length
    const seen = new Map<string, Node[]>()
    const keys = node.items.map((p) => p.key as Node)
    for (const k of keys) {
      if (!isScalar(k)) continue
      const text = String(k.value ?? '')
      const earlier = seen.get(text) ?? []
      earlier.push(k)
      seen.set(text, earlier)
    }
    for (const k of keys) {
      if (!isScalar(k)) continue
      const same = seen.get(String(k.value ?? ''))!
      for (const later of same.slice(same.indexOf(k) + 1)) {
        this.report(this.line(later), `mapping key ${goQuote(String(k.value ?? ''))} already defined at line ${this.line(k)}`)
      }
    }
    return this.errors.length > before
  }
}

/**
 * The parser's fault as go-yaml (kpt's parser) words and places it, where the two parsers see the
 * same fault: a key running over several lines is one never followed by its ':' (kpt's
 * invalid-kptfile e2e case); a mapping nested in a compact one (`key: a: b`, or a plain value
 * that runs on over the next line into a `- x:` item, as in kpt's subpkg-has-invalid-kptfile case)
 * is go-yaml's "mapping values are not allowed in this context", on the line of the nested ':'.
 * Otherwise the parser's own message, as one line, at its own place.
 */
function goYamlFault(error: {code?: string; message: string; pos?: [number, number]}, text: string): {message: string; at: number | undefined} {
  const at = error.pos?.[0]
  if (error.code === 'MULTILINE_IMPLICIT_KEY') return {message: "could not find expected ':'", at}
  // The parser's other fault of that code is a block sequence (`- x`) where a key should be.
  if (error.code === 'BLOCK_AS_IMPLICIT_KEY' && at !== undefined && !/^-[ \t\n]/.test(text.slice(at, at + 2))) {
    return {message: 'mapping values are not allowed in this context', at: valueIndicatorFrom(text, at) ?? at}
  }
  return {message: (error.message.split('\n', 1)[0] ?? '').replace(/ at line \d+, column \d+:?$/, ''), at}
}

/**
 * The offset of the first ':' that ends a key starting at `from` (a ':' followed by a blank, a line
 * end or the end of the text), past a quoted key's closing quote; undefined at a comment.
 */
function valueIndicatorFrom(text: string, from: number): number | undefined {
  for (let i = pastQuoted(text, from); i < text.length; i++) {
    const c = text[i]
    if (c === '#' && /[ \t\n]/.test(text[i - 1] ?? '\n')) return undefined
    if (c === ':' && (i + 1 === text.length || /[ \t\r\n]/.test(text[i + 1]!))) return i
  }
  return undefined
}

/** Where a scalar starting at `from` ends when it is quoted (past its closing quote), else `from`. */
function pastQuoted(text: string, from: number): number {
  const quote = text[from]
  if (quote !== '"' && quote !== "'") return from
  for (let i = from + 1; i < text.length; i++) {
    if (quote === '"' && text[i] === '\\') i++
    else if (text[i] === quote) {
      if (quote === "'" && text[i + 1] === "'") i++
      else return i + 1
    }
  }
  return text.length
}

/** kpt's version check (CheckKptfileVersion); the apiVersion and kind as strings. */
function checkVersion(root: Node, pkgAbs: string): void {
  if (!isMap(root)) throw unreadable(pkgAbs, 'missing Resource metadata')
  const text = (key: string): string => {
    const pair = root.items.find((p) => isScalar(p.key) && p.key.value === key)
    return pair && isScalar(pair.value) ? String(pair.value.value ?? '') : ''
  }
  const apiVersion = text('apiVersion')
  const kind = text('kind')
  let group = ''
  let version = ''
  if (apiVersion !== '' && apiVersion !== '/') {
    const slashes = apiVersion.split('/').length - 1
    if (slashes === 0) version = apiVersion
    else if (slashes === 1) [group, version] = apiVersion.split('/') as [string, string]
    else throw unreadable(pkgAbs, `unexpected GroupVersion string: ${apiVersion}`)
  }
  if (group === 'kpt.dev' && kind === 'Kptfile') {
    if (version === 'v1') return
    if (version === 'v1alpha1') {
      throw invalidPackage(
        `Error: ${kptfileAt(pkgAbs)} has an old version (${goQuote(version)}) of the Kptfile schema.\nPlease update the package to the latest format by following https://kpt.dev/installation/migration.`,
      )
    }
    if (version === 'v1alpha2') {
      throw invalidPackage(
        `Error: ${kptfileAt(pkgAbs)} has an old version (${goQuote(version)}) of the Kptfile schema.\nPlease run "kpt fn eval <PKG_PATH> -i gcr.io/kpt-fn/fix:v0.2 --include-meta-resources" to upgrade the package and retry.`,
      )
    }
  }
  throw invalidPackage(`Error: ${kptfileAt(pkgAbs)} has an unknown resource type (${goQuote(`${group}/${version}, Kind=${kind}`)}).`)
}

/** Decodes and validates a Kptfile (every step of the module comment); see validatePipeline for `read`. */
export function readKptfile(text: string, pkgAbs: string, read: PackageFileReader = readIfExists): Kptfile {
  const kf = decodeKptfile(text, pkgAbs)
  validatePipeline(kf, pkgAbs, read)
  return kf
}

/** The decoded values render uses, typed. */
function toKptfile(value: {[field: string]: Value}): Kptfile {
  const s = (v: Value | undefined): string => (typeof v === 'string' ? v : '')
  const selectors = (v: Value | undefined): Selector[] =>
    ((v ?? []) as Array<{[field: string]: Value}>).map((sel) => {
      const out: Selector = {}
      for (const k of ['apiVersion', 'kind', 'name', 'namespace'] as const) if (sel[k] !== undefined) out[k] = s(sel[k])
      for (const k of ['labels', 'annotations'] as const) if (sel[k] !== undefined) out[k] = Object.fromEntries(sel[k] as Array<[string, string]>)
      return out
    })
  const fns = (v: Value | undefined): KptfileFunction[] =>
    ((v ?? []) as Array<{[field: string]: Value}>).map((f) => ({
      image: s(f.image),
      exec: s(f.exec),
      configPath: s(f.configPath),
      configMap: (f.configMap ?? []) as Array<[string, string]>,
      name: s(f.name),
      selectors: selectors(f.selectors),
      exclude: selectors(f.exclude),
    }))
  const pipeline = (value.pipeline ?? {}) as {[field: string]: Value}
  const metadata = (value.metadata ?? {}) as {[field: string]: Value}
  return {apiVersion: s(value.apiVersion), kind: s(value.kind), name: s(metadata.name), pipeline: {mutators: fns(pipeline.mutators), validators: fns(pipeline.validators)}}
}

/**
 * Decodes a Kptfile's text strictly (steps 1 and 2 of the module comment). `pkgAbs` is the
 * package directory, as kpt names it in the message.
 */
export function decodeKptfile(text: string, pkgAbs: string): Kptfile {
  const lines = new LineCounter()
  const normalised = text.includes('\r\n') ? text.replace(/\r\n/g, '\n') : text
  const docs = parseAllDocuments(normalised, {...PARSE_OPTIONS, lineCounter: lines})
  // An empty stream still carries the errors of what could not be parsed.
  const streamErrors = (docs as {errors?: Array<{code?: string; message: string; pos?: [number, number]}>}).errors ?? []
  const doc = docs[0]
  const parseError = doc?.errors[0] ?? streamErrors[0]
  if (parseError) {
    const {message, at} = goYamlFault(parseError, normalised)
    throw unreadable(pkgAbs, `yaml: ${at === undefined ? '' : `line ${lines.linePos(at).line}: `}${message}`)
  }
  const root = doc?.contents as Node | null | undefined
  if (root === undefined || root === null) throw unreadable(pkgAbs, 'EOF')
  checkVersion(root, pkgAbs)
  const decoder = new Decoder(doc!, lines)
  const value = (decoder.decode(root, KPTFILE, '') ?? {}) as {[field: string]: Value}
  if (decoder.errors.length > 0) {
    // kpt's text, line for line, then the field paths go-yaml does not give.
    const paths = decoder.paths.length > 0 ? `\n\nField paths:\n  ${decoder.paths.join('\n  ')}` : ''
    throw unreadable(pkgAbs, `yaml: unmarshal errors:\n  ${decoder.errors.join('\n  ')}${paths}`)
  }
  return toKptfile(value)
}

// ---------------------------------------------------------------------------------------------
// kpt's pipeline validation.

// kpt's function name check (docker's reference grammar), written so that no input makes the
// regular expression backtrack for long: every repetition starts with a character the previous
// part cannot match.
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*'
const DOMAIN_COMPONENT = '[a-zA-Z0-9]+(?:-+[a-zA-Z0-9]+)*'
const DOMAIN = `${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*(?::[0-9]+)?`
const IMAGE_NAME = new RegExp(`^(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?:[:@](?:[\\w][\\w.-]{0,127}|sha256:[a-zA-Z0-9]{64}))?$`)

/** kpt's ValidateFunctionImageURL: the reason, or undefined when the name is valid. */
export function imageNameError(image: string): string | undefined {
  return IMAGE_NAME.test(image) ? undefined : `function name ${goQuote(image)} is invalid`
}

/** kpt's configPath syntax check: the reason, or undefined. */
function configPathSyntaxError(p: string): string | undefined {
  if (p.trim() === '') return 'path must not be empty'
  const clean = path.posix.normalize(p)
  if (path.posix.isAbsolute(clean)) return 'path must be relative'
  // kpt refuses any path containing "..", even inside a name ("a..b.yaml").
  if (clean.includes('..')) return 'path must not be outside the package'
  return undefined
}

/** Reads a file of the package; undefined when it cannot be opened. */
export type PackageFileReader = (abs: string) => string | undefined

// Synchronous, so the Kptfiles of subpackages are checked while the package is read
// (render.ts): a configPath file is one small file, read once.
const readIfExists: PackageFileReader = (abs) => {
  try {
    return readFileSync(abs, 'utf8')
  } catch {
    return undefined
  }
}

/** The configPath file's one KRM resource, or kpt's reason why it is not that. */
function configFile(text: string, configPath: string): YAMLMap | string {
  let docs
  try {
    docs = parseStream(text, configPath, 'InvalidPackage')
  } catch (err) {
    return `failed to read functionConfig ${goQuote(configPath)}: ${(err as Error).message}`
  }
  // kpt panics on a file without documents (index out of range); fnr refuses it.
  if (docs.length === 0) return `functionConfig ${goQuote(configPath)} must contain one config, got 0`
  if (docs.length > 1) return `functionConfig ${goQuote(configPath)} must not contain more than one config, got ${docs.length}`
  const node = docs[0]!.node
  const bad = krmError(node, configPath)
  if (bad !== undefined) return `functionConfig ${goQuote(configPath)}: ${bad}`
  return node as YAMLMap
}

/**
 * kpt's Kptfile.Validate (step 3 of the module comment) for the package at `pkgAbs`: throws
 * the first problem, as kpt does. Each configPath function gets its file's resource as
 * `configFile`.
 */
export function validatePipeline(kf: Kptfile, pkgAbs: string, read: PackageFileReader = readIfExists): void {
  for (const key of ['mutators', 'validators'] as const) {
    kf.pipeline[key].forEach((f, i) => validateFunction(f, `pipeline.${key}[${i}]`, pkgAbs, read))
  }
}

function validateFunction(f: KptfileFunction, field: string, pkgAbs: string, read: PackageFileReader): void {
  if (f.image === '' && f.exec === '') throw validateError(field, 'must specify a functon (`image` or `exec`) to execute')
  if (f.image !== '' && f.exec !== '') throw validateError(field, 'must not specify both `image` and `exec` at the same time')
  const badImage = f.image === '' ? undefined : imageNameError(f.image)
  if (badImage) throw validateError(`${field}.image`, badImage, f.image)
  if (f.configMap.length > 0 && f.configPath !== '') {
    throw validateError(field, 'functionConfig must not specify both `configMap` and `configPath` at the same time')
  }
  if (f.configPath === '') return
  const syntax = configPathSyntaxError(f.configPath)
  if (syntax) throw validateError(`${field}.configPath`, syntax, f.configPath)
  const text = read(path.join(pkgAbs, f.configPath))
  if (text === undefined) throw validateError(`${field}.configPath`, 'functionConfig must exist in the current package', f.configPath)
  const config = configFile(text, f.configPath)
  if (typeof config === 'string') throw validateError(`${field}.configPath`, config, f.configPath)
  f.configFile = config
}
