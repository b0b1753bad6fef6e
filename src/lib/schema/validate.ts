/**
 * Validation against JSON schemas (OpenAPI v3 schemas as Kubernetes CRDs write them, and fnr's own file
 * schemas in this folder), with ajv, and the problems written as kubectl writes field errors, one line
 * each: `spec.podExecutor.tags[0]: Invalid value: 5: must be of type string`, `spec.image: Required value`,
 * `testType: Unsupported value: "wasm": supported values: "eval", "render"`.
 *
 * ajv is loaded on the first validation (so `fnr eval`'s start-up never pays for it) and each schema is
 * compiled once (by object identity).
 *
 * Besides standard JSON Schema the validator knows what CRD schemas carry:
 *   - `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`: annotations (unknown fields are
 *     never refused; an API server prunes them, fnr ignores them);
 *   - `x-kubernetes-validations`: the rules of the CEL subset the CRDs use (`has(self.a.b)`, `!`, `&&`, `||`,
 *     parentheses); a rule outside it fails the compile, so a new rule in a CRD cannot be skipped silently;
 *   - formats: `duration` (a Go duration, at least 0), `int64`, and fnr's own, each with the phrase its
 *     error says (FORMATS).
 */
import {createRequire} from 'node:module'

import type {Ajv as AjvClass, ErrorObject, ValidateFunction} from 'ajv'

import {parseGoDuration} from '../config/go-flags.js'

/** A JSON schema as a plain object (a CRD's openAPIV3Schema, or one of this folder's). */
export type Schema = Record<string, unknown>

/** Custom string formats: the check, and what the error says the value must be. */
const FORMATS: Record<string, {validate: (value: string) => boolean; must: string; noun?: string}> = {
  // ("" is an unset duration, as fnr has always read a FunctionConfig's timeToLive)
  duration: {validate: (v) => v === '' || (parseGoDuration(v) ?? -1) >= 0, must: 'must be a duration like 30m', noun: 'a duration like 30m'},
  'positive-duration': {validate: (v) => (parseGoDuration(v) ?? 0) > 0, must: 'must be a duration above 0, like 30s or 2m', noun: 'a duration above 0, like 30s or 2m'},
  integer: {validate: (v) => /^\s*[+-]?\d+\s*$/.test(v), must: 'must be an integer', noun: 'an integer'},
  'non-blank': {validate: (v) => v.trim() !== '', must: 'must not be blank'},
  'pull-policy': {validate: (v) => v === '' || ['always', 'ifnotpresent', 'never'].includes(v.toLowerCase()), must: 'must be one of Always, IfNotPresent, Never (in any case)', noun: 'one of Always, IfNotPresent, Never (in any case)'},
  'go-regexp': {validate: isGoRegExp, must: 'must be a regular expression (the syntax Go and JavaScript share)'},
}

/** A leading Go flag group becomes JavaScript flags; (?U) has no JavaScript form (fntest/discover.ts goRegExp). */
function isGoRegExp(source: string): boolean {
  const flags = /^\(\?([imsU]+)\)/.exec(source)
  if (flags?.[1]!.includes('U')) return false
  try {
    new RegExp(flags ? source.slice(flags[0].length) : source, flags?.[1] ?? '')
    return true
  } catch {
    return false
  }
}

let ajv: AjvClass | undefined
const compiled = new WeakMap<Schema, ValidateFunction>()

function instance(): AjvClass {
  if (ajv) return ajv
  // Loaded on first use: a synchronous require keeps the synchronous parsers (the pod cache config) synchronous.
  const Ajv = (createRequire(import.meta.url)('ajv') as {default: typeof AjvClass}).default
  const a = new Ajv({allErrors: true, verbose: true, allowUnionTypes: true, strict: true, strictRequired: false})
  for (const [name, f] of Object.entries(FORMATS)) a.addFormat(name, {type: 'string', validate: f.validate})
  a.addFormat('int64', {type: 'number', validate: (n: number) => Number.isSafeInteger(n)})
  a.addKeyword({keyword: 'x-kubernetes-preserve-unknown-fields'})
  a.addKeyword({keyword: 'x-kubernetes-int-or-string'})
  a.addKeyword({
    keyword: 'x-kubernetes-validations',
    errors: true,
    compile(rules: Array<{rule: string; message?: string}>) {
      const checks = rules.map((r) => ({test: compileCelSubset(r.rule), message: r.message ?? `failed rule: ${r.rule}`}))
      const validate = (data: unknown): boolean => {
        const failed = checks.filter((c) => !c.test(data))
        validate.errors = failed.map((c) => ({keyword: 'x-kubernetes-validations', message: c.message, params: {}}))
        return failed.length === 0
      }
      validate.errors = [] as Array<Partial<ErrorObject>>
      return validate
    },
  })
  ajv = a
  return a
}

/**
 * The problems of `data` against `schema`, one kubectl-like line each (none: valid).
 */
export function schemaProblems(schema: Schema, data: unknown): string[] {
  const validate = compiled.get(schema) ?? instance().compile(schema)
  compiled.set(schema, validate)
  if (validate(data)) return []
  return fieldErrors(validate.errors ?? [])
}

/** Only compiles (a schema that cannot compile, e.g. a CEL rule outside the subset, throws). */
export function compileSchema(schema: Schema): void {
  if (!compiled.has(schema)) compiled.set(schema, instance().compile(schema))
}

// ------------------------------------------------------------------------------------------ messages

/** ajv's errors as kubectl's field errors; the branches of a failed anyOf are said once, by the anyOf. */
function fieldErrors(errors: ErrorObject[]): string[] {
  const lines: string[] = []
  for (const e of errors) {
    if (/\/anyOf\/\d+\//.test(e.schemaPath)) continue
    const line = fieldError(e)
    if (!lines.includes(line)) lines.push(line)
  }
  return lines
}

type Params = Record<string, unknown>
const limit = (e: ErrorObject): number => Number((e.params as Params).limit)
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`
const BOUNDS: Record<string, string> = {minimum: 'greater than or equal to', maximum: 'less than or equal to', exclusiveMinimum: 'greater than', exclusiveMaximum: 'less than'}

/** What follows "Invalid value: <value>: " for each keyword (the rest of fieldError's forms are below). */
const MUST: Record<string, (e: ErrorObject) => string> = {
  type: (e) => {
    const types = String((e.params as Params).type).split(',')
    // A string of a format (a quoted integer, a duration) is said by what the format is.
    const noun = FORMATS[String((e.parentSchema as Schema | undefined)?.format)]?.noun
    if (!noun || !types.includes('string')) return `must be of type ${typeWords(types)}`
    const others = types.filter((t) => t !== 'string' && t !== 'null' && !(t === 'integer' && noun === 'an integer'))
    return `must be ${[...others.map((t) => (t === 'boolean' ? 'true or false' : `of type ${t}`)), noun].join(' or ')}`
  },
  format: (e) => FORMATS[String((e.params as Params).format)]?.must ?? `must be in ${String((e.params as Params).format)} format`,
  anyOf: (e) => {
    const types = (e.schema as Schema[]).map((s) => s.type).filter((t): t is string => typeof t === 'string')
    return types.length > 0 ? `must be of type ${typeWords(types)}` : 'must match one of the allowed forms'
  },
  minLength: (e) => `must be at least ${plural(limit(e), 'character')} long`,
  maxLength: (e) => `must be at most ${plural(limit(e), 'character')} long`,
  pattern: (e) => `must match the regular expression ${JSON.stringify((e.params as Params).pattern)}`,
  ...Object.fromEntries(Object.entries(BOUNDS).map(([k, words]) => [k, (e: ErrorObject) => `must be ${words} ${limit(e)}`])),
  'x-kubernetes-validations': (e) => e.message ?? 'failed a validation rule',
}

function fieldError(e: ErrorObject): string {
  const at = fieldPath(e.instancePath)
  const field = (p: string): string => (p === '' ? '<root>' : p)
  if (e.keyword === 'required') return `${field(joinPath(at, String((e.params as Params).missingProperty)))}: Required value`
  if (e.keyword === 'enum') {
    const allowed = ((e.params as Params).allowedValues as unknown[]).filter((v) => v !== null && v !== '')
    return `${field(at)}: Unsupported value: ${JSON.stringify(e.data)}: supported values: ${allowed.map((v) => JSON.stringify(v)).join(', ')}`
  }
  if (e.keyword === 'minItems' || e.keyword === 'maxItems') {
    // (kube-apiserver shows a list's length here)
    const length = Array.isArray(e.data) ? e.data.length : shown(e.data)
    return `${field(at)}: Invalid value: ${length}: must have at ${e.keyword === 'minItems' ? 'least' : 'most'} ${plural(limit(e), 'item')}`
  }
  return `${field(at)}: Invalid value: ${shown(e.data)}: ${MUST[e.keyword]?.(e) ?? e.message ?? `failed ${e.keyword}`}`
}

/**
 * Type names as a reader of the file thinks of them: null is "may be left empty" and not said; a field that
 * takes any scalar as its text (Go's decoding into a string) is "string".
 */
function typeWords(types: string[]): string {
  let words = types.filter((t) => t !== 'null')
  if (words.includes('string') && words.includes('boolean') && words.every((t) => ['string', 'number', 'integer', 'boolean'].includes(t))) words = ['string']
  if (words.includes('integer') && words.includes('number')) words = words.filter((t) => t !== 'integer')
  return words.join(' or ') || 'null'
}

/** A value in a field error: scalars as JSON (long strings cut), lists and maps by their type, as kube-apiserver does. */
function shown(value: unknown): string {
  if (value === undefined) return '"null"'
  if (Array.isArray(value)) return '"array"'
  if (value !== null && typeof value === 'object') return '"object"'
  const text = JSON.stringify(value)
  return text.length > 80 ? `${text.slice(0, 76)}…${text.at(-1)}` : text
}

/** An ajv instance path ("/spec/tags/0", JSON Pointer) as kubectl's field path ("spec.tags[0]"). */
export function fieldPath(pointer: string): string {
  let out = ''
  for (const raw of pointer.split('/').slice(1)) out = joinPath(out, raw.replace(/~1/g, '/').replace(/~0/g, '~'))
  return out
}

function joinPath(base: string, segment: string): string {
  if (/^\d+$/.test(segment)) return `${base}[${segment}]`
  if (/^[A-Za-z_$][\w$-]*$/.test(segment)) return base === '' ? segment : `${base}.${segment}`
  return `${base}[${segment}]`
}

// ------------------------------------------------------------------------------------------ CEL subset

/**
 * Compiles a rule of the CEL subset the CRDs use: has(self.a.b), !, &&, ||, parentheses. Anything else
 * throws, naming the rule.
 */
export function compileCelSubset(rule: string): (self: unknown) => boolean {
  const tokens = rule.match(/has\(\s*self(?:\.[A-Za-z_]\w*)+\s*\)|&&|\|\||!|\(|\)|\S+/g) ?? []
  let i = 0
  const outside = (): never => {
    throw new Error(`the validation rule ${JSON.stringify(rule)} is outside the CEL subset fnr evaluates (has(self.x), !, &&, ||, parentheses)`)
  }
  type Node = (self: unknown) => boolean
  const primary = (): Node => {
    const t = tokens[i++]
    if (t === '!') {
      const inner = primary()
      return (s) => !inner(s)
    }
    if (t === '(') {
      const inner = or()
      if (tokens[i++] !== ')') outside()
      return inner
    }
    const m = t === undefined ? null : /^has\(\s*self((?:\.[A-Za-z_]\w*)+)\s*\)$/.exec(t)
    if (!m) return outside()
    const keys = m[1]!.slice(1).split('.')
    return (s) => {
      let v = s
      for (const k of keys) {
        if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, k)) return false
        v = (v as Record<string, unknown>)[k]
      }
      return true
    }
  }
  const and = (): Node => {
    let left = primary()
    while (tokens[i] === '&&') {
      i++
      const l = left
      const r = primary()
      left = (s) => l(s) && r(s)
    }
    return left
  }
  const or = (): Node => {
    let left = and()
    while (tokens[i] === '||') {
      i++
      const l = left
      const r = and()
      left = (s) => l(s) || r(s)
    }
    return left
  }
  const node = or()
  if (i !== tokens.length) outside()
  return node
}

/** Object properties whose value is null, removed (in a copy), as kube-apiserver prunes nulls of fields that are not nullable. */
export function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls)
  if (value === null || typeof value !== 'object' || value instanceof Date) return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = withoutNulls(v)
  return out
}
