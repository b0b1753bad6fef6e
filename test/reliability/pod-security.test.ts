/**
 * Security defaults of function pods (issue 9): non-root, allowPrivilegeEscalation false,
 * capabilities drop ALL, seccomp RuntimeDefault, no service account token, in the inline template
 * and in pods made from a template ConfigMap that omits them (src/lib/pods/pod-security.ts).
 * Explicit weaker settings in a ConfigMap are kept as written and reported.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1ConfigMap, V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'
import {parseAllDocuments} from 'yaml'

import {hardenPodTemplate} from '../../src/lib/pods/pod-security.js'
import {buildPod, inlineTemplates, templatesFromConfigMap, type Templates} from '../../src/lib/pods/template.js'
import {RL, RUNNER_NS, image, startPodBed, startRuntime, storedPods, type PodBed} from '../support/pods/index.js'
import {REPO_ROOT} from '../support/serve.js'

const BARE_TEMPLATE = `apiVersion: v1
kind: Pod
spec:
  initContainers:
  - name: copy
    image: fnr.test/wrapper-server:v1
    command: [cp, -a, /x, /y]
  containers:
  - name: function
    image: placeholder
    command: [/wrapper-server-tools/wrapper-server]
  - name: sidecar
    image: busybox
`
const SERVICE_TEMPLATE = 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n'

const cm = (template: string, name = 'tmpl'): V1ConfigMap => ({metadata: {name, namespace: RUNNER_NS}, data: {template, serviceTemplate: SERVICE_TEMPLATE}})

function build(templates: Templates): V1Pod {
  return buildPod({templates, image: 'example.com/fn/cat:v1', command: ['/usr/local/bin/function'], name: 'cat-v1-1-a', namespace: 'fn', labels: {}, annotations: {}, maxRequestBodySize: 1024})
}

/** Asserts the five defaults the issue lists, on every container. */
function expectSecureDefaults(pod: V1Pod): void {
  const spec = pod.spec!
  expect(spec.automountServiceAccountToken, 'automountServiceAccountToken').to.equal(false)
  expect(spec.securityContext?.runAsNonRoot, 'runAsNonRoot').to.equal(true)
  expect(spec.securityContext?.runAsUser, 'runAsUser').to.be.a('number').and.not.equal(0)
  expect(spec.securityContext?.seccompProfile, 'seccomp').to.deep.equal({type: 'RuntimeDefault'})
  const all = [...(spec.initContainers ?? []), ...spec.containers]
  expect(all.length).to.be.greaterThan(0)
  for (const c of all) {
    expect(c.securityContext?.allowPrivilegeEscalation, `${c.name}: allowPrivilegeEscalation`).to.equal(false)
    expect(c.securityContext?.capabilities?.drop, `${c.name}: capabilities.drop`).to.deep.equal(['ALL'])
    expect(c.securityContext?.privileged ?? false, `${c.name}: privileged`).to.equal(false)
  }
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
    const templates = templatesFromConfigMap(cm(BARE_TEMPLATE))
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
    const templates = templatesFromConfigMap(cm(template))
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
    const templates = templatesFromConfigMap(cm(template))
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
    const templates = templatesFromConfigMap(cm(template))
    const sc = build(templates).spec!.containers[0]!.securityContext!
    expect(sc).to.deep.equal({privileged: true, capabilities: {drop: ['ALL']}})
    expect(templates.warnings).to.deep.equal(['spec.containers[0] (function).securityContext.privileged: true'])
  })

  describe('on the Kubernetes test bed', () => {
    let pb: PodBed
    before(async () => {
      pb = await startPodBed()
    })
    after(() => pb?.stop())

    it('the pod the runtime creates from a bare ConfigMap template has every default', async () => {
      // the sidecar's image must be one the local kubelet knows (it is reported running without a process)
      const template = BARE_TEMPLATE.replace('image: busybox', 'image: fnr.test/wrapper-server:v1')
      pb.bed.api.registry.create('configmaps', RUNNER_NS, cm(template, 'bare-template'))
      const ns = pb.namespace()
      const h = await startRuntime(pb, {namespace: ns, templateConfigMap: 'bare-template'})
      try {
        const res = await h.evaluator.evaluate({image: image('cat'), resourceList: RL, deadline: Date.now() + 60_000})
        expect(res.resourceList.toString()).to.equal(RL.toString())
        const [pod] = storedPods(pb, ns)
        expectSecureDefaults(pod!)
      } finally {
        await h.close()
      }
    })
  })
})
