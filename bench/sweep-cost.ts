/**
 * Cost of the end-of-call sweep (process/sweep.ts): one /proc scan, alone and per call when 200
 * calls of /bin/cat run 8 at a time (sweeps are coalesced), with the number of processes on the
 * machine, which the scan is linear in.
 *
 *   node --import tsx bench/sweep-cost.ts
 */
import {readdirSync} from 'node:fs'

import {runFunctionProcess} from '../src/lib/process/run.js'
import {sweep, sweeper} from '../src/lib/process/sweep.js'

const processes = readdirSync('/proc').filter((n) => /^\d+$/.test(n)).length
const rounds = 20
let t = performance.now()
for (let i = 0; i < rounds; i++) await sweep([{marker: 'bench.none'}])
const oneSweepMs = (performance.now() - t) / rounds

const input = Buffer.from('kind: ResourceList\nitems: []\n')
const calls = 200
t = performance.now()
for (let i = 0; i < calls; i += 8) {
  await Promise.all(Array.from({length: 8}, () => runFunctionProcess({command: '/bin/cat', input, maxStdoutBytes: 1 << 20, label: 'bench'})))
}
await sweeper.whenIdle()
const perCallMs = (performance.now() - t) / calls
console.log(JSON.stringify({processes, oneSweepMs: Math.round(oneSweepMs * 10) / 10, callsOf8: calls, msPerCallIncludingSweeps: Math.round(perCallMs * 10) / 10}))
