/**
 * After a swap (docs/porch-swap.md): the function pods and Services Porch's runner left in the pod namespace,
 * labelled as Porch labels them (fn.kpt.dev/image=<podId>, fn.kpt.dev/template-version; the Service named <podId>,
 * selecting that label), are counted at start, and collected with `fnr serve --collect-porch-pods` or
 * `fnr pods gc --porch-leftovers`. fnr's own pods and anything else in the namespace are never touched.
 */
import {expect} from 'chai'

import {runCli} from '../support/cli.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {listPods, listServices, startClusterPodBed, startClusterRuntime, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until} from '../support/pods/index.js'
import {memoryLogger} from '../support/memory-logger.js'

const PORCH_ID = 'set-labels-v022-1-584115f2'
const GONE_ID = 'set-namespace-v041-1-abcdef12'

/**
 * What Porch's runner leaves: a pod from its inline template, its Service, and a Service whose pod is gone.
 * The pods are bound to a node that does not exist (no kubelet runs them, nothing GCs them: the control plane runs
 * no pod GC controller); a deleted one keeps its deletionTimestamp until forceDeleteUnscheduled() below.
 */
async function leavePorchObjects(pb: ClusterPodBed, ns: string): Promise<void> {
  await pb.admin.create(`/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name: `${PORCH_ID}-x7k2p`, labels: {'fn.kpt.dev/image': PORCH_ID}, annotations: {'fn.kpt.dev/template-version': 'inline-v1', 'cluster-autoscaler.kubernetes.io/safe-to-evict': 'true'}},
    spec: {
      initContainers: [{name: 'copy-wrapper-server', image: 'docker.io/nephio/porch-wrapper-server:latest', command: ['cp', '-a', '/home/nonroot/wrapper-server/.', '/wrapper-server-tools']}],
      containers: [{name: 'function', image: 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2', command: ['/wrapper-server-tools/wrapper-server'], args: ['--port', '9446', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function']}],
      nodeName: 'elsewhere',
    },
  })
  for (const id of [PORCH_ID, GONE_ID]) await pb.admin.create(`/api/v1/namespaces/${ns}/services`, {apiVersion: 'v1', kind: 'Service', metadata: {name: id}, spec: {selector: {'fn.kpt.dev/image': id}, ports: [{port: 9446, targetPort: 9446}], type: 'ClusterIP'}})
  // not Porch's: a pod and a Service of something else
  await pb.admin.create(`/api/v1/namespaces/${ns}/pods`, {apiVersion: 'v1', kind: 'Pod', metadata: {name: 'app', labels: {app: 'x'}}, spec: {containers: [{name: 'app', image: 'busybox'}], nodeName: 'elsewhere'}})
  await pb.admin.create(`/api/v1/namespaces/${ns}/services`, {apiVersion: 'v1', kind: 'Service', metadata: {name: 'app'}, spec: {selector: {app: 'x'}, ports: [{port: 80}]}})
}

/** Deletes at once (grace 0) the pods of `ns` bound to the node that does not exist. */
async function forceDeleteUnscheduled(pb: ClusterPodBed, ns: string): Promise<void> {
  for (const p of await listPods(pb, ns, {includeDeleting: true})) {
    if (p.spec?.nodeName === 'elsewhere') await pb.admin.delete(`/api/v1/namespaces/${ns}/pods/${p.metadata!.name!}`, {gracePeriodSeconds: 0}).catch(() => undefined)
  }
}

describe("the function pods Porch's runner left (after a swap)", function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  const used: string[] = []
  before(async () => {
    pb = await startClusterPodBed()
  })
  after(async () => {
    // pods on a node that does not exist never finish deleting (nor would their namespace): force them out
    for (const ns of used.splice(0)) await forceDeleteUnscheduled(pb, ns).catch(() => undefined)
    await pb?.stop()
  })

  const namespace = async (): Promise<string> => {
    const ns = await pb.namespace()
    used.push(ns)
    return ns
  }

  const names = async (ns: string): Promise<{pods: string[]; services: string[]}> => ({
    pods: (await listPods(pb, ns)).map((p) => p.metadata!.name!).sort(),
    services: (await listServices(pb, ns)).map((s) => s.metadata!.name!).sort(),
  })

  it('are counted at start and left alone by default; --collect-porch-pods deletes them and their Services, and nothing else', async () => {
    const ns = await namespace()
    await leavePorchObjects(pb, ns)
    const logger = memoryLogger()
    const first = await startClusterRuntime(pb, {namespace: ns, logger})
    try {
      // fnr's own pod, which must stay
      const res = await first.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
      expect(res.resourceList.toString()).to.equal(RL.toString())
      await until(() => logger.lines.find((l) => l.msg.startsWith("function pods left by Porch's runner; --collect-porch-pods")), 'the count logged')
      expect(logger.lines.find((l) => l.msg.startsWith("function pods left by Porch's runner"))!.fields).to.deep.equal({namespace: ns, pods: 1})
    } finally {
      await first.close()
    }
    const fnrPod = (await listPods(pb, ns)).find((p) => p.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'fnr')!.metadata!.name!
    expect((await names(ns)).pods).to.include.members([`${PORCH_ID}-x7k2p`, 'app', fnrPod])

    const collecting = memoryLogger()
    const second = await startClusterRuntime(pb, {namespace: ns, logger: collecting, collectPorchPods: true})
    try {
      await until(() => collecting.lines.find((l) => l.msg === "collected the function pods left by Porch's runner"), 'collected')
      expect(collecting.lines.find((l) => l.msg === "collected the function pods left by Porch's runner")!.fields).to.deep.include({pods: [`${PORCH_ID}-x7k2p`], services: [PORCH_ID, GONE_ID], deleted: 3, failed: 0})
      await until(async () => !(await names(ns)).pods.includes(`${PORCH_ID}-x7k2p`), 'the pod gone')
      expect((await names(ns)).pods).to.include.members(['app', fnrPod])
      expect((await names(ns)).services).to.include('app').and.not.include(PORCH_ID).and.not.include(GONE_ID)
      // fnr's pod still serves
      const res = await second.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
      expect(res.resourceList.toString()).to.equal(RL.toString())
    } finally {
      await second.close()
    }
  })

  it('`fnr pods gc --porch-leftovers` lists them with --dry-run and deletes them without', async () => {
    const ns = await namespace()
    await leavePorchObjects(pb, ns)
    const args = ['pods', 'gc', '--porch-leftovers', '-n', ns, `--kubeconfig=${pb.kubeconfigPath}`]
    const dry = await runCli([...args, '--dry-run'])
    expect(dry.exitCode, dry.stderr).to.equal(0)
    expect(dry.stderr).to.contain(`Pod ${ns}/${PORCH_ID}-x7k2p (left by Porch's runner, ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2): would be deleted`)
    expect(dry.stderr).to.contain(`Service ${ns}/${GONE_ID} (left by Porch's runner): would be deleted`)
    expect((await names(ns)).pods).to.include(`${PORCH_ID}-x7k2p`)
    const real = await runCli(args)
    expect(real.exitCode, real.stderr).to.equal(0)
    expect(real.stderr).to.contain(`Pod ${ns}/${PORCH_ID}-x7k2p (left by Porch's runner, ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2): deleted`)
    await until(async () => !(await names(ns)).pods.includes(`${PORCH_ID}-x7k2p`), 'the pod gone')
    expect(await names(ns)).to.deep.equal({pods: ['app'], services: ['app']})
  })
})
