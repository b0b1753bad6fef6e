import {expect} from 'chai'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1Pod} from '@kubernetes/client-node'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {
  FunctionConfigExecConfig,
  FunctionConfigStore,
  parseFunctionConfig,
  parseFunctionConfigSource,
  type FunctionConfigObject,
} from '../../src/lib/config/function-config-crd.js'
import {functionConfigPodPreparer} from '../../src/lib/pods/runtime/function-configs.js'
import {inlinePodTemplate, inlineTemplates} from '../../src/lib/pods/model/template.js'
import {templatesFromPorchObjects} from '../../src/lib/pods/cluster/template-porch.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../support/tmp.js'
import {memoryLogger} from '../support/memory-logger.js'

let created = 0
function fc(name: string, spec: unknown, meta: Partial<NonNullable<FunctionConfigObject['metadata']>> = {}): FunctionConfigObject {
  created++
  return {
    apiVersion: 'config.porch.kpt.dev/v1alpha1',
    kind: 'FunctionConfig',
    metadata: {name, namespace: 'porch-fn-system', generation: 1, creationTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, created)).toISOString(), ...meta},
    spec,
  }
}

describe('FunctionConfig source: parsing, matching and the store', function () {
  const temp = new TempDirs()
  let functionsDir: string
  let outside: string

  before(async () => {
    const dir = await temp.make()
    functionsDir = path.join(dir, 'functions')
    await mkdir(path.join(functionsDir, 'sub'), {recursive: true})
    await writeExecutable(path.join(functionsDir, 'set-namespace'), SCRIPTS.cat)
    await writeExecutable(path.join(functionsDir, 'sub', 'set-labels'), SCRIPTS.cat)
    await writeFile(path.join(functionsDir, 'not-executable'), 'x')
    outside = await writeExecutable(path.join(dir, 'outside'), SCRIPTS.cat)
    await symlink(outside, path.join(functionsDir, 'escape'))
  })
  after(() => temp.cleanup())

  const parse = (spec: unknown) => parseFunctionConfig(fc('x', spec), {functionsDir})
  const reason = async (spec: unknown): Promise<string> => {
    const err = await parse(spec).then(
      () => undefined,
      (e: Error) => e,
    )
    expect(err, JSON.stringify(spec)).to.be.instanceOf(Error)
    return err!.message
  }

  it('parses a full object: binary inside --functions, pod settings, overrides', async () => {
    const e = await parse({
      image: 'set-namespace',
      prefixes: ['', 'gcr.io/kpt-fn/'],
      binaryExecutor: {tags: ['v0.4.1'], path: 'set-namespace'},
      podExecutor: {tags: ['v0.4.2'], timeToLive: '10m', maxParallelExecutions: 3, preferredMaxQueueLength: 0, templateOverrides: {serviceAccountName: 'fn', container: {resources: {limits: {memory: '256Mi', cpu: 1}}, env: [{name: 'A', value: 'b'}]}}},
      goExecutor: {tags: ['v0.4']},
    })
    expect(e.key).to.equal('porch-fn-system/x')
    expect(e.repositories).to.deep.equal(['ghcr.io/kptdev/krm-functions-catalog', 'gcr.io/kpt-fn'])
    expect(e.binary?.resolved).to.equal(path.join(functionsDir, 'set-namespace'))
    expect(e.pod).to.deep.equal({tags: ['v0.4.2'], ttlMs: 600_000, maxParallelPods: 3, overrides: {serviceAccountName: 'fn', container: {resources: {limits: {memory: '256Mi', cpu: '1'}}, env: [{name: 'A', value: 'b'}]}}})
    // an absolute path is fine when it is inside the functions directory
    expect((await parse({image: 'set-labels', binaryExecutor: {tags: ['v1'], path: path.join(functionsDir, 'sub', 'set-labels')}})).binary?.resolved).to.equal(path.join(functionsDir, 'sub', 'set-labels'))
  })

  it('rejects invalid objects with a reason naming the object and the field', async () => {
    // kubectl's field errors, every one listed
    expect(await reason({})).to.equal('FunctionConfig porch-fn-system/x: spec: Invalid value: "object": At least one configuration must be specified; spec.image: Required value')
    expect(await reason({image: 'ghcr.io/x/set-namespace', podExecutor: {}})).to.include('spec.image: Invalid value: "ghcr.io/x/set-namespace": must be a short name')
    expect(await reason({image: 'a'})).to.include('spec: Invalid value: "object": At least one configuration must be specified')
    expect(await reason({image: 'a', binaryExecutor: {tags: [], path: 'set-namespace'}})).to.include('spec.binaryExecutor.tags: Invalid value: 0: must have at least 1 item')
    expect(await reason({image: 'a', binaryExecutor: {tags: ['v1'], path: '../outside'}})).to.include('".." is not allowed')
    expect(await reason({image: 'a', binaryExecutor: {tags: ['v1'], path: outside}})).to.include('is outside the functions directory')
    expect(await reason({image: 'a', binaryExecutor: {tags: ['v1'], path: 'escape'}})).to.include('outside the functions directory')
    // a binary that is not there (or not runnable) does not reject the object: the rest applies, the problem is said
    for (const [p, why] of [['missing', 'does not exist'], ['not-executable', 'is not executable']]) {
      const partial = await parse({image: 'a', binaryExecutor: {tags: ['v1'], path: p}, podExecutor: {tags: ['v1'], timeToLive: '5m'}})
      expect(partial.binary).to.equal(undefined)
      expect(partial.pod).to.deep.equal({tags: ['v1'], ttlMs: 300_000})
      expect(partial.problems!.join()).to.include(why).and.include('go to the pod runtime')
    }
    // an empty timeToLive is unset (the default applies), as before the schema
    expect((await parse({image: 'a', podExecutor: {timeToLive: ''}})).pod).to.deep.equal({tags: []})
    expect(await reason({image: 'a', podExecutor: {timeToLive: 'soon'}})).to.include('spec.podExecutor.timeToLive: Invalid value: "soon": must be a duration like 30m')
    expect(await reason({image: 'a', podExecutor: {maxParallelExecutions: -1}})).to.include('spec.podExecutor.maxParallelExecutions: Invalid value: -1: must be greater than or equal to 0')
    expect(await reason({image: 'a', podExecutor: {templateOverrides: {container: {resources: {limits: {memory: 'lots'}}}}}})).to.include('spec.podExecutor.templateOverrides.container.resources.limits.memory: "lots" is not a quantity')
    expect(await reason({image: 'a', podExecutor: {templateOverrides: {container: {env: [{value: 'x'}]}}}})).to.include('spec.podExecutor.templateOverrides.container.env[0].name: Required value')
  })

  it('matches requests by short name, repository (on "/" boundaries) and tag, as fnr normalises images', async () => {
    const store = new FunctionConfigStore({functionsDir})
    await store.apply(fc('set-namespace', {image: 'set-namespace', prefixes: ['', 'docker.io/kptdev'], binaryExecutor: {tags: ['v0.4.1', 'sha256:abc'], path: 'set-namespace'}}))
    const hit = (image: string): boolean => store.lookupBinary(image) !== undefined
    expect(hit('set-namespace:v0.4.1'), 'short name + default prefix').to.equal(true)
    expect(hit('ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1')).to.equal(true)
    expect(hit('GHCR.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1'), 'registry host case').to.equal(true)
    expect(hit('kptdev/set-namespace:v0.4.1'), 'Docker Hub spelling').to.equal(true)
    expect(hit('index.docker.io/kptdev/set-namespace:v0.4.1')).to.equal(true)
    expect(hit('ghcr.io/kptdev/krm-functions-catalog/sub/set-namespace:v0.4.1'), 'below a prefix').to.equal(true)
    expect(hit('ghcr.io/kptdev/krm-functions-catalog-evil/set-namespace:v0.4.1'), 'not on a "/" boundary').to.equal(false)
    expect(hit('gcr.io/kpt-fn/set-namespace:v0.4.1'), 'another repository').to.equal(false)
    expect(hit('set-namespace:v0.4.2'), 'another tag').to.equal(false)
    expect(hit('set-namespace'), 'no tag is latest').to.equal(false)
    expect(hit('set-namespace@sha256:abc'), 'a digest listed in tags').to.equal(true)
    expect(hit('set-labels:v0.4.1')).to.equal(false)
    expect(store.lookupBinary('set-namespace:v0.4.1')?.binary).to.equal(path.join(functionsDir, 'set-namespace'))
    // no prefixes: any repository
    await store.apply(fc('set-labels', {image: 'set-labels', binaryExecutor: {tags: ['v1'], path: 'sub/set-labels'}}))
    expect(hit('example.com/anything/set-labels:v1')).to.equal(true)
  })

  it('per-image pod settings: tags limit them (none: every tag), unset fields fall back, warm-up list as Porch builds it', async () => {
    const store = new FunctionConfigStore({functionsDir})
    await store.apply(fc('starlark', {image: 'starlark', prefixes: ['example.com/fn'], podExecutor: {tags: ['v1', 'v2'], timeToLive: '7m', maxParallelExecutions: 2}}))
    await store.apply(fc('cat', {image: 'cat', podExecutor: {preferredMaxQueueLength: 5}}))
    const defaults = {ttlMs: 1000, maxWaitlistLength: 2, maxParallelPods: 1, resources: {limits: {memory: '1Gi'}}}
    expect(store.settingsFor('example.com/fn/starlark:v2', defaults)).to.deep.equal({ttlMs: 420_000, maxWaitlistLength: 2, maxParallelPods: 2, resources: {limits: {memory: '1Gi'}}})
    expect(store.settingsFor('example.com/fn/starlark:v3', defaults)).to.deep.equal(defaults)
    expect(store.settingsFor('example.com/other/starlark:v1', defaults)).to.deep.equal(defaults)
    expect(store.settingsFor('x.io/y/cat:anything', defaults)).to.deep.equal({...defaults, maxWaitlistLength: 5})
    expect(store.warmUpImages()).to.deep.equal(['example.com/fn/starlark:v1'])
    await store.apply(fc('defaulted', {image: 'defaulted', prefixes: [''], podExecutor: {tags: ['v9']}}))
    expect(store.warmUpImages()).to.include('ghcr.io/kptdev/krm-functions-catalog/defaulted:v9')
  })

  it('keys by spec.image: the oldest object wins, the other is reported, and takes over when the first goes', async () => {
    const logger = memoryLogger()
    const outcomes: string[] = []
    const store = new FunctionConfigStore({functionsDir, logger, onOutcome: (_o, r) => outcomes.push(`${r.key} ${r.error ?? 'ok'}`)})
    const older = fc('first', {image: 'set-namespace', binaryExecutor: {tags: ['v1'], path: 'set-namespace'}})
    const newer = fc('second', {image: 'set-namespace', binaryExecutor: {tags: ['v2'], path: 'set-namespace'}})
    await store.apply(newer)
    await store.apply(older)
    expect(store.lookupBinary('set-namespace:v1')).to.not.equal(undefined)
    expect(store.lookupBinary('set-namespace:v2')).to.equal(undefined)
    const ignored = 'porch-fn-system/second FunctionConfig porch-fn-system/second: ignored, image "set-namespace" is already configured by FunctionConfig porch-fn-system/first (the oldest wins)'
    // the newer one was in effect until the older one was seen (as in a first list in any order)
    expect(outcomes).to.deep.equal(['porch-fn-system/second ok', ignored, 'porch-fn-system/first ok'])
    await store.apply({...newer, metadata: {...newer.metadata, generation: 2}, spec: {image: 'set-namespace', binaryExecutor: {tags: ['v3'], path: 'set-namespace'}}})
    expect(outcomes.at(-1)).to.equal(ignored)
    store.remove(older)
    expect(store.lookupBinary('set-namespace:v3')).to.not.equal(undefined)
    expect(store.lookupBinary('set-namespace:v1')).to.equal(undefined)
    expect(outcomes.at(-1), 'reported again once it is in effect').to.equal('porch-fn-system/second ok')
    expect(outcomes).to.have.length(5)
  })

  it('an invalid object is logged and skipped; an object edited into an invalid one keeps its last good version; deletion removes it', async () => {
    const logger = memoryLogger()
    const store = new FunctionConfigStore({functionsDir, logger})
    await store.apply(fc('bad', {image: 'bad', binaryExecutor: {tags: ['v1'], path: '../outside'}}))
    expect(store.list()).to.deep.equal([])
    const error = logger.lines.find((l) => l.level === 'error')!
    expect(error.msg).to.equal('invalid FunctionConfig skipped')
    expect(error.fields).to.deep.include({functionConfig: 'porch-fn-system/bad'})
    expect(String(error.fields!.error)).to.include('".." is not allowed')
    const good = fc('good', {image: 'set-namespace', binaryExecutor: {tags: ['v1'], path: 'set-namespace'}})
    await store.apply(good)
    await store.apply({...good, metadata: {...good.metadata, generation: 2}, spec: {image: 'set-namespace', binaryExecutor: {tags: ['v2'], path: '../missing'}}})
    expect(logger.lines.at(-1)!.msg).to.equal('invalid FunctionConfig skipped; its last good version stays in use')
    expect(store.lookupBinary('set-namespace:v1')).to.not.equal(undefined)
    store.remove(good)
    expect(store.lookupBinary('set-namespace:v1')).to.equal(undefined)
  })

  it('a slow validation never overwrites a later event (apply then delete at once leaves nothing)', async () => {
    const store = new FunctionConfigStore({functionsDir})
    const o = fc('racy', {image: 'set-namespace', binaryExecutor: {tags: ['v1'], path: 'set-namespace'}})
    const pending = store.apply(o)
    store.remove(o)
    await pending
    await store.settled()
    expect(store.list()).to.deep.equal([])
  })

  it('templateOverrides replace fields of the "function" container and the first init container; their hash is the overlay version', async () => {
    const store = new FunctionConfigStore({functionsDir})
    let changes = 0
    store.onChange(() => changes++)
    const o = fc('cat', {image: 'cat', prefixes: ['example.com/fn'], podExecutor: {templateOverrides: {serviceAccountName: 'fn-sa', securityContext: {runAsUser: 1000}, initContainer: {env: [{name: 'I', value: '1'}]}, container: {resources: {limits: {memory: '300Mi'}}, env: [{name: 'A', value: 'b'}], envFrom: [{configMapRef: {name: 'cm'}}]}}}})
    expect(store.overridesVersion).to.equal('')
    await store.apply(o)
    expect(changes).to.equal(1)
    const v1 = store.overridesVersion
    expect(v1).to.match(/^[0-9a-f]{12}$/)
    const applyOverrides = functionConfigPodPreparer(store)
    const pod: V1Pod = inlinePodTemplate({wrapperServerImage: 'w:v1'})
    pod.spec!.containers.unshift({name: 'sidecar', image: 's'})
    applyOverrides(pod, 'example.com/fn/cat:v1')
    const fn = pod.spec!.containers.find((c) => c.name === 'function')!
    expect(pod.spec!.containers[0]).to.deep.equal({name: 'sidecar', image: 's'})
    expect(fn.resources).to.deep.equal({requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '300Mi'}})
    expect(fn.env).to.deep.equal([{name: 'A', value: 'b'}])
    expect(fn.envFrom).to.deep.equal([{configMapRef: {name: 'cm'}}])
    expect(pod.spec!.initContainers![0]!.env).to.deep.equal([{name: 'I', value: '1'}])
    expect(pod.spec!.serviceAccountName).to.equal('fn-sa')
    // merged over the template's hardened securityContext (upstream replaces it, dropping runAsNonRoot and seccomp)
    expect(pod.spec!.securityContext).to.deep.equal({...inlinePodTemplate({wrapperServerImage: 'w:v1'}).spec!.securityContext, runAsUser: 1000})
    expect(pod.spec!.securityContext).to.deep.include({runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}})
    const untouched = inlinePodTemplate({wrapperServerImage: 'w:v1'})
    applyOverrides(untouched, 'example.com/other/cat:v1')
    expect(untouched).to.deep.equal(inlinePodTemplate({wrapperServerImage: 'w:v1'}))
    // a change of something else keeps the overlay version; a change of the overrides changes it
    const spec = o.spec as {podExecutor: object}
    await store.apply({...o, metadata: {...o.metadata, generation: 2}, spec: {...spec, podExecutor: {...spec.podExecutor, timeToLive: '5m'}}})
    expect(store.overridesVersion).to.equal(v1)
    await store.apply({...o, metadata: {...o.metadata, generation: 3}, spec: {image: 'cat', prefixes: ['example.com/fn'], podExecutor: {templateOverrides: {serviceAccountName: 'other'}}}})
    expect(store.overridesVersion).to.not.equal(v1)
    store.remove(o)
    expect(store.overridesVersion).to.equal('')
  })

  it('the exec view: FunctionConfig mappings first, then config.yaml (--function-config-source=both)', async () => {
    const configPath = path.join(await temp.make(), 'config.yaml')
    await writeFile(configPath, 'functions:\n  - function: sub/set-labels\n    images: [ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1, example.com/only-in-files:v1]\n')
    const files = await loadExecConfig({configPath, functionsDir})
    const store = new FunctionConfigStore({functionsDir})
    await store.apply(fc('set-namespace', {image: 'set-namespace', prefixes: [''], binaryExecutor: {tags: ['v0.4.1'], path: 'set-namespace'}}))
    const view = new FunctionConfigExecConfig(store, files, functionsDir, files.defaultImagePrefix)
    expect(view.lookup('set-namespace:v0.4.1')?.binary).to.equal(path.join(functionsDir, 'set-namespace'))
    expect(view.lookup('example.com/only-in-files:v1')?.binary).to.equal(path.join(functionsDir, 'sub', 'set-labels'))
    expect(view.lookup('example.com/nothing:v1')).to.equal(undefined)
    expect(view.imageCount).to.equal(3)
    const crdOnly = new FunctionConfigExecConfig(store, undefined, functionsDir, files.defaultImagePrefix)
    expect(crdOnly.lookup('example.com/only-in-files:v1')).to.equal(undefined)
  })

  it('Porch\'s base templates: missing objects are the inline template (same version), the init image is $WRAPPER_SERVER_IMAGE, the contract is checked', () => {
    const inline = {wrapperServerImage: 'w:v1'}
    const options = {namespace: 'porch-fn-system', inline, extra: {maxRequestBodySize: 1}}
    expect(templatesFromPorchObjects(undefined, undefined, options)).to.deep.equal(inlineTemplates(inline, {maxRequestBodySize: 1}))
    expect(() => templatesFromPorchObjects(undefined, undefined, {...options, inline: {}})).to.throw(/WRAPPER_SERVER_IMAGE must be set/)
    const base = inlinePodTemplate({wrapperServerImage: 'docker.io/nephio/porch-wrapper-server:latest'})
    const t = templatesFromPorchObjects({template: {metadata: {labels: {a: 'b'}}, spec: base.spec}}, {template: {spec: {ports: [{port: 9446}]}}}, options)
    expect(t.pod.spec!.initContainers![0]!.image).to.equal('w:v1')
    expect(t.pod.metadata).to.deep.equal({labels: {a: 'b'}})
    expect(t.service.spec).to.deep.equal({ports: [{port: 9446}]})
    expect(t.version).to.match(/^porch-[0-9a-f]{12}$/)
    expect(t.origin).to.equal('PodTemplate porch-fn-system/base-pod-template and ServiceTemplate porch-fn-system/base-service-template')
    expect(() => templatesFromPorchObjects(undefined, {template: {spec: {ports: [{port: 80}]}}}, options)).to.throw(/ServiceTemplate porch-fn-system\/base-service-template\): contract point 4 is broken/)
    expect(() => templatesFromPorchObjects({template: {}}, undefined, options)).to.throw(/contract point 1 is broken: template.spec is missing/)
    // a PodTemplate that says nothing about security is used as written (its weak settings said), unless
    // --harden-pod-templates: then it gets fnr's defaults (test/reliability/pod-security.test.ts has the rest)
    const bareSpec = {containers: [{name: 'function', image: 'x', command: ['/wrapper-server-tools/wrapper-server']}]}
    const asWritten = templatesFromPorchObjects({template: {spec: bareSpec}}, undefined, options)
    expect(asWritten.pod.spec).to.deep.equal(bareSpec)
    expect(asWritten.warnings).to.include('not set: spec.securityContext.runAsNonRoot (fnr would set true)')
    const bare = templatesFromPorchObjects({template: {spec: bareSpec}}, undefined, {...options, harden: true})
    expect(bare.pod.spec!.automountServiceAccountToken).to.equal(false)
    expect(bare.pod.spec!.securityContext).to.deep.include({runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}})
    expect(bare.pod.spec!.containers[0]!.securityContext).to.deep.equal({allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}})
  })

  it('--function-config-source accepts files, crd and both', () => {
    expect(parseFunctionConfigSource('CRD')).to.equal('crd')
    expect(parseFunctionConfigSource('auto')).to.equal('auto')
    expect(() => parseFunctionConfigSource('configmap')).to.throw(/must be auto, files, crd or both/)
  })
})
