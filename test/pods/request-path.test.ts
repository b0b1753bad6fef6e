import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import type {EvaluationResponse} from '../../src/lib/evaluator.js'
import {LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {
  createdThroughProxy,
  gateStarts,
  listPods,
  listServices,
  nodePodPid,
  startClusterRuntime,
  useClusterPodBed,
  wrapped,
  type ClusterPodBed,
} from '../support/pods/cluster-bed.js'
import {FUNCTION_PATH, RL, image, until, type RuntimeHandle} from '../support/pods/index.js'

async function failure(p: Promise<unknown>): Promise<FnrError> {
  try {
    await p
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    return err as FnrError
  }
  throw new Error('expected the call to fail')
}

const call = (h: RuntimeHandle, img: string, extra: {deadline?: number; signal?: AbortSignal; input?: Buffer} = {}): Promise<EvaluationResponse> =>
  h.evaluator.evaluate({image: img, resourceList: extra.input ?? RL, deadline: extra.deadline ?? Date.now() + 60_000, signal: extra.signal})

describe('pod runtime: request path (end to end on the real control plane, real wrapper servers)', function () {
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

  const podNames = async (): Promise<string[]> => (await listPods(pb, ns)).map((p) => p.metadata!.name!).sort()

  it('creates one pod and one Service for the first call and reuses them (upstream: new pod and new Service; cached pod)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const first = await call(h, image('cat'))
    expect(first.resourceList.toString()).to.equal(RL.toString())
    expect(first.log.length).to.equal(0)
    expect(first.evaluator).to.equal('pod')
    const second = await call(h, image('cat'), {input: Buffer.from(`${RL}# second\n`)})
    expect(second.resourceList.toString()).to.contain('# second')
    const pods = await listPods(pb, ns)
    expect(pods).to.have.length(1)
    const pod = pods[0]!
    const name = pod.metadata!.name!
    expect(pod.metadata!.labels).to.include({[LABEL_FN_IMAGE]: name, [LABEL_MANAGED_BY]: 'fnr', [LABEL_OWNER]: 'runner-a'})
    const fn = pod.spec!.containers.find((c) => c.name === 'function')!
    expect(fn.image).to.equal(image('cat'))
    expect(fn.args).to.deep.equal(['--port', '9446', '--max-request-body-size', String(6 * 1024 * 1024), '--', '/usr/local/bin/function'])
    const services = await listServices(pb, ns)
    expect(services).to.have.length(1)
    expect(services[0]!.metadata!.name).to.equal(name)
    expect(services[0]!.spec!.selector).to.deep.equal({[LABEL_FN_IMAGE]: name})
    expect(services[0]!.spec!.ports![0]).to.include({port: 9446})
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(1)
  })

  it('passes the function\'s stderr and its failures through unchanged (upstream: SuccessWithStderr, GrpcCallFails)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const res = await call(h, image('stderr'))
    expect(res.log.toString()).to.equal('working on it\n')
    const e = await failure(call(h, image('fail')))
    expect(e.kind).to.equal('FunctionFailed')
    expect(e.message).to.contain('exited with code 3')
    expect(e.message).to.contain('replicas must be at most 3')
    const details = e.details.failure as {exitCode: number; results: unknown[]}
    expect(details.exitCode).to.equal(3)
    expect(details.results).to.have.length(2)
    // a failing function is not a failing pod
    expect(h.runtime.cache.snapshot().filter((s) => s.image === image('fail'))).to.have.length(1)
  })

  it('runs concurrent calls on one pod in parallel (upstream: TestPodEvaluatorExecutionParallel)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, maxWaitlistLength: 10})
    const calls = [1, 2, 3].map(() => call(h!, image('gate')))
    await until(async () => (await gateStarts(pb)) === 3, 'three calls running at once in the pod')
    await pb.openGate()
    await Promise.all(calls)
    expect(await listPods(pb, ns)).to.have.length(1)
  })

  it('scales up at the waitlist length up to the pod limit, then queues on the least loaded pod (the upstream scale-up rule)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, maxWaitlistLength: 1, maxParallelPods: 2})
    const calls = [1, 2, 3].map(() => call(h!, image('gate')))
    await until(async () => (await gateStarts(pb)) === 3, 'three calls running')
    const snap = h.runtime.cache.snapshot()
    expect(snap).to.have.length(2)
    expect(snap.map((s) => s.load).sort()).to.deep.equal([1, 2])
    await pb.openGate()
    await Promise.all(calls)
    expect(h.runtime.cache.snapshot().map((s) => s.load)).to.deep.equal([0, 0])
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(2)
  })

  it('when an extra pod fails to start, its waiting call moves to the image\'s other pod (upstream: redistributeLoad)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, maxWaitlistLength: 1, maxParallelPods: 2})
    const first = call(h, image('gate'))
    await until(async () => (await gateStarts(pb)) === 1, 'the first call running')
    const outage = pb.proxy.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 503, times: Infinity})
    const second = call(h, image('gate'))
    await until(async () => (await gateStarts(pb)) === 2, 'the second call running on the first pod')
    outage.cancel()
    await pb.openGate()
    await Promise.all([first, second])
    expect(await listPods(pb, ns)).to.have.length(1)
    expect(h.runtime.cache.snapshot().map((s) => s.load)).to.deep.equal([0])
  })

  it('100 concurrent first calls create exactly the allowed pods and Services, without errors (upstream: nephio#952, "svc already exists")', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, maxWaitlistLength: 1, maxParallelPods: 3})
    const inputs = Array.from({length: 100}, (_, i) => Buffer.from(`${RL}# call ${i}\n`))
    const results = await Promise.all(inputs.map((input) => call(h!, image('cat'), {input})))
    results.forEach((r, i) => expect(r.resourceList.equals(inputs[i]!)).to.equal(true))
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(3)
    expect(createdThroughProxy(pb, ns, 'services')).to.equal(3)
    expect(await listPods(pb, ns)).to.have.length(3)
    expect(await listServices(pb, ns)).to.have.length(3)
    expect(h.runtime.cache.snapshot().every((s) => s.load === 0)).to.equal(true)
  })

  it('releases the slot of a call that timed out or was cancelled while its pod started (upstream leaks it)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const timedOut = await failure(call(h, image('cat'), {deadline: Date.now() + 30}))
    expect(timedOut.kind).to.equal('DeadlineExceeded')
    expect(timedOut.message).to.contain('was not ready by the call\'s deadline')
    const ac = new AbortController()
    const cancelled = call(h, image('cat'), {signal: ac.signal})
    ac.abort()
    expect((await failure(cancelled)).kind).to.equal('Cancelled')
    // the pod keeps starting for later calls, and nobody holds it
    await until(() => h!.runtime.cache.snapshot()[0]?.state === 'ready', 'the pod ready')
    expect(h.runtime.cache.snapshot()[0]!.load).to.equal(0)
    // a call that times out while running releases too
    const running = await failure(call(h, image('gate'), {deadline: Date.now() + 1500}))
    expect(running.kind).to.equal('DeadlineExceeded')
    await pb.openGate()
    expect(h.runtime.cache.snapshot().map((s) => s.load)).to.deep.equal([0, 0])
    expect(await listPods(pb, ns)).to.have.length(2)
  })

  it('honours the caller\'s deadline while the pod is not ready, and deletes the pod at the pod-ready timeout', async () => {
    pb.kubelet.setImage('fnr.test/slow-wrapper:v1', {commandMap: {cp: [process.execPath, '-e', 'setTimeout(() => {}, 600000)', '--']}})
    h = await startClusterRuntime(pb, {namespace: ns, wrapperServerImage: 'fnr.test/slow-wrapper:v1', podReadyTimeoutMs: 2500})
    const e = await failure(call(h, image('cat'), {deadline: Date.now() + 800}))
    expect(e.kind).to.equal('DeadlineExceeded')
    expect(e.message).to.match(/init container "copy-wrapper-server" running/)
    await until(() => h!.runtime.cache.snapshot().length === 0, 'the slot dropped at the pod-ready timeout')
    await until(async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0 && (await listServices(pb, ns)).length === 0, 'the pod and Service deleted')
  })

  it('fails fast on a crashing image, naming the image and the pod\'s last state (upstream hangs 60 s)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, podReadyTimeoutMs: 110_000})
    const e = await failure(call(h, image('crash'), {deadline: Date.now() + 100_000}))
    expect(e.kind).to.equal('FailedPrecondition')
    expect(e.message).to.contain(`image "${image('crash')}"`)
    expect(e.message).to.contain('exit code 3')
    expect(e.message).to.contain('wrapper exploded at start')
    await until(async () => (await listPods(pb, ns, {includeDeleting: true})).length === 0, 'the crashed pod deleted')
    expect(h.runtime.cache.snapshot()).to.deep.equal([])
  })

  it('fails fast when the image cannot be pulled, and never answers NotFound', async () => {
    const img = 'example.com/fn/not-pullable:v1'
    h = await startClusterRuntime(pb, {namespace: ns, podReadyTimeoutMs: 110_000, metadata: {describe: async (i: string) => ({command: ['/f', i]})}})
    const e = await failure(call(h, img, {deadline: Date.now() + 100_000}))
    expect(e.kind).to.equal('FailedPrecondition')
    expect(e.message).to.match(/ErrImagePull|ImagePullBackOff/)
    const unknown = await failure(call(h, 'example.com/fn/unknown:v1'))
    expect(unknown.kind).not.to.equal('NotFound')
  })

  it('an image without entrypoint is FailedPrecondition (never NotFound) and creates no pod', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const e = await failure(call(h, 'example.com/fn/no-metadata:v1'))
    expect(e.kind).to.equal('FailedPrecondition')
    expect(e.message).to.contain('example.com/fn/no-metadata:v1')
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(0)
  })

  it('evicts a pod killed mid-call and retries the call once on a fresh pod; the old channel is closed', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    const p = call(h, image('gate'))
    await until(async () => (await gateStarts(pb)) === 1, 'the call running')
    const [first] = await podNames()
    const slot = h.runtime.cache.slotFor(first!)!
    process.kill(-nodePodPid(pb, ns, first!)!, 'SIGKILL')
    await pb.openGate()
    const res = await p
    expect(res.resourceList.toString()).to.equal(RL.toString())
    const snap = h.runtime.cache.snapshot()
    expect(snap).to.have.length(1)
    expect(snap[0]!.name).not.to.equal(first)
    expect(slot.state).to.equal('gone')
    expect(channelState(slot.client)).to.equal('SHUTDOWN')
    await until(async () => !(await listPods(pb, ns, {includeDeleting: true})).some((x) => x.metadata!.name === first), 'the dead pod deleted')
  })

  it('with --pod-call-retries=0 the caller sees UNAVAILABLE naming the pod', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, callRetries: 0})
    const p = call(h, image('gate'))
    await until(async () => (await gateStarts(pb)) === 1, 'the call running')
    const [first] = await podNames()
    process.kill(-nodePodPid(pb, ns, first!)!, 'SIGKILL')
    const e = await failure(p)
    expect(e.kind).to.equal('Unavailable')
    expect(e.message).to.contain(first!)
  })

  it('replaces a pod whose container died while idle, or that was deleted from outside (upstream: cached but pod gone)', async () => {
    h = await startClusterRuntime(pb, {namespace: ns})
    await call(h, image('cat'))
    const [first] = await podNames()
    process.kill(-nodePodPid(pb, ns, first!)!, 'SIGKILL')
    await until(() => h!.runtime.cache.snapshot().length === 0, 'the dead pod evicted by the watch')
    await call(h, image('cat'))
    const [second] = h.runtime.cache.snapshot().map((s) => s.name)
    expect(second).not.to.equal(first)
    await (await pb.kubeConfig()).makeApiClient((await import('@kubernetes/client-node')).CoreV1Api).deleteNamespacedPod({name: second!, namespace: ns})
    await until(() => h!.runtime.cache.snapshot().length === 0, 'the deleted pod evicted')
    await call(h, image('cat'))
    expect(h.runtime.cache.snapshot().map((s) => s.name)).not.to.include(second)
  })

  it('runs images whose references upstream cannot name pods for (digest, uppercase, underscore, long)', async () => {
    const odd = [
      'example.com/fn/cat@sha256:584115f2a1b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9',
      'Example.com/Team/Set_Labels:V1.0_RC1',
      `example.com/${'very-long-function-name-'.repeat(5)}:${'v1.2.3-long-tag-'.repeat(4)}`,
    ]
    for (const img of odd) pb.kubelet.setImage(img, wrapped({[FUNCTION_PATH]: `${pb.dir}/functions/cat`}))
    h = await startClusterRuntime(pb, {namespace: ns, metadata: {describe: async () => ({command: ['/usr/local/bin/function']})}})
    for (const img of odd) {
      const res = await call(h, img)
      expect(res.resourceList.toString(), img).to.equal(RL.toString())
    }
    expect(await listPods(pb, ns)).to.have.length(odd.length)
  })
})

function channelState(client: unknown): string {
  const grpc = client as {client?: {getChannel(): {getConnectivityState(try_: boolean): number}}}
  const state = grpc.client!.getChannel().getConnectivityState(false)
  return ['IDLE', 'CONNECTING', 'READY', 'TRANSIENT_FAILURE', 'SHUTDOWN'][state]!
}
