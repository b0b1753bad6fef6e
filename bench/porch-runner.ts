/**
 * R: Porch's own function runner (func/server v1.5.8, built from the module proxy as a test peer by
 * scripts/catalog-peers.mjs) as the anchor for P1, P3 and P4. Both runners serve the same
 * config.yaml and functions folder (exec runtime only, /bin/cat), are called by the same Node gRPC
 * client, interleaved, so the ratios hold on a busy machine:
 *   R-P1  one call at a time, a small ResourceList: latency of fnr serve vs Porch's runner
 *   R-P3  1, 4, 16 and 64 calls in flight on one channel: calls/s of fnr serve vs Porch's runner
 *   R-P4  10 → 10,000 resources (≈ 560 bytes each): latency of fnr serve vs Porch's runner
 * R-P3 also reports each runner's CPU per call (its own and its function processes', from
 * /proc/PID/stat): unlike calls/s, that hardly moves with the machine's load.
 * Porch's runner has no address flag and listens on every address of a port found free just before;
 * the benchmark connects over loopback only.
 */
import {spawn} from 'node:child_process'
import net from 'node:net'
import path from 'node:path'

import {buildPorchRunner} from '../scripts/catalog-peers.mjs'
import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {makeResourceList, startExecServe, type ServeFixture} from './fixture.js'
import {percentile, procTreeCpuMs, round, runConcurrent, sleep, type Row} from './lib.js'
import {CONCURRENCY_LEVELS} from './throughput.js'
import {PAYLOAD_SIZES} from './payload.js'

interface PorchHandle {
  port: number
  pid: number
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

async function startPorch(server: string, fx: ServeFixture): Promise<PorchHandle> {
  const port = await freePort()
  const child = spawn(server, [`--port=${port}`, '--disable-runtimes=pod', `--config=${path.join(path.dirname(fx.fnDir), 'config.yaml')}`, `--functions=${fx.fnDir}`, '--log-level=1'], {
    env: {PATH: process.env.PATH, HOME: process.env.HOME, OTEL_METRICS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none'},
    stdio: ['ignore', 'ignore', 'ignore'],
  })
  const killOnExit = (): void => {
    child.kill('SIGKILL')
  }
  process.once('exit', killOnExit)
  const stop = async (): Promise<void> => {
    process.removeListener('exit', killOnExit)
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((r) => child.once('exit', r))
    child.kill('SIGTERM')
    await exited
  }
  const started = Date.now()
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), resolve(true)))
      s.once('error', () => (s.destroy(), resolve(false)))
    })
    if (ok) return {port, pid: child.pid!, stop}
    if (child.exitCode !== null || Date.now() - started > 30_000) {
      await stop()
      throw new Error('Porch\'s runner did not start')
    }
    await sleep(100)
  }
}

export async function benchPorchRunner(iterations: number, p3Calls: number, p4Iterations: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const {server} = buildPorchRunner()
  const fx = await startExecServe([{name: 'cat', source: '/bin/cat'}])
  const porch = await startPorch(server, fx)
  const porchClient = new EvaluatorClient(`127.0.0.1:${porch.port}`)
  try {
    const image = fx.image('cat')
    const call = (c: EvaluatorClient, input: Buffer) => async (): Promise<number> => {
      const t0 = performance.now()
      const res = await c.evaluateRaw(image, input)
      if (!res.resourceList.equals(input)) throw new Error('a runner returned different bytes')
      return performance.now() - t0
    }

    // R-P1
    const small = makeResourceList(3)
    for (let i = 0; i < 20; i++) {
      await call(fx.client, small)()
      await call(porchClient, small)()
    }
    const fnrMs: number[] = []
    const porchMs: number[] = []
    for (let i = 0; i < iterations; i++) {
      if (i % 2 === 0) porchMs.push(await call(porchClient, small)())
      fnrMs.push(await call(fx.client, small)())
      if (i % 2 === 1) porchMs.push(await call(porchClient, small)())
    }
    rows.push({
      case: 'R-P1 exec call (cat): fnr serve vs Porch\'s runner',
      p50: round(percentile(fnrMs, 50)),
      p95: round(percentile(fnrMs, 95)),
      baselineP50: round(percentile(porchMs, 50)),
      baselineP95: round(percentile(porchMs, 95)),
      added: round(percentile(fnrMs, 50) - percentile(porchMs, 50)),
      unit: 'ms',
      note: `baseline: Porch v1.5.8 func/server, same config and client; ${iterations} calls each`,
    })
    raw['r-p1'] = {fnr: fnrMs, porch: porchMs}

    // R-P3
    for (const c of CONCURRENCY_LEVELS) {
      const rounds = 3
      const perRound = Math.max(c, Math.round(p3Calls / rounds))
      const side = {fnr: {calls: 0, wallMs: 0, cpuMs: 0, latencies: [] as number[]}, porch: {calls: 0, wallMs: 0, cpuMs: 0, latencies: [] as number[]}}
      const pids = {fnr: fx.serve.pid, porch: porch.pid}
      await runConcurrent(Math.min(50, perRound), Math.min(8, c), call(fx.client, small))
      await runConcurrent(Math.min(50, perRound), Math.min(8, c), call(porchClient, small))
      for (let r = 0; r < rounds; r++) {
        for (const [name, client] of (r % 2 === 0 ? [['fnr', fx.client], ['porch', porchClient]] : [['porch', porchClient], ['fnr', fx.client]]) as Array<['fnr' | 'porch', EvaluatorClient]>) {
          const cpu0 = procTreeCpuMs(pids[name])
          const res = await runConcurrent(perRound, c, call(client, small))
          const cpu1 = procTreeCpuMs(pids[name])
          // the runner's own CPU, its reaped children's (the function processes, fork to exit) and
          // its live children's (fnr's spawner and what it reaped)
          side[name].cpuMs += cpu1.self - cpu0.self + cpu1.children - cpu0.children
          side[name].calls += perRound
          side[name].wallMs += res.wallMs
          side[name].latencies.push(...res.latencies)
        }
      }
      const fnrRate = round((side.fnr.calls / side.fnr.wallMs) * 1000, 0)
      const porchRate = round((side.porch.calls / side.porch.wallMs) * 1000, 0)
      rows.push({
        case: `R-P3 throughput c=${c}: fnr serve vs Porch's runner (cat)`,
        p50: fnrRate,
        baselineP50: porchRate,
        ratio: round(fnrRate / porchRate),
        unit: 'calls/s',
        note: `latency p50/p95 ${round(percentile(side.fnr.latencies, 50))}/${round(percentile(side.fnr.latencies, 95))} ms vs Porch ${round(percentile(side.porch.latencies, 50))}/${round(percentile(side.porch.latencies, 95))} ms; CPU per call (runner + function processes) ${round(side.fnr.cpuMs / side.fnr.calls)} ms vs Porch ${round(side.porch.cpuMs / side.porch.calls)} ms; ${side.fnr.calls} calls each`,
      })
      raw[`r-p3-c${c}`] = side
    }

    // R-P4
    for (const items of PAYLOAD_SIZES) {
      const input = makeResourceList(items, 560)
      const n = Math.max(3, Math.round(p4Iterations * (items >= 10_000 ? 0.2 : items >= 1000 ? 0.4 : items >= 100 ? 0.8 : 1)))
      for (let i = 0; i < 2; i++) {
        await call(fx.client, input)()
        await call(porchClient, input)()
      }
      const f: number[] = []
      const p: number[] = []
      for (let i = 0; i < n; i++) {
        if (i % 2 === 0) p.push(await call(porchClient, input)())
        f.push(await call(fx.client, input)())
        if (i % 2 === 1) p.push(await call(porchClient, input)())
      }
      const mib = round(input.length / 1024 / 1024, 2)
      rows.push({
        case: `R-P4 payload ${items} resources (${mib} MiB): fnr serve vs Porch's runner (cat)`,
        p50: round(percentile(f, 50)),
        p95: round(percentile(f, 95)),
        baselineP50: round(percentile(p, 50)),
        baselineP95: round(percentile(p, 95)),
        ratio: round(percentile(f, 50) / percentile(p, 50)),
        unit: 'ms',
        note: `${n} calls each`,
      })
      raw[`r-p4-${items}`] = {fnr: f, porch: p}
    }
  } finally {
    porchClient.close()
    await porch.stop()
    await fx.close()
  }
  return {rows, raw}
}
