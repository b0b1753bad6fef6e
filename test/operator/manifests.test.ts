import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {readFile, readdir} from 'node:fs/promises'
import path from 'node:path'
import {promisify} from 'node:util'

import type {V1ConfigMap, V1Deployment, V1Pod} from '@kubernetes/client-node'
import {parseAllDocuments, stringify} from 'yaml'

import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {inlineTemplates, templatesFromConfigMap} from '../../src/lib/pods/template.js'
import {KUBECTL_PATH} from '../support/k8s/kubectl.js'
import {startTestBed, type TestBed} from '../support/k8s/index.js'
import {REPO_ROOT} from '../support/serve.js'

const MANIFESTS = path.join(REPO_ROOT, 'manifests')

interface K8sObject {
  apiVersion: string
  kind: string
  metadata: {name: string; namespace?: string}
  [key: string]: unknown
}

async function kustomize(): Promise<K8sObject[]> {
  const {stdout} = await promisify(execFile)(KUBECTL_PATH, ['kustomize', MANIFESTS], {maxBuffer: 10 * 1024 * 1024})
  return parseAllDocuments(stdout).map((d) => d.toJS() as K8sObject)
}

function find<T>(objects: K8sObject[], kind: string, name: string): T {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name)
  expect(o, `${kind} ${name}`).to.not.equal(undefined)
  return o as unknown as T
}

describe('manifests/', function () {
  this.timeout(120_000)
  let objects: K8sObject[]

  before(async () => {
    objects = await kustomize()
  })

  it('every file parses as YAML of Kubernetes objects', async () => {
    const files = (await readdir(MANIFESTS)).filter((f) => f.endsWith('.yaml'))
    expect(files).to.include('kustomization.yaml')
    for (const f of files) {
      const docs = parseAllDocuments(await readFile(path.join(MANIFESTS, f), 'utf8'))
      for (const d of docs) {
        expect(d.errors, f).to.deep.equal([])
        const o = d.toJS() as K8sObject
        expect(o.apiVersion, f).to.be.a('string')
        expect(o.kind, f).to.be.a('string')
      }
    }
  })

  it('kustomize builds every object the kustomization lists', async () => {
    const kinds = objects.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`).sort()
    expect(kinds).to.include.members([
      'Namespace//porch-system',
      'Namespace//porch-fn-system',
      'ServiceAccount/porch-system/porch-fn-runner',
      'Role/porch-system/porch-fn-runner',
      'Role/porch-fn-system/porch-fn-runner',
      'RoleBinding/porch-system/porch-fn-runner',
      'RoleBinding/porch-fn-system/porch-fn-runner',
      'Deployment/porch-system/function-runner',
      'Service/porch-system/function-runner',
      'ConfigMap/porch-system/function-pod-template',
      'ConfigMap/porch-system/pod-cache-config',
      'NetworkPolicy/porch-fn-system/function-pods-from-runner-only',
    ])
  })

  it('the RBAC is namespaced and least privilege: ConfigMap reads in the runner namespace, pods/Services/Secrets/replica Leases in the pod namespace', () => {
    expect(objects.filter((o) => o.kind.startsWith('Cluster'))).to.deep.equal([])
    const runner = find<{rules: Array<{resources: string[]; verbs: string[]}>}>(objects.filter((o) => o.metadata.namespace === 'porch-system'), 'Role', 'porch-fn-runner')
    expect(runner.rules).to.deep.equal([{apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch']}])
    const pods = find<{rules: Array<{resources: string[]; verbs: string[]}>}>(objects.filter((o) => o.metadata.namespace === 'porch-fn-system'), 'Role', 'porch-fn-runner')
    const resources = pods.rules.flatMap((r) => r.resources).sort()
    expect(resources).to.deep.equal(['leases', 'pods', 'pods/log', 'secrets', 'services'])
    for (const r of pods.rules) expect(r.verbs).to.not.include.members(['*', 'deletecollection', 'escalate', 'bind'])
    // the replica Lease (several replicas, test/pods/replicas.test.ts checks these against the verbs fnr sends)
    const leases = pods.rules.find((r) => r.resources.includes('leases')) as unknown as {apiGroups: string[]; verbs: string[]}
    expect(leases.apiGroups).to.deep.equal(['coordination.k8s.io'])
    expect(leases.verbs).to.deep.equal(['get', 'list', 'create', 'update', 'delete'])
  })

  it('the Deployment passes only flags that `fnr serve` accepts, probes gRPC on 9445 and runs non-root', async () => {
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, {flags: Record<string, unknown>}>}
    const serveFlags = new Set(Object.keys(manifest.commands.serve!.flags))
    expect(serveFlags.size).to.be.greaterThan(20)
    const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
    const c = d.spec!.template.spec!.containers[0]!
    const args = c.args!
    expect(args[0]).to.equal('serve')
    for (const a of args.slice(1)) {
      const m = /^--([a-z0-9-]+)(=.*)?$/.exec(a)
      expect(m, a).to.not.equal(null)
      expect(serveFlags.has(m![1]!), `fnr serve has no flag --${m![1]}`).to.equal(true)
    }
    expect(c.readinessProbe?.grpc?.port).to.equal(9445)
    expect(c.livenessProbe?.grpc?.port).to.equal(9445)
    expect(c.env?.find((e) => e.name === 'WRAPPER_SERVER_IMAGE')?.value).to.be.a('string').and.not.equal('')
    expect(c.env?.find((e) => e.name === 'POD_NAME')?.valueFrom?.fieldRef?.fieldPath).to.equal('metadata.name')
    expect(c.resources?.requests).to.have.keys('cpu', 'memory')
    expect(c.securityContext).to.deep.include({allowPrivilegeEscalation: false, readOnlyRootFilesystem: true})
    expect(d.spec!.template.spec!.securityContext?.runAsNonRoot).to.equal(true)
    expect(d.spec!.template.spec!.serviceAccountName).to.equal('porch-fn-runner')
    const svc = find<{spec: {ports: Array<{port: number}>; selector: Record<string, string>}}>(objects, 'Service', 'function-runner')
    expect(svc.spec.ports.map((p) => p.port)).to.deep.equal([9445])
    expect(d.spec!.template.metadata!.labels).to.deep.include(svc.spec.selector)
    // the pod-cache-config path the args name is where the ConfigMap is mounted, and it parses
    const cacheArg = args.find((a) => a.startsWith('--pod-cache-config='))!.split('=')[1]!
    const mount = c.volumeMounts!.find((m) => cacheArg.startsWith(`${m.mountPath}/`))!
    const volume = d.spec!.template.spec!.volumes!.find((v) => v.name === mount.name)!
    const cm = find<V1ConfigMap>(objects, 'ConfigMap', volume.configMap!.name!)
    const config = PodCacheConfig.parse(cm.data![path.basename(cacheArg)]!, 'manifest')
    expect(config.images().length).to.be.greaterThan(0)
    expect(config.warnings).to.deep.equal([])
  })

  it('the Deployment\'s flags are accepted by the built `fnr serve` (it gets past flag parsing)', async () => {
    const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
    const {runCli} = await import('../support/cli.js')
    const r = await runCli([...d.spec!.template.spec!.containers[0]!.args!, '--help'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.include('--pod-namespace')
  })

  it('the template ConfigMap is exactly the inline default (with the Deployment\'s WRAPPER_SERVER_IMAGE)', () => {
    const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
    const wrapper = d.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === 'WRAPPER_SERVER_IMAGE')!.value!
    const cm = find<V1ConfigMap>(objects, 'ConfigMap', 'function-pod-template')
    const fromCm = templatesFromConfigMap(cm)
    const inline = inlineTemplates({wrapperServerImage: wrapper})
    expect(fromCm.pod).to.deep.equal(inline.pod)
    expect(fromCm.service).to.deep.equal(inline.service)
  })

  it('the NetworkPolicy admits only the runner\'s pods, on the wrapper port, to fnr\'s function pods', () => {
    const np = find<{spec: {podSelector: {matchLabels: Record<string, string>}; ingress: Array<{from: unknown[]; ports: Array<{port: number}>}>}}>(objects, 'NetworkPolicy', 'function-pods-from-runner-only')
    expect(np.spec.podSelector.matchLabels).to.deep.equal({'app.kubernetes.io/managed-by': 'fnr'})
    expect(np.spec.ingress).to.have.length(1)
    expect(np.spec.ingress[0]!.ports.map((p) => p.port)).to.deep.equal([9446])
    const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
    const from = np.spec.ingress[0]!.from[0] as {podSelector: {matchLabels: Record<string, string>}}
    expect(d.spec!.template.metadata!.labels).to.deep.include(from.podSelector.matchLabels)
  })

  describe('against the test API server', () => {
    let bed: TestBed

    before(async () => {
      bed = await startTestBed({kubelet: false, clientNode: false})
    })
    after(async () => {
      await bed?.stop()
    })

    it('accepts the core/v1 objects (server dry run) and persists nothing', async () => {
      const core = objects.filter((o) => o.apiVersion === 'v1' && ['Namespace', 'ConfigMap', 'Service'].includes(o.kind))
      expect(core.length).to.equal(5)
      const namespaces = core.filter((o) => o.kind === 'Namespace')
      const rest = core.filter((o) => o.kind !== 'Namespace')
      const list = (items: K8sObject[]): string => stringify({apiVersion: 'v1', kind: 'List', items})
      const ns = await bed.kubectl(['create', '--dry-run=server', '--validate=false', '-o', 'name', '-f', '-'], {input: list(namespaces)})
      expect(ns.code, ns.stderr).to.equal(0)
      expect(bed.api.registry.find('namespaces', undefined, 'porch-system')).to.equal(undefined)
      // namespaced objects need their namespaces to exist
      for (const n of namespaces) bed.api.registry.create('namespaces', undefined, {metadata: {name: n.metadata.name}})
      const r = await bed.kubectl(['create', '--dry-run=server', '--validate=false', '-o', 'name', '-f', '-'], {input: list(rest)})
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stdout.trim().split('\n').sort()).to.deep.equal(['configmap/function-pod-template', 'configmap/pod-cache-config', 'service/function-runner'])
      expect(bed.api.registry.list('configmaps', 'porch-system').items).to.deep.equal([])
    })

    it('accepts the Deployment\'s pod template as a Pod (server dry run)', async () => {
      const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
      if (!bed.api.registry.find('namespaces', undefined, 'porch-system')) bed.api.registry.create('namespaces', undefined, {metadata: {name: 'porch-system'}})
      const pod: V1Pod = {apiVersion: 'v1', kind: 'Pod', metadata: {name: 'function-runner-check', namespace: 'porch-system', labels: d.spec!.template.metadata!.labels}, spec: d.spec!.template.spec}
      const r = await bed.kubectl(['create', '--dry-run=server', '--validate=false', '-o', 'name', '-f', '-'], {input: stringify(pod)})
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stdout.trim()).to.equal('pod/function-runner-check')
    })
  })
})
