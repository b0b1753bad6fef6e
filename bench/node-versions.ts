/**
 * N: start-up and `fnr eval` on two Node versions side by side, interleaved in one run
 * (Node 26 against Node 20, the runtime fnr shipped before; docs/performance.md).
 *
 * Sides (each measure runs once per side per round, the sides in turn):
 *   - "before": FNR_BENCH_BEFORE_NODE (default /usr/bin/node, this machine's Node 20) running the
 *     checkout in FNR_BENCH_BEFORE_ROOT (a built checkout of the code before the move: its V8
 *     code cache for the eval fast path, no re-run of serve); without it, this checkout;
 *   - "this code on the old Node": the old Node running this checkout (only with BEFORE_ROOT set:
 *     it separates what the Node version changed from what the code changed);
 *   - "after": Node 26 (scripts/node-runtime.mjs NODE_MAIN) running this checkout.
 * Measures: `node -e 0`; `fnr --version` (oclif); `fnr eval --exec cat` on a 3-resource list from
 * stdin (the fast path); `fnr serve` from spawn to its first SERVING health answer (on Node 26
 * including bin/run.js's re-run with --expose-gc and --disable-sigusr1). The compile caches are
 * warm (one untimed run of each first), as on a machine that ran fnr before.
 *
 *   node --import tsx bench/node-versions.ts      (or `npm run bench -- --only=N`)
 */
import {spawn, spawnSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {NODE_MAIN, nodeBinary} from '../scripts/node-runtime.mjs'
import {makeResourceList} from './fixture.js'
import {ROOT, benchEnv, loadAverage, percentile, printTable, round, saveResults, type Row} from './lib.js'
import {freePort, waitServing} from './wrapper.js'

interface Side {
  label: string
  node: string
  root: string
}

function version(node: string): string {
  return spawnSync(node, ['--version'], {encoding: 'utf8'}).stdout.trim()
}

function sides(): Side[] {
  const oldNode = process.env.FNR_BENCH_BEFORE_NODE ?? '/usr/bin/node'
  const beforeRoot = process.env.FNR_BENCH_BEFORE_ROOT
  const newNode = process.version === `v${NODE_MAIN}` ? process.execPath : nodeBinary('main')
  const out: Side[] = []
  if (existsSync(oldNode)) {
    out.push({label: `before: ${version(oldNode)}${beforeRoot ? `, ${path.basename(beforeRoot)}` : ''}`, node: oldNode, root: beforeRoot ?? ROOT})
    if (beforeRoot) out.push({label: `this code on ${version(oldNode)}`, node: oldNode, root: ROOT})
  }
  out.push({label: `after: ${version(newNode)}`, node: newNode, root: ROOT})
  return out
}

const ENV = benchEnv()

function wall(cmd: string, args: string[], input?: Buffer): number {
  const t0 = performance.now()
  const r = spawnSync(cmd, args, {stdio: [input ? 'pipe' : 'ignore', 'ignore', 'pipe'], input, env: ENV})
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr?.toString()}`)
  return performance.now() - t0
}

async function serveToServing(side: Side, functionsDir: string, configPath: string): Promise<number> {
  const port = await freePort()
  const t0 = performance.now()
  const child = spawn(side.node, [path.join(side.root, 'bin', 'run.js'), 'serve', `--port=${port}`, '--disable-runtimes=pod', '--log-level=1', `--config=${configPath}`, `--functions=${functionsDir}`], {
    env: {...ENV, FNR_BIND_ADDRESS: '127.0.0.1'},
    stdio: ['ignore', 'ignore', 'ignore'],
  })
  const exited = new Promise((r) => child.once('exit', r))
  try {
    await waitServing(port, Date.now() + 60_000)
    return performance.now() - t0
  } finally {
    child.kill('SIGTERM')
    await exited
  }
}

export async function benchNodeVersions(rounds: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const all = sides()
  const small = makeResourceList(3)
  const functionsDir = path.join(ROOT, 'functions')
  const configPath = path.join(functionsDir, 'config.yaml')
  const measures = {
    node: (s: Side) => wall(s.node, ['-e', '0']),
    version: (s: Side) => wall(s.node, [path.join(s.root, 'bin', 'run.js'), '--version']),
    eval: (s: Side) => wall(s.node, [path.join(s.root, 'bin', 'run.js'), 'eval', '-', '--exec', 'cat'], small),
  }
  const samples: Record<string, Record<string, number[]>> = {}
  for (const s of all) {
    samples[s.label] = {node: [], version: [], eval: [], serve: []}
    for (const m of Object.values(measures)) m(s) // warm the caches
  }
  for (let i = 0; i < rounds; i++) {
    for (const s of all) {
      for (const [name, m] of Object.entries(measures)) samples[s.label]![name]!.push(m(s))
      samples[s.label]!.serve!.push(await serveToServing(s, functionsDir, configPath))
    }
  }
  const rows: Row[] = []
  const base = all[0]!.label
  for (const [name, what] of [
    ['node', 'node -e 0'],
    ['version', 'fnr --version'],
    ['eval', 'fnr eval - --exec cat < 3-resource list'],
    ['serve', 'fnr serve: spawn to first SERVING'],
  ] as const) {
    const baseP50 = round(percentile(samples[base]![name]!, 50), 1)
    for (const s of all) {
      const v = samples[s.label]![name]!
      const p50 = round(percentile(v, 50), 1)
      rows.push({
        case: `N ${what}, ${s.label}`,
        p50,
        p95: round(percentile(v, 95), 1),
        ...(s.label === base ? {} : {baselineP50: baseP50, ratio: round(p50 / baseP50)}),
        unit: 'ms',
      })
    }
  }
  return {rows, raw: {nodeVersions: samples}}
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const rounds = Number(process.env.FNR_BENCH_N_ROUNDS ?? 20)
  const loadBefore = loadAverage()
  const {rows, raw} = await benchNodeVersions(rounds)
  const loadAfter = loadAverage()
  process.stdout.write(`${printTable(rows)}\n\nload average (1/5/15 min) before: ${loadBefore}, after: ${loadAfter}; ${rounds} rounds\n`)
  const file = await saveResults('node-versions', {date: new Date().toISOString(), rounds, loadBefore, loadAfter, before: process.env.FNR_BENCH_BEFORE_ROOT, rows, raw})
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}
