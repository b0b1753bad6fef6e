/**
 * PodCache without the test bed: the cache is constructed with a fake PodManager (records what the
 * cache asks of the API, answers as a test says) and a fixed metadata source. Pods become ready
 * slots by adoption (a Ready pod object, no network: a gRPC channel connects only when called), or
 * stay starting while the fake never reports them ready. What is checked is the cache's own logic:
 * placement and the scale-up rule, load accounting, retiring on template and digest changes, pod
 * watch events, the GC pass it applies, the failure path of a pod start, and close.
 */
import type {V1Pod, V1Service} from '@kubernetes/client-node'
import {expect} from 'chai'

import type {ImagePodSettings} from '../../src/lib/config/pod-cache-config.js'
import {FnrError} from '../../src/lib/errors.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {PodCache, type PodCacheOptions} from '../../src/lib/pods/runtime/cache.js'
import type {PodClaim} from '../../src/lib/pods/runtime/claim.js'
import type {PodEvent} from '../../src/lib/pods/model/events.js'
import type {GcPlan} from '../../src/lib/pods/model/gc.js'
import {PodGarbageCollector} from '../../src/lib/pods/runtime/gc-scheduler.js'
import type {PodManager} from '../../src/lib/pods/cluster/manager.js'
import {StaticMetadataSource, type FunctionImageInfo} from '../../src/lib/pods/cluster/image-metadata.js'
import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, LABEL_OWNER, WARM_OWNER, functionPodAnnotations, functionPodLabels, labelValueFor} from '../../src/lib/pods/model/naming.js'
import {ANNOTATION_IMAGE_DIGEST, inlineTemplates} from '../../src/lib/pods/model/template.js'

const IMG = 'example.com/fn/cat:v1'
const OWNER = 'runner-a'
const TEMPLATES = inlineTemplates({wrapperServerImage: 'fnr.test/wrapper-server:v1'})
const NEW_TEMPLATES = inlineTemplates({wrapperServerImage: 'fnr.test/wrapper-server:v2'})

/** What the cache asked of the Kubernetes API. */
interface Calls {
  created: V1Pod[]
  services: V1Service[]
  deleted: Array<{name: string; reason: string}>
  patched: Array<{name: string; patch: unknown}>
}

/** A PodManager stand-in: pods are created at once and never become ready unless `ready` says so. */
function fakeManager(behaviour: {createPod?: (pod: V1Pod, attempt: number) => Promise<void>; waitForPodReady?: (name: string) => Promise<{ip: string}>; ensureService?: (service: V1Service) => Promise<void>; logTail?: string; pods?: V1Pod[]} = {}) {
  const calls: Calls = {created: [], services: [], deleted: [], patched: []}
  let attempt = 0
  const manager = {
    namespace: 'fn-pods',
    createPod: async (pod: V1Pod) => {
      calls.created.push(pod)
      await behaviour.createPod?.(pod, attempt++)
    },
    waitForPodReady: (name: string, _image: string, options: {signal?: AbortSignal}) =>
      behaviour.waitForPodReady?.(name) ??
      new Promise<{ip: string}>((_resolve, reject) => options.signal?.addEventListener('abort', () => reject(new FnrError('Unavailable', 'abandoned')))),
    ensureService: async (service: V1Service) => {
      await behaviour.ensureService?.(service)
      calls.services.push(service)
    },
    deletePodAndService: async (name: string, reason: string) => {
      calls.deleted.push({name, reason})
      return true
    },
    deletePodIfUnchanged: async () => true,
    deleteService: async () => true,
    patchPodMetadata: async (name: string, patch: unknown) => {
      calls.patched.push({name, patch})
    },
    readPod: async () => undefined,
    logTail: async () => behaviour.logTail ?? '',
    listPods: async () => behaviour.pods ?? [],
    listServices: async () => [],
  }
  return {manager: manager as unknown as PodManager, calls}
}

function settings(over: Partial<ImagePodSettings> = {}): ImagePodSettings {
  return {ttlMs: 600_000, maxWaitlistLength: 2, maxParallelPods: 2, ...over}
}

function makeCache(manager: PodManager, over: Partial<PodCacheOptions> = {}): PodCache {
  return new PodCache({
    manager,
    metadata: new StaticMetadataSource({[IMG]: ['/usr/local/bin/function']}),
    templates: TEMPLATES,
    settingsFor: () => settings(),
    owner: OWNER,
    podReadyTimeoutMs: 60_000,
    addressMode: 'pod-ip',
    clusterDomain: 'cluster.local',
    maxMessageSize: 6 * 1024 * 1024,
    ...over,
  })
}

/** A Ready fnr pod of this runner, as the API would list it. */
function readyPod(name: string, opts: {version?: string; owner?: string; digest?: string; lastUsed?: number; ip?: string} = {}): V1Pod {
  const owner = opts.owner ?? OWNER
  return {
    metadata: {
      name,
      resourceVersion: '7',
      labels: functionPodLabels(name, IMG, labelValueFor(owner)),
      annotations: {
        ...functionPodAnnotations({templateVersion: opts.version ?? TEMPLATES.version, image: IMG, owner, now: opts.lastUsed ?? Date.now(), ttlMs: 600_000, creationId: name}),
        ...(opts.digest ? {[ANNOTATION_IMAGE_DIGEST]: opts.digest} : {}),
      },
    },
    status: {phase: 'Running', podIP: opts.ip ?? '127.0.0.1', conditions: [{type: 'Ready', status: 'True'}], containerStatuses: [{name: 'function', ready: true, restartCount: 0, image: IMG, imageID: '', state: {running: {}}}]},
  }
}

/** The events the cache emits from now on (events.ts), to assert what happened to the pods. */
function recordEvents(cache: PodCache): PodEvent[] {
  const events: PodEvent[] = []
  cache.events.on((e) => events.push(e))
  return events
}
const ofType = <T extends PodEvent['type']>(events: PodEvent[], type: T): Array<Extract<PodEvent, {type: T}>> => events.filter((e): e is Extract<PodEvent, {type: T}> => e.type === type)

const loads = (cache: PodCache): Record<string, number> => Object.fromEntries(cache.snapshot().map((s) => [s.name, s.load]))
const states = (cache: PodCache): Record<string, string> => Object.fromEntries(cache.snapshot().map((s) => [s.name, s.state]))

describe('PodCache (unit: a fake PodManager, no test bed)', () => {
  const caches: PodCache[] = []
  const track = (cache: PodCache): PodCache => {
    caches.push(cache)
    return cache
  }
  afterEach(() => {
    for (const c of caches.splice(0)) c.close()
  })

  it('adopts Ready pods of its template version as ready slots, and deletes its own pods of another version', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager))
    const events = recordEvents(cache)
    const result = await cache.adopt([readyPod('a'), readyPod('b'), readyPod('old', {version: NEW_TEMPLATES.version})])
    expect(result).to.deep.equal({adopted: ['a', 'b'], deleted: ['old']})
    expect(ofType(events, 'adopted').map((e) => [e.pod, e.ownerState, e.why]).sort()).to.deep.equal([['a', 'self', 'found at startup'], ['b', 'self', 'found at startup']])
    await Promise.resolve()
    expect(ofType(events, 'collected')).to.deep.equal([{type: 'collected', kind: 'pod', name: 'old', code: 'startup'}])
    expect(states(cache)).to.deep.equal({a: 'ready', b: 'ready'})
    expect(calls.deleted.map((d) => d.name)).to.deep.equal(['old'])
    // an adopted pod gets its Service (ensured), the claim is a patch with the owner label
    expect(calls.services.map((s) => s.metadata?.name).sort()).to.deep.equal(['a', 'b'])
    expect(calls.patched.map((p) => p.name).sort()).to.deep.equal(['a', 'b'])
    expect(cache.snapshot().map((s) => s.address)).to.deep.equal(['127.0.0.1:9446', '127.0.0.1:9446'])
  })

  it('startup adoption of a pod the pod watch is claiming waits for that claim: when adopt() resolves, the slot is there', async () => {
    const {manager, calls} = fakeManager()
    let release!: () => void
    const claimed = new Promise<void>((resolve) => (release = resolve))
    const patch = manager.patchPodMetadata.bind(manager)
    ;(manager as unknown as {patchPodMetadata: typeof patch}).patchPodMetadata = async (...args: Parameters<typeof patch>) => {
      await claimed
      return patch(...args)
    }
    const cache = track(makeCache(manager))
    const warmed = readyPod('warmed', {owner: WARM_OWNER})
    // The watch sees it first and starts claiming; the startup list has it too.
    cache.onPodEvent('ADDED', warmed)
    const startup = cache.adopt([warmed])
    setTimeout(release, 20)
    expect(await startup).to.deep.equal({adopted: ['warmed'], deleted: []})
    expect(cache.slotFor('warmed')?.state).to.equal('ready')
    expect(calls.patched.map((p) => p.name)).to.deep.equal(['warmed'])
  })

  it('adoption stops at the image\'s pod limit (the extra own pods are deleted); a pod of `fnr pods warm` seen on the watch is claimed and adopted', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager, {settingsFor: () => settings({maxParallelPods: 2})}))
    const result = await cache.adopt([readyPod('p1'), readyPod('p2'), readyPod('p3')])
    expect(result.adopted).to.have.length(2)
    expect(result.deleted).to.have.length(1)
    expect(calls.deleted[0]!.reason).to.match(/the image already has its maximum number of pods/)
    const other = 'example.com/fn/other:v1'
    const warmed = readyPod('warmed', {owner: WARM_OWNER})
    warmed.metadata!.annotations![ANNOTATION_IMAGE] = other
    cache.onPodEvent('ADDED', warmed)
    await until(() => cache.slotFor('warmed')?.state === 'ready', 'the warmed pod adopted')
    expect(cache.slotFor('warmed')!.image).to.equal(other)
    const claim = calls.patched.find((p) => p.name === 'warmed')!.patch as {labels: Record<string, string>}
    expect(claim.labels[LABEL_OWNER]).to.equal(labelValueFor(OWNER))
  })

  it('places each call on the least-loaded pod, round-robin among ties; a release counts once', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager))
    await cache.adopt([readyPod('a'), readyPod('b')])
    const leases: PodClaim[] = []
    for (let i = 0; i < 4; i++) leases.push(await cache.acquire(IMG))
    expect(leases.map((l) => l.slot.name)).to.deep.equal(['a', 'b', 'a', 'b'])
    expect(loads(cache)).to.deep.equal({a: 2, b: 2})
    leases[0]!.release()
    leases[0]!.release()
    expect(loads(cache)).to.deep.equal({a: 1, b: 2})
    expect((await cache.acquire(IMG)).slot.name, 'the least loaded').to.equal('a')
    expect(calls.created, 'no pod started: both were under the waitlist length').to.deep.equal([])
  })

  it('starts another pod only when every pod is at the waitlist length and the image is under its pod limit', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager))
    await cache.adopt([readyPod('a')])
    const events = recordEvents(cache)
    await cache.acquire(IMG)
    await cache.acquire(IMG)
    expect(calls.created).to.have.length(0)
    // a is at the waitlist length (2) and the image has 1 of 2 pods: the third call starts one
    const abort = new AbortController()
    const third = cache.acquire(IMG, {signal: abort.signal})
    const started = cache.snapshot().find((s) => s.name !== 'a')!
    expect(started).to.deep.include({state: 'starting', load: 1, templateVersion: TEMPLATES.version})
    // the fourth goes to the starting pod (less loaded), the fifth queues: the image is at its limit
    const fourth = cache.acquire(IMG, {signal: abort.signal})
    const fifth = cache.acquire(IMG, {signal: abort.signal})
    expect(loads(cache)).to.deep.equal({a: 3, [started.name]: 2})
    abort.abort()
    for (const p of [third, fourth]) {
      const err = await p.then(() => undefined, (e: unknown) => e)
      expect(err).to.be.instanceOf(FnrError).with.property('kind', 'Cancelled')
    }
    expect(await fifth, 'the fifth call queued on the ready pod').to.have.nested.property('slot.name', 'a')
    expect(ofType(events, 'placed').map((e) => [e.pod, e.result, e.why])).to.deep.equal([
      ['a', 'hit', undefined],
      ['a', 'hit', undefined],
      [started.name, 'miss', 'scale-up'],
      [started.name, 'starting', undefined],
      ['a', 'hit', undefined],
    ])
    // the cancelled calls let go of their load; the pod keeps starting for later calls
    expect(loads(cache)).to.deep.equal({a: 3, [started.name]: 0})
    expect(calls.created.map((p) => p.metadata?.name)).to.deep.equal([started.name])
    await until(() => calls.services.some((s) => s.metadata?.name === started.name), 'the Service of the new pod')
  })

  it('a call whose deadline passes while its pod starts fails with DeadlineExceeded and leaks no load', async () => {
    const {manager} = fakeManager()
    const cache = track(makeCache(manager))
    const err = await cache.acquire(IMG, {deadline: Date.now() + 50}).then(() => undefined, (e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError).with.property('kind', 'DeadlineExceeded')
    expect((err as Error).message).to.match(/was not ready by the call's deadline .*it keeps starting for later calls/)
    expect(cache.snapshot().map((s) => [s.state, s.load])).to.deep.equal([['starting', 0]])
  })

  it('a pod that fails while its Service is still being created: the launch waits for the Service, so the cleanup deletes it too', async () => {
    // Before, the launch failed at once and its cleanup ran before the Service existed: the
    // Service created a moment later was left behind (\`fnr pods warm\` has no GC after it).
    let serviceMade = false
    const {manager, calls} = fakeManager({
      waitForPodReady: async (name) => {
        throw new FnrError('FailedPrecondition', `function pod ${name} cannot start: container "function" is waiting: ErrImagePull`)
      },
      ensureService: async () => {
        await new Promise((resolve) => setTimeout(resolve, 50))
        serviceMade = true
      },
    })
    const deleted: boolean[] = []
    const deletePodAndService = manager.deletePodAndService.bind(manager)
    manager.deletePodAndService = async (name: string, reason: string) => {
      deleted.push(serviceMade)
      return deletePodAndService(name, reason)
    }
    const cache = track(makeCache(manager))
    const err = await cache.acquire(IMG).then(() => undefined, (e: unknown) => e)
    expect((err as Error).message).to.contain('ErrImagePull')
    expect(calls.services).to.have.length(1)
    expect(deleted, 'the Service existed when the pod and its Service were deleted').to.deep.equal([true])
  })

  it('a pod name taken (409) is retried under a new name; a crashing pod fails the call with its last log lines and is evicted', async () => {
    const {manager, calls} = fakeManager({
      createPod: async (_pod, attempt) => {
        if (attempt === 0) throw new FnrError('FailedPrecondition', 'pod: the name is taken (AlreadyExists)', {details: {status: 409, nameTaken: true}})
      },
      waitForPodReady: async (name) => {
        throw new FnrError('FailedPrecondition', `function pod ${name} cannot start: container "function" terminated: exit code 3`, {details: {containerExited: true}})
      },
      logTail: 'line 1\nwrapper exploded at start',
    })
    const cache = track(makeCache(manager))
    const events = recordEvents(cache)
    const err = await cache.acquire(IMG).then(() => undefined, (e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError).with.property('kind', 'FailedPrecondition')
    expect((err as Error).message).to.contain('exit code 3').and.contain('last log lines: line 1 | wrapper exploded at start')
    const [first, second] = calls.created.map((p) => p.metadata!.name!)
    expect(first).to.not.equal(second)
    // created under the second name, failed with the call's error, evicted: in that order
    expect(events.filter((e) => e.type !== 'placed').map((e) => [e.type, 'pod' in e ? e.pod : ''])).to.deep.equal([['created', second], ['failed', second], ['evicted', second]])
    expect(ofType(events, 'failed')[0]!.error).to.equal((err as Error).message)
    expect(cache.snapshot()).to.deep.equal([])
    expect(calls.deleted.map((d) => d.name)).to.deep.equal([second])
    expect(calls.deleted[0]!.reason).to.match(/^failed to start: /)
  })

  it('an image the metadata source does not know is FailedPrecondition, never NotFound (NotFound means "not an exec function" to the chain)', async () => {
    const {manager, calls} = fakeManager()
    const metadata = {describe: async (): Promise<FunctionImageInfo> => Promise.reject(new FnrError('NotFound', 'manifest unknown'))}
    const cache = track(makeCache(manager, {metadata}))
    const err = await cache.acquire(IMG).then(() => undefined, (e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError).with.property('kind', 'FailedPrecondition')
    expect(calls.created).to.deep.equal([])
  })

  it('a template change evicts idle pods at once and retires busy ones after their last call; new calls start new pods', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager))
    await cache.adopt([readyPod('idle'), readyPod('busy')])
    const lease = await cache.acquire(IMG)
    expect(lease.slot.name).to.equal('idle')
    const busy = await cache.acquire(IMG)
    lease.release()
    const events = recordEvents(cache)
    cache.setTemplates(NEW_TEMPLATES)
    expect(states(cache)).to.deep.equal({busy: 'retiring'})
    expect(events.map((e) => [e.type, 'pod' in e ? e.pod : ''])).to.deep.equal([['templates-changed', ''], ['retired', 'idle'], ['evicted', 'idle'], ['retired', 'busy']])
    expect(ofType(events, 'retired').map((e) => e.cause)).to.deep.equal([{kind: 'template'}, {kind: 'template'}])
    expect(calls.deleted.map((d) => d.name)).to.deep.equal(['idle'])
    const next = cache.acquire(IMG, {deadline: Date.now() + 20})
    next.catch(() => {})
    expect(cache.snapshot().find((s) => s.name !== 'busy')).to.deep.include({state: 'starting', templateVersion: NEW_TEMPLATES.version})
    expect(busy.usable, 'a retiring pod still serves the calls it has').to.equal(true)
    busy.release()
    expect(ofType(events, 'evicted').map((e) => [e.pod, e.reason])).to.deep.equal([['idle', 'replaced by a new template version'], ['busy', 'replaced by a new template version']])
    expect(calls.deleted.map((d) => d.name)).to.deep.equal(['idle', 'busy'])
    expect(calls.deleted[1]!.reason).to.equal('replaced by a new template version')
  })

  it('the image resolving to a new digest retires pods of the old one; pods of unknown digest stay', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager, {settingsFor: () => settings({maxParallelPods: 3})}))
    await cache.adopt([readyPod('old', {digest: 'sha256:aaa'}), readyPod('same', {digest: 'sha256:bbb'}), readyPod('unknown')])
    const events = recordEvents(cache)
    cache.noteDigest(IMG, 'sha256:bbb')
    expect(Object.keys(states(cache)).sort()).to.deep.equal(['same', 'unknown'])
    expect(ofType(events, 'retired')).to.deep.equal([{type: 'retired', image: IMG, pod: 'old', reason: 'the image now resolves to sha256:bbb, not sha256:aaa', cause: {kind: 'digest', from: 'sha256:aaa', to: 'sha256:bbb'}}])
    expect(calls.deleted).to.deep.equal([{name: 'old', reason: 'the image now resolves to sha256:bbb, not sha256:aaa'}])
  })

  it('pod watch events: a deleted or failed pod is evicted; a pod another replica took over is let go without deleting it', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager, {settingsFor: () => settings({maxParallelPods: 4})}))
    await cache.adopt([readyPod('deleted'), readyPod('failed'), readyPod('taken'), readyPod('fine')])
    const events = recordEvents(cache)
    cache.onPodEvent('DELETED', readyPod('deleted'))
    const failed = readyPod('failed')
    failed.status = {phase: 'Failed', reason: 'Evicted', message: 'node pressure'}
    cache.onPodEvent('MODIFIED', failed)
    const taken = readyPod('taken')
    taken.metadata!.labels![LABEL_OWNER] = 'runner-b'
    cache.onPodEvent('MODIFIED', taken)
    cache.onPodEvent('MODIFIED', readyPod('fine'))
    expect(Object.keys(states(cache))).to.deep.equal(['fine'])
    expect(ofType(events, 'evicted').map((e) => [e.pod, e.reason])).to.deep.equal([
      ['deleted', 'the pod was deleted'],
      ['failed', 'Evicted: node pressure'],
      ['taken', 'taken over by replica runner-b'],
    ])
    await Promise.resolve()
    expect(calls.deleted).to.deep.equal([
      {name: 'deleted', reason: 'the pod was deleted'},
      {name: 'failed', reason: 'Evicted: node pressure'},
    ])
  })

  it('a GC pass expires idle pods past their TTL (by the cache\'s clock), never busy ones, and records the last use of busy ones', async () => {
    let clock = Date.parse('2026-01-01T00:00:00Z')
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager, {now: () => clock, settingsFor: () => settings({ttlMs: 60_000})}))
    await cache.adopt([readyPod('idle', {lastUsed: clock}), readyPod('busy', {lastUsed: clock})])
    const lease = await cache.acquire(IMG)
    expect(lease.slot.name).to.equal('idle')
    lease.release()
    const busy = await cache.acquire(IMG)
    expect(busy.slot.name).to.equal('busy')
    calls.patched.length = 0
    clock += 61_000
    const events = recordEvents(cache)
    const pods = [readyPod('idle'), readyPod('busy')]
    const plan = cache.collector.applyGc(pods, [], clock)
    expect(plan.expire.map((e) => e.name)).to.deep.equal(['idle'])
    expect(plan.deletePods).to.deep.equal([])
    expect(Object.keys(states(cache))).to.deep.equal(['busy'])
    expect(calls.deleted.map((d) => d.name)).to.deep.equal(['idle'])
    await Promise.resolve()
    expect(ofType(events, 'collected'), 'counted as a GC deletion by its code').to.deep.equal([{type: 'collected', kind: 'pod', name: 'idle', code: 'ttl'}])
    expect(calls.patched.map((p) => p.name), 'the busy pod\'s last-used annotation refreshed').to.deep.equal(['busy'])
    expect(calls.patched[0]!.patch).to.have.nested.property(`annotations.${ANNOTATION_LAST_USED.replace(/\./g, '\\.')}`, new Date(clock).toISOString())
    busy.release()
  })

  it('a GC pass deletes an uncached pod of its own (an orphan) but leaves cached pods to the cache', async () => {
    const {manager, calls} = fakeManager()
    const cache = track(makeCache(manager, {orphanMinAgeMs: 0}))
    await cache.adopt([readyPod('cached')])
    const plan = cache.collector.applyGc([readyPod('cached'), readyPod('orphan')], [], Date.now())
    expect(plan.deletePods.map((d) => d.name)).to.deep.equal(['orphan'])
    await Promise.resolve()
    expect(calls.deleted.map((d) => d.name)).to.deep.equal(['orphan'])
    expect(Object.keys(states(cache))).to.deep.equal(['cached'])
  })

  it('close abandons starting pods, keeps the others for the next runner to adopt, and refuses new calls', async () => {
    const {manager, calls} = fakeManager()
    const cache = makeCache(manager)
    await cache.adopt([readyPod('kept')])
    const starting = cache.warm('example.com/fn/other:v1')
    starting.catch(() => {})
    cache.close()
    const err = await cache.acquire(IMG).then(() => undefined, (e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError).with.property('kind', 'Unavailable')
    expect((err as Error).message).to.equal('the pod runtime is shutting down')
    expect(cache.snapshot()).to.deep.equal([])
    expect(calls.deleted, 'no pod deleted at shutdown').to.deep.equal([])
  })
})

describe('GC without the test bed (PodCache.collector, PodGarbageCollector)', () => {
  it('collectGarbage lists and applies one pass; when the replica Leases cannot be read, other owners count as live and their pods stay', async () => {
    const foreignFailed = readyPod('foreign-failed', {owner: 'runner-b'})
    foreignFailed.status = {phase: 'Failed'}
    const {manager, calls} = fakeManager({pods: [readyPod('orphan'), foreignFailed]})
    const warnings: string[] = []
    const logger = {...silentLogger, warn: (msg: string) => warnings.push(msg)}
    const cache = makeCache(manager, {logger, replicas: {observe: () => Promise.reject(new Error('leases: 403')), deleteLease: async () => false}})
    try {
      const plan = await cache.collector.collectGarbage()
      expect(plan.deletePods.map((d) => d.name)).to.deep.equal(['orphan'])
      await Promise.resolve()
      expect(calls.deleted.map((d) => d.name)).to.deep.equal(['orphan'])
      expect(warnings).to.include("cannot list replica leases; leaving other replicas' pods alone in this pass")
    } finally {
      cache.close()
    }
  })

  it('runs one collection at a time (a second request joins it); a failing one is logged and the next one runs', async () => {
    let calls = 0
    let finish: (plan: GcPlan) => void = () => {}
    const empty: GcPlan = {expire: [], deletePods: [], deleteServices: [], reclaim: [], adopt: []}
    const outcomes: Array<() => Promise<GcPlan>> = [() => new Promise<GcPlan>((resolve) => (finish = resolve)), () => Promise.reject(new Error('API down')), () => Promise.resolve(empty)]
    const warnings: string[] = []
    const gc = new PodGarbageCollector({collectGarbage: () => outcomes[calls++]!()}, 0, {...silentLogger, warn: (msg: string, fields?: Record<string, unknown>) => warnings.push(`${msg}: ${String(fields?.error)}`)})
    const first = gc.runOnce()
    const joined = gc.runOnce()
    finish(empty)
    expect(await first).to.equal(empty)
    expect(await joined).to.equal(empty)
    expect(calls).to.equal(1)
    expect(await gc.runOnce()).to.equal(undefined)
    expect(warnings).to.deep.equal(['pod garbage collection failed: API down'])
    expect(await gc.runOnce()).to.equal(empty)
    expect(gc.runs).to.equal(2)
    await gc.stop()
    expect(await gc.runOnce(), 'nothing after stop').to.equal(undefined)
    expect(calls).to.equal(3)
  })
})

async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 5))
  }
}
