/**
 * The real catalog functions Porch ships, run by fnr's POD runtime on the real control plane (docs/catalog-functions.md;
 * the exec side is test/catalog/catalog.test.ts). Each function built from
 * its Go module (scripts/catalog-peers.mjs) is put into an image laid out as the catalog's own images are (the
 * static binary at /usr/local/bin/function, the entrypoint), pushed to a test registry and served by fnr serve with
 * the exec runtime off: fnr reads the image's entrypoint from the registry, kube-apiserver admits the pod made from
 * fnr's inline template (porch-fn-runner's token, PodSecurity `restricted`), the runc node pulls and runs it with the
 * packaged wrapper server, and fnr dials it by Service name. Every answer is compared byte for byte with the binary's
 * own stdout on the same ResourceList: the catalog examples (../shared/compat/catalog-examples) and a generated
 * corpus, failures included.
 * Porch's namespaces are fixed names: like function-pods.test.ts, this file owns them while it runs.
 */
import {expect} from 'chai'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {execa} from 'execa'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {RegistryMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {RegistryClient} from '../../src/lib/registry/client.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import {buildCatalogFunctions, CATALOG} from '../../scripts/catalog-peers.mjs'
import {argsConfigMap, corpusPackages, corpusResourceList, CORPUS_CONFIGS, exampleCases, KPT, runBinary, stableOutput, writePackage} from '../catalog/support.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {applyRunnerManifests, deletePorchNamespaces, POD_NS, porchNamespacesGone, RUNNER_NS, runnerKubeconfig} from '../support/cluster/porch-namespaces.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushWrapperServerImage} from '../support/node/fixtures.js'
import {TestDnsServer} from '../support/node/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {forEachLimit} from '../support/concurrency.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'


/** The ResourceList kpt hands a function for a catalog example (kpt fn source + its function config). */
async function exampleResourceList(dir: string, c: {configPath?: string; args: string[]}): Promise<Buffer> {
  const fnConfig = c.configPath ? await readFile(path.join(dir, c.configPath), 'utf8') : argsConfigMap(c.args)
  const source = await execa(KPT, ['fn', 'source', dir], {timeout: 60_000})
  return Buffer.from(`${String(source.stdout).trimEnd()}\nfunctionConfig:\n${fnConfig.trimEnd().replace(/^/gm, '  ')}\n`)
}

describe('the real catalog functions in function pods on the real control plane (pod runtime, runc node)', function () {
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
  /** Function name -> the image it was pushed as. */
  const images: Record<string, string> = {}

  const fnrPods = async (): Promise<KubeObject[]> =>
    (await admin.get(`/api/v1/namespaces/${POD_NS}/pods`, {labelSelector: 'app.kubernetes.io/managed-by=fnr'})).items as KubeObject[]

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    functionsDir = buildCatalogFunctions()
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    // An earlier suite may still be deleting Porch's namespaces.
    await porchNamespacesGone(admin)
    dir = await mkdtemp(path.join(tmpdir(), 'fnr-cluster-catalog-'))
    registry = await TestRegistry.start({mode: 'none'})
    const t = Date.now()
    await pushWrapperServerImage(registry, 'fnr/wrapper-server:v1')
    for (const fn of CATALOG) {
      // The catalog's images: a static Go binary at /usr/local/bin/function, which is the entrypoint.
      const binary = await readFile(path.join(functionsDir, fn.name))
      await pushImage(registry, `kptdev/krm-functions-catalog/${fn.name}:${fn.version}`, {entrypoint: ['/usr/local/bin/function'], files: {'usr/local/bin/function': binary}, gzipLevel: 1})
      images[fn.name] = `${registry.host}/kptdev/krm-functions-catalog/${fn.name}:${fn.version}`
    }
    console.log(`      wrapper-server and ${CATALOG.length} catalog function images built and pushed in ${Date.now() - t} ms`)
    dns = await TestDnsServer.start(admin)

    await applyRunnerManifests(cp, path.join(REPO_ROOT, 'manifests'))
    const kubeconfig = await runnerKubeconfig(cp, admin, dir)

    // fnr's own exec functions only (none of them is a catalog image): every catalog call goes to a pod.
    const fns = await makeFunctionsDir(dir)
    const base = serveOptions({...fns, disableRuntimes: 'exec'})
    const options: ServeOptions = {
      ...base,
      functionConfig: {source: 'files'},
      pod: {
        ...base.pod,
        namespace: POD_NS,
        runnerNamespace: RUNNER_NS,
        wrapperServerImage: `${registry.host}/fnr/wrapper-server:v1`,
        dnsServer: dns.address,
        kubeconfig,
        metadata: new RegistryMetadataSource(new RegistryClient({insecureRegistries: [registry.host]})),
        owner: 'function-runner-0',
        leaseDurationMs: 0,
      },
    }
    running = await startInProcess(options)
    client = new EvaluatorClient(`127.0.0.1:${running.port}`)
  })

  after(async function () {
    this.timeout(120_000)
    client?.close()
    await running?.stop()
    if (admin) {
      await deletePorchNamespaces(admin)
    }
    await dns?.stop()
    await registry?.stop()
    admin?.close()
    if (dir) await rm(dir, {recursive: true, force: true})
  })

  it('answers the catalog examples of every built function from a pod with the binary\'s own stdout, byte for byte', async () => {
    const cases = await exampleCases(CATALOG.map((f) => f.name))
    expect(cases.map((c) => c.fn).sort()).to.include.members(CATALOG.map((f) => f.name))
    // Functions three at a time (their first calls start pods side by side), each one's examples in order.
    const byFunction = [...new Set(cases.map((c) => c.fn))].map((fn) => cases.filter((c) => c.fn === fn))
    await forEachLimit(byFunction, 3, async (group) => {
      for (const ex of group) {
        const input = await exampleResourceList(ex.dir, ex)
        const direct = await runBinary(path.join(functionsDir, ex.fn), input)
        expect(direct.exitCode, `${ex.name}: the binary itself: ${direct.stderr}`).to.equal(0)
        const t = Date.now()
        const res = await client!.evaluateRaw(images[ex.fn]!, input, {deadline: Date.now() + 240_000})
        console.log(`      ${ex.name} (${ex.fn}): ${Date.now() - t} ms`)
        expect(res.trailers.get('fnr-evaluator'), ex.name).to.deep.equal(['pod'])
        expect(Buffer.compare(stableOutput(res.resourceList), stableOutput(direct.stdout)), `${ex.name}:\n${res.resourceList.toString()}`).to.equal(0)
      }
    })
    // One pod per function, each from fnr's inline template, admitted under `restricted` and run under runc.
    const pods = await fnrPods()
    const podImages = pods.map((p) => (p.spec.containers as KubeObject[]).find((c) => c.name === 'function')!.image as string)
    for (const fn of CATALOG) expect(podImages.some((i) => i.startsWith(images[fn.name]!.replace(/:[^:/]+$/, ''))), `${fn.name}: ${podImages.join(', ')}`).to.equal(true)
    for (const p of pods) expect((p.status.containerStatuses as KubeObject[]).find((c) => c.name === 'function')!.containerID).to.match(/^runc:\/\//)
  })

  it('answers a generated corpus from the pods like the binary, failures included (the function\'s message reaches the caller)', async () => {
    const pkgs = corpusPackages(2, 41)
    let ok = 0
    let failed = 0
    const corpus = CATALOG.flatMap((fn) => CORPUS_CONFIGS[fn.name]!.flatMap((cfg, ci) => pkgs.map((pkg) => ({fn, cfg, ci, pkg}))))
    // Cases are independent: two at a time (the pods are warm from the case above).
    await forEachLimit(corpus, 2, async ({fn, cfg, ci, pkg}) => {
      const pkgDir = path.join(dir, 'corpus', fn.name, String(ci), pkg.name)
      await writePackage(pkgDir, pkg)
      const input = await corpusResourceList(pkgDir, cfg.fnConfig ?? argsConfigMap(cfg.args))
      const direct = await runBinary(path.join(functionsDir, fn.name), input)
      const label = `${fn.name} / ${cfg.label} / ${pkg.name}`
      if (direct.exitCode === 0) {
        const res = await client!.evaluateRaw(images[fn.name]!, input, {deadline: Date.now() + 120_000})
        expect(Buffer.compare(stableOutput(res.resourceList), stableOutput(direct.stdout)), label).to.equal(0)
        ok++
      } else {
        const err = await client!.evaluateRaw(images[fn.name]!, input, {deadline: Date.now() + 120_000}).then(() => undefined, (e: Error) => e)
        expect(err, `${label}: must fail as the binary does`).to.be.instanceOf(Error)
        const firstLine = direct.stderr.split('\n').find((l) => l.trim() !== '') ?? ''
        expect(err!.message, label).to.contain(firstLine.trim().slice(0, 60))
        failed++
      }
    })
    console.log(`      corpus through pods: ${ok} answers byte-identical, ${failed} failures with the function's message`)
    expect(ok).to.be.greaterThan(0)
    expect(failed).to.be.greaterThan(0)
    // Still one pod per function: the corpus reused the warm pods.
    expect((await fnrPods()).length).to.equal(CATALOG.length)
  })
})
