import {expect} from 'chai'

import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, ANNOTATION_TTL, LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER, LABEL_POD} from '../../src/lib/pods/model/naming.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {gateStarts, listPods, listServices, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until, type RuntimeHandle} from '../support/pods/index.js'

/** A pod object as another runner (or Porch) would have left it; runs as a no-process 'skip' pod. */
function strayPod(name: string, labels: Record<string, string>, annotations: Record<string, string> = {}, img = WRAPPER_IMAGE): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name, labels, annotations},
    spec: {restartPolicy: 'Never', containers: [{name: 'function', image: img, command: ['/wrapper-server-tools/wrapper-server']}]},
  }
}

const ours = (name: string, owner: string): Record<string, string> => ({[LABEL_MANAGED_BY]: 'fnr', [LABEL_FN_IMAGE]: name, [LABEL_OWNER]: owner})


describe('pod runtime: garbage collection (end to end)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined
  let ns: string

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  it('deletes a pod and its Service once idle past the TTL, and drops it from the cache', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, ttlMs: 800})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(await listPods(pb, ns)).to.have.length(1)
    expect(await listServices(pb, ns)).to.have.length(1)
    await until(async () => {
      await h!.runtime.gc.runOnce()
      return (await listPods(pb, ns, {includeDeleting: true})).length === 0 && (await listServices(pb, ns)).length === 0
    }, 'the expired pod and Service deleted')
    expect(h.runtime.cache.snapshot()).to.deep.equal([])
    // the next call starts a new pod
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(await listPods(pb, ns)).to.have.length(1)
  })

  it('never collects a pod with a call in flight, however old its last use', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, ttlMs: 300})
    const inFlight = h.evaluator.evaluate({image: image('gate'), resourceList: RL})
    await until(async () => (await gateStarts(pb)) === 1, 'the call running')
    const [name] = await podNames(pb, ns)
    await new Promise((r) => setTimeout(r, 800))
    for (let i = 0; i < 3; i++) await h.runtime.gc.runOnce()
    expect(await podNames(pb, ns)).to.deep.equal([name])
    expect(h.runtime.cache.snapshot()[0]!.load).to.equal(1)
    await pb.openGate()
    await inFlight
    await until(async () => {
      await h!.runtime.gc.runOnce()
      return (await listPods(pb, ns, {includeDeleting: true})).length === 0
    }, 'collected once idle')
  })

  it('runs by itself every --scan-interval', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, ttlMs: 300, scanIntervalMs: 200})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await until(async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0, 'the loop collected the pod')
    expect(h.runtime.gc.runs).to.be.greaterThan(0)
  })

  it('deletes its own orphans, failed fnr pods, abandoned pods of other runners and orphan Services; never pods or Services that are not fnr\'s', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, foreignGraceMs: 60_000})
    const pods = `/api/v1/namespaces/${ns}/pods`
    const services = `/api/v1/namespaces/${ns}/services`
    const old = new Date(Date.now() - 3 * 3600_000).toISOString()
    const now = new Date().toISOString()
    await pb.admin.create(pods, strayPod('own-orphan', ours('own-orphan', 'runner-a'), {[ANNOTATION_IMAGE]: image('cat')}))
    await pb.admin.create(pods, strayPod('other-fresh', ours('other-fresh', 'runner-b'), {[ANNOTATION_LAST_USED]: now, [ANNOTATION_TTL]: '1800'}))
    await pb.admin.create(pods, strayPod('other-abandoned', ours('other-abandoned', 'runner-b'), {[ANNOTATION_LAST_USED]: old, [ANNOTATION_TTL]: '60'}))
    await pb.admin.create(pods, strayPod('other-failed', ours('other-failed', 'runner-b'), {[ANNOTATION_LAST_USED]: now, [ANNOTATION_TTL]: '1800'}, image('crash')))
    await pb.admin.create(pods, strayPod('porch-pod', {[LABEL_FN_IMAGE]: 'porch-pod'}))
    await pb.admin.create(pods, strayPod('unrelated', {app: 'web'}))
    await pb.admin.create(services, {apiVersion: 'v1', kind: 'Service', metadata: {name: 'orphan-svc', labels: {[LABEL_MANAGED_BY]: 'fnr', [LABEL_POD]: 'gone-pod'}}, spec: {ports: [{port: 9446}], selector: {[LABEL_FN_IMAGE]: 'gone-pod'}}})
    await pb.admin.create(services, {apiVersion: 'v1', kind: 'Service', metadata: {name: 'porch-svc'}, spec: {ports: [{port: 9446}], selector: {[LABEL_FN_IMAGE]: 'gone-pod'}}})
    // the node runs the crash image's wrapper, which exits 3: with restartPolicy Never the pod fails
    await until(async () => (await listPods(pb, ns)).find((p) => p.metadata!.name === 'other-failed')?.status?.phase === 'Failed', 'the failed pod failed')
    await h.runtime.gc.runOnce()
    await until(async () => (await podNames(pb, ns)).join() === 'other-fresh,porch-pod,unrelated', `only the right pods left (${await podNames(pb, ns)})`)
    await until(async () => (await listServices(pb, ns)).map((s) => s.metadata!.name).join() === 'porch-svc', 'only the foreign Service left')
  })
})
