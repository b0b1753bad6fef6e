/**
 * Porch at HEAD's own files on the real control plane, with fnr as the runner (docs/porch-swap.md, docs/cluster.md):
 * Porch's namespaces, its FunctionConfig and ServiceTemplate CRDs, its runner RBAC (porch_5/porch_6), its
 * ServiceAccount (from porch_2), its base PodTemplate and ServiceTemplate (porch_22) and its 19 FunctionConfigs
 * (porch_23), applied unmodified from ../shared/compat/porch/head. fnr serve runs with the flags of Porch's
 * Deployment and porch-fn-runner's token (never admin). The functions directory holds the real catalog binaries
 * (scripts/catalog-peers.mjs), as Porch's image does at --functions=/home/nonroot/functions.
 *
 * The one change a user of a private mirror makes: the FunctionConfigs of the built functions get one more
 * prefix, the test registry that mirrors the catalog (the node pulls only from loopback registries). Then:
 *   - binaryExecutor and goExecutor tags run the catalog binary in fnr's exec runtime;
 *   - podExecutor tags run in a pod made from Porch's PodTemplate (its init container's image set to
 *     $WRAPPER_SERVER_IMAGE, as Porch does), under runc on the node, Ready by the template's exec probe
 *     (/wrapper-server-tools/grpc-health-probe), dialled by Service name;
 * and every answer is the binary's own stdout, byte for byte.
 * Porch's namespaces are fixed names: like function-pods.test.ts, this file owns them while it runs.
 */
import {expect} from 'chai'
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {parseAllDocuments, stringify} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {RegistryMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {HEALTH_PROBE_TIMEOUT_SECONDS} from '../../src/lib/pods/model/template.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import {buildCatalogFunctions, CATALOG} from '../../scripts/catalog-peers.mjs'
import {argsConfigMap, corpusPackages, corpusResourceList, CORPUS_CONFIGS, runBinary, stableOutput, writePackage} from '../catalog/support.js'
import {memoryLogger} from '../support/memory-logger.js'
import {waitCrdsEstablished, type AuditEvent, type ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {deletePorchNamespaces, POD_NS, porchNamespacesGone, RUNNER_NS, RUNNER_USER, runnerKubeconfig} from '../support/cluster/porch-namespaces.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushWrapperServerImage} from '../support/node/fixtures.js'
import {TestDnsServer} from '../support/node/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT, serveOptions, startInProcess} from '../support/serve.js'
import {requireShared} from '../support/shared.js'
import {PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'

const HEAD = path.join(REPO_ROOT, '..', 'shared', 'compat', 'porch', 'head')
const SA = RUNNER_USER
const CATALOG_PREFIX = 'ghcr.io/kptdev/krm-functions-catalog'
/** Porch's CRDs and RBAC are cluster-scoped: removed again after this file (the control plane is shared). */
const CLUSTER_FILES = ['config.porch.kpt.dev_servicetemplates.yaml', 'porch_5-rbac.yaml', 'porch_6-rbac-bind.yaml']

interface FunctionConfigSpec {
  image: string
  prefixes?: string[]
  podExecutor?: {tags: string[]; timeToLive?: string}
  binaryExecutor?: {tags: string[]; path: string}
  goExecutor?: {id: string; tags: string[]}
}

describe("Porch at HEAD's files on the real control plane, fnr as the runner: CRDs, RBAC, PodTemplate, 19 FunctionConfigs, catalog binaries", function () {
  before(() => requireShared('compat/porch/head'))
  this.timeout(600_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let dir: string
  let registry: TestRegistry
  let dns: TestDnsServer
  let running: RunningServer | undefined
  let client: EvaluatorClient | undefined
  let functionsDir: string
  let auditFrom = 0
  const logger = memoryLogger()
  /** The built catalog functions' FunctionConfig specs, from porch_23. */
  const specs: Record<string, FunctionConfigSpec> = {}
  let mirror = ''

  const fnrPods = async (): Promise<KubeObject[]> =>
    (await admin.get(`/api/v1/namespaces/${POD_NS}/pods`, {labelSelector: 'app.kubernetes.io/managed-by=fnr'})).items as KubeObject[]

  async function kubectlOk(args: string[]): Promise<string> {
    const r = await cp.kubectl(args)
    expect(r.code, `kubectl ${args.join(' ')}: ${r.stderr}`).to.equal(0)
    return r.stdout
  }

  /** One ResourceList per built function (a generated package and its first corpus config). */
  async function inputFor(fn: string): Promise<Buffer> {
    const pkg = corpusPackages(1, 7)[0]!
    const cfg = CORPUS_CONFIGS[fn]![0]!
    const pkgDir = path.join(dir, 'pkg', fn)
    await writePackage(pkgDir, pkg)
    return corpusResourceList(pkgDir, cfg.fnConfig ?? argsConfigMap(cfg.args))
  }

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    functionsDir = buildCatalogFunctions()
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    await porchNamespacesGone(admin)
    dir = await mkdtemp(path.join(tmpdir(), 'fnr-cluster-porch-head-'))
    registry = await TestRegistry.start({mode: 'none'})
    mirror = `${registry.host}/kptdev/krm-functions-catalog`
    await pushWrapperServerImage(registry, 'fnr/wrapper-server:v1')

    // Porch's files, unmodified.
    await kubectlOk(['apply', '-f', path.join(HEAD, 'porch_1-namespace.yaml')])
    await kubectlOk(['apply', '--server-side', '-f', path.join(HEAD, 'config.porch.kpt.dev_functionconfigs.yaml'), '-f', path.join(HEAD, 'config.porch.kpt.dev_servicetemplates.yaml')])
    const established = await waitCrdsEstablished(cp, ['functionconfigs.config.porch.kpt.dev', 'servicetemplates.config.porch.kpt.dev'])
    if (established.code !== 0) throw new Error(`the CRDs are not Established: ${established.stderr}`)
    await kubectlOk(['apply', '-f', path.join(HEAD, 'porch_5-rbac.yaml'), '-f', path.join(HEAD, 'porch_6-rbac-bind.yaml')])
    // porch_2 holds the runner's ServiceAccount, Deployment and Service: the ServiceAccount only (fnr serve runs in
    // this process; the Deployment's pod would need Porch's or fnr's runner image).
    const runnerDocs = parseAllDocuments(await readFile(path.join(HEAD, 'porch_2-function-runner.yaml'), 'utf8')).map((d) => d.toJS() as KubeObject).filter(Boolean)
    const sa = runnerDocs.find((d) => d.kind === 'ServiceAccount')!
    const saFile = path.join(dir, 'porch-fn-runner-sa.yaml')
    await writeFile(saFile, stringify(sa))
    await kubectlOk(['apply', '-f', saFile])
    await kubectlOk(['apply', '-f', path.join(HEAD, 'porch_22-function-templates.yaml'), '-f', path.join(HEAD, 'porch_23-function-configurations.yaml')])

    // The catalog mirror: each built function at its podExecutor tag when that is the version built here.
    for (const doc of parseAllDocuments(await readFile(path.join(HEAD, 'porch_23-function-configurations.yaml'), 'utf8'))) {
      const spec = (doc.toJS() as {spec?: FunctionConfigSpec} | null)?.spec
      if (spec && CATALOG.some((f) => f.name === spec.image)) specs[spec.image] = spec
    }
    for (const fn of CATALOG) {
      if (!specs[fn.name]?.podExecutor?.tags.includes(fn.version)) continue
      const binary = await readFile(path.join(functionsDir, fn.name))
      await pushImage(registry, `kptdev/krm-functions-catalog/${fn.name}:${fn.version}`, {entrypoint: ['/usr/local/bin/function'], files: {'usr/local/bin/function': binary}, gzipLevel: 1})
      // The user's one change: the mirror as one more prefix of that FunctionConfig.
      const patch = JSON.stringify([{op: 'add', path: '/spec/prefixes/-', value: mirror}])
      await kubectlOk(['patch', 'functionconfigs.config.porch.kpt.dev', '-n', POD_NS, fn.name, '--type=json', `-p=${patch}`])
    }

    dns = await TestDnsServer.start(admin)
    const kubeconfig = await runnerKubeconfig(cp, admin, dir)
    auditFrom = (await cp.auditEvents()).length

    // Porch's Deployment: --pod-namespace=porch-fn-system --max-request-body-size=6291456
    // --max-parallel-pods-per-function=2 --max-waitlist-length=1 --functions=/home/nonroot/functions, with
    // WRAPPER_SERVER_IMAGE set. Its --warm-up-pod-cache=true would warm every podExecutor image of the 19
    // FunctionConfigs, which only ghcr.io serves: left off here.
    const base = serveOptions({configPath: path.join(dir, 'no-config.yaml'), functionsDir, disableRuntimes: ''})
    const options: ServeOptions = {
      ...base,
      maxRequestBodySize: 6291456,
      functionConfig: {source: 'auto'},
      pod: {
        ...base.pod,
        namespace: POD_NS,
        runnerNamespace: RUNNER_NS,
        wrapperServerImage: `${registry.host}/fnr/wrapper-server:v1`,
        maxParallelPodsPerFunction: 2,
        maxWaitlistLength: 1,
        warmUp: false,
        dnsServer: dns.address,
        kubeconfig,
        metadata: new RegistryMetadataSource(new RegistryClient({insecureRegistries: [registry.host]})),
        owner: 'function-runner-0',
      },
    }
    running = await startInProcess(options, logger)
    client = new EvaluatorClient(`127.0.0.1:${running.port}`)
  })

  after(async function () {
    this.timeout(120_000)
    client?.close()
    await running?.stop()
    if (admin) {
      await deletePorchNamespaces(admin)
      await cp.kubectl(['delete', '--ignore-not-found', ...CLUSTER_FILES.flatMap((f) => ['-f', path.join(HEAD, f)])])
    }
    await dns?.stop()
    await registry?.stop()
    admin?.close()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  it('fnr starts under Porch\'s RBAC with Porch\'s CRDs: auto picks the CRD, all 19 FunctionConfigs are applied; only executors whose binary is not here are sent to pods, with a warning', () => {
    const msgs = logger.lines.map((l) => l.msg)
    expect(msgs).to.include('--function-config-source=auto: crd')
    expect(logger.lines.filter((l) => l.level === 'error').map((l) => `${l.msg}: ${JSON.stringify(l.fields)}`)).to.deep.equal([])
    const applied = new Set(logger.lines.filter((l) => l.msg === 'FunctionConfig applied').map((l) => String(l.fields?.functionConfig)))
    expect(applied.size).to.equal(19)
    // Porch's runner image has every binary, and so has the functions dir here (the ten catalog functions,
    // docs/catalog-functions.md); what is left is apply-replacements' goExecutor (it runs inside porch-server in
    // Porch) and the FunctionConfigs of functions Porch does not ship.
    const partial = logger.lines.filter((l) => l.msg === 'FunctionConfig applied without some of its settings')
    for (const l of partial) {
      const problems = (l.fields?.problems as string[]).join('; ')
      expect(problems, String(l.fields?.functionConfig)).to.match(/does not exist; its tags .* go to the pod runtime|no binary .* in the functions directory/)
      expect(CATALOG.map((f) => `porch-fn-system/${f.name}`), problems).to.not.include(String(l.fields?.functionConfig))
    }
    console.log(`      19 FunctionConfigs applied; ${partial.length} with executors sent to pods (binary not built here)`)
  })

  it('binaryExecutor and goExecutor tags of Porch\'s FunctionConfigs run the catalog binary in the exec runtime, byte for byte', async () => {
    let checked = 0
    for (const fn of CATALOG) {
      const spec = specs[fn.name]!
      const input = await inputFor(fn.name)
      const direct = await runBinary(path.join(functionsDir, fn.name), input)
      expect(direct.exitCode, direct.stderr).to.equal(0)
      const tags = [...(spec.binaryExecutor?.tags ?? []), ...(spec.goExecutor?.tags ?? [])]
      for (const [i, tag] of tags.entries()) {
        // Both of Porch's prefixes: the catalog's registry and none.
        const image = i % 2 === 0 ? `${CATALOG_PREFIX}/${fn.name}:${tag}` : `${fn.name}:${tag}`
        const res = await client!.evaluateRaw(image, input, {deadline: Date.now() + 120_000})
        expect(res.trailers.get('fnr-evaluator'), image).to.deep.equal(['exec'])
        expect(Buffer.compare(stableOutput(res.resourceList), stableOutput(direct.stdout)), image).to.equal(0)
        checked++
      }
    }
    console.log(`      ${checked} executor tags answered by the catalog binaries`)
    expect(checked).to.be.greaterThan(4)
    expect(await fnrPods()).to.deep.equal([])
  })

  it('podExecutor tags run in pods made from Porch\'s PodTemplate (wrapper from $WRAPPER_SERVER_IMAGE, exec probe), byte for byte', async () => {
    const pooled = CATALOG.filter((f) => specs[f.name]?.podExecutor?.tags.includes(f.version))
    expect(pooled.map((f) => f.name), 'functions whose podExecutor tag is the version built here').to.include.members(['apply-setters', 'set-namespace'])
    for (const fn of pooled) {
      const input = await inputFor(fn.name)
      const direct = await runBinary(path.join(functionsDir, fn.name), input)
      const image = `${mirror}/${fn.name}:${fn.version}`
      const t = Date.now()
      const res = await client!.evaluateRaw(image, input, {deadline: Date.now() + 240_000}).catch(async (e: Error) => {
        const states = (await fnrPods()).map((p) => ({name: p.metadata.name, init: p.status?.initContainerStatuses, containers: p.status?.containerStatuses}))
        throw new Error(`${e.message}\n${JSON.stringify(states, null, 1)}`)
      })
      console.log(`      ${image.replace(registry.host, '<mirror>')}: first call ${Date.now() - t} ms`)
      expect(res.trailers.get('fnr-evaluator'), image).to.deep.equal(['pod'])
      expect(Buffer.compare(stableOutput(res.resourceList), stableOutput(direct.stdout)), image).to.equal(0)
    }
    const pods = await fnrPods()
    if (pods.length !== pooled.length) {
      // What happened to the missing pod: the namespace's events and what the runtime logged about pods.
      const events = ((await admin.get(`/api/v1/namespaces/${POD_NS}/events`)).items as KubeObject[])
        .map((e) => `${e.lastTimestamp ?? e.eventTime} ${e.involvedObject?.kind}/${e.involvedObject?.name} ${e.reason}: ${e.message}`)
      const made = (await cp.auditEvents()).slice(auditFrom)
        .filter((e) => e.stage === 'ResponseComplete' && e.objectRef?.resource === 'pods' && !e.objectRef.subresource && e.objectRef.namespace === POD_NS && ['create', 'delete', 'deletecollection'].includes(e.verb))
        .map((e) => `${(e as AuditEvent & {requestReceivedTimestamp?: string}).requestReceivedTimestamp} ${e.user.username} ${e.verb} ${e.objectRef?.name ?? e.requestURI} ${e.responseStatus?.code}`)
      const said = logger.lines.filter((l) => /pod/i.test(l.msg)).map((l) => `${l.level} ${l.msg} ${JSON.stringify(l.fields ?? {})}`)
      expect.fail(`${pods.length} of ${pooled.length} pods (${pods.map((p) => p.metadata.name).join(', ')})\ncreated and deleted:\n${made.join('\n')}\nevents:\n${events.join('\n')}\nruntime:\n${said.join('\n')}`)
    }
    const template = parseAllDocuments(await readFile(path.join(HEAD, 'porch_22-function-templates.yaml'), 'utf8')).map((d) => d.toJS() as KubeObject)[0]!
    const tFn = (template.template.spec.containers as KubeObject[])[0]!
    for (const pod of pods) {
      // Porch's template as written: its annotation, init command, function command, probes and environment.
      expect(pod.metadata.annotations['cluster-autoscaler.kubernetes.io/safe-to-evict']).to.equal('true')
      const init = (pod.spec.initContainers as KubeObject[])[0]!
      expect(init.image).to.equal(`${registry.host}/fnr/wrapper-server:v1`)
      expect(init.command).to.deep.equal(template.template.spec.initContainers[0].command)
      const fnC = (pod.spec.containers as KubeObject[]).find((c) => c.name === 'function')!
      expect(fnC.command[0]).to.equal(tFn.command[0])
      expect(fnC.readinessProbe.exec.command).to.deep.equal(tFn.readinessProbe.exec.command)
      expect(fnC.livenessProbe.exec.command).to.deep.equal(tFn.livenessProbe.exec.command)
      // The one addition: room for fnr's probe (a Node program) on a busy node, where the template sets no timeout.
      expect([fnC.readinessProbe.timeoutSeconds, fnC.livenessProbe.timeoutSeconds]).to.deep.equal([HEALTH_PROBE_TIMEOUT_SECONDS, HEALTH_PROBE_TIMEOUT_SECONDS])
      for (const e of tFn.env as Array<{name: string; value: string}>) expect(fnC.env, e.name).to.deep.include(e)
      const status = (pod.status.containerStatuses as KubeObject[]).find((c) => c.name === 'function')!
      expect(status.ready, pod.metadata.name).to.equal(true)
      expect(status.containerID).to.match(/^runc:\/\//)
    }
    // Everything porch-fn-runner sent under Porch's RBAC: what it was refused (fnr copes with each, and serves).
    const events = (await cp.auditEvents()).slice(auditFrom).filter((e: AuditEvent) => e.user.username === SA && e.stage === 'ResponseComplete')
    const refused = [...new Set(events.filter((e) => e.responseStatus?.code === 403).map((e) => `${e.verb} ${e.objectRef?.resource ?? e.requestURI}`))].sort()
    console.log(`      refused under Porch's RBAC: ${refused.join('; ') || 'nothing'}`)
    const invalid = events.filter((e) => [400, 422].includes(e.responseStatus?.code ?? 0))
    expect(invalid.map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.message}`)).to.deep.equal([])
  })
})
