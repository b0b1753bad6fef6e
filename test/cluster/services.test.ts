/**
 * Services from inside a runc pod (docs/node.md "Services from inside a pod"): ClusterIPs routed to the Service's
 * ready endpoints, and a kubelet's Service variables. Proven with real clients: the real kubectl inside a pod finds
 * kube-apiserver the way every in-cluster client does (client-go's in-cluster config: KUBERNETES_SERVICE_HOST/PORT,
 * the projected ServiceAccount token and the cluster CA, the certificate checked for the Service's ClusterIP), and
 * busybox's wget reaches another pod through its Service's ClusterIP and by name (cluster DNS), including a Service
 * made after the pod started.
 */
import {expect} from 'chai'
import {readFileSync} from 'node:fs'

import type {ControlPlane} from '../support/cluster/controlplane.js'
import {KUBERNETES_SERVICE_IP} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import {findStaticBusybox} from '../support/node/runc.js'
import {serviceTable, serviceVariables} from '../support/node/services.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'

const KUBECTL = '/usr/lib/google-cloud-sdk/bin/kubectl'

describe('Services from inside a runc pod: ClusterIP routing and the Service variables, on the real control plane', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let admin: KubeRestClient
  let ns: {name: string; remove: () => Promise<void>}
  let registry: TestRegistry
  let image: string

  before(async () => {
    cp = await sharedControlPlane()
    admin = adminClient(cp)
    ns = await namespace(cp, 'svc')
    registry = await TestRegistry.start({mode: 'none'})
    const busybox = readFileSync(findStaticBusybox()!)
    // busybox (sh, httpd, wget, timeout, env; its wget's own -T crashes in Debian's 1.35) and the real kubectl, a static Go binary built on client-go
    await pushImage(registry, 'svc/tools:v1', {
      entrypoint: ['/bin/sh', '-c'],
      env: ['PATH=/bin'],
      files: {'bin/busybox': busybox, 'bin/sh': busybox, 'bin/kubectl': readFileSync(KUBECTL)},
      gzipLevel: 1,
    })
    image = `${registry.host}/svc/tools:v1`
  })
  after(async () => {
    await ns?.remove()
    await registry?.stop()
    admin?.close()
  })

  const pod = (name: string, script: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name, labels: {app: name}},
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [{name: 'main', image, args: [script], volumeMounts: [{name: 'www', mountPath: '/www'}]}],
      volumes: [{name: 'www', emptyDir: {}}],
      ...extra,
    },
  })
  const phase = async (name: string): Promise<string | undefined> => (await admin.get(`/api/v1/namespaces/${ns.name}/pods/${name}`)).status?.phase
  const logs = async (name: string): Promise<string> => {
    const r = await cp.kubectl(['logs', '-n', ns.name, name])
    return r.stdout
  }

  it('a pod reaches kube-apiserver through the `kubernetes` Service with its own token and CA (the real kubectl, in-cluster), and another pod through a ClusterIP, one made later too', async () => {
    // The client pod's ServiceAccount may read pods and Services of its namespace.
    await admin.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: {name: 'reader'},
      rules: [{apiGroups: [''], resources: ['pods', 'services'], verbs: ['get', 'list']}],
    })
    await admin.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns.name}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: {name: 'reader'},
      roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader'},
      subjects: [{kind: 'ServiceAccount', name: 'default', namespace: ns.name}],
    })
    await admin.create(`/api/v1/namespaces/${ns.name}/pods`, pod('web', 'echo "hello from $HOSTNAME" > /www/index.html && exec httpd -f -p 8080 -h /www', {automountServiceAccountToken: false}))
    await admin.create(`/api/v1/namespaces/${ns.name}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {name: 'web'},
      spec: {selector: {app: 'web'}, ports: [{name: 'http', port: 80, targetPort: 8080}]},
    })
    // The Service's EndpointSlice lists the pod once it is ready (kube-controller-manager).
    await eventually(async () => {
      const slices = await admin.get(`/apis/discovery.k8s.io/v1/namespaces/${ns.name}/endpointslices`, {labelSelector: 'kubernetes.io/service-name=web'})
      return slices.items?.some((s: {endpoints?: Array<{conditions?: {ready?: boolean}}>}) => s.endpoints?.some((e) => e.conditions?.ready))
    }, 60_000, 200)

    const started = Date.now()
    // Through the variables (made before the pod), then a Service made while it runs (found through the API, then
    // dialled at its ClusterIP until the node routes it), then kubectl in-cluster (no kubeconfig, no flags).
    const script = [
      'set -e',
      'env | grep -E "^(KUBERNETES|WEB)_" | sort',
      'echo "web: $(wget -q -O - http://$WEB_SERVICE_HOST:$WEB_SERVICE_PORT/)"',
      // cluster DNS: the short name through resolv.conf's search list, and the full name
      'echo "by name: $(wget -q -O - http://web/) / $(wget -q -O - http://web.$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace).svc.cluster.local/)"',
      'if wget -q -O - http://no-such-service/ 2>/dev/null; then echo "unknown: answered"; else echo "unknown: not found"; fi',
      'until late=$(kubectl get service late -o "jsonpath={.spec.clusterIP}" 2>/dev/null) && [ -n "$late" ]; do sleep 0.2; done',
      'n=0; until out=$(timeout 2 wget -q -O - http://$late:81/ 2>/dev/null); do n=$((n+1)); [ $n -lt 100 ] || exit 3; sleep 0.2; done',
      'echo "late: $out"',
      'echo "api: $(kubectl get pod web -o "jsonpath={.metadata.name} {.status.phase}")"',
    ].join('\n')
    await admin.create(`/api/v1/namespaces/${ns.name}/pods`, pod('client', script))
    await admin.create(`/api/v1/namespaces/${ns.name}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {name: 'late'},
      spec: {selector: {app: 'web'}, ports: [{port: 81, targetPort: 8080}]},
    })
    const ended = await eventually(async () => {
      const p = await phase('client')
      return (p === 'Succeeded' || p === 'Failed') && p
    }, 120_000, 200)
    const out = await logs('client')
    console.log(`      client pod: ${ended} in ${Date.now() - started} ms`)
    expect(ended, out).to.equal('Succeeded')
    const web = await admin.get(`/api/v1/namespaces/${ns.name}/services/web`)
    const lines = out.split('\n')
    // the kubelet's variables: the master Service's and those of the pod's namespace
    expect(lines).to.include(`KUBERNETES_SERVICE_HOST=${KUBERNETES_SERVICE_IP}`)
    expect(lines).to.include('KUBERNETES_SERVICE_PORT=443')
    expect(lines).to.include(`WEB_SERVICE_HOST=${web.spec.clusterIP}`)
    expect(lines).to.include('WEB_SERVICE_PORT_HTTP=80')
    expect(lines).to.include(`WEB_PORT_80_TCP=tcp://${web.spec.clusterIP}:80`)
    expect(lines).to.include('web: hello from web')
    expect(lines).to.include('by name: hello from web / hello from web')
    expect(lines).to.include('unknown: not found')
    expect(lines).to.include('late: hello from web')
    expect(lines).to.include('api: web Running')
  })

  it('enableServiceLinks: false leaves only the master Service\'s variables; a Service with no ready endpoint refuses the connection', async () => {
    await admin.create(`/api/v1/namespaces/${ns.name}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {name: 'nobody'},
      spec: {selector: {app: 'no-such-pod'}, ports: [{port: 80}]},
    })
    const nobody = await admin.get(`/api/v1/namespaces/${ns.name}/services/nobody`)
    const script = `env | grep -E "_SERVICE_HOST=" | sort; if timeout 5 wget -q -O - http://${nobody.spec.clusterIP}/ 2>/dev/null; then echo "nobody: answered"; else echo "nobody: refused"; fi`
    await admin.create(`/api/v1/namespaces/${ns.name}/pods`, pod('nolinks', script, {automountServiceAccountToken: false, enableServiceLinks: false}))
    await eventually(async () => (await phase('nolinks')) === 'Succeeded', 60_000, 200)
    const lines = (await logs('nolinks')).split('\n').filter((l) => l !== '')
    expect(lines).to.deep.equal([`KUBERNETES_SERVICE_HOST=${KUBERNETES_SERVICE_IP}`, 'nobody: refused'])
  })

  it('the table and the variables are built as a kubelet and kube-proxy read Services (unit)', () => {
    const services = [
      {metadata: {namespace: 'a', name: 'my-svc'}, spec: {clusterIP: '10.96.0.9', ports: [{name: 'web', port: 80}, {name: 'dns', port: 53, protocol: 'UDP'}]}},
      {metadata: {namespace: 'a', name: 'headless'}, spec: {clusterIP: 'None', ports: [{port: 80}]}},
      {metadata: {namespace: 'a', name: 'ext'}, spec: {type: 'ExternalName', externalName: 'example.com'}},
    ]
    const slices = [
      {metadata: {namespace: 'a', labels: {'kubernetes.io/service-name': 'my-svc'}}, addressType: 'IPv4', ports: [{name: 'web', port: 8080}], endpoints: [{addresses: ['198.18.0.6'], conditions: {ready: true}}, {addresses: ['198.18.0.10'], conditions: {ready: false}}]},
      {metadata: {namespace: 'b', labels: {'kubernetes.io/service-name': 'my-svc'}}, addressType: 'IPv4', ports: [{name: 'web', port: 9}], endpoints: [{addresses: ['198.18.0.14']}]},
    ]
    expect([...serviceTable(services, slices).values()]).to.deep.equal([{namespace: 'a', service: 'my-svc', clusterIP: '10.96.0.9', port: 80, name: 'web', endpoints: ['198.18.0.6:8080']}])
    expect(serviceVariables(services[0]!)).to.deep.equal({
      MY_SVC_SERVICE_HOST: '10.96.0.9',
      MY_SVC_SERVICE_PORT: '80',
      MY_SVC_SERVICE_PORT_WEB: '80',
      MY_SVC_SERVICE_PORT_DNS: '53',
      MY_SVC_PORT: 'tcp://10.96.0.9:80',
      MY_SVC_PORT_80_TCP: 'tcp://10.96.0.9:80',
      MY_SVC_PORT_80_TCP_PROTO: 'tcp',
      MY_SVC_PORT_80_TCP_PORT: '80',
      MY_SVC_PORT_80_TCP_ADDR: '10.96.0.9',
      MY_SVC_PORT_53_UDP: 'udp://10.96.0.9:53',
      MY_SVC_PORT_53_UDP_PROTO: 'udp',
      MY_SVC_PORT_53_UDP_PORT: '53',
      MY_SVC_PORT_53_UDP_ADDR: '10.96.0.9',
    })
    expect(serviceVariables(services[1]!)).to.deep.equal({})
  })
})
