/**
 * `fnr serve` as a pod, as an operator deploys it: manifests/ applied as shipped (kustomize), with only the image
 * names swapped for locally assembled ones (test/support/node/fnr-image.ts lays out docker/fnr.Dockerfile's final
 * stage from this checkout), on the real control plane and the runc node. The Deployment's pod starts under its
 * restricted security context (uid 65532, read-only root, no capabilities) and its configMap and emptyDir volumes,
 * passes its gRPC readiness probe, answers calls from the exec runtime, and reaches its own Kubernetes API the way
 * a pod does (the `kubernetes` Service, its projected ServiceAccount token: docs/node.md "Services from inside a
 * pod"): it holds its replica Lease under its pod name. Deleting the Deployment stops it cleanly.
 *
 * Porch's namespaces have fixed names: like function-pods.test.ts, this file owns them while it runs.
 */
import {expect} from 'chai'
import path from 'node:path'
import {parseAllDocuments, stringify} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import {deletePorchNamespaces, porchNamespacesGone, POD_NS, RUNNER_NS, RUNNER_USER} from '../support/cluster/porch-namespaces.js'
import {adminClient, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import {pushFnrImage} from '../support/node/fnr-image.js'
import {pushWrapperServerImage} from '../support/node/fixtures.js'
import {RL} from '../support/pods/index.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT} from '../support/serve.js'
import {PACKAGE_TIMEOUT_MS} from '../wrapper/support/package.js'

type KubeObject = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any

describe('fnr serve as a pod from manifests/ (image laid out from docker/fnr.Dockerfile) on the real control plane', function () {
  this.timeout(240_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let registry: TestRegistry
  let fnrImage: string
  let wrapperImage: string
  let podName: string
  let podIP: string

  const runnerPods = async (): Promise<KubeObject[]> => (await admin.get(`/api/v1/namespaces/${RUNNER_NS}/pods`, {labelSelector: 'app=function-runner'})).items as KubeObject[]
  const logs = async (): Promise<string> => (podName ? (await cp.kubectl(['logs', '-n', RUNNER_NS, podName])).stdout : '')

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    await porchNamespacesGone(admin)
    registry = await TestRegistry.start({mode: 'none'})
    const [fnr] = await Promise.all([pushFnrImage(registry, 'fnr:local'), pushWrapperServerImage(registry, 'fnr/wrapper-server:v1')])
    fnrImage = fnr.image
    wrapperImage = `${registry.host}/fnr/wrapper-server:v1`
    console.log(`      fnr image laid out and pushed in ${fnr.ms} ms (${Math.round(fnr.layerBytes / 1048576)} MiB)`)
  })

  after(async function () {
    this.timeout(120_000)
    if (admin) await deletePorchNamespaces(admin)
    await registry?.stop()
    admin?.close()
  })

  it('starts from the Deployment as shipped (restricted, read-only root, configMap volume), is Ready by its gRPC probe, serves exec calls, and holds its Lease through the API it reaches from the pod', async () => {
    // kustomize as an operator runs it; then only the two image names change (what `kustomize edit set image` does)
    const built = await cp.kubectl(['kustomize', path.join(REPO_ROOT, 'manifests')])
    expect(built.code, built.stderr).to.equal(0)
    const docs = parseAllDocuments(built.stdout).map((d) => d.toJS() as KubeObject)
    const deployment = docs.find((d) => d.kind === 'Deployment' && d.metadata?.name === 'function-runner')!
    const container = (deployment.spec.template.spec.containers as KubeObject[]).find((c) => c.name === 'function-runner')!
    container.image = fnrImage
    container.env.find((e: KubeObject) => e.name === 'WRAPPER_SERVER_IMAGE').value = wrapperImage
    // this runner's requests only: earlier suites on the shared control plane used the same ServiceAccount
    const auditFrom = (await cp.auditEvents()).length
    const applied = await cp.kubectl(['apply', '-f', '-'], {input: docs.map((d) => stringify(d)).join('---\n')})
    expect(applied.code, applied.stderr).to.equal(0)

    const started = Date.now()
    const pod = await eventually(async () => {
      const p = (await runnerPods()).find((x) => !x.metadata.deletionTimestamp)
      if (p) podName = p.metadata.name
      return p?.status?.conditions?.some((c: KubeObject) => c.type === 'Ready' && c.status === 'True') && p
    }, 180_000, 250).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify((await runnerPods()).map((p) => p.status), null, 1)}\nfnr's log:\n${await logs()}`)
    })
    podIP = pod.status.podIP
    console.log(`      Deployment applied to pod Ready: ${Date.now() - started} ms`)
    // the pod as the shipped security context has it
    const status = (pod.status.containerStatuses as KubeObject[])[0]!
    expect(status.ready).to.equal(true)
    expect(status.restartCount).to.equal(0)

    // an exec function of the image's config.yaml, called over gRPC at the pod's address
    const client = new EvaluatorClient(`${podIP}:9445`)
    try {
      const rl = Buffer.from(`${RL.toString()}functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    namespace: from-the-pod\n`)
      const res = await client.evaluateRaw('fnr.local/set-namespace:v0.4', rl, {deadline: Date.now() + 60_000})
      expect(res.resourceList.toString()).to.contain('namespace: from-the-pod')
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])
    } finally {
      client.close()
    }

    // it reached kube-apiserver from inside the pod with its ServiceAccount: its replica Lease, held under its pod name
    const lease = await eventually(async () => {
      const leases = (await admin.get(`/apis/coordination.k8s.io/v1/namespaces/${POD_NS}/leases`)).items as KubeObject[]
      return leases.find((l) => l.spec?.holderIdentity === podName)
    }, 60_000, 250).catch(async (e: Error) => {
      throw new Error(`${e.message}: no Lease held by ${podName}\nfnr's log:\n${await logs()}`)
    })
    expect(lease.metadata.name).to.equal(`fnr-replica-${podName}`)
    const mine = (await cp.auditEvents()).slice(auditFrom).filter((e) => e.user.username === RUNNER_USER && e.stage === 'ResponseComplete')
    const leaseCalls = mine.filter((e) => e.objectRef?.resource === 'leases')
    const codes = JSON.stringify(leaseCalls.map((e) => [e.verb, e.objectRef?.name, e.responseStatus?.code]))
    expect(leaseCalls.filter((e) => e.verb === 'create' && e.responseStatus?.code === 201), codes).to.have.length(1)
    // (a get before the create finds none: 404)
    expect(leaseCalls.every((e) => (e.responseStatus?.code ?? 0) < 400 || (e.verb === 'get' && e.responseStatus?.code === 404)), codes).to.equal(true)
    // its pod runtime read the in-cluster configuration (the ServiceAccount's token, the kubernetes Service)
    const log = await logs()
    expect(log).to.match(/"kubernetes":"https:\/\/10\.96\.0\.1:443","config":"in-cluster"[^\n]*"msg":"pod runtime ready"/)
    // and it read its function pods through that API (the start's adoption and GC scan). The warm-up of the
    // shipped pod-cache-config's two images stops before any pod is made: their registry, ghcr.io, is out of reach
    // from here, so the image metadata cannot be read.
    const podCalls = mine.filter((e) => e.objectRef?.resource === 'pods' && e.objectRef?.namespace === POD_NS)
    expect(podCalls.filter((e) => e.verb === 'list' && e.responseStatus?.code === 200), JSON.stringify(podCalls.map((e) => [e.verb, e.responseStatus?.code]))).to.not.be.empty
    expect(log).to.contain('"msg":"pod cache warm-up finished"')
    // the image's allocator was found by the bare name in LD_PRELOAD (the loader only warns when it is not)
    expect(log).to.not.contain('LD_PRELOAD')
  })

  it('deleting the Deployment stops the pod cleanly (SIGTERM, graceful exit within its grace period)', async () => {
    const uid = (await runnerPods())[0]!.metadata.uid as string
    const t = Date.now()
    const del = await cp.kubectl(['delete', '-n', RUNNER_NS, 'deployment/function-runner', '--wait=false'])
    expect(del.code, del.stderr).to.equal(0)
    await eventually(async () => !(await runnerPods()).some((p) => p.metadata.uid === uid), 60_000, 250)
    const stopMs = Date.now() - t
    console.log(`      Deployment deleted to pod gone: ${stopMs} ms`)
    // the 35 s grace period was not needed: fnr ended on SIGTERM (the node kills at the end of the grace period)
    expect(stopMs).to.be.lessThan(30_000)
  })
})
