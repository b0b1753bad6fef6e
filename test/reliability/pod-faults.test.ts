/**
 * Pod-runtime faults on the real control plane beyond test/pods/faults.test.ts (kube-apiserver
 * behind the cluster pod bed's fault proxy, through which the runtime talks): API
 * 5xx, 409, slow responses and dropped watches during pod creation AND during garbage collection;
 * a pod deleted through the API or crashing in the middle of a call. Every call gets a result or a
 * clean one-line error within its deadline; afterwards (plus GC) no fnr pod or Service is leaked,
 * and a pod with a call in flight is never deleted.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {createdThroughProxy, gateStarts, listPods, listServices, managedPodNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until, type RuntimeHandle} from '../support/pods/index.js'
import {leakProblems} from '../support/reliability/pod-serve.js'

interface Outcome {
  ok: boolean
  kind?: string
  message?: string
  /** ms from the call's start to its end */
  ms: number
  deadlineMs: number
}

describe('reliability: pod runtime under API faults, during creation and GC, and pods lost mid-call', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined
  let ns: string

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    setup: async () => {
      // A function that kills its own wrapper server: the pod crashes in the middle of the call.
      await pb.addFunction('killer', '#!/bin/sh\ncat >/dev/null\nkill -KILL $PPID\nsleep 5\n')
    },
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  /** A call that must settle with a result or a clean (one-line FnrError) error before its deadline. */
  async function call(img: string, deadlineMs = 60_000): Promise<Outcome> {
    const started = Date.now()
    try {
      const res = await h!.evaluator.evaluate({image: img, resourceList: RL, deadline: started + deadlineMs})
      expect(res.resourceList.toString()).to.equal(RL.toString())
      return {ok: true, ms: Date.now() - started, deadlineMs}
    } catch (err) {
      expect(err, String(err)).to.be.instanceOf(FnrError)
      const e = err as FnrError
      // (a function's own failure carries its stderr, lines and all; faults are one line)
      if (e.kind !== 'FunctionFailed') expect(e.message, 'one line').not.to.contain('\n')
      expect(e.message).not.to.match(/HTTP-Code|Headers/)
      return {ok: false, kind: e.kind, message: e.message, ms: Date.now() - started, deadlineMs}
    }
  }
  /** "Within its deadline": a little slack for the event loop of a loaded machine. */
  const withinDeadline = (o: Outcome): void => {
    expect(o.ms, JSON.stringify(o)).to.be.at.most(o.deadlineMs + 2_000)
  }

  const gcUntilClean = async (what: string, extra: () => boolean | Promise<boolean> = () => true): Promise<void> => {
    await until(async () => {
      await h!.runtime.gc.runOnce()
      return (await leakProblems(pb, ns)).length === 0 && (await extra())
    }, `${what}: ${(await leakProblems(pb, ns)).join('; ')}`)
  }

  describe('during garbage collection', () => {
    it('API 5xx on the lists and deletes, a 409 on a delete, slow deletes and dropped watches: expired pods still go, the busy pod stays', async () => {
      h = await startClusterRuntime(pb, {namespace: ns, ttlMs: 500})
      await call(image('cat'))
      await call(image('stderr'))
      const busy = h.evaluator.evaluate({image: image('gate'), resourceList: RL, deadline: Date.now() + 120_000})
      await until(async () => (await gateStarts(pb)) === 1, 'the gate call running')
      const gatePod = (await listPods(pb, ns)).find((p) => p.metadata!.annotations!['fnr.dev/image'] === image('gate'))!.metadata!.name!
      await new Promise((r) => setTimeout(r, 700)) // every pod is now past its TTL

      const api = pb.proxy
      const rules = [
        api.failNext({verb: 'list', resource: 'pods', namespace: ns, code: 500, times: 2}),
        api.failNext({verb: 'list', resource: 'services', namespace: ns, code: 503, times: 1}),
        api.failNext({verb: 'delete', resource: 'pods', namespace: ns, code: 500, times: 1}),
        api.failNext({verb: 'delete', resource: 'pods', namespace: ns, code: 409, times: 1, message: 'Operation cannot be fulfilled: the object has been modified'}),
        api.failNext({verb: 'delete', resource: 'services', namespace: ns, code: 500, times: 2}),
      ]
      const slow = api.addLatency({verb: 'delete', namespace: ns, ms: 800, times: 4})
      const dropper = setInterval(() => api.dropWatches({resource: 'pods', namespace: ns, mode: 'destroy'}), 150)
      try {
        for (let i = 0; i < 3; i++) await h.runtime.gc.runOnce()
        await until(async () => {
          await h!.runtime.gc.runOnce()
          return (await managedPodNames(pb, ns)).join() === gatePod
        }, `only the busy pod left (${(await managedPodNames(pb, ns)).join()})`)
      } finally {
        clearInterval(dropper)
        slow.cancel()
      }
      expect(rules.map((r) => r.hits), 'every injected fault was hit').to.deep.equal([2, 1, 1, 1, 2])
      expect(slow.hits).to.be.greaterThan(0)
      expect(await managedPodNames(pb, ns)).to.deep.equal([gatePod])
      expect(h.runtime.cache.snapshot().map((s) => [s.name, s.load])).to.deep.equal([[gatePod, 1]])
      await pb.openGate()
      expect((await busy).resourceList.toString()).to.equal(RL.toString())
      await until(async () => (await listServices(pb, ns)).map((s) => s.metadata!.name).join() === gatePod, 'only the busy pod\'s Service left')
      // the runtime still works: the next call makes a fresh pod through the resumed watch
      const again = await call(image('cat'))
      expect(again.ok).to.equal(true)
      await gcUntilClean('no leak', async () => (await listPods(pb, ns)).length >= 1)
    })

    it('a persistent API outage during GC deletes nothing wrongly and recovers once the API answers', async () => {
      h = await startClusterRuntime(pb, {namespace: ns, ttlMs: 300})
      await call(image('cat'))
      await new Promise((r) => setTimeout(r, 500))
      const outage = pb.proxy.failNext({verb: ['list', 'delete'], namespace: ns, code: 503, times: Infinity})
      try {
        for (let i = 0; i < 2; i++) await h.runtime.gc.runOnce()
      } finally {
        outage.cancel()
      }
      await gcUntilClean('collected after the outage', async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0)
      expect(await listServices(pb, ns)).to.deep.equal([])
    })
  })

  describe('during pod creation', () => {
    it('slow API responses on pod and Service creation: the call waits and succeeds; 20 concurrent first calls with 5xx, 409 and dropped watches make one pod per image', async () => {
      h = await startClusterRuntime(pb, {namespace: ns})
      const slow = pb.proxy.addLatency({verb: 'create', namespace: ns, ms: 1500, times: 2})
      const first = await call(image('cat'))
      slow.cancel()
      expect(first.ok, first.message).to.equal(true)

      const api = pb.proxy
      api.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 500, times: 2})
      api.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 409, times: 1})
      api.failNext({verb: 'create', resource: 'services', namespace: ns, code: 409, times: 1})
      api.failNext({verb: 'create', resource: 'services', namespace: ns, code: 503, times: 1})
      api.addLatency({verb: 'create', namespace: ns, ms: 300, times: 4})
      const dropper = setInterval(() => api.dropWatches({resource: 'pods', namespace: ns, mode: 'end'}), 100)
      let outcomes: Outcome[]
      try {
        outcomes = await Promise.all(Array.from({length: 20}, (_, i) => call(image(['cat', 'stderr', 'fail'][i % 3]!))))
      } finally {
        clearInterval(dropper)
      }
      // 'fail' is a function that fails on purpose: FunctionFailed is its result, not a fault.
      expect(pb.proxy.requestsFor({verb: 'create', namespace: ns}).filter((r) => (r.code ?? 0) >= 409).length, 'the injected failures were hit').to.equal(5)
      const faults = outcomes.filter((o) => !o.ok && o.kind !== 'FunctionFailed')
      expect(faults, JSON.stringify(faults)).to.deep.equal([])
      outcomes.forEach(withinDeadline)
      expect(await listPods(pb, ns)).to.have.length(3)
      await gcUntilClean('no leak')
    })

    it('a deadline shorter than the slow API: DEADLINE_EXCEEDED before the deadline, and the late pod is used or collected, never leaked', async () => {
      h = await startClusterRuntime(pb, {namespace: ns, podReadyTimeoutMs: 10_000})
      const slow = pb.proxy.addLatency({verb: 'create', resource: 'pods', namespace: ns, ms: 3000, times: 1})
      const o = await call(image('cat'), 1000)
      expect(o.ok).to.equal(false)
      expect(o.kind, o.message).to.equal('DeadlineExceeded')
      withinDeadline(o)
      slow.cancel()
      // the creation still lands after the caller gave up; the next call uses it or a new one
      const next = await call(image('cat'))
      expect(next.ok, next.message).to.equal(true)
      await gcUntilClean('no leak', async () => (await listPods(pb, ns)).length === 1)
      expect(createdThroughProxy(pb, ns, 'pods')).to.be.at.most(2)
    })
  })

  describe('pods lost mid-call', () => {
    it('a pod deleted through the API while a call runs: the call is retried on a fresh pod (or fails cleanly), the deleted pod goes', async () => {
      h = await startClusterRuntime(pb, {namespace: ns})
      const p = call(image('gate'), 60_000)
      await until(async () => (await gateStarts(pb)) === 1, 'the call running')
      const [first] = await managedPodNames(pb, ns)
      const core = (await pb.kubeConfig()).makeApiClient((await import('@kubernetes/client-node')).CoreV1Api)
      await core.deleteNamespacedPod({name: first!, namespace: ns})
      // the function may finish during the pod's grace period, or the call moves to a new pod
      await pb.openGate()
      const o = await p
      withinDeadline(o)
      expect(o.ok || o.kind === 'Unavailable', JSON.stringify(o)).to.equal(true)
      await until(async () => !(await listPods(pb, ns, {includeDeleting: true})).some((x) => x.metadata!.name === first), 'the deleted pod gone')
      expect(h.runtime.cache.snapshot().map((s) => s.name)).not.to.include(first)
      expect((await call(image('cat'))).ok).to.equal(true)
      await gcUntilClean('no leak')
    })

    it('a pod that crashes during every call: a clean UNAVAILABLE naming the pod after the retry, crashed pods collected', async () => {
      h = await startClusterRuntime(pb, {namespace: ns})
      const o = await call(image('killer'), 60_000)
      expect(o.ok).to.equal(false)
      expect(o.kind, o.message).to.equal('Unavailable')
      expect(o.message).to.match(/function pod killer-v1-\S+ for image "example\.com\/fn\/killer:v1" is unavailable/)
      withinDeadline(o)
      // one try plus one retry, each on its own pod
      expect(createdThroughProxy(pb, ns, 'pods')).to.equal(2)
      await gcUntilClean('crashed pods collected', async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0)
      expect(await listServices(pb, ns)).to.deep.equal([])
      // and other images are unaffected
      expect((await call(image('cat'))).ok).to.equal(true)
    })
  })
})
