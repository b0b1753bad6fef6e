import {expect} from 'chai'

import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {startPodRuntime} from '../../src/lib/pods/runtime/runtime.js'
import type {Logger} from '../../src/lib/telemetry/log.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {clusterRuntimeOptions, createdThroughProxy, gateStarts, listPods, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until, type RuntimeHandle} from '../support/pods/index.js'

/** Records what the runtime logs (message + fields). */
function recordingLogger(): Logger & {lines: Array<{msg: string; fields: Record<string, unknown>}>} {
  const lines: Array<{msg: string; fields: Record<string, unknown>}> = []
  const log = (msg: string, fields: Record<string, unknown> = {}): void => void lines.push({msg, fields})
  const logger = {lines, error: log, warn: log, lifecycle: log, info: log, request: log, debug: log, trace: log, enabled: () => true, child: () => logger}
  return logger
}

const SERVICE_TEMPLATE = 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n'
function podTemplate(team: string): string {
  return `apiVersion: v1
kind: Pod
metadata:
  labels: {team: ${team}}
spec:
  restartPolicy: Always
  containers:
  - name: function
    image: placeholder
    command: [/wrapper-server-tools/wrapper-server]
    readinessProbe: {grpc: {port: 9446}}
`
}

describe('pod runtime: warm-up and templates', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined
  let ns: string
  let cmCounter = 0

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  async function configMap(data: Record<string, string>): Promise<string> {
    const name = `fn-template-${++cmCounter}`
    await pb.admin.create(`/api/v1/namespaces/${pb.runnerNs}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name}, data})
    return name
  }

  const patchConfigMap = (name: string, data: Record<string, string>): Promise<unknown> => pb.admin.patch(`/api/v1/namespaces/${pb.runnerNs}/configmaps/${name}`, {data})
  const podNames = async (): Promise<string[]> => (await listPods(pb, ns)).map((p) => p.metadata!.name!).sort()

  it('warms up the pod-cache-config images in the background; a failing image does not stop the others', async () => {
    const cacheConfig = PodCacheConfig.parse(`- name: ${image('cat')}\n- name: ${image('stderr')}\n- name: ${image('crash')}\n`, 'test')
    h = await startClusterRuntime(pb, {namespace: ns, cacheConfig, warmUp: true})
    const result = await h.runtime.warmedUp
    expect(result!.ready.sort()).to.deep.equal([image('cat'), image('stderr')])
    expect(result!.failed.map((f) => f.image)).to.deep.equal([image('crash')])
    expect(h.runtime.cache.snapshot().map((s) => s.image).sort()).to.deep.equal([image('cat'), image('stderr')])
    const created = createdThroughProxy(pb, ns, 'pods')
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(createdThroughProxy(pb, ns, 'pods')).to.equal(created)
  })

  it('without warm-up the evaluator is ready at once', async () => {
    const cacheConfig = PodCacheConfig.parse(`- name: ${image('cat')}\n`, 'test')
    h = await startClusterRuntime(pb, {namespace: ns, cacheConfig, warmUp: false})
    expect(await h.runtime.warmedUp).to.equal(undefined)
    expect(await listPods(pb, ns)).to.have.length(0)
  })

  it('makes pods from the --function-pod-template ConfigMap (upstream: a valid ConfigMap template generates a pod)', async () => {
    const name = await configMap({template: podTemplate('red'), serviceTemplate: SERVICE_TEMPLATE})
    h = await startClusterRuntime(pb, {namespace: ns, templateConfigMap: name, wrapperServerImage: undefined})
    const res = await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(res.resourceList.toString()).to.equal(RL.toString())
    const [pod] = await listPods(pb, ns)
    expect(pod!.metadata!.labels!.team).to.equal('red')
    expect(pod!.spec!.initContainers ?? []).to.deep.equal([])
    expect(pod!.metadata!.annotations!['fn.kpt.dev/template-version']).to.match(/^cm-/)
  })

  it('picks up a changed template: idle pods are replaced at once, busy ones when their calls end', async () => {
    const name = await configMap({template: podTemplate('red'), serviceTemplate: SERVICE_TEMPLATE})
    h = await startClusterRuntime(pb, {namespace: ns, templateConfigMap: name, wrapperServerImage: undefined})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const busy = h.evaluator.evaluate({image: image('gate'), resourceList: RL})
    await until(async () => (await gateStarts(pb)) === 1, 'the gate call running')
    const [catPod, gatePod] = ['cat', 'gate'].map((n) => h!.runtime.cache.snapshot().find((s) => s.image === image(n))!.name)
    const oldVersion = h.runtime.cache.currentTemplates.version
    await patchConfigMap(name, {template: podTemplate('blue')})
    await until(() => h!.runtime.cache.currentTemplates.version !== oldVersion, 'the new template seen')
    await until(async () => !(await podNames()).includes(catPod!), 'the idle pod replaced')
    expect(await podNames()).to.include(gatePod)
    await pb.openGate()
    await busy
    await until(async () => !(await podNames()).includes(gatePod!), 'the busy pod replaced once idle')
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect((await listPods(pb, ns)).map((p) => p.metadata!.labels!.team)).to.deep.equal(['blue'])
  })

  it('keeps the last good template when the ConfigMap changes into a broken one', async () => {
    const name = await configMap({template: podTemplate('red'), serviceTemplate: SERVICE_TEMPLATE})
    const log = recordingLogger()
    h = await startClusterRuntime(pb, {namespace: ns, templateConfigMap: name, wrapperServerImage: undefined, logger: log})
    const version = h.runtime.cache.currentTemplates.version
    await patchConfigMap(name, {template: podTemplate('red').replace('name: function', 'name: other')})
    await patchConfigMap(name, {extra: 'x'})
    // kube-apiserver's watch delivers the two changes when it does: wait until both were seen (and refused)
    await until(() => log.lines.filter((l) => l.msg === 'the changed function pod template is not usable; keeping the last good one').length >= 2, 'both changes of the ConfigMap seen')
    await new Promise((r) => setTimeout(r, 300))
    expect(h.runtime.cache.currentTemplates.version).to.equal(version)
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
  })

  it('a missing ConfigMap, or one breaking the contract, stops the start with a message naming the problem (upstream: template tests)', async () => {
    const missing = await startPodRuntime(clusterRuntimeOptions(pb, {namespace: ns, templateConfigMap: 'nope', wrapperServerImage: undefined})).catch((e: Error) => e)
    expect(missing).to.be.instanceOf(Error)
    expect((missing as Error).message).to.match(new RegExp(`ConfigMap ${pb.runnerNs}/nope .*does not exist`))
    const broken = await configMap({template: podTemplate('red').replace('/wrapper-server-tools/wrapper-server', '/bin/sh'), serviceTemplate: SERVICE_TEMPLATE})
    const e = await startPodRuntime(clusterRuntimeOptions(pb, {namespace: ns, templateConfigMap: broken, wrapperServerImage: undefined})).catch((err: Error) => err)
    expect((e as Error).message).to.match(/contract point 2 is broken/)
    const noService = await configMap({template: podTemplate('red')})
    const e2 = await startPodRuntime(clusterRuntimeOptions(pb, {namespace: ns, templateConfigMap: noService, wrapperServerImage: undefined})).catch((err: Error) => err)
    expect((e2 as Error).message).to.match(/contract point 4 .*serviceTemplate/)
  })
})
