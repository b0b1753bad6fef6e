/**
 * What the process spawner (process/spawner.ts) changes for the runner: 600 calls of /bin/cat,
 * 32 at a time, started directly (fork of the runner) and through the spawner, side by side in
 * one run, in a runner holding little memory and one holding ~450 MiB of heap. Prints, for each:
 * the runner's longest event-loop stall and its p99 (monitorEventLoopDelay), calls per second and
 * the runner's own CPU per call (the spawner's and the functions' are not counted), the load
 * average, and the ratios.
 *
 *   node --import tsx --max-old-space-size=2000 bench/spawner.ts [--baseline DIR] [--json FILE]
 *
 * --baseline DIR adds a third arm: the spawner of another checkout of fnr (DIR holds its src/, e.g.
 * `git worktree add DIR <commit>`), run in the same process, interleaved with the others, so a
 * change of the spawner is measured side by side under the same load. --json writes the rows.
 */
import {writeFileSync} from 'node:fs'
import {loadavg} from 'node:os'
import path from 'node:path'
import {monitorEventLoopDelay} from 'node:perf_hooks'
import {pathToFileURL} from 'node:url'
import {parseArgs} from 'node:util'

import {runFunctionProcess} from '../src/lib/process/run.js'
import {ProcessLauncher} from '../src/lib/process/launcher.js'

const CALLS = 600
const IN_FLIGHT = 32
const input = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n'.repeat(50))

const {values: flags} = parseArgs({options: {baseline: {type: 'string'}, json: {type: 'string'}}})

type Call = {command: string; input: Buffer; maxStdoutBytes: number; label: string}
type Run = (call: Call) => ReturnType<typeof runFunctionProcess>
type Arm = 'direct' | 'spawner' | 'baseline'

const direct = new ProcessLauncher('direct')
const spawning = new ProcessLauncher('spawner')
const arms: {arm: Arm; run: Run}[] = [
  {arm: 'direct', run: (call) => runFunctionProcess({...call, launcher: direct})},
  {arm: 'spawner', run: (call) => runFunctionProcess({...call, launcher: spawning})},
]
if (flags.baseline) {
  const base = path.resolve(flags.baseline, 'src/lib/process')
  // A baseline from before the launchers (process-wide spawner, `launch` mode per call).
  const {runFunctionProcess: run} = (await import(pathToFileURL(path.join(base, 'run.ts')).href)) as {runFunctionProcess: (call: Call & {launch: 'spawner'}) => ReturnType<Run>}
  const {processSpawner: spawner} = (await import(pathToFileURL(path.join(base, 'spawner.ts')).href)) as {processSpawner: {warm(): void}}
  spawner.warm()
  arms.push({arm: 'baseline', run: (call) => run({...call, launch: 'spawner'})})
}

interface Row {
  arm: Arm
  heapMiB: number
  rssMiB: number
  loopMaxMs: number
  loopP99Ms: number
  callsPerSecond: number
  runnerCpuMsPerCall: number
  load1: number
}

async function measure(arm: (typeof arms)[number], heapMiB: number): Promise<Row> {
  const h = monitorEventLoopDelay({resolution: 5})
  h.enable()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < CALLS) {
      next++
      const r = await arm.run({command: '/bin/cat', input, maxStdoutBytes: 1 << 20, label: 'bench'})
      if (!r.stdout.equals(input)) throw new Error('wrong output')
    }
  }
  await Promise.all(Array.from({length: IN_FLIGHT}, worker))
  const ms = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  h.disable()
  return {
    arm: arm.arm,
    heapMiB,
    rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20),
    loopMaxMs: Math.round(h.max / 1e5) / 10,
    loopP99Ms: Math.round(h.percentile(99) / 1e5) / 10,
    callsPerSecond: Math.round((CALLS / ms) * 1000),
    runnerCpuMsPerCall: Math.round(((cpu.user + cpu.system) / 1000 / CALLS) * 100) / 100,
    load1: Math.round(loadavg()[0]! * 10) / 10,
  }
}

const loadAtStart = loadavg().map((l) => Math.round(l * 100) / 100)
// The spawners are ready before the first measurement (calls before that start directly).
spawning.start(() => {})
await new Promise((r) => setTimeout(r, 1000))

const rows: Row[] = []
const held: number[][] = []
for (const heapMiB of [0, 450]) {
  while (held.length < heapMiB) held.push(Array.from({length: 131_072}, (_, i) => i + 0.5)) // ~1 MiB each
  // Interleaved, twice, so a change of the machine's load hits every arm.
  for (let round = 0; round < 2; round++) for (const arm of arms) rows.push(await measure(arm, heapMiB))
}
for (const r of rows) console.log(JSON.stringify(r))
const summary: string[] = []
for (const heapMiB of [0, 450]) {
  const best = (arm: Arm, key: keyof Row, pick: (a: number, b: number) => number): number =>
    rows.filter((r) => r.heapMiB === heapMiB && r.arm === arm).map((r) => r[key] as number).reduce((a, b) => pick(a, b))
  const of = (arm: Arm) => ({max: best(arm, 'loopMaxMs', Math.min), cps: best(arm, 'callsPerSecond', Math.max), cpu: best(arm, 'runnerCpuMsPerCall', Math.min)})
  const d = of('direct')
  for (const arm of arms.slice(1).map((a) => a.arm)) {
    const s = of(arm)
    summary.push(
      `heap ${heapMiB} MiB, direct -> ${arm}: longest stall ${d.max} -> ${s.max} ms (x${(s.max / d.max).toFixed(2)}), calls/s ${d.cps} -> ${s.cps} (x${(s.cps / d.cps).toFixed(2)}), runner CPU per call ${d.cpu} -> ${s.cpu} ms (x${(s.cpu / d.cpu).toFixed(2)})`,
    )
  }
}
for (const line of summary) console.log(line)
console.log(`load average at the end: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`)
if (flags.json) writeFileSync(flags.json, JSON.stringify({bench: 'bench/spawner.ts', calls: CALLS, inFlight: IN_FLIGHT, baseline: flags.baseline ? `the spawner of ${flags.baseline}` : undefined, loadAverage: {start: loadAtStart, end: loadavg().map((l) => Math.round(l * 100) / 100)}, rows, summary}, null, 2) + '\n')
process.exit(0)
