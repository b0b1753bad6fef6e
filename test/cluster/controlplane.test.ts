import {expect} from 'chai'

import type {ControlPlane} from '../support/cluster/controlplane.js'
import {NODE_NAME} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {KubeRequestError} from '../support/k8s/client.js'
import {eventually, httpServerCommand, isPodReady} from '../support/k8s/fixtures.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushBusyboxImage} from '../support/node/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'

describe('the real control plane (etcd, kube-apiserver, kube-controller-manager, LocalKubelet node with runc)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let client: KubeRestClient
  let ns: {name: string; remove: () => Promise<void>}

  before(async () => {
    cp = await sharedControlPlane()
    client = adminClient(cp)
    ns = await namespace(cp, 'cp')
  })
  after(async () => {
    await ns?.remove()
    client?.close()
  })

  it('serves the API over TLS with the admin token, and refuses anonymous and unknown tokens', async () => {
    const version = await client.get('/version')
    expect(version.gitVersion).to.match(/^v1\.\d+\.\d+/)
    const {KubeRestClient} = await import('../support/k8s/client.js')
    const stranger = new KubeRestClient({url: cp.url, token: 'not-a-token', ca: cp.caPem})
    try {
      expect((await stranger.raw('GET', '/api/v1/namespaces')).code).to.equal(401)
    } finally {
      stranger.close()
    }
    const r = await cp.kubectl(['auth', 'can-i', 'create', 'pods', '--as=system:serviceaccount:default:default', '-n', 'default'])
    expect(r.stdout.trim()).to.equal('no')
  })

  it('has a Ready node that renews its Lease', async () => {
    const node = await client.get(`/api/v1/nodes/${NODE_NAME}`)
    expect(node.status.conditions.find((c: KubeObject) => c.type === 'Ready').status).to.equal('True')
    const lease = await client.get(`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${NODE_NAME}`)
    expect(lease.spec.holderIdentity).to.equal(NODE_NAME)
  })

  it('admits, binds and runs a pod; the controller manager matches it to its Service (EndpointSlice refused: loopback pod IP)', async () => {
    const image = 'example.test/http-server:v1'
    cp.kubelet!.setImage(image, {command: httpServerCommand(8080, 'hello')})
    await client.create(`/api/v1/namespaces/${ns.name}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {name: 'web', labels: {app: 'web'}},
      spec: {containers: [{name: 'main', image, ports: [{containerPort: 8080}], readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}}]},
    })
    await client.create(`/api/v1/namespaces/${ns.name}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {name: 'web'},
      spec: {selector: {app: 'web'}, ports: [{port: 80, targetPort: 8080}]},
    })
    let last: KubeObject | undefined
    const pod = await eventually(async () => {
      last = await client.get(`/api/v1/namespaces/${ns.name}/pods/web`)
      return isPodReady(last) && last
    }, 30_000, 100).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify(last?.status)} ${JSON.stringify(last?.spec?.nodeName)}`)
    })
    expect(pod.spec.nodeName).to.equal(NODE_NAME)
    // kube-scheduler bound it (the node binds pods itself only with FNR_CLUSTER_SCHEDULER=node)
    if (cp.pids['kube-scheduler']) {
      const scheduled = await eventually(async () => {
        const events = (await client.get(`/api/v1/namespaces/${ns.name}/events`, {fieldSelector: 'involvedObject.kind=Pod,involvedObject.name=web'})).items as KubeObject[]
        return events.find((e) => e.reason === 'Scheduled')
      }, 10_000, 100)
      expect(scheduled.reportingComponent || scheduled.source?.component).to.equal('default-scheduler')
      expect(scheduled.message).to.contain(`to ${NODE_NAME}`)
    }
    // the ServiceAccount admission plugin mounted the projected token volume
    expect(pod.spec.volumes.map((v: KubeObject) => v.name).join(',')).to.match(/kube-api-access-/)
    const res = await fetch(`http://${pod.status.podIP}:8080/`)
    expect(await res.text()).to.equal('web hello')
    // The EndpointSlice controller matched the pod to the Service, and kube-apiserver refused its loopback address
    // (the test server stored it): pod addresses on this node are loopback ones (docs/cluster.md, "Limits").
    const event = await eventually(async () => {
      const events = (await client.get(`/api/v1/namespaces/${ns.name}/events`, {fieldSelector: 'involvedObject.kind=Service,involvedObject.name=web'})).items as KubeObject[]
      return events.find((e) => e.reason === 'FailedToUpdateEndpointSlices')
    }, 30_000, 200)
    expect(event.message).to.contain(`Invalid value: "${pod.status.podIP}": may not be in the loopback range`)
  })

  it('runs a real image under runc on the node: a pod IP in a network namespace (198.18.0.0/15), accepted in the Service\'s EndpointSlice', async () => {
    expect(cp.runtime, 'the shared control plane\'s node runs pods under runc by default').to.not.equal(undefined)
    const registry = await TestRegistry.start({mode: 'none'})
    try {
      await pushBusyboxImage(registry, 'cp/busybox:v1')
      const image = `${registry.host}/cp/busybox:v1`
      const t = Date.now()
      await client.create(`/api/v1/namespaces/${ns.name}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name: 'runc', labels: {app: 'runc'}},
        spec: {
          automountServiceAccountToken: false, // the runc node supports emptyDir volumes only (docs/node.md)
          terminationGracePeriodSeconds: 1,
          containers: [{name: 'main', image, args: ['touch /ready; exec sleep 3600'], readinessProbe: {exec: {command: ['sh', '-c', 'test -f /ready']}, periodSeconds: 1}}],
        },
      })
      await client.create(`/api/v1/namespaces/${ns.name}/services`, {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {name: 'runc'},
        spec: {selector: {app: 'runc'}, ports: [{port: 80, targetPort: 8080}]},
      })
      let last: KubeObject | undefined
      const pod = await eventually(async () => {
        last = await client.get(`/api/v1/namespaces/${ns.name}/pods/runc`)
        return isPodReady(last) && last
      }, 60_000, 100).catch((e: Error) => {
        throw new Error(`${e.message}: ${JSON.stringify(last?.status)}`)
      })
      console.log(`      pod create to Ready under runc through kube-apiserver (pull + unpack included): ${Date.now() - t} ms`)
      expect(pod.status.podIP).to.match(/^198\.1[89]\./)
      expect(pod.status.containerStatuses[0].containerID).to.match(/^runc:\/\//)
      const slice = await eventually(async () => {
        const slices = (await client.get(`/apis/discovery.k8s.io/v1/namespaces/${ns.name}/endpointslices`, {labelSelector: 'kubernetes.io/service-name=runc'})).items as KubeObject[]
        return slices.find((sl) => (sl.endpoints ?? []).length > 0)
      }, 30_000, 200)
      expect(slice.endpoints[0].addresses).to.deep.equal([pod.status.podIP])
      expect(slice.endpoints[0].conditions.ready).to.equal(true)
      await client.delete(`/api/v1/namespaces/${ns.name}/pods/runc`)
      await eventually(async () => (await client.raw('GET', `/api/v1/namespaces/${ns.name}/pods/runc`)).code === 404, 30_000, 200)
    } finally {
      await registry.stop()
    }
  })

  it('enforces Pod Security admission (restricted) and ResourceQuota', async () => {
    const restricted = await namespace(cp, 'cp-restricted', {'pod-security.kubernetes.io/enforce': 'restricted'})
    try {
      const err = await client
        .create(`/api/v1/namespaces/${restricted.name}/pods`, {apiVersion: 'v1', kind: 'Pod', metadata: {name: 'root'}, spec: {containers: [{name: 'c', image: 'busybox'}]}})
        .then(() => undefined, (e: unknown) => e)
      expect(err).to.be.instanceOf(KubeRequestError)
      expect((err as KubeRequestError).code).to.equal(403)
      expect((err as Error).message).to.match(/violates PodSecurity "restricted/)
      await client.create(`/api/v1/namespaces/${restricted.name}/resourcequotas`, {apiVersion: 'v1', kind: 'ResourceQuota', metadata: {name: 'q'}, spec: {hard: {pods: '0'}}})
      await eventually(async () => (await client.get(`/api/v1/namespaces/${restricted.name}/resourcequotas/q`)).status?.hard, 20_000, 100)
      // The apiserver's quota admission reads quotas from its own informer, which can lag the quota's
      // status by a moment: a pod admitted in that window is deleted and the create is tried again.
      const compliant = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name: 'ok'},
        spec: {
          securityContext: {runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}},
          containers: [{name: 'c', image: 'busybox', securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}}}],
        },
      }
      let admittedBeforeQuota = 0
      const quotaErr = await eventually(async () => {
        const outcome = await client.create(`/api/v1/namespaces/${restricted.name}/pods`, compliant).then(() => undefined, (e: unknown) => e)
        if (outcome === undefined) {
          admittedBeforeQuota++
          await client.delete(`/api/v1/namespaces/${restricted.name}/pods/ok`, {gracePeriodSeconds: 0}).catch(() => undefined)
          return false
        }
        return outcome instanceof KubeRequestError && /exceeded quota/.test(outcome.message) ? outcome : false
      }, 20_000, 200)
      expect(quotaErr.code).to.equal(403)
      expect(quotaErr.message).to.match(/exceeded quota: q, requested: pods=1, used: pods=\d+, limited: pods=0/)
      if (admittedBeforeQuota > 0) console.log(`      pods admitted before the quota admission saw the quota: ${admittedBeforeQuota}`)
    } finally {
      await restricted.remove()
    }
  })

  it('reports the control plane\'s memory', async () => {
    const rss = await cp.rssKiB()
    expect(Object.keys(rss).sort()).to.deep.equal(['etcd', 'kube-apiserver', 'kube-controller-manager', ...(cp.pids['kube-scheduler'] ? ['kube-scheduler'] : [])])
    for (const v of Object.values(rss)) expect(v).to.be.greaterThan(1000)
    console.log(`      control plane RSS: ${Object.entries(rss).map(([k, v]) => `${k} ${(v / 1024).toFixed(0)} MiB`).join(', ')}`)
  })
})
