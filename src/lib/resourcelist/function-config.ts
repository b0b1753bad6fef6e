/**
 * The functionConfig of `fnr eval`: built from `-- key=value` arguments (the ConfigMap kpt builds)
 * or read from a `--fn-config` file.
 */
import {readFile, stat} from 'node:fs/promises'

import {Pair, Scalar, YAMLMap} from 'yaml'

import {FnrError} from '../errors.js'
import {krmError} from './meta.js'
import {parseResourceList} from './read.js'
import {resolvePlain, stringScalar} from './yaml.js'

/** Name of the ConfigMap kpt builds from command-line arguments. */
export const FUNCTION_INPUT_NAME = 'function-input'

/**
 * The ConfigMap kpt builds from `-- k=v ...`: `metadata.name: function-input`, every value a
 * string in `data` (later duplicates win, order of first appearance kept). As in kpt, a first
 * argument without `=` is the functionConfig's kind instead of a key (`-- MyKind a=b`); any
 * other argument without `=`, or with an empty key, is an error.
 */
export function functionConfigFromArgs(args: readonly string[], options: {evalOrder?: boolean} = {}): YAMLMap {
  let kind = 'ConfigMap'
  const data = new YAMLMap()
  args.forEach((arg, i) => {
    const eq = arg.indexOf('=')
    if (eq < 0) {
      if (i === 0 && arg !== '') {
        kind = arg
        return
      }
      throw new FnrError('InvalidArgument', `args must have keys and values separated by =, got ${JSON.stringify(arg)}`)
    }
    const key = arg.slice(0, eq)
    if (key === '') throw new FnrError('InvalidArgument', `args must have a key before =, got ${JSON.stringify(arg)}`)
    const value = stringScalar(arg.slice(eq + 1))
    const existing = data.items.find((p) => (p.key as Scalar).value === key)
    if (existing) existing.value = value
    else data.items.push(new Pair(keyScalar(key), value))
  })
  // kpt (kyaml) writes data in flow style: `data: {namespace: prod, n: "5"}`.
  data.flow = true
  const metadata = new YAMLMap()
  metadata.items.push(new Pair(new Scalar('name'), new Scalar(FUNCTION_INPUT_NAME)))
  const fc = new YAMLMap()
  const apiVersion = new Pair(new Scalar('apiVersion'), new Scalar('v1'))
  const kindPair = new Pair(new Scalar('kind'), stringScalar(kind))
  const metadataPair = new Pair(new Scalar('metadata'), metadata)
  const dataPair = new Pair(new Scalar('data'), data)
  // kpt fn eval builds it field by field (metadata, data, kind, apiVersion); kpt fn render's
  // configMap comes out as apiVersion, kind, metadata, data.
  if (options.evalOrder) fc.items.push(metadataPair, dataPair, kindPair, apiVersion)
  else fc.items.push(apiVersion, kindPair, metadataPair, dataPair)
  return fc
}

/**
 * The ConfigMap `kpt fn render` builds from a Kptfile function's `configMap:` (pairs in the
 * Kptfile's order; kpt's own order is Go's random map order). kpt tags each value `!!str`, so a
 * value is quoted only when it would read back as something else (`"3"`, `"true"`, `""`, but
 * `yes` plain), and leaves the keys untagged: plain wherever YAML allows (`5: five`).
 */
export function kptfileConfigMap(pairs: ReadonlyArray<readonly [string, string]>): YAMLMap {
  const data = new YAMLMap()
  data.flow = true
  for (const [k, v] of pairs) {
    const key = new Scalar(k)
    if (k === '') key.type = Scalar.QUOTE_DOUBLE
    const value = new Scalar(v)
    if (typeof resolvePlain(v) !== 'string') value.type = Scalar.QUOTE_DOUBLE
    data.items.push(new Pair(key, value))
  }
  const metadata = new YAMLMap()
  metadata.items.push(new Pair(new Scalar('name'), new Scalar(FUNCTION_INPUT_NAME)))
  const fc = new YAMLMap()
  fc.items.push(
    new Pair(new Scalar('apiVersion'), new Scalar('v1')),
    new Pair(new Scalar('kind'), new Scalar('ConfigMap')),
    new Pair(new Scalar('metadata'), metadata),
    new Pair(new Scalar('data'), data),
  )
  return fc
}

/** A map key as kyaml writes it: quoted only when YAML 1.2 would not read it as a string (`n`, `on` stay plain). */
function keyScalar(key: string): Scalar<string> {
  const s = new Scalar(key)
  if (typeof resolvePlain(key) !== 'string' || key !== key.trim() || /^[-?:,[\]{}#&*!|>'"%@`]|: | #/.test(key)) s.type = Scalar.QUOTE_DOUBLE
  return s
}

/**
 * Reads a functionConfig file (`--fn-config`): exactly one KRM resource, comments kept. Like
 * kpt, the node carries the index (and seqindent) annotations its reader sets.
 */
export async function readFunctionConfig(file: string): Promise<YAMLMap> {
  let text: string
  try {
    // Devices and sockets are refused (reading /dev/zero would never end); FIFOs are read, so
    // process substitution (--fn-config <(...)) works.
    const st = await stat(file)
    if (!st.isFile() && !st.isFIFO() && !st.isDirectory()) throw new FnrError('InvalidArgument', `cannot read function config file ${file}: not a regular file`)
    text = await readFile(file, 'utf8')
  } catch (error) {
    if (error instanceof FnrError) throw error
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new FnrError('InvalidArgument', `missing function config file: ${file}`)
    const kind = code === 'EACCES' || code === 'EPERM' ? 'PermissionDenied' : 'InvalidArgument'
    throw new FnrError(kind, `cannot read function config file ${file}: ${code ?? (error as Error).message}`)
  }
  return parseFunctionConfig(text, file)
}

/** Parses functionConfig text (see readFunctionConfig); `origin` names it in errors. */
export function parseFunctionConfig(text: string, origin: string): YAMLMap {
  const q = JSON.stringify(origin)
  let list
  try {
    list = parseResourceList(text, {origin, unwrap: false, blockStyle: false})
  } catch (error) {
    if (error instanceof FnrError) {
      throw new FnrError('InvalidArgument', `failed to read functionConfig ${q}: ${error.message.replace(`${origin}: `, '')}`)
    }
    throw error
  }
  if (list.items.length === 0) throw new FnrError('InvalidArgument', `functionConfig ${q} must contain one config, got 0`)
  if (list.items.length > 1) {
    throw new FnrError('InvalidArgument', `functionConfig ${q} must not contain more than one config, got ${list.items.length}`)
  }
  const fc = list.items[0]!
  const bad = krmError(fc, undefined)
  if (bad) throw new FnrError('InvalidArgument', `functionConfig ${q}: ${bad}`)
  return fc
}
