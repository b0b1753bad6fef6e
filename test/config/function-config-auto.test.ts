import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {parse} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {ServeOptions} from '../../src/lib/serve.js'
import {unregisterCustomResource} from '../support/k8s/custom-resources.js'
import {isClientNodeModule, traceServeModules} from '../support/module-trace.js'
import {customResourceScope, registerCrd, registerCustomResource, type KubeObject} from '../support/k8s/index.js'
import {RL, WRAPPER_IMAGE, startPodBed, until, type PodBed} from '../support/pods/index.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess, startServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {memoryLogger} from './function-config-crd.helpers.js'

const GROUP = 'config.porch.kpt.dev'
const PLURAL = 'functionconfigs'

describe('fnr serve --function-config-source=auto (the default): FunctionConfigs when the API serves them, else files', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  let pb: PodBed
  let fns: {configPath: string; functionsDir: string}
  const restore: Array<() => void> = []

  before(async () => {
    restore.push(customResourceScope())
    registerCrd(parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-config', 'crds', 'functionconfigs.yaml'), 'utf8')) as KubeObject)
    registerCrd(parse(await readFile(path.join(REPO_ROOT, 'manifests', 'function-config', 'crds', 'servicetemplates.yaml'), 'utf8')) as KubeObject)
    registerCustomResource({group: '', version: 'v1', plural: 'podtemplates', kind: 'PodTemplate', statusSubresource: false})
    pb = await startPodBed()
    fns = await makeFunctionsDir(await temp.make())
  })
  after(async () => {
    for (const r of restore.splice(0).reverse()) r()
    await pb?.stop()
    await temp.cleanup()
  })

  function options(ns: string, extra: Partial<NonNullable<ServeOptions['functionConfig']>> = {}, disableRuntimes = ''): ServeOptions {
    const base = serveOptions({...fns, disableRuntimes})
    return {
      ...base,
      functionConfig: {source: 'auto', namespace: ns, ...extra},
      pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeConfig: pb.bed.kubeConfig, owner: 'auto-test'},
    }
  }

  /** A FunctionConfig mapping example.com/fn/cat:v1 to the `stderr` script (it logs "working on it"). */
  const createMapping = (ns: string): void => {
    pb.bed.api.registry.create(PLURAL, ns, {apiVersion: `${GROUP}/v1alpha1`, kind: 'FunctionConfig', metadata: {name: 'cat'}, spec: {image: 'cat', prefixes: ['example.com/fn'], binaryExecutor: {tags: ['v1'], path: 'stderr'}}})
  }

  async function call(client: EvaluatorClient, img: string): Promise<{code: number; evaluator?: string; log?: string}> {
    try {
      const r = await client.evaluateRaw(img, RL, {deadline: Date.now() + 60_000})
      return {code: 0, evaluator: String(r.trailers.get('fnr-evaluator')[0]), log: r.log.toString()}
    } catch (err) {
      return {code: (err as grpc.ServiceError).code}
    }
  }

  it('the CRD is served: crd, so config.yaml maps nothing (as Porch at HEAD, which has no config.yaml) and FunctionConfigs map exec functions', async () => {
    const ns = pb.namespace()
    createMapping(ns)
    const logger = memoryLogger()
    const running = await startInProcess(options(ns), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      expect(logger.lines.find((l) => l.msg.startsWith('--function-config-source=auto'))).to.deep.include({level: 'info', msg: '--function-config-source=auto: crd'})
      const mapped = await call(client, 'example.com/fn/cat:v1')
      expect(mapped).to.deep.equal({code: 0, evaluator: 'exec', log: 'working on it\n'})
      // Only config.yaml maps example.com/cat:v1: not an exec function now, so the pod runtime answers (and knows no such image).
      expect((await call(client, 'example.com/cat:v1')).code).to.equal(grpc.status.FAILED_PRECONDITION)
    } finally {
      client.close()
      await running.stop()
    }
  })

  it('the CRD is served and --config was given explicitly: both (FunctionConfigs first, then config.yaml)', async () => {
    const ns = pb.namespace()
    createMapping(ns)
    const logger = memoryLogger()
    const running = await startInProcess(options(ns, {filesGiven: true}), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      expect(logger.lines.find((l) => l.msg.startsWith('--function-config-source=auto'))?.msg).to.equal('--function-config-source=auto: both')
      expect(await call(client, 'example.com/fn/cat:v1')).to.deep.include({code: 0, evaluator: 'exec', log: 'working on it\n'})
      expect(await call(client, 'example.com/cat:v1')).to.deep.include({code: 0, evaluator: 'exec'})
    } finally {
      client.close()
      await running.stop()
    }
  })

  it('exec only, with a cluster configured: discovery decides too', async () => {
    const ns = pb.namespace()
    createMapping(ns)
    const logger = memoryLogger()
    const running = await startInProcess(options(ns, {}, 'pod'), logger)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      expect(logger.lines.find((l) => l.msg.startsWith('--function-config-source=auto'))?.msg).to.equal('--function-config-source=auto: crd')
      expect(await call(client, 'example.com/fn/cat:v1')).to.deep.include({code: 0, evaluator: 'exec'})
    } finally {
      client.close()
      await running.stop()
    }
  })

  it('the API server does not serve the CRD: files (config.yaml and --pod-cache-config), and no FunctionConfig watch', async () => {
    const ns = pb.namespace()
    restore.push(unregisterCustomResource(GROUP, 'v1alpha1', PLURAL))
    try {
      const logger = memoryLogger()
      const running = await startInProcess(options(ns), logger)
      const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
      try {
        expect(logger.lines.find((l) => l.msg.startsWith('--function-config-source=auto'))).to.deep.include({msg: '--function-config-source=auto: files', fields: {kubernetes: pb.bed.api.url, functionConfigCrd: 'not served'}})
        expect(await call(client, 'example.com/cat:v1')).to.deep.include({code: 0, evaluator: 'exec'})
        expect(pb.bed.api.activeWatchCount(PLURAL)).to.equal(0)
      } finally {
        client.close()
        await running.stop()
      }
    } finally {
      restore.pop()!()
    }
  })

  it('Porch HEAD\'s Deployment args (no --config, --pod-cache-config or source flag; KUBECONFIG instead of in-cluster config): FunctionConfigs are read', async () => {
    const ns = pb.namespace()
    createMapping(ns)
    const child = await startServeProcess(
      [`--functions=${fns.functionsDir}`, `--pod-namespace=${ns}`, '--max-request-body-size=6291456', '--max-parallel-pods-per-function=2', '--max-waitlist-length=1', '--warm-up-pod-cache=true', '--pod-address=pod-ip'],
      {KUBECONFIG: pb.bed.kubeconfigPath, WRAPPER_SERVER_IMAGE: WRAPPER_IMAGE},
    )
    const client = new EvaluatorClient(`127.0.0.1:${child.port}`)
    try {
      expect(child.stderr()).to.match(/"msg":"--function-config-source=auto: crd"/)
      expect(child.stderr()).to.match(/"msg":"FunctionConfig source ready"/)
      await until(async () => (await call(client, 'example.com/fn/cat:v1')).code === 0, 'the FunctionConfig mapping served')
      expect(await call(client, 'example.com/fn/cat:v1')).to.deep.include({evaluator: 'exec', log: 'working on it\n'})
    } finally {
      client.close()
      child.child.kill('SIGTERM')
      await child.exited
    }
  })

  it('exec only without a cluster given on purpose: files, and client-node is never loaded, even with an ambient $KUBECONFIG whose API serves FunctionConfigs (module-resolution trace)', async () => {
    const dir = await temp.make()
    // A developer's shell: KUBECONFIG points at a cluster (this bed, which serves the CRD).
    const env: NodeJS.ProcessEnv = {...process.env, HOME: dir, KUBECONFIG: pb.bed.kubeconfigPath}
    delete env.KUBERNETES_SERVICE_HOST
    const {modules, stderr} = await traceServeModules(dir, ['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`], env)
    expect(stderr).to.match(/"msg":"--function-config-source=auto: files \(no pod runtime and no cluster configured\)"/)
    expect(modules.some((u) => u.includes('/dist/lib/serve.js'))).to.equal(true)
    expect(modules.filter(isClientNodeModule)).to.deep.equal([])
  })
})
