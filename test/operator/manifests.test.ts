import {expect} from 'chai'
import {execFile, spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {promisify} from 'node:util'

import type {V1ConfigMap, V1Deployment, V1Pod} from '@kubernetes/client-node'
import {parseAllDocuments, stringify} from 'yaml'

import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {inlineTemplates, templatesFromConfigMap} from '../../src/lib/pods/model/template.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient, namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {KUBECTL_PATH} from '../support/k8s/kubectl.js'
import {MANIFESTS, type K8sObject} from '../support/manifests.js'
import {freePort} from '../support/reliability/serve-process.js'
import {BIN_RUN, REPO_ROOT} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

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
    // Porch's Deployment tuning (its function-runner Deployment's args), and metrics on Porch's metrics port
    expect(args).to.include.members(['--max-parallel-pods-per-function=2', '--max-waitlist-length=1', '--metrics-port=9464'])
    expect(c.ports?.map((p) => [p.name, p.containerPort])).to.deep.equal([
      ['grpc', 9445],
      ['metrics', 9464],
    ])
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

  /** Porch's namespace names in `objects` replaced (metadata.namespace and Namespace names) by those of `names`. */
  const renamed = (items: K8sObject[], names: Record<string, string>): K8sObject[] =>
    items.map((o) => {
      const metadata = {...o.metadata}
      if (o.kind === 'Namespace') metadata.name = names[metadata.name] ?? metadata.name
      else if (metadata.namespace !== undefined) metadata.namespace = names[metadata.namespace] ?? metadata.namespace
      return {...o, metadata}
    })

  describe('against the real control plane (server dry run)', () => {
    waitForClusterBinaries()
    let cp: ControlPlane
    let sys: {name: string; remove: () => Promise<void>}
    let fn: {name: string; remove: () => Promise<void>}

    before(async () => {
      cp = await sharedControlPlane()
      // The manifests' namespaces have fixed names (porch-system, porch-fn-system) that other suites own while they
      // run: the objects go to namespaces of this suite's own instead.
      ;[sys, fn] = await Promise.all([namespace(cp, 'manifests-sys'), namespace(cp, 'manifests-fn')])
    })
    after(async () => {
      await sys?.remove()
      await fn?.remove()
    })

    /** Status code of a GET (404: not there). */
    const status = async (apiPath: string): Promise<number> => {
      const admin = adminClient(cp)
      try {
        return (await admin.raw('GET', apiPath)).code
      } finally {
        admin.close()
      }
    }

    it('accepts the core/v1 objects (server dry run) and persists nothing', async () => {
      const core = objects.filter((o) => o.apiVersion === 'v1')
      expect(core.map((o) => o.kind).sort()).to.deep.equal(['ConfigMap', 'ConfigMap', 'Namespace', 'Namespace', 'Service', 'ServiceAccount'])
      const list = (items: K8sObject[]): string => stringify({apiVersion: 'v1', kind: 'List', items})
      // The Namespaces under names nobody has.
      const unused = {'porch-system': `${sys.name}-dry`, 'porch-fn-system': `${fn.name}-dry`}
      const namespaces = renamed(core.filter((o) => o.kind === 'Namespace'), unused)
      const ns = await cp.kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], {input: list(namespaces)})
      expect(ns.code, ns.stderr).to.equal(0)
      expect(ns.stdout.trim().split('\n').sort()).to.deep.equal([`namespace/${fn.name}-dry`, `namespace/${sys.name}-dry`])
      for (const name of Object.values(unused)) expect(await status(`/api/v1/namespaces/${name}`), name).to.equal(404)
      // namespaced objects need their namespaces to exist: this suite's
      const rest = renamed(core.filter((o) => o.kind !== 'Namespace'), {'porch-system': sys.name, 'porch-fn-system': fn.name})
      const r = await cp.kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], {input: list(rest)})
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stdout.trim().split('\n').sort()).to.deep.equal(['configmap/function-pod-template', 'configmap/pod-cache-config', 'service/function-runner', 'serviceaccount/porch-fn-runner'])
      for (const o of rest) {
        const apiPath = `/api/v1/namespaces/${o.metadata.namespace}/${o.kind.toLowerCase()}s/${o.metadata.name}`
        expect(await status(apiPath), apiPath).to.equal(404)
      }
    })

    it('accepts the Deployment\'s pod template as a Pod (server dry run)', async () => {
      const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
      // The ServiceAccount admission plugin wants the pod's ServiceAccount to exist (the manifests' own).
      const sa = renamed([find<K8sObject>(objects, 'ServiceAccount', 'porch-fn-runner')], {'porch-system': sys.name})
      const created = await cp.kubectl(['create', '-f', '-'], {input: stringify(sa[0])})
      expect(created.code, created.stderr).to.equal(0)
      const pod: V1Pod = {apiVersion: 'v1', kind: 'Pod', metadata: {name: 'function-runner-check', namespace: sys.name, labels: d.spec!.template.metadata!.labels}, spec: d.spec!.template.spec}
      const r = await cp.kubectl(['create', '--dry-run=server', '-o', 'name', '-f', '-'], {input: stringify(pod)})
      expect(r.code, r.stderr).to.equal(0)
      expect(r.stdout.trim()).to.equal('pod/function-runner-check')
      expect(await status(`/api/v1/namespaces/${sys.name}/pods/function-runner-check`)).to.equal(404)
    })
  })

  describe('the built `fnr serve` with the Deployment\'s args', () => {
    waitForClusterBinaries()
    let cp: ControlPlane
    let sys: {name: string; remove: () => Promise<void>}
    let fn: {name: string; remove: () => Promise<void>}
    let dir: string
    const temp = new TempDirs()
    const children: ChildProcess[] = []

    before(async () => {
      // The runner's cluster: the shared control plane, with namespaces of this suite's own for Porch's (the node
      // runs no pod: nothing is warmed up).
      cp = await sharedControlPlane()
      ;[sys, fn] = await Promise.all([namespace(cp, 'manifests-sys'), namespace(cp, 'manifests-fn')])
      dir = await temp.make('fnr-manifests-serve-')
    })
    after(async () => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
      await sys?.remove()
      await fn?.remove()
      await temp.cleanup()
    })

    /**
     * The Deployment's container args and env, adapted to this machine: the image's paths become
     * the repository's (the Dockerfile copies functions/ there), the pod-cache-config mount a
     * local file (with no images: warm-up would read public registries), the ports free ones, the
     * in-cluster config the control plane's admin kubeconfig, and Porch's namespaces this suite's.
     * Everything else is as written.
     */
    async function deploymentCommand(): Promise<{args: string[]; env: NodeJS.ProcessEnv; metricsPort: number}> {
      const d = find<V1Deployment>(objects, 'Deployment', 'function-runner')
      const c = d.spec!.template.spec!.containers[0]!
      expect(c.args).to.include('--pod-namespace=porch-fn-system')
      const cacheConfig = path.join(dir, 'pod-cache-config.yaml')
      await writeFile(cacheConfig, '[]\n')
      const metricsPort = await freePort()
      const local: Record<string, string> = {
        port: '0',
        'metrics-port': String(metricsPort),
        config: path.join(REPO_ROOT, 'functions', 'config.yaml'),
        functions: path.join(REPO_ROOT, 'functions'),
        'pod-cache-config': cacheConfig,
        'pod-namespace': fn.name,
      }
      const args = c.args!.map((a) => {
        const m = /^--([a-z0-9-]+)=/.exec(a)
        return m && local[m[1]!] !== undefined ? `--${m[1]}=${local[m[1]!]}` : a
      })
      const env: NodeJS.ProcessEnv = {PATH: process.env.PATH, HOME: dir, KUBECONFIG: cp.kubeconfigPath, FNR_BIND_ADDRESS: '127.0.0.1'}
      for (const e of c.env ?? []) env[e.name] = e.value ?? (e.name === 'POD_NAME' ? 'function-runner-0' : e.name === 'POD_NAMESPACE' ? sys.name : undefined)
      return {args, env, metricsPort}
    }

    /** Runs `node bin/run.js ARGS` until its ready log line (then SIGTERM) or until it exits by itself. */
    async function serveOutcome(args: string[], env: NodeJS.ProcessEnv): Promise<{ready: boolean; code: number | null; log: string}> {
      const child = spawn(process.execPath, [BIN_RUN, ...args], {env, stdio: ['ignore', 'ignore', 'pipe']})
      children.push(child)
      let log = ''
      const exited = once(child, 'exit') as Promise<[number | null]>
      const ready = new Promise<boolean>((resolve) => {
        child.stderr!.on('data', (d: Buffer) => {
          log += d.toString()
          if (log.includes('"msg":"fnr serve is ready"')) resolve(true)
        })
        void exited.then(() => resolve(false))
      })
      const wasReady = await ready
      if (wasReady) child.kill('SIGTERM')
      const [code] = await exited
      return {ready: wasReady, code, log}
    }

    it('starts and serves with exactly those args (flags and values parsed, validated, pod runtime and metrics on), and stops cleanly', async () => {
      const {args, env, metricsPort} = await deploymentCommand()
      expect(args[0]).to.equal('serve')
      const r = await serveOutcome(args, env)
      expect(r.ready, r.log).to.equal(true)
      const line = JSON.parse(r.log.split('\n').find((l) => l.includes('"msg":"fnr serve is ready"'))!) as {runtimes: string[]; metricsPort?: number}
      expect(line.runtimes).to.deep.equal(['exec', 'pod'])
      expect(line.metricsPort).to.equal(metricsPort)
      expect(r.code, r.log).to.equal(0)
    })

    it('the same start fails with a usage error (exit 2) for a flag `fnr serve` does not have, or a bad value', async () => {
      const {args, env} = await deploymentCommand()
      const bogus = await serveOutcome([...args, '--max-pods-per-node=3'], env)
      expect(bogus.ready).to.equal(false)
      expect(bogus.code).to.equal(2)
      expect(bogus.log).to.match(/^fnr: .*max-pods-per-node/m)
      for (const [flag, bad] of [
        ['--max-waitlist-length=', 'one'],
        ['--pod-ttl=', 'soon'],
        ['--metrics-port=', '99999'],
      ] as const) {
        const r = await serveOutcome(
          args.map((a) => (a.startsWith(flag) ? `${flag}${bad}` : a)),
          env,
        )
        expect(r.ready, `${flag}${bad}`).to.equal(false)
        expect(r.code, `${flag}${bad}: ${r.log}`).to.equal(2)
      }
    })
  })
})
