/**
 * Function pods end to end on the real control plane (docs/cluster.md): `kubectl apply -k manifests/`, then fnr serve (in
 * process) with the porch-fn-runner ServiceAccount's token and its DEFAULT `--pod-address=service`; the pod comes
 * from fnr's inline template, is admitted by kube-apiserver in a PodSecurity `restricted` namespace, bound to the
 * node and run under runc (real wrapper-server and function images from a test registry), Ready through the
 * template's gRPC readiness probe; the controller manager's EndpointSlice carries its netns address, which the
 * test DNS server (FNR_DNS_SERVER) answers the Service name with. Then a private registry (htpasswd): without
 * credentials the call fails with the node's ErrImagePull/ImagePullBackOff reason; with them the pod pulls.
 * Porch's namespaces are fixed names (porch-system, porch-fn-system): like manifests-rbac.test.ts, this file owns
 * them while it runs (it waits for an earlier suite's deletion to finish).
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {RegistryMetadataSource, StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import type {AuditEvent, ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {applyRunnerManifests, deletePorchNamespaces, POD_NS, porchNamespacesGone, RUNNER_NS, RUNNER_USER, runnerKubeconfig} from '../support/cluster/porch-namespaces.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushScriptFunctionImage} from '../support/node/fixtures.js'
import {CAT_FUNCTION_SCRIPT, pushFunctionPodImages} from '../support/node/function-images.js'
import {RuncRuntime, TestDnsServer} from '../support/node/index.js'
import {runCli} from '../support/cli.js'
import {RL} from '../support/pods/index.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'

const SA = RUNNER_USER
const FUNCTION_PATH = '/usr/local/bin/function'

describe('function pods on the real control plane: manifests/, porch-fn-runner token, runc node, --pod-address=service', function () {
  this.timeout(240_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let dir: string
  let fns: {configPath: string; functionsDir: string}
  let kubeconfig: string
  let registry: TestRegistry
  let privateRegistry: TestRegistry
  let dns: TestDnsServer
  let wrapperImage: string
  let fnImage: string
  let privateImage: string
  let privateAuthFile: string

  const saAudit = async (from: number): Promise<AuditEvent[]> =>
    (await cp.auditEvents()).slice(from).filter((e) => e.user.username === SA && e.stage === 'ResponseComplete')
  const fnrPods = async (): Promise<KubeObject[]> =>
    (await admin.get(`/api/v1/namespaces/${POD_NS}/pods`, {labelSelector: 'app.kubernetes.io/managed-by=fnr'})).items as KubeObject[]

  /** What the pods, their EndpointSlices and the DNS server looked like (for a failure message). */
  async function diagnostics(): Promise<string> {
    const pods = (await fnrPods()).map((p) => ({name: p.metadata.name, uid: p.metadata.uid, deleting: p.metadata.deletionTimestamp, ip: p.status?.podIP, conditions: p.status?.conditions?.map((c: KubeObject) => `${c.type}=${c.status}`), containers: p.status?.containerStatuses}))
    const slices = ((await admin.get(`/apis/discovery.k8s.io/v1/namespaces/${POD_NS}/endpointslices`)).items as KubeObject[]).map((sl) => ({name: sl.metadata.name, service: sl.metadata.labels?.['kubernetes.io/service-name'], endpoints: sl.endpoints}))
    return JSON.stringify({pods, slices, dnsQueries: dns.queries.slice(-10)}, null, 1)
  }

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    cp = await sharedControlPlane()
    expect(cp.runtime, 'the shared control plane runs pods under runc').to.not.equal(undefined)
    admin = adminClient(cp)
    // An earlier suite (manifests-rbac.test.ts) may still be deleting Porch's namespaces.
    await porchNamespacesGone(admin)
    dir = await mkdtemp(path.join(tmpdir(), 'fnr-cluster-fnpods-'))
    fns = await makeFunctionsDir(dir)
    registry = await TestRegistry.start({mode: 'none'})
    const images = await pushFunctionPodImages(registry)
    ;({wrapperImage, fnImage} = images)
    console.log(`      wrapper-server + function images built and pushed in ${images.ms} ms`)
    privateRegistry = await TestRegistry.start({mode: 'htpasswd'})
    privateAuthFile = await privateRegistry.writeAuthFile('testuser', 'testpass')
    await pushScriptFunctionImage(privateRegistry, 'fn/private-cat:v1', CAT_FUNCTION_SCRIPT, privateAuthFile)
    privateImage = `${privateRegistry.host}/fn/private-cat:v1`
    dns = await TestDnsServer.start(admin)

    const out = await applyRunnerManifests(cp, path.join(REPO_ROOT, 'manifests'))
    expect(out).to.match(/serviceaccount\/porch-fn-runner (created|configured|unchanged)/)
    kubeconfig = await runnerKubeconfig(cp, admin, dir)
  })

  after(async function () {
    this.timeout(120_000)
    if (admin) {
      await deletePorchNamespaces(admin)
    }
    await dns?.stop()
    await registry?.stop()
    await privateRegistry?.stop()
    admin?.close()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  function options(extra: Partial<ServeOptions['pod']> = {}, registryOptions: Partial<ServeOptions['registry']> = {}): ServeOptions {
    const base = serveOptions({...fns, disableRuntimes: 'exec'})
    return {
      ...base,
      functionConfig: {source: 'files'},
      registry: {...base.registry, ...registryOptions},
      pod: {
        ...base.pod,
        namespace: POD_NS,
        runnerNamespace: RUNNER_NS,
        wrapperServerImage: wrapperImage,
        // no podAddress: fnr's default, `service`, through the test DNS server (what FNR_DNS_SERVER sets)
        dnsServer: dns.address,
        kubeconfig,
        metadata: new RegistryMetadataSource(new RegistryClient({insecureRegistries: [registry.host]})),
        owner: 'function-runner-0',
        leaseDurationMs: 0,
        ...extra,
      },
    }
  }

  it('a call evaluates a ResourceList through a real pod: admitted (restricted), run under runc, Ready by its gRPC probe, dialled by Service name', async () => {
    const auditFrom = (await cp.auditEvents()).length
    const running: RunningServer = await startInProcess(options())
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const t = Date.now()
      const res = await client.evaluateRaw(fnImage, RL, {deadline: Date.now() + 180_000})
      const firstMs = Date.now() - t
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(res.log.toString()).to.contain('fn ran as uid=65532 gid=65532')
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
      const pods = await fnrPods()
      expect(pods).to.have.length(1)
      const pod = pods[0]!
      const ready = (pod.status.conditions as KubeObject[]).find((c) => c.type === 'Ready')!
      expect(ready.status).to.equal('True')
      const readySeconds = (Date.parse(ready.lastTransitionTime) - Date.parse(pod.metadata.creationTimestamp)) / 1000
      console.log(`      first call (pod admitted + bound, both images pulled and unpacked, init copy, runc, gRPC Ready, Service dial): ${firstMs} ms; pod Ready ${readySeconds} s after creation (API timestamps, 1 s resolution)`)
      for (const timing of cp.runtime!.images.timings) console.log(`        ${timing.image}: skopeo pull ${timing.pullMs} ms, unpack ${timing.unpackMs} ms`)
      expect(pod.spec.nodeName).to.equal('fnr-node')
      expect(pod.status.podIP).to.match(/^198\.1[89]\./)
      const fn = (pod.status.containerStatuses as KubeObject[]).find((c) => c.name === 'function')!
      expect(fn.containerID).to.match(/^runc:\/\//)
      expect((pod.spec.containers as KubeObject[]).find((c) => c.name === 'function')!.readinessProbe.grpc).to.be.an('object')
      // The pod namespace enforces restricted: the pod was admitted under it, with no warning needed.
      const ns = await admin.get(`/api/v1/namespaces/${POD_NS}`)
      expect(ns.metadata.labels['pod-security.kubernetes.io/enforce']).to.equal('restricted')
      // The Service name was resolved by the DNS server from the real EndpointSlice (the pod's netns address).
      const svcName = `${pod.metadata.name}.${POD_NS}.svc.cluster.local`
      expect(dns.queries).to.include(svcName)
      const slices = (await admin.get(`/apis/discovery.k8s.io/v1/namespaces/${POD_NS}/endpointslices`, {labelSelector: `kubernetes.io/service-name=${pod.metadata.name}`})).items as KubeObject[]
      expect(slices.flatMap((s) => (s.endpoints ?? []).flatMap((e: KubeObject) => e.addresses))).to.deep.equal([pod.status.podIP])
      // A second call reuses the warm pod.
      const t2 = Date.now()
      const again = await client.evaluateRaw(fnImage, RL, {deadline: Date.now() + 60_000})
      console.log(`      second call (warm pod, by Service name): ${Date.now() - t2} ms`)
      expect(again.resourceList.toString()).to.equal(RL.toString())
      expect((await fnrPods()).map((p) => p.metadata.uid)).to.deep.equal([pod.metadata.uid])
    } finally {
      client.close()
      await running.stop()
    }
    // Everything fnr's ServiceAccount sent was allowed and valid.
    const bad = (await saAudit(auditFrom)).filter((e) => (e.responseStatus?.code ?? 0) >= 400 && e.responseStatus?.code !== 404 && e.responseStatus?.code !== 409)
    expect(bad.map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.code} ${e.responseStatus?.message}`)).to.deep.equal([])
  })

  it('a private registry (htpasswd) without credentials: the call fails with the node\'s ErrImagePull/ImagePullBackOff reason; with --enable-private-registries the pod pulls and serves', async () => {
    // The function's metadata is known without asking the registry (as from a catalog), so fnr gets to the pod.
    const metadata = new StaticMetadataSource((img) => (img === privateImage ? [FUNCTION_PATH] : undefined))
    const noCreds = await startInProcess(options({metadata, podReadyTimeoutMs: 60_000}))
    let client = new EvaluatorClient(`127.0.0.1:${noCreds.port}`)
    try {
      const err = await client.evaluateRaw(privateImage, RL, {deadline: Date.now() + 90_000}).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      )
      expect(err, 'the call must fail').to.not.equal(undefined)
      console.log(`      without credentials: ${grpc.status[err!.code]}: ${err!.details}`)
      expect(err!.details).to.match(/ErrImagePull|ImagePullBackOff/)
      expect(err!.details).to.match(/authentication required|unauthorized/i)
      expect(err!.details).to.contain(privateImage)
      const pods = await fnrPods()
      expect(pods.some((p) => p.spec.imagePullSecrets === undefined)).to.equal(true)
    } finally {
      client.close()
      await noCreds.stop()
    }
    const gc = await cp.kubectl(['delete', 'pods', '-n', POD_NS, '-l', 'app.kubernetes.io/managed-by=fnr', '--wait=true'])
    expect(gc.code, gc.stderr).to.equal(0)

    const withCreds = await startInProcess(options({metadata}, {enablePrivateRegistries: true, authSecretPath: privateAuthFile}))
    client = new EvaluatorClient(`127.0.0.1:${withCreds.port}`)
    try {
      const res = await client.evaluateRaw(privateImage, RL, {deadline: Date.now() + 120_000})
      expect(res.resourceList.toString()).to.equal(RL.toString())
      const pods = await fnrPods()
      expect(pods).to.have.length(1)
      expect(pods[0]!.spec.imagePullSecrets).to.deep.equal([{name: 'auth-secret'}])
      const secret = await admin.get(`/api/v1/namespaces/${POD_NS}/secrets/auth-secret`)
      expect(secret.type).to.equal('kubernetes.io/dockerconfigjson')
    } finally {
      client.close()
      await withCreds.stop()
    }
  })

  it('pod validation before create: a request above its limit or a malformed quantity stops fnr serve at start; kube-apiserver never sees an invalid pod', async () => {
    // No fnr pod left from the cases above (so the lenient case below creates one rather than adopting one).
    const cleared = await cp.kubectl(['delete', 'pods', '-n', POD_NS, '-l', 'app.kubernetes.io/managed-by=fnr', '--wait=true'])
    expect(cleared.code, cleared.stderr).to.equal(0)
    const auditFrom = (await cp.auditEvents()).length
    const env = {...process.env, WRAPPER_SERVER_IMAGE: wrapperImage}
    const serveArgs = ['serve', '--port=0', '--bind-address=127.0.0.1', `--kubeconfig=${kubeconfig}`, `--pod-namespace=${POD_NS}`, '--disable-runtimes=exec', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`]
    // The CLI flags (exit code 2, Usage).
    const above = await runCli([...serveArgs, '--pod-requests=memory=2Gi', '--pod-limits=memory=1Gi'], {env, timeout: 60_000})
    expect(above.exitCode, above.stdout + above.stderr).to.equal(2)
    expect(above.stderr).to.contain('--pod-requests.memory: "2Gi" is more than the limit "1Gi"')
    const malformed = await runCli([...serveArgs, '--pod-requests=cpu=1.5.0'], {env, timeout: 60_000})
    expect(malformed.exitCode, malformed.stdout + malformed.stderr).to.equal(2)
    expect(malformed.stderr).to.match(/--pod-requests: cpu: .*1\.5\.0/)
    // --pod-cache-config with --strict-config (exit code 3, Config).
    const cacheConfig = path.join(dir, 'bad-pod-cache-config.yaml')
    await writeFile(cacheConfig, `- name: ${fnImage}\n  resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}\n`)
    const strict = await runCli([...serveArgs, `--pod-cache-config=${cacheConfig}`, '--strict-config'], {env, timeout: 60_000})
    expect(strict.exitCode, strict.stdout + strict.stderr).to.equal(3)
    expect(strict.stderr).to.match(/resources\.requests\.memory: "2Gi" is more than the limit "1Gi"/)
    // The library (ServeOptions.pod.resources) as the flags.
    const lib = await startInProcess(options({resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}})).then(
      async (r) => {
        await r.stop()
        return undefined
      },
      (e: unknown) => e as Error & {kind?: string},
    )
    expect(lib?.kind, String(lib)).to.equal('Usage')
    expect(lib!.message).to.contain('--pod-requests.cpu: "2" is more than the limit "1"')
    // Lenient (the default, as Porch): the entry's resources are left out with a warning, and the pod is admitted.
    const lenient = await startInProcess(options({cacheConfigPath: cacheConfig}))
    const client = new EvaluatorClient(`127.0.0.1:${lenient.port}`)
    try {
      const res = await client.evaluateRaw(fnImage, RL, {deadline: Date.now() + 120_000}).catch(async (e: Error) => {
        throw new Error(`${e.message}\n${await diagnostics()}`)
      })
      expect(res.resourceList.toString()).to.equal(RL.toString())
    } finally {
      client.close()
      await lenient.stop()
    }
    const events = await saAudit(auditFrom)
    const invalid = events.filter((e) => [400, 422].includes(e.responseStatus?.code ?? 0))
    expect(invalid.map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.code} ${e.responseStatus?.message}`)).to.deep.equal([])
    const podCreates = events.filter((e) => e.verb === 'create' && e.objectRef?.resource === 'pods' && !e.objectRef.subresource)
    expect(podCreates.map((e) => e.responseStatus?.code)).to.deep.equal([201])
  })

  it('warm-up, the replica Lease and fnr pods gc with runc pods: warmed pod Ready before the first call, Lease held, gc removes pods and their network namespaces', async () => {
    const cleared = await cp.kubectl(['delete', 'pods', '-n', POD_NS, '-l', 'app.kubernetes.io/managed-by=fnr', '--wait=true'])
    expect(cleared.code, cleared.stderr).to.equal(0)
    const auditFrom = (await cp.auditEvents()).length
    const cacheConfig = path.join(dir, 'warm-pod-cache-config.yaml')
    await writeFile(cacheConfig, `- name: ${fnImage}\n`)
    const t = Date.now()
    const running = await startInProcess(options({cacheConfigPath: cacheConfig, warmUp: true, leaseDurationMs: 15_000, owner: 'function-runner-1'}))
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const warmed = await eventually(async () => {
        const pods = await fnrPods()
        return pods.length === 1 && (pods[0]!.status?.conditions as KubeObject[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True') && pods[0]
      }, 120_000, 200).catch(async (e: Error) => {
        throw new Error(`${e.message}\n${await diagnostics()}`)
      })
      console.log(`      warm-up: pod Ready ${Date.now() - t} ms after fnr serve was started`)
      expect(warmed.status.podIP).to.match(/^198\.1[89]\./)
      const t2 = Date.now()
      const res = await client.evaluateRaw(fnImage, RL, {deadline: Date.now() + 60_000})
      console.log(`      first call to the warmed pod (by Service name): ${Date.now() - t2} ms`)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect((await fnrPods()).map((p) => p.metadata.uid)).to.deep.equal([warmed.metadata.uid])
      const leases = (await admin.get(`/apis/coordination.k8s.io/v1/namespaces/${POD_NS}/leases`)).items as KubeObject[]
      const lease = leases.find((l) => l.metadata.name === 'fnr-replica-function-runner-1')
      expect(lease, JSON.stringify(leases.map((l) => l.metadata.name))).to.not.equal(undefined)
      expect(lease!.spec.holderIdentity).to.be.a('string').and.not.equal('')
    } finally {
      client.close()
      await running.stop()
    }
    const gc = await runCli(['pods', 'gc', '--kubeconfig', kubeconfig, '-n', POD_NS, '--all'], {timeout: 60_000})
    expect(gc.exitCode, gc.stdout + gc.stderr).to.equal(0)
    await eventually(async () => (await fnrPods()).length === 0, 30_000, 200)
    // The node tore the pods down: no runc pod network is left (other suites' pods on this node are gone by now).
    await eventually(async () => RuncRuntime.liveNetworks().length === 0, 30_000, 200)
    const bad = (await saAudit(auditFrom)).filter((e) => [400, 403, 422].includes(e.responseStatus?.code ?? 0))
    expect(bad.map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.code} ${e.responseStatus?.message}`)).to.deep.equal([])
  })
})
