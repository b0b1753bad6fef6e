/**
 * The spread over repeated benchmark runs: reads bench/results/runs/*.json (the last N with
 * `--last=N`, or the files given as arguments) and prints, per case, the p50 and the added/ratio
 * column as min / median / max, how often the target was met, and the load averages.
 *
 *   node --import tsx bench/spread.ts --last=3
 */
import {readdirSync, readFileSync} from 'node:fs'
import path from 'node:path'

import {ROOT, median, round, type Row} from './lib.js'

interface RunFile {
  date: string
  loadBefore: string
  loadAfter: string
  settings: {quick: boolean}
  rows: Row[]
}

const args = process.argv.slice(2)
const last = Number(/^--last=(\d+)$/.exec(args.find((a) => a.startsWith('--last=')) ?? '')?.[1] ?? 0)
const dir = path.join(ROOT, 'bench', 'results', 'runs')
let files = args.filter((a) => !a.startsWith('--'))
if (files.length === 0) {
  files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => path.join(dir, f))
  if (last > 0) files = files.slice(-last)
}
const runs = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as RunFile)
const byCase = new Map<string, Row[]>()
for (const run of runs) for (const row of run.rows) byCase.set(row.case, [...(byCase.get(row.case) ?? []), row])

const fmt = (values: number[]): string => {
  if (values.length === 0) return ''
  const sorted = [...values].sort((a, b) => a - b)
  return values.length === 1 ? `${sorted[0]}` : `${sorted[0]} / ${round(median(sorted))} / ${sorted.at(-1)}`
}

const lines = ['| case | runs | p50 (min / median / max) | added or ratio (min / median / max) | target | met |', '|---|---|---|---|---|---|']
for (const [name, rows] of byCase) {
  const rel = rows.map((r) => r.added ?? r.ratio).filter((v): v is number => v !== undefined)
  const met = rows.filter((r) => r.met !== undefined)
  lines.push(
    `| ${name} | ${rows.length} | ${fmt(rows.map((r) => r.p50))} ${rows[0]!.unit} | ${fmt(rel)}${rows[0]!.added !== undefined ? ` ${rows[0]!.unit}` : rel.length ? '×' : ''} | ${rows[0]!.target ?? ''} | ${met.length ? `${met.filter((r) => r.met).length}/${met.length}` : ''} |`,
  )
}
process.stdout.write(`${lines.join('\n')}\n\n`)
for (const run of runs) process.stdout.write(`${run.date}${run.settings.quick ? ' (quick)' : ''}: load before ${run.loadBefore}, after ${run.loadAfter}\n`)
