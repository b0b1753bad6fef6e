import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1Pod} from '@kubernetes/client-node'
import {parse} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {inlinePodTemplate} from '../../src/lib/pods/model/template.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import type {KubeObject} from '../support/k8s/status.js'
import {ensureCrd, listPods, startClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until} from '../support/pods/index.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess, startServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {memoryLogger} from '../support/memory-logger.js'

const PLURAL = 'functionconfigs'
const API = 'config.porch.kpt.dev/v1alpha1'

type Source = 'files' | 'crd' | 'both'


describe('fnr serve --function-config-source: FunctionConfig objects on the real control plane', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let pb: ClusterPodBed
  let fns: {configPath: string; functionsDir: string}

  before(async () => {
    pb = await startClusterPodBed()
    // The CRDs, shared by the process's suites (core/v1 PodTemplates are kube-apiserver's own)
    for (const file of ['functionconfigs.yaml', 'servicetemplates.yaml']) await ensureCrd(pb, parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-config', 'crds', file), 'utf8')) as KubeObject)
    fns = await makeFunctionsDir(await temp.make())
  })
  after(async () => {
    await pb?.stop()
    await temp.cleanup()
  })

  function options(ns: string, source: Source, disableRuntimes = 'pod', pod: Partial<ServeOptions['pod']> = {}): ServeOptions {
    const base = serveOptions({...fns, disableRuntimes})
    return {
      ...base,
      functionConfig: {source, namespace: ns},
      pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeconfig: pb.kubeconfigPath, owner: 'fc-test', ...pod},
    }
  }

  const fcPath = (ns: string, name = ''): string => `/apis/${API}/namespaces/${ns}/${PLURAL}${name ? `/${name}` : ''}`
  const create = (ns: string, name: string, spec: unknown): Promise<KubeObject> => pb.admin.create(fcPath(ns), {apiVersion: API, kind: 'FunctionConfig', metadata: {name}, spec})
  const update = (ns: string, name: string, spec: unknown): Promise<KubeObject> => pb.admin.patch(fcPath(ns, name), {spec}, 'merge')
  const stored = async (ns: string, name: string): Promise<KubeObject | undefined> => {
    const r = await pb.admin.raw('GET', fcPath(ns, name))
    if (r.code === 404) return undefined
    if (r.code >= 300) throw new Error(`GET ${fcPath(ns, name)}: ${r.code} ${r.text}`)
    return r.body
  }
  const remove = (ns: string, name: string): Promise<KubeObject> => pb.admin.delete(fcPath(ns, name))

  /** The gRPC code of a call (0 for success). */
  async function code(client: EvaluatorClient, img: string): Promise<number> {
    try {
      await client.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
      return 0
    } catch (err) {
      return (err as grpc.ServiceError).code
    }
  }

  it('exec: creating a FunctionConfig maps an image to a local binary (live), an update moves it, a second object for the image waits its turn, deleting makes the image NOT_FOUND; an invalid one is skipped with its reason logged and in its status', async () => {
    const ns = await pb.namespace()
    await create(ns, 'broken', {image: 'broken', binaryExecutor: {tags: ['v1'], path: '../cat'}})
    const logger = memoryLogger()
    const running = await startInProcess(options(ns, 'crd'), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      // crd only: config.yaml is not read
      expect(await code(client, 'example.com/cat:v1')).to.equal(grpc.status.NOT_FOUND)
      expect(await code(client, 'example.com/tools/cat:v1')).to.equal(grpc.status.NOT_FOUND)
      await create(ns, 'cat', {image: 'cat', prefixes: ['example.com/tools'], binaryExecutor: {tags: ['v1'], path: 'cat'}})
      await until(async () => (await code(client, 'example.com/tools/cat:v1')) === 0, 'the FunctionConfig mapping in effect')
      const res = await client.evaluateRaw('example.com/tools/cat:v1', RL)
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])
      // the invalid object: logged with the reason, written to its status, and the valid ones work
      const error = logger.lines.find((l) => l.level === 'error' && l.fields?.functionConfig === `${ns}/broken`)
      expect(error?.msg).to.equal('invalid FunctionConfig skipped')
      expect(String(error?.fields?.error)).to.include('".." is not allowed')
      // (the status write is a request of its own, after the log line)
      const broken = await until(async () => (await stored(ns, 'broken'))!.status?.error !== undefined && (await stored(ns, 'broken'))!, 'the status of broken written')
      expect(broken.status.error).to.include('".." is not allowed')
      expect(broken.status.functionRunnerObservedGeneration).to.equal(undefined)
      await until(async () => (await stored(ns, 'cat'))!.status?.functionRunnerObservedGeneration === 1, 'status.functionRunnerObservedGeneration of cat')
      expect(await code(client, 'example.com/broken:v1')).to.equal(grpc.status.NOT_FOUND)
      // an update applies live
      await update(ns, 'cat', {binaryExecutor: {tags: ['v2'], path: 'cat'}})
      await until(async () => (await code(client, 'example.com/tools/cat:v2')) === 0, 'the updated tags in effect')
      expect(await code(client, 'example.com/tools/cat:v1')).to.equal(grpc.status.NOT_FOUND)
      await until(async () => (await stored(ns, 'cat'))!.status?.functionRunnerObservedGeneration === 2, 'status of generation 2')
      // a second object for the same image is reported on its status, and takes over when the first goes
      await create(ns, 'cat-again', {image: 'cat', prefixes: ['example.com/tools'], binaryExecutor: {tags: ['v3'], path: 'cat'}})
      await until(async () => String((await stored(ns, 'cat-again'))!.status?.error ?? '').includes(`already configured by FunctionConfig ${ns}/cat`), 'the conflict on the status')
      expect(await code(client, 'example.com/tools/cat:v3')).to.equal(grpc.status.NOT_FOUND)
      await remove(ns, 'cat')
      await until(async () => (await code(client, 'example.com/tools/cat:v3')) === 0, 'the second object in effect')
      await until(async () => {
        const again = (await stored(ns, 'cat-again'))!
        return again.status?.error === undefined && again.status?.functionRunnerObservedGeneration === 1
      }, 'its status cleared')
      expect(await code(client, 'example.com/tools/cat:v2')).to.equal(grpc.status.NOT_FOUND)
      // deletion removes the mapping
      await remove(ns, 'cat-again')
      await until(async () => (await code(client, 'example.com/tools/cat:v3')) === grpc.status.NOT_FOUND, 'NOT_FOUND after the deletion')
    } finally {
      client.close()
      await running.stop()
    }
  })

  it('keeps watching across dropped watches and expired resource versions; a missing CRD at start is a one-line Config error', async () => {
    const ns = await pb.namespace()
    const running = await startInProcess(options(ns, 'crd'))
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      await until(() => pb.proxy.liveWatches({resource: PLURAL, namespace: ns}) > 0, 'the FunctionConfig watch open')
      pb.proxy.dropWatches({resource: PLURAL, namespace: ns, mode: 'destroy'})
      await create(ns, 'cat', {image: 'cat', prefixes: ['example.com/drop'], binaryExecutor: {tags: ['v1'], path: 'cat'}})
      await until(async () => (await code(client, 'example.com/drop/cat:v1')) === 0, 'the object created while the watch was down')
      // the watch ends as kube-apiserver ends one whose resource version was compacted away (410 Expired): a relist
      await until(() => pb.proxy.liveWatches({resource: PLURAL, namespace: ns}) > 0, 'the FunctionConfig watch open again')
      expect(pb.proxy.expireWatches({resource: PLURAL, namespace: ns})).to.be.greaterThan(0)
      await remove(ns, 'cat')
      await until(async () => (await code(client, 'example.com/drop/cat:v1')) === grpc.status.NOT_FOUND, 'the deletion seen after a relist')
    } finally {
      client.close()
      await running.stop()
    }
    const ns2 = await pb.namespace()
    const fault = pb.proxy.failNext({verb: 'list', resource: PLURAL, namespace: ns2, code: 404, times: 1, message: 'the server could not find the requested resource'})
    try {
      const err = await startInProcess(options(ns2, 'crd')).catch((e: Error) => e)
      expect(err).to.be.instanceOf(Error)
      expect((err as Error).message).to.match(/^cannot list FunctionConfigs in namespace fn-[0-9a-f]+: the FunctionConfig CRD \(functionconfigs\.config\.porch\.kpt\.dev\) is not installed/)
      expect((err as Error).message).to.not.include('\n')
    } finally {
      fault.cancel()
    }
  })

  it('both: a FunctionConfig wins over config.yaml for the same image, config.yaml serves the rest', async () => {
    const ns = await pb.namespace()
    // config.yaml maps example.com/cat:v1 to `cat`; the FunctionConfig maps it to `stderr` (which logs "working on it")
    await create(ns, 'cat', {image: 'cat', prefixes: ['example.com'], binaryExecutor: {tags: ['v1'], path: 'stderr'}})
    const running = await startInProcess(options(ns, 'both'))
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const overridden = await client.evaluateRaw('example.com/cat:v1', RL)
      expect(overridden.log.toString()).to.include('working on it')
      const fromFiles = await client.evaluateRaw('example.com/slowcat:v1', RL)
      expect(fromFiles.resourceList.toString()).to.equal(RL.toString())
      await remove(ns, 'cat')
      await until(async () => !(await client.evaluateRaw('example.com/cat:v1', RL)).log.toString().includes('working on it'), 'config.yaml again after the deletion')
    } finally {
      client.close()
      await running.stop()
    }
  })

  it('the built CLI: `fnr serve --function-config-source=crd --function-config-namespace=… --kubeconfig=…`', async () => {
    const ns = await pb.namespace()
    const proc = await startServeProcess([
      '--function-config-source=crd',
      `--function-config-namespace=${ns}`,
      `--kubeconfig=${pb.kubeconfigPath}`,
      '--disable-runtimes=pod',
      `--functions=${fns.functionsDir}`,
    ])
    const client = new EvaluatorClient(`127.0.0.1:${proc.port}`)
    try {
      await create(ns, 'cat', {image: 'cat', prefixes: ['example.com/cli'], binaryExecutor: {tags: ['v1'], path: 'cat'}})
      await until(async () => (await code(client, 'example.com/cli/cat:v1')) === 0, 'the mapping in the child process')
      expect(proc.stderr()).to.include('"msg":"FunctionConfig applied"')
    } finally {
      client.close()
      proc.child.kill('SIGTERM')
      expect((await proc.exited).code).to.equal(0)
    }
  })

  it('the pod runtime: a FunctionConfig created, or given a podExecutor, after startup is warmed up when the watch sees it', async () => {
    const ns = await pb.namespace()
    const running: RunningServer = await startInProcess(options(ns, 'crd', '', {warmUp: true}))
    try {
      expect(await listPods(pb, ns)).to.deep.equal([])
      await create(ns, 'cat', {image: 'cat', prefixes: ['example.com/fn'], podExecutor: {tags: ['v1']}})
      const [warm] = await until(async () => {
        const pods = await listPods(pb, ns)
        return pods.length === 1 && pods
      }, 'the pod of the new FunctionConfig warmed up')
      expect(warm!.metadata!.annotations!['fnr.dev/image']).to.equal(image('cat'))
      // An existing FunctionConfig that gets a podExecutor is warmed too.
      await create(ns, 'stderr', {image: 'stderr', prefixes: ['example.com/fn'], binaryExecutor: {tags: ['v0'], path: 'cat'}})
      await update(ns, 'stderr', {image: 'stderr', prefixes: ['example.com/fn'], binaryExecutor: {tags: ['v0'], path: 'cat'}, podExecutor: {tags: ['v1']}})
      await until(async () => (await listPods(pb, ns)).some((p) => p.metadata!.annotations!['fnr.dev/image'] === image('stderr')), 'the stderr pod warmed up')
      expect(await listPods(pb, ns)).to.have.length(2)
    } finally {
      await running.stop()
    }
  })

  it('the pod runtime: warm-up, TTL and templateOverrides from a FunctionConfig; changing the overrides replaces the idle pod', async () => {
    const ns = await pb.namespace()
    // kube-apiserver's ServiceAccount admission refuses a pod whose service account does not exist
    await pb.admin.create(`/api/v1/namespaces/${ns}/serviceaccounts`, {apiVersion: 'v1', kind: 'ServiceAccount', metadata: {name: 'fn-sa'}})
    const spec = (value: string) => ({
      image: 'cat',
      prefixes: ['example.com/fn'],
      podExecutor: {tags: ['v1'], timeToLive: '7m', templateOverrides: {serviceAccountName: 'fn-sa', container: {env: [{name: 'FNR_FC', value}], resources: {limits: {memory: '300Mi'}}}}},
    })
    await create(ns, 'cat', spec('one'))
    const running: RunningServer = await startInProcess(options(ns, 'crd', '', {warmUp: true}))
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    const fnContainer = (p: V1Pod) => p.spec!.containers.find((c) => c.name === 'function')!
    try {
      // warm-up: prefixes[0] + "/" + image + ":" + podExecutor.tags[0]
      const [warm] = await until(async () => {
        const pods = await listPods(pb, ns)
        return pods.length === 1 && pods
      }, 'the warm-up pod')
      expect(warm!.metadata!.annotations!['fnr.dev/image']).to.equal(image('cat'))
      expect(warm!.metadata!.annotations!['fnr.dev/ttl-seconds']).to.equal('420')
      const version1 = warm!.metadata!.annotations!['fn.kpt.dev/template-version']!
      expect(version1).to.match(/^inline-[0-9a-f]{12}-fc[0-9a-f]{12}$/)
      expect(warm!.spec!.serviceAccountName).to.equal('fn-sa')
      expect(fnContainer(warm!).env).to.deep.equal([{name: 'FNR_FC', value: 'one'}])
      expect(fnContainer(warm!).resources).to.deep.equal({requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '300Mi'}})
      const res = await client.evaluateRaw(image('cat'), RL, {deadline: Date.now() + 60_000})
      expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
      expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.deep.equal([warm!.metadata!.name])

      // a live change of the overrides bumps the template version: the idle pod is replaced
      await update(ns, 'cat', spec('two'))
      await until(async () => !(await listPods(pb, ns)).some((p) => p.metadata!.name === warm!.metadata!.name), 'the old pod deleted')
      await until(async () => (await code(client, image('cat'))) === 0, 'a call on a new pod')
      const [fresh] = await listPods(pb, ns)
      expect(fresh!.metadata!.annotations!['fn.kpt.dev/template-version']).to.not.equal(version1)
      expect(fnContainer(fresh!).env).to.deep.equal([{name: 'FNR_FC', value: 'two'}])
    } finally {
      client.close()
      await running.stop()
    }
  })

  it('the pod runtime: Porch\'s PodTemplate base-pod-template and ServiceTemplate base-service-template are the base templates (watched; a broken edit keeps the last good one)', async () => {
    const ns = await pb.namespace()
    const base = inlinePodTemplate({wrapperServerImage: 'porch/wrapper-server:latest'})
    const podTemplate = (value: string, containerName = 'function') => {
      const spec = structuredClone(base.spec!)
      const fn = spec.containers.find((c) => c.name === 'function')!
      fn.name = containerName
      fn.env = [{name: 'FROM_TEMPLATE', value}]
      return {apiVersion: 'v1', kind: 'PodTemplate', metadata: {name: 'base-pod-template'}, template: {metadata: {labels: {from: 'podtemplate'}}, spec}}
    }
    const podTemplates = (namespace: string): string => `/api/v1/namespaces/${namespace}/podtemplates`
    await pb.admin.create(podTemplates(ns), podTemplate('one'))
    await pb.admin.create(`/apis/${API}/namespaces/${ns}/servicetemplates`, {apiVersion: API, kind: 'ServiceTemplate', metadata: {name: 'base-service-template'}, template: {metadata: {labels: {from: 'servicetemplate'}}, spec: {type: 'ClusterIP', ports: [{name: 'grpc', port: 9446, targetPort: 9446}]}}})
    const logger = memoryLogger()
    const running = await startInProcess(options(ns, 'crd', ''), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      // the init container's image is $WRAPPER_SERVER_IMAGE (the kubelet knows only that one), so the pod starts
      expect(await code(client, image('cat'))).to.equal(0)
      const [first] = await listPods(pb, ns)
      expect(first!.metadata!.labels!.from).to.equal('podtemplate')
      expect(first!.spec!.initContainers![0]!.image).to.equal(WRAPPER_IMAGE)
      expect(first!.spec!.containers.find((c) => c.name === 'function')!.env).to.deep.equal([{name: 'FROM_TEMPLATE', value: 'one'}])
      const version1 = first!.metadata!.annotations!['fn.kpt.dev/template-version']!
      expect(version1).to.match(/^porch-[0-9a-f]{12}$/)
      const svc = await pb.admin.get(`/api/v1/namespaces/${ns}/services/${first!.metadata!.name!}`)
      expect(svc.metadata.labels.from).to.equal('servicetemplate')
      // an edit replaces the idle pod
      await pb.admin.replace(`${podTemplates(ns)}/base-pod-template`, podTemplate('two'))
      await until(async () => !(await listPods(pb, ns)).some((p) => p.metadata!.name === first!.metadata!.name), 'the old pod replaced')
      expect(await code(client, image('cat'))).to.equal(0)
      const [second] = await listPods(pb, ns)
      expect(second!.spec!.containers.find((c) => c.name === 'function')!.env).to.deep.equal([{name: 'FROM_TEMPLATE', value: 'two'}])
      // an edit that breaks the contract is reported and ignored
      await pb.admin.replace(`${podTemplates(ns)}/base-pod-template`, podTemplate('three', 'app'))
      await until(() => logger.lines.some((l) => l.level === 'error' && String(l.fields?.error).includes('no container is named "function"')), 'the broken template reported')
      expect(await code(client, image('cat'))).to.equal(0)
      expect((await listPods(pb, ns)).map((p) => p.metadata!.name)).to.deep.equal([second!.metadata!.name])
    } finally {
      client.close()
      await running.stop()
    }
    // a broken PodTemplate at start stops the start with a one-line message naming it
    const ns2 = await pb.namespace()
    await pb.admin.create(podTemplates(ns2), podTemplate('x', 'app'))
    const err = await startInProcess(options(ns2, 'crd', '')).catch((e: Error) => e)
    expect((err as Error).message).to.equal(`function pod template (PodTemplate ${ns2}/base-pod-template): contract point 1 is broken: no container is named "function" (containers: "app")`)
  })

  it('the pod runtime: maxParallelExecutions and preferredMaxQueueLength from a FunctionConfig decide how many pods an image gets', async () => {
    const ns = await pb.namespace()
    const dir = await temp.make()
    const started = path.join(dir, 'started')
    await mkdir(started)
    const gate = path.join(dir, 'gate')
    const img = await pb.addFunction('fcgate', `#!/bin/sh\ntouch "${started}/$$"\nwhile [ ! -f "${gate}" ]; do sleep 0.05; done\nexec cat\n`)
    await create(ns, 'fcgate', {image: 'fcgate', prefixes: ['example.com/fn'], podExecutor: {maxParallelExecutions: 2, preferredMaxQueueLength: 1}})
    // the flags allow one pod per image; the FunctionConfig allows two
    const running = await startInProcess(options(ns, 'crd', '', {maxParallelPodsPerFunction: 1, maxWaitlistLength: 2}))
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const calls = [1, 2, 3].map(() => client.evaluateRaw(img, RL, {deadline: Date.now() + 120_000}))
      await until(async () => (await readdir(started)).length === 3, 'three calls running')
      expect(await listPods(pb, ns)).to.have.length(2)
      await writeFile(gate, '')
      for (const r of await Promise.all(calls)) expect(r.resourceList.toString()).to.equal(RL.toString())
      expect(await listPods(pb, ns)).to.have.length(2)
    } finally {
      await writeFile(gate, '')
      client.close()
      await running.stop()
    }
  })
})
