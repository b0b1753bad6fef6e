import {expect} from 'chai'

import type {V1ConfigMap} from '@kubernetes/client-node'

import {buildPod, buildService, inlineTemplates, templatesFromConfigMap} from '../../src/lib/pods/model/template.js'

const POD_TEMPLATE = `apiVersion: v1
kind: Pod
metadata:
  labels: {team: a}
  annotations: {note: kept}
spec:
  containers:
  - name: sidecar
    image: busybox
  - name: function
    image: placeholder
    command: [/wrapper-server-tools/wrapper-server]
    args: [--verbosity, "3"]
`
const SERVICE_TEMPLATE = `apiVersion: v1
kind: Service
spec:
  selector: {team: a}
  ports: [{port: 9446, targetPort: 9446}]
`

function cm(data: Record<string, string>): V1ConfigMap {
  return {metadata: {name: 'tmpl', namespace: 'porch-system', resourceVersion: '7'}, data}
}

function contractFailure(data: Record<string, string>): string {
  try {
    templatesFromConfigMap(cm(data))
  } catch (err) {
    expect((err as {kind?: string}).kind).to.equal('Config')
    return (err as Error).message
  }
  throw new Error('expected a contract error')
}

describe('function pod templates', () => {
  it('the inline template has the security defaults and runs the wrapper from the init container\'s copy', () => {
    const {pod, service, version} = inlineTemplates({wrapperServerImage: 'fnr/wrapper:v1'})
    const spec = pod.spec!
    expect(spec.automountServiceAccountToken).to.equal(false)
    expect(spec.securityContext).to.include({runAsNonRoot: true})
    expect(spec.securityContext?.seccompProfile).to.deep.equal({type: 'RuntimeDefault'})
    for (const c of [...spec.initContainers!, ...spec.containers]) {
      expect(c.securityContext, c.name).to.deep.include({allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: ['ALL']}})
    }
    expect(spec.initContainers![0]!.image).to.equal('fnr/wrapper:v1')
    expect(spec.initContainers![0]!.command).to.deep.equal(['cp', '-a', '/home/nonroot/wrapper-server/.', '/wrapper-server-tools'])
    const fn = spec.containers.find((c) => c.name === 'function')!
    expect(fn.command).to.deep.equal(['/wrapper-server-tools/wrapper-server'])
    expect(fn.resources).to.deep.equal({requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '1Gi'}})
    expect(fn.volumeMounts!.map((m) => m.mountPath)).to.include('/tmp')
    expect(service.spec?.ports?.[0]).to.include({port: 9446, targetPort: 9446})
    expect(version).to.match(/^inline-[0-9a-f]{12}$/)
  })

  it('the template version changes with the wrapper image, resources and max message size, not with key order', () => {
    const a = inlineTemplates({wrapperServerImage: 'w:1'}, {maxRequestBodySize: 1}).version
    expect(inlineTemplates({wrapperServerImage: 'w:1'}, {maxRequestBodySize: 1}).version).to.equal(a)
    expect(inlineTemplates({wrapperServerImage: 'w:2'}, {maxRequestBodySize: 1}).version).not.to.equal(a)
    expect(inlineTemplates({wrapperServerImage: 'w:1'}, {maxRequestBodySize: 2}).version).not.to.equal(a)
    expect(inlineTemplates({wrapperServerImage: 'w:1', resources: {limits: {memory: '2Gi'}}}, {maxRequestBodySize: 1}).version).not.to.equal(a)
    const x = templatesFromConfigMap(cm({template: POD_TEMPLATE, serviceTemplate: SERVICE_TEMPLATE})).version
    const reordered = cm({template: POD_TEMPLATE.replace('labels: {team: a}\n  annotations: {note: kept}', 'annotations: {note: kept}\n  labels: {team: a}'), serviceTemplate: SERVICE_TEMPLATE})
    expect(templatesFromConfigMap(reordered).version).to.equal(x)
  })

  it('builds the pod: image and args on the "function" container only, resources there too (not containers[0])', () => {
    const templates = templatesFromConfigMap(cm({template: POD_TEMPLATE, serviceTemplate: SERVICE_TEMPLATE}))
    const pod = buildPod({
      templates,
      image: 'ghcr.io/x/set-labels:v1',
      command: ['/usr/local/bin/function', '--flag'],
      name: 'set-labels-v1-12345678-abcde',
      namespace: 'fn',
      labels: {'fn.kpt.dev/image': 'set-labels-v1-12345678-abcde'},
      annotations: {'fn.kpt.dev/template-version': templates.version},
      resources: {limits: {memory: '300Mi'}},
      maxRequestBodySize: 1234,
    })
    expect(pod.metadata).to.deep.include({name: 'set-labels-v1-12345678-abcde', namespace: 'fn'})
    expect(pod.metadata?.labels).to.deep.equal({team: 'a', 'fn.kpt.dev/image': 'set-labels-v1-12345678-abcde'})
    expect(pod.metadata?.annotations).to.include({note: 'kept'})
    const [sidecar, fn] = pod.spec!.containers
    // (plus the security defaults every container gets, test/reliability/pod-security.test.ts)
    expect(sidecar).to.deep.include({name: 'sidecar', image: 'busybox'})
    expect(fn!.image).to.equal('ghcr.io/x/set-labels:v1')
    expect(fn!.command).to.deep.equal(['/wrapper-server-tools/wrapper-server'])
    expect(fn!.args).to.deep.equal(['--verbosity', '3', '--port', '9446', '--max-request-body-size', '1234', '--', '/usr/local/bin/function', '--flag'])
    expect(fn!.resources).to.deep.equal({limits: {memory: '300Mi'}})
    // the template is not modified
    expect(templates.pod.spec!.containers[1]!.args).to.deep.equal(['--verbosity', '3'])
  })

  it('builds the Service: named like the pod, selecting only it, keeping the template\'s selector', () => {
    const templates = templatesFromConfigMap(cm({template: POD_TEMPLATE, serviceTemplate: SERVICE_TEMPLATE}))
    const svc = buildService(templates, 'p-1', 'fn', {'fnr.dev/pod': 'p-1'}, {'fn.kpt.dev/image': 'p-1'})
    expect(svc.metadata).to.deep.include({name: 'p-1', namespace: 'fn'})
    expect(svc.metadata?.labels).to.include({'fnr.dev/pod': 'p-1', 'app.kubernetes.io/name': 'p-1'})
    expect(svc.spec?.selector).to.deep.equal({team: 'a', 'fn.kpt.dev/image': 'p-1'})
  })

  // Upstream's podmanager tests for ConfigMap templates, each naming the broken point.
  it('rejects templates that break the contract, naming the point', () => {
    expect(contractFailure({serviceTemplate: SERVICE_TEMPLATE})).to.match(/contract point 1 .*key template/)
    expect(contractFailure({template: POD_TEMPLATE})).to.match(/contract point 4 .*serviceTemplate/)
    expect(contractFailure({template: 'apiVersion: v1\nkind: Secret\n', serviceTemplate: SERVICE_TEMPLATE})).to.match(/contract point 1 .*not a Secret/)
    expect(contractFailure({template: POD_TEMPLATE.replace('name: function', 'name: fn'), serviceTemplate: SERVICE_TEMPLATE})).to.match(/contract point 1 .*"function"/)
    expect(contractFailure({template: POD_TEMPLATE.replace('[/wrapper-server-tools/wrapper-server]', '[/bin/sh]'), serviceTemplate: SERVICE_TEMPLATE})).to.match(/contract point 2 .*wrapper server/)
    expect(contractFailure({template: POD_TEMPLATE.replace('[--verbosity, "3"]', '[--, /bin/x]'), serviceTemplate: SERVICE_TEMPLATE})).to.match(/contract point 3 .*"--"/)
    expect(contractFailure({template: POD_TEMPLATE, serviceTemplate: 'apiVersion: v1\nkind: Secret\n'})).to.match(/contract point 4 .*not a Secret/)
    expect(contractFailure({template: POD_TEMPLATE, serviceTemplate: SERVICE_TEMPLATE.replace(/9446/g, '8080')})).to.match(/contract point 4 .*9446/)
    expect(contractFailure({template: 'a: [', serviceTemplate: SERVICE_TEMPLATE})).to.match(/not valid YAML or JSON/)
  })

  it('accepts JSON templates', () => {
    const pod = JSON.stringify({spec: {containers: [{name: 'function', command: ['/wrapper-server-tools/wrapper-server']}]}})
    const svc = JSON.stringify({spec: {ports: [{port: 9446}]}})
    expect(templatesFromConfigMap(cm({template: pod, serviceTemplate: svc})).version).to.match(/^cm-/)
  })
})
