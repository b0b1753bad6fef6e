import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {readFile, writeFile} from 'node:fs/promises'
import https from 'node:https'
import type {AddressInfo} from 'node:net'
import path from 'node:path'

import {parse} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {ServeOptions} from '../../src/lib/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {failureStatus, type KubeObject} from '../support/k8s/status.js'
import {testTlsMaterial} from '../support/k8s/tls.js'
import {isClientNodeModule, traceServeModules} from '../support/module-trace.js'
import {ensureCrd, startClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, until} from '../support/pods/index.js'
import {REPO_ROOT, makeFunctionsDir, serveOptions, startInProcess, startServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {memoryLogger} from '../support/memory-logger.js'

const GROUP = 'config.porch.kpt.dev'
const PLURAL = 'functionconfigs'


interface HidingProxy {
  url: string
  /** A kubeconfig (file) for the admin through this proxy and the bed's fault proxy. */
  kubeconfigPath: string
  /** Every request that reached it, `METHOD path?query`. */
  received: string[]
  stop(): Promise<void>
}

/**
 * An API server that does not serve `group` (an older Porch's cluster, without the CRD): an HTTPS proxy in
 * front of the bed's fault proxy that answers 404 for /apis/<group>/... (discovery and resources, as
 * kube-apiserver for a group it does not know) and passes the rest on. The CRD stays installed on the shared
 * control plane (never deleted: other suites of the process use it).
 */
async function hidingProxy(pb: ClusterPodBed, group: string, namespace: string): Promise<HidingProxy> {
  const received: string[] = []
  const upstream = new URL(pb.proxy.url)
  const agent = new https.Agent({keepAlive: true, ca: pb.proxy.caPem})
  const tls = await testTlsMaterial()
  const server = https.createServer({key: tls.key, cert: tls.cert}, (req, res) => {
    const url = req.url ?? '/'
    received.push(`${req.method ?? 'GET'} ${url}`)
    if (url === `/apis/${group}` || url.startsWith(`/apis/${group}/`) || url.startsWith(`/apis/${group}?`)) {
      req.resume()
      res.writeHead(404, {'content-type': 'application/json'})
      res.end(JSON.stringify(failureStatus(404, 'NotFound', 'the server could not find the requested resource')))
      return
    }
    const headers = {...req.headers}
    delete headers.host
    delete headers.connection
    const up = https.request({hostname: upstream.hostname, port: upstream.port, method: req.method, path: url, headers, agent}, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers)
      res.flushHeaders()
      upRes.pipe(res)
      upRes.on('error', () => res.destroy())
    })
    up.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()))
    res.on('close', () => {
      if (!res.writableFinished) up.destroy()
    })
    req.pipe(up)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  const kubeconfigPath = path.join(pb.dir, `kubeconfig-hiding-${namespace}`)
  await writeFile(kubeconfigPath, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{name: 'hiding', cluster: {server: url, 'certificate-authority-data': Buffer.from(tls.ca).toString('base64')}}],
    users: [{name: 'hiding', user: {token: pb.cp.adminToken}}],
    contexts: [{name: 'hiding', context: {cluster: 'hiding', user: 'hiding', namespace}}],
    'current-context': 'hiding',
  }))
  return {
    url,
    kubeconfigPath,
    received,
    stop: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      agent.destroy()
    },
  }
}

describe('fnr serve --function-config-source=auto (the default): FunctionConfigs when the API serves them, else files', function () {
  this.timeout(120_000)
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

  function options(ns: string, extra: Partial<NonNullable<ServeOptions['functionConfig']>> = {}, disableRuntimes = '', kubeconfig = pb.kubeconfigPath): ServeOptions {
    const base = serveOptions({...fns, disableRuntimes})
    return {
      ...base,
      functionConfig: {source: 'auto', namespace: ns, ...extra},
      pod: {...base.pod, namespace: ns, wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeconfig, owner: 'auto-test'},
    }
  }

  /** A FunctionConfig mapping example.com/fn/cat:v1 to the `stderr` script (it logs "working on it"). */
  const createMapping = async (ns: string): Promise<void> => {
    await pb.admin.create(`/apis/${GROUP}/v1alpha1/namespaces/${ns}/${PLURAL}`, {apiVersion: `${GROUP}/v1alpha1`, kind: 'FunctionConfig', metadata: {name: 'cat'}, spec: {image: 'cat', prefixes: ['example.com/fn'], binaryExecutor: {tags: ['v1'], path: 'stderr'}}})
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
    const ns = await pb.namespace()
    await createMapping(ns)
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
    const ns = await pb.namespace()
    await createMapping(ns)
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
    const ns = await pb.namespace()
    await createMapping(ns)
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
    const ns = await pb.namespace()
    // The CRD stays on the shared control plane: this runner talks to an API server without its group.
    const hiding = await hidingProxy(pb, GROUP, ns)
    try {
      const logger = memoryLogger()
      const running = await startInProcess(options(ns, {}, '', hiding.kubeconfigPath), logger)
      const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
      try {
        expect(logger.lines.find((l) => l.msg.startsWith('--function-config-source=auto'))).to.deep.include({msg: '--function-config-source=auto: files', fields: {kubernetes: hiding.url, functionConfigCrd: 'not served'}})
        expect(await call(client, 'example.com/cat:v1')).to.deep.include({code: 0, evaluator: 'exec'})
        // discovery asked; no FunctionConfig list or watch, and none reached kube-apiserver
        expect(hiding.received).to.include(`GET /apis/${GROUP}/v1alpha1`)
        expect(hiding.received.filter((r) => r.includes(`/${PLURAL}`))).to.deep.equal([])
        expect(pb.proxy.liveWatches({resource: PLURAL})).to.equal(0)
        expect(pb.proxy.requestsFor({resource: PLURAL, namespace: ns})).to.deep.equal([])
      } finally {
        client.close()
        await running.stop()
      }
    } finally {
      await hiding.stop()
    }
  })

  it('Porch HEAD\'s Deployment args (no --config, --pod-cache-config or source flag; KUBECONFIG instead of in-cluster config): FunctionConfigs are read', async () => {
    const ns = await pb.namespace()
    await createMapping(ns)
    const child = await startServeProcess(
      [`--functions=${fns.functionsDir}`, `--pod-namespace=${ns}`, '--max-request-body-size=6291456', '--max-parallel-pods-per-function=2', '--max-waitlist-length=1', '--warm-up-pod-cache=true', '--pod-address=pod-ip'],
      {KUBECONFIG: pb.kubeconfigPath, WRAPPER_SERVER_IMAGE: WRAPPER_IMAGE},
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
    const env: NodeJS.ProcessEnv = {...process.env, HOME: dir, KUBECONFIG: pb.kubeconfigPath}
    delete env.KUBERNETES_SERVICE_HOST
    const {modules, stderr} = await traceServeModules(dir, ['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`], env)
    expect(stderr).to.match(/"msg":"--function-config-source=auto: files \(no pod runtime and no cluster configured\)"/)
    expect(modules.some((u) => u.includes('/dist/lib/serve.js'))).to.equal(true)
    expect(modules.filter(isClientNodeModule)).to.deep.equal([])
  })
})
