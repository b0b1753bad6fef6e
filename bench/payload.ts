/**
 * P4: payload scaling. ResourceLists of 10, 100, 1,000 and 10,000 resources (about 560 bytes
 * each, so the largest is close to the 6 MiB default message limit) through `fnr serve` (exec
 * runtime, /bin/cat) versus a raw pipe through the same binary that keeps its output as the
 * runner does, interleaved, one call at a time. Each size gets a fresh serve process; its peak
 * RSS is VmHWM, reset after the warm-up calls (clear_refs), checked against a 5 ms VmRSS sampler,
 * and compared with the idle RSS of that process.
 *
 * The transport floor is measured alongside: the same calls through a gRPC server that answers
 * with the request's own ResourceList and runs nothing (bench/echo-server.ts: fnr's
 * EvaluatorServer, same client). serve ≈ echo + raw pipe means fnr adds nothing beyond moving
 * the bytes over gRPC; the echo row's ratio to the raw pipe is the floor the P4 target meets.
 */
import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {startEchoServer} from './echo-server.js'
import {makeResourceList, startExecServe} from './fixture.js'
import {procStatus, percentile, resetPeakRss, round, RssSampler, sleep, timedSpawn, type Row} from './lib.js'

export const PAYLOAD_SIZES = [10, 100, 1000, 10_000]
const BYTES_PER_RESOURCE = 560
const MAX_MESSAGE = 6 * 1024 * 1024

/** Iterations per size: `base` for the smallest, fewer for the larger ones (at least 3). */
function iterationsFor(items: number, base: number): number {
  const scale = items >= 10_000 ? 0.2 : items >= 1000 ? 0.4 : items >= 100 ? 0.8 : 1
  return Math.max(3, Math.round(base * scale))
}

export async function benchPayload(baseIterations: number, sizes = PAYLOAD_SIZES): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const echoServer = await startEchoServer()
  const echo = new EvaluatorClient(`127.0.0.1:${echoServer.port}`)
  try {
  for (const items of sizes) {
    const fx = await startExecServe([{name: 'cat', source: '/bin/cat'}])
    try {
      await sleep(500)
      const idle = procStatus(fx.serve.pid).rssMiB
      const image = fx.image('cat')
      const binary = fx.binary('cat')
      const input = makeResourceList(items, BYTES_PER_RESOURCE)
      if (input.length > MAX_MESSAGE - 1024) throw new Error(`payload of ${items} resources is ${input.length} bytes, over the message limit`)
      const mib = round(input.length / 1024 / 1024, 2)
      const sizeLabel = mib >= 0.1 ? `${mib} MiB` : `${round(input.length / 1024, 1)} KiB`
      for (let i = 0; i < 2; i++) {
        const res = await fx.client.evaluateRaw(image, input)
        if (!res.resourceList.equals(input)) throw new Error('serve returned different bytes')
        await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true})
        if (!(await echo.evaluateRaw(image, input)).resourceList.equals(input)) throw new Error('echo returned different bytes')
      }
      const iterations = iterationsFor(items, baseIterations)
      const before = procStatus(fx.serve.pid).rssMiB
      const hwmReset = resetPeakRss(fx.serve.pid)
      const sampler = new RssSampler(fx.serve.pid)
      const viaServe: number[] = []
      const pipe: number[] = []
      const viaEcho: number[] = []
      for (let i = 0; i < iterations; i++) {
        if (i % 2 === 0) pipe.push(await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true}))
        const t0 = performance.now()
        await fx.client.evaluateRaw(image, input)
        viaServe.push(performance.now() - t0)
        if (i % 2 === 1) pipe.push(await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true}))
      }
      const sampledPeak = sampler.stop()
      // The echo calls after the serve ones: the serve process's peak RSS is its own.
      for (let i = 0; i < iterations; i++) {
        const t0 = performance.now()
        await echo.evaluateRaw(image, input)
        viaEcho.push(performance.now() - t0)
        if (i % 2 === 0) pipe.push(await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true}))
      }
      const status = procStatus(fx.serve.pid)
      const peak = hwmReset ? Math.max(status.hwmMiB, sampledPeak) : sampledPeak
      const p50 = round(percentile(viaServe, 50))
      const base = round(percentile(pipe, 50))
      const ratio = round(p50 / base)
      rows.push({
        case: `P4 ${items} resources (${sizeLabel}): serve exec (cat) vs raw pipe`,
        p50,
        p95: round(percentile(viaServe, 95)),
        baselineP50: base,
        baselineP95: round(percentile(pipe, 95)),
        ratio,
        unit: 'ms',
        target: '≤ 1.3× raw pipe',
        met: ratio <= 1.3,
        note: `${iterations} calls; serve − gRPC echo floor = ${round(p50 - round(percentile(viaEcho, 50)))} ms (raw pipe ${base} ms)`,
      })
      const echoP50 = round(percentile(viaEcho, 50))
      rows.push({
        case: `P4 ${items} resources (${sizeLabel}): floor, gRPC echo (no function) vs raw pipe`,
        p50: echoP50,
        p95: round(percentile(viaEcho, 95)),
        baselineP50: base,
        baselineP95: round(percentile(pipe, 95)),
        ratio: round(echoP50 / base),
        unit: 'ms',
        note: `the same server and client answering with the request, no process: what moving the payload over gRPC costs; serve cannot be faster than this + the pipe (${round(echoP50 + base)} ms, ${round((echoP50 + base) / base)}× the pipe)`,
      })
      const limit = round(idle + 4 * mib, 1)
      rows.push({
        case: `P4 ${items} resources (${sizeLabel}): peak RSS of serve`,
        p50: round(peak, 1),
        baselineP50: idle,
        added: round(peak - idle, 1),
        unit: 'MiB',
        target: `≤ idle + 4× payload = ${limit} MiB`,
        met: peak <= limit,
        note: `${hwmReset ? 'VmHWM' : 'sampled VmRSS'}; RSS ${before} MiB after the 2 warm-up calls (peak − that: ${round(peak - before, 1)} MiB = ${round((peak - before) / mib, 1)}× payload), ${status.rssMiB} MiB after`,
      })
      raw[`p4-${items}`] = {bytes: input.length, viaServe, viaEcho, pipe, idle, before, after: status.rssMiB, hwm: status.hwmMiB, sampledPeak}
    } finally {
      await fx.close()
    }
  }
  } finally {
    echo.close()
    await echoServer.stop()
  }
  return {rows, raw}
}
