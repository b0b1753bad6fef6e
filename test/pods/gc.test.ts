import {expect} from 'chai'

import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, ANNOTATION_TTL, LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER, LABEL_POD} from '../../src/lib/pods/model/naming.js'
import {RL, WRAPPER_IMAGE, image, podNames, startRuntime, startedCalls, storedPods, storedServices, until, usePodBed, type PodBed, type RuntimeHandle} from '../support/pods/index.js'

/** A pod object as another runner (or Porch) would have left it; runs as a no-process 'skip' pod. */
function strayPod(name: string, labels: Record<string, string>, annotations: Record<string, string> = {}, img = WRAPPER_IMAGE): object {
  return {
    metadata: {name, labels, annotations},
    spec: {restartPolicy: 'Never', containers: [{name: 'function', image: img, command: ['/wrapper-server-tools/wrapper-server']}]},
  }
}

const ours = (name: string, owner: string): Record<string, string> => ({[LABEL_MANAGED_BY]: 'fnr', [LABEL_FN_IMAGE]: name, [LABEL_OWNER]: owner})

describe('pod runtime: garbage collection (end to end)', function () {
  this.timeout(120_000)
  let pb: PodBed
  let h: RuntimeHandle | undefined
  let ns: string

  usePodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  it('deletes a pod and its Service once idle past the TTL, and drops it from the cache', async () => {
    h = await startRuntime(pb, {namespace: ns, ttlMs: 800})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(storedPods(pb, ns)).to.have.length(1)
    expect(storedServices(pb, ns)).to.have.length(1)
    await until(async () => {
      await h!.runtime.gc.runOnce()
      return storedPods(pb, ns, {includeDeleting: true}).length === 0 && storedServices(pb, ns).length === 0
    }, 'the expired pod and Service deleted')
    expect(h.runtime.cache.snapshot()).to.deep.equal([])
    // the next call starts a new pod
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(storedPods(pb, ns)).to.have.length(1)
  })

  it('never collects a pod with a call in flight, however old its last use', async () => {
    h = await startRuntime(pb, {namespace: ns, ttlMs: 300})
    const inFlight = h.evaluator.evaluate({image: image('gate'), resourceList: RL})
    await until(async () => (await startedCalls(pb)) === 1, 'the call running')
    const [name] = podNames(pb, ns)
    await new Promise((r) => setTimeout(r, 800))
    for (let i = 0; i < 3; i++) await h.runtime.gc.runOnce()
    expect(podNames(pb, ns)).to.deep.equal([name])
    expect(h.runtime.cache.snapshot()[0]!.load).to.equal(1)
    await pb.openGate()
    await inFlight
    await until(async () => {
      await h!.runtime.gc.runOnce()
      return storedPods(pb, ns, {includeDeleting: true}).length === 0
    }, 'collected once idle')
  })

  it('runs by itself every --scan-interval', async () => {
    h = await startRuntime(pb, {namespace: ns, ttlMs: 300, scanIntervalMs: 200})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await until(() => storedPods(pb, ns, {includeDeleting: true}).length === 0, 'the loop collected the pod')
    expect(h.runtime.gc.runs).to.be.greaterThan(0)
  })

  it('deletes its own orphans, failed fnr pods, abandoned pods of other runners and orphan Services; never pods or Services that are not fnr\'s', async () => {
    h = await startRuntime(pb, {namespace: ns, foreignGraceMs: 60_000})
    const reg = pb.bed.api.registry
    const old = new Date(Date.now() - 3 * 3600_000).toISOString()
    const now = new Date().toISOString()
    reg.create('pods', ns, strayPod('own-orphan', ours('own-orphan', 'runner-a'), {[ANNOTATION_IMAGE]: image('cat')}))
    reg.create('pods', ns, strayPod('other-fresh', ours('other-fresh', 'runner-b'), {[ANNOTATION_LAST_USED]: now, [ANNOTATION_TTL]: '1800'}))
    reg.create('pods', ns, strayPod('other-abandoned', ours('other-abandoned', 'runner-b'), {[ANNOTATION_LAST_USED]: old, [ANNOTATION_TTL]: '60'}))
    reg.create('pods', ns, strayPod('other-failed', ours('other-failed', 'runner-b'), {[ANNOTATION_LAST_USED]: now, [ANNOTATION_TTL]: '1800'}, image('crash')))
    reg.create('pods', ns, strayPod('porch-pod', {[LABEL_FN_IMAGE]: 'porch-pod'}))
    reg.create('pods', ns, strayPod('unrelated', {app: 'web'}))
    reg.create('services', ns, {metadata: {name: 'orphan-svc', labels: {[LABEL_MANAGED_BY]: 'fnr', [LABEL_POD]: 'gone-pod'}}, spec: {ports: [{port: 9446}], selector: {[LABEL_FN_IMAGE]: 'gone-pod'}}})
    reg.create('services', ns, {metadata: {name: 'porch-svc'}, spec: {ports: [{port: 9446}], selector: {[LABEL_FN_IMAGE]: 'gone-pod'}}})
    await until(() => storedPods(pb, ns).find((p) => p.metadata!.name === 'other-failed')?.status?.phase === 'Failed', 'the failed pod failed')
    await h.runtime.gc.runOnce()
    await until(() => podNames(pb, ns).join() === 'other-fresh,porch-pod,unrelated', `only the right pods left (${podNames(pb, ns)})`)
    await until(() => storedServices(pb, ns).map((s) => s.metadata!.name).join() === 'porch-svc', 'only the foreign Service left')
  })
})
