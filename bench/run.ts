/**
 * The benchmark suite (`npm run bench`). Every case runs its baseline side by side in the same
 * run, so ratios hold on a noisy machine. Prints a markdown table; writes bench/results/*.json.
 */
import {existsSync} from 'node:fs'
import path from 'node:path'

import {ROOT, printTable, saveResults, type Row} from './lib.js'
import {benchEvalVsKpt} from './eval-vs-kpt.js'
import {benchServeExec, type FunctionUnderTest} from './serve-exec.js'
import {benchWrapper} from './wrapper.js'

const iterations = Number(process.env.FNR_BENCH_ITERATIONS ?? 200)

async function main(): Promise<void> {
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const functions: FunctionUnderTest[] = [{name: 'cat', source: '/bin/cat'}]
  const nodeFn = path.join(ROOT, 'functions', 'set-namespace')
  if (existsSync(nodeFn)) functions.push({name: 'set-namespace', source: nodeFn})

  const p1 = await benchServeExec(functions, iterations)
  rows.push(...p1.rows)
  Object.assign(raw, p1.raw)

  const p2 = await benchEvalVsKpt(Math.max(10, Math.round(iterations / 10)))
  rows.push(...p2.rows)
  Object.assign(raw, p2.raw)

  const wrapper = await benchWrapper(iterations)
  rows.push(...wrapper.rows)
  Object.assign(raw, wrapper.raw)

  const table = printTable(rows)
  process.stdout.write(`\n${table}\n\n`)
  const file = await saveResults('latest', {date: new Date().toISOString(), node: process.version, iterations, rows})
  await saveResults('latest-raw', raw)
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}

await main()
