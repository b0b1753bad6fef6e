import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {clusterRuntimeOptions, createdThroughProxy, listPods, nodePodPid, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until, type RuntimeHandle} from '../support/pods/index.js'


describe('pod runtime: API and watch faults', function () {
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

  const evaluate = (img = image('cat')) => h!.evaluator.evaluate({image: img, resourceList: RL, deadline: Date.now() + 60_000})

  it('an invalid pod namespace is a Config error at start (upstream: invalid namespace)', async () => {
    const {startPodRuntime} = await import('../../src/lib/pods/runtime/runtime.js')
    const err = await startPodRuntime(clusterRuntimeOptions(pb, {namespace: 'not a valid namespace'})).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    expect((err as FnrError).message).to.contain('--pod-namespace')
  })

  it('retries pod and Service creation through API 5xx and 429', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    pb.proxy.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 500, times: 2})
    pb.proxy.failNext({verb: 'create', resource: 'services', namespace: ns, code: 429, times: 1})
    const res = await evaluate()
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(1)
    expect(pb.proxy.requestsFor({verb: 'create', resource: 'pods', namespace: ns})).to.have.length(3)
  })

  it('a 409 on pod creation (name taken) retries under a new name; a 409 on the Service reuses or recreates it', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    pb.proxy.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 409, times: 1})
    pb.proxy.failNext({verb: 'create', resource: 'services', namespace: ns, code: 409, times: 1})
    await evaluate()
    const attempts = pb.proxy.requestsFor({verb: 'create', resource: 'pods', namespace: ns})
    expect(attempts.map((r) => r.code)).to.deep.equal([409, 201])
    expect(await listPods(pb, ns)).to.have.length(1)
  })

  it('a persistent API failure fails the call with a short one-line Unavailable message (no headers or bodies)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const rule = pb.proxy.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 503, times: Infinity, message: 'etcd is sad'})
    let err: FnrError | undefined
    try {
      await evaluate()
    } catch (e) {
      err = e as FnrError
    } finally {
      rule.cancel()
    }
    expect(err).to.be.instanceOf(FnrError)
    expect(err!.kind).to.equal('Unavailable')
    expect(err!.message).to.contain('etcd is sad')
    expect(err!.message).not.to.match(/\n|Headers|HTTP-Code/)
    expect(h.runtime.cache.snapshot()).to.deep.equal([])
    // and the runtime recovers once the API does
    await evaluate()
  })

  it('survives watches dropped (cleanly and by reset) and expired while a pod starts', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const starts = h.runtime.manager.watchStarts
    pb.proxy.addLatency({verb: 'create', resource: 'pods', namespace: ns, ms: 300, times: 1})
    const p = evaluate()
    let modes = 0
    // the fake's compact() (every watch's resource version gone) is, on kube-apiserver, the proxy
    // ending the live watches with a 410 Expired in the stream
    const dropper = setInterval(() => {
      pb.proxy.dropWatches({resource: 'pods', namespace: ns, mode: modes++ % 2 === 0 ? 'end' : 'destroy'})
      if (modes === 3) pb.proxy.expireWatches({resource: 'pods', namespace: ns})
    }, 60)
    try {
      await p
    } finally {
      clearInterval(dropper)
    }
    await until(() => h!.runtime.manager.watchStarts > starts, 'the watch restarted')
    // and the pod watch still works: a second image's pod becomes ready through it
    await evaluate(image('stderr'))
  })

  it('still sees a pod die after its watch was dropped (the watch resumes)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    await evaluate()
    const [first] = await podNames(pb, ns)
    pb.proxy.dropWatches({resource: 'pods', namespace: ns, mode: 'destroy'})
    pb.proxy.expireWatches({resource: 'pods', namespace: ns})
    process.kill(-nodePodPid(pb, ns, first!)!, 'SIGKILL')
    await until(() => h!.runtime.cache.snapshot().length === 0, 'the dead pod evicted')
    await evaluate()
    expect(await podNames(pb, ns)).not.to.include(first)
  })
})
