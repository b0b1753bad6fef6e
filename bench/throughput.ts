/**
 * P3: throughput of `fnr serve` (exec runtime, /bin/cat on a small ResourceList) with 1, 4, 16
 * and 64 calls in flight on one gRPC channel (as Porch's single connection), versus the same
 * number of concurrent raw spawns of the same binary from the benchmark process. Each level runs
 * in alternating rounds (serve, raw, serve, raw, …) so both sides see the same machine load.
 */
import {makeResourceList, startExecServe} from './fixture.js'
import {percentile, round, runConcurrent, timedSpawn, type Row} from './lib.js'

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
    const direct = () => timedSpawn(binary, [], input, fx.spawnOptions)
    await runConcurrent(50, 8, viaServe)
    await runConcurrent(50, 8, direct)
    for (const c of levels) {
      const perRound = Math.max(c, Math.round(callsPerLevel / ROUNDS))
      const serve = {latencies: [] as number[], wallMs: 0, calls: 0}
      const spawn = {latencies: [] as number[], wallMs: 0, calls: 0}
      for (let r = 0; r < ROUNDS; r++) {
        for (const [side, task] of [[serve, viaServe], [spawn, direct]] as const) {
          const res = await runConcurrent(perRound, c, task)
          side.latencies.push(...res.latencies)
          side.wallMs += res.wallMs
          side.calls += perRound
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
        note: `latency p50/p95 ${round(percentile(serve.latencies, 50))}/${round(percentile(serve.latencies, 95))} ms vs raw ${round(percentile(spawn.latencies, 50))}/${round(percentile(spawn.latencies, 95))} ms; ${serve.calls} calls each`,
      })
      raw[`p3-c${c}`] = {serve, spawn}
    }
  } finally {
    await fx.close()
  }
  return {rows, raw}
}
