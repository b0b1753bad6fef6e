/**
 * The contract points of a user's function pod and Service templates, checked on the objects
 * themselves (src/lib/pods/model/template.ts validatePodTemplate, validateServiceTemplate), the
 * pinned image a pod runs with --pin-image-digests, and a user's template taken as written or
 * hardened. Templates read from ConfigMaps are in ./template.test.ts.
 */
import type {V1Pod, V1Service} from '@kubernetes/client-node'
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {pinnedImage, userPodTemplate, validatePodTemplate, validateServiceTemplate} from '../../src/lib/pods/model/template.js'

const DIGEST = `sha256:${'c'.repeat(64)}`
const ORIGIN = 'ConfigMap fn/tmpl'

function pod(fn: Record<string, unknown> = {}, extra: Record<string, unknown>[] = []): V1Pod {
  // a template is user YAML: fields may have the wrong type
  return {kind: 'Pod', spec: {containers: [{name: 'function', image: 'x', command: ['/wrapper-server-tools/wrapper-server'], ...fn}, ...extra]}} as unknown as V1Pod
}

function broken(f: () => unknown): string {
  try {
    f()
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    return (err as FnrError).message
  }
  return expect.fail('expected a broken contract point')
}

describe('function pod templates: contract points and pinned images', () => {
  it('a pod template: a Pod whose "function" container starts the wrapper server and has list args without "--"', () => {
    expect(validatePodTemplate(pod({args: ['--verbose']}, [{name: 'sidecar', image: 'busybox'}]), ORIGIN).name).to.equal('function')
    expect(validatePodTemplate(pod({command: ['wrapper-server']}), ORIGIN).name).to.equal('function')
    expect(broken(() => validatePodTemplate({kind: 'Deployment'} as V1Pod, ORIGIN))).to.equal('function pod template (ConfigMap fn/tmpl): contract point 1 is broken: key template must hold a Pod, not a Deployment')
    expect(broken(() => validatePodTemplate({spec: {containers: []}}, ORIGIN))).to.contain('contract point 1 is broken: the Pod has no containers; it needs one named "function"')
    expect(broken(() => validatePodTemplate({spec: {containers: [{name: 'fn'}, {name: 'side'}]}}, ORIGIN))).to.contain('contract point 1 is broken: no container is named "function" (containers: "fn", "side")')
    expect(broken(() => validatePodTemplate(pod({command: ['/bin/sh', '-c']}), ORIGIN))).to.contain('contract point 2 is broken: the "function" container\'s command must start the wrapper server')
    expect(broken(() => validatePodTemplate(pod({command: ['/bin/wrapper-server-x']}), ORIGIN))).to.contain('contract point 2')
    expect(broken(() => validatePodTemplate(pod({args: '--x'}), ORIGIN))).to.contain('contract point 3 is broken: the "function" container\'s args must be a list, got "--x"')
    expect(broken(() => validatePodTemplate(pod({args: ['--', 'x']}), ORIGIN))).to.contain('contract point 3 is broken: the "function" container\'s args must not contain "--"')
  })

  it('a Service template: a Service with a port whose targetPort (or port, without one) is 9446', () => {
    const service = (ports: unknown, kind = 'Service'): V1Service => ({kind, spec: {ports}} as V1Service)
    expect(() => validateServiceTemplate(service([{port: 80, targetPort: 9446}]), ORIGIN)).to.not.throw()
    expect(() => validateServiceTemplate(service([{port: 9446}]), ORIGIN)).to.not.throw()
    expect(() => validateServiceTemplate(service([{port: 9446, targetPort: '9446'}]), ORIGIN)).to.not.throw()
    expect(broken(() => validateServiceTemplate(service([{port: 9446, targetPort: 8080}]), ORIGIN))).to.equal('function pod template (ConfigMap fn/tmpl): contract point 4 is broken: the Service must have a port whose targetPort is 9446 (the wrapper server\'s port), got [{"port":9446,"targetPort":8080}]')
    expect(broken(() => validateServiceTemplate(service('9446'), ORIGIN))).to.contain('contract point 4')
    expect(broken(() => validateServiceTemplate(service([null]), ORIGIN))).to.contain('contract point 4')
    expect(broken(() => validateServiceTemplate(service([], 'Pod'), ORIGIN))).to.contain('contract point 4 is broken: key serviceTemplate must hold a Service, not a Pod')
  })

  it('pins an image to its digest: the tag and any digest of the reference dropped, a registry port kept', () => {
    expect(pinnedImage('ghcr.io/o/fn:v1', DIGEST)).to.equal(`ghcr.io/o/fn@${DIGEST}`)
    expect(pinnedImage(`ghcr.io/o/fn:v1@sha256:${'d'.repeat(64)}`, DIGEST)).to.equal(`ghcr.io/o/fn@${DIGEST}`)
    expect(pinnedImage('localhost:5000/fn', DIGEST)).to.equal(`localhost:5000/fn@${DIGEST}`)
    expect(pinnedImage(' fn:latest ', DIGEST)).to.equal(`fn@${DIGEST}`)
  })

  it('a user\'s template as written keeps its settings and says which are weaker than fnr\'s; hardened gets the defaults', () => {
    const p = pod()
    const asWritten = userPodTemplate(p)
    expect(asWritten.pod).to.equal(p)
    expect(asWritten.warnings).to.include('not set: spec.securityContext.runAsNonRoot (fnr would set true)')
    const hardened = userPodTemplate(p, {harden: true})
    expect(hardened.pod.spec!.securityContext).to.deep.include({runAsNonRoot: true})
    expect(hardened.warnings).to.deep.equal([])
  })
})
