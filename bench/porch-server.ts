/**
 * K: package-level timing through porch-server (docs/porch-swap.md, "Package-level timing"). porch-server v1.5.8 on
 * the project's control plane runs test/porch-e2e/scenario.ts's package scenario (register a repository, clone
 * Porch's blueprint bucket/v1 with its apply-setters render, pull, edit, push with a second render, propose,
 * approve) with `fnr serve` as its function runner, then with Porch's own runner (func/server v1.5.8), alternating
 * (fnr, Porch, Porch, fnr, fnr, Porch, …) so that a trend in the machine's load falls on both. Each run has a
 * porch-server of its own (one `--function-runner` per process), a namespace and a repository of its own.
 *
 * Rows: each step's median over the runs, fnr against Porch's runner, and the package's steps summed (clone to
 * approve). What each run published to git is compared byte for byte with the first run's; a difference fails
 * the bench. Each run's Repository is unregistered after it (removeRepository), so every porch-server starts with
 * the same work.
 *
 *   FNR_BENCH_PORCH_RUNS=N   runs per runner (default 3; quick 1)
 *
 * Not in `npm run bench`: porch-server's cold build takes most of an hour on two cores (scripts/porch-peers.mjs;
 * `npm run porch-e2e` builds it too). Run with `node --import tsx bench/porch-server.ts` after `npm run build`;
 * writes bench/results/porch-server.json.
 */
import path from 'node:path'

import {packageScenario, removeRepository, startPorchBed, type Outcome} from '../test/porch-e2e/scenario.js'
import {envCount, loadAverage, median, printTable, saveResults, type Row} from './lib.js'

/** The package's own steps: what a user waits for once porch-server is up and the repository registered. */
const PACKAGE_STEPS = ['porchctl rpkg clone bucket/v1 (render)', 'porchctl rpkg pull', 'porchctl rpkg push (render)', 'porchctl rpkg propose', 'porchctl rpkg approve']

type Runner = 'fnr' | 'porch'

/** fnr, porch, porch, fnr, fnr, porch, …: `runs` of each. */
export function alternation(runs: number): Runner[] {
  const order: Runner[] = []
  for (let i = 0; i < runs; i++) order.push(...(i % 2 === 0 ? (['fnr', 'porch'] as const) : (['porch', 'fnr'] as const)))
  return order
}

function samePublished(a: Outcome, b: Outcome): string | undefined {
  const ka = [...a.published.keys()].join(', ')
  const kb = [...b.published.keys()].join(', ')
  if (ka !== kb) return `files differ: ${ka} / ${kb}`
  for (const [p, bytes] of a.published) if (!b.published.get(p)!.equals(bytes)) return `${p} differs`
  if (a.tags.join() !== b.tags.join()) return `tags differ: ${a.tags.join()} / ${b.tags.join()}`
  return undefined
}

export async function benchPorchServer(runs = envCount('FNR_BENCH_PORCH_RUNS', 3, 1)): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const bed = await startPorchBed()
  const outcomes: Record<Runner, Outcome[]> = {fnr: [], porch: []}
  const order = alternation(runs)
  try {
    for (const [i, runner] of order.entries()) {
      const address = `127.0.0.1:${runner === 'fnr' ? bed.fnr.port : bed.porchRunner.port}`
      const o = await packageScenario(bed, `${runner}-${i}`, address)
      await removeRepository(bed, `${runner}-${i}`)
      if (o.lifecycle !== 'Published') throw new Error(`run ${i} (${runner}): the package ended ${o.lifecycle}, not Published`)
      const first = outcomes.fnr[0] ?? outcomes.porch[0]
      const differs = first ? samePublished(first, o) : undefined
      if (differs) throw new Error(`run ${i} (${runner}) published something else than the first run: ${differs}`)
      outcomes[runner].push(o)
      process.stderr.write(`porch-server bench: run ${i + 1}/${order.length} (${runner}) done, load ${loadAverage()}\n`)
    }
  } finally {
    await bed.stop()
  }
  const stepMs = (runner: Runner, what: string): number[] => outcomes[runner].map((o) => o.steps.find((s) => s.what === what)?.ms ?? Number.NaN)
  const packageMs = (runner: Runner): number[] => outcomes[runner].map((o) => o.steps.filter((s) => PACKAGE_STEPS.includes(s.what)).reduce((sum, s) => sum + s.ms, 0))
  const row = (name: string, f: number[], p: number[]): Row => {
    const fm = median(f)
    const pm = median(p)
    return {case: name, p50: Math.round(fm), baselineP50: Math.round(pm), ratio: pm > 0 ? Math.round((fm / pm) * 100) / 100 : undefined, unit: 'ms', note: `fnr ${f.join(' / ')}; Porch ${p.join(' / ')}`}
  }
  const rows: Row[] = [row(`K package: clone to approve (${PACKAGE_STEPS.length} porchctl steps, 2 renders)`, packageMs('fnr'), packageMs('porch'))]
  for (const what of outcomes.fnr[0]!.steps.map((s) => s.what)) rows.push(row(`K ${what}`, stepMs('fnr', what), stepMs('porch', what)))
  const raw = {order, steps: Object.fromEntries(Object.entries(outcomes).map(([k, os]) => [k, os.map((o) => o.steps)]))}
  return {rows, raw}
}

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const loadBefore = loadAverage()
  const {rows, raw} = await benchPorchServer()
  const load = `${loadBefore} -> ${loadAverage()}`
  console.log(`load average ${load}`)
  console.log(printTable(rows))
  console.log(`written: ${await saveResults('porch-server', {date: new Date().toISOString(), load, rows, raw})}`)
}
