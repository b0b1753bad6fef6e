/**
 * The real catalog functions (built from their Go modules by scripts/catalog-peers.mjs) for tests:
 * a functions dir in Porch's layout, an exec config made from functions/catalog.yaml for the built
 * ones (plus the names the catalog's own examples use, e.g. gcr.io/kpt-fn/set-namespace:unstable), the catalog examples of
 * ../shared/compat/catalog-examples (read from there, copied only into temp dirs), and a small
 * generated corpus of packages and function configs.
 */
import {execa} from 'execa'
import {mkdir, readFile, readdir, realpath, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {parse, stringify} from 'yaml'

import {buildCatalogFunctions, CATALOG} from '../../scripts/catalog-peers.mjs'
import {REPO_ROOT} from '../support/serve.js'

export const KPT = '/usr/bin/kpt'
export const SHARED = path.join(REPO_ROOT, '..', 'shared')
export const EXAMPLES = path.join(SHARED, 'compat', 'catalog-examples')
export const PORCH_COMPAT = path.join(SHARED, 'compat', 'porch')
export const CATALOG_YAML = path.join(REPO_ROOT, 'functions', 'catalog.yaml')

/** Cold builds take minutes on a loaded machine (they are cached afterwards). */
export const BUILD_TIMEOUT_MS = 40 * 60_000

export interface ConfigEntry {
  function: string
  images: string[]
}

export async function readConfig(file: string): Promise<ConfigEntry[]> {
  return (parse(await readFile(file, 'utf8')) as {functions: ConfigEntry[]}).functions
}

export interface CatalogBed {
  functionsDir: string
  configPath: string
  /** Names of the built functions. */
  built: string[]
  /** Function name -> binary path. */
  binary: Record<string, string>
}

/** The image the catalog examples name for a function (their Kptfiles use gcr.io/kpt-fn/<name>:unstable). */
export const exampleImage = (name: string): string => `gcr.io/kpt-fn/${name}:unstable`

/**
 * Builds the catalog peers (cached) and writes, into `dir`, an exec config holding catalog.yaml's
 * entries for the built functions, each also mapped to the examples' image name.
 */
export async function catalogBed(dir: string): Promise<CatalogBed> {
  // Symlink-resolved, as the exec config resolves its binaries (.cache/peers may be a symlink).
  const functionsDir = await realpath(buildCatalogFunctions())
  const built = CATALOG.map((f) => f.name)
  const exampleImages = [...(await exampleCases(built)).map((c) => ({fn: c.fn, image: c.image})), ...(await exampleKptfileImages(built))]
  const entries = (await readConfig(CATALOG_YAML))
    .filter((e) => built.includes(e.function))
    .map((e) => ({function: e.function, images: [...new Set([...e.images, exampleImage(e.function), ...exampleImages.filter((x) => x.fn === e.function).map((x) => x.image)])]}))
  const configPath = path.join(dir, 'catalog-config.yaml')
  await writeFile(configPath, stringify({functions: entries}))
  const binary = Object.fromEntries(built.map((n) => [n, path.join(functionsDir, n)]))
  return {functionsDir, configPath, built, binary}
}

/** Every file under `dir` (relative path -> content), for comparing packages. */
export async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  const walk = async (d: string): Promise<void> => {
    for (const entry of await readdir(d, {withFileTypes: true})) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) await walk(p)
      else out[path.relative(dir, p)] = await readFile(p, 'utf8')
    }
  }
  await walk(dir)
  return out
}

/** A catalog example's single mutator: the function name and how its config is given. */
export interface ExampleCase {
  name: string
  dir: string
  fn: string
  image: string
  /** `--fn-config FILE` (relative to the package) or `-- key=value` arguments. */
  configPath?: string
  args: string[]
}

/**
 * The catalog examples that run one of `functions`: eval-type examples (`.expected/config.yaml`
 * with testType: eval) by their image and args, render-type ones when their Kptfile runs exactly
 * that one function.
 */
export async function exampleCases(functions: string[]): Promise<ExampleCase[]> {
  const cases: ExampleCase[] = []
  const fnOf = (image: string): string | undefined => /(?:^|\/)([a-z-]+):[^/]+$/.exec(image)?.[1]
  for (const name of (await readdir(EXAMPLES)).sort()) {
    const dir = path.join(EXAMPLES, name)
    let expectedConfig: {testType?: string; image?: string; args?: Record<string, string>; fnConfig?: string} | undefined
    try {
      expectedConfig = parse(await readFile(path.join(dir, '.expected', 'config.yaml'), 'utf8'))
    } catch {
      expectedConfig = undefined
    }
    if (expectedConfig?.testType === 'eval') {
      const fn = fnOf(expectedConfig.image ?? '')
      if (!fn || !functions.includes(fn)) continue
      const configPath = expectedConfig.fnConfig ? path.relative(dir, path.join(dir, '.expected', expectedConfig.fnConfig)) : undefined
      cases.push({name, dir, fn, image: expectedConfig.image!, configPath, args: Object.entries(expectedConfig.args ?? {}).map(([k, v]) => `${k}=${v}`)})
      continue
    }
    let kptfile: {pipeline?: {mutators?: Array<{image: string; configPath?: string; configMap?: Record<string, string>}>; validators?: unknown[]}}
    try {
      kptfile = parse(await readFile(path.join(dir, 'Kptfile'), 'utf8'))
    } catch {
      continue
    }
    const mutators = kptfile.pipeline?.mutators ?? []
    if (mutators.length !== 1 || (kptfile.pipeline?.validators ?? []).length > 0) continue
    const m = mutators[0]!
    const fn = fnOf(m.image)
    if (!fn || !functions.includes(fn)) continue
    cases.push({name, dir, fn, image: m.image, configPath: m.configPath, args: Object.entries(m.configMap ?? {}).map(([k, v]) => `${k}=${v}`)})
  }
  return cases
}

/** Every image the examples' Kptfile pipelines name for one of `functions` (set-project-id-simple's runs apply-setters:v0.2). */
export async function exampleKptfileImages(functions: string[]): Promise<Array<{fn: string; image: string}>> {
  const out: Array<{fn: string; image: string}> = []
  for (const name of (await readdir(EXAMPLES)).sort()) {
    let kptfile: {pipeline?: {mutators?: Array<{image?: string}>; validators?: Array<{image?: string}>}}
    try {
      kptfile = parse(await readFile(path.join(EXAMPLES, name, 'Kptfile'), 'utf8'))
    } catch {
      continue
    }
    for (const f of [...(kptfile.pipeline?.mutators ?? []), ...(kptfile.pipeline?.validators ?? [])]) {
      const fn = f.image ? /(?:^|\/)([a-z-]+):[^/]+$/.exec(f.image)?.[1] : undefined
      if (fn && functions.includes(fn)) out.push({fn, image: f.image!})
    }
  }
  return out
}


/**
 * Render cases whose function, run by `fn eval` instead, also changes the Kptfile (eval hands the
 * Kptfile to the function like any resource; render does not): set-annotations annotates it. Their
 * diff.patch is a render's, checked by fnr render (examples-render.test.ts); eval is compared with it
 * on every other file.
 */
export const EVAL_CHANGES_KPTFILE = ['set-annotations-simple']

/** kpt fn eval / fnr eval arguments for a function config: `--fn-config FILE` or `-- k=v…`. */
export function configArgs(pkg: string, c: {configPath?: string; args: string[]}): string[] {
  return c.configPath ? ['--fn-config', path.join(pkg, c.configPath)] : c.args.length > 0 ? ['--', ...c.args] : []
}

export async function kptEval(pkg: string, binary: string, c: {configPath?: string; args: string[]}): Promise<{exitCode: number; stderr: string}> {
  const r = await execa(KPT, ['fn', 'eval', pkg, '--exec', binary, ...configArgs(pkg, c)], {reject: false, timeout: 120_000})
  return {exitCode: r.exitCode ?? -1, stderr: String(r.stderr)}
}

/** Runs a binary on a ResourceList directly: its stdout bytes, stderr and exit code. */
export async function runBinary(binary: string, input: Buffer): Promise<{stdout: Buffer; stderr: string; exitCode: number}> {
  const r = await execa(binary, [], {input, encoding: 'buffer', reject: false, stripFinalNewline: false, timeout: 120_000})
  return {stdout: Buffer.from(r.stdout as Uint8Array), stderr: Buffer.from(r.stderr as Uint8Array).toString(), exitCode: r.exitCode ?? -1}
}

// ---------------------------------------------------------------------------------------------
// The generated corpus: small packages (deterministic, seeded) and, per built function, configs.

function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

export interface CorpusPackage {
  name: string
  files: Record<string, string>
}

/** `count` packages of Deployments, Services, ConfigMaps and a cluster-scoped Namespace, with comments and setters. */
export function corpusPackages(count: number, seed = 15): CorpusPackage[] {
  const r = rng(seed)
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!
  const pkgs: CorpusPackage[] = []
  for (let i = 0; i < count; i++) {
    const app = pick(['web', 'api', 'db', 'cache', 'queue'])
    const ns = pick(['default', 'staging', 'team-a', ''])
    const nsLine = ns ? `  namespace: ${ns}\n` : ''
    const replicas = 1 + Math.floor(r() * 5)
    const files: Record<string, string> = {
      'Kptfile': `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: corpus-${i}\n  annotations:\n    config.kubernetes.io/local-config: "true"\ninfo:\n  description: generated package ${i}\n`,
      'deploy.yaml': `# the ${app} deployment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${app}-${i} # kpt-set: \${name}-${i}\n${nsLine}  labels:\n    app: ${app}\nspec:\n  replicas: ${replicas} # kpt-set: \${replicas}\n  selector:\n    matchLabels:\n      app: ${app}\n  template:\n    metadata:\n      labels:\n        app: ${app}\n    spec:\n      containers:\n      - name: ${app}\n        image: "nginx:1.${20 + i}" # kpt-set: \${image}\n        ports:\n        - containerPort: ${8000 + i}\n`,
      'svc.yaml': `apiVersion: v1\nkind: Service\nmetadata:\n  name: ${app}-svc\n${nsLine}spec:\n  selector:\n    app: ${app}\n  ports:\n  - port: 80\n    targetPort: ${8000 + i}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${app}-settings\n${nsLine}data:\n  level: '${pick(['debug', 'info', 'warn'])}'\n  empty: ""\n  multi: |\n    line one\n    line two\n`,
    }
    if (r() < 0.5) files['sub/ns.yaml'] = `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${ns || 'default'}\n`
    pkgs.push({name: `corpus-${i}`, files})
  }
  return pkgs
}

/** Function configs of the corpus, per function: args (`k=v`) or a functionConfig file's text. */
export const CORPUS_CONFIGS: Record<string, Array<{label: string; args: string[]; fnConfig?: string}>> = {
  'set-namespace': [
    {label: 'namespace=prod', args: ['namespace=prod']},
    {label: 'no namespace (error)', args: []},
  ],
  'apply-setters': [
    {label: 'all setters', args: ['name=shop', 'replicas=4', 'image=nginx:1.29']},
    {label: 'one setter', args: ['replicas=2']},
  ],
  starlark: [
    {
      label: 'StarlarkRun adding a label',
      args: [],
      fnConfig: `apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: add-label\nsource: |\n  for r in ctx.resource_list["items"]:\n    r["metadata"].setdefault("labels", {})["corpus"] = "yes"\n`,
    },
    {label: 'bad Starlark (error)', args: [], fnConfig: `apiVersion: fn.kpt.dev/v1alpha1\nkind: StarlarkRun\nmetadata:\n  name: broken\nsource: |\n  this is not starlark\n`},
  ],
  'ensure-name-substring': [
    {label: 'prepend=prod-', args: ['prepend=prod-']},
    {label: 'append=-v2', args: ['append=-v2']},
  ],
  'search-replace': [
    {label: 'by-path spec.replicas, put-value', args: ['by-path=spec.replicas', 'put-value=3']},
    {label: 'by-value-regex with a capture, put-value', args: ['by-value-regex=nginx:1\\.(.*)', 'put-value=mirror.example/nginx:1.${1}']},
  ],
  'set-annotations': [
    {label: 'two annotations', args: ['team=blue', 'example.com/tier=web']},
    {label: 'SetAnnotations config', args: [], fnConfig: `apiVersion: fn.kpt.dev/v1alpha1\nkind: SetAnnotations\nmetadata:\n  name: annotate\nannotations:\n  owner: corpus\n`},
  ],
  'set-image': [
    {label: 'name, newName, newTag', args: ['name=nginx', 'newName=mirror.example/nginx', 'newTag=1.29']},
    {label: 'no image name (error)', args: ['newTag=1.29']},
  ],
  'set-labels': [
    {label: 'two labels', args: ['env=prod', 'app.kubernetes.io/part-of=shop']},
    {label: 'SetLabels config', args: [], fnConfig: `apiVersion: fn.kpt.dev/v1alpha1\nkind: SetLabels\nmetadata:\n  name: label\nlabels:\n  corpus: "yes"\n`},
  ],
  'set-project-id': [
    {label: 'project-id=my-project', args: ['project-id=my-project']},
    {label: 'no project-id (error)', args: []},
  ],
  'upsert-resource': [
    {label: 'a new ConfigMap', args: [], fnConfig: `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: upserted\n  namespace: team-a\ndata:\n  k: v\n`},
    {label: 'the Namespace replaced', args: [], fnConfig: `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n  labels:\n    upserted: "yes"\n`},
  ],
}

export async function writePackage(dir: string, pkg: CorpusPackage): Promise<void> {
  for (const [rel, text] of Object.entries(pkg.files)) {
    await mkdir(path.dirname(path.join(dir, rel)), {recursive: true})
    await writeFile(path.join(dir, rel), text)
  }
}

/** A corpus package as a ResourceList (via kpt fn source), with a functionConfig appended. */
export async function corpusResourceList(dir: string, functionConfig: string): Promise<Buffer> {
  const r = await execa(KPT, ['fn', 'source', dir], {timeout: 60_000})
  return Buffer.from(`${String(r.stdout).trimEnd()}\nfunctionConfig:\n${functionConfig.trimEnd().replace(/^/gm, '  ')}\n`)
}

/** The function-input ConfigMap kpt builds from `k=v` arguments. */
export function argsConfigMap(args: string[]): string {
  const data = args.map((a) => a.split('=')).map(([k, ...v]) => `  ${k}: ${JSON.stringify(v.join('='))}`)
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n  annotations:\n    config.kubernetes.io/local-config: "true"\n${data.length ? `data:\n${data.join('\n')}\n` : ''}`
}

/**
 * set-namespace (v0.4.1, as built here) lists the namespaces it changed in its result message in
 * Go map order, which differs from run to run ("ns2","ns1" or "ns1","ns2"). Byte comparisons of
 * two runs sort that one list; everything else stays byte for byte.
 */
export function stableOutput(out: Buffer): Buffer {
  const text = out.toString('utf8')
  const stable = text.replace(/namespace ((?:"[^"\n]*",)+"[^"\n]*") updated to/g, (_, list: string) => `namespace ${list.split(',').sort().join(',')} updated to`)
  return stable === text ? out : Buffer.from(stable)
}
