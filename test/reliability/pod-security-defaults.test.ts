/**
 * Security defaults of function pods (docs/runtimes.md), as fnr builds them in process: the inline
 * template, a template ConfigMap or Porch's PodTemplate that omits them (with --harden-pod-templates),
 * explicit weaker settings kept and reported, and a FunctionConfig's templateOverrides.securityContext
 * merged over the hardened securityContext. The pods fnr makes on the real control plane are checked
 * in ./pod-security.test.ts.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1ConfigMap, V1Pod, V1PodTemplate} from '@kubernetes/client-node'
import {expect} from 'chai'
import {parse, parseAllDocuments} from 'yaml'

import {FunctionConfigStore, type FunctionConfigObject} from '../../src/lib/config/function-config-crd.js'
import {functionConfigPodPreparer} from '../../src/lib/pods/runtime/function-configs.js'
import {hardenPodTemplate, overridePodSecurityContext} from '../../src/lib/pods/model/pod-security.js'
import {buildPod, inlineTemplates, templatesFromConfigMap, type Templates} from '../../src/lib/pods/model/template.js'
import {templatesFromPorchObjects} from '../../src/lib/pods/cluster/template-porch.js'
import {memoryLogger} from '../support/memory-logger.js'
import {BARE_TEMPLATE, cm, expectSecureDefaults} from '../support/reliability/pod-security.js'
import {REPO_ROOT} from '../support/serve.js'

/** --harden-pod-templates */
const HARDEN = {harden: true}

function build(templates: Templates): V1Pod {
  return buildPod({templates, image: 'example.com/fn/cat:v1', command: ['/usr/local/bin/function'], name: 'cat-v1-1-a', namespace: 'fn', labels: {}, annotations: {}, maxRequestBodySize: 1024})
}

describe('reliability: function pod security defaults', function () {
  this.timeout(120_000)

  it('the inline template has every default, and hardening finds nothing to add', () => {
    const templates = inlineTemplates({wrapperServerImage: 'w:1'})
    expectSecureDefaults(build(templates))
    expect(hardenPodTemplate(templates.pod)).to.deep.include({added: [], weaker: []})
  })

  it('the shipped manifests/function-pod-template.yaml has every default too', async () => {
    const docs = parseAllDocuments(await readFile(path.join(REPO_ROOT, 'manifests', 'function-pod-template.yaml'), 'utf8')).map((d) => d.toJS() as V1ConfigMap)
    const templates = templatesFromConfigMap(docs.find((d) => d.metadata?.name === 'function-pod-template')!)
    expect(templates.warnings).to.equal(undefined)
    expectSecureDefaults(build(templates))
  })

  it('a ConfigMap template that omits them gets them all, on the function, init and sidecar containers', () => {
    const templates = templatesFromConfigMap(cm(BARE_TEMPLATE), {}, HARDEN)
    const pod = build(templates)
    expectSecureDefaults(pod)
    expect(pod.spec!.securityContext).to.deep.include({runAsUser: 65532, runAsGroup: 65532})
    expect(templates.warnings).to.equal(undefined)
    // what was added is said
    const {added} = hardenPodTemplate(parseAllDocuments(BARE_TEMPLATE)[0]!.toJS() as V1Pod)
    expect(added).to.include.members(['spec.automountServiceAccountToken: false', 'spec.securityContext.runAsNonRoot: true', 'spec.securityContext.seccompProfile: RuntimeDefault', 'spec.containers[1] (sidecar).securityContext.capabilities.drop: [ALL]'])
  })

  it('fills in only what is missing: a template\'s own uid, added capabilities and other fields stay', () => {
    const template = `apiVersion: v1
kind: Pod
spec:
  securityContext: {runAsUser: 1000, fsGroup: 2000}
  containers:
  - name: function
    command: [/wrapper-server-tools/wrapper-server]
    securityContext: {readOnlyRootFilesystem: true, capabilities: {add: [NET_BIND_SERVICE]}}
`
    const templates = templatesFromConfigMap(cm(template), {}, HARDEN)
    const pod = build(templates)
    expect(pod.spec!.securityContext).to.deep.equal({runAsUser: 1000, fsGroup: 2000, runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}})
    expect(pod.spec!.containers[0]!.securityContext).to.deep.equal({readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {add: ['NET_BIND_SERVICE'], drop: ['ALL']}})
    expect(templates.warnings).to.deep.equal(['spec.containers[0] (function).securityContext.capabilities.add: ["NET_BIND_SERVICE"]'])
  })

  it('explicit weaker settings are the operator\'s choice: kept as written and reported as warnings', () => {
    const template = `apiVersion: v1
kind: Pod
spec:
  automountServiceAccountToken: true
  securityContext: {runAsUser: 0, seccompProfile: {type: Unconfined}}
  containers:
  - name: function
    command: [/wrapper-server-tools/wrapper-server]
    securityContext: {allowPrivilegeEscalation: true, capabilities: {drop: [NET_RAW]}}
`
    const templates = templatesFromConfigMap(cm(template), {}, HARDEN)
    const spec = build(templates).spec!
    expect(spec.automountServiceAccountToken).to.equal(true)
    expect(spec.securityContext).to.deep.equal({runAsUser: 0, seccompProfile: {type: 'Unconfined'}})
    expect(spec.containers[0]!.securityContext).to.deep.equal({allowPrivilegeEscalation: true, capabilities: {drop: ['NET_RAW']}})
    expect(templates.warnings).to.have.members([
      'spec.automountServiceAccountToken: true',
      'runAsUser: 0 (runAsNonRoot left unset)',
      'spec.securityContext.seccompProfile: Unconfined',
      'spec.containers[0] (function).securityContext.allowPrivilegeEscalation: true',
      'spec.containers[0] (function).securityContext.capabilities.drop: ["NET_RAW"] (not ALL)',
    ])
  })

  it('a privileged container keeps privileged (reported) and gets no allowPrivilegeEscalation: false, which Kubernetes would reject', () => {
    const template = 'apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: function\n    command: [/wrapper-server-tools/wrapper-server]\n    securityContext: {privileged: true}\n'
    const templates = templatesFromConfigMap(cm(template), {}, HARDEN)
    const sc = build(templates).spec!.containers[0]!.securityContext!
    expect(sc).to.deep.equal({privileged: true, capabilities: {drop: ['ALL']}})
    expect(templates.warnings).to.deep.equal(['spec.containers[0] (function).securityContext.privileged: true'])
  })

  describe("Porch's PodTemplate base-pod-template (--function-config-source=crd|both)", () => {
    const porch = (template: string): Templates =>
      templatesFromPorchObjects({metadata: {name: 'base-pod-template'}, template: {spec: (parse(template) as V1Pod).spec}} as V1PodTemplate, undefined, {namespace: 'porch-fn-system', inline: {wrapperServerImage: 'w:1'}, harden: true})

    it('a PodTemplate that omits the defaults gets them all, on the function, init and sidecar containers', () => {
      const templates = porch(BARE_TEMPLATE)
      const pod = build(templates)
      expectSecureDefaults(pod)
      expect(pod.spec!.securityContext).to.deep.include({runAsUser: 65532, runAsGroup: 65532})
      expect(templates.warnings).to.equal(undefined)
      // the init container's image is still $WRAPPER_SERVER_IMAGE
      expect(pod.spec!.initContainers![0]!.image).to.equal('w:1')
    })

    it('explicit weaker settings in a PodTemplate are kept as written and reported, as for a ConfigMap', () => {
      const template = `apiVersion: v1
kind: Pod
spec:
  automountServiceAccountToken: true
  securityContext: {runAsUser: 0}
  containers:
  - name: function
    command: [/wrapper-server-tools/wrapper-server]
    securityContext: {allowPrivilegeEscalation: true}
`
      const templates = porch(template)
      const spec = build(templates).spec!
      expect(spec.automountServiceAccountToken).to.equal(true)
      expect(spec.securityContext).to.deep.equal({runAsUser: 0, seccompProfile: {type: 'RuntimeDefault'}})
      expect(spec.containers[0]!.securityContext).to.deep.equal({allowPrivilegeEscalation: true, capabilities: {drop: ['ALL']}})
      expect(templates.warnings).to.have.members(['spec.automountServiceAccountToken: true', 'runAsUser: 0 (runAsNonRoot left unset)', 'spec.containers[0] (function).securityContext.allowPrivilegeEscalation: true'])
    })
  })

  describe('FunctionConfig templateOverrides.securityContext', () => {
    const hardened = (): V1Pod => build(inlineTemplates({wrapperServerImage: 'w:1'}))

    it('is merged over the hardened securityContext: {runAsUser: 1000} keeps runAsNonRoot and seccomp (it used to drop them)', () => {
      const pod = hardened()
      const {securityContext, weaker} = overridePodSecurityContext(pod.spec!.securityContext, {runAsUser: 1000, fsGroup: 2000})
      expect(securityContext).to.deep.include({runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000, seccompProfile: {type: 'RuntimeDefault'}})
      expect(weaker).to.deep.equal([])
    })

    it('explicitly weaker values are kept and reported; runAsUser: 0 drops the runAsNonRoot the kubelet would refuse it with', () => {
      const base = hardened().spec!.securityContext
      const root = overridePodSecurityContext(base, {runAsUser: 0})
      expect(root.securityContext.runAsUser).to.equal(0)
      expect(root.securityContext).to.not.have.property('runAsNonRoot')
      expect(root.securityContext.seccompProfile).to.deep.equal({type: 'RuntimeDefault'})
      expect(root.weaker).to.deep.equal(['templateOverrides.securityContext.runAsUser: 0 (runAsNonRoot: true dropped)'])
      const open = overridePodSecurityContext(base, {runAsNonRoot: false, seccompProfile: {type: 'Unconfined'}})
      expect(open.securityContext).to.deep.include({runAsNonRoot: false, seccompProfile: {type: 'Unconfined'}})
      expect(open.weaker).to.deep.equal(['templateOverrides.securityContext.runAsNonRoot: false', 'templateOverrides.securityContext.seccompProfile: Unconfined'])
      const removed = overridePodSecurityContext(base, {seccompProfile: null})
      expect(removed.securityContext).to.not.have.property('seccompProfile')
      expect(removed.weaker).to.deep.equal(['templateOverrides.securityContext.seccompProfile: null (the default {"type":"RuntimeDefault"} removed)'])
    })

    it('the FunctionConfig store applies it that way and warns once per image about weaker values', async () => {
      const logger = memoryLogger()
      const store = new FunctionConfigStore({functionsDir: '/nonexistent', logger})
      const applyOverrides = functionConfigPodPreparer(store, logger)
      const fc = (name: string, securityContext: Record<string, unknown>): FunctionConfigObject => ({
        apiVersion: 'config.porch.kpt.dev/v1alpha1',
        kind: 'FunctionConfig',
        metadata: {name, namespace: 'porch-fn-system', generation: 1, creationTimestamp: '2024-01-01T00:00:00Z'},
        spec: {image: name, prefixes: ['example.com/fn'], podExecutor: {templateOverrides: {securityContext}}},
      })
      await store.apply(fc('cat', {runAsUser: 1000}))
      await store.apply(fc('root', {runAsUser: 0}))
      const cat = hardened()
      applyOverrides(cat, 'example.com/fn/cat:v1')
      expectSecureDefaults(cat)
      expect(cat.spec!.securityContext!.runAsUser).to.equal(1000)
      for (let i = 0; i < 2; i++) {
        const root = hardened()
        applyOverrides(root, 'example.com/fn/root:v1')
        expect(root.spec!.securityContext).to.deep.include({runAsUser: 0, seccompProfile: {type: 'RuntimeDefault'}})
        expect(root.spec!.securityContext).to.not.have.property('runAsNonRoot')
      }
      const warnings = logger.lines.filter((l) => l.level === 'warn')
      expect(warnings.map((l) => [l.msg, l.fields])).to.deep.equal([
        ["a FunctionConfig templateOverrides.securityContext weakens fnr's security defaults; keeping its explicit settings", {image: 'example.com/fn/root:v1', settings: ['templateOverrides.securityContext.runAsUser: 0 (runAsNonRoot: true dropped)']}],
      ])
    })
  })
})
