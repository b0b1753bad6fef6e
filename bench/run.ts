/**
 * The benchmark suite (`npm run bench`). Every case runs its baseline side by side in the same
 * run, so ratios hold on a noisy machine. Prints a markdown table; writes bench/results/latest.json
 * (rows), latest-raw.json (samples) and a copy of the rows under bench/results/runs/ (see
 * bench/spread.ts for the spread over repeated runs). Benchmarks only print numbers: a missed
 * target is a "NO" in the table, never a failure.
 *
 * Cases: P1 serve-exec.ts, P2 eval-vs-kpt.ts, P3 throughput.ts, P4 payload.ts, P5 pods.ts (the pod
 * path on the Kubernetes test bed), P6 serve-exec.ts (idle) and soak.ts, W wrapper.ts, C cache.ts (response-cache hit, 1 MiB),
 * R porch-runner.ts (R-P1, R-P3, R-P4 and R-P5, head-of-line, against Porch's own runner, built from
 * the module proxy), N
 * node-versions.ts (start-up and `fnr eval` on the machine's old Node and on Node 26, side by side),
 * F fairness.ts (another client's wait behind hung calls and bursts, against Porch's own runner), S
 * startup.ts (`fnr serve` start → SERVING against Porch's runner).
 *
 * Settings (environment):
 *   FNR_BENCH_QUICK=1           ~1 minute smoke run (small counts everywhere)
 *   FNR_BENCH_ONLY=P1,P3        run only these cases (P1 P2 P3 P4 P5 P6 W C R N F S)
 *   FNR_BENCH_ITERATIONS        P1 and wrapper calls per function (200; quick 30); P2 uses a tenth (≥ 5)
 *   FNR_BENCH_P3_CALLS          P3 calls per concurrency level and side (1200; quick 150)
 *   FNR_BENCH_P4_ITERATIONS     P4 calls per side for the smallest payload, fewer for larger (60; quick 10)
 *   FNR_BENCH_P5_ITERATIONS     P5 warm calls per side (300; quick 30); first calls: a thirtieth (3-10)
 *   FNR_BENCH_P6_CALLS          P6 soak calls (10000; quick 2000)
 *   FNR_BENCH_CACHE_ITERATIONS  C calls per case (300; quick 50)
 *   FNR_BENCH_HOL_CALLS         R's head-of-line small calls per side (100; quick 20; 0 skips it)
 *   FNR_BENCH_KEEP_ENV=1        keep NODE_EXTRA_CA_CERTS in the environment of the processes started
 *   FNR_BENCH_SERVE_NODE_ARGS   Node options for the serve processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/p"
 */
import {existsSync} from 'node:fs'
import path from 'node:path'

import {benchCache} from './cache.js'
import {benchEvalVsKpt} from './eval-vs-kpt.js'
import {benchFairness} from './fairness.js'
import {benchNodeVersions} from './node-versions.js'
import {benchStartup} from './startup.js'
import type {FunctionUnderTest} from './fixture.js'
import {QUICK, ROOT, envCount, loadAverage, printTable, saveResults, type Row} from './lib.js'
import {benchPayload} from './payload.js'
import {benchPods} from './pods.js'
import {benchPorchRunner} from './porch-runner.js'
import {benchServeExec} from './serve-exec.js'
import {benchSoak} from './soak.js'
import {benchThroughput} from './throughput.js'
import {benchWrapper} from './wrapper.js'

const CASES = ['P1', 'P2', 'P3', 'P4', 'P5', 'P6', 'W', 'C', 'R', 'N', 'F', 'S'] as const
type Case = (typeof CASES)[number]

function selectedCases(): Set<Case> {
  const only = process.env.FNR_BENCH_ONLY?.split(',').map((s) => s.trim().toUpperCase()).filter(Boolean)
  if (!only || only.length === 0) return new Set(CASES)
  for (const c of only) if (!CASES.includes(c as Case)) throw new Error(`FNR_BENCH_ONLY: unknown case ${c} (expected ${CASES.join(', ')})`)
  return new Set(only as Case[])
}

async function main(): Promise<void> {
  const cases = selectedCases()
  const settings = {
    quick: QUICK,
    iterations: envCount('FNR_BENCH_ITERATIONS', 200, 30),
    p3Calls: envCount('FNR_BENCH_P3_CALLS', 1200, 150),
    p4Iterations: envCount('FNR_BENCH_P4_ITERATIONS', 60, 10),
    p5Iterations: envCount('FNR_BENCH_P5_ITERATIONS', 300, 30),
    p6Calls: envCount('FNR_BENCH_P6_CALLS', 10_000, 2000),
  }
  const p2Iterations = Math.max(5, Math.round(settings.iterations / 10))
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const started = new Date()
  const loadBefore = loadAverage()
  const seconds: Record<string, number> = {}

  const run = async (name: Case, fn: () => Promise<{rows: Row[]; raw: Record<string, unknown>}>): Promise<void> => {
    if (!cases.has(name)) return
    process.stderr.write(`bench: ${name} … (load ${loadAverage()})\n`)
    const t0 = performance.now()
    const res = await fn()
    seconds[name] = Math.round((performance.now() - t0) / 100) / 10
    rows.push(...res.rows)
    Object.assign(raw, res.raw)
  }

  await run('P1', () => {
    const functions: FunctionUnderTest[] = [{name: 'cat', source: '/bin/cat'}]
    const nodeFn = path.join(ROOT, 'functions', 'set-namespace')
    if (existsSync(nodeFn)) functions.push({name: 'set-namespace', source: nodeFn})
    return benchServeExec(functions, settings.iterations)
  })
  await run('P2', () => benchEvalVsKpt(p2Iterations))
  await run('P3', () => benchThroughput(settings.p3Calls))
  await run('P4', () => benchPayload(settings.p4Iterations))
  await run('P5', () => benchPods(settings.p5Iterations, Math.max(3, Math.min(10, Math.round(settings.p5Iterations / 30)))))
  await run('P6', () => benchSoak(settings.p6Calls))
  await run('W', () => benchWrapper(settings.iterations))
  await run('C', () => benchCache(envCount('FNR_BENCH_CACHE_ITERATIONS', 300, 50)))
  await run('R', () => benchPorchRunner(settings.iterations, settings.p3Calls, settings.p4Iterations, envCount('FNR_BENCH_HOL_CALLS', 100, 20, true)))
  await run('N', () => benchNodeVersions(Math.max(5, Math.round(settings.iterations / 10))))
  await run('F', () => benchFairness())
  await run('S', () => benchStartup(Math.max(5, Math.round(settings.iterations / 10))))

  const loadAfter = loadAverage()
  const table = printTable(rows)
  const totalSeconds = Math.round((Date.now() - started.getTime()) / 100) / 10
  process.stdout.write(`\n${table}\n\nload average (1/5/15 min) before: ${loadBefore}, after: ${loadAfter}; ${totalSeconds} s${QUICK ? ' (quick mode)' : ''}\n`)
  const result = {date: started.toISOString(), node: process.version, settings, loadBefore, loadAfter, seconds, totalSeconds, rows}
  const file = await saveResults('latest', result)
  await saveResults(`runs/${started.toISOString().replace(/[:.]/g, '-')}`, result)
  await saveResults('latest-raw', raw)
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}

await main()
