/**
 * `pods/log` through kube-apiserver (docs/cluster.md): kube-apiserver proxies it to the node's kubelet API
 * (`/containerLogs/…`, TLS on the Node's InternalIP and status.daemonEndpoints.kubeletEndpoint.Port, with its
 * --kubelet-client-certificate; it checks the node's serving certificate against the cluster CA). So the real
 * `kubectl logs` works against runc pods, and fnr's own pod-failure messages carry the pod's log lines.
 */
import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import {request} from 'node:https'

import {FnrError} from '../../src/lib/errors.js'
import {PodEvaluator} from '../../src/lib/evaluators/pod.js'
import {StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {startPodRuntime} from '../../src/lib/pods/runtime/runtime.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import {NODE_NAME} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import {pushBusyboxImage, pushScriptFunctionImage} from '../support/node/fixtures.js'
import {findStaticBusybox} from '../support/node/runc.js'
import {CAT_FUNCTION_SCRIPT} from '../support/node/function-images.js'
import {RL, testRuntimeOptions} from '../support/pods/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'

describe('pods/log through kube-apiserver: the node serves its kubelet API\'s container logs', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let ns: {name: string; remove: () => Promise<void>}
  let registry: TestRegistry
  let busybox: string

  before(async () => {
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    ns = await namespace(cp, 'logs')
    registry = await TestRegistry.start({mode: 'none'})
    await pushBusyboxImage(registry, 'logs/busybox:v1')
    busybox = `${registry.host}/logs/busybox:v1`
  })
  after(async () => {
    await ns?.remove()
    await registry?.stop()
    admin?.close()
  })

  it('the Node publishes its kubelet port; `kubectl logs` (plain, --tail, --limit-bytes, -c, -f) reads a runc pod\'s output through kube-apiserver', async () => {
    const node = await admin.get(`/api/v1/nodes/${NODE_NAME}`)
    const port = node.status.daemonEndpoints.kubeletEndpoint.Port as number
    expect(port).to.equal(cp.kubelet!.serverPort)
    await admin.create(`/api/v1/namespaces/${ns.name}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {name: 'talker'},
      spec: {
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 1,
        initContainers: [{name: 'setup', image: busybox, args: ['echo init says hi']}],
        containers: [
          {name: 'main', image: busybox, args: ['for i in 1 2 3; do echo line $i; done; sleep 0.5; echo to stderr >&2; while :; do sleep 1; echo tick; done']},
          {name: 'quiet', image: busybox, args: ['exec sleep 3600']},
        ],
      },
    })
    await eventually(async () => (await admin.get(`/api/v1/namespaces/${ns.name}/pods/talker`)).status?.containerStatuses?.every((c: {ready: boolean}) => c.ready), 60_000, 100)
    const t = Date.now()
    const logs = await eventually(async () => {
      const r = await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'main'])
      return r.code === 0 && r.stdout.includes('to stderr') && r.stdout
    }, 20_000, 200)
    console.log(`      kubectl logs through kube-apiserver and the node: ${Date.now() - t} ms`)
    // stdout and stderr interleaved as the container wrote them
    expect(logs.split('\n').slice(0, 4)).to.deep.equal(['line 1', 'line 2', 'line 3', 'to stderr'])
    const tail = await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'main', '--tail=1'])
    expect(tail.code, tail.stderr).to.equal(0)
    expect(tail.stdout.trimEnd().split('\n')).to.have.length(1)
    const limited = await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'main', '--limit-bytes=6'])
    expect(limited.stdout).to.equal('line 1')
    const init = await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'setup'])
    expect(init.stdout).to.equal('init says hi\n')
    expect((await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'quiet'])).stdout).to.equal('')
    // follow: the ticks keep coming through the open stream
    const follow = await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'main', '-f', '--tail=0', '--request-timeout=3s'], {timeoutMs: 10_000})
    expect(follow.stdout).to.match(/tick\n/)
    // an unknown container: the API server says so itself
    const missing = await cp.kubectl(['logs', '-n', ns.name, 'talker', '-c', 'nope'])
    expect(missing.code).to.not.equal(0)
    expect(missing.stderr).to.contain('container nope is not valid for pod talker')
    await admin.delete(`/api/v1/namespaces/${ns.name}/pods/talker`, {apiVersion: 'v1', kind: 'DeleteOptions', gracePeriodSeconds: 0})
  })

  it('the node\'s kubelet API refuses clients without kube-apiserver\'s client certificate', async () => {
    const port = cp.kubelet!.serverPort!
    const get = (): Promise<number> => new Promise((resolve, reject) => {
      const req = request({host: '127.0.0.1', port, path: `/containerLogs/${ns.name}/x/y`, ca: cp.caPem}, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    expect(await get()).to.equal(401)
  })

  it('fnr\'s error for a function pod that fails at start carries the pod\'s log lines (pods/log through kube-apiserver)', async () => {
    // A wrapper-server image whose "wrapper server" exits at once with a message, and a function image to run it.
    const bb = readFileSync(findStaticBusybox()!)
    await pushImage(registry, 'logs/crash-wrapper:v1', {
      user: '65532:65532',
      env: ['PATH=/bin'],
      files: {'bin/busybox': bb, 'bin/sh': bb, 'bin/cp': bb, 'home/nonroot/wrapper-server/wrapper-server': '#!/bin/sh\necho "wrapper exploded at start: bad config" >&2\nexit 3\n'},
    })
    await pushScriptFunctionImage(registry, 'logs/cat:v1', CAT_FUNCTION_SCRIPT)
    const fnImage = `${registry.host}/logs/cat:v1`
    const metadata = new StaticMetadataSource((img) => (img === fnImage ? ['/usr/local/bin/function'] : undefined))
    const place = {namespace: ns.name, runnerNamespace: ns.name, wrapperServerImage: `${registry.host}/logs/crash-wrapper:v1`, metadata, kube: {kubeConfig: await kubeConfigFor(cp)}, owner: 'logs'}
    const runtime = await startPodRuntime(testRuntimeOptions(place, {leaseDurationMs: 0}))
    const evaluator = new PodEvaluator({cache: runtime.cache, ready: runtime.warmedUp, close: () => runtime.close()})
    try {
      await runtime.started
      const err = await evaluator.evaluate({image: fnImage, resourceList: RL, deadline: Date.now() + 60_000}).then(() => undefined, (e: unknown) => e)
      expect(err).to.be.instanceOf(FnrError)
      console.log(`      ${(err as FnrError).kind}: ${(err as FnrError).message}`)
      expect((err as FnrError).message).to.contain('wrapper exploded at start: bad config')
    } finally {
      await evaluator.close()
    }
  })
})

/** An admin KubeConfig of @kubernetes/client-node for the control plane. */
async function kubeConfigFor(cp: ControlPlane): Promise<import('@kubernetes/client-node').KubeConfig> {
  const k8s = await import('@kubernetes/client-node')
  const kc = new k8s.KubeConfig()
  kc.loadFromString(cp.kubeconfigFor(cp.adminToken))
  return kc
}
