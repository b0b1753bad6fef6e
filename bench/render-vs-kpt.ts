/**
 * RK: `fnr render --allow-exec` against `kpt fn render --allow-exec` (kpt 1.0.0-beta.56) on the
 * same package and the same exec functions, side by side in one run (docs/performance.md,
 * "fnr render against kpt fn render").
 *
 * The package: a Kptfile whose pipeline runs three catalog functions built from source by
 * scripts/catalog-peers.mjs (set-namespace, set-labels, set-annotations, as `exec:` steps with a
 * configMap), and RESOURCES Deployments (five to a file, with head and line comments, quoted and
 * flow-style values). Cases:
 * - `fresh`: the package as written; every step changes every resource.
 * - `rendered`: the package once rendered (by kpt): every function writes back what it was given.
 * - `one-changed`: rendered, then one resource's label edited: the first step changes that one
 *   resource and nothing else.
 * Each sample renders a fresh copy of the package (copying is not timed); fnr and kpt alternate,
 * and which goes first alternates too. The first round's results are compared file by file: fnr
 * and kpt must write the same bytes (a difference stops the bench). One untimed round first.
 *
 *   node --import tsx bench/render-vs-kpt.ts
 *   FNR_BENCH_RK_ROUNDS=10 (default), FNR_BENCH_RK_RESOURCES=200 (default), FNR_BENCH_RK_LABEL=x
 *   writes bench/results/render-vs-kpt-x.json instead of render-vs-kpt.json.
 *   FNR_BENCH_BEFORE_ROOT=<a built checkout> adds an arm: that checkout's fnr render.
 *   FNR_BENCH_COMPETITOR=N runs N busy processes beside the whole bench (porch-runner.ts
 *   besideCompetitors); the results then go to render-vs-kpt-competitor.json (or -x-competitor).
 */
import {spawnSync} from 'node:child_process'
import {cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {buildCatalogFunctions} from '../scripts/catalog-peers.mjs'
import {besideCompetitors} from './porch-runner.js'
import {BIN_RUN, ROOT, benchEnv, loadAverage, percentile, printTable, round, saveResults, type Row} from './lib.js'

const ENV = benchEnv()

/** A package of `resources` Deployments, five to a file, whose pipeline runs three catalog functions. */
export async function writeBenchPackage(dir: string, resources: number, functionsDir: string): Promise<void> {
  const kptfile = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: bench
  annotations:
    config.kubernetes.io/local-config: "true"
pipeline:
  mutators:
    - exec: ${path.join(functionsDir, 'set-namespace')}
      configMap:
        namespace: bench
    - exec: ${path.join(functionsDir, 'set-labels')}
      configMap:
        app: bench
    - exec: ${path.join(functionsDir, 'set-annotations')}
      configMap:
        owner: team-a
`
  await writeFile(path.join(dir, 'Kptfile'), kptfile)
  const perFile = 5
  for (let f = 0; f * perFile < resources; f++) {
    const docs: string[] = []
    for (let i = f * perFile; i < Math.min(resources, (f + 1) * perFile); i++) {
      docs.push(`# resource ${i}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-${i} # the name
  labels:
    tier: "web"
spec:
  replicas: 3
  selector:
    matchLabels:
      tier: web
  template:
    metadata:
      labels:
        tier: web
    spec:
      containers:
      - name: main
        image: 'nginx:1.25'
        args: ["--port", "8080"]
        ports:
        - containerPort: 8080
        env:
        - name: A
          value: "1"
`)
    }
    await writeFile(path.join(dir, `file-${String(f).padStart(3, '0')}.yaml`), docs.join('---\n'))
  }
}

function render(command: string, args: string[], dir: string): number {
  const t0 = performance.now()
  const r = spawnSync(command, [...args, dir, '--allow-exec'], {stdio: ['ignore', 'ignore', 'pipe'], env: ENV})
  const ms = performance.now() - t0
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} ${dir} exited ${r.status}: ${r.stderr.toString()}`)
  return ms
}

async function filesOf(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const e of await readdir(dir, {recursive: true, withFileTypes: true})) {
    if (!e.isFile()) continue
    const p = path.join(e.parentPath, e.name)
    out.set(path.relative(dir, p), await readFile(p, 'utf8'))
  }
  return out
}

async function sameFiles(a: string, b: string): Promise<string | undefined> {
  const fa = await filesOf(a)
  const fb = await filesOf(b)
  for (const [p, text] of fa) if (fb.get(p) !== text) return p
  for (const p of fb.keys()) if (!fa.has(p)) return p
  return undefined
}

export async function benchRenderVsKpt(rounds: number, resources: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const functionsDir = buildCatalogFunctions()
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-bench-render-'))
  const before = process.env.FNR_BENCH_BEFORE_ROOT
  const arms: Array<{name: string; command: string; args: string[]}> = [
    {name: 'fnr', command: process.execPath, args: [BIN_RUN, 'render']},
    {name: 'kpt', command: 'kpt', args: ['fn', 'render']},
    ...(before ? [{name: 'before', command: process.execPath, args: [path.join(before, 'bin', 'run.js'), 'render']}] : []),
  ]
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  try {
    const fresh = path.join(dir, 'fresh')
    await mkdir(fresh)
    await writeBenchPackage(fresh, resources, functionsDir)
    const rendered = path.join(dir, 'rendered')
    await cp(fresh, rendered, {recursive: true})
    render('kpt', ['fn', 'render'], rendered)
    const oneChanged = path.join(dir, 'one-changed')
    await cp(rendered, oneChanged, {recursive: true})
    const first = path.join(oneChanged, 'file-000.yaml')
    await writeFile(first, (await readFile(first, 'utf8')).replace('tier: "web"', 'tier: "api"'))
    for (const [name, source] of [['fresh', fresh], ['rendered', rendered], ['one-changed', oneChanged]] as const) {
      const samples: Record<string, number[]> = Object.fromEntries(arms.map((a) => [a.name, []]))
      for (let r = -1; r < rounds; r++) {
        const order = r % 2 === 0 ? arms : [...arms].reverse()
        const dirs: Record<string, string> = {}
        for (const arm of order) {
          const target = path.join(dir, `run-${arm.name}`)
          await rm(target, {recursive: true, force: true})
          await cp(source, target, {recursive: true})
          dirs[arm.name] = target
          const ms = render(arm.command, arm.args, target)
          if (r >= 0) samples[arm.name]!.push(ms)
        }
        if (r === -1) {
          for (const arm of arms.filter((a) => a.name !== 'kpt')) {
            const differs = await sameFiles(dirs.kpt!, dirs[arm.name]!)
            if (differs !== undefined) throw new Error(`${name}: ${arm.name} and kpt wrote different ${differs}`)
          }
        }
      }
      const p = (arm: string, q: number): number => round(percentile(samples[arm]!, q), 1)
      for (const arm of arms.filter((a) => a.name !== 'kpt')) {
        rows.push({
          case: `RK ${arm.name === 'fnr' ? 'fnr' : `fnr ${arm.name}`} render vs kpt fn render, 3 exec steps, ${resources} resources, ${name}`,
          p50: p(arm.name, 50),
          p95: p(arm.name, 90),
          baselineP50: p('kpt', 50),
          baselineP95: p('kpt', 90),
          ratio: round(p(arm.name, 50) / p('kpt', 50)),
          unit: 'ms',
          target: '≤ 1.0× kpt',
          met: p(arm.name, 50) <= p('kpt', 50),
          note: 'p95 column holds p90; same output as kpt (checked)',
        })
      }
      raw[name] = samples
    }
    return {rows, raw}
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const rounds = Number(process.env.FNR_BENCH_RK_ROUNDS ?? 10)
  const resources = Number(process.env.FNR_BENCH_RK_RESOURCES ?? 200)
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 0)
  const loadBefore = loadAverage()
  const {rows, raw} = await besideCompetitors(competitors, () => benchRenderVsKpt(rounds, resources))
  const loadAfter = loadAverage()
  const beside = competitors > 0 ? `, ${competitors} busy processes beside it` : ''
  process.stdout.write(`${printTable(rows)}\n\nload average (1/5/15 min) before: ${loadBefore}, after: ${loadAfter}; ${rounds} rounds${beside}, ${process.version}, ${os.cpus().length} CPUs (shared with other work)\n`)
  const label = process.env.FNR_BENCH_RK_LABEL
  const name = `render-vs-kpt${label ? `-${label}` : ''}${competitors > 0 ? '-competitor' : ''}`
  const file = await saveResults(name, {date: new Date().toISOString(), rounds, resources, competitors, loadBefore, loadAfter, node: process.version, rows, raw})
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}
