import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {NO_METRICS} from '../../src/lib/telemetry/metrics.js'
import {leaseNameFor, microTime} from '../../src/lib/pods/cluster/lease.js'
import {functionPodAnnotations, functionPodLabels} from '../../src/lib/pods/model/naming.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {closeGate, gateStarts, startClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until} from '../support/pods/index.js'
import {freePort} from '../support/registry/tools.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {scrape} from './prom-text.js'

describe('fnr serve --metrics-port with the pod runtime (on the real control plane)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let pb: ClusterPodBed
  let running: RunningServer | undefined
  let client: EvaluatorClient | undefined
  let metricsPort: number
  let ns: string

  before(async () => {
    pb = await startClusterPodBed()
    const dir = await temp.make()
    const fns = await makeFunctionsDir(dir)
    const cacheConfigPath = path.join(dir, 'pod-cache-config.yaml')
    // stderr's pods expire after 1 s idle; the others keep the default TTL.
    await writeFile(cacheConfigPath, `- name: ${image('stderr')}\n  timeToLive: 1s\n`)
    metricsPort = await freePort()
    const base = serveOptions({...fns, disableRuntimes: 'exec'})
    running = await startInProcess({
      ...base,
      metricsPort,
      pod: {
        ...base.pod,
        namespace: (ns = await pb.namespace()),
        cacheConfigPath,
        scanIntervalMs: 200,
        wrapperServerImage: WRAPPER_IMAGE,
        podAddress: 'pod-ip',
        metadata: pb.metadata,
        kubeconfig: pb.kubeconfigPath,
        owner: 'metrics-test',
        leaseDurationMs: 30_000,
      },
    })
    client = new EvaluatorClient(`127.0.0.1:${running.port}`)
  })
  after(async () => {
    client?.close()
    await running?.stop()
    await pb?.stop()
    await temp.cleanup()
  })

  it('counts pod cache misses and hits, pods by state, and pod call latency', async () => {
    const before = await scrape(metricsPort)
    const cat = image('cat')
    await client!.evaluateRaw(cat, RL, {deadline: Date.now() + 60_000})
    await client!.evaluateRaw(cat, RL, {deadline: Date.now() + 60_000})
    const crash = await client!.evaluateRaw(image('crash'), RL, {deadline: Date.now() + 60_000}).catch((e: grpc.ServiceError) => e)
    expect((crash as grpc.ServiceError).code).to.equal(grpc.status.FAILED_PRECONDITION)
    const after = await scrape(metricsPort)
    const delta = (name: string, labels: Record<string, string>): number => after.value(name, labels) - before.value(name, labels)
    expect(delta('fnr_pod_cache_lookups_total', {image: cat, result: 'miss'})).to.equal(1)
    expect(delta('fnr_pod_cache_lookups_total', {image: cat, result: 'hit'})).to.equal(1)
    expect(delta('fnr_evaluations_total', {runtime: 'pod', image: cat, code: 'OK'})).to.equal(2)
    expect(delta('fnr_evaluation_duration_seconds_count', {runtime: 'pod', image: cat})).to.equal(2)
    // crash's pod never became ready: no runtime served the image, so it is no label of its own
    expect(delta('fnr_evaluations_total', {runtime: 'pod', image: 'unknown', code: 'FAILED_PRECONDITION'})).to.equal(1)
    expect(after.labelValues('fnr_evaluations_total', 'image')).to.not.include(image('crash'))
    expect(after.value('fnr_pods', {state: 'ready'})).to.equal(1)
    expect(after.value('fnr_pods', {state: 'starting'})).to.equal(0)
    expect(after.types.get('fnr_pods')).to.equal('gauge')
  })

  it('shows the waitlist depth and calls in flight while calls wait on a pod', async () => {
    await closeGate(pb)
    const gate = image('gate')
    // maxWaitlistLength 2 and one pod per image: both calls go to one pod.
    const calls = [0, 1].map(() => client!.evaluateRaw(gate, RL, {deadline: Date.now() + 60_000}))
    await until(async () => (await gateStarts(pb)) === 2, 'both gate calls running')
    const during = await scrape(metricsPort)
    expect(during.value('fnr_pod_waitlist_depth', {image: gate})).to.equal(2)
    expect(during.value('fnr_evaluations_in_flight')).to.equal(2)
    expect(during.value('fnr_pod_cache_lookups_total', {image: gate})).to.equal(2)
    await pb.openGate()
    await Promise.all(calls)
    const after = await scrape(metricsPort)
    expect(after.value('fnr_pod_waitlist_depth', {image: gate})).to.equal(0)
    expect(after.value('fnr_evaluations_in_flight')).to.equal(0)
  })

  it('counts garbage-collection deletions by reason', async () => {
    const before = await scrape(metricsPort)
    await client!.evaluateRaw(image('stderr'), RL, {deadline: Date.now() + 60_000})
    const after = await until(async () => {
      const m = await scrape(metricsPort)
      return m.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'}) > before.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'}) && m
    }, 'the idle stderr pod collected')
    expect(after.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'}) - before.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'ttl'})).to.equal(1)
    expect(after.value('fnr_pod_gc_runs_total')).to.be.greaterThan(before.value('fnr_pod_gc_runs_total'))
    expect(after.value('fnr_pods', {state: 'ready'})).to.equal(2) // cat and gate remain
    expect(after.value('fnr_pod_gc_deletions_total', {reason: 'other'})).to.equal(0)
  })

  it('counts the deletion of a gone replica\'s pod it took over as replica-gone, and only deletions that happened', async () => {
    const before = await scrape(metricsPort)
    // A replica "ghost" that released its Lease, and a pod of it made from an older template
    // (so not usable here): the next GC pass takes it over by deleting it.
    const name = 'ghost-pod-abcde'
    // As a replica does: its Lease, held, before its pod; released (a graceful stop) after. Every GC pass that
    // sees the Lease released lists the pod too (pods are listed before Leases). Made the other way round, a pass
    // could list the pods before the pod's create and the Leases after the Lease's, and delete the Lease of a
    // released replica with no pods: the pod was then a lone runner's, left alone (this test timed out in CI).
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${leaseNameFor('ghost')}`
    await pb.admin.create(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {name: leaseNameFor('ghost'), labels: {'app.kubernetes.io/managed-by': 'fnr', 'app.kubernetes.io/component': 'replica-lease', 'fnr.dev/owner': 'ghost'}},
      spec: {holderIdentity: 'ghost', leaseDurationSeconds: 600, renewTime: microTime(Date.now())},
    })
    await pb.admin.create(`/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        labels: functionPodLabels(name, image('cat'), 'ghost'),
        annotations: {...functionPodAnnotations({templateVersion: 'inline-000000000000', image: image('cat'), owner: 'ghost', now: Date.now(), ttlMs: 60_000, creationId: 'x'})},
      },
      // The bed's wrapper image is 'skip' on the node: reported running without a process, so the pod's deletion
      // waits on nothing (an image the node cannot pull went to runc, whose pull retries made it slow under load).
      spec: {containers: [{name: 'function', image: WRAPPER_IMAGE}]},
    })
    // A pod of an older template (so not usable here): the next GC pass after the release takes it over by deleting it.
    await pb.admin.patch(leasePath, {spec: {holderIdentity: ''}})
    const after = await until(async () => {
      const m = await scrape(metricsPort)
      return m.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'replica-gone'}) > before.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'replica-gone'}) && m
    }, 'the ghost replica\'s pod deleted')
    expect(after.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'replica-gone'}) - before.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'replica-gone'})).to.equal(1)
    await until(async () => (await pb.admin.raw('GET', `/api/v1/namespaces/${ns}/pods/${name}`)).code === 404, 'the ghost pod gone')
    // Its Lease goes once it has no pods left; the TTL deletion above is still counted once.
    await until(async () => (await pb.admin.raw('GET', leasePath)).code === 404, 'the ghost lease gone')
    const last = await scrape(metricsPort)
    expect(last.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'replica-gone'})).to.equal(after.value('fnr_pod_gc_deletions_total', {kind: 'pod', reason: 'replica-gone'}))
    expect(last.value('fnr_pod_gc_deletions_total', {reason: 'other'})).to.equal(0)
  })

  it('keeps its metrics to itself: another server in the process has none, and the endpoint closes when it stops', async () => {
    expect(running!.telemetry.metrics.enabled).to.equal(true)
    const other = await startInProcess(serveOptions({...(await makeFunctionsDir(await temp.make())), disableRuntimes: 'pod'}))
    try {
      expect(other.telemetry.metrics).to.equal(NO_METRICS)
      expect(other.server.telemetry.metrics).to.equal(NO_METRICS)
    } finally {
      await other.stop()
    }
    client!.close()
    client = undefined
    await running!.stop()
    running = undefined
    const closed = await scrape(metricsPort).catch((e: unknown) => e)
    expect(closed).to.be.instanceOf(Error)
  })
})
