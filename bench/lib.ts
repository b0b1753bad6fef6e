/** Small helpers shared by the benchmarks: settings, timing, percentiles, /proc sampling, reporting. */
import {spawn} from 'node:child_process'
import {readdirSync, readFileSync, writeFileSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const BIN_RUN = path.join(ROOT, 'bin', 'run.js')

/** FNR_BENCH_QUICK=1: a ~1 minute smoke run with small iteration counts. */
export const QUICK = /^(1|true|yes)$/i.test(process.env.FNR_BENCH_QUICK ?? '')

/**
 * An iteration count from the environment (a positive integer; 0 too where `zeroSkips`: the case
 * is then skipped), else the full or the quick default.
 */
export function envCount(name: string, full: number, quick: number, zeroSkips = false): number {
  const raw = process.env[name]
  if (raw !== undefined && raw !== '') {
    const n = Number(raw)
    if (!Number.isInteger(n) || n < (zeroSkips ? 0 : 1)) throw new Error(`${name} must be a ${zeroSkips ? 'non-negative' : 'positive'} integer, got ${JSON.stringify(raw)}`)
    return n
  }
  return QUICK ? quick : full
}

/**
 * The environment the benchmarks give every process they start (fnr, kpt, raw spawns).
 * NODE_EXTRA_CA_CERTS is removed: Node 20 parses that file at start-up, before any JavaScript
 * runs, which adds ~35 ms to every Node process on a machine that sets it (this one does). It is
 * a property of the host, not of fnr or kpt; P2 reports its cost in a row of its own.
 */
export function benchEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {...process.env, ...extra}
  if (!process.env.FNR_BENCH_KEEP_ENV) delete env.NODE_EXTRA_CA_CERTS
  return env
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[idx]!
}

export function median(values: number[]): number {
  return percentile(values, 50)
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits
  return Math.round(n * f) / f
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}

export interface SpawnTimingOptions {
  cwd?: string
  env?: NodeJS.ProcessEnv
  /** Keep stdout (as the runner does) instead of discarding it; the size is checked. */
  collect?: boolean
}

/** Runs a command with stdin and resolves with its wall time in ms (stdout discarded or collected). */
export function timedSpawn(command: string, args: string[], input: Buffer, options: SpawnTimingOptions = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(command, args, {stdio: ['pipe', 'pipe', 'pipe'], cwd: options.cwd, env: options.env ?? benchEnv()})
    const chunks: Buffer[] = []
    let size = 0
    if (options.collect) {
      child.stdout.on('data', (c: Buffer) => {
        chunks.push(c)
        size += c.length
      })
    } else child.stdout.resume()
    child.stderr.resume()
    child.stdin.on('error', () => {})
    child.stdin.end(input)
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${command} exited ${code}`))
      if (options.collect && Buffer.concat(chunks, size).length !== size) return reject(new Error('short read'))
      resolve(performance.now() - t0)
    })
  })
}

/** Runs `count` tasks with `concurrency` workers; resolves with each task's latency and the wall time. */
export async function runConcurrent(count: number, concurrency: number, task: () => Promise<unknown>): Promise<{latencies: number[]; wallMs: number}> {
  const latencies: number[] = []
  let next = 0
  const t0 = performance.now()
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++
      const s = performance.now()
      await task()
      latencies.push(performance.now() - s)
    }
  }
  await Promise.all(Array.from({length: Math.min(concurrency, count)}, worker))
  return {latencies, wallMs: performance.now() - t0}
}

/** What /proc says about a process: resident memory now and at its peak, open fds, live children. */
export interface ProcStatus {
  rssMiB: number
  /** Peak resident set (VmHWM) since start or since resetPeakRss(). */
  hwmMiB: number
  fds: number
  children: number
}

function statusField(status: string, field: string): number {
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN)
}

export function procStatus(pid: number): ProcStatus {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return {
    rssMiB: round(statusField(status, 'VmRSS') / 1024, 1),
    hwmMiB: round(statusField(status, 'VmHWM') / 1024, 1),
    fds: readdirSync(`/proc/${pid}/fd`).length,
    children: childPids(pid).length,
  }
}

/** Live child processes of pid (from /proc/<pid>/task/<tid>/children, else by scanning /proc). */
export function childPids(pid: number): number[] {
  const out: number[] = []
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim()
      if (text) out.push(...text.split(/\s+/).map(Number))
    }
    return out
  } catch {
    // Kernel without CONFIG_PROC_CHILDREN: scan.
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === pid) out.push(Number(entry))
    } catch {
      // Gone meanwhile.
    }
  }
  return out
}

/** CPU time (user + system, ms) a process used, and that of its waited-for children, from /proc. */
export function procCpuMs(pid: number): {self: number; children: number} {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // Fields 14-17 of stat (utime stime cutime cstime), in clock ticks (USER_HZ, 100 on Linux).
  const tick = 1000 / 100
  return {self: (Number(f[11]) + Number(f[12])) * tick, children: (Number(f[13]) + Number(f[14])) * tick}
}

/**
 * procCpuMs of a process plus, counted in `children`, that of its live children: a runner's
 * process spawner (src/lib/process/spawner.ts) lives as long as the runner, and the functions it
 * starts are its children, so their CPU reaches the runner's counters only when it exits.
 */
export function procTreeCpuMs(pid: number): {self: number; children: number} {
  const own = procCpuMs(pid)
  let live = 0
  let kids: number[] = []
  try {
    kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    // no children file (or the process is gone): nothing live to add
  }
  for (const kid of kids) {
    try {
      const c = procCpuMs(kid)
      live += c.self + c.children
    } catch {
      // exited meanwhile: its CPU is in the parent's reaped-children counters
    }
  }
  return {self: own.self, children: own.children + live}
}

/** CPU time (ms) this process used since `since` (a process.cpuUsage() value). */
export function ownCpuMs(since: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(since)
  return (u.user + u.system) / 1000
}

export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  return round(statusField(status, 'VmRSS') / 1024, 1)
}

/** 80 MB, the P6 target, in MiB (the unit of every RSS row). */
export const P6_TARGET_MIB = round((80 * 1000 * 1000) / 1024 / 1024, 1)

/** How long a server is left alone before its idle RSS is read: V8's memory reducer runs after ~8-10 s of quiet. */
export const SETTLE_MS = 20_000

/**
 * The two idle RSS rows of a freshly started server: 0.5 s after it is ready (start-up garbage
 * still held), and after SETTLE_MS without calls, once V8's memory reducer has given start-up
 * garbage back, which is what a runner holds while it waits for calls (the target applies to it).
 */
export async function idleRssRows(pid: number, what: string, note: string): Promise<{rows: Row[]; justStarted: number; settled: number}> {
  const started = performance.now()
  await sleep(500)
  const justStarted = await rssMiB(pid)
  await sleep(Math.max(0, SETTLE_MS - (performance.now() - started)))
  const settled = await rssMiB(pid)
  const target = `≤ 80 MB (${P6_TARGET_MIB} MiB)`
  return {
    justStarted,
    settled,
    rows: [
      {case: `P6 idle RSS of fnr serve, ${what}`, p50: settled, p95: settled, unit: 'MiB', target, met: settled <= P6_TARGET_MIB, note: `after ${SETTLE_MS / 1000} s without calls; ${note}`},
      {case: `P6 RSS of fnr serve 0.5 s after ready, ${what}`, p50: justStarted, p95: justStarted, unit: 'MiB', note: `start-up garbage not yet given back (V8's memory reducer runs after ~10 s of quiet); settled: ${settled} MiB`},
    ],
  }
}

/** Resets the peak RSS (VmHWM) of a process (clear_refs "5", Linux ≥ 4.0, own processes). */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5')
    return true
  } catch {
    return false
  }
}

/** Polls VmRSS of a process every few ms and keeps the maximum (a fallback when VmHWM cannot be reset). */
export class RssSampler {
  maxMiB = 0
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly pid: number,
    intervalMs = 5,
  ) {
    this.sample()
    this.timer = setInterval(() => this.sample(), intervalMs)
  }

  private sample(): void {
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'utf8')
      this.maxMiB = Math.max(this.maxMiB, round(statusField(status, 'VmRSS') / 1024, 1))
    } catch {
      // The process ended.
    }
  }

  stop(): number {
    if (this.timer) clearInterval(this.timer)
    this.timer = undefined
    this.sample()
    return this.maxMiB
  }
}

export function loadAverage(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')
}

export interface Row {
  case: string
  /** The median (or the single value: a throughput, an RSS). */
  p50: number
  p95?: number
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
  const header = '| case | p50 / value | p95 | baseline p50 | baseline p95 | added / ratio | target | met | note |'
  const sep = '|---|---|---|---|---|---|---|---|---|'
  const lines = rows.map((r) => {
    const rel = r.added !== undefined ? `${r.added >= 0 ? '+' : ''}${r.added} ${r.unit}` : r.ratio !== undefined ? `${r.ratio}×` : ''
    return `| ${r.case} | ${r.p50} ${r.unit} | ${r.p95 === undefined ? '' : `${r.p95} ${r.unit}`} | ${r.baselineP50 ?? ''} | ${r.baselineP95 ?? ''} | ${rel} | ${r.target ?? ''} | ${r.met === undefined ? '' : r.met ? 'yes' : 'NO'} | ${r.note ?? ''} |`
  })
  return [header, sep, ...lines].join('\n')
}

export async function saveResults(name: string, data: unknown): Promise<string> {
  const file = path.join(ROOT, 'bench', 'results', `${name}.json`)
  await mkdir(path.dirname(file), {recursive: true})
  await writeFile(file, `${JSON.stringify(data, null, 2)}\n`)
  return file
}
