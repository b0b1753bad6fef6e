/**
 * The runner's suites moved to the real control plane (docs/cluster.md): every `fnr serve` here talks to
 * kube-apiserver with a token of the porch-fn-runner ServiceAccount (`kubectl apply -k` of manifests/ with the
 * function-config components, `kubectl create token`), never as admin, with fnr's default `--pod-address=service`
 * through the test DNS server, and its pods run real images under runc on the node:
 *   - the template ConfigMap (manifests/function-pod-template.yaml as shipped, `--function-pod-template`): pods made
 *     from it, an edit replaces the idle pod, a broken edit keeps the last good template, a missing one stops the start;
 *   - Porch's PodTemplate base-pod-template (`--function-config-source=crd`): watched the same way;
 *   - replicas: three `fnr serve` processes with Leases, one SIGKILLed (its Lease expires, one other takes its idle
 *     pod over), one SIGTERMed (its Lease is released);
 *   - `fnr test --runner` against an `fnr serve` with the pod runtime.
 * The in-process suites (test/pods/warmup-template.test.ts, test/config/function-config-crd-serve.test.ts,
 * test/pods/replicas.test.ts, test/fntest/runner.test.ts) stay for the cases that need a gate inside a function
 * or the test server's request log. Porch's namespaces are fixed names: like the other suites here, this file owns
 * them while it runs.
 */
import {expect} from 'chai'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {parse, stringify} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {ANNOTATION_IMAGE, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import {memoryLogger} from '../support/memory-logger.js'
import type {AuditEvent, ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {applyRunnerManifests, deletePorchNamespaces, POD_NS, porchNamespacesGone, RUNNER_NS, RUNNER_USER, runnerKubeconfig} from '../support/cluster/porch-namespaces.js'
import {runCli} from '../support/cli.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushScriptFunctionImage} from '../support/node/fixtures.js'
import {CAT_FUNCTION_SCRIPT, pushFunctionPodImages} from '../support/node/function-images.js'
import {TestDnsServer} from '../support/node/index.js'
import {RL} from '../support/pods/index.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess, startServeProcess, type ServeProcess} from '../support/serve.js'
import {PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'

const SA = RUNNER_USER
const FUNCTION_PATH = '/usr/local/bin/function'
const STDERR_FUNCTION_SCRIPT = '#!/bin/sh\necho "working on it" >&2\nexec /bin/busybox cat\n'

describe('the runner on the real control plane: template ConfigMap and PodTemplate watches, replicas, fnr test --runner', function () {
  this.timeout(240_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let dir: string
  let fns: {configPath: string; functionsDir: string}
  let kubeconfig: string
  let registry: TestRegistry
  let dns: TestDnsServer
  let wrapperImage: string
  let fnImage: string
  let stderrImage: string

  const saAudit = async (from: number): Promise<AuditEvent[]> =>
    (await cp.auditEvents()).slice(from).filter((e) => e.user.username === SA && e.stage === 'ResponseComplete')
  const refused = (events: AuditEvent[]): string[] =>
    events.filter((e) => [400, 403, 422].includes(e.responseStatus?.code ?? 0)).map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.code} ${e.responseStatus?.message}`)
  const fnrPods = async (): Promise<KubeObject[]> =>
    ((await admin.get(`/api/v1/namespaces/${POD_NS}/pods`, {labelSelector: 'app.kubernetes.io/managed-by=fnr'})).items as KubeObject[]).filter((p) => !p.metadata.deletionTimestamp)
  const clearPods = async (): Promise<void> => {
    const r = await cp.kubectl(['delete', 'pods', '-n', POD_NS, '-l', 'app.kubernetes.io/managed-by=fnr', '--wait=true'])
    expect(r.code, r.stderr).to.equal(0)
  }

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    const t = Date.now()
    cp = await sharedControlPlane()
    expect(cp.runtime, 'the shared control plane runs pods under runc').to.not.equal(undefined)
    admin = adminClient(cp)
    // An earlier suite may still be deleting Porch's namespaces.
    await porchNamespacesGone(admin)
    dir = await mkdtemp(path.join(tmpdir(), 'fnr-cluster-runner-'))
    fns = await makeFunctionsDir(dir)
    registry = await TestRegistry.start({mode: 'none'})
    ;({wrapperImage, fnImage} = await pushFunctionPodImages(registry))
    await pushScriptFunctionImage(registry, 'fn/busybox-stderr:v1', STDERR_FUNCTION_SCRIPT)
    stderrImage = `${registry.host}/fn/busybox-stderr:v1`
    dns = await TestDnsServer.start(admin)
    // manifests/ with both function-config components (RBAC for FunctionConfigs and PodTemplates, fnr's CRDs).
    const overlay = path.join(dir, 'overlay')
    await mkdir(overlay)
    const manifests = path.join(REPO_ROOT, 'manifests')
    await writeFile(path.join(overlay, 'kustomization.yaml'), stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [path.relative(overlay, manifests)],
      components: [path.relative(overlay, path.join(manifests, 'function-config')), path.relative(overlay, path.join(manifests, 'function-config', 'crds'))],
    }))
    const out = await applyRunnerManifests(cp, overlay)
    expect(out).to.match(/configmap\/function-pod-template (created|configured|unchanged)/)
    kubeconfig = await runnerKubeconfig(cp, admin, dir)
    console.log(`      setup (manifests, token, images pushed): ${Date.now() - t} ms`)
  })

  // Every test starts without fnr pods (a replica would adopt another test's idle pods).
  afterEach(async function () {
    this.timeout(60_000)
    if (admin) await clearPods()
  })

  after(async function () {
    this.timeout(120_000)
    if (admin) {
      await deletePorchNamespaces(admin)
    }
    await dns?.stop()
    await registry?.stop()
    admin?.close()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  function options(extra: Partial<ServeOptions['pod']> = {}, functionConfig: ServeOptions['functionConfig'] = {source: 'files'}): ServeOptions {
    const base = serveOptions({...fns, disableRuntimes: 'exec'})
    return {
      ...base,
      functionConfig,
      pod: {
        ...base.pod,
        namespace: POD_NS,
        runnerNamespace: RUNNER_NS,
        wrapperServerImage: wrapperImage,
        dnsServer: dns.address,
        kubeconfig,
        // the functions' entrypoints, as a catalog would know them (no registry metadata lookups in these tests)
        metadata: new StaticMetadataSource((img) => ([fnImage, stderrImage].includes(img) ? [FUNCTION_PATH] : undefined)),
        owner: 'function-runner-0',
        leaseDurationMs: 0,
        ...extra,
      },
    }
  }

  const call = (client: EvaluatorClient, img: string) => client.evaluateRaw(img, RL, {deadline: Date.now() + 120_000})

  /** The shipped template ConfigMap's pod template with the test's wrapper-server image and a `team` label. */
  async function shippedTemplate(team: string, containerName = 'function'): Promise<{template: string; serviceTemplate: string}> {
    const cm = parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-pod-template.yaml'), 'utf8')) as KubeObject
    const pod = parse(cm.data.template as string) as KubeObject
    pod.metadata = {...pod.metadata, labels: {team}}
    pod.spec.initContainers[0].image = wrapperImage
    pod.spec.containers[0].name = containerName
    return {template: stringify(pod), serviceTemplate: cm.data.serviceTemplate as string}
  }

  it('the template ConfigMap (manifests/function-pod-template.yaml): pods from it; an edit replaces the idle pod; a broken edit keeps the last good one; a missing one stops the start', async () => {
    const auditFrom = (await cp.auditEvents()).length
    const cmPath = `/api/v1/namespaces/${RUNNER_NS}/configmaps/function-pod-template`
    await admin.patch(cmPath, {data: await shippedTemplate('red')}, 'merge')
    const logger = memoryLogger()
    const running = await startInProcess(options({templateConfigMap: 'function-pod-template', wrapperServerImage: ''}), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const res = await call(client, fnImage)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      const [red] = await fnrPods()
      expect(red!.metadata.labels.team).to.equal('red')
      expect(red!.metadata.annotations['fn.kpt.dev/template-version']).to.match(/^cm-/)
      expect(red!.spec.initContainers[0].image).to.equal(wrapperImage)
      // an edit (through the API server's watch) replaces the idle pod at once
      const t = Date.now()
      await admin.patch(cmPath, {data: await shippedTemplate('blue')}, 'merge')
      await eventually(async () => !(await fnrPods()).some((p) => p.metadata.uid === red!.metadata.uid), 60_000, 100)
      console.log(`      ConfigMap edit to the idle pod's deletion: ${Date.now() - t} ms`)
      await call(client, fnImage)
      const [blue] = await fnrPods()
      expect(blue!.metadata.labels.team).to.equal('blue')
      expect(blue!.metadata.annotations['fn.kpt.dev/template-version']).to.not.equal(red!.metadata.annotations['fn.kpt.dev/template-version'])
      // an edit that breaks the contract is reported and ignored: the blue pod keeps serving
      await admin.patch(cmPath, {data: await shippedTemplate('green', 'app')}, 'merge')
      await eventually(async () => logger.lines.some((l) => l.level === 'error' && l.msg.includes('keeping the last good one')), 30_000, 100)
      await call(client, fnImage)
      expect((await fnrPods()).map((p) => p.metadata.uid)).to.deep.equal([blue!.metadata.uid])
    } finally {
      client.close()
      await running.stop()
    }
    // a ConfigMap that does not exist stops the start with a message naming it
    const err = await startInProcess(options({templateConfigMap: 'nope', wrapperServerImage: ''})).catch((e: Error) => e)
    expect(err).to.be.instanceOf(Error)
    expect((err as Error).message).to.match(new RegExp(`ConfigMap ${RUNNER_NS}/nope .*does not exist`))
    expect(refused(await saAudit(auditFrom))).to.deep.equal([])
  })

  it("Porch's PodTemplate base-pod-template (--function-config-source=crd): the base template, watched; a broken edit keeps the last good one", async () => {
    const auditFrom = (await cp.auditEvents()).length
    const podTemplate = async (value: string, containerName = 'function'): Promise<KubeObject> => {
      const pod = parse((await shippedTemplate('porch', containerName)).template) as KubeObject
      const fn = (pod.spec.containers as KubeObject[]).find((c) => c.name === containerName)!
      fn.env = [{name: 'FROM_TEMPLATE', value}]
      return {apiVersion: 'v1', kind: 'PodTemplate', metadata: {name: 'base-pod-template', namespace: POD_NS}, template: {metadata: {labels: {from: 'podtemplate'}}, spec: pod.spec}}
    }
    const ptPath = `/api/v1/namespaces/${POD_NS}/podtemplates`
    await admin.create(ptPath, await podTemplate('one'))
    const logger = memoryLogger()
    const running = await startInProcess(options({}, {source: 'crd', namespace: POD_NS}), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      await call(client, fnImage)
      const [first] = await fnrPods()
      expect(first!.metadata.labels.from).to.equal('podtemplate')
      expect(first!.spec.initContainers[0].image).to.equal(wrapperImage)
      expect((first!.spec.containers as KubeObject[]).find((c) => c.name === 'function')!.env).to.deep.equal([{name: 'FROM_TEMPLATE', value: 'one'}])
      expect(first!.metadata.annotations['fn.kpt.dev/template-version']).to.match(/^porch-[0-9a-f]{12}$/)
      await admin.replace(`${ptPath}/base-pod-template`, {...(await podTemplate('two')), metadata: {...(await admin.get(`${ptPath}/base-pod-template`)).metadata}})
      await eventually(async () => !(await fnrPods()).some((p) => p.metadata.uid === first!.metadata.uid), 60_000, 100)
      await call(client, fnImage)
      const [second] = await fnrPods()
      expect((second!.spec.containers as KubeObject[]).find((c) => c.name === 'function')!.env).to.deep.equal([{name: 'FROM_TEMPLATE', value: 'two'}])
      await admin.replace(`${ptPath}/base-pod-template`, {...(await podTemplate('three', 'app')), metadata: {...(await admin.get(`${ptPath}/base-pod-template`)).metadata}})
      await eventually(async () => logger.lines.some((l) => l.level === 'error' && String(l.fields?.error).includes('no container is named "function"')), 30_000, 100)
      await call(client, fnImage)
      expect((await fnrPods()).map((p) => p.metadata.uid)).to.deep.equal([second!.metadata.uid])
    } finally {
      client.close()
      await running.stop()
    }
    await admin.delete(`${ptPath}/base-pod-template`)
    expect(refused(await saAudit(auditFrom))).to.deep.equal([])
  })

  it('three `fnr serve` replicas with the runner token: a Lease each; GC never deletes the others\' pods; SIGKILL one → its Lease expires → one other adopts its idle pod; SIGTERM another → its Lease is released', async () => {
    const auditFrom = (await cp.auditEvents()).length
    const children: ServeProcess[] = []
    const clients: EvaluatorClient[] = []
    const leases = async (): Promise<KubeObject[]> =>
      (await admin.get(`/apis/coordination.k8s.io/v1/namespaces/${POD_NS}/leases`, {labelSelector: 'app.kubernetes.io/component=replica-lease'})).items as KubeObject[]
    const ownerOf = (p: KubeObject): string | undefined => p.metadata.labels?.[LABEL_OWNER]
    // The serve processes read the functions' entrypoints from the registry, which fnr's CLI does over TLS only:
    // a TLS registry with credentials (the pods pull through fnr's auth-secret pull Secret).
    const tlsRegistry = await TestRegistry.start({mode: 'tls'})
    try {
      const authFile = await tlsRegistry.writeAuthFile('testuser', 'testpass')
      await pushScriptFunctionImage(tlsRegistry, 'fn/busybox-cat:v1', CAT_FUNCTION_SCRIPT, authFile)
      await pushScriptFunctionImage(tlsRegistry, 'fn/busybox-stderr:v1', STDERR_FUNCTION_SCRIPT, authFile)
      const catImg = `${tlsRegistry.host}/fn/busybox-cat:v1`
      const stderrImg = `${tlsRegistry.host}/fn/busybox-stderr:v1`
      const args = [
        '--disable-runtimes=exec',
        `--kubeconfig=${kubeconfig}`,
        `--pod-namespace=${POD_NS}`,
        '--warm-up-pod-cache=false',
        '--pod-cache-config=',
        '--scan-interval=300ms',
        '--pod-ttl=1h',
        `--config=${fns.configPath}`,
        `--functions=${fns.functionsDir}`,
        '--enable-private-registries',
        `--registry-auth-secret-path=${authFile}`,
        '--enable-private-registries-tls',
        `--tls-secret-path=${tlsRegistry.certDir}`,
      ]
      // the default --pod-address=service, through the test DNS server
      const env = {WRAPPER_SERVER_IMAGE: wrapperImage, POD_NAME: '', FNR_DNS_SERVER: dns.address}
      for (let i = 0; i < 3; i++) children.push(await startServeProcess([...args, `--replica-lease-duration=${i === 0 ? '3s' : '8s'}`], env))
      for (const c of children) clients.push(new EvaluatorClient(`127.0.0.1:${c.port}`))
      const t = Date.now()
      await Promise.all(clients.map((c) => call(c, catImg)))
      console.log(`      three replicas, first calls in parallel (three runc pods): ${Date.now() - t} ms`)
      await call(clients[0]!, stderrImg)
      const ids = children.map((c) => {
        const m = /"owner":"([^"]+)"[^\n]*"msg":"pod runtime started"|"msg":"pod runtime started"[^\n]*"owner":"([^"]+)"/.exec(c.stderr())
        return m?.[1] ?? m?.[2]
      })
      expect(new Set(ids).size, children.map((c) => c.stderr()).join('\n')).to.equal(3)
      const pods = await fnrPods()
      expect(pods.map(ownerOf).sort()).to.deep.equal([ids[0], ids[0], ids[1], ids[2]].sort())
      expect((await leases()).map((l) => l.spec.holderIdentity).sort()).to.deep.equal([...ids].sort())
      // `fnr pods ls` with the runner's token shows which replica owns each pod
      const ls = await runCli(['pods', 'ls', '--json', '--kubeconfig', kubeconfig, '-n', POD_NS], {timeout: 60_000})
      expect(ls.exitCode, ls.stderr).to.equal(0)
      const listed = (JSON.parse(ls.stdout) as {pods: Array<{pod: string; owner: string}>}).pods
      expect(listed.map((p) => [p.pod, p.owner]).sort()).to.deep.equal(pods.map((p) => [p.metadata.name, ownerOf(p)]).sort())
      // several GC passes of every replica: nothing is deleted
      await new Promise((r) => setTimeout(r, 2000))
      expect((await fnrPods()).map((p) => p.metadata.name).sort()).to.deep.equal(pods.map((p) => p.metadata.name).sort())

      // SIGKILL replica 0 while 1 and 2 keep serving
      let stop = false
      let calls = 0
      const failures: unknown[] = []
      const load = Promise.all([1, 2].map(async (i) => {
        while (!stop) await call(clients[i]!, catImg).then(() => calls++, (e: unknown) => failures.push(e))
      }))
      const stderrPod = pods.find((p) => ownerOf(p) === ids[0] && p.metadata.annotations?.[ANNOTATION_IMAGE] === stderrImg)!.metadata.name as string
      children[0]!.child.kill('SIGKILL')
      await children[0]!.exited
      await eventually(async () => !(await fnrPods()).some((p) => ownerOf(p) === ids[0]), 90_000, 200)
      await eventually(async () => !(await leases()).some((l) => l.metadata.labels?.[LABEL_OWNER] === ids[0]), 60_000, 200)
      stop = true
      await load
      expect(failures.map(String)).to.deep.equal([])
      expect(calls).to.be.greaterThan(0)
      // its idle stderr pod was adopted by one of the two
      const taken = (await fnrPods()).find((p) => p.metadata.name === stderrPod)
      expect(taken, 'adopted, not deleted').to.not.equal(undefined)
      expect([ids[1], ids[2]]).to.include(ownerOf(taken!))
      const adopter = ids.indexOf(ownerOf(taken!))
      const res = await call(clients[adopter]!, stderrImg)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(res.log.toString()).to.contain('working on it')
      expect((await fnrPods()).some((p) => p.metadata.name === stderrPod), 'the adopted pod served it').to.equal(true)

      // SIGTERM the other: it stops gracefully and releases its Lease; the last one takes its pods over
      const other = adopter === 1 ? 2 : 1
      children[other]!.child.kill('SIGTERM')
      expect((await children[other]!.exited).code).to.equal(0)
      expect(children[other]!.stderr()).to.contain('released the replica lease')
      await eventually(async () => !(await fnrPods()).some((p) => ownerOf(p) === ids[other]), 60_000, 200)
      expect((await fnrPods()).every((p) => ownerOf(p) === ids[adopter])).to.equal(true)
      expect((await leases()).map((l) => l.spec.holderIdentity)).to.deep.equal([ids[adopter]])
      await call(clients[adopter]!, catImg)
    } finally {
      for (const c of clients) c.close()
      for (const child of children) if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill('SIGTERM')
      await Promise.all(children.map((c) => c.exited))
      await tlsRegistry.stop()
    }
    expect(refused(await saAudit(auditFrom))).to.deep.equal([])
  })

  it('`fnr test --runner` against fnr serve with the pod runtime: the case runs in a runc pod and passes; an unknown image fails the case with the runner\'s message', async () => {
    const running: RunningServer = await startInProcess(options())
    try {
      const caseDir = path.join(dir, 'cases', 'stderr-case')
      await mkdir(path.join(caseDir, '.expected'), {recursive: true})
      await writeFile(path.join(caseDir, 'resourcelist.yaml'), RL)
      await writeFile(path.join(caseDir, '.expected', 'config.yaml'), `image: ${stderrImage}\nstdErr: working on it\n`)
      const t = Date.now()
      const u = await runCli(['test', caseDir, '--runner', `127.0.0.1:${running.port}`, '--update'], {timeout: 180_000})
      console.log(`      fnr test --runner --update (pod created, pulled, run): ${Date.now() - t} ms`)
      expect(u.exitCode, u.stdout + u.stderr).to.equal(0)
      const r = await runCli(['test', caseDir, '--runner', `127.0.0.1:${running.port}`], {timeout: 120_000})
      expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
      expect(r.stdout).to.contain('1 passed, 0 failed')
      expect(await readFile(path.join(caseDir, '.expected', 'resourcelist.yaml'), 'utf8')).to.contain('kind: ResourceList')
      const pods = await fnrPods()
      expect(pods.map((p) => p.metadata.annotations?.[ANNOTATION_IMAGE])).to.deep.equal([stderrImage])
      // an image the registry does not have: the case fails with what the runner said
      const missing = path.join(dir, 'cases', 'missing-case')
      await mkdir(path.join(missing, '.expected'), {recursive: true})
      await writeFile(path.join(missing, 'resourcelist.yaml'), RL)
      await writeFile(path.join(missing, '.expected', 'config.yaml'), `image: ${registry.host}/fn/not-there:v1\n`)
      const m = await runCli(['test', missing, '--runner', `127.0.0.1:${running.port}`], {timeout: 120_000})
      expect(m.exitCode, m.stdout + m.stderr).to.not.equal(0)
      expect(m.stdout + m.stderr).to.contain('fn/not-there:v1')
    } finally {
      await running.stop()
    }
  })

})
