/**
 * The native spawn helper (native/fnr-spawn.c, process/native-spawner.ts) against the Node spawner
 * (process/spawner-process.ts) and against starting directly (a fork of the runner), side by side
 * in one run: calls of /bin/cat at 1 and at 16 in flight, each arm in turn, several rounds, so a
 * change of the machine's load hits every arm. Prints, per arm: calls per second, the runner's own
 * CPU per call, and the CPU per call of everything the calls ran (runner + spawner + functions:
 * procTreeCpuMs), then the ratios native / Node spawner and native / direct, and the load average.
 *
 *   node --import tsx bench/native-spawner.ts [--calls N] [--rounds N] [--json FILE]
 *
 * Needs the helper built (`npm run build`, or `node scripts/build-native.mjs`).
 */
import {writeFileSync} from 'node:fs'
import {loadavg} from 'node:os'
import {parseArgs} from 'node:util'

import {nativeHelperPath} from '../src/lib/process/native-spawner.js'
import {runFunctionProcess} from '../src/lib/process/run.js'
import {ProcessLauncher} from '../src/lib/process/launcher.js'
import type {LaunchMode} from '../src/lib/process/spawner.js'
import {procTreeCpuMs, runConcurrent} from './lib.js'

const {values: flags} = parseArgs({options: {calls: {type: 'string'}, rounds: {type: 'string'}, json: {type: 'string'}}})
const CALLS = Number(flags.calls ?? 400)
const ROUNDS = Number(flags.rounds ?? 3)
const input = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n'.repeat(16))

if (!nativeHelperPath()) {
  console.error('the native helper is not built: run `node scripts/build-native.mjs` (needs a C compiler)')
  process.exit(1)
}

const ARMS: {arm: string; mode: LaunchMode; launcher: ProcessLauncher}[] = [
  {arm: 'direct', mode: 'direct', launcher: new ProcessLauncher('direct')},
  {arm: 'node-spawner', mode: 'spawner', launcher: new ProcessLauncher('spawner')},
  {arm: 'native', mode: 'native', launcher: new ProcessLauncher('native')},
]

interface Row {
  arm: string
  inFlight: number
  round: number
  callsPerSecond: number
  runnerCpuMsPerCall: number
  totalCpuMsPerCall: number
  load1: number
}

const treeCpu = (): number => {
  const c = procTreeCpuMs(process.pid)
  return c.self + c.children
}

async function measure(arm: (typeof ARMS)[number], inFlight: number, round: number): Promise<Row> {
  const cpu0 = process.cpuUsage()
  const tree0 = treeCpu()
  const t0 = performance.now()
  await runConcurrent(CALLS, inFlight, async () => {
    const r = await runFunctionProcess({command: '/bin/cat', input, maxStdoutBytes: 1 << 20, label: 'bench', launcher: arm.launcher})
    if (!r.stdout.equals(input)) throw new Error('wrong output')
  })
  const ms = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  // The spawners' reaped functions are in their counters at once; a moment for the last exits.
  await new Promise((r) => setTimeout(r, 50))
  const tree = treeCpu() - tree0
  return {
    arm: arm.arm,
    inFlight,
    round,
    callsPerSecond: Math.round((CALLS / ms) * 1000),
    runnerCpuMsPerCall: Math.round(((cpu.user + cpu.system) / 1000 / CALLS) * 100) / 100,
    totalCpuMsPerCall: Math.round((tree / CALLS) * 100) / 100,
    load1: Math.round(loadavg()[0]! * 10) / 10,
  }
}

/** Waits until a spawner takes calls (before that, calls start directly). */
async function ready(arm: (typeof ARMS)[number]): Promise<void> {
  arm.launcher.start(() => {})
  for (let i = 0; i < 400; i++) {
    const child = arm.launcher.launch({command: '/bin/true', args: [], env: {}})
    const through = child.constructor.name !== 'ChildProcess'
    await new Promise((r) => child.once('close', r))
    if (through) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`${arm.mode} did not become ready`)
}

const loadAtStart = loadavg().map((l) => Math.round(l * 100) / 100)
await ready(ARMS[1]!)
await ready(ARMS[2]!)

const rows: Row[] = []
for (const inFlight of [1, 16]) {
  for (let round = 0; round < ROUNDS; round++) {
    for (const arm of ARMS) {
      const row = await measure(arm, inFlight, round)
      rows.push(row)
      console.log(JSON.stringify(row))
    }
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}
const summary: string[] = []
for (const inFlight of [1, 16]) {
  const of = (arm: string, key: 'callsPerSecond' | 'runnerCpuMsPerCall' | 'totalCpuMsPerCall'): number => median(rows.filter((r) => r.arm === arm && r.inFlight === inFlight).map((r) => r[key]))
  const line = (key: 'callsPerSecond' | 'runnerCpuMsPerCall' | 'totalCpuMsPerCall', unit: string): string => {
    const [d, n, x] = [of('direct', key), of('node-spawner', key), of('native', key)]
    return `${key} direct ${d}${unit}, node-spawner ${n}${unit}, native ${x}${unit} (native/node-spawner x${(x / n).toFixed(2)}, native/direct x${(x / d).toFixed(2)})`
  }
  summary.push(`${inFlight} in flight, medians of ${ROUNDS}: ${line('callsPerSecond', '')}; ${line('runnerCpuMsPerCall', ' ms')}; ${line('totalCpuMsPerCall', ' ms')}`)
}
for (const line of summary) console.log(line)
const loadAtEnd = loadavg().map((l) => Math.round(l * 100) / 100)
console.log(`load average: start ${loadAtStart.join(' ')}, end ${loadAtEnd.join(' ')}`)
if (flags.json) writeFileSync(flags.json, JSON.stringify({bench: 'bench/native-spawner.ts', calls: CALLS, rounds: ROUNDS, loadAverage: {start: loadAtStart, end: loadAtEnd}, rows, summary}, null, 2) + '\n')
process.exit(0)
