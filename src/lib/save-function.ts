/**
 * `fnr eval --save` (kpt fn eval --save): after the function ran, it is added to the package's
 * Kptfile pipeline as kpt adds it: in `.pipeline.mutators` (--type mutator) or
 * `.pipeline.validators` (--type validator), replacing the entry with the same image (or exec),
 * else appended. The entry holds the image or exec, the selectors and exclusions given, and
 * either `configPath` (the --fn-config file, relative to the package) or `configMap` (the
 * `-- key=value` arguments, keys sorted; a first argument without "=" names the functionConfig's
 * kind and is not saved). The Kptfile's comments, field order and other fields are kept (the YAML
 * document is edited in place), and it is replaced atomically (resourcelist/transaction.ts).
 *
 * As in kpt, a Kptfile that cannot be read or written is no failure of the command: the function
 * has run and its output is written; a line on stderr says the function was not added.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {isMap, isScalar, isSeq, parseDocument, visit, YAMLMap, YAMLSeq, type Document} from 'yaml'

import {FnrError} from './errors.js'
import {applyChanges} from './resourcelist/transaction.js'
import {isEmptySelector, type Selector} from './resourcelist/select.js'
import {stringScalar} from './resourcelist/yaml.js'

export type SaveType = 'mutator' | 'validator'

export interface SavedFunction {
  image?: string
  exec?: string
  /** The --fn-config file (as given: resolved against the working directory). */
  fnConfigPath?: string
  /** The `-- key=value` arguments. */
  fnConfigArgs: readonly string[]
  selector?: Selector
  exclude?: Selector
}

/**
 * kpt's check before the function runs: a --fn-config file to save must be inside the package
 * (the Kptfile names it relative to the package).
 */
export function checkSavedConfigPath(pkgDir: string, fnConfigPath: string | undefined): void {
  if (fnConfigPath === undefined) return
  const pkgAbs = path.resolve(pkgDir)
  if (!path.resolve(fnConfigPath).startsWith(pkgAbs)) {
    throw new FnrError('Usage', `--fn-config must be under ${pkgAbs} if saving functions to Kptfile (--save=true)`, {details: {commandLine: true}})
  }
}

/** The pipeline entry kpt writes for a function (kpt's field order: image/exec, config, selectors, exclude). */
export function pipelineEntry(pkgDir: string, fn: SavedFunction): Record<string, unknown> {
  const entry: Record<string, unknown> = fn.image !== undefined ? {image: fn.image} : {exec: fn.exec}
  if (fn.fnConfigPath !== undefined) {
    entry.configPath = path.relative(path.resolve(pkgDir), path.resolve(fn.fnConfigPath))
  } else {
    const data: Record<string, string> = {}
    fn.fnConfigArgs.forEach((arg, i) => {
      const eq = arg.indexOf('=')
      if (eq < 0 && i === 0) return
      if (eq >= 0) data[arg.slice(0, eq)] = arg.slice(eq + 1)
    })
    const keys = Object.keys(data).sort()
    if (keys.length > 0) entry.configMap = Object.fromEntries(keys.map((k) => [k, data[k]]))
  }
  if (fn.selector && !isEmptySelector(fn.selector)) entry.selectors = [selectorYaml(fn.selector)]
  if (fn.exclude && !isEmptySelector(fn.exclude)) entry.exclude = [selectorYaml(fn.exclude)]
  return entry
}

function selectorYaml(s: Selector): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const key of ['apiVersion', 'kind', 'name', 'namespace'] as const) if (s[key]) out[key] = s[key]
  for (const key of ['labels', 'annotations'] as const) if (s[key] && Object.keys(s[key]).length > 0) out[key] = s[key]
  return out
}

/**
 * The Kptfile text with the function added (or its entry replaced), and kpt's message for it.
 * Pure: `text` is the Kptfile as read.
 */
export function addToKptfile(text: string, pkgDir: string, fn: SavedFunction, type: SaveType): {text: string; message: string} {
  const doc: Document = parseDocument(text)
  if (doc.errors.length > 0 || !isMap(doc.contents)) throw new FnrError('InvalidPackage', `Kptfile at ${JSON.stringify(pkgDir)} can't be read`)
  const found: unknown = doc.get('pipeline', true)
  const pipeline = isMap(found) ? found : new YAMLMap()
  if (pipeline !== found) doc.set('pipeline', pipeline)
  const listKey = type === 'mutator' ? 'mutators' : 'validators'
  const foundList: unknown = pipeline.get(listKey, true)
  const seq = isSeq(foundList) ? foundList : new YAMLSeq()
  if (seq !== foundList) pipeline.set(listKey, seq)
  const node = doc.createNode(pipelineEntry(pkgDir, fn))
  // Every key and value is a string: quoted where a YAML 1.1 reader would take it for something
  // else (`"n": "5"`), as kpt's YAML library writes them.
  visit(node, {
    Scalar(_key, scalar) {
      if (typeof scalar.value === 'string') scalar.type = stringScalar(scalar.value).type
    },
  })
  const label = fn.image ?? fn.exec!
  const field = fn.image !== undefined ? 'image' : 'exec'
  const same = seq.items.findIndex((item) => {
    if (!isMap(item)) return false
    const v = item.get(field, true)
    return isScalar(v) && v.value === label
  })
  let verb = 'Added'
  if (same >= 0) {
    seq.items[same] = node
    verb = 'Updated'
  } else seq.items.push(node)
  return {text: doc.toString(), message: `${verb} ${JSON.stringify(label)} as ${type} in the Kptfile.\n`}
}

/** Adds the function to DIR's Kptfile; returns the line for stderr (kpt's message, or why it was not added). */
export async function saveFunctionToKptfile(pkgDir: string, fn: SavedFunction, type: SaveType, signal?: AbortSignal): Promise<string> {
  const target = path.join(pkgDir, 'Kptfile')
  let previous: Buffer
  try {
    if (pkgDir === '') throw new Error('no package')
    previous = await readFile(target)
  } catch {
    return 'function not added: Kptfile not exists\n'
  }
  let added: {text: string; message: string}
  try {
    added = addToKptfile(previous.toString('utf8'), pkgDir, fn, type)
  } catch (err) {
    return `function is not added to Kptfile: ${(err as Error).message}\n`
  }
  try {
    await applyChanges([{rel: 'Kptfile', target, action: 'replace', bytes: Buffer.from(added.text), previous}], signal)
  } catch (err) {
    if (signal?.aborted) throw err
    return `function is not added to Kptfile: ${(err as Error).message}\n`
  }
  return added.message
}
