/**
 * P5: the pod runtime end to end on the real control plane (test/support/pods/cluster-bed.ts: kube-apiserver,
 * etcd, the controllers and the scheduler, and the tests' node, which runs the REAL wrapper server, `node bin/run.js
 * wrapper-server`, as each pod's process; fnr reaches kube-apiserver through the bed's proxy):
 *   warm   latency of a 1 KiB ResourceList through `fnr serve` → pod versus calling that pod's
 *          wrapper directly with the same client, interleaved. Target: ≤ 1 ms added at p50.
 *   cold   first call for an image that has no pod: total time, split into waiting for the pod
 *          (create → Ready: the kubelet starting a Node process) and fnr's own time (the rest:
 *          metadata, API calls, connect, the call).
 *   burst  100 concurrent first calls for one image with a per-image limit of 3 pods
 *          (--pod-cache-config): pods and Services created must equal the limit.
 * It also gives P6's idle RSS with both runtimes on: a `fnr serve` process with the exec runtime
 * and the pod runtime connected to kube-apiserver.
 *
 * The floor of the warm case is one more gRPC round trip through a server in the same process
 * (serve's server side; its client call to the pod replaces the direct one): measured alongside
 * as a call to an in-process bench/echo-server.ts (fnr's EvaluatorServer answering with the
 * request) with the same client. added − that is fnr's own pod-path work.
 *
 * `fnr serve` runs in the benchmark process (startInProcess: the bed's image metadata is an
 * in-process source), so for warm calls one event loop does the client's work, the server's and
 * the pod client's; the direct side does only the client's. Needs dist/ built (the pods run it).
 *
 * In the suite: `npm run bench -- --only=P5`. Standalone: `node --import tsx bench/pods.ts`
 * (FNR_BENCH_P5_ITERATIONS) prints the table and writes bench/results/pods.json.
 */
import path from 'node:path'
import {writeFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import {EvaluatorClient} from '../src/lib/grpc/client.js'
import type {RunningServer} from '../src/lib/serve.js'
import {stopSharedControlPlane} from '../test/support/cluster/shared.js'
import {createdThroughProxy, startClusterPodBed, type ClusterPodBed} from '../test/support/pods/cluster-bed.js'
import {WRAPPER_IMAGE, image} from '../test/support/pods/index.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../test/support/serve.js'
import {SCRIPTS, TempDirs} from '../test/support/tmp.js'
import {startEchoInProcess} from './echo-server.js'
import {startExecServe} from './fixture.js'
import {envCount, idleRssRows, median, percentile, printTable, round, saveResults, type Row} from './lib.js'

/** Burst size and the per-image pod limit the burst runs under. */
export const BURST_CALLS = 100
export const BURST_LIMIT = 3

function resourceList(bytes: number): Buffer {
  const head = 'apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cfg\n  data:\n    k: "'
  return Buffer.from(`${head}${'x'.repeat(Math.max(0, bytes - head.length - 2))}"\n`)
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now()
  await fn()
  return performance.now() - t0
}

interface PodSlotView {
  image: string
  address?: string
  timings: {readyMs?: number}
}

/** The pod cache of a running in-process serve: its pod evaluator's, found under the evaluator wrappers (multi, response cache). */
function podSlots(running: RunningServer): PodSlotView[] {
  type Node = {name?: string; options?: {cache?: {snapshot(): PodSlotView[]}; inner?: Node}; evaluators?: Node[]}
  const seen = new Set<Node>()
  const find = (n: Node | undefined): {snapshot(): PodSlotView[]} | undefined => {
    if (!n || seen.has(n)) return undefined
    seen.add(n)
    if (n.name === 'pod' && n.options?.cache) return n.options.cache
    for (const child of [...(n.evaluators ?? []), n.options?.inner]) {
      const c = find(child)
      if (c) return c
    }
    return undefined
  }
  const cache = find((running.server as unknown as {options: {evaluator: Node}}).options.evaluator)
  if (!cache) throw new Error('serve has no pod runtime')
  return cache.snapshot()
}

async function startServe(pb: ClusterPodBed, ns: string, dir: string, cacheConfigPath = ''): Promise<RunningServer> {
  const fns = await makeFunctionsDir(dir)
  const base = serveOptions({...fns, disableRuntimes: ''})
  return startInProcess({
    ...base,
    pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeconfig: pb.kubeconfigPath, owner: 'bench', cacheConfigPath},
  })
}

/**
 * Runs P5. `iterations` warm calls per side; `coldCalls` first calls (each on a new image).
 */
export async function benchPods(iterations: number, coldCalls: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const temp = new TempDirs()
  const pb = await startClusterPodBed()
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  try {
    // P6 with both runtimes: a fresh serve process, the pod runtime connected and idle.
    const previousImage = process.env.WRAPPER_SERVER_IMAGE
    process.env.WRAPPER_SERVER_IMAGE = WRAPPER_IMAGE
    const both = await startExecServe([{name: 'cat', source: '/bin/cat'}], [
      '--disable-runtimes=',
      `--kubeconfig=${pb.kubeconfigPath}`,
      `--pod-namespace=${await pb.namespace()}`,
      '--warm-up-pod-cache=false',
      '--pod-cache-config=',
    ]).finally(() => {
      if (previousImage === undefined) delete process.env.WRAPPER_SERVER_IMAGE
      else process.env.WRAPPER_SERVER_IMAGE = previousImage
    })
    try {
      const idle = await idleRssRows(both.serve.pid, 'both runtimes (exec + pod)', 'pod runtime connected to kube-apiserver, no pods yet')
      rows.push(...idle.rows)
      raw['p6-idle-both'] = idle.settled
      raw['p6-idle-both-just-started'] = idle.justStarted
    } finally {
      await both.close()
    }

    const running = await startServe(pb, await pb.namespace(), await temp.make())
    const viaServe = new EvaluatorClient(`127.0.0.1:${running.port}`)
    const input = resourceList(1024)
    try {
      // warm
      for (let i = 0; i < 20; i++) await viaServe.evaluate(image('cat'), input)
      const podAddress = podSlots(running)[0]!.address!
      const direct = new EvaluatorClient(podAddress)
      const echoServer = await startEchoInProcess()
      const echo = new EvaluatorClient(`127.0.0.1:${echoServer.port}`)
      const serveTimes: number[] = []
      const directTimes: number[] = []
      const echoTimes: number[] = []
      try {
        for (let i = 0; i < 20; i++) {
          await direct.evaluate(image('cat'), input)
          await echo.evaluate(image('cat'), input)
        }
        for (let i = 0; i < iterations; i++) {
          // Alternate which goes first, so neither always runs right after the other.
          if (i % 2 === 0) directTimes.push(await timed(() => direct.evaluate(image('cat'), input)))
          serveTimes.push(await timed(() => viaServe.evaluate(image('cat'), input)))
          if (i % 2 === 1) directTimes.push(await timed(() => direct.evaluate(image('cat'), input)))
          echoTimes.push(await timed(() => echo.evaluate(image('cat'), input)))
        }
      } finally {
        direct.close()
        echo.close()
        await echoServer.stop()
      }
      const p50 = round(median(serveTimes))
      const base = round(median(directTimes))
      const added = round(p50 - base)
      const paired = round(median(serveTimes.map((t, i) => t - directTimes[i]!)))
      rows.push({
        case: 'P5 warm call (1 KiB, cat): fnr serve → pod vs the wrapper directly',
        p50,
        p95: round(percentile(serveTimes, 95)),
        baselineP50: base,
        baselineP95: round(percentile(directTimes, 95)),
        added,
        unit: 'ms',
        target: '≤ 1 ms added at p50',
        met: added <= 1,
        note: `paired median ${paired} ms; ${iterations} calls each; serve in the benchmark process`,
      })
      const echoP50 = round(median(echoTimes))
      rows.push({
        case: 'P5 warm call floor: one more gRPC round trip, in-process echo server',
        p50: echoP50,
        p95: round(percentile(echoTimes, 95)),
        unit: 'ms',
        note: `fnr's own pod-path work = added − this = ${round(added - echoP50)} ms`,
      })
      raw['p5-warm'] = {serveTimes, directTimes, echoTimes}

      // cold
      const total: number[] = []
      const waiting: number[] = []
      for (let i = 0; i < coldCalls; i++) {
        const img = await pb.addFunction(`cold${i}`, SCRIPTS.cat)
        const t = await timed(() => viaServe.evaluate(img, input, {deadline: Date.now() + 120_000}))
        const slot = podSlots(running).find((s) => s.image === img)!
        total.push(t)
        waiting.push(slot.timings.readyMs ?? 0)
      }
      const own = total.map((t, i) => t - waiting[i]!)
      rows.push({
        case: 'P5 cold first call: fnr own time vs waiting for the pod',
        p50: round(median(own)),
        p95: round(percentile(own, 95)),
        baselineP50: round(median(waiting)),
        baselineP95: round(percentile(waiting, 95)),
        unit: 'ms',
        note: `total p50 ${round(median(total))} ms; own = total − pod create→Ready (metadata, API calls, connect, the call); the wait is the kubelet starting a Node process; ${coldCalls} first calls`,
      })
      raw['p5-cold'] = {total, waiting}
    } finally {
      viaServe.close()
      await running.stop()
    }

    // burst
    const burstNs = await pb.namespace()
    const dir = await temp.make()
    const cfg = path.join(dir, 'pod-cache-config.yaml')
    const img = await pb.addFunction('burst', SCRIPTS.cat)
    await writeFile(cfg, `- name: ${img}\n  maxWaitlistLength: 1\n  maxParallelPodsPerFunction: ${BURST_LIMIT}\n`)
    const burstServe = await startServe(pb, burstNs, dir, cfg)
    const client = new EvaluatorClient(`127.0.0.1:${burstServe.port}`)
    try {
      const t0 = performance.now()
      const results = await Promise.allSettled(Array.from({length: BURST_CALLS}, () => client.evaluate(img, input, {deadline: Date.now() + 120_000})))
      const ms = round(performance.now() - t0)
      const failed = results.filter((r) => r.status === 'rejected').length
      const pods = createdThroughProxy(pb, burstNs, 'pods')
      const services = createdThroughProxy(pb, burstNs, 'services')
      rows.push({
        case: `P5 burst of ${BURST_CALLS} first calls (limit ${BURST_LIMIT} pods): pods created`,
        p50: pods,
        baselineP50: BURST_LIMIT,
        unit: 'pods',
        target: `exactly ${BURST_LIMIT}`,
        met: pods === BURST_LIMIT && services === BURST_LIMIT && failed === 0,
        note: `${services} Services; ${BURST_CALLS - failed} of ${BURST_CALLS} calls answered, all within ${ms} ms`,
      })
      raw['p5-burst'] = {calls: BURST_CALLS, limit: BURST_LIMIT, pods, services, failed, ms}
    } finally {
      client.close()
      await burstServe.stop()
    }
    return {rows, raw}
  } finally {
    await pb.stop()
    await stopSharedControlPlane()
    await temp.cleanup()
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const iterations = envCount('FNR_BENCH_P5_ITERATIONS', 300, 30)
  const {rows, raw} = await benchPods(iterations, Math.max(3, Math.min(10, Math.round(iterations / 30))))
  process.stdout.write(`${printTable(rows)}\n`)
  await saveResults('pods', {date: new Date().toISOString(), node: process.version, iterations, rows, raw})
}
