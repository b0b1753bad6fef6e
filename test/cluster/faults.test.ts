/**
 * The pod runtime's API and watch fault tests (test/pods/faults.test.ts) on the real control plane: fnr's pod
 * runtime talks to kube-apiserver through the fault-injecting proxy (test/support/cluster/fault-proxy.ts) with
 * a ServiceAccount token bound to fnr's own pod-namespace Role (manifests/rbac.yaml), and its pods run real
 * images under runc. Injected: 5xx/429 on pod and Service creation, 409 conflicts, a persistent 503, watches
 * closed cleanly, reset, and expired (410 in the stream) while a pod starts and after it runs.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {parse, parseAllDocuments, stringify} from 'yaml'

import {FnrError} from '../../src/lib/errors.js'
import {PodEvaluator} from '../../src/lib/evaluators/pod.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {startPodRuntime, type PodRuntimeOptions} from '../../src/lib/pods/runtime/runtime.js'
import {waitCrdsEstablished, type ControlPlane} from '../support/cluster/controlplane.js'
import {FaultProxy} from '../support/cluster/fault-proxy.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {KubeRequestError, type KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushScriptFunctionImage} from '../support/node/fixtures.js'
import {pushFunctionPodImages} from '../support/node/function-images.js'
import {RL, testRuntimeOptions, type RuntimeHandle} from '../support/pods/index.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'

const FUNCTION_PATH = '/usr/local/bin/function'

describe('pod runtime: API and watch faults on the real control plane (through a fault-injecting proxy)', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let ns: {name: string; remove: () => Promise<void>}
  let proxy: FaultProxy
  let registry: TestRegistry
  let dir: string
  let kubeconfig: string
  let fnImage: string
  let stderrImage: string
  let wrapperImage: string
  let h: RuntimeHandle & {runtime: Awaited<ReturnType<typeof startPodRuntime>>} | undefined

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    const t = Date.now()
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    ns = await namespace(cp, 'faults')
    dir = await mkdtemp(path.join(tmpdir(), 'fnr-cluster-faults-'))
    registry = await TestRegistry.start({mode: 'none'})
    ;({wrapperImage, fnImage} = await pushFunctionPodImages(registry))
    await pushScriptFunctionImage(registry, 'fn/busybox-stderr:v1', '#!/bin/sh\necho "working on it" >&2\nexec /bin/busybox cat\n')
    stderrImage = `${registry.host}/fn/busybox-stderr:v1`
    // A ServiceAccount with fnr's own pod-namespace Role (manifests/rbac.yaml), in this suite's namespace.
    const docs = parseAllDocuments(await readFile(path.join(REPO_ROOT, 'manifests', 'rbac.yaml'), 'utf8')).map((d) => d.toJS() as KubeObject)
    // Both of its Roles' rules (the runner's namespace is the pod namespace here): the template ConfigMap's too.
    // and the function-config component's Role (FunctionConfigs, their status, the base templates)
    const fcDocs = parseAllDocuments(await readFile(path.join(REPO_ROOT, 'manifests', 'function-config', 'rbac.yaml'), 'utf8')).map((d) => d.toJS() as KubeObject)
    const roles = [...docs, ...fcDocs].filter((d) => d.kind === 'Role' && ['porch-fn-system', 'porch-system'].includes(d.metadata.namespace as string))
    expect(roles).to.have.length(3)
    await admin.create(`/api/v1/namespaces/${ns.name}/serviceaccounts`, {apiVersion: 'v1', kind: 'ServiceAccount', metadata: {name: 'runner'}})
    await admin.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/roles`, {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: {name: 'runner', namespace: ns.name}, rules: roles.flatMap((r) => r.rules as KubeObject[])})
    await admin.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: {name: 'runner'},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runner'},
      subjects: [{kind: 'ServiceAccount', name: 'runner', namespace: ns.name}],
    })
    const token = await admin.create(`/api/v1/namespaces/${ns.name}/serviceaccounts/runner/token`, {apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {expirationSeconds: 3600}})
    proxy = await FaultProxy.start(cp.url, cp.caPem)
    kubeconfig = path.join(dir, 'kubeconfig')
    await writeFile(kubeconfig, proxy.kubeconfigFor(token.status.token as string, ns.name))
    console.log(`      setup (namespace, RBAC, images pushed, proxy): ${Date.now() - t} ms`)
  })
  after(async function () {
    this.timeout(60_000)
    await h?.close()
    await proxy?.stop()
    await ns?.remove()
    await registry?.stop()
    admin?.close()
    if (dir) await rm(dir, {recursive: true, force: true})
  })
  afterEach(async function () {
    this.timeout(60_000)
    await h?.close()
    h = undefined
    proxy.faults.clear()
    // the next test starts without pods (no adoption across tests)
    const r = await cp.kubectl(['delete', 'pods', '-n', ns.name, '-l', 'app.kubernetes.io/managed-by=fnr', '--wait=true'])
    expect(r.code, r.stderr).to.equal(0)
  })

  function options(extra: Partial<PodRuntimeOptions> = {}): PodRuntimeOptions {
    const metadata = new StaticMetadataSource((img) => ([fnImage, stderrImage].includes(img) ? [FUNCTION_PATH] : undefined))
    const place = {namespace: ns.name, runnerNamespace: ns.name, wrapperServerImage: wrapperImage, metadata, kube: {kubeconfig}, owner: 'runner-a'}
    return testRuntimeOptions(place, {leaseDurationMs: 0, orphanMinAgeMs: 0, ...extra})
  }

  async function start(extra: Partial<PodRuntimeOptions> = {}): Promise<NonNullable<typeof h>> {
    const runtime = await startPodRuntime(options(extra))
    const evaluator = new PodEvaluator({cache: runtime.cache, ready: runtime.warmedUp, close: () => runtime.close()})
    await runtime.started
    h = {runtime, evaluator, close: () => evaluator.close()}
    return h
  }

  const evaluate = (img = fnImage) => h!.evaluator.evaluate({image: img, resourceList: RL, deadline: Date.now() + 90_000})
  const pods = async (): Promise<KubeObject[]> =>
    ((await admin.get(`/api/v1/namespaces/${ns.name}/pods`, {labelSelector: 'app.kubernetes.io/managed-by=fnr'})).items as KubeObject[]).filter((p) => !p.metadata.deletionTimestamp)
  const creates = (resource: string) => proxy.requestsFor({verb: 'create', resource, namespace: ns.name})

  it('retries pod and Service creation through API 5xx and 429 (Retry-After)', async () => {
    await start()
    proxy.failNext({verb: 'create', resource: 'pods', namespace: ns.name, code: 500, times: 2})
    proxy.failNext({verb: 'create', resource: 'services', namespace: ns.name, code: 429, times: 1, retryAfterSeconds: 1})
    const before = creates('pods').length
    const res = await evaluate()
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(creates('pods').slice(before).map((r) => r.code)).to.deep.equal([500, 500, 201])
    expect(creates('services').slice(-2).map((r) => r.code)).to.deep.equal([429, 201])
    expect(await pods()).to.have.length(1)
  })

  it('a 409 on pod creation (name taken) retries under a new name; a 409 on the Service reuses or recreates it', async () => {
    await start()
    proxy.failNext({verb: 'create', resource: 'pods', namespace: ns.name, code: 409, times: 1})
    proxy.failNext({verb: 'create', resource: 'services', namespace: ns.name, code: 409, times: 1})
    const before = creates('pods').length
    await evaluate()
    const attempts = creates('pods').slice(before)
    expect(attempts.map((r) => r.code)).to.deep.equal([409, 201])
    expect(attempts[0]!.injected).to.equal(true)
    const [pod] = await pods()
    expect(pod, 'one pod').to.not.equal(undefined)
    expect(await pods()).to.have.length(1)
    // the Service the pod is dialled by exists (recreated after the injected 409)
    expect((await admin.raw('GET', `/api/v1/namespaces/${ns.name}/services/${pod!.metadata.name}`)).code).to.equal(200)
  })

  it('a persistent API failure fails the call with a short one-line Unavailable message (no headers or bodies); it recovers once the API does', async () => {
    await start()
    const rule = proxy.failNext({verb: 'create', resource: 'pods', namespace: ns.name, code: 503, times: Infinity, message: 'etcd is sad'})
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
    expect(h!.runtime.cache.snapshot()).to.deep.equal([])
    expect(await pods()).to.have.length(0)
    const res = await evaluate()
    expect(res.resourceList.toString()).to.equal(RL.toString())
  })

  it('survives pod watches closed, reset and expired (410 in the stream) while a pod starts', async () => {
    await start()
    const starts = h!.runtime.manager.watchStarts
    await eventually(() => proxy.liveWatches({resource: 'pods', namespace: ns.name}) > 0, 10_000, 50).catch(() => {
      throw new Error(`no pod watch through the proxy: ${JSON.stringify(proxy.requests.filter((r) => r.resource === 'pods').slice(-5))}`)
    })
    proxy.addLatency({verb: 'create', resource: 'pods', namespace: ns.name, ms: 300, times: 1})
    const p = evaluate()
    let round = 0
    let dropped = 0
    const dropper = setInterval(() => {
      const r = round++ % 3
      dropped += r === 2 ? proxy.expireWatches({resource: 'pods', namespace: ns.name}) : proxy.dropWatches({resource: 'pods', namespace: ns.name, mode: r === 0 ? 'end' : 'destroy'})
    }, 150)
    try {
      const res = await p
      expect(res.resourceList.toString()).to.equal(RL.toString())
    } finally {
      clearInterval(dropper)
    }
    expect(dropped, 'watches were cut while the pod started').to.be.greaterThan(2)
    await eventually(() => h!.runtime.manager.watchStarts > starts, 30_000, 50)
    // and the pod watch still works: a second image's pod becomes ready through it
    const res = await evaluate(stderrImage)
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(await pods()).to.have.length(2)
  })

  it('still sees a pod go after its watch was reset and expired (the watch resumes with a fresh list)', async () => {
    await start()
    await evaluate()
    const [first] = await pods()
    const starts = h!.runtime.manager.watchStarts
    proxy.dropWatches({resource: 'pods', namespace: ns.name, mode: 'destroy'})
    proxy.expireWatches({resource: 'pods', namespace: ns.name})
    // the pod is deleted behind fnr's back (as by an operator), while its watch is down or resuming
    await admin.delete(`/api/v1/namespaces/${ns.name}/pods/${first!.metadata.name}`, {apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0})
    await eventually(() => h!.runtime.cache.snapshot().length === 0, 60_000, 100)
    expect(h!.runtime.manager.watchStarts).to.be.greaterThan(starts)
    await evaluate()
    const now = await pods()
    expect(now).to.have.length(1)
    expect(now[0]!.metadata.name).to.not.equal(first!.metadata.name)
  })

  it('the template ConfigMap\'s watch reset, expired and refused for a while: an edit made meanwhile is still seen (the idle pod is replaced)', async () => {
    const cm = parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-pod-template.yaml'), 'utf8')) as KubeObject
    const template = (team: string): string => {
      const pod = parse(cm.data.template as string) as KubeObject
      pod.metadata = {...pod.metadata, labels: {team}}
      pod.spec.initContainers[0].image = wrapperImage
      return stringify(pod)
    }
    await admin.create(`/api/v1/namespaces/${ns.name}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'tmpl'}, data: {template: template('red'), serviceTemplate: cm.data.serviceTemplate}})
    await start({templateConfigMap: 'tmpl', wrapperServerImage: undefined})
    await evaluate()
    const [red] = await pods()
    expect(red!.metadata.labels.team).to.equal('red')
    await eventually(() => proxy.liveWatches({resource: 'configmaps', namespace: ns.name}) > 0, 10_000, 50)
    // the next two watch attempts fail (500), the live one is reset, then the edit, then any new one expires
    const refusedWatches = proxy.failNext({verb: 'watch', resource: 'configmaps', namespace: ns.name, code: 500, times: 2})
    proxy.dropWatches({resource: 'configmaps', namespace: ns.name, mode: 'destroy'})
    await admin.patch(`/api/v1/namespaces/${ns.name}/configmaps/tmpl`, {data: {template: template('blue')}}, 'merge')
    proxy.expireWatches({resource: 'configmaps', namespace: ns.name})
    await eventually(async () => !(await pods()).some((p) => p.metadata.uid === red!.metadata.uid), 60_000, 100)
    // the watcher kept trying through both refusals (it may have re-listed and seen the edit before them) and watches again
    await eventually(() => refusedWatches.hits === 2 && proxy.liveWatches({resource: 'configmaps', namespace: ns.name}) > 0, 30_000, 50)
    await evaluate()
    const [blue] = await pods()
    expect(blue!.metadata.labels.team).to.equal('blue')
  })

  it('Lease renewals survive injected 409s, a real conflict (the Lease written behind the replica\'s back) and a 503; another replica keeps seeing it live', async () => {
    const a = await start({leaseDurationMs: 3000, owner: 'runner-a'})
    await evaluate()
    const b = await startPodRuntime(options({owner: 'runner-b', leaseDurationMs: 5000}))
    try {
      await b.started
      const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${ns.name}/leases/fnr-replica-runner-a`
      // someone else writes the Lease (the replica's resourceVersion goes stale: kube-apiserver's own
      // 409). That writer can itself lose the race with a renewal (every second here): it reads
      // again and retries, as any client of a Lease does (CI saw its first write refused once).
      for (let attempt = 1; ; attempt++) {
        const current = await admin.get(leasePath)
        const written = await admin
          .replace(leasePath, {...current, metadata: {...current.metadata, annotations: {...current.metadata.annotations, touched: 'yes'}}})
          .then(
            () => true,
            (err: unknown) => {
              if (err instanceof KubeRequestError && err.code === 409 && attempt < 10) return false
              throw err
            },
          )
        if (written) break
      }
      const before = a.runtime.lease!.renewals
      const updates = () => proxy.requestsFor({verb: 'update', resource: 'leases', namespace: ns.name, name: 'fnr-replica-runner-a'})
      await eventually(() => a.runtime.lease!.conflicts >= 1 && a.runtime.lease!.renewals > before + 1, 30_000, 100)
      expect(updates().filter((r) => r.code === 409 && !r.injected).length, 'a 409 from kube-apiserver itself').to.equal(1)
      // then two injected ones in a row
      proxy.failNext({verb: 'update', resource: 'leases', namespace: ns.name, name: 'fnr-replica-runner-a', code: 409, times: 2})
      const beforeInjected = a.runtime.lease!.renewals
      await eventually(() => a.runtime.lease!.conflicts >= 3 && a.runtime.lease!.renewals > beforeInjected + 1, 30_000, 100)
      proxy.failNext({verb: 'update', resource: 'leases', namespace: ns.name, name: 'fnr-replica-runner-a', code: 503, times: 1})
      const after503 = a.runtime.lease!.renewals
      await eventually(() => a.runtime.lease!.renewals > after503 + 1, 30_000, 100)
      const lease = await admin.get(leasePath)
      expect(lease.spec.holderIdentity).to.equal('runner-a')
      expect(lease.metadata.annotations.touched).to.equal('yes')
      await b.gc.runOnce()
      expect((await pods()).map((p) => p.metadata.labels[LABEL_OWNER])).to.deep.equal(['runner-a'])
      expect(a.runtime.cache.snapshot()).to.have.length(1)
    } finally {
      await b.close()
    }
  })

  it('FunctionConfigs: the watch reset, expired and refused; objects created and deleted meanwhile are seen; a missing CRD at start is a one-line Config error', async () => {
    const crd = path.join(REPO_ROOT, 'manifests', 'function-config', 'crds', 'functionconfigs.yaml')
    const applied = await cp.kubectl(['apply', '--server-side', '--force-conflicts', '-f', crd])
    expect(applied.code, applied.stderr).to.equal(0)
    const established = await waitCrdsEstablished(cp, ['functionconfigs.config.porch.kpt.dev'])
    expect(established.code, established.stderr).to.equal(0)
    const fns = await makeFunctionsDir(dir)
    const base = serveOptions({...fns, disableRuntimes: 'pod'})
    const serve = {...base, functionConfig: {source: 'crd' as const, namespace: ns.name}, pod: {...base.pod, namespace: ns.name, kubeconfig}}
    const fcPath = `/apis/config.porch.kpt.dev/v1alpha1/namespaces/${ns.name}/functionconfigs`
    const code = (client: EvaluatorClient, img: string): Promise<number> =>
      client.evaluateRaw(img, RL, {deadline: Date.now() + 30_000}).then(() => 0, (e: grpc.ServiceError) => e.code)
    const running = await startInProcess(serve)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      await eventually(() => proxy.liveWatches({resource: 'functionconfigs', namespace: ns.name}) > 0, 10_000, 50)
      proxy.dropWatches({resource: 'functionconfigs', namespace: ns.name, mode: 'destroy'})
      await admin.create(fcPath, {apiVersion: 'config.porch.kpt.dev/v1alpha1', kind: 'FunctionConfig', metadata: {name: 'cat'}, spec: {image: 'cat', prefixes: ['example.com/drop'], binaryExecutor: {tags: ['v1'], path: 'cat'}}})
      await eventually(async () => (await code(client, 'example.com/drop/cat:v1')) === 0, 30_000, 100)
      // the watch is refused once and expires (410 in the stream) while the object is deleted
      await eventually(() => proxy.liveWatches({resource: 'functionconfigs', namespace: ns.name}) > 0, 10_000, 50)
      const refused = proxy.failNext({verb: 'watch', resource: 'functionconfigs', namespace: ns.name, code: 500, times: 1})
      proxy.expireWatches({resource: 'functionconfigs', namespace: ns.name})
      await admin.delete(`${fcPath}/cat`)
      await eventually(async () => (await code(client, 'example.com/drop/cat:v1')) === grpc.status.NOT_FOUND, 30_000, 100)
      await eventually(() => refused.hits === 1 && proxy.liveWatches({resource: 'functionconfigs', namespace: ns.name}) > 0, 30_000, 50)
    } finally {
      client.close()
      await running.stop()
    }
    // the API says the resource is not there (as without the CRD): one line, a Config error
    const fault = proxy.failNext({verb: 'list', resource: 'functionconfigs', namespace: ns.name, code: 404, times: 1, message: 'the server could not find the requested resource'})
    try {
      const err = await startInProcess(serve).catch((e: Error) => e)
      expect(err).to.be.instanceOf(Error)
      expect((err as Error).message).to.match(new RegExp(`^cannot list FunctionConfigs in namespace ${ns.name}: the FunctionConfig CRD \\(functionconfigs\\.config\\.porch\\.kpt\\.dev\\) is not installed`))
      expect((err as Error).message).to.not.include('\n')
    } finally {
      fault.cancel()
    }
  })

  it('adoption through API errors: a replica that starts while pod lists fail (503) and claims fail (500) still starts and adopts the pod the gone one left', async () => {
    const a = await start({owner: 'runner-a'})
    await evaluate()
    const names = (await pods()).map((p) => p.metadata.name as string)
    expect(names).to.have.length(1)
    await a.close()
    h = undefined
    const lists = proxy.failNext({verb: 'list', resource: 'pods', namespace: ns.name, code: 503, times: 3})
    const claims = proxy.failNext({verb: 'patch', resource: 'pods', namespace: ns.name, code: 500, times: 2})
    const createdBefore = creates('pods').length
    const b = await start({owner: 'runner-b'})
    expect(lists.hits).to.equal(3)
    await eventually(() => b.runtime.cache.snapshot().map((e) => e.name).join() === names.join(), 30_000, 100)
    expect(claims.hits, 'the claim patch failed first').to.be.at.least(1)
    const res = await evaluate()
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(creates('pods').length, 'the adopted pod served the call').to.equal(createdBefore)
    expect((await pods()).map((p) => p.metadata.name)).to.deep.equal(names)
  })

  it('a persistent API outage (503 on every list and delete) during GC deletes nothing; once the API answers, the expired pod and its Service go', async () => {
    const {runtime} = await start({ttlMs: 300})
    await evaluate()
    const [pod] = await pods()
    await new Promise((r) => setTimeout(r, 500))
    const outage = proxy.failNext({verb: ['list', 'delete'], namespace: ns.name, code: 503, times: Infinity})
    try {
      for (let i = 0; i < 2; i++) await runtime.gc.runOnce()
      expect(outage.hits).to.be.greaterThan(0)
    } finally {
      outage.cancel()
    }
    expect((await pods()).map((p) => p.metadata.uid)).to.deep.equal([pod!.metadata.uid])
    await eventually(async () => {
      await runtime.gc.runOnce()
      return (await pods()).length === 0 && (await admin.raw('GET', `/api/v1/namespaces/${ns.name}/services/${pod!.metadata.name}`)).code === 404
    }, 30_000, 200)
  })
})
