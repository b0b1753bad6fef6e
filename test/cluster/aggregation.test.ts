/**
 * What a real cluster hosts and Porch's server needs from it (docs/cluster.md): the aggregation layer (an APIService
 * backed by a server on loopback, reached through kube-apiserver with the front-proxy client certificate and the
 * identity headers) and watches with bookmarks started without a resourceVersion, as Porch's client starts them
 * (kube-apiserver asks etcd for watch progress; Debian's etcd 3.4 refuses, the default etcd 3.6 serves them).
 */
import {expect} from 'chai'
import type {IncomingMessage, ServerResponse} from 'node:http'
import {createServer, type Server} from 'node:https'
import type {TLSSocket} from 'node:tls'

import type {ControlPlane} from '../support/cluster/controlplane.js'
import {FRONT_PROXY_CLIENT_CN} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {eventually} from '../support/k8s/fixtures.js'
import type {KubeObject} from '../support/k8s/status.js'

const GROUP = 'aggregation.fnr.test'

/** What the backend saw of each request: path, the client certificate's CN and the identity headers. */
interface Seen {
  path: string
  clientCn: string | undefined
  authorized: boolean
  user: string | undefined
  groups: string[]
}

/**
 * A minimal aggregated API server on 127.0.0.1: discovery for GROUP/v1 (one resource, `echoes`) and
 * GET .../echoes/NAME, which answers with who kube-apiserver said the caller is. It trusts the identity headers only
 * from a client certificate of the front-proxy CA named front-proxy-client, as a real aggregated server does.
 */
async function startBackend(cp: ControlPlane, dnsName: string): Promise<{server: Server; port: number; seen: Seen[]}> {
  const {cert, key} = await cp.servingCert([dnsName, 'localhost'])
  const seen: Seen[] = []
  const server = createServer({cert, key, ca: cp.frontProxyCaPem, requestCert: true, rejectUnauthorized: false}, (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as TLSSocket
    const peer = socket.getPeerCertificate()
    const clientCn = peer && typeof peer.subject?.CN === 'string' ? peer.subject.CN : undefined
    const trusted = socket.authorized && clientCn === FRONT_PROXY_CLIENT_CN
    const groupHeader = req.headersDistinct['x-remote-group']
    const entry: Seen = {
      path: req.url ?? '',
      clientCn,
      authorized: socket.authorized,
      user: trusted ? (req.headers['x-remote-user'] as string | undefined) : undefined,
      groups: trusted ? (groupHeader ?? []) : [],
    }
    seen.push(entry)
    const send = (code: number, body: unknown): void => {
      res.writeHead(code, {'content-type': 'application/json'})
      res.end(JSON.stringify(body))
    }
    if (!trusted) return send(401, {kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 401, reason: 'Unauthorized'})
    const url = new URL(req.url ?? '/', 'https://backend')
    if (url.pathname === `/apis/${GROUP}/v1`) {
      return send(200, {kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${GROUP}/v1`, resources: [{name: 'echoes', singularName: 'echo', namespaced: false, kind: 'Echo', verbs: ['get']}]})
    }
    const m = new RegExp(`^/apis/${GROUP.replaceAll('.', '\\.')}/v1/echoes/([a-z0-9-]+)$`).exec(url.pathname)
    if (m) return send(200, {apiVersion: `${GROUP}/v1`, kind: 'Echo', metadata: {name: m[1]}, user: entry.user, groups: entry.groups})
    return send(404, {kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404, reason: 'NotFound'})
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  return {server, port: (server.address() as {port: number}).port, seen}
}

describe('the real control plane hosts what Porch needs: the aggregation layer, watches with bookmarks', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let cp: ControlPlane
  let client: KubeRestClient
  let ns: {name: string; remove: () => Promise<void>}

  before(async () => {
    cp = await sharedControlPlane()
    client = adminClient(cp)
    ns = await namespace(cp, 'agg')
  })
  after(async () => {
    await ns?.remove()
    client?.close()
  })

  it('publishes the front-proxy CA and the requestheader settings in kube-system/extension-apiserver-authentication', async () => {
    const cm = await client.get('/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication')
    expect(cm.data['requestheader-client-ca-file'].trim()).to.equal(cp.frontProxyCaPem.trim())
    expect(JSON.parse(cm.data['requestheader-allowed-names'])).to.deep.equal([FRONT_PROXY_CLIENT_CN])
    expect(JSON.parse(cm.data['requestheader-username-headers'])).to.deep.equal(['X-Remote-User'])
    expect(JSON.parse(cm.data['requestheader-group-headers'])).to.deep.equal(['X-Remote-Group'])
  })

  it('makes an APIService backed by a server on loopback Available and proxies to it with the front-proxy certificate and the caller\'s identity', async () => {
    // Porch's local-development recipe: the APIService's Service is an ExternalName one for the host.
    const serviceName = 'echo'
    const backend = await startBackend(cp, `${serviceName}.${ns.name}.svc`)
    const apiServiceName = `v1.${GROUP}`
    try {
      await client.create(`/api/v1/namespaces/${ns.name}/services`, {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {name: serviceName},
        spec: {type: 'ExternalName', externalName: 'localhost'},
      })
      await client.create('/apis/apiregistration.k8s.io/v1/apiservices', {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: {name: apiServiceName},
        spec: {
          group: GROUP,
          version: 'v1',
          groupPriorityMinimum: 1000,
          versionPriority: 15,
          service: {namespace: ns.name, name: serviceName, port: backend.port},
          caBundle: Buffer.from(cp.caPem).toString('base64'),
        },
      })
      let last: KubeObject | undefined
      await eventually(async () => {
        last = await client.get(`/apis/apiregistration.k8s.io/v1/apiservices/${apiServiceName}`)
        return (last.status?.conditions ?? []).some((c: KubeObject) => c.type === 'Available' && c.status === 'True')
      }, 60_000, 200).catch((e: Error) => {
        throw new Error(`${e.message}: ${JSON.stringify(last?.status)}`)
      })
      // Discovery through kube-apiserver lists the group, and a request reaches the backend as the admin.
      const groups = await client.get('/apis')
      expect(groups.groups.map((g: KubeObject) => g.name)).to.include(GROUP)
      const echo = await client.get(`/apis/${GROUP}/v1/echoes/hello`)
      expect(echo).to.include({kind: 'Echo'})
      expect(echo.user).to.equal('fnr-admin')
      expect(echo.groups).to.include('system:masters')
      const r = await cp.kubectl(['get', '--raw', `/apis/${GROUP}/v1/echoes/via-kubectl`])
      expect(r.code, r.stderr).to.equal(0)
      expect(JSON.parse(r.stdout).user).to.equal('fnr-admin')
      // Every request the backend saw came with kube-apiserver's front-proxy client certificate.
      expect(backend.seen.length).to.be.greaterThan(0)
      for (const s of backend.seen) expect(s, JSON.stringify(s)).to.include({clientCn: FRONT_PROXY_CLIENT_CN, authorized: true})
    } finally {
      await client.delete(`/apis/apiregistration.k8s.io/v1/apiservices/${apiServiceName}`).catch(() => undefined)
      backend.server.closeAllConnections()
      await new Promise((r) => backend.server.close(r))
    }
  })

  it('streams a watch with allowWatchBookmarks started without a resourceVersion (as Porch\'s client starts it)', async () => {
    await client.create(`/api/v1/namespaces/${ns.name}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'before'}, data: {a: '1'}})
    const events: Array<{type: string; object: KubeObject}> = []
    const watch = client.watch(`/api/v1/namespaces/${ns.name}/configmaps`, {allowWatchBookmarks: true}, (type, object) => events.push({type, object}))
    try {
      // Without a resourceVersion the watch first lists what exists (ADDED), then follows changes. On etcd 3.4 the
      // first and only event is an ERROR: "the required storage feature RequestWatchProgress is disabled".
      await eventually(async () => events.some((e) => e.type === 'ERROR' || (e.type === 'ADDED' && e.object.metadata?.name === 'before')), 30_000, 100)
      expect(events.filter((e) => e.type === 'ERROR').map((e) => e.object.message)).to.deep.equal([])
      await client.create(`/api/v1/namespaces/${ns.name}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'after'}, data: {a: '2'}})
      await eventually(async () => events.some((e) => e.type === 'ADDED' && e.object.metadata?.name === 'after'), 30_000, 100)
      expect(events.filter((e) => e.type === 'ERROR').map((e) => e.object.message)).to.deep.equal([])
    } finally {
      watch.stop()
    }
  })
})
