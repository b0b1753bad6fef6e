import {expect} from 'chai'

import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {startPodRuntime} from '../../src/lib/pods/runtime/runtime.js'
import {RL, RUNNER_NS, createdCount, image, podNames, runtimeOptions, startRuntime, startedCalls, storedPods, until, usePodBed, type PodBed, type RuntimeHandle} from '../support/pods/index.js'

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
  let pb: PodBed
  let h: RuntimeHandle | undefined
  let ns: string
  let cmCounter = 0

  usePodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  function configMap(data: Record<string, string>): string {
    const name = `fn-template-${++cmCounter}`
    pb.bed.api.registry.create('configmaps', RUNNER_NS, {metadata: {name}, data})
    return name
  }

  it('warms up the pod-cache-config images in the background; a failing image does not stop the others', async () => {
    const cacheConfig = PodCacheConfig.parse(`- name: ${image('cat')}\n- name: ${image('stderr')}\n- name: ${image('crash')}\n`, 'test')
    h = await startRuntime(pb, {namespace: ns, cacheConfig, warmUp: true})
    const result = await h.runtime.warmedUp
    expect(result!.ready.sort()).to.deep.equal([image('cat'), image('stderr')])
    expect(result!.failed.map((f) => f.image)).to.deep.equal([image('crash')])
    expect(h.runtime.cache.snapshot().map((s) => s.image).sort()).to.deep.equal([image('cat'), image('stderr')])
    const created = createdCount(pb, ns, 'pods')
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(createdCount(pb, ns, 'pods')).to.equal(created)
  })

  it('without warm-up the evaluator is ready at once', async () => {
    const cacheConfig = PodCacheConfig.parse(`- name: ${image('cat')}\n`, 'test')
    h = await startRuntime(pb, {namespace: ns, cacheConfig, warmUp: false})
    expect(await h.runtime.warmedUp).to.equal(undefined)
    expect(storedPods(pb, ns)).to.have.length(0)
  })

  it('makes pods from the --function-pod-template ConfigMap (upstream: a valid ConfigMap template generates a pod)', async () => {
    const name = configMap({template: podTemplate('red'), serviceTemplate: SERVICE_TEMPLATE})
    h = await startRuntime(pb, {namespace: ns, templateConfigMap: name, wrapperServerImage: undefined})
    const res = await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(res.resourceList.toString()).to.equal(RL.toString())
    const [pod] = storedPods(pb, ns)
    expect(pod!.metadata!.labels!.team).to.equal('red')
    expect(pod!.spec!.initContainers ?? []).to.deep.equal([])
    expect(pod!.metadata!.annotations!['fn.kpt.dev/template-version']).to.match(/^cm-/)
  })

  it('picks up a changed template: idle pods are replaced at once, busy ones when their calls end', async () => {
    const name = configMap({template: podTemplate('red'), serviceTemplate: SERVICE_TEMPLATE})
    h = await startRuntime(pb, {namespace: ns, templateConfigMap: name, wrapperServerImage: undefined})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const busy = h.evaluator.evaluate({image: image('gate'), resourceList: RL})
    await until(async () => (await startedCalls(pb)) === 1, 'the gate call running')
    const [catPod, gatePod] = ['cat', 'gate'].map((n) => h!.runtime.cache.snapshot().find((s) => s.image === image(n))!.name)
    const oldVersion = h.runtime.cache.currentTemplates.version
    pb.bed.api.registry.patch('configmaps', RUNNER_NS, name, 'application/merge-patch+json', {data: {template: podTemplate('blue')}})
    await until(() => h!.runtime.cache.currentTemplates.version !== oldVersion, 'the new template seen')
    await until(() => !podNames(pb, ns).includes(catPod!), 'the idle pod replaced')
    expect(podNames(pb, ns)).to.include(gatePod)
    await pb.openGate()
    await busy
    await until(() => !podNames(pb, ns).includes(gatePod!), 'the busy pod replaced once idle')
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(storedPods(pb, ns).map((p) => p.metadata!.labels!.team)).to.deep.equal(['blue'])
  })

  it('keeps the last good template when the ConfigMap changes into a broken one', async () => {
    const name = configMap({template: podTemplate('red'), serviceTemplate: SERVICE_TEMPLATE})
    h = await startRuntime(pb, {namespace: ns, templateConfigMap: name, wrapperServerImage: undefined})
    const version = h.runtime.cache.currentTemplates.version
    pb.bed.api.registry.patch('configmaps', RUNNER_NS, name, 'application/merge-patch+json', {data: {template: podTemplate('red').replace('name: function', 'name: other')}})
    pb.bed.api.registry.patch('configmaps', RUNNER_NS, name, 'application/merge-patch+json', {data: {extra: 'x'}})
    await new Promise((r) => setTimeout(r, 300))
    expect(h.runtime.cache.currentTemplates.version).to.equal(version)
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
  })

  it('a missing ConfigMap, or one breaking the contract, stops the start with a message naming the problem (upstream: template tests)', async () => {
    const missing = await startPodRuntime(runtimeOptions(pb, {namespace: ns, templateConfigMap: 'nope', wrapperServerImage: undefined})).catch((e: Error) => e)
    expect(missing).to.be.instanceOf(Error)
    expect((missing as Error).message).to.match(new RegExp(`ConfigMap ${RUNNER_NS}/nope .*does not exist`))
    const broken = configMap({template: podTemplate('red').replace('/wrapper-server-tools/wrapper-server', '/bin/sh'), serviceTemplate: SERVICE_TEMPLATE})
    const e = await startPodRuntime(runtimeOptions(pb, {namespace: ns, templateConfigMap: broken, wrapperServerImage: undefined})).catch((err: Error) => err)
    expect((e as Error).message).to.match(/contract point 2 is broken/)
    const noService = configMap({template: podTemplate('red')})
    const e2 = await startPodRuntime(runtimeOptions(pb, {namespace: ns, templateConfigMap: noService, wrapperServerImage: undefined})).catch((err: Error) => err)
    expect((e2 as Error).message).to.match(/contract point 4 .*serviceTemplate/)
  })
})
