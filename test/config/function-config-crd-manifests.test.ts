/**
 * fnr's manifests/function-config component as files: what kustomize builds with it (and with crds/), and how its
 * CRDs compare with Porch's. kube-apiserver's verdict on them (the example object stored and parsed by fnr, the CEL
 * rule refusing an object without an executor) is test/cluster/function-config-crd.test.ts's.
 */
import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {promisify} from 'node:util'

import {parse, parseAllDocuments} from 'yaml'

import {FUNCTION_CONFIG_GROUP, FUNCTION_CONFIG_KIND, FUNCTION_CONFIG_PLURAL, FUNCTION_CONFIG_VERSION} from '../../src/lib/config/function-config-crd.js'
import {KUBECTL_PATH} from '../support/k8s/kubectl.js'
import type {KubeObject} from '../support/k8s/status.js'
import {REPO_ROOT} from '../support/serve.js'
import {requireShared} from '../support/shared.js'
import {TempDirs} from '../support/tmp.js'

const MANIFESTS = path.join(REPO_ROOT, 'manifests')
const COMPONENT = path.join(MANIFESTS, 'function-config')
const CRDS = path.join(COMPONENT, 'crds')
/** Porch's own CRDs (HEAD), read from the compat folder. */
const PORCH_HEAD = path.join(REPO_ROOT, '..', 'shared', 'compat', 'porch', 'head')

/** Every property path of an OpenAPI schema ("spec.podExecutor.tags[]"), with its type. */
function schemaPaths(schema: KubeObject, prefix = '', out = new Map<string, string>()): Map<string, string> {
  if (!schema || typeof schema !== 'object') return out
  if (prefix) out.set(prefix, String(schema.type ?? (schema['x-kubernetes-int-or-string'] ? 'int-or-string' : 'any')))
  for (const [k, v] of Object.entries((schema.properties ?? {}) as Record<string, KubeObject>)) schemaPaths(v, prefix ? `${prefix}.${k}` : k, out)
  if (schema.items) schemaPaths(schema.items as KubeObject, `${prefix}[]`, out)
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') schemaPaths(schema.additionalProperties as KubeObject, `${prefix}{}`, out)
  return out
}

async function kustomize(dir: string): Promise<KubeObject[]> {
  const {stdout} = await promisify(execFile)(KUBECTL_PATH, ['kustomize', dir], {maxBuffer: 10 * 1024 * 1024})
  return parseAllDocuments(stdout).map((d) => d.toJS() as KubeObject)
}

describe('manifests/function-config: the FunctionConfig CRD component', function () {
  before(() => requireShared('compat/porch/head'))
  this.timeout(120_000)
  const temp = new TempDirs()
  let withComponent: KubeObject[]
  let withCrds: KubeObject[]
  let crd: KubeObject

  before(async () => {
    const overlay = path.join(await temp.make(), 'overlay')
    await mkdir(overlay)
    const rel = (p: string): string => path.relative(overlay, p)
    await writeFile(path.join(overlay, 'kustomization.yaml'), `resources: [${rel(MANIFESTS)}]\ncomponents: [${rel(COMPONENT)}]\n`)
    withComponent = await kustomize(overlay)
    await writeFile(path.join(overlay, 'kustomization.yaml'), `resources: [${rel(MANIFESTS)}]\ncomponents: [${rel(COMPONENT)}, ${rel(CRDS)}]\n`)
    withCrds = await kustomize(overlay)
    crd = parse(await readFile(path.join(CRDS, 'functionconfigs.yaml'), 'utf8')) as KubeObject
  })
  after(async () => {
    await temp.cleanup()
  })

  it('is optional: the default build has no CRD and no --function-config-source', async () => {
    const plain = await kustomize(MANIFESTS)
    expect(plain.filter((o) => o.kind === 'CustomResourceDefinition')).to.deep.equal([])
    const d = plain.find((o) => o.kind === 'Deployment')!
    expect((d.spec.template.spec.containers[0].args as string[]).some((a) => a.startsWith('--function-config-source'))).to.equal(false)
  })

  it('never replaces Porch\'s CRDs: the component adds none (they are in crds/, for clusters without Porch), and fnr\'s CRDs only have fields Porch\'s have', async () => {
    expect(withComponent.filter((o) => o.kind === 'CustomResourceDefinition')).to.deep.equal([])
    for (const [file, porchFile] of [['functionconfigs.yaml', 'config.porch.kpt.dev_functionconfigs.yaml'], ['servicetemplates.yaml', 'config.porch.kpt.dev_servicetemplates.yaml']]) {
      const ours = parse(await readFile(path.join(CRDS, file!), 'utf8')) as KubeObject
      const porch = parse(await readFile(path.join(PORCH_HEAD, porchFile!), 'utf8')) as KubeObject
      expect(ours.metadata.name, file).to.equal(porch.metadata.name)
      expect(ours.spec.names, file).to.deep.include({kind: porch.spec.names.kind, plural: porch.spec.names.plural})
      const ourPaths = schemaPaths(ours.spec.versions[0].schema.openAPIV3Schema)
      const porchPaths = schemaPaths(porch.spec.versions.find((v: KubeObject) => v.name === ours.spec.versions[0].name).schema.openAPIV3Schema)
      for (const [p, type] of ourPaths) {
        expect(porchPaths.has(p), `${file}: ${p} is not in Porch's CRD`).to.equal(true)
        if (type !== 'any' && porchPaths.get(p) !== 'any') expect(porchPaths.get(p), `${file}: ${p}'s type`).to.equal(type)
      }
      // Porch's is the fuller one: applying ours over it would have dropped fields
      expect(porchPaths.size, file).to.be.greaterThan(ourPaths.size)
    }
  })

  it('adds namespaced read RBAC and --function-config-source=both; with crds/, the FunctionConfig and ServiceTemplate CRDs (Porch\'s group, version and names)', async () => {
    const c = withCrds.find((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === `${FUNCTION_CONFIG_PLURAL}.${FUNCTION_CONFIG_GROUP}`)!
    expect(c.metadata.name).to.equal(`${FUNCTION_CONFIG_PLURAL}.${FUNCTION_CONFIG_GROUP}`)
    expect(c.spec.group).to.equal(FUNCTION_CONFIG_GROUP)
    expect(c.spec.scope).to.equal('Namespaced')
    expect(c.spec.names).to.deep.equal({kind: FUNCTION_CONFIG_KIND, listKind: 'FunctionConfigList', plural: FUNCTION_CONFIG_PLURAL, singular: 'functionconfig'})
    expect(c.spec.versions.map((v: KubeObject) => [v.name, v.served, v.storage])).to.deep.equal([[FUNCTION_CONFIG_VERSION, true, true]])
    const role = withComponent.find((o) => o.kind === 'Role' && o.metadata.name === 'porch-fn-runner-functionconfigs')!
    expect(role.metadata.namespace).to.equal('porch-fn-system')
    expect(role.rules).to.deep.equal([
      {apiGroups: [FUNCTION_CONFIG_GROUP], resources: ['functionconfigs'], verbs: ['get', 'list', 'watch']},
      {apiGroups: [FUNCTION_CONFIG_GROUP], resources: ['functionconfigs/status'], verbs: ['get', 'patch']},
      {apiGroups: [FUNCTION_CONFIG_GROUP], resources: ['servicetemplates'], verbs: ['get', 'list', 'watch']},
      {apiGroups: [''], resources: ['podtemplates'], verbs: ['get', 'list', 'watch']},
    ])
    const st = withCrds.find((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === `servicetemplates.${FUNCTION_CONFIG_GROUP}`)!
    expect(st.spec.names.kind).to.equal('ServiceTemplate')
    expect(Object.keys(st.spec.versions[0].schema.openAPIV3Schema.properties.template.properties).sort()).to.deep.equal(['metadata', 'spec'])
    const binding = withComponent.find((o) => o.kind === 'RoleBinding' && o.metadata.name === 'porch-fn-runner-functionconfigs')!
    expect(binding.subjects).to.deep.equal([{kind: 'ServiceAccount', name: 'porch-fn-runner', namespace: 'porch-system'}])
    expect(withComponent.filter((o) => String(o.kind).startsWith('Cluster'))).to.deep.equal([])
    const args = withComponent.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0].args as string[]
    expect(args).to.include('--function-config-source=both')
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, {flags: Record<string, {options?: string[]}>}>}
    expect(manifest.commands.serve!.flags['function-config-source']!.options).to.deep.equal(['auto', 'files', 'crd', 'both'])
  })

  it('has the field names of Porch\'s FunctionConfig API', () => {
    const schema = crd.spec.versions[0].schema.openAPIV3Schema
    const spec = schema.properties.spec
    expect(Object.keys(spec.properties).sort()).to.deep.equal(['binaryExecutor', 'goExecutor', 'image', 'podExecutor', 'prefixes'])
    expect(Object.keys(spec.properties.podExecutor.properties).sort()).to.deep.equal(['maxParallelExecutions', 'preferredMaxQueueLength', 'tags', 'templateOverrides', 'timeToLive'])
    expect(Object.keys(spec.properties.podExecutor.properties.templateOverrides.properties).sort()).to.deep.equal(['container', 'initContainer', 'securityContext', 'serviceAccountName'])
    expect(Object.keys(spec.properties.binaryExecutor.properties).sort()).to.deep.equal(['path', 'tags'])
    expect(Object.keys(schema.properties.status.properties).sort()).to.deep.equal(['apiServerObservedGeneration', 'controllerObservedGeneration', 'error', 'functionRunnerObservedGeneration'])
  })
})
