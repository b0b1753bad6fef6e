/**
 * Porch's own files read by fnr in process, from ../shared/compat/porch (never copied into the
 * repository): the pod-cache-config ConfigMaps of v1.5.8 and v1.5.7, v1.5.8's template ConfigMap,
 * resource checks, and HEAD's 19 FunctionConfigs in a FunctionConfigStore. The runner Deployments
 * started as `fnr serve` and the FunctionConfigs on the real control plane are in ./porch-files.test.ts.
 */
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import type {V1ConfigMap, V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'
import {parse as parseYaml} from 'yaml'

import {FunctionConfigStore, type FunctionConfigObject} from '../../src/lib/config/function-config-crd.js'
import {PodCacheConfig, parseResourceFlags} from '../../src/lib/config/pod-cache-config.js'
import {buildPod, templatesFromConfigMap} from '../../src/lib/pods/model/template.js'
import type {KubeObject} from '../support/k8s/status.js'
import {memoryLogger} from '../support/memory-logger.js'
import {CATALOG, headFunctionConfigs, porchDocs, porchFilesSuite} from '../support/porch-files.js'

const MINUTES_30 = 30 * 60_000

/** The pod-cache-config.yaml of a release's runner ConfigMap. */
async function porchPodCacheConfig(version: string): Promise<string> {
  const cm = (await porchDocs(`${version}/porch_2-function-runner.yaml`)).find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'pod-cache-config') as V1ConfigMap
  return cm.data!['pod-cache-config.yaml']!
}

describe("Porch's files with fnr (../shared/compat/porch), in process", function () {
  this.timeout(180_000)
  const temp = porchFilesSuite()

  describe('pod-cache-config: v1.5.8 (list), v1.5.7 (map), quoted numbers', () => {
    it('both formats load, strictly, to the same 19 images with a 30m TTL; v1.5.8\'s counts apply', async () => {
      const list = PodCacheConfig.parse(await porchPodCacheConfig('v1.5.8'), 'v1.5.8')
      const map = PodCacheConfig.parse(await porchPodCacheConfig('v1.5.7'), 'v1.5.7')
      expect(list.images()).to.have.length(19)
      expect(map.images()).to.deep.equal(list.images())
      expect(list.warnings).to.deep.equal([])
      expect(map.warnings).to.deep.equal([])
      const defaults = {ttlMs: 60_000, maxWaitlistLength: 1, maxParallelPods: 1}
      for (const image of list.images()) {
        expect(image.startsWith(`${CATALOG}/`), image).to.equal(true)
        expect(list.settingsFor(image, defaults)).to.deep.equal({ttlMs: MINUTES_30, maxWaitlistLength: 2, maxParallelPods: 2})
        expect(map.settingsFor(image, defaults)).to.deep.equal({ttlMs: MINUTES_30, maxWaitlistLength: 1, maxParallelPods: 1})
      }
      // numbers written as strings are numbers
      const quoted = PodCacheConfig.parse((await porchPodCacheConfig('v1.5.8')).replace(/: 2$/gm, ': "2"'), 'quoted')
      expect(quoted.settingsFor(list.images()[0]!, defaults)).to.deep.equal({ttlMs: MINUTES_30, maxWaitlistLength: 2, maxParallelPods: 2})
    })
  })

  describe("templates as their author wrote them: v1.5.8's template ConfigMap, HEAD's PodTemplate", () => {
    it("v1.5.8's ConfigMap is used as written (weak settings said); --harden-pod-templates fills in fnr's defaults", async () => {
      const cm = (await porchDocs('v1.5.8/function-pods_deployment.yaml')).find((d) => d.kind === 'ConfigMap') as V1ConfigMap
      const asWritten = templatesFromConfigMap(cm, {maxRequestBodySize: 6291456})
      const written = parseYaml(cm.data!.template!) as V1Pod
      expect(asWritten.pod.spec).to.deep.equal(written.spec)
      expect(asWritten.warnings).to.include.members([
        'not set: spec.securityContext.runAsNonRoot (fnr would set true)',
        'not set: spec.automountServiceAccountToken (fnr would set false)',
        'not set: spec.containers[0] (function).securityContext.allowPrivilegeEscalation (fnr would set false)',
      ])
      const pod = buildPod({templates: asWritten, image: `${CATALOG}/set-labels:v0.1.5`, command: ['/usr/local/bin/function'], name: 'set-labels-v015-1-abcdef12', namespace: 'porch-fn-system', labels: {}, annotations: {}, maxRequestBodySize: 6291456})
      // the contract points only: image, and fnr's args after the template's
      const fn = pod.spec!.containers[0]!
      expect(fn.image).to.equal(`${CATALOG}/set-labels:v0.1.5`)
      expect(fn.command).to.deep.equal(['/wrapper-server-tools/wrapper-server'])
      expect(fn.args).to.deep.equal(['--port', '9446', '--max-request-body-size', '6291456', '--', '/usr/local/bin/function'])
      expect(fn.securityContext).to.equal(undefined)
      const hardened = templatesFromConfigMap(cm, {maxRequestBodySize: 6291456}, {harden: true})
      expect(hardened.pod.spec!.securityContext).to.deep.include({runAsNonRoot: true, runAsUser: 65532})
      expect(hardened.version).to.not.equal(asWritten.version)
    })
  })

  describe('resources the API server would reject, said before any pod is made', () => {
    it('--pod-requests/--pod-limits and a pod-cache-config entry: a request above its limit or a malformed quantity', () => {
      expect(parseResourceFlags('cpu=100m,memory=128Mi', 'memory=1Gi')).to.deep.equal({requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '1Gi'}})
      expect(() => parseResourceFlags('memory=2Gi', 'memory=1Gi')).to.throw(/--pod-requests\.memory: "2Gi" is more than the limit "1Gi"/).with.property('kind', 'Usage')
      expect(() => parseResourceFlags('memory=1GB', '')).to.throw(/--pod-requests: memory: "1GB" is not a quantity: unknown suffix "GB"/)
      const text = (await_: string): string => `- name: ${CATALOG}/set-labels:v0.1.5\n  resources: {requests: {memory: ${await_}}, limits: {memory: 1Gi}}\n`
      expect(() => PodCacheConfig.parse(text('2Gi'), 'cfg')).to.throw(/resources\.requests\.memory: "2Gi" is more than the limit "1Gi" .*the API server would reject the pod/)
      expect(() => PodCacheConfig.parse(text('12x'), 'cfg')).to.throw(/resources\.requests\.memory: "12x" is not a quantity/)
      const lenient = PodCacheConfig.parse(text('2Gi'), 'cfg', {lenient: true})
      expect(lenient.images()).to.deep.equal([`${CATALOG}/set-labels:v0.1.5`])
      expect(lenient.entryFor(`${CATALOG}/set-labels:v0.1.5`)!.resources).to.equal(undefined)
      expect(lenient.warnings.join()).to.match(/is more than the limit .*; ignoring it/)
    })
  })

  describe("HEAD's 19 FunctionConfigs, CRDs and base templates", () => {
    let functionsDir: string
    let objects: FunctionConfigObject[]
    before(async () => {
      ;({objects, functionsDir} = await headFunctionConfigs(temp))
    })

    it('none is rejected; binaryExecutor and goExecutor tags resolve to the catalog binary of that function; podExecutor settings as Porch applies them', async () => {
      const logger = memoryLogger()
      const outcomes: Array<{key: string; error?: string}> = []
      const store = new FunctionConfigStore({functionsDir, logger, onOutcome: (_o, r) => outcomes.push(r)})
      for (const o of objects) await store.apply(o)
      await store.settled()
      expect(store.list().map((e) => e.image).sort()).to.deep.equal(objects.map((o) => (o.spec as {image: string}).image).sort())
      expect(logger.lines.filter((l) => l.level === 'error' || l.level === 'warn')).to.deep.equal([])
      expect(outcomes.filter((o) => o.error)).to.deep.equal([])
      const binaryOf = (image: string): string | undefined => store.lookupBinary(image)?.binary
      for (const o of objects) {
        const spec = o.spec as {image: string; binaryExecutor?: {tags: string[]; path: string}; goExecutor?: {tags: string[]; id?: string}; podExecutor?: {tags: string[]}}
        for (const tag of spec.binaryExecutor?.tags ?? []) {
          expect(binaryOf(`${CATALOG}/${spec.image}:${tag}`), `${spec.image}:${tag}`).to.equal(path.join(functionsDir, spec.binaryExecutor!.path))
          expect(binaryOf(`${spec.image}:${tag}`), `short ${spec.image}:${tag} (prefix "")`).to.equal(path.join(functionsDir, spec.binaryExecutor!.path))
        }
        for (const tag of spec.goExecutor?.tags ?? []) expect(binaryOf(`${CATALOG}/${spec.image}:${tag}`), `goExecutor ${spec.image}:${tag}`).to.equal(path.join(functionsDir, spec.goExecutor!.id ?? spec.image))
        // podExecutor tags: the pod runtime, 30m TTL
        for (const tag of spec.podExecutor?.tags ?? []) {
          if (!(spec.binaryExecutor?.tags ?? []).includes(tag)) expect(binaryOf(`${CATALOG}/${spec.image}:${tag}`), `${spec.image}:${tag} runs in a pod`).to.equal(undefined)
          expect(store.settingsFor(`${CATALOG}/${spec.image}:${tag}`, {ttlMs: 1, maxWaitlistLength: 2, maxParallelPods: 1}).ttlMs).to.equal(MINUTES_30)
        }
      }
      // Porch's warm-up list: prefixes[0] ("" = the default prefix) + image + podExecutor.tags[0]
      expect(store.warmUpImages()).to.have.length(19)
      expect(store.warmUpImages()).to.include(`${CATALOG}/set-namespace:v0.4.1`)
    })

    it('without the catalog binaries none is rejected either: pod settings and warm-up stay, the missing binaries are reported', async () => {
      const empty = path.join(await temp.make('fnr-porch-fc-empty-'), 'functions')
      await mkdir(empty)
      const logger = memoryLogger()
      const store = new FunctionConfigStore({functionsDir: empty, logger})
      for (const o of objects) await store.apply(o)
      await store.settled()
      expect(store.list()).to.have.length(19)
      expect(logger.lines.filter((l) => l.level === 'error')).to.deep.equal([])
      expect(logger.lines.filter((l) => l.msg === 'FunctionConfig applied without some of its settings')).to.have.length(objects.filter((o) => (o.spec as KubeObject).binaryExecutor || (o.spec as KubeObject).goExecutor).length)
      expect(store.warmUpImages()).to.have.length(19)
      expect(store.lookupBinary(`${CATALOG}/set-namespace:v0.4.2`)).to.equal(undefined)
    })
  })
})
