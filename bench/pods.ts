/**
 * Pod runtime benchmarks (issue 5), end to end through the Kubernetes test bed (test API server +
 * local kubelet running the real wrapper server, `node bin/run.js wrapper-server`, per pod):
 *   P-warm   warm-call latency of a 1 KiB ResourceList through `fnr serve` → pod, versus calling
 *            the pod's wrapper directly, interleaved in one run. Target: ≤ 1 ms added at p50.
 *   P-cold   first call for an image that has no pod: total time, split into waiting for the pod
 *            (create → Ready, the kubelet's part) and fnr's own overhead (the rest: metadata,
 *            API calls, connect, the call).
 *   P-burst  100 concurrent first calls for one image with a per-image limit of 3 pods
 *            (--pod-cache-config): pods and Services created (must equal the limit).
 *
 * Standalone: `node --import tsx bench/pods.ts` (needs dist/ built; FNR_BENCH_ITERATIONS, default
 * 300) prints a table and writes bench/results/pods.json.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {EvaluatorClient} from '../src/lib/grpc/client.js'
import type {RunningServer} from '../src/lib/serve.js'
import {WRAPPER_IMAGE, createdCount, image, startPodBed, type PodBed} from '../test/support/pods/index.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../test/support/serve.js'
import {SCRIPTS, TempDirs} from '../test/support/tmp.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const ITERATIONS = Number(process.env.FNR_BENCH_ITERATIONS ?? 300)

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

const r2 = (n: number): number => Math.round(n * 100) / 100

function resourceList(bytes: number): Buffer {
  const head = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cfg\n  data:\n    k: "'
  return Buffer.from(`${head}${'x'.repeat(Math.max(0, bytes - head.length - 2))}"\n`)
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now()
  await fn()
  return performance.now() - t0
}

interface Row {
  name: string
  p50: number
  p90: number
  p99: number
  n: number
  note?: string
}

function row(name: string, values: number[], note?: string): Row {
  return {name, p50: r2(percentile(values, 50)), p90: r2(percentile(values, 90)), p99: r2(percentile(values, 99)), n: values.length, note}
}

async function startServe(pb: PodBed, ns: string, dir: string, cacheConfigPath = ''): Promise<RunningServer> {
  const fns = await makeFunctionsDir(dir)
  const base = serveOptions({...fns, disableRuntimes: ''})
  return startInProcess({
    ...base,
    pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeConfig: pb.bed.kubeConfig, owner: 'bench', cacheConfigPath},
  })
}

export async function benchPods(): Promise<{rows: Row[]; burst: {calls: number; limit: number; pods: number; services: number; ms: number}}> {
  const temp = new TempDirs()
  const pb = await startPodBed()
  const rows: Row[] = []
  try {
    // P-warm
    const ns = pb.namespace()
    const running = await startServe(pb, ns, await temp.make())
    const viaServe = new EvaluatorClient(`127.0.0.1:${running.port}`)
    const input = resourceList(1024)
    try {
      for (let i = 0; i < 20; i++) await viaServe.evaluate(image('cat'), input)
      const podAddress = (running.server as unknown as {options: {evaluator: {evaluators: Array<{runtime?: {cache: {snapshot(): Array<{address?: string}>}}}>}}}).options.evaluator.evaluators
        .find((e) => e.runtime)!.runtime!.cache.snapshot()[0]!.address!
      const direct = new EvaluatorClient(podAddress)
      for (let i = 0; i < 20; i++) await direct.evaluate(image('cat'), input)
      const serveTimes: number[] = []
      const directTimes: number[] = []
      for (let i = 0; i < ITERATIONS; i++) {
        serveTimes.push(await timed(() => viaServe.evaluate(image('cat'), input)))
        directTimes.push(await timed(() => direct.evaluate(image('cat'), input)))
      }
      direct.close()
      rows.push(row('P-warm: fnr serve → pod (1 KiB)', serveTimes))
      rows.push(row('P-warm: wrapper directly (1 KiB)', directTimes))
      const added = serveTimes.map((t, i) => t - directTimes[i]!)
      rows.push(row('P-warm: added by fnr serve (paired)', added, 'target ≤ 1 ms at p50'))

      // P-cold
      const total: number[] = []
      const waiting: number[] = []
      const overhead: number[] = []
      const cold = Math.max(3, Math.min(10, Math.round(ITERATIONS / 30)))
      for (let i = 0; i < cold; i++) {
        const img = await pb.addFunction(`cold${i}`, SCRIPTS.cat)
        const t = await timed(() => viaServe.evaluate(img, input, {deadline: Date.now() + 60_000}))
        const evaluators = (running.server as unknown as {options: {evaluator: {evaluators: Array<{runtime?: {cache: {snapshot(): Array<{image: string; timings: {readyMs?: number}}>}}}>}}}).options.evaluator.evaluators
        const slot = evaluators.find((e) => e.runtime)!.runtime!.cache.snapshot().find((s) => s.image === img)!
        total.push(t)
        waiting.push(slot.timings.readyMs ?? 0)
        overhead.push(t - (slot.timings.readyMs ?? 0))
      }
      rows.push(row('P-cold: first call, total', total))
      rows.push(row('P-cold: waiting for the pod (create → Ready)', waiting, 'the kubelet: a node process starting the wrapper'))
      rows.push(row('P-cold: fnr overhead (total − waiting)', overhead, 'metadata, API calls, connect, the call'))
    } finally {
      viaServe.close()
      await running.stop()
    }

    // P-burst
    const burstNs = pb.namespace()
    const dir = await temp.make()
    const cfg = path.join(dir, 'pod-cache-config.yaml')
    const img = await pb.addFunction('burst', SCRIPTS.cat)
    await writeFile(cfg, `- name: ${img}\n  maxWaitlistLength: 1\n  maxParallelPodsPerFunction: 3\n`)
    const burstServe = await startServe(pb, burstNs, dir, cfg)
    const client = new EvaluatorClient(`127.0.0.1:${burstServe.port}`)
    let burst
    try {
      const t0 = performance.now()
      await Promise.all(Array.from({length: 100}, () => client.evaluate(img, input, {deadline: Date.now() + 60_000})))
      const ms = performance.now() - t0
      burst = {calls: 100, limit: 3, pods: createdCount(pb, burstNs, 'pods'), services: createdCount(pb, burstNs, 'services'), ms: r2(ms)}
    } finally {
      client.close()
      await burstServe.stop()
    }
    return {rows, burst}
  } finally {
    await pb.stop()
    await temp.cleanup()
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const {rows, burst} = await benchPods()
  const width = Math.max(...rows.map((r) => r.name.length))
  console.log(`${'benchmark'.padEnd(width)}  ${'p50 ms'.padStart(8)}  ${'p90 ms'.padStart(8)}  ${'p99 ms'.padStart(8)}  ${'n'.padStart(5)}  note`)
  for (const r of rows) console.log(`${r.name.padEnd(width)}  ${String(r.p50).padStart(8)}  ${String(r.p90).padStart(8)}  ${String(r.p99).padStart(8)}  ${String(r.n).padStart(5)}  ${r.note ?? ''}`)
  console.log(`P-burst: ${burst.calls} concurrent first calls, limit ${burst.limit}: ${burst.pods} pods and ${burst.services} Services created, all answered in ${burst.ms} ms`)
  await mkdir(path.join(ROOT, 'bench', 'results'), {recursive: true})
  await writeFile(path.join(ROOT, 'bench', 'results', 'pods.json'), `${JSON.stringify({date: new Date().toISOString(), node: process.version, iterations: ITERATIONS, rows, burst}, null, 2)}\n`)
}
