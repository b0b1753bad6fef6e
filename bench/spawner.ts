/**
 * What the process spawner (process/spawner.ts) changes for the runner: 600 calls of /bin/cat,
 * 32 at a time, started directly (fork of the runner) and through the spawner, side by side in
 * one run, in a runner holding little memory and one holding ~450 MiB of heap. Prints, for each:
 * the runner's longest event-loop stall and its p99 (monitorEventLoopDelay), calls per second and
 * the runner's own CPU per call (the spawner's and the functions' are not counted), and the ratios.
 *
 *   node --import tsx --max-old-space-size=2000 bench/spawner.ts
 */
import {monitorEventLoopDelay} from 'node:perf_hooks'

import {runFunctionProcess} from '../src/lib/process/run.js'
import {processSpawner, type LaunchMode} from '../src/lib/process/spawner.js'

const CALLS = 600
const IN_FLIGHT = 32
const input = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n'.repeat(50))

interface Row {
  mode: LaunchMode
  heapMiB: number
  rssMiB: number
  loopMaxMs: number
  loopP99Ms: number
  callsPerSecond: number
  runnerCpuMsPerCall: number
}

async function measure(mode: LaunchMode, heapMiB: number): Promise<Row> {
  const h = monitorEventLoopDelay({resolution: 5})
  h.enable()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < CALLS) {
      next++
      const r = await runFunctionProcess({command: '/bin/cat', input, maxStdoutBytes: 1 << 20, label: 'bench', launch: mode})
      if (!r.stdout.equals(input)) throw new Error('wrong output')
    }
  }
  await Promise.all(Array.from({length: IN_FLIGHT}, worker))
  const ms = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  h.disable()
  return {
    mode,
    heapMiB,
    rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20),
    loopMaxMs: Math.round(h.max / 1e5) / 10,
    loopP99Ms: Math.round(h.percentile(99) / 1e5) / 10,
    callsPerSecond: Math.round((CALLS / ms) * 1000),
    runnerCpuMsPerCall: Math.round(((cpu.user + cpu.system) / 1000 / CALLS) * 100) / 100,
  }
}

// The spawner is ready before the first measurement (calls before that start directly).
processSpawner.warm()
await new Promise((r) => setTimeout(r, 500))

const rows: Row[] = []
const held: number[][] = []
for (const heapMiB of [0, 450]) {
  while (held.length < heapMiB) held.push(Array.from({length: 131_072}, (_, i) => i + 0.5)) // ~1 MiB each
  // Interleaved, twice, so a change of the machine's load hits both.
  for (let round = 0; round < 2; round++) for (const mode of ['direct', 'spawner'] as const) rows.push(await measure(mode, heapMiB))
}
for (const r of rows) console.log(JSON.stringify(r))
for (const heapMiB of [0, 450]) {
  const best = (mode: LaunchMode, key: keyof Row, pick: (a: number, b: number) => number): number =>
    rows.filter((r) => r.heapMiB === heapMiB && r.mode === mode).map((r) => r[key] as number).reduce((a, b) => pick(a, b))
  const d = {max: best('direct', 'loopMaxMs', Math.min), cps: best('direct', 'callsPerSecond', Math.max), cpu: best('direct', 'runnerCpuMsPerCall', Math.min)}
  const s = {max: best('spawner', 'loopMaxMs', Math.min), cps: best('spawner', 'callsPerSecond', Math.max), cpu: best('spawner', 'runnerCpuMsPerCall', Math.min)}
  console.log(
    `heap ${heapMiB} MiB: longest stall ${d.max} -> ${s.max} ms (x${(s.max / d.max).toFixed(2)}), calls/s ${d.cps} -> ${s.cps} (x${(s.cps / d.cps).toFixed(2)}), runner CPU per call ${d.cpu} -> ${s.cpu} ms (x${(s.cpu / d.cpu).toFixed(2)})`,
  )
}
void held
process.exit(0)
