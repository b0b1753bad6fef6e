import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {checkHealth, healthClient} from '../support/health.js'
import {CLIENT_NODE_BUNDLE_SUFFIX, isClientNodeModule, traceServeModules} from '../support/module-trace.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {listPods, startClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until} from '../support/pods/index.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('fnr serve with the pod runtime (on the real control plane)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let pb: ClusterPodBed
  let fns: {configPath: string; functionsDir: string}

  before(async () => {
    pb = await startClusterPodBed()
    fns = await makeFunctionsDir(await temp.make())
  })
  after(async () => {
    await pb?.stop()
    await temp.cleanup()
  })

  function options(ns: string, pod: Record<string, unknown> = {}) {
    const base = serveOptions({...fns, disableRuntimes: ''})
    return {
      ...base,
      pod: {
        ...base.pod,
        namespace: ns,
        wrapperServerImage: WRAPPER_IMAGE,
        podAddress: 'pod-ip' as const,
        metadata: pb.metadata,
        kubeconfig: pb.kubeconfigPath,
        owner: 'serve-test',
        ...pod,
      },
    }
  }

  it('tries exec first, then the pod runtime, over gRPC', async () => {
    const ns = await pb.namespace()
    const running = await startInProcess(options(ns))
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    try {
      const exec = await client.evaluateRaw('example.com/cat:v1', RL)
      expect(exec.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])
      const pod = await client.evaluateRaw(image('cat'), RL, {deadline: Date.now() + 60_000})
      expect(pod.resourceList.toString()).to.equal(RL.toString())
      expect(pod.trailers.get('fnr-evaluator')).to.deep.equal(['pod'])
      const failed = await client.evaluateRaw(image('fail'), RL, {deadline: Date.now() + 60_000}).catch((e: grpc.ServiceError) => e)
      expect((failed as grpc.ServiceError).code).to.equal(grpc.status.INTERNAL)
      expect((failed as grpc.ServiceError).metadata.get('fnr-failure-bin')).to.have.length(1)
      const crash = await client.evaluateRaw(image('crash'), RL, {deadline: Date.now() + 60_000}).catch((e: grpc.ServiceError) => e)
      expect((crash as grpc.ServiceError).code).to.equal(grpc.status.FAILED_PRECONDITION)
      const deadline = await client.evaluateRaw(image('stderr'), RL, {deadline: Date.now() + 20}).catch((e: grpc.ServiceError) => e)
      expect((deadline as grpc.ServiceError).code).to.equal(grpc.status.DEADLINE_EXCEEDED)
    } finally {
      client.close()
      await running.stop()
    }
    // pods outlive the runner, for the next one to adopt
    expect((await listPods(pb, ns)).length).to.be.greaterThan(0)
  })

  it('reports NOT_SERVING until warm-up has finished, then SERVING', async () => {
    const ns = await pb.namespace()
    const dir = await temp.make()
    const cacheConfigPath = path.join(dir, 'pod-cache-config.yaml')
    await writeFile(cacheConfigPath, `- name: ${image('cat')}\n  maxParallelPodsPerFunction: 1\n`)
    const latency = pb.proxy.addLatency({verb: 'create', resource: 'pods', namespace: ns, ms: 1500, times: 1})
    let running: RunningServer | undefined
    try {
      running = await startInProcess(options(ns, {warmUp: true, cacheConfigPath}))
      const hc = healthClient(`127.0.0.1:${running.port}`)
      try {
        expect(await checkHealth(hc)).to.equal('NOT_SERVING')
        await until(async () => (await checkHealth(hc)) === 'SERVING', 'SERVING after warm-up')
        expect(await listPods(pb, ns)).to.have.length(1)
      } finally {
        hc.close()
      }
    } finally {
      latency.cancel()
      await running?.stop()
    }
  })

  it('stops the runtime on shutdown: no watches left open', async () => {
    const ns = await pb.namespace()
    const running = await startInProcess(options(ns))
    await until(() => pb.proxy.liveWatches({resource: 'pods', namespace: ns}) > 0, 'the pod watch open')
    await running.stop()
    await until(() => pb.proxy.liveWatches({resource: 'pods', namespace: ns}) === 0, 'the pod watch closed')
    expect(pb.proxy.liveWatches({namespace: ns})).to.equal(0)
  })

  it('fails to start with a one-line Config error when the template ConfigMap breaks the contract', async () => {
    await pb.admin.create(`/api/v1/namespaces/${pb.runnerNs}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'bad-template'}, data: {template: 'spec: {containers: [{name: app}]}', serviceTemplate: 'spec: {ports: [{port: 9446}]}'}})
    const err = await startInProcess(options(await pb.namespace(), {templateConfigMap: 'bad-template', runnerNamespace: pb.runnerNs})).catch((e: Error) => e)
    expect(err).to.be.instanceOf(Error)
    expect((err as Error).message).to.match(/contract point 1 is broken: no container is named "function"/)
  })

  it('`fnr serve --disable-runtimes=pod` never loads @kubernetes/client-node (checked by a module-resolution trace)', async () => {
    const dir = await temp.make()
    const run = async (args: string[], env: Record<string, string>): Promise<string[]> =>
      (await traceServeModules(dir, [`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, ...args], {...process.env, ...env})).modules
    const execOnly = await run(['--disable-runtimes=pod'], {})
    // the serve command's flags were read (oclif's command, or the fast path that skips oclif)
    expect(execOnly.some((u) => u.includes('/dist/cli/serve-flags.js'))).to.equal(true)
    expect(execOnly.filter(isClientNodeModule)).to.deep.equal([])
    // the same trace sees client-node when the pod runtime is on: the built bundle of the part fnr
    // uses, never the package's index (every API group and model: ~50 MB more RSS)
    const withPods = await run(['--disable-runtimes=', `--kubeconfig=${pb.kubeconfigPath}`, `--pod-namespace=${await pb.namespace()}`, '--warm-up-pod-cache=false', '--pod-cache-config='], {WRAPPER_SERVER_IMAGE: WRAPPER_IMAGE})
    expect(withPods.filter((u) => u.endsWith(CLIENT_NODE_BUNDLE_SUFFIX))).to.have.length(1)
    expect(withPods.filter((u) => u.includes('/node_modules/@kubernetes/client-node/'))).to.deep.equal([])
  })
})
