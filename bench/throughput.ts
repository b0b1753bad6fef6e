/**
 * P3: throughput of `fnr serve` (exec runtime, /bin/cat on a small ResourceList) with 1, 4, 16
 * and 64 calls in flight on one gRPC channel (as Porch's single connection), versus the same
 * number of concurrent raw spawns of the same binary from the benchmark process (same stdin, env
 * and cwd, stdout kept as serve keeps it). Each level runs
 * in alternating rounds (serve, raw, serve, raw, …) so both sides see the same machine load.
 *
 * CPU per call is counted too (from /proc and process.cpuUsage, so it holds under load): the serve
 * process, the gRPC client in the benchmark process (the load generator: Porch's side, not fnr's)
 * and the function processes, versus the raw spawner and its function processes. On a machine
 * whose cores are all busy, throughput follows CPU per call, so the note also gives the ratio the
 * CPU counts predict with and without the client's share.
 */
import {makeResourceList, startExecServe} from './fixture.js'
import {ownCpuMs, percentile, procCpuMs, round, runConcurrent, timedSpawn, type Row} from './lib.js'

export const CONCURRENCY_LEVELS = [1, 4, 16, 64]
const ROUNDS = 3

export async function benchThroughput(callsPerLevel: number, levels = CONCURRENCY_LEVELS): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const fx = await startExecServe([{name: 'cat', source: '/bin/cat'}])
  try {
    const input = makeResourceList(3)
    const image = fx.image('cat')
    const binary = fx.binary('cat')
    const viaServe = () => fx.client.evaluateRaw(image, input)
    const direct = () => timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true})
    await runConcurrent(50, 8, viaServe)
    await runConcurrent(50, 8, direct)
    for (const c of levels) {
      const perRound = Math.max(c, Math.round(callsPerLevel / ROUNDS))
      const serve = {latencies: [] as number[], wallMs: 0, calls: 0, serverCpuMs: 0, clientCpuMs: 0, childCpuMs: 0}
      const spawn = {latencies: [] as number[], wallMs: 0, calls: 0, parentCpuMs: 0, childCpuMs: 0}
      for (let r = 0; r < ROUNDS; r++) {
        {
          const server0 = procCpuMs(fx.serve.pid)
          const own0 = process.cpuUsage()
          const res = await runConcurrent(perRound, c, viaServe)
          serve.clientCpuMs += ownCpuMs(own0)
          const server1 = procCpuMs(fx.serve.pid)
          serve.serverCpuMs += server1.self - server0.self
          serve.childCpuMs += server1.children - server0.children
          serve.latencies.push(...res.latencies)
          serve.wallMs += res.wallMs
          serve.calls += perRound
        }
        {
          const me0 = procCpuMs(process.pid)
          const own0 = process.cpuUsage()
          const res = await runConcurrent(perRound, c, direct)
          spawn.parentCpuMs += ownCpuMs(own0)
          spawn.childCpuMs += procCpuMs(process.pid).children - me0.children
          spawn.latencies.push(...res.latencies)
          spawn.wallMs += res.wallMs
          spawn.calls += perRound
        }
      }
      const serveRate = round((serve.calls / serve.wallMs) * 1000, 0)
      const spawnRate = round((spawn.calls / spawn.wallMs) * 1000, 0)
      const ratio = round(serveRate / spawnRate)
      rows.push({
        case: `P3 throughput c=${c}: serve exec (cat) vs raw spawns`,
        p50: serveRate,
        baselineP50: spawnRate,
        ratio,
        unit: 'calls/s',
        target: '≥ 0.9× raw',
        met: ratio >= 0.9,
        note: `latency p50/p95 ${round(percentile(serve.latencies, 50))}/${round(percentile(serve.latencies, 95))} ms vs raw ${round(percentile(spawn.latencies, 50))}/${round(percentile(spawn.latencies, 95))} ms; ${serve.calls} calls each; ${cpuNote(serve, spawn)}`,
      })
      raw[`p3-c${c}`] = {serve, spawn}
    }
  } finally {
    await fx.close()
  }
  return {rows, raw}
}

/** CPU ms per call on each side, and the throughput ratios they predict when the CPUs are the limit. */
function cpuNote(
  serve: {calls: number; serverCpuMs: number; clientCpuMs: number; childCpuMs: number},
  spawn: {calls: number; parentCpuMs: number; childCpuMs: number},
): string {
  const per = (ms: number, calls: number): number => round(ms / calls, 2)
  const server = per(serve.serverCpuMs, serve.calls)
  const client = per(serve.clientCpuMs, serve.calls)
  const serveFn = per(serve.childCpuMs, serve.calls)
  const parent = per(spawn.parentCpuMs, spawn.calls)
  const rawFn = per(spawn.childCpuMs, spawn.calls)
  const raw = parent + rawFn
  return (
    `CPU ms/call: serve ${server} + client ${client} + function ${serveFn} vs raw spawner ${parent} + function ${rawFn}` +
    ` (CPU-bound ratio ${round(raw / (server + client + serveFn))}, without the client's share ${round(raw / (server + serveFn))})`
  )
}
