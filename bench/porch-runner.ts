/**
 * R: Porch's own function runner (func/server v1.5.8, built from the module proxy as a test peer by
 * scripts/catalog-peers.mjs) as the anchor for P1, P3 and P4. Both runners serve the same
 * config.yaml and functions folder (exec runtime only, /bin/cat), are called by the same Node gRPC
 * client, interleaved, so the ratios hold on a busy machine:
 *   R-P1  one call at a time, a small ResourceList: latency of fnr serve vs Porch's runner
 *   R-P3  1, 4, 16 and 64 calls in flight on one channel: calls/s of fnr serve vs Porch's runner
 *   R-P4  10 → 10,000 resources (≈ 560 bytes each): latency of fnr serve vs Porch's runner
 *   R-P5  head-of-line: small calls one at a time while 8 workers send 5 MiB calls back to back
 * R-P3 also reports each runner's CPU per call (its own and its function processes', from
 * /proc/PID/stat): unlike calls/s, that hardly moves with the machine's load.
 * Porch's runner has no address flag and listens on every address of a port found free just before;
 * the benchmark connects over loopback only.
 *
 *   FNR_BENCH_BEFORE_ROOT=DIR   a third arm: `fnr serve` of another built checkout (DIR/bin/run.js,
 *                               e.g. main before a change), on the same config, interleaved too
 *   FNR_BENCH_COMPETITOR=N      N busy processes (a shell loop each) run beside the whole case,
 *                               started and stopped by the bench: the same figures on a loaded machine
 * The load average at the start and end of the case is in the rows' notes and the raw results.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import net from 'node:net'
import path from 'node:path'

import {buildPorchRunner} from '../scripts/catalog-peers.mjs'
import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {makeResourceList, startExecServe, startServe, type ServeFixture, type ServeHandle} from './fixture.js'
import {BIG_WORKERS, smallWhileBig} from './head-of-line.js'
import {loadAverage, percentile, procTreeCpuMs, round, runConcurrent, sleep, type Row} from './lib.js'
import {CONCURRENCY_LEVELS} from './throughput.js'
import {PAYLOAD_SIZES} from './payload.js'

export interface PorchHandle {
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

export async function startPorch(server: string, fx: ServeFixture): Promise<PorchHandle> {
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

/** `n` busy processes (a shell loop each), the CPU competitor; stop() kills them. */
export function startCompetitors(n: number): {stop(): void} {
  const children: ChildProcess[] = []
  for (let i = 0; i < n; i++) children.push(spawn('/bin/sh', ['-c', 'while :; do :; done'], {stdio: 'ignore'}))
  const stop = (): void => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
  }
  process.once('exit', stop)
  return {stop}
}

/** Runs `fn` with `n` busy processes beside it (none when n is 0), stopped when it ends. */
export async function besideCompetitors<T>(n: number, fn: () => Promise<T>): Promise<T> {
  const competitor = n > 0 ? startCompetitors(n) : undefined
  try {
    return await fn()
  } finally {
    competitor?.stop()
  }
}

interface Arm {
  name: 'fnr' | 'fnr-before' | 'porch'
  client: EvaluatorClient
  pid: number
}

export async function benchPorchRunner(iterations: number, p3Calls: number, p4Iterations: number, holCalls = 0): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const {server} = buildPorchRunner()
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 0)
  const beforeRoot = process.env.FNR_BENCH_BEFORE_ROOT
  const fx = await startExecServe([{name: 'cat', source: '/bin/cat'}])
  const porch = await startPorch(server, fx)
  const porchClient = new EvaluatorClient(`127.0.0.1:${porch.port}`)
  let before: ServeHandle | undefined
  let beforeClient: EvaluatorClient | undefined
  if (beforeRoot) {
    before = await startServe([`--config=${path.join(path.dirname(fx.fnDir), 'config.yaml')}`, `--functions=${fx.fnDir}`, '--disable-runtimes=pod'], path.join(beforeRoot, 'bin', 'run.js'))
    beforeClient = new EvaluatorClient(`127.0.0.1:${before.port}`)
  }
  const arms: Arm[] = [
    {name: 'fnr', client: fx.client, pid: fx.serve.pid},
    ...(before && beforeClient ? [{name: 'fnr-before' as const, client: beforeClient, pid: before.pid}] : []),
    {name: 'porch', client: porchClient, pid: porch.pid},
  ]
  /** The arms in a rotating order: round r starts with arm r mod n. */
  const rotated = (r: number): Arm[] => arms.map((_, i) => arms[(i + r) % arms.length]!)
  const competitor = competitors > 0 ? startCompetitors(competitors) : undefined
  const loadStart = loadAverage()
  raw.setup = {competitors, beforeRoot: beforeRoot ?? null, loadStart}
  const beforeNote = (values: Record<string, string>): string => (values['fnr-before'] ? `; fnr before: ${values['fnr-before']}` : '')
  const env = `${competitors ? `${competitors} busy processes beside it` : 'no competitor'}, load at start ${loadStart}`
  try {
    if (competitor) await sleep(2000)
    const image = fx.image('cat')
    const call = (c: EvaluatorClient, input: Buffer) => async (): Promise<number> => {
      const t0 = performance.now()
      const res = await c.evaluateRaw(image, input)
      if (!res.resourceList.equals(input)) throw new Error('a runner returned different bytes')
      return performance.now() - t0
    }

    // R-P1
    const small = makeResourceList(3)
    for (let i = 0; i < 20; i++) for (const a of arms) await call(a.client, small)()
    const p1: Record<string, number[]> = Object.fromEntries(arms.map((a) => [a.name, []]))
    for (let i = 0; i < iterations; i++) for (const a of rotated(i)) p1[a.name]!.push(await call(a.client, small)())
    const p1Note: Record<string, string> = Object.fromEntries(arms.map((a) => [a.name, `p50 ${round(percentile(p1[a.name]!, 50))} ms, p95 ${round(percentile(p1[a.name]!, 95))} ms`]))
    rows.push({
      case: 'R-P1 exec call (cat): fnr serve vs Porch\'s runner',
      p50: round(percentile(p1.fnr!, 50)),
      p95: round(percentile(p1.fnr!, 95)),
      baselineP50: round(percentile(p1.porch!, 50)),
      baselineP95: round(percentile(p1.porch!, 95)),
      added: round(percentile(p1.fnr!, 50) - percentile(p1.porch!, 50)),
      unit: 'ms',
      note: `baseline: Porch v1.5.8 func/server, same config and client; ${iterations} calls each; ${env}${beforeNote(p1Note)}`,
    })
    raw['r-p1'] = p1

    // R-P3
    for (const c of CONCURRENCY_LEVELS) {
      const rounds = 3
      const perRound = Math.max(c, Math.round(p3Calls / rounds))
      const side = Object.fromEntries(arms.map((a) => [a.name, {calls: 0, wallMs: 0, cpuMs: 0, latencies: [] as number[]}]))
      for (const a of arms) await runConcurrent(Math.min(50, perRound), Math.min(8, c), call(a.client, small))
      for (let r = 0; r < rounds; r++) {
        for (const a of rotated(r)) {
          const cpu0 = procTreeCpuMs(a.pid)
          const res = await runConcurrent(perRound, c, call(a.client, small))
          const cpu1 = procTreeCpuMs(a.pid)
          // the runner's own CPU, its reaped children's (the function processes, fork to exit) and
          // its live children's (fnr's spawner and what it reaped)
          const s = side[a.name]!
          s.cpuMs += cpu1.self - cpu0.self + cpu1.children - cpu0.children
          s.calls += perRound
          s.wallMs += res.wallMs
          s.latencies.push(...res.latencies)
        }
      }
      const rate = (n: string): number => round((side[n]!.calls / side[n]!.wallMs) * 1000, 0)
      const cpu = (n: string): number => round(side[n]!.cpuMs / side[n]!.calls)
      const lat = (n: string): string => `${round(percentile(side[n]!.latencies, 50))}/${round(percentile(side[n]!.latencies, 95))} ms`
      rows.push({
        case: `R-P3 throughput c=${c}: fnr serve vs Porch's runner (cat)`,
        p50: rate('fnr'),
        baselineP50: rate('porch'),
        ratio: round(rate('fnr') / rate('porch')),
        unit: 'calls/s',
        note: `latency p50/p95 ${lat('fnr')} vs Porch ${lat('porch')}; CPU per call (runner + function processes) ${cpu('fnr')} ms vs Porch ${cpu('porch')} ms; ${side.fnr!.calls} calls each; ${env}${side['fnr-before'] ? `; fnr before: ${rate('fnr-before')} calls/s, CPU per call ${cpu('fnr-before')} ms, latency ${lat('fnr-before')}` : ''}`,
      })
      raw[`r-p3-c${c}`] = side
    }

    // R-P4
    for (const items of PAYLOAD_SIZES) {
      const input = makeResourceList(items, 560)
      const n = Math.max(3, Math.round(p4Iterations * (items >= 10_000 ? 0.2 : items >= 1000 ? 0.4 : items >= 100 ? 0.8 : 1)))
      for (let i = 0; i < 2; i++) for (const a of arms) await call(a.client, input)()
      const t: Record<string, number[]> = Object.fromEntries(arms.map((a) => [a.name, []]))
      for (let i = 0; i < n; i++) for (const a of rotated(i)) t[a.name]!.push(await call(a.client, input)())
      const mib = round(input.length / 1024 / 1024, 2)
      rows.push({
        case: `R-P4 payload ${items} resources (${mib} MiB): fnr serve vs Porch's runner (cat)`,
        p50: round(percentile(t.fnr!, 50)),
        p95: round(percentile(t.fnr!, 95)),
        baselineP50: round(percentile(t.porch!, 50)),
        baselineP95: round(percentile(t.porch!, 95)),
        ratio: round(percentile(t.fnr!, 50) / percentile(t.porch!, 50)),
        unit: 'ms',
        note: `${n} calls each${t['fnr-before'] ? `; fnr before: p50 ${round(percentile(t['fnr-before'], 50))} ms` : ''}`,
      })
      raw[`r-p4-${items}`] = t
    }

    // R-P5: head-of-line, small calls while 8 x 5 MiB calls run; two rounds, arms alternating.
    if (holCalls > 0) {
      const hol: Record<string, number[]> = Object.fromEntries(arms.map((a) => [a.name, []]))
      const bigs: Record<string, number> = Object.fromEntries(arms.map((a) => [a.name, 0]))
      const address: Record<string, string> = {fnr: `127.0.0.1:${fx.serve.port}`, porch: `127.0.0.1:${porch.port}`, ...(before ? {'fnr-before': `127.0.0.1:${before.port}`} : {})}
      for (let r = 0; r < 2; r++) {
        for (const a of rotated(r)) {
          const res = await smallWhileBig(address[a.name]!, image, Math.ceil(holCalls / 2))
          hol[a.name]!.push(...res.latencies)
          bigs[a.name]! += res.bigCalls
        }
      }
      const pct = (n: string, p: number): number => round(percentile(hol[n]!, p))
      rows.push({
        case: `R-P5 head-of-line: a small call while ${BIG_WORKERS} x 5 MiB calls run, fnr serve vs Porch's runner (cat)`,
        p50: pct('fnr', 50),
        p95: pct('fnr', 99),
        baselineP50: pct('porch', 50),
        baselineP95: pct('porch', 99),
        ratio: round(pct('fnr', 50) / pct('porch', 50)),
        unit: 'ms',
        note: `the p95 columns hold p99; p99 ratio ${round(pct('fnr', 99) / pct('porch', 99))}; ${hol.fnr!.length} small calls each; big calls done meanwhile: fnr ${bigs.fnr}, Porch ${bigs.porch}; ${env}${hol['fnr-before'] ? `; fnr before: p50 ${pct('fnr-before', 50)} ms, p99 ${pct('fnr-before', 99)} ms` : ''}`,
      })
      raw['r-p5'] = {latencies: hol, bigCalls: bigs}
    }
  } finally {
    raw.loadEnd = loadAverage()
    competitor?.stop()
    porchClient.close()
    beforeClient?.close()
    await porch.stop()
    await before?.stop()
    await fx.close()
  }
  return {rows, raw}
}
