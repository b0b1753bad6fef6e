/**
 * Cost of the end-of-call sweep (process/sweep.ts): one /proc scan alone, and per call of
 * /bin/cat through the native spawn helper, this checkout (the sweep only when the helper saw a
 * process left: docs/process.md "The sweep runs only when a call left something") against the
 * code of another built checkout (`--before DIR`, e.g. main before that change: a sweep after
 * every call), in one process, the arms interleaved in rounds at 1 and 8 calls in flight. Per
 * arm: calls/s, the runner's CPU per call (its thread pool's /proc reads included) and the whole
 * tree's (runner + helpers + functions), and how many sweeps ran.
 *
 *   node --import tsx bench/sweep-cost.ts [--before DIR] [--calls 300] [--rounds 3] [--out sweep-cost]
 */
import {readdirSync} from 'node:fs'
import path from 'node:path'
import {parseArgs} from 'node:util'

import {ProcessLauncher} from '../src/lib/process/launcher.js'
import {runFunctionProcess, type FunctionProcessResult} from '../src/lib/process/run.js'
import type {FunctionChild, LaunchSpec} from '../src/lib/process/spawner.js'
import * as afterSweep from '../src/lib/process/sweep.js'
import {loadAverage, median, procTreeCpuMs, round, runConcurrent, saveResults} from './lib.js'

const {values} = parseArgs({options: {before: {type: 'string'}, calls: {type: 'string', default: '300'}, rounds: {type: 'string', default: '3'}, out: {type: 'string', default: 'sweep-cost'}}})
const CALLS = Number(values.calls)
const ROUNDS = Number(values.rounds)

type Call = {command: string; input: Buffer; maxStdoutBytes: number; label: string}
/** One arm: how it starts a function through its native helper, runs a call, and counts its sweeps. */
interface Arm {
  name: string
  warm(): void
  launch(spec: LaunchSpec): FunctionChild
  run(call: Call): Promise<FunctionProcessResult>
  sweeper: {whenIdle(): Promise<void>; requested?: number}
}

const launcher = new ProcessLauncher('native')
const arms: Arm[] = [{name: 'this checkout', warm: () => launcher.start(() => {}), launch: (spec) => launcher.launch(spec), run: (call) => runFunctionProcess({...call, launcher}), sweeper: launcher.sweeper}]
if (values.before) {
  // A checkout from before the launchers: a process-wide native helper and sweeper, a `launch` mode per call.
  const src = path.resolve(values.before, 'src', 'lib', 'process')
  const run = (await import(path.join(src, 'run.ts'))) as {runFunctionProcess(call: Call & {launch: 'native'}): Promise<FunctionProcessResult>}
  const spawner = (await import(path.join(src, 'spawner.ts'))) as {nativeSpawner: {warm(): void}; launchFunction(spec: LaunchSpec, mode: 'native'): FunctionChild}
  const sweep = (await import(path.join(src, 'sweep.ts'))) as {sweeper: Arm['sweeper']}
  arms.push({
    name: 'before',
    warm: () => spawner.nativeSpawner.warm(),
    launch: (spec) => spawner.launchFunction(spec, 'native'),
    run: (call) => run.runFunctionProcess({...call, launch: 'native'}),
    sweeper: sweep.sweeper,
  })
}

const input = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n'.repeat(16))
const loadBefore = loadAverage()
const processes = readdirSync('/proc').filter((n) => /^\d+$/.test(n)).length

// one scan alone (a target whose function is gone)
const scans: number[] = []
for (let i = 0; i < 20; i++) {
  const cpu = process.cpuUsage()
  await afterSweep.sweep([{marker: 'bench.none', pid: process.pid + 1, startedAt: Date.now() - 5}])
  const used = process.cpuUsage(cpu)
  scans.push((used.user + used.system) / 1000)
}

/** Waits until the arm's native helper is ready (calls before that start directly). */
async function ready(arm: Arm): Promise<void> {
  arm.warm()
  for (let i = 0; i < 400; i++) {
    const child = arm.launch({command: '/bin/true', args: [], env: {}})
    const via = child.constructor.name !== 'ChildProcess'
    await new Promise((r) => child.once('close', r))
    if (via) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`${arm.name}: the native helper did not become ready`)
}
for (const arm of arms) await ready(arm)

const treeCpu = (): number => {
  const c = procTreeCpuMs(process.pid)
  return c.self + c.children
}

interface Sample {
  arm: string
  inFlight: number
  callsPerSecond: number
  runnerCpuMsPerCall: number
  treeCpuMsPerCall: number
  sweepsPerCall: number
}

async function measure(arm: Arm, inFlight: number): Promise<Sample> {
  await arm.sweeper.whenIdle()
  const requested0 = arm.sweeper.requested ?? NaN
  const cpu0 = process.cpuUsage()
  const tree0 = treeCpu()
  const t0 = performance.now()
  await runConcurrent(CALLS, inFlight, async () => {
    const r = await arm.run({command: '/bin/cat', input, maxStdoutBytes: 1 << 20, label: 'bench'})
    if (!r.stdout.equals(input)) throw new Error('cat returned other bytes')
  })
  await arm.sweeper.whenIdle()
  const wall = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  return {
    arm: arm.name,
    inFlight,
    callsPerSecond: round((CALLS / wall) * 1000, 0),
    runnerCpuMsPerCall: round((cpu.user + cpu.system) / 1000 / CALLS, 3),
    treeCpuMsPerCall: round((treeCpu() - tree0) / CALLS, 3),
    // the before code has no counter: every call there asks for a sweep
    sweepsPerCall: Number.isNaN(requested0) ? 1 : round(((arm.sweeper.requested ?? 0) - requested0) / CALLS, 3),
  }
}

const samples: Sample[] = []
for (const inFlight of [1, 8]) {
  for (let r = 0; r < ROUNDS; r++) {
    for (const arm of r % 2 === 0 ? arms : [...arms].reverse()) {
      const s = await measure(arm, inFlight)
      samples.push(s)
      process.stderr.write(`${JSON.stringify(s)}\n`)
    }
  }
}

const summary = [1, 8].flatMap((inFlight) =>
  arms.map((arm) => {
    const mine = samples.filter((s) => s.arm === arm.name && s.inFlight === inFlight)
    return {
      arm: arm.name,
      inFlight,
      callsPerSecond: median(mine.map((s) => s.callsPerSecond)),
      runnerCpuMsPerCall: median(mine.map((s) => s.runnerCpuMsPerCall)),
      treeCpuMsPerCall: median(mine.map((s) => s.treeCpuMsPerCall)),
      sweepsPerCall: median(mine.map((s) => s.sweepsPerCall)),
    }
  }),
)
const result = {date: new Date().toISOString(), node: process.version, processes, oneScanCpuMs: round(median(scans), 3), calls: CALLS, rounds: ROUNDS, loadBefore, loadAfter: loadAverage(), summary, samples}
const file = await saveResults(values.out!, result)
console.table(summary)
console.log(JSON.stringify({processes, oneScanCpuMs: result.oneScanCpuMs, loadBefore, loadAfter: result.loadAfter, file}))
process.exit(0)
