/**
 * `fnr pods warm` end to end: the built CLI as a child process against the real control plane
 * (kube-apiserver, etcd, the controllers and the scheduler; its node runs the real wrapper server), with image entrypoints from
 * a real registry (docker-registry over TLS with Basic auth, reached with serve's registry flags).
 */
import {expect} from 'chai'
import {rm, writeFile} from 'node:fs/promises'
import {createServer, type AddressInfo, type Socket} from 'node:net'
import path from 'node:path'

import type {V1Pod} from '@kubernetes/client-node'
import {execa} from 'execa'

import {podReadiness} from '../../src/lib/pods/cluster/manager.js'
import {StaticMetadataSource} from '../../src/lib/pods/cluster/image-metadata.js'
import {ANNOTATION_IMAGE, ANNOTATION_OWNER, ANNOTATION_TEMPLATE_VERSION, ANNOTATION_TTL, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {ANNOTATION_IMAGE_DIGEST, inlineTemplates} from '../../src/lib/pods/model/template.js'
import {inlineResources} from '../../src/lib/pods/admin/templates.js'
import {WARM_OWNER} from '../../src/lib/pods/admin/warm.js'
import {runCli} from '../support/cli.js'
import {BIN_RUN} from '../support/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {createdThroughProxy, listPods, listServices, podNames, startClusterPodBed, startClusterRuntime, wrapped, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {FUNCTION_PATH, RL, WRAPPER_IMAGE, WRAPPER_PATH, wrapperCommand, until, type RuntimeHandle} from '../support/pods/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {freePort} from '../support/registry/tools.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../support/tmp.js'

const podReadinessOf = (pod: V1Pod): string => podReadiness(pod, '?').state

const SUMMARY_KEYS = ['namespace', 'templateVersion', 'template', 'images', 'ready', 'failed', 'created']
const RESULT_KEYS = ['image', 'ok', 'pod', 'action', 'error', 'ms']

interface Summary {
  namespace: string
  templateVersion: string
  template: string
  images: Array<{image: string; ok: boolean; pod: string | null; action: string; error: string | null; ms: number}>
  ready: number
  failed: number
  created: number
}

/** The version `fnr serve` gives its inline template with default flags and WRAPPER_IMAGE. */
const SERVE_VERSION = inlineTemplates({wrapperServerImage: WRAPPER_IMAGE, resources: inlineResources({podRequests: 'cpu=100m,memory=128Mi', podLimits: 'memory=1Gi'})}, {maxRequestBodySize: 6 * 1024 * 1024}).version

describe('fnr pods warm against the real control plane and a TLS registry', function () {
  this.timeout(240_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let pb: ClusterPodBed
  let registry: TestRegistry
  let authFile: string
  let dir: string
  let ns: string
  let slowGate: string
  const handles: RuntimeHandle[] = []
  /** Registry images (host/fn/<name>:v1). */
  const img = (name: string): string => `${registry.host}/fn/${name}:v1`
  const repoOf = (name: string): string => `${registry.host}/fn/${name}`
  /** The manifest digests of the pushed images. */
  const digests: Record<string, string> = {}

  before(async () => {
    pb = await startClusterPodBed()
    registry = await TestRegistry.start({mode: 'tls'})
    authFile = await registry.writeAuthFile('testuser', 'testpass')
    dir = await temp.make('fnr-warm-')
    const spec = {entrypoint: [FUNCTION_PATH], files: {'usr/local/bin/function': SCRIPTS.cat}}
    for (const name of ['cat', 'stderr', 'gate', 'slow', 'unpullable']) digests[name] = (await pushImage(registry, `fn/${name}:v1`, spec, authFile)).manifest.digest
    // The kubelet "pulls" cat, stderr and gate (mapped to local scripts), by tag or by digest (warmed
    // pods run repo@digest); unpullable is in the registry but the kubelet cannot pull it
    // (ErrImagePull); missing is not in the registry. The shared node has no global command map: each
    // image maps the wrapper server's path too.
    const mapped = (file: string) => wrapped({[FUNCTION_PATH]: file})
    pb.kubelet.setImage(`${repoOf('cat')}*`, mapped(await writeExecutable(path.join(dir, 'cat'), SCRIPTS.cat)))
    pb.kubelet.setImage(`${repoOf('stderr')}*`, mapped(await writeExecutable(path.join(dir, 'stderr'), SCRIPTS.stderr)))
    pb.kubelet.setImage(`${repoOf('gate')}*`, mapped(await writeExecutable(path.join(dir, 'gate'), SCRIPTS.cat)))
    // unpullable: its pull fails on the node (the wrapper's init container is the bed's, and completes first)
    pb.kubelet.setImage(`${repoOf('unpullable')}*`, {pullError: 'denied by the registry'})
    // slow: the wrapper server starts only once the file `slowGate` exists (the pod stays starting until then)
    slowGate = path.join(dir, 'slow-gate')
    pb.kubelet.setImage(`${repoOf('slow')}*`, {
      commandMap: {
        [WRAPPER_PATH]: ['/bin/sh', '-c', `while [ ! -f '${slowGate}' ]; do sleep 0.05; done; exec "$@"`, 'sh', ...wrapperCommand()],
        [FUNCTION_PATH]: path.join(dir, 'cat'),
      },
    })
  })
  after(async () => {
    await pb?.stop()
    await registry?.stop()
    await temp.cleanup()
  })
  beforeEach(async () => {
    ns = await pb.namespace()
  })
  afterEach(async () => {
    for (const h of handles.splice(0)) await h.close()
  })

  /** The registry flags as `fnr serve` would have them for this registry. */
  const registryArgs = (): string[] => [
    '--enable-private-registries=true',
    '--registry-auth-secret-path',
    authFile,
    '--enable-private-registries-tls=true',
    '--tls-secret-path',
    registry.certDir!,
  ]
  const env = (): NodeJS.ProcessEnv => {
    const e = {...process.env}
    delete e.WRAPPER_SERVER_IMAGE
    return e
  }
  const warm = (args: string[]) =>
    runCli(['pods', 'warm', '--kubeconfig', pb.kubeconfigPath, '-n', ns, '--wrapper-server-image', WRAPPER_IMAGE, ...registryArgs(), ...args], {timeout: 180_000, env: env(), extendEnv: false})

  async function cacheConfig(text: string): Promise<string> {
    const file = path.join(dir, `pod-cache-config-${ns}.yaml`)
    await writeFile(file, text)
    return file
  }

  const podOf = async (image: string): Promise<V1Pod | undefined> => (await listPods(pb, ns)).find((p) => p.metadata!.annotations![ANNOTATION_IMAGE] === image)
  const secretPath = (name: string): string => `/api/v1/namespaces/${ns}/secrets/${name}`

  it('creates a ready pod per image of the pod-cache-config and --image, as the runner builds them; --json has the documented schema', async () => {
    const config = await cacheConfig(`- name: ${img('cat')}\n  timeToLive: 45m\n`)
    const r = await warm(['--pod-cache-config', config, '--image', img('stderr'), '--image', img('cat'), '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as Summary
    expect(Object.keys(out)).to.have.members(SUMMARY_KEYS)
    expect(out).to.deep.include({namespace: ns, templateVersion: SERVE_VERSION, template: 'the inline template', ready: 2, failed: 0, created: 2})
    expect(out.images.map((i) => i.image)).to.deep.equal([img('cat'), img('stderr')])
    for (const i of out.images) {
      expect(Object.keys(i)).to.have.members(RESULT_KEYS)
      expect(i).to.deep.include({ok: true, action: 'created', error: null})
      expect(i.ms).to.be.a('number')
    }
    // not a terminal: one plain progress line per image on stderr
    expect(r.stderr).to.include(`ok: ${img('cat')}: ready, pod ${out.images[0]!.pod} (created)`)
    const cat = (await podOf(img('cat')))!
    const stderrPod = (await podOf(img('stderr')))!
    expect([cat.metadata!.name, stderrPod.metadata!.name]).to.deep.equal(out.images.map((i) => i.pod))
    for (const pod of [cat, stderrPod]) {
      expect(pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'), pod.metadata!.name).to.equal(true)
      expect(pod.metadata!.labels![LABEL_OWNER]).to.equal(WARM_OWNER)
      expect(pod.metadata!.annotations![ANNOTATION_OWNER]).to.equal(WARM_OWNER)
      expect(pod.metadata!.annotations![ANNOTATION_TEMPLATE_VERSION]).to.equal(SERVE_VERSION)
      // the pull Secret, as serve attaches it for a registry it has credentials for
      expect(pod.spec!.imagePullSecrets).to.deep.equal([{name: 'auth-secret'}])
      const fn = pod.spec!.containers.find((c) => c.name === 'function')!
      expect(fn.args!.slice(-2)).to.deep.equal(['--', FUNCTION_PATH])
    }
    expect(cat.metadata!.annotations![ANNOTATION_TTL]).to.equal('2700')
    expect(stderrPod.metadata!.annotations![ANNOTATION_TTL]).to.equal('1800')
    expect((await listServices(pb, ns)).map((s) => s.metadata!.name).sort()).to.deep.equal(out.images.map((i) => i.pod).sort())
    expect(await pb.admin.get(secretPath('auth-secret'))).to.not.equal(undefined)
  })

  it('never changes an existing pull Secret (it is the runner\'s), only creates a missing one', async () => {
    const runnersConfig = Buffer.from(JSON.stringify({auths: {[registry.host]: {auth: Buffer.from('testuser:testpass').toString('base64')}, 'other.example': {auth: 'eDp5'}}})).toString('base64')
    await pb.admin.create(`/api/v1/namespaces/${ns}/secrets`, {apiVersion: 'v1', kind: 'Secret', metadata: {name: 'auth-secret'}, type: 'kubernetes.io/dockerconfigjson', data: {'.dockerconfigjson': runnersConfig}})
    const r = await warm(['--image', img('cat')])
    expect(r.exitCode, r.stderr).to.equal(0)
    const secret = (await pb.admin.get(secretPath('auth-secret'))) as {data: Record<string, string>}
    expect(secret.data['.dockerconfigjson']).to.equal(runnersConfig)
    expect((await podOf(img('cat')))!.spec!.imagePullSecrets).to.deep.equal([{name: 'auth-secret'}])
  })

  it('is idempotent: a second run creates nothing and reports the ready pods (text output)', async () => {
    const first = await warm(['--image', img('cat'), '--image', img('stderr')])
    expect(first.exitCode, first.stderr).to.equal(0)
    const pods = await podNames(pb, ns)
    const created = createdThroughProxy(pb, ns, 'pods')
    const second = await warm(['--image', img('stderr'), '--image', img('cat')])
    expect(second.exitCode, second.stderr).to.equal(0)
    expect(second.stdout.trim().split('\n')).to.deep.equal([
      `${img('stderr')}: ready, pod ${(await podOf(img('stderr')))!.metadata!.name} (already ready)`,
      `${img('cat')}: ready, pod ${(await podOf(img('cat')))!.metadata!.name} (already ready)`,
    ])
    const json = JSON.parse((await warm(['--image', img('cat'), '--json'])).stdout) as Summary
    expect(json).to.deep.include({ready: 1, failed: 0, created: 0})
    expect(json.images[0]!.action).to.equal('existing')
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
    expect(await podNames(pb, ns)).to.deep.equal(pods)
  })

  it('is idempotent while a pod is starting: a second warm waits for it instead of creating another', async () => {
    const first = warm(['--image', img('slow'), '--json'])
    const pod = await until(() => podOf(img('slow')), 'the first warm created its pod')
    const lists = () => pb.proxy.requestsFor({verb: 'list', resource: 'pods', namespace: ns}).length
    const listsBefore = lists()
    const second = warm(['--image', img('slow'), '--json'])
    // the second warm has listed the pods twice (its watch, then its candidates) while the slow
    // pod is still starting; now let the pod start
    await until(() => lists() >= listsBefore + 2, 'the second warm listed the pods')
    expect(podReadinessOf((await podOf(img('slow')))!)).to.not.equal('ready')
    await writeFile(slowGate, '')
    const [a, b] = await Promise.all([first, second])
    expect(a.exitCode, a.stderr).to.equal(0)
    expect(b.exitCode, b.stderr).to.equal(0)
    const [ra, rb] = [a, b].map((r) => (JSON.parse(r.stdout) as Summary).images[0]!)
    expect(ra).to.deep.include({ok: true, action: 'created', pod: pod.metadata!.name})
    expect(rb).to.deep.include({ok: true, action: 'waited', pod: pod.metadata!.name})
    expect(await podNames(pb, ns)).to.deep.equal([pod.metadata!.name])
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(1)
  })

  it('--timeout: a pod not ready in time fails its image and is deleted again', async () => {
    await rm(slowGate, {force: true})
    const r = await warm(['--image', img('slow'), '--timeout', '3s', '--json'])
    expect(r.exitCode).to.equal(1)
    const [res] = (JSON.parse(r.stdout) as Summary).images
    expect(res).to.deep.include({ok: false, action: 'created'})
    expect(res!.error).to.match(/was not ready within the --timeout/)
    await until(async () => (await podNames(pb, ns)).length === 0 && (await listServices(pb, ns)).length === 0, 'the pod and its Service deleted')
  })

  it('--timeout also bounds reading the entrypoint from a registry that does not answer', async () => {
    const sockets = new Set<Socket>()
    const silent = createServer((socket) => sockets.add(socket)) // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    try {
      const hanging = `127.0.0.1:${(silent.address() as AddressInfo).port}/fn/cat:v1`
      // 6 s, not 3: on the real control plane (scheduler, node, status through kube-apiserver) the cat pod
      // took 2.2-3.1 s to get ready under load (the test bed's ~1 s), and one run in three missed 3 s.
      const r = await warm(['--image', hanging, '--image', img('cat'), '--timeout', '6s', '--json'])
      expect(r.exitCode).to.equal(1)
      const out = JSON.parse(r.stdout) as Summary
      expect(out.images.find((i) => i.image === img('cat'))).to.deep.include({ok: true})
      const failed = out.images.find((i) => i.image === hanging)!
      expect(failed).to.deep.include({ok: false, pod: null, action: 'none'})
      expect(failed.error).to.match(/was not read from its registry within the --timeout/)
    } finally {
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => silent.close(resolve))
    }
  })

  it('reports a failure per image and exits non-zero; the other images still get ready pods', async () => {
    const r = await warm(['--image', img('missing'), '--image', img('cat'), '--image', img('unpullable'), '--pod-ready-timeout', '60s', '--json'])
    expect(r.exitCode).to.equal(1)
    const out = JSON.parse(r.stdout) as Summary
    expect(out).to.deep.include({ready: 1, failed: 2, created: 1})
    const by = Object.fromEntries(out.images.map((i) => [i.image, i]))
    expect(by[img('cat')]).to.deep.include({ok: true, action: 'created'})
    // not in the registry: no pod at all
    expect(by[img('missing')]).to.deep.include({ok: false, pod: null, action: 'none'})
    expect(by[img('missing')]!.error).to.match(/not found|manifest unknown|404/i)
    // in the registry, but the kubelet cannot pull it: the pod fails fast and is deleted again
    expect(by[img('unpullable')]).to.deep.include({ok: false, action: 'created'})
    expect(by[img('unpullable')]!.error).to.match(/container "function" is waiting: (ErrImagePull|ImagePullBackOff): Failed to pull image "[^"]*\/fn\/unpullable[:@][^"]*": denied by the registry$/)
    const errLines = r.stderr.trim().split('\n').filter((l) => l.startsWith('fnr: '))
    expect(errLines).to.have.length(1)
    expect(errLines[0]).to.match(/^fnr: 2 of 3 images did not get a ready pod/)
    await until(async () => (await podNames(pb, ns)).length === 1, `only the cat pod left (${await podNames(pb, ns)})`)
    expect((await podOf(img('cat')))!.status!.phase).to.equal('Running')
    await until(async () => (await listServices(pb, ns)).length === 1, 'only the cat Service left')
  })

  it('a runner started afterwards adopts the warmed pod and uses it without creating one', async () => {
    const r = await warm(['--image', img('cat'), '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const warmed = (JSON.parse(r.stdout) as Summary).images[0]!.pod!
    const created = createdThroughProxy(pb, ns, 'pods')
    const metadata = new StaticMetadataSource({[img('cat')]: [FUNCTION_PATH]})
    const h = await startClusterRuntime(pb, {namespace: ns, metadata, owner: 'runner-w'})
    handles.push(h)
    expect(h.runtime.cache.currentTemplates.version).to.equal(SERVE_VERSION)
    expect(h.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal([warmed])
    const out = await h.evaluator.evaluate({image: img('cat'), resourceList: RL})
    expect(Buffer.from(out.resourceList).toString()).to.equal(RL.toString())
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
    expect(await podNames(pb, ns)).to.deep.equal([warmed])
    await until(async () => (await listPods(pb, ns))[0]!.metadata!.labels![LABEL_OWNER] === 'runner-w', 'ownership taken')
  })

  it('a running runner adopts a pod warmed while it runs (from the pod watch, no GC scan) and uses it without creating one', async () => {
    const metadata = new StaticMetadataSource({[img('cat')]: [FUNCTION_PATH]})
    // No GC scans at all: adoption comes from the pod watch seeing the warmed pod ready.
    const h = await startClusterRuntime(pb, {namespace: ns, metadata, owner: 'runner-r', scanIntervalMs: 0})
    handles.push(h)
    expect(h.runtime.cache.snapshot()).to.deep.equal([])
    const r = await warm(['--image', img('cat'), '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const warmed = (JSON.parse(r.stdout) as Summary).images[0]!.pod!
    await until(() => h.runtime.cache.snapshot().some((s) => s.name === warmed), 'the running runner adopted the warmed pod')
    await until(async () => (await listPods(pb, ns))[0]!.metadata!.labels![LABEL_OWNER] === 'runner-r', 'ownership taken')
    const created = createdThroughProxy(pb, ns, 'pods')
    const out = await h.evaluator.evaluate({image: img('cat'), resourceList: RL})
    expect(Buffer.from(out.resourceList).toString()).to.equal(RL.toString())
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
    expect(await podNames(pb, ns)).to.deep.equal([warmed])
  })

  it('with two running replicas (Leases, short scan interval), exactly one adopts a warmed pod; both keep it', async () => {
    const metadata = new StaticMetadataSource({[img('cat')]: [FUNCTION_PATH]})
    const a = await startClusterRuntime(pb, {namespace: ns, metadata, owner: 'replica-a', scanIntervalMs: 200, leaseDurationMs: 5000, foreignGraceMs: 0})
    handles.push(a)
    const b = await startClusterRuntime(pb, {namespace: ns, metadata, owner: 'replica-b', scanIntervalMs: 200, leaseDurationMs: 5000, foreignGraceMs: 0})
    handles.push(b)
    const r = await warm(['--image', img('cat'), '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const warmed = (JSON.parse(r.stdout) as Summary).images[0]!.pod!
    const holders = (): string[] => [a, b].filter((h) => h.runtime.cache.snapshot().some((s) => s.name === warmed)).map((h) => (h === a ? 'replica-a' : 'replica-b'))
    await until(() => holders().length > 0, 'a replica adopted the warmed pod')
    // Several more scans on both replicas: still exactly one holds it, and it is that one's.
    const scans = a.runtime.gc.runs + b.runtime.gc.runs
    await until(() => a.runtime.gc.runs + b.runtime.gc.runs >= scans + 6, 'more GC scans')
    const [adopter] = holders()
    expect(holders()).to.deep.equal([adopter])
    const pod = (await listPods(pb, ns)).find((p) => p.metadata!.name === warmed)!
    expect(pod.metadata!.labels![LABEL_OWNER]).to.equal(adopter)
    expect(pod.metadata!.annotations![ANNOTATION_OWNER]).to.equal(adopter)
    const adopterHandle = adopter === 'replica-a' ? a : b
    const created = createdThroughProxy(pb, ns, 'pods')
    const out = await adopterHandle.evaluator.evaluate({image: img('cat'), resourceList: RL})
    expect(Buffer.from(out.resourceList).toString()).to.equal(RL.toString())
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
    expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.include(warmed)
  })

  it('writes the image-digest annotation and runs repo@digest (as a runner with --pin-image-digests); an adopting runner knows the digest; --pin-image-digests=false keeps the tag', async () => {
    const r = await warm(['--image', img('cat'), '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const pod = (await podOf(img('cat')))!
    expect(pod.metadata!.annotations![ANNOTATION_IMAGE_DIGEST]).to.equal(digests.cat)
    expect(pod.spec!.containers.find((c) => c.name === 'function')!.image).to.equal(`${repoOf('cat')}@${digests.cat}`)
    // The runner adopts it with its digest: what the response cache needs to store its answers.
    const h = await startClusterRuntime(pb, {namespace: ns, metadata: new StaticMetadataSource({[img('cat')]: [FUNCTION_PATH]}), owner: 'runner-d', pinImageDigests: true})
    handles.push(h)
    expect(h.runtime.cache.snapshot().map((s) => ({name: s.name, digest: s.digest}))).to.deep.equal([{name: pod.metadata!.name, digest: digests.cat}])
    ns = await pb.namespace()
    const unpinned = await warm(['--image', img('cat'), '--pin-image-digests=false', '--json'])
    expect(unpinned.exitCode, unpinned.stderr).to.equal(0)
    const tagged = (await podOf(img('cat')))!
    expect(tagged.metadata!.annotations![ANNOTATION_IMAGE_DIGEST]).to.equal(digests.cat)
    expect(tagged.spec!.containers.find((c) => c.name === 'function')!.image).to.equal(img('cat'))
  })

  it('builds the same pod and Service as the runner: same spec, same label and annotation keys, same Service', async () => {
    const r = await warm(['--image', img('cat'), '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const warmed = (await podOf(img('cat')))!
    const warmedNs = ns
    // the runner, in another namespace, makes its own pod for the same image
    ns = await pb.namespace()
    // A runner with --pin-image-digests, whose registry gives the same digest.
    const metadata = {describe: async () => ({command: [FUNCTION_PATH], digest: digests.cat!})}
    const h = await startClusterRuntime(pb, {namespace: ns, metadata, owner: 'runner-s', pinImageDigests: true})
    handles.push(h)
    await h.evaluator.evaluate({image: img('cat'), resourceList: RL})
    const runners = (await podOf(img('cat')))!
    const comparable = (pod: V1Pod): object => {
      const spec = structuredClone(pod.spec!)
      delete spec.nodeName
      delete spec.imagePullSecrets // the runner here has no private registries
      return {spec, labels: Object.keys(pod.metadata!.labels!).sort(), annotations: Object.keys(pod.metadata!.annotations!).sort()}
    }
    expect(comparable(warmed)).to.deep.equal(comparable(runners))
    const svc = async (namespace: string, name: string): Promise<object> => {
      const s = (await listServices(pb, namespace)).find((x) => x.metadata!.name === name)!
      return {labels: Object.keys(s.metadata!.labels!).sort(), ports: s.spec!.ports, selectorKeys: Object.keys(s.spec!.selector!)}
    }
    expect(await svc(warmedNs, warmed.metadata!.name!)).to.deep.equal(await svc(ns, runners.metadata!.name!))
  })

  it('builds from the runner\'s template ConfigMap (--function-pod-template in --runner-namespace)', async () => {
    const name = `warm-template-${ns}`
    await pb.admin.create(`/api/v1/namespaces/${pb.runnerNs}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {name},
      data: {
        template: 'apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {team: warm}\nspec:\n  containers:\n  - name: function\n    image: placeholder\n    command: [/wrapper-server-tools/wrapper-server]\n    readinessProbe: {grpc: {port: 9446}}\n',
        serviceTemplate: 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n',
      },
    })
    const r = await runCli(['pods', 'warm', '--kubeconfig', pb.kubeconfigPath, '-n', ns, '--function-pod-template', name, '--runner-namespace', pb.runnerNs, ...registryArgs(), '--image', img('cat'), '--json'], {timeout: 180_000, env: env(), extendEnv: false})
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as Summary
    expect(out.template).to.equal(`ConfigMap ${pb.runnerNs}/${name}`)
    expect(out.templateVersion).to.match(/^cm-/)
    const pod = (await podOf(img('cat')))!
    expect(pod.metadata!.labels!.team).to.equal('warm')
    expect(pod.metadata!.annotations![ANNOTATION_TEMPLATE_VERSION]).to.equal(out.templateVersion)
    // the runner with that ConfigMap adopts it
    const h = await startClusterRuntime(pb, {namespace: ns, templateConfigMap: name, metadata: new StaticMetadataSource({[img('cat')]: [FUNCTION_PATH]})})
    handles.push(h)
    expect(h.runtime.cache.snapshot().map((s) => s.name)).to.deep.equal([pod.metadata!.name])
  })

  it('errors are one line with a non-zero exit: no cluster, bad file, nothing to warm, unknown template', async () => {
    const oneLine = (r: {stderr: string}): void => {
      expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1)
      expect(r.stderr).to.match(/^fnr: /)
    }
    const noCluster = await runCli(['pods', 'warm', '--kubeconfig', '/nonexistent/kubeconfig', '--image', img('cat'), '--wrapper-server-image', WRAPPER_IMAGE])
    expect(noCluster.exitCode).to.equal(3)
    oneLine(noCluster)
    // an API server that does not answer: one line, exit 8 (unavailable), nothing left running
    const deadKubeconfig = path.join(dir, 'dead-kubeconfig.yaml')
    // (a free loopback port: client-node 2's fetch refuses port 1 as a "bad port" before connecting)
    await writeFile(deadKubeconfig, `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${await freePort()}", insecure-skip-tls-verify: true}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\ncurrent-context: c\n`)
    const dead = await runCli(['pods', 'warm', '--kubeconfig', deadKubeconfig, '--image', img('cat'), '--wrapper-server-image', WRAPPER_IMAGE])
    expect(dead.exitCode).to.equal(8)
    oneLine(dead)
    expect(dead.stderr).to.include('cannot list pods')
    const bad = await cacheConfig('- name: [not, a, string]\n')
    const badFile = await warm(['--pod-cache-config', bad])
    expect(badFile.exitCode).to.equal(3)
    oneLine(badFile)
    expect(badFile.stderr).to.include(bad)
    const missingFile = await warm(['--pod-cache-config', path.join(dir, 'nope.yaml')])
    expect(missingFile.exitCode).to.equal(3)
    expect(missingFile.stderr).to.include('does not exist')
    const nothing = await warm([])
    expect(nothing.exitCode).to.equal(2)
    oneLine(nothing)
    expect(nothing.stderr).to.include('nothing to warm')
    const noTemplate = await runCli(['pods', 'warm', '--kubeconfig', pb.kubeconfigPath, '-n', ns, '--image', img('cat')], {env: env(), extendEnv: false})
    expect(noTemplate.exitCode).to.equal(3)
    oneLine(noTemplate)
    expect(noTemplate.stderr).to.include('--wrapper-server-image')
    const noCm = await warm(['--image', img('cat'), '--function-pod-template', 'nope', '--runner-namespace', pb.runnerNs])
    expect(noCm.exitCode).to.equal(3)
    oneLine(noCm)
    expect(noCm.stderr).to.include(`ConfigMap ${pb.runnerNs}/nope`)
    expect(await podNames(pb, ns)).to.deep.equal([])
  })

  it('on a terminal, shows listr2 progress per image (ticks and crosses), then the same result lines', async () => {
    const q = (a: string): string => `'${a.replace(/'/g, "'\\''")}'`
    const args = [process.execPath, BIN_RUN, 'pods', 'warm', '--kubeconfig', pb.kubeconfigPath, '-n', ns, '--wrapper-server-image', WRAPPER_IMAGE, ...registryArgs(), '--image', img('cat'), '--image', img('missing')]
    // util-linux script(1) runs the command on a pseudo-terminal (stdout and stderr are a TTY), 200 columns wide
    const r = await execa('script', ['-qec', `stty cols 200 rows 50; ${args.map(q).join(' ')}`, '/dev/null'], {reject: false, timeout: 180_000, env: {...env(), TERM: 'xterm'}, extendEnv: false})
    const text = String(r.stdout).replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '')
    expect(r.exitCode, text).to.equal(1)
    expect(text).to.match(/✔ .*fn\/cat:v1: ready, pod /)
    expect(text).to.match(/✖ .*fn\/missing:v1: failed: /)
    expect(text).to.not.include('ok: ')
    expect(text).to.include('fnr: 1 of 2 images did not get a ready pod')
  })

  it('--help has examples', async () => {
    const r = await runCli(['pods', 'warm', '--help'])
    expect(r.exitCode).to.equal(0)
    expect(r.stdout).to.include('EXAMPLES').and.include('--pod-cache-config').and.include('--wrapper-server-image')
  })
})
