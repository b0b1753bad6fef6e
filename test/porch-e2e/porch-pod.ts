/**
 * porch-server as a pod on the control plane's runc node, from Porch v1.5.8's own deployment files as written (read
 * from Porch's module in the Go module cache, never copied into the repo): `deployments/porch/3-porch-server.yaml`
 * (ServiceAccount, Deployment, the `api` Service), `4-apiservice.yaml`, `5-rbac.yaml` to `8-auth-delegator.yaml`, and
 * the two objects of `3-porch-postgres-bundle.yaml` the Deployment's `envFrom` names. The image is assembled here
 * from Porch's `build/Dockerfile` final stage, holding the porch-server binary built by scripts/porch-peers.mjs.
 *
 * What the pod reaches, and how (docs/node.md, "Services from inside a pod"): kube-apiserver through the `kubernetes`
 * Service with its ServiceAccount token (in-cluster configuration); the function runner through the Service its
 * `--function-runner=function-runner:9445` names, fnr's own `function-runner` Service in porch-system (manifests/),
 * whose endpoint here is the runner process on this host (`fnr serve`, or Porch's own runner for the comparison);
 * the git server through a Service `git` in `porch-e2e-git`. The
 * host processes are reached at the pod's `status.hostIP` (the host end of its veth), where this module listens:
 * EndpointSlices may not name loopback addresses, and the node routes a ClusterIP to the addresses its
 * EndpointSlices list. kube-apiserver reaches the pod for the APIService through the `api` Service's EndpointSlice
 * (`--enable-aggregator-routing`: the pod IP, which the host reaches directly).
 */
import {mkdir, mkdtemp, readFile, rm, writeFile, copyFile, chmod} from 'node:fs/promises'
import net from 'node:net'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {execa} from 'execa'
import {parseAllDocuments, stringify} from 'yaml'

import {porchModuleDir} from './porch-files.js'
import {until} from './porch-server.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushImage} from '../support/registry/fixtures.js'
import type {TestRegistry} from '../support/registry/registry.js'

export const PORCH_NS = 'porch-system'
/** Where the git server is reached from pods: a Service of this name and port (Gitea's usual port). */
export const GIT_NS = 'porch-e2e-git'
export const GIT_SERVICE = 'git'
export const GIT_PORT = 3000
export const GIT_URL = `http://${GIT_SERVICE}.${GIT_NS}.svc.cluster.local:${GIT_PORT}`

/** Porch's deployment files the pod variant applies, in Porch's module. */
export function porchDeploymentFiles(): {server: string; dbBundle: string; rbac: string[]; dockerfile: string} {
  const dir = path.join(porchModuleDir(), 'deployments', 'porch')
  return {
    server: path.join(dir, '3-porch-server.yaml'),
    dbBundle: path.join(dir, '3-porch-postgres-bundle.yaml'),
    rbac: ['5-rbac.yaml', '6-rbac-bind.yaml', '7-auth-reader.yaml', '8-auth-delegator.yaml'].map((f) => path.join(dir, f)),
    dockerfile: path.join(porchModuleDir(), 'build', 'Dockerfile'),
  }
}

/**
 * The porch-server image laid out from Porch's `build/Dockerfile` final stage: its `COPY … /porch
 * /home/nonroot/porch` (mode 555), `USER nonroot:nonroot`, `ENTRYPOINT ["/home/nonroot/porch"]` read from the file;
 * the alpine base's part that porch-server uses stands in as files: `/etc/passwd` and `/etc/group` with the
 * Dockerfile's `nonroot` (10001), `/tmp`. The binary is static (CGO_ENABLED=0, as the Dockerfile builds it). One
 * uncompressed layer: pushed and pulled once, on this machine.
 */
export async function pushPorchServerImage(registry: TestRegistry, binary: string, repoTag = 'nephio/porch-server:local'): Promise<{image: string; ms: number}> {
  const t0 = Date.now()
  const dockerfile = await readFile(porchDeploymentFiles().dockerfile, 'utf8')
  const finalStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '))
  const entrypoint = JSON.parse(/^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(finalStage)?.[1] ?? 'null') as string[] | null
  const user = /^USER\s+(\S+)\s*$/m.exec(finalStage)?.[1]
  const copy = /^COPY\s+--from=builder\s+.*\s\/porch\s+(\S+)\s*$/m.exec(finalStage)?.[1]
  const ids = /addgroup -g (\d+) nonroot.*\n?.*adduser -D -G nonroot -u (\d+) nonroot/s.exec(finalStage)
  if (!entrypoint || !user || !copy || !ids) throw new Error(`${porchDeploymentFiles().dockerfile}: its final stage is not the one this layout reads (ENTRYPOINT, USER, COPY of /porch, the nonroot user)`)
  const root = await mkdtemp(path.join(tmpdir(), 'porch-image-'))
  const layer = `${root}.tar`
  try {
    await chmod(root, 0o755)
    const target = path.join(root, copy)
    await mkdir(path.dirname(target), {recursive: true})
    await copyFile(binary, target)
    await chmod(target, 0o555)
    await mkdir(path.join(root, 'etc'))
    await writeFile(path.join(root, 'etc', 'passwd'), `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${ids[2]}:${ids[1]}::/home/nonroot:/sbin/nologin\n`)
    await writeFile(path.join(root, 'etc', 'group'), `root:x:0:\nnonroot:x:${ids[1]}:\n`)
    await mkdir(path.join(root, 'tmp'))
    await chmod(path.join(root, 'tmp'), 0o1777)
    for (const d of ['proc', 'dev', 'sys']) await mkdir(path.join(root, d))
    await execa('tar', ['-C', root, '--numeric-owner', '--owner=0', '--group=0', '-cf', layer, '.'])
    await pushImage(registry, repoTag, {layers: [await readFile(layer)], entrypoint, user, gzipLevel: 0})
    return {image: `${registry.host}/${repoTag}`, ms: Date.now() - t0}
  } finally {
    await rm(root, {recursive: true, force: true})
    await rm(layer, {force: true})
  }
}

/** A TCP listener on `host` (a free port) that copies each connection to `target` (host:port) and back. */
export async function forwarder(host: string, target: {host: string; port: number}): Promise<{port: number; connections(): number; close(): Promise<void>}> {
  const sockets = new Set<net.Socket>()
  let connections = 0
  const server = net.createServer((client) => {
    connections++
    const upstream = net.connect(target)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.once('close', () => sockets.delete(s))
      s.on('error', () => undefined)
    }
    client.once('close', () => upstream.destroy())
    upstream.once('close', () => client.destroy())
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, host, () => resolve())
  })
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** An EndpointSlice for Service `service` with one ready endpoint `address:port` under port name `portName`. */
function endpointSlice(namespace: string, service: string, portName: string, address: string, port: number): KubeObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {name: `${service}-host`, namespace, labels: {'kubernetes.io/service-name': service, 'endpointslice.kubernetes.io/managed-by': 'fnr-porch-e2e'}},
    addressType: 'IPv4',
    ports: [{name: portName, port, protocol: 'TCP'}],
    endpoints: [{addresses: [address], conditions: {ready: true}}],
  }
}

export interface PorchPod {
  /** The pod's name, and the host address it sees the node at. */
  pod: string
  hostIP: string
  /** The Deployment as applied (after the changes this module makes). */
  deployment: KubeObject
  /**
   * When each stage was first seen, ms after the Deployment was applied: the pod with an address, its container
   * running, the pod Ready (its HTTPS readiness probe), the APIService Available and the API served.
   */
  stages: Record<'address' | 'running' | 'ready' | 'available', number>
  /** Connections from the pod's side to the runner so far (through the `function-runner` Service). */
  runnerConnections(): number
  log(): Promise<string>
  stop(): Promise<void>
}

async function apply(cp: ControlPlane, what: string, args: string[], input?: string): Promise<void> {
  const r = await cp.kubectl(['apply', ...args], input === undefined ? {} : {input})
  if (r.code !== 0) throw new Error(`kubectl apply ${what}: ${r.stderr}`)
}

/**
 * Deploys porch-server from Porch's files with `image`, and routes what it calls: the runner (`runnerPort` on this
 * host's loopback: fnr serve, or Porch's runner) behind fnr's `function-runner` Service, the git server (`git`,
 * which gets a listener on the pod's host address) behind the Service of GIT_URL. Resolves once the APIService is
 * Available and porch.kpt.dev/v1alpha1 is served through kube-apiserver from the pod. `stop` deletes the
 * Deployment and waits until its pod is gone (terminating ones included).
 */
export async function deployPorchServer(cp: ControlPlane, client: KubeRestClient, image: string, routes: {runnerPort: number; gitAlsoListen(host: string): Promise<number>}, timeoutMs = 300_000): Promise<PorchPod> {
  const files = porchDeploymentFiles()
  const closers: Array<() => Promise<void>> = []
  let podName = ''
  const log = async (): Promise<string> => (podName ? (await cp.kubectl(['logs', '-n', PORCH_NS, podName])).stdout : '')
  const allPods = async (): Promise<KubeObject[]> => (await client.get(`/api/v1/namespaces/${PORCH_NS}/pods`, {labelSelector: 'app=porch-server'})).items as KubeObject[]
  const pods = async (): Promise<KubeObject[]> => (await allPods()).filter((p) => !p.metadata.deletionTimestamp)
  const stop = async (): Promise<void> => {
    await cp.kubectl(['delete', '-n', PORCH_NS, 'deployment/porch-server', '--ignore-not-found', '--wait=false'])
    await until('the porch-server pod gone', 60_000, async () => (await allPods()).length === 0).catch(() => undefined)
    for (const close of closers.reverse()) await close()
  }
  try {
    // RBAC as written: the ServiceAccount's rights, the auth reader and delegator roles an aggregated API server needs.
    for (const f of files.rbac) await apply(cp, path.basename(f), ['-f', f])
    // The Deployment's `envFrom` names porch-db-config and porch-db-secret (a missing one keeps the container from
    // starting): both applied as Porch's bundle writes them, without the PostgreSQL StatefulSet (see the
    // `--cache-type` change below).
    const bundle = parseAllDocuments(await readFile(files.dbBundle, 'utf8')).map((d) => d.toJS() as KubeObject).filter(Boolean)
    const db = bundle.filter((d) => (d.kind === 'ConfigMap' && d.metadata.name === 'porch-db-config') || (d.kind === 'Secret' && d.metadata.name === 'porch-db-secret'))
    if (db.length !== 2) throw new Error(`${files.dbBundle}: porch-db-config and porch-db-secret not found`)
    await apply(cp, 'porch-db-config, porch-db-secret', ['-f', '-'], db.map((d) => stringify(d)).join('---\n'))

    // The git server's Service (selector-less, an endpoint added once the pod's host address is known).
    // (Created by the first deployment of a bed; a later one finds them.)
    const service = {apiVersion: 'v1', kind: 'Service', metadata: {name: GIT_SERVICE, namespace: GIT_NS}, spec: {ports: [{name: 'http', port: GIT_PORT, protocol: 'TCP'}]}}
    await apply(cp, `the Service ${GIT_SERVICE}`, ['-f', '-'], stringify({apiVersion: 'v1', kind: 'Namespace', metadata: {name: GIT_NS}}) + '---\n' + stringify(service))

    const docs = parseAllDocuments(await readFile(files.server, 'utf8')).map((d) => d.toJS() as KubeObject).filter(Boolean)
    const deployment = docs.find((d) => d.kind === 'Deployment' && d.metadata.name === 'porch-server')
    const container = (deployment?.spec.template.spec.containers as KubeObject[] | undefined)?.find((c) => c.name === 'porch-server')
    if (!deployment || !container) throw new Error(`${files.server}: no Deployment porch-server with a container porch-server`)
    // Change 1, the image: the one laid out above from Porch's Dockerfile with the binary built here (Porch's
    // images are not pulled: this machine reaches no public registry, and the binary is the one under test).
    container.image = image
    // Change 2, `--cache-type=db` dropped: the database cache needs Porch's PostgreSQL StatefulSet (a Bitnami image
    // this machine cannot pull); without the flag porch-server keeps its cache in CRs (PackageRev, applied from
    // Porch's files), as the process variant (./porch-server.ts) runs it.
    const args = container.args as string[]
    if (!args.includes('--cache-type=db')) throw new Error(`${files.server}: the porch-server container has no --cache-type=db to drop (${args.join(' ')})`)
    container.args = args.filter((a) => a !== '--cache-type=db')
    // Not changed: `--function-runner=function-runner:9445` resolves in the pod to fnr's own `function-runner`
    // Service in porch-system (manifests/service.yaml, the name Porch's runner has), the probes (HTTPS), the
    // security context, the volumes, the Service `api` (443 → 4443) the APIService names.
    await apply(cp, path.basename(files.server), ['-f', '-'], docs.map((d) => stringify(d)).join('---\n'))
    const applied = Date.now()
    const stages: Partial<PorchPod['stages']> = {}
    const seen = (stage: keyof PorchPod['stages']): void => void (stages[stage] ??= Date.now() - applied)

    const pod = await until('the porch-server pod with an address', timeoutMs, async () => (await pods()).find((p) => p.status?.podIP && p.status?.hostIP))
    podName = pod.metadata.name as string
    seen('address')
    const hostIP = pod.status.hostIP as string
    // The runner behind fnr's Service: its Deployment's replicas are 0 here (../support/cluster/porch-namespaces.ts),
    // this EndpointSlice makes the process on this host its endpoint.
    const runner = await forwarder(hostIP, {host: '127.0.0.1', port: routes.runnerPort})
    closers.push(() => runner.close())
    const fnrService = await client.get(`/api/v1/namespaces/${PORCH_NS}/services/function-runner`)
    const fnrPortName = String((fnrService.spec.ports as KubeObject[]).find((p) => p.port === 9445)?.name ?? '')
    await client.create(`/apis/discovery.k8s.io/v1/namespaces/${PORCH_NS}/endpointslices`, endpointSlice(PORCH_NS, 'function-runner', fnrPortName, hostIP, runner.port))
    closers.push(() => client.delete(`/apis/discovery.k8s.io/v1/namespaces/${PORCH_NS}/endpointslices/function-runner-host`).then(() => undefined, () => undefined))
    const gitPort = await routes.gitAlsoListen(hostIP)
    await client.create(`/apis/discovery.k8s.io/v1/namespaces/${GIT_NS}/endpointslices`, endpointSlice(GIT_NS, GIT_SERVICE, 'http', hostIP, gitPort))
    closers.push(() => client.delete(`/apis/discovery.k8s.io/v1/namespaces/${GIT_NS}/endpointslices/${GIT_SERVICE}-host`).then(() => undefined, () => undefined))

    await until('porch-server (pod) serving porch.kpt.dev/v1alpha1 through kube-apiserver', timeoutMs, async () => {
      const p = (await pods()).find((x) => x.metadata.name === podName)
      const terminated = ((p?.status?.containerStatuses ?? []) as KubeObject[]).find((s) => s.lastState?.terminated || s.state?.terminated)
      if (terminated) throw new Error(`porch-server's container ended: ${JSON.stringify(terminated)}\n${(await log()).split('\n').slice(-30).join('\n')}`)
      if (((p?.status?.containerStatuses ?? []) as KubeObject[]).some((st) => st.state?.running)) seen('running')
      if (((p?.status?.conditions ?? []) as KubeObject[]).some((c) => c.type === 'Ready' && c.status === 'True')) seen('ready')
      const svc = await client.get('/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.porch.kpt.dev')
      const available = (svc.status?.conditions ?? []).some((c: KubeObject) => c.type === 'Available' && c.status === 'True')
      const served = available && (await client.raw('GET', '/apis/porch.kpt.dev/v1alpha1')).code === 200
      if (served) seen('available')
      return served
    }).catch(async (e: Error) => {
      throw new Error(`${e.message}\npod: ${JSON.stringify((await pods()).map((p) => p.status))}\nporch-server's log:\n${(await log()).split('\n').slice(-40).join('\n')}`)
    })
    return {pod: podName, hostIP, deployment, stages: stages as PorchPod['stages'], runnerConnections: () => runner.connections(), log, stop}
  } catch (err) {
    await stop()
    throw err
  }
}
