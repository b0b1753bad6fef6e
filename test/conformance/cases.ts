/**
 * kpt's e2e cases (fetched by scripts/kpt-e2e.mjs into the git-ignored cache): found and decoded
 * the way kpt's runner finds and decodes them (a folder holding `.expected/` is a case; its
 * `.expected/config.yaml` with kpt's keys, case-sensitive, unknown keys ignored), and the function
 * images each case names, to tell which run here (docs/conformance.md).
 */
import {existsSync} from 'node:fs'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'

import {isMap, isSeq, parse, parseAllDocuments} from 'yaml'

export const EXPECTED = '.expected'

/** The keys of kpt's runner config (pkg/test/runner/config.go), with their values as it reads them. */
export interface KptCaseConfig {
  exitCode: number
  actualStripLines: string[]
  stdErr: string
  stdErrRegEx: string
  stdErrStripLines: string[]
  stdOut: string
  sequential: boolean
  imagePullPolicy: string
  runtimes: string[]
  allowExec: boolean
  allowNetwork: boolean
  allowWasm: boolean
  skip: boolean
  testType: 'eval' | 'render'
  disableOutputTruncate: boolean
  execPath: string
  image: string
  args: Record<string, string>
  network: boolean
  includeMetaResources: boolean
  fnConfig: string
}

export interface KptCase {
  /** Relative to the suites' root, e.g. `fn-eval/missing-fn-image`. */
  name: string
  dir: string
  config: KptCaseConfig
  /** The function images the case names (config.yaml, Kptfiles' pipelines, its scripts). */
  images: string[]
}

const str = (v: unknown): string => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : '')
const bool = (v: unknown): boolean => v === true
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.map(str) : [])

export function decodeConfig(text: string | undefined): KptCaseConfig {
  const raw = (text === undefined ? {} : (parse(text) ?? {})) as Record<string, unknown>
  const args: Record<string, string> = {}
  if (raw.args && typeof raw.args === 'object') for (const [k, v] of Object.entries(raw.args as Record<string, unknown>)) args[k] = str(v)
  return {
    exitCode: typeof raw.exitCode === 'number' ? raw.exitCode : 0,
    actualStripLines: strings(raw.actualStripLines),
    stdErr: str(raw.stdErr),
    stdErrRegEx: str(raw.stdErrRegEx),
    stdErrStripLines: strings(raw.stdErrStripLines),
    stdOut: str(raw.stdOut),
    sequential: bool(raw.sequential),
    imagePullPolicy: str(raw.imagePullPolicy),
    runtimes: strings(raw.runtimes),
    allowExec: bool(raw.allowExec),
    allowNetwork: bool(raw.allowNetwork),
    allowWasm: bool(raw.allowWasm),
    skip: bool(raw.skip),
    testType: raw.testType === 'eval' ? 'eval' : 'render',
    disableOutputTruncate: bool(raw.disableOutputTruncate),
    execPath: str(raw.execPath),
    image: str(raw.image),
    args,
    network: bool(raw.network),
    includeMetaResources: bool(raw.includeMetaResources),
    fnConfig: str(raw.fnConfig),
  }
}

/** Images in a Kptfile's pipeline (`mutators`/`validators` entries' `image`). */
function pipelineImages(text: string): string[] {
  const out: string[] = []
  for (const doc of parseAllDocuments(text)) {
    if (!isMap(doc.contents)) continue
    for (const key of ['mutators', 'validators']) {
      const list = doc.getIn(['pipeline', key])
      if (!isSeq(list)) continue
      for (const fn of list.items) {
        const image = isMap(fn) ? fn.get('image') : undefined
        if (typeof image === 'string' && image !== '') out.push(image)
      }
    }
  }
  return out
}

/** Images a script passes to `kpt fn eval` (`--image X`, `--image=X`, `-i X`), variables expanded where the script sets them. */
function scriptImages(text: string): string[] {
  const vars = new Map<string, string>()
  for (const m of text.matchAll(/^\s*([A-Z_]+)="?([^"\s]+)"?\s*$/gm)) vars.set(m[1], m[2])
  const out: string[] = []
  for (const m of text.matchAll(/(?:--image[= ]|\s-i\s+)['"]?([^\s'"]+)/g)) {
    const v = m[1].replace(/^\$\{?([A-Z_]+)\}?$/, (_, name: string) => vars.get(name) ?? `$${name}`)
    out.push(v)
  }
  return out
}

async function walk(dir: string, each: (file: string) => Promise<void>): Promise<void> {
  for (const e of await readdir(dir, {withFileTypes: true})) {
    const p = path.join(dir, e.name)
    if (e.isDirectory()) await walk(p, each)
    else await each(p)
  }
}

async function caseImages(dir: string, config: KptCaseConfig): Promise<string[]> {
  const images: string[] = []
  if (config.image) images.push(config.image)
  await walk(dir, async (file) => {
    const base = path.basename(file)
    if (base === 'Kptfile') images.push(...pipelineImages(await readFile(file, 'utf8')))
    else if (base.endsWith('.sh') && path.basename(path.dirname(file)) === EXPECTED) images.push(...scriptImages(await readFile(file, 'utf8')))
  })
  return [...new Set(images)]
}

/** Every case under root/<suite> for each suite, in kpt's walk order (lexical). */
export async function discoverKptCases(root: string, suites: readonly string[]): Promise<KptCase[]> {
  const cases: KptCase[] = []
  const visit = async (dir: string): Promise<void> => {
    const entries = (await readdir(dir, {withFileTypes: true})).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    if (entries.some((e) => e.isDirectory() && e.name === EXPECTED)) {
      const configFile = path.join(dir, EXPECTED, 'config.yaml')
      const config = decodeConfig(existsSync(configFile) ? await readFile(configFile, 'utf8') : undefined)
      cases.push({name: path.relative(root, dir), dir, config, images: await caseImages(dir, config)})
    }
    for (const e of entries) if (e.isDirectory() && e.name !== EXPECTED) await visit(path.join(dir, e.name))
  }
  for (const suite of suites) await visit(path.join(root, suite))
  return cases
}
