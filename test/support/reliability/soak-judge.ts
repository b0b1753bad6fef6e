/**
 * Judging a soak (long-run.ts, pod-long-run.ts): the server's RSS, open file descriptors and child
 * processes are sampled every 250 ms through the soak (from a worker thread); after a warm-up phase (caches, JIT, the
 * heap finding its size) the samples are split into thirds, and the last third is compared with
 * the first. Growth beyond the margin fails the soak:
 *
 *   RSS        median   max(10 %, 16 MiB)   (a leak of a few KiB per call is MiBs over minutes; GC noise is not)
 *   fds        floor    max(10 %, 8)
 *   processes  floor    max(10 %, 4)
 *
 * RSS by the median: a GC pause or a burst moves one sample, not a third of them. Fds and child
 * processes by the floor (the smallest sample of the third): under steady load they rise and fall
 * with the calls in flight (a function process holds its pipes until it ends, a deadline call holds
 * them until the deadline), so their median follows the mix of calls; what a leak raises is the
 * floor, the count at the quietest moment. The quiet before/after comparison (nothing in flight)
 * is the callers' own check.
 */
import {Worker} from 'node:worker_threads'

export interface SoakSample {
  /** ms since the soak started */
  t: number
  rssMiB: number
  fds: number
  processes: number
}

export interface SoakVerdict {
  ok: boolean
  /** One line per measure (what was compared, the limit, ok or GROWTH), for the report. */
  lines: string[]
}

export const SOAK_MARGINS = {
  rssMiB: {by: 'median', fraction: 0.1, absolute: 16, unit: ' MiB'},
  fds: {by: 'floor', fraction: 0.1, absolute: 8, unit: ''},
  processes: {by: 'floor', fraction: 0.1, absolute: 4, unit: ''},
} as const

/** The warm-up before the measured part: 10 % of the soak, at least 10 s, at most 60 s. */
export function soakWarmupMs(soakMs: number): number {
  return Math.min(60_000, Math.max(10_000, Math.round(soakMs / 10)))
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const round = (n: number): number => Math.round(n * 10) / 10

/** Compares the first and last thirds of the samples after `warmupMs`. */
export function judgeSoak(samples: readonly SoakSample[], warmupMs: number): SoakVerdict {
  const measured = samples.filter((s) => s.t >= warmupMs)
  if (measured.length < 6) {
    return {ok: false, lines: [`only ${measured.length} samples after the ${warmupMs / 1000} s warm-up (need 6 or more): run the soak longer`]}
  }
  const third = Math.floor(measured.length / 3)
  const first = measured.slice(0, third)
  const last = measured.slice(measured.length - third)
  let ok = true
  const lines: string[] = [
    `soak trend: ${measured.length} samples after a ${warmupMs / 1000} s warm-up; the first third (${round(first[0]!.t / 1000)}-${round(first.at(-1)!.t / 1000)} s) vs the last third (${round(last[0]!.t / 1000)}-${round(last.at(-1)!.t / 1000)} s)`,
  ]
  for (const [key, margin] of Object.entries(SOAK_MARGINS) as Array<[keyof typeof SOAK_MARGINS, (typeof SOAK_MARGINS)[keyof typeof SOAK_MARGINS]]>) {
    const stat = margin.by === 'median' ? median : (values: number[]): number => Math.min(...values)
    const a = stat(first.map((s) => s[key]))
    const b = stat(last.map((s) => s[key]))
    const limit = Math.max(margin.fraction * a, margin.absolute)
    const growth = b - a
    const good = growth <= limit
    if (!good) ok = false
    lines.push(`  ${key.padEnd(9)} ${margin.by.padEnd(6)} ${round(a)}${margin.unit} → ${round(b)}${margin.unit} (${growth >= 0 ? '+' : ''}${round(growth)}, limit +${round(limit)}): ${good ? 'ok' : 'GROWTH'}`)
  }
  return {ok, lines}
}

/**
 * Samples a process's RSS, open fds and live child processes (plus, with `dir`, live processes
 * whose working directory is under it: function grandchildren) every `everyMs`, from a worker
 * thread: the soak's load generator keeps this thread's event loop busy, and a timer here fires
 * late and rarely. The worker is plain JavaScript reading /proc (no tsx in it: execArgv is empty).
 * stop() returns every sample, each with its time since the start.
 */
export function startProcSampler(options: {pid: number; dir?: string; everyMs?: number}): {stop(): Promise<SoakSample[]>} {
  const worker = new Worker(SAMPLER_SOURCE, {eval: true, execArgv: [], workerData: {pid: options.pid, dir: options.dir ?? '', everyMs: options.everyMs ?? 250}})
  worker.unref()
  let stopped: Promise<SoakSample[]> | undefined
  return {
    stop: () =>
      (stopped ??= new Promise<SoakSample[]>((resolve, reject) => {
        worker.once('message', (samples: SoakSample[]) => {
          resolve(samples)
          void worker.terminate()
        })
        worker.once('error', reject)
        worker.postMessage('stop')
      })),
  }
}

const SAMPLER_SOURCE = `
const {parentPort, workerData} = require('node:worker_threads')
const fs = require('node:fs')
const {pid, dir, everyMs} = workerData
const started = Date.now()
const samples = []
function stat(p) {
  const text = fs.readFileSync('/proc/' + p + '/stat', 'utf8')
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return {state: rest[0], ppid: Number(rest[1])}
}
function take() {
  try {
    const rssKiB = Number((/VmRSS:\\s+(\\d+)/.exec(fs.readFileSync('/proc/' + pid + '/status', 'utf8')) || [])[1] || 0)
    const fds = fs.readdirSync('/proc/' + pid + '/fd').length
    let children = 0
    let under = 0
    for (const name of fs.readdirSync('/proc')) {
      if (!/^\\d+$/.test(name)) continue
      try {
        const st = stat(name)
        if (st.state === 'Z' || st.state === 'X') continue
        if (st.ppid === pid) children++
        if (dir) {
          const cwd = fs.readlinkSync('/proc/' + name + '/cwd')
          if (cwd === dir || cwd.startsWith(dir + '/')) under++
        }
      } catch {}
    }
    samples.push({t: Date.now() - started, rssMiB: Math.round(rssKiB / 102.4) / 10, fds, processes: Math.max(children, under)})
  } catch {}
}
take()
const timer = setInterval(take, everyMs)
parentPort.on('message', () => {
  clearInterval(timer)
  parentPort.postMessage(samples)
})
`
