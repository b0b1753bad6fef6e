/** Small helpers shared by the benchmarks: timing, percentiles, RSS, reporting. */
import {spawn} from 'node:child_process'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const BIN_RUN = path.join(ROOT, 'bin', 'run.js')

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[idx]!
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits
  return Math.round(n * f) / f
}

/** Runs a command with stdin and resolves with its wall time in ms. */
export function timedSpawn(command: string, args: string[], input: Buffer, options: {cwd?: string; env?: NodeJS.ProcessEnv} = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(command, args, {stdio: ['pipe', 'pipe', 'pipe'], ...options})
    child.stdout.resume()
    child.stderr.resume()
    child.stdin.on('error', () => {})
    child.stdin.end(input)
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${command} exited ${code}`))))
  })
}

export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN)
  return round(kb / 1024, 1)
}

export interface Row {
  case: string
  p50: number
  p95: number
  baselineP50?: number
  baselineP95?: number
  added?: number
  ratio?: number
  unit: string
  target?: string
  met?: boolean
  note?: string
}

export function printTable(rows: Row[]): string {
  const header = '| case | p50 | p95 | baseline p50 | added / ratio | target | met |'
  const sep = '|---|---|---|---|---|---|---|'
  const lines = rows.map((r) => {
    const rel = r.added !== undefined ? `+${r.added} ${r.unit}` : r.ratio !== undefined ? `${r.ratio}×` : ''
    return `| ${r.case} | ${r.p50} ${r.unit} | ${r.p95} ${r.unit} | ${r.baselineP50 ?? ''} | ${rel} | ${r.target ?? ''} | ${r.met === undefined ? '' : r.met ? 'yes' : 'NO'} |`
  })
  return [header, sep, ...lines].join('\n')
}

export async function saveResults(name: string, data: unknown): Promise<string> {
  const file = path.join(ROOT, 'bench', 'results', `${name}.json`)
  await writeFile(file, `${JSON.stringify(data, null, 2)}\n`)
  return file
}
