/**
 * The security defaults of function pods made from a user's template (src/lib/pods/model/pod-security.ts),
 * as pure functions: what --harden-pod-templates fills in, what it keeps and reports, the warnings of a
 * template used as written, and a FunctionConfig's templateOverrides.securityContext merged field by field.
 * The pods built from real templates on the control plane are test/reliability/pod-security.test.ts.
 */
import type {V1Container, V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'

import {NONROOT_ID, hardenPodTemplate, overridePodSecurityContext, weakPodTemplateSettings} from '../../src/lib/pods/model/pod-security.js'

function pod(spec: Partial<V1Pod['spec']> & {containers?: V1Container[]}): V1Pod {
  return {apiVersion: 'v1', kind: 'Pod', spec: {containers: [{name: 'function'}], ...spec}} as V1Pod
}

const FN = 'spec.containers[0] (function)'

describe('function pod security defaults (pure rules)', () => {
  describe('hardenPodTemplate', () => {
    it('fills in every default on a bare template, the non-root uid and gid being the distroless nonroot user', () => {
      const {pod: out, added, weaker} = hardenPodTemplate(pod({}))
      expect(NONROOT_ID).to.equal(65532)
      expect(out.spec!.automountServiceAccountToken).to.equal(false)
      expect(out.spec!.securityContext).to.deep.equal({runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: 'RuntimeDefault'}})
      expect(out.spec!.containers[0]!.securityContext).to.deep.equal({allowPrivilegeEscalation: false, capabilities: {drop: ['ALL']}})
      expect(added).to.deep.equal([
        'spec.automountServiceAccountToken: false',
        'spec.securityContext.runAsNonRoot: true',
        'spec.securityContext.runAsUser: 65532',
        'spec.securityContext.runAsGroup: 65532',
        'spec.securityContext.seccompProfile: RuntimeDefault',
        `${FN}.securityContext.allowPrivilegeEscalation: false`,
        `${FN}.securityContext.capabilities.drop: [ALL]`,
      ])
      expect(weaker).to.deep.equal([])
    })

    it('returns a copy: the template given is not changed', () => {
      const template = pod({securityContext: {fsGroup: 1}})
      const before = structuredClone(template)
      const {pod: out} = hardenPodTemplate(template)
      expect(template).to.deep.equal(before)
      expect(out).to.not.equal(template)
      expect(out.spec!.securityContext).to.not.equal(template.spec!.securityContext)
    })

    it('leaves a template without a spec alone', () => {
      const template = {apiVersion: 'v1', kind: 'Pod', metadata: {name: 'x'}} as V1Pod
      expect(hardenPodTemplate(template)).to.deep.equal({pod: template, added: [], weaker: []})
    })

    it('adds no uid or gid when a container sets its own uid, but still runAsNonRoot', () => {
      const {pod: out, added} = hardenPodTemplate(pod({containers: [{name: 'function', securityContext: {runAsUser: 1000}}]}))
      expect(out.spec!.securityContext).to.deep.equal({runAsNonRoot: true, seccompProfile: {type: 'RuntimeDefault'}})
      expect(added).to.not.include('spec.securityContext.runAsUser: 65532')
      expect(out.spec!.containers[0]!.securityContext!.runAsUser).to.equal(1000)
    })

    it('keeps a template\'s runAsGroup and adds only the uid', () => {
      const {pod: out, added} = hardenPodTemplate(pod({securityContext: {runAsGroup: 3000}}))
      expect(out.spec!.securityContext).to.deep.include({runAsUser: 65532, runAsGroup: 3000})
      expect(added).to.not.include('spec.securityContext.runAsGroup: 65532')
    })

    it('adds neither runAsNonRoot nor a uid when a container decides runAsNonRoot itself', () => {
      const {pod: out, added, weaker} = hardenPodTemplate(pod({containers: [{name: 'function', securityContext: {runAsNonRoot: true}}]}))
      expect(out.spec!.securityContext).to.deep.equal({seccompProfile: {type: 'RuntimeDefault'}})
      expect(added.filter((a) => /runAs/.test(a))).to.deep.equal([])
      expect(weaker).to.deep.equal([])
    })

    it('reports runAsNonRoot: false at pod and container level, and adds nothing over it', () => {
      const {pod: out, weaker} = hardenPodTemplate(pod({securityContext: {runAsNonRoot: false}, containers: [{name: 'function', securityContext: {runAsNonRoot: false}}]}))
      expect(out.spec!.securityContext!.runAsNonRoot).to.equal(false)
      expect(out.spec!.securityContext).to.not.have.property('runAsUser')
      expect(weaker).to.deep.equal(['spec.securityContext.runAsNonRoot: false', `${FN}.securityContext.runAsNonRoot: false`])
    })

    it('a container running as uid 0 leaves runAsNonRoot unset (the kubelet would refuse the pod) and says so', () => {
      const {pod: out, weaker} = hardenPodTemplate(pod({containers: [{name: 'function', securityContext: {runAsUser: 0}}]}))
      expect(out.spec!.securityContext).to.not.have.property('runAsNonRoot')
      expect(out.spec!.securityContext).to.not.have.property('runAsUser')
      expect(weaker).to.deep.equal(['runAsUser: 0 (runAsNonRoot left unset)'])
    })

    it('adds no pod seccomp profile when a container sets one, and reports an Unconfined container profile', () => {
      const {pod: out, added, weaker} = hardenPodTemplate(pod({containers: [{name: 'function', securityContext: {seccompProfile: {type: 'Unconfined'}}}]}))
      expect(out.spec!.securityContext).to.not.have.property('seccompProfile')
      expect(added).to.not.include('spec.securityContext.seccompProfile: RuntimeDefault')
      expect(weaker).to.deep.equal([`${FN}.securityContext.seccompProfile: Unconfined`])
    })

    it('takes capabilities.drop ALL in any case, and reports added capabilities beside it', () => {
      const {weaker, added} = hardenPodTemplate(pod({containers: [{name: 'function', securityContext: {capabilities: {drop: ['all'], add: ['NET_ADMIN', 'SYS_TIME']}}}]}))
      expect(added).to.not.include(`${FN}.securityContext.capabilities.drop: [ALL]`)
      expect(weaker).to.deep.equal([`${FN}.securityContext.capabilities.add: ["NET_ADMIN","SYS_TIME"]`])
    })

    it('an empty drop list is explicit: kept, and reported as not ALL', () => {
      const {pod: out, weaker} = hardenPodTemplate(pod({containers: [{name: 'function', securityContext: {capabilities: {drop: []}}}]}))
      expect(out.spec!.containers[0]!.securityContext!.capabilities).to.deep.equal({drop: []})
      expect(weaker).to.deep.equal([`${FN}.securityContext.capabilities.drop: [] (not ALL)`])
    })

    it('names init containers before containers, by index and name', () => {
      const {added} = hardenPodTemplate(pod({automountServiceAccountToken: false, initContainers: [{name: 'copy'}], containers: [{name: 'function'}, {name: 'sidecar'}]}))
      expect(added.filter((a) => a.endsWith('allowPrivilegeEscalation: false'))).to.deep.equal([
        'spec.initContainers[0] (copy).securityContext.allowPrivilegeEscalation: false',
        'spec.containers[0] (function).securityContext.allowPrivilegeEscalation: false',
        'spec.containers[1] (sidecar).securityContext.allowPrivilegeEscalation: false',
      ])
    })

    it('keeps an explicit automountServiceAccountToken: false without a word, and skips empty container slots', () => {
      const template = pod({automountServiceAccountToken: false, containers: [null as unknown as V1Container, {name: 'function'}]})
      const {added, weaker} = hardenPodTemplate(template)
      expect(added).to.not.include('spec.automountServiceAccountToken: false')
      expect(added).to.include('spec.containers[1] (function).securityContext.capabilities.drop: [ALL]')
      expect(weaker).to.deep.equal([])
    })
  })

  describe('weakPodTemplateSettings (a template used as written)', () => {
    it('lists the explicit weaker settings first, then each missing default as "not set: … (fnr would set …)"', () => {
      const template = pod({automountServiceAccountToken: true, securityContext: {runAsUser: 1000}})
      const before = structuredClone(template)
      expect(weakPodTemplateSettings(template)).to.deep.equal([
        'spec.automountServiceAccountToken: true',
        'not set: spec.securityContext.runAsNonRoot (fnr would set true)',
        'not set: spec.securityContext.seccompProfile (fnr would set RuntimeDefault)',
        `not set: ${FN}.securityContext.allowPrivilegeEscalation (fnr would set false)`,
        `not set: ${FN}.securityContext.capabilities.drop (fnr would set [ALL])`,
      ])
      expect(template).to.deep.equal(before)
    })

    it('says nothing of a template that already has every default', () => {
      const {pod: hardened} = hardenPodTemplate(pod({}))
      expect(weakPodTemplateSettings(hardened)).to.deep.equal([])
    })
  })

  describe('overridePodSecurityContext (templateOverrides.securityContext)', () => {
    const base = {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: 'RuntimeDefault'}}

    it('merges over no securityContext at all', () => {
      expect(overridePodSecurityContext(undefined, {fsGroup: 2000})).to.deep.equal({securityContext: {fsGroup: 2000}, weaker: []})
    })

    it('changes neither the base nor keeps a reference to the override', () => {
      const b = structuredClone(base)
      const override = {seLinuxOptions: {level: 's0'}}
      const {securityContext} = overridePodSecurityContext(b, override)
      expect(b).to.deep.equal(base)
      override.seLinuxOptions.level = 's1'
      expect(securityContext.seLinuxOptions).to.deep.equal({level: 's0'})
    })

    it('null removes a field; only removing runAsNonRoot or the seccomp profile is reported, and only when there was one', () => {
      const a = overridePodSecurityContext({...base, fsGroup: 1}, {fsGroup: null, runAsNonRoot: null})
      expect(a.securityContext).to.not.have.property('fsGroup')
      expect(a.securityContext).to.not.have.property('runAsNonRoot')
      expect(a.weaker).to.deep.equal(['templateOverrides.securityContext.runAsNonRoot: null (the default true removed)'])
      const b = overridePodSecurityContext({}, {seccompProfile: null, runAsNonRoot: null})
      expect(b).to.deep.equal({securityContext: {}, weaker: []})
    })

    it('runAsUser: 0 beside an explicit runAsNonRoot keeps both as written and is reported plainly', () => {
      const {securityContext, weaker} = overridePodSecurityContext(base, {runAsUser: 0, runAsNonRoot: true})
      expect(securityContext).to.deep.include({runAsUser: 0, runAsNonRoot: true})
      expect(weaker).to.deep.equal(['templateOverrides.securityContext.runAsUser: 0'])
    })

    it('runAsUser: 0 over a base without runAsNonRoot drops nothing and is reported plainly', () => {
      const {securityContext, weaker} = overridePodSecurityContext({runAsUser: 1}, {runAsUser: 0})
      expect(securityContext).to.deep.equal({runAsUser: 0})
      expect(weaker).to.deep.equal(['templateOverrides.securityContext.runAsUser: 0'])
    })

    it('a RuntimeDefault or Localhost profile in the override is not weaker', () => {
      expect(overridePodSecurityContext(base, {seccompProfile: {type: 'Localhost', localhostProfile: 'p.json'}}).weaker).to.deep.equal([])
      expect(overridePodSecurityContext(base, {runAsNonRoot: true}).weaker).to.deep.equal([])
    })
  })
})
