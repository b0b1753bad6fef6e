/**
 * Several runner replicas on one pod namespace (docs/replicas.md; upstream must run one replica because
 * replicas delete each other's pods, nephio#1069). Each replica holds a Lease; GC never touches a
 * live replica's pods; the pods of a replica that is gone are taken over or deleted by exactly one
 * of the others.
 */
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1Lease, V1Pod} from '@kubernetes/client-node'
import {parseAllDocuments} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {Logger} from '../../src/lib/telemetry/log.js'
import {LEASE_SELECTOR, leaseNameFor} from '../../src/lib/pods/cluster/lease.js'
import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {KubeRequestError} from '../support/k8s/client.js'
import {listPods, listServices, startClusterPodBed, startClusterRuntime, useClusterPodBed, wrapped, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until, closeAll, type RuntimeHandle} from '../support/pods/index.js'
import {runCli} from '../support/cli.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT, startServeProcess, type ServeProcess} from '../support/serve.js'

/** Records what a replica logs (message + fields), for "who did what". */
function recordingLogger(): Logger & {lines: Array<{msg: string; fields: Record<string, unknown>}>} {
  const lines: Array<{msg: string; fields: Record<string, unknown>}> = []
  const log = (msg: string, fields: Record<string, unknown> = {}): void => void lines.push({msg, fields})
  const logger = {lines, error: log, warn: log, lifecycle: log, info: log, request: log, debug: log, trace: log, enabled: () => true, child: () => logger}
  return logger
}

const leasesPath = (ns: string): string => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`

/** The Leases of a namespace, read from kube-apiserver. */
async function storedLeases(pb: ClusterPodBed, ns: string): Promise<V1Lease[]> {
  return (await pb.admin.get(leasesPath(ns))).items as V1Lease[]
}

/** One Lease, or undefined when kube-apiserver has none of that name. */
async function findLease(pb: ClusterPodBed, ns: string, name: string): Promise<V1Lease | undefined> {
  const res = await pb.admin.raw('GET', `${leasesPath(ns)}/${name}`)
  if (res.code === 404) return undefined
  if (res.code !== 200) throw new KubeRequestError(res.code, res.body, `GET lease ${ns}/${name}: HTTP ${res.code}`)
  return res.body as V1Lease
}

/** Someone else writes the Lease (an annotation): read, replace, again on a conflict with the holder's renewal. */
async function touchLease(pb: ClusterPodBed, ns: string, name: string): Promise<void> {
  for (;;) {
    const current = (await findLease(pb, ns, name))!
    try {
      await pb.admin.replace(`${leasesPath(ns)}/${name}`, {...current, metadata: {...current.metadata, annotations: {...current.metadata!.annotations, touched: 'yes'}}})
      return
    } catch (err) {
      if (!(err instanceof KubeRequestError && err.code === 409)) throw err
    }
  }
}

const ownerOf = (p: V1Pod): string | undefined => p.metadata?.labels?.[LABEL_OWNER]
const imageOf = (p: V1Pod): string | undefined => p.metadata?.annotations?.[ANNOTATION_IMAGE]

describe('several replicas on one pod namespace (in process)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let ns: string
  const handles: RuntimeHandle[] = []

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: () => closeAll(handles),
  })

  async function start(owner: string, overrides: Parameters<typeof startClusterRuntime>[1] = {}): Promise<RuntimeHandle & {log: ReturnType<typeof recordingLogger>}> {
    const log = recordingLogger()
    // Replicas that must stay live hold 5 s Leases (a loaded machine may stall the event loop for
    // a while); the ones a test lets die hold 1 s Leases, so that they expire soon.
    const h = await startClusterRuntime(pb, {namespace: ns, owner, leaseDurationMs: 5000, foreignGraceMs: 0, logger: log, ...overrides})
    handles.push(h)
    return {...h, log}
  }

  /** A replica that dies without a word: no more renewals, no release, channels closed. */
  async function crash(h: RuntimeHandle): Promise<void> {
    h.runtime.lease!.abandon()
    await h.close()
    handles.splice(handles.indexOf(handles.find((x) => x.runtime === h.runtime)!), 1)
  }

  it('each replica holds a Lease; GC on every replica never deletes another live replica\'s pods (upstream: replicas delete each other\'s pods, nephio#1069)', async () => {
    const replicas = await Promise.all(['runner-a', 'runner-b', 'runner-c'].map((o) => start(o)))
    for (const r of replicas) {
      for (const img of [image('cat'), image('stderr')]) {
        const res = await r.evaluator.evaluate({image: img, resourceList: RL, deadline: Date.now() + 60_000})
        expect(res.resourceList.toString()).to.equal(RL.toString())
      }
    }
    const pods = await listPods(pb, ns)
    expect(pods).to.have.length(6)
    expect(pods.map(ownerOf).sort()).to.deep.equal(['runner-a', 'runner-a', 'runner-b', 'runner-b', 'runner-c', 'runner-c'])
    const leases = await storedLeases(pb, ns)
    expect(leases.map((l) => [l.metadata!.name, l.spec!.holderIdentity, l.spec!.leaseDurationSeconds]).sort()).to.deep.equal([
      ['fnr-replica-runner-a', 'runner-a', 5],
      ['fnr-replica-runner-b', 'runner-b', 5],
      ['fnr-replica-runner-c', 'runner-c', 5],
    ])
    expect(String(leases[0]!.spec!.renewTime)).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
    // Every pod looks long abandoned by its annotations (the lone-runner rule would delete them)...
    const longAgo = new Date(Date.now() - 3 * 3600_000).toISOString()
    for (const p of pods) await pb.admin.patch(`/api/v1/namespaces/${ns}/pods/${p.metadata!.name!}`, {metadata: {annotations: {[ANNOTATION_LAST_USED]: longAgo}}})
    // ...and the Leases are renewed for several lease durations while every replica collects.
    const renewals = replicas.map((r) => r.runtime.lease!.renewals)
    const until4s = Date.now() + 4000
    while (Date.now() < until4s) {
      for (const r of replicas) await r.runtime.gc.runOnce()
      await new Promise((res) => setTimeout(res, 100))
    }
    replicas.forEach((r, i) => expect(r.runtime.lease!.renewals).to.be.greaterThan(renewals[i]!))
    expect((await listPods(pb, ns, {includeDeleting: true})).map((p) => p.metadata!.name).sort()).to.deep.equal(pods.map((p) => p.metadata!.name).sort())
    expect(await listServices(pb, ns)).to.have.length(6)
    // a replica starting now adopts none of them (they belong to live replicas)
    const d = await start('runner-d')
    expect(d.runtime.cache.snapshot()).to.deep.equal([])
    await d.runtime.gc.runOnce()
    expect(await listPods(pb, ns)).to.have.length(6)
  })

  it('a replica that dies: once its Lease expires, exactly one other replica takes each of its pods over (idle, ready: adopted; else deleted); no pod in use is deleted and calls keep succeeding', async () => {
    const a = await start('runner-a', {scanIntervalMs: 200, leaseDurationMs: 1000})
    const b = await start('runner-b', {scanIntervalMs: 200})
    const c = await start('runner-c', {scanIntervalMs: 200})
    for (const r of [a, b, c]) await r.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    await a.evaluator.evaluate({image: image('stderr'), resourceList: RL, deadline: Date.now() + 60_000})
    const byOwner = async (o: string): Promise<string[]> => (await listPods(pb, ns)).filter((p) => ownerOf(p) === o).map((p) => p.metadata!.name!).sort()
    const listed = await listPods(pb, ns)
    const [aCat, aStderr] = [image('cat'), image('stderr')].map((img) => listed.find((p) => ownerOf(p) === 'runner-a' && imageOf(p) === img)!.metadata!.name!)
    const bAndC = [...(await byOwner('runner-b')), ...(await byOwner('runner-c'))]

    // b and c keep serving (and holding calls on their own pods) the whole time
    let stop = false
    let calls = 0
    const failures: unknown[] = []
    const load = Promise.all(
      [b, c].map(async (r) => {
        while (!stop) {
          await r.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000}).then(
            () => calls++,
            (err: unknown) => failures.push(err),
          )
        }
      }),
    )
    await crash(a)
    await until(async () => (await byOwner('runner-a')).length === 0, 'runner-a\'s pods taken over or deleted', 30_000)
    await until(async () => !(await findLease(pb, ns, leaseNameFor('runner-a'))), 'runner-a\'s Lease deleted once it has no pods', 30_000)
    stop = true
    await load
    expect(failures).to.deep.equal([])
    expect(calls).to.be.greaterThan(0)

    // stderr (an image b and c did not have): adopted by exactly one of them, not recreated
    const adopted = (await listPods(pb, ns)).find((p) => p.metadata!.name === aStderr)!
    expect(adopted, 'the idle pod is kept').to.not.equal(undefined)
    expect(['runner-b', 'runner-c']).to.include(ownerOf(adopted))
    const holders = [b, c].filter((r) => r.runtime.cache.slotFor(aStderr))
    expect(holders).to.have.length(1)
    expect(holders[0]!.runtime.cache.snapshot().find((s) => s.name === aStderr)!.state).to.equal('ready')
    const adoptedBy = [b, c].filter((r) => r.log.lines.some((l) => l.msg === 'adopted function pod' && l.fields.pod === aStderr))
    expect(adoptedBy).to.have.length(1)
    const res = await holders[0]!.evaluator.evaluate({image: image('stderr'), resourceList: RL, deadline: Date.now() + 60_000})
    expect(res.log.toString()).to.equal('working on it\n')
    expect((await listPods(pb, ns)).filter((p) => imageOf(p) === image('stderr')).map((p) => p.metadata!.name)).to.deep.equal([aStderr])

    // cat (both have one already, at most one pod per image): deleted, by one replica only
    await until(async () => !(await listPods(pb, ns, {includeDeleting: true})).some((p) => p.metadata!.name === aCat), 'runner-a\'s cat pod deleted')
    const deletedBy = [b, c].filter((r) => r.log.lines.some((l) => l.msg === 'deleted a function pod of a replica that is gone' && l.fields.pod === aCat))
    expect(deletedBy, 'exactly one replica deleted it').to.have.length(1)
    // b's and c's own pods are all still there
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.include.members(bAndC)
  })

  it('a graceful stop releases the Lease (holderIdentity ""), so another replica takes the pods over at its next pass, without waiting for expiry', async () => {
    const a = await start('runner-a', {leaseDurationMs: 3_600_000})
    const b = await start('runner-b', {leaseDurationMs: 3_600_000})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    const [name] = (await listPods(pb, ns)).map((p) => p.metadata!.name!)
    await b.runtime.gc.runOnce()
    expect(b.runtime.cache.snapshot()).to.deep.equal([])
    await a.close()
    handles.splice(handles.indexOf(handles.find((h) => h.runtime === a.runtime)!), 1)
    const lease = (await findLease(pb, ns, 'fnr-replica-runner-a'))!
    expect(lease.spec!.holderIdentity).to.equal('')
    await b.runtime.gc.runOnce()
    expect(b.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal([name])
    expect(ownerOf((await listPods(pb, ns))[0]!)).to.equal('runner-b')
    await b.runtime.gc.runOnce()
    expect(await findLease(pb, ns, 'fnr-replica-runner-a')).to.equal(undefined)
    expect((await storedLeases(pb, ns)).map((l) => l.spec!.holderIdentity)).to.deep.equal(['runner-b'])
  })

  it('a restarted replica with a stable id (a restarted container keeps POD_NAME) adopts its own pods at once, even while its old Lease looks live', async () => {
    const a = await start('runner-a', {leaseDurationMs: 3_600_000})
    const b = await start('runner-b', {leaseDurationMs: 3_600_000})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    const names = (await listPods(pb, ns)).map((p) => p.metadata!.name!)
    await crash(a)
    await b.runtime.gc.runOnce()
    expect(b.runtime.cache.snapshot()).to.deep.equal([])
    const a2 = await start('runner-a', {leaseDurationMs: 3_600_000})
    expect(a2.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal(names)
    expect(a2.runtime.lease!.renewals).to.be.greaterThan(0)
    await a2.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.deep.equal(names)
  })

  it('a claim that meets a 409 (the pod changed since it was listed, same owner) reads the pod again and claims it', async () => {
    const a = await start('runner-a', {leaseDurationMs: 3_600_000})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    const names = (await listPods(pb, ns)).map((p) => p.metadata!.name!)
    await crash(a)
    pb.proxy.failNext({verb: 'patch', resource: 'pods', namespace: ns, code: 409, times: 1})
    const a2 = await start('runner-a', {leaseDurationMs: 3_600_000})
    expect(a2.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal(names)
    expect(pb.proxy.requestsFor({verb: 'get', resource: 'pods', namespace: ns, name: names[0]}).length).to.be.greaterThan(0)
  })

  it('a replica whose Lease expired while it was cut off lets the pods another replica took over go, without deleting them', async () => {
    const a = await start('runner-a', {leaseDurationMs: 1000})
    const b = await start('runner-b', {scanIntervalMs: 200})
    await a.evaluator.evaluate({image: image('stderr'), resourceList: RL, deadline: Date.now() + 60_000})
    const [name] = (await listPods(pb, ns)).map((p) => p.metadata!.name!)
    a.runtime.lease!.abandon() // cut off from the API server: no renewals
    await until(() => b.runtime.cache.slotFor(name!), 'b took the pod over', 30_000)
    await until(() => !a.runtime.cache.slotFor(name!), 'a let it go', 30_000)
    expect(a.log.lines.some((l) => l.msg === 'function pod evicted' && String(l.fields.reason).includes('taken over by replica runner-b'))).to.equal(true)
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.deep.equal([name])
    const res = await b.evaluator.evaluate({image: image('stderr'), resourceList: RL, deadline: Date.now() + 60_000})
    expect(res.log.toString()).to.equal('working on it\n')
  })

  it('Lease renewals survive update conflicts (409) and API errors, and other replicas keep seeing the Lease live', async () => {
    const a = await start('runner-a', {leaseDurationMs: 3000})
    const b = await start('runner-b')
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    pb.proxy.failNext({verb: 'update', resource: 'leases', namespace: ns, name: 'fnr-replica-runner-a', code: 409, times: 3})
    // someone else writes the Lease behind a's back (its resourceVersion goes stale)
    await touchLease(pb, ns, 'fnr-replica-runner-a')
    const before = a.runtime.lease!.renewals
    await until(() => a.runtime.lease!.conflicts >= 3 && a.runtime.lease!.renewals > before + 2, 'renewed again after the conflicts', 30_000)
    pb.proxy.failNext({verb: 'update', resource: 'leases', namespace: ns, name: 'fnr-replica-runner-a', code: 503, times: 1})
    const after503 = a.runtime.lease!.renewals
    await until(() => a.runtime.lease!.renewals > after503 + 1, 'renewed after a 503', 30_000)
    const lease = (await findLease(pb, ns, 'fnr-replica-runner-a'))!
    expect(lease.spec!.holderIdentity).to.equal('runner-a')
    await b.runtime.gc.runOnce()
    expect((await listPods(pb, ns)).map(ownerOf)).to.deep.equal(['runner-a'])
    expect(a.runtime.cache.snapshot()).to.have.length(1)
  })

  it('without Lease rights (403) or with --replica-lease-duration=0 a replica still starts and serves; the others treat its pods as a lone runner\'s', async () => {
    pb.proxy.failNext({resource: 'leases', namespace: ns, name: 'fnr-replica-runner-a', code: 403, times: 1000, message: 'leases.coordination.k8s.io is forbidden'})
    const a = await start('runner-a')
    const z = await start('runner-z', {leaseDurationMs: 0})
    for (const r of [a, z]) await r.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    expect(a.log.lines.some((l) => l.msg.startsWith('cannot acquire the replica lease yet'))).to.equal(true)
    expect(await storedLeases(pb, ns)).to.deep.equal([])
    expect(z.runtime.lease).to.equal(undefined)
    const before = (await listPods(pb, ns)).map((p) => p.metadata!.name!).sort()
    // A replica starting takes over usable pods of runners without a Lease, as a restarted lone
    // runner does (upstream compatibility), but only up to the image's limit (one here): the
    // other one it cannot use is left alone (a lone runner may be alive), and its GC deletes
    // nothing of theirs (lone-runner rule: only well past their TTL).
    const b = await start('runner-b')
    expect(b.runtime.cache.snapshot()).to.have.length(1)
    await b.runtime.gc.runOnce()
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name).sort()).to.deep.equal(before)
    const [taken] = b.runtime.cache.snapshot().map((x) => x.name)
    // the runner whose pod it took lets it go without deleting it, and starts another when needed
    const loser = [a, z].find((r) => r.log.lines.some((l) => l.msg === 'function pod ready' && l.fields.pod === taken))!
    await until(() => !loser.runtime.cache.slotFor(taken!), 'the runner let its pod go')
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name).sort()).to.deep.equal(before)
    for (const r of [a, z, b]) await r.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.include.members(before)
  })

  it('the Lease calls fnr makes are exactly what the Role in manifests/ allows', async () => {
    const a = await start('runner-a', {scanIntervalMs: 200, leaseDurationMs: 1000})
    const b = await start('runner-b', {scanIntervalMs: 200})
    await a.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
    await crash(a)
    await until(async () => !(await findLease(pb, ns, 'fnr-replica-runner-a')), 'lease of the dead replica deleted', 30_000)
    await b.close()
    handles.splice(0)
    const verbs = new Set(pb.proxy.requestsFor({resource: 'leases', namespace: ns}).map((r) => r.verb))
    const docs = parseAllDocuments(await readFile(path.join(REPO_ROOT, 'manifests', 'rbac.yaml'), 'utf8')).map((d) => d.toJS() as {kind: string; metadata: {namespace: string}; rules?: Array<{apiGroups: string[]; resources: string[]; verbs: string[]}>})
    const role = docs.find((d) => d.kind === 'Role' && d.metadata.namespace === 'porch-fn-system')!
    const rule = role.rules!.find((r) => r.apiGroups.includes('coordination.k8s.io') && r.resources.includes('leases'))!
    expect([...verbs].sort()).to.deep.equal([...rule.verbs].sort())
    // what other replicas list by
    expect(LEASE_SELECTOR).to.equal('app.kubernetes.io/managed-by=fnr,app.kubernetes.io/component=replica-lease')
  })
})

describe('several replicas: three `fnr serve` processes on one pod namespace, one killed', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let registry: TestRegistry
  let authFile: string
  const children: ServeProcess[] = []
  const clients: EvaluatorClient[] = []

  before(async () => {
    registry = await TestRegistry.start({mode: 'tls'})
    authFile = await registry.writeAuthFile('testuser', 'testpass')
    pb = await startClusterPodBed()
    for (const name of ['cat', 'stderr']) {
      await pushImage(registry, `fn/${name}:v1`, {entrypoint: ['/usr/local/bin/function'], files: {'usr/local/bin/function': '#!/bin/sh\ncat\n'}}, authFile)
      pb.kubelet.setImage(`${registry.host}/fn/${name}:v1`, wrapped({'/usr/local/bin/function': path.join(pb.dir, 'functions', name)}))
    }
  })
  after(async () => {
    for (const c of clients) c.close()
    for (const child of children) if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill('SIGKILL')
    await Promise.all(children.map((c) => c.exited))
    await pb?.stop()
    await registry?.stop()
  })

  it('each serves calls on its own pods; GC never deletes the others\'; SIGKILL one → its Lease expires → one other takes its pods over; SIGTERM another → its Lease is released', async () => {
    const ns = await pb.namespace()
    const img = (name: string): string => `${registry.host}/fn/${name}:v1`
    const args = [
      '--disable-runtimes=exec',
      `--kubeconfig=${pb.kubeconfigPath}`,
      `--pod-namespace=${ns}`,
      '--warm-up-pod-cache=false',
      '--pod-cache-config=',
      '--pod-address=pod-ip',
      '--scan-interval=300ms',
      '--pod-ttl=1h',
      '--enable-private-registries',
      `--registry-auth-secret-path=${authFile}`,
      '--enable-private-registries-tls',
      `--tls-secret-path=${registry.certDir}`,
    ]
    // The default identity: no POD_NAME here, so the host name plus a random suffix per process.
    // Replica 0 (killed below) holds a 2 s Lease; the others 5 s, robust to a loaded machine.
    for (let i = 0; i < 3; i++) children.push(await startServeProcess([...args, `--replica-lease-duration=${i === 0 ? '2s' : '5s'}`], {WRAPPER_SERVER_IMAGE: WRAPPER_IMAGE, POD_NAME: ''}))
    for (const c of children) clients.push(new EvaluatorClient(`127.0.0.1:${c.port}`))
    const call = (i: number, name: string) => clients[i]!.evaluateRaw(img(name), RL, {deadline: Date.now() + 60_000})
    for (let i = 0; i < 3; i++) {
      const res = await call(i, 'cat')
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
    }
    await call(0, 'stderr')
    const ids = children.map((c) => {
      const m = /"owner":"([^"]+)"[^\n]*"msg":"pod runtime started"|"msg":"pod runtime started"[^\n]*"owner":"([^"]+)"/.exec(c.stderr())
      return m?.[1] ?? m?.[2]
    })
    expect(new Set(ids).size, children.map((c) => c.stderr()).join('\n')).to.equal(3)
    for (const id of ids) expect(id).to.match(/-[a-z0-9]{5}$/)
    const pods = await listPods(pb, ns)
    expect(pods.map(ownerOf).sort()).to.deep.equal([ids[0], ids[0], ids[1], ids[2]].sort())
    const leaseHolders = async (): Promise<Array<string | undefined>> => (await storedLeases(pb, ns)).map((l) => l.spec!.holderIdentity).sort()
    expect(await leaseHolders()).to.deep.equal([...ids].sort())
    // `fnr pods ls` shows which replica owns each pod
    const ls = await runCli(['pods', 'ls', '--json', '--kubeconfig', pb.kubeconfigPath, '-n', ns])
    expect(ls.exitCode, ls.stderr).to.equal(0)
    const listed = (JSON.parse(ls.stdout) as {pods: Array<{pod: string; owner: string}>}).pods
    expect(listed.map((p) => [p.pod, p.owner]).sort()).to.deep.equal(pods.map((p) => [p.metadata!.name, ownerOf(p)]).sort())

    // several GC passes of every replica go by: nothing is deleted
    await new Promise((r) => setTimeout(r, 2500))
    expect((await listPods(pb, ns, {includeDeleting: true})).map((p) => p.metadata!.name).sort()).to.deep.equal(pods.map((p) => p.metadata!.name).sort())

    // SIGKILL replica 0 while 1 and 2 keep serving
    let stop = false
    const failures: unknown[] = []
    let calls = 0
    const load = Promise.all(
      [1, 2].map(async (i) => {
        while (!stop) await call(i, 'cat').then(() => calls++, (e: unknown) => failures.push(e))
      }),
    )
    const stderrPod = pods.find((p) => ownerOf(p) === ids[0] && imageOf(p) === img('stderr'))!.metadata!.name!
    children[0]!.child.kill('SIGKILL')
    await children[0]!.exited
    await until(async () => !(await listPods(pb, ns)).some((p) => ownerOf(p) === ids[0]), 'the killed replica\'s pods taken over or deleted', 60_000)
    await until(async () => !(await storedLeases(pb, ns)).some((l) => l.metadata!.labels![LABEL_OWNER] === ids[0]), 'its Lease deleted', 60_000)
    stop = true
    await load
    expect(failures).to.deep.equal([])
    expect(calls).to.be.greaterThan(0)
    // its idle stderr pod was adopted (kept, owned by one of the two), its cat pod deleted
    const taken = (await listPods(pb, ns)).find((p) => p.metadata!.name === stderrPod)
    expect(taken, 'adopted, not deleted').to.not.equal(undefined)
    expect([ids[1], ids[2]]).to.include(ownerOf(taken!))
    const adopter = ids.indexOf(ownerOf(taken!))
    const adoptedLines = [1, 2].filter((i) => children[i]!.stderr().includes(`"pod":"${stderrPod}"`) && /"msg":"adopted function pod"/.test(children[i]!.stderr().split('\n').filter((l) => l.includes(stderrPod)).join('\n')))
    expect(adoptedLines).to.deep.equal([adopter])
    const before = pb.proxy.requestsFor({verb: 'create', resource: 'pods', namespace: ns}).length
    const res = await call(adopter, 'stderr')
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(pb.proxy.requestsFor({verb: 'create', resource: 'pods', namespace: ns}).length, 'the adopted pod served it').to.equal(before)
    expect((await listPods(pb, ns)).filter((p) => ownerOf(p) === ids[1] || ownerOf(p) === ids[2]).length).to.be.at.least(3)

    // SIGTERM replica 1: it stops gracefully and releases its Lease
    const other = adopter === 1 ? 2 : 1
    children[other]!.child.kill('SIGTERM')
    expect((await children[other]!.exited).code).to.equal(0)
    expect(children[other]!.stderr()).to.contain('released the replica lease')
    await until(async () => !(await listPods(pb, ns)).some((p) => ownerOf(p) === ids[other]), 'the stopped replica\'s pods taken over by the last one', 60_000)
    expect((await listPods(pb, ns)).every((p) => ownerOf(p) === ids[adopter])).to.equal(true)
    const last = await call(adopter, 'cat')
    expect(last.resourceList.toString()).to.equal(RL.toString())
  })
})
