/**
 * PS: pre-started functions (docs/process.md "Pre-started functions"), one call at a time. Three
 * arms on the same config and functions folder, called by the same Node gRPC client, interleaved
 * (each round starts with another arm): `fnr serve` with the pool on (--prestart-functions=1, the
 * default), `fnr serve` with it off (--prestart-functions=0), and Porch's runner v1.5.8 (built by
 * scripts/catalog-peers.mjs). The function is a real catalog Go binary (set-labels), so the start
 * each call pays is fork + exec + Go runtime start. Per arm: p50 and p99 latency, and CPU per call
 * (the runner, its spawner and its function processes, from /proc). The load average at start and
 * end is in the results.
 *
 *   node --import tsx bench/prestart.ts            (FNR_BENCH_CALLS=N, default 300 per arm)
 *   FNR_BENCH_COMPETITOR=N                          N busy processes beside it (porch-runner.ts)
 */
import path from 'node:path'

import {buildCatalogFunctions, buildPorchRunner} from '../scripts/catalog-peers.mjs'
import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {startExecServe, startServe, type ServeHandle} from './fixture.js'
import {envCount, loadAverage, percentile, procTreeCpuMs, round, saveResults, sleep} from './lib.js'
import {startCompetitors, startPorch} from './porch-runner.js'

const INPUT = Buffer.from(
  'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    k: v\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fc\n  data:\n    team: blue\n',
)

interface Arm {
  name: 'fnr-prestart' | 'fnr-no-prestart' | 'porch'
  client: EvaluatorClient
  pid: number
}

async function main(): Promise<void> {
  const calls = envCount('FNR_BENCH_CALLS', 300, 60)
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 0)
  const fnDir = buildCatalogFunctions()
  const {server} = buildPorchRunner()
  const on = await startExecServe([{name: 'set-labels', source: path.join(fnDir, 'set-labels')}], ['--prestart-functions=1'])
  const config = path.join(path.dirname(on.fnDir), 'config.yaml')
  let off: ServeHandle | undefined
  let porch: Awaited<ReturnType<typeof startPorch>> | undefined
  const competitor = competitors > 0 ? startCompetitors(competitors) : undefined
  try {
    off = await startServe([`--config=${config}`, `--functions=${on.fnDir}`, '--disable-runtimes=pod', '--prestart-functions=0'])
    porch = await startPorch(server, on)
    const arms: Arm[] = [
      {name: 'fnr-prestart', client: on.client, pid: on.serve.pid},
      {name: 'fnr-no-prestart', client: new EvaluatorClient(`127.0.0.1:${off.port}`), pid: off.pid},
      {name: 'porch', client: new EvaluatorClient(`127.0.0.1:${porch.port}`), pid: porch.pid},
    ]
    if (competitor) await sleep(2000)
    const image = on.image('set-labels')
    const expected = (await arms[2]!.client.evaluateRaw(image, INPUT)).resourceList
    const call = async (a: Arm): Promise<number> => {
      const t0 = performance.now()
      const res = await a.client.evaluateRaw(image, INPUT)
      const ms = performance.now() - t0
      if (!res.resourceList.equals(expected)) throw new Error(`${a.name} answered different bytes`)
      return ms
    }
    for (let i = 0; i < 20; i++) for (const a of arms) await call(a)
    const loadStart = loadAverage()
    const latencies: Record<string, number[]> = Object.fromEntries(arms.map((a) => [a.name, []]))
    const cpu: Record<string, number> = Object.fromEntries(arms.map((a) => [a.name, 0]))
    for (let i = 0; i < calls; i++) {
      for (let k = 0; k < arms.length; k++) {
        const a = arms[(i + k) % arms.length]!
        const before = procTreeCpuMs(a.pid)
        latencies[a.name]!.push(await call(a))
        const after = procTreeCpuMs(a.pid)
        cpu[a.name]! += after.self + after.children - before.self - before.children
      }
    }
    const loadEnd = loadAverage()
    const result = Object.fromEntries(
      arms.map((a) => [a.name, {p50: round(percentile(latencies[a.name]!, 50)), p99: round(percentile(latencies[a.name]!, 99)), cpuMsPerCall: round(cpu[a.name]! / calls)}]),
    ) as Record<Arm['name'], {p50: number; p99: number; cpuMsPerCall: number}>
    const ratios = {
      prestartP50: round(result['fnr-prestart'].p50 / result.porch.p50),
      noPrestartP50: round(result['fnr-no-prestart'].p50 / result.porch.p50),
      prestartCpu: round(result['fnr-prestart'].cpuMsPerCall / result.porch.cpuMsPerCall),
      noPrestartCpu: round(result['fnr-no-prestart'].cpuMsPerCall / result.porch.cpuMsPerCall),
    }
    const data = {case: 'PS one call at a time, set-labels (catalog Go binary), small ResourceList', calls, competitors, loadStart, loadEnd, result, ratios, date: new Date().toISOString()}
    console.log(JSON.stringify(data, null, 2))
    console.log(await saveResults(competitors ? 'prestart-competitor' : 'prestart', data))
    for (const a of arms.slice(1)) a.client.close()
  } finally {
    competitor?.stop()
    await porch?.stop()
    await off?.stop()
    await on.close()
  }
}

await main()
