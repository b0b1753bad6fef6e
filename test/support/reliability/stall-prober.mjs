// The health-check prober of the memory-limit suite, as a process of its own (hostile.ts starts
// it): the test's own process is the attacking client, and a prober sharing its event loop
// measured the client's delays as much as the server's.
//
//   node stall-prober.mjs ADDRESS SERVER_PID EVERY_MS
//
// Every EVERY_MS it sends grpc.health.v1.Health/Check over its own connection and records the
// round trip. Every 10 ms it reads the CPU time of the server's main thread (the event loop's
// thread: /proc/PID/task/PID/stat, utime + stime). When stdin ends it prints one JSON line: the
// round trips, and for each the CPU time the server's event-loop thread spent while that call
// waited. A long round trip with little CPU is the machine making the server wait (a loaded,
// shared machine); one with as much CPU is the server's own work holding the loop.
import {readFileSync} from 'node:fs'

import * as grpc from '@grpc/grpc-js'

const [address, pidText, everyText] = process.argv.slice(2)
const pid = Number(pidText)
const every = Number(everyText ?? 50)
const TICK_MS = 1000 / 100 // USER_HZ

/** Cumulative CPU time (ms) of the server's main thread, or undefined once it is gone. */
function mainThreadCpuMs() {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'latin1')
    // Fields after the command name (which may hold spaces), from field 3 on.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS
  } catch {
    return undefined
  }
}

/** [wall time (ms), cpu ms] samples. */
const cpu = []
const sample = () => {
  const c = mainThreadCpuMs()
  if (c !== undefined) cpu.push([performance.now(), c])
}
sample()
const sampler = setInterval(sample, 10)

/** CPU ms of the server's main thread between wall times a and b, with the samples around them. */
function cpuBetween(a, b) {
  let before
  let after
  for (const [t, c] of cpu) {
    if (t <= a) before = c
    if (t >= b) {
      after = c
      break
    }
  }
  if (before === undefined || after === undefined) return undefined
  return after - before
}

const client = new grpc.Client(address, grpc.credentials.createInsecure(), {'grpc.use_local_subchannel_pool': 1})
const probes = []
let failures = 0
let stopped = false

const loop = (async () => {
  while (!stopped) {
    const start = performance.now()
    await new Promise((resolve) => {
      client.makeUnaryRequest('/grpc.health.v1.Health/Check', (b) => b, (b) => b, Buffer.alloc(0), {deadline: Date.now() + 30_000}, (err) => {
        if (err) failures++
        resolve()
      })
    })
    probes.push([start, performance.now()])
    await new Promise((r) => setTimeout(r, every))
  }
})()

process.stdin.on('end', async () => {
  stopped = true
  await loop
  sample()
  clearInterval(sampler)
  client.close()
  const rows = probes.map(([a, b]) => ({wallMs: b - a, cpuMs: cpuBetween(a, b)}))
  process.stdout.write(`${JSON.stringify({probes: rows, failures})}\n`)
  process.exit(0)
})
process.stdin.resume()
