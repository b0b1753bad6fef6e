import {expect} from 'chai'

import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {createdThroughProxy, gateStarts, listPods, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until, closeAll, type RuntimeHandle} from '../support/pods/index.js'


describe('pod runtime: startup adoption (runner restart with pods present)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  const handles: RuntimeHandle[] = []
  let ns: string

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    setup: async () => {
      pb.kubelet.setImage('fnr.test/wrapper-server:v2', 'skip')
    },
    namespace: (name) => (ns = name),
    cleanup: () => closeAll(handles),
  })

  async function start(overrides: Parameters<typeof startClusterRuntime>[1] = {}): Promise<RuntimeHandle> {
    const h = await startClusterRuntime(pb, {namespace: ns, ...overrides})
    handles.push(h)
    return h
  }

  const podPath = (name: string): string => `/api/v1/namespaces/${ns}/pods/${name}`
  const servicePath = (name: string): string => `/api/v1/namespaces/${ns}/services/${name}`

  it('a restarted runner adopts ready pods of the current template and takes ownership (upstream: pod exists but is not cached)', async () => {
    const a = await start({owner: 'runner-a'})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await a.evaluator.evaluate({image: image('stderr'), resourceList: RL})
    const before = await podNames(pb, ns)
    await a.close()
    const created = createdThroughProxy(pb, ns, 'pods')
    const b = await start({owner: 'runner-b'})
    expect(b.runtime.cache.snapshot().map((s) => s.name).sort()).to.deep.equal(before)
    await b.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await b.evaluator.evaluate({image: image('stderr'), resourceList: RL})
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
    expect(await podNames(pb, ns)).to.deep.equal(before)
    await until(async () => (await listPods(pb, ns)).every((p) => p.metadata!.labels![LABEL_OWNER] === 'runner-b'), 'ownership taken')
  })

  it('deletes pods of another template version, pods over the image\'s limit, and pods it cannot use', async () => {
    const a = await start({owner: 'runner-a', maxWaitlistLength: 1, maxParallelPods: 2})
    // two pods of one image
    const calls = [1, 2].map(() => a.evaluator.evaluate({image: image('gate'), resourceList: RL}))
    await until(async () => (await gateStarts(pb)) === 2, 'two calls running')
    await pb.openGate()
    await Promise.all(calls)
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(await listPods(pb, ns)).to.have.length(3)
    // a pod without the image annotation
    const cat = (await listPods(pb, ns)).find((p) => p.metadata!.annotations![ANNOTATION_IMAGE] === image('cat'))!
    await a.close()
    await pb.admin.patch(podPath(cat.metadata!.name!), {metadata: {annotations: {[ANNOTATION_IMAGE]: null}}})
    const b = await start({owner: 'runner-b', maxParallelPods: 1})
    expect(b.runtime.cache.snapshot().map((s) => s.image)).to.deep.equal([image('gate')])
    await until(async () => (await listPods(pb, ns)).length === 1, 'the other two deleted')

    // a new template version: everything goes
    await b.close()
    const c = await start({owner: 'runner-c', wrapperServerImage: 'fnr.test/wrapper-server:v2'})
    expect(c.runtime.cache.snapshot()).to.deep.equal([])
    await until(async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0, 'old-template pods deleted')
    await c.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(await listPods(pb, ns)).to.have.length(1)
  })

  it('a restarted runner knows when an adopted pod was last used (annotation) and expires it on time', async () => {
    const a = await start({owner: 'runner-a', ttlMs: 60_000})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const [name] = await podNames(pb, ns)
    expect((await listPods(pb, ns))[0]!.metadata!.annotations![ANNOTATION_LAST_USED]).to.be.a('string')
    await a.close()
    const longAgo = new Date(Date.now() - 2 * 3600_000).toISOString()
    await pb.admin.patch(podPath(name!), {metadata: {annotations: {[ANNOTATION_LAST_USED]: longAgo}}})
    const b = await start({owner: 'runner-b', ttlMs: 60_000})
    expect(b.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal([name])
    await b.runtime.gc.runOnce()
    await until(async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0, 'the adopted, long idle pod collected')
  })

  it('recreates the Service of an adopted pod when it is missing (upstream: pod exists but the Service does not)', async () => {
    const a = await start({owner: 'runner-a'})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const [name] = await podNames(pb, ns)
    await a.close()
    await pb.admin.delete(servicePath(name!))
    const b = await start({owner: 'runner-b'})
    await until(async () => (await pb.admin.raw('GET', servicePath(name!))).code === 200, 'the Service recreated')
    await b.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(await podNames(pb, ns)).to.deep.equal([name])
  })

  it('a failure around one pod never stops the runner (API errors while taking ownership)', async () => {
    const a = await start({owner: 'runner-a'})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await a.close()
    pb.proxy.failNext({verb: 'patch', resource: 'pods', namespace: ns, code: 500, times: 10})
    const b = await start({owner: 'runner-b'})
    expect(b.runtime.cache.snapshot()).to.have.length(1)
    const res = await b.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(res.resourceList.toString()).to.equal(RL.toString())
  })

  it('starts even when the API server fails the first pod list, and adopts once it answers', async () => {
    const a = await start({owner: 'runner-a'})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const names = await podNames(pb, ns)
    await a.close()
    pb.proxy.failNext({verb: 'list', resource: 'pods', namespace: ns, code: 503, times: 3})
    const b = await start({owner: 'runner-b'})
    expect(b.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal(names)
    await b.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(await podNames(pb, ns)).to.deep.equal(names)
  })
})
