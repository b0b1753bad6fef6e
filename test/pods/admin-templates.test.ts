/**
 * The runner's current templates as `fnr pods warm|gc` build them from outside the runner
 * (src/lib/pods/admin/templates.ts): from the same flags they must come out as `fnr serve` builds
 * them (same version), so the runner adopts the pods warmed and the stale-template rule picks the
 * pods the runner would replace. The ConfigMap is read through a fake CoreV1Api.
 */
import type {CoreV1Api, V1ConfigMap} from '@kubernetes/client-node'
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import type {KubeClients} from '../../src/lib/k8s/client.js'
import {inlineResources, runnerTemplates, templatesConfigured, type RunnerTemplateOptions} from '../../src/lib/pods/admin/templates.js'
import {TemplateSource} from '../../src/lib/pods/cluster/template-source.js'

const BASE: RunnerTemplateOptions = {templateConfigMap: '', wrapperServerImage: 'ghcr.io/example/wrapper-server:v1', podRequests: '', podLimits: '', maxRequestBodySize: 6 * 1024 * 1024}

const TEMPLATE = `apiVersion: v1
kind: Pod
spec:
  containers:
  - name: function
    command: [/wrapper-server-tools/wrapper-server]
`
const SERVICE_TEMPLATE = 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n'

function configMap(name: string, namespace: string, template = TEMPLATE): V1ConfigMap {
  return {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name, namespace, resourceVersion: '41'}, data: {template, serviceTemplate: SERVICE_TEMPLATE}}
}

/** Clients whose CoreV1Api serves the ConfigMaps given (others: 404), recording each read. */
function clients(cms: V1ConfigMap[], reads: string[] = []): Pick<KubeClients, 'core' | 'source'> {
  const core = {
    readNamespacedConfigMap: async ({name, namespace}: {name: string; namespace: string}) => {
      reads.push(`${namespace}/${name}`)
      const cm = cms.find((c) => c.metadata?.name === name && c.metadata?.namespace === namespace)
      if (!cm) throw Object.assign(new Error('HTTP-Code: 404'), {code: 404})
      return structuredClone(cm)
    },
  }
  return {core: core as unknown as CoreV1Api, source: 'kubeconfig'} as unknown as Pick<KubeClients, 'core' | 'source'>
}

async function rejection(p: Promise<unknown>): Promise<FnrError> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  expect(err).to.be.instanceOf(FnrError)
  return err as FnrError
}

describe("the runner's pod templates, seen from `fnr pods warm|gc`", () => {
  describe('templatesConfigured', () => {
    it('is true with a ConfigMap or a wrapper-server image, false with neither', () => {
      expect(templatesConfigured({templateConfigMap: 'tmpl'})).to.equal(true)
      expect(templatesConfigured({templateConfigMap: '', wrapperServerImage: 'w:1'})).to.equal(true)
      expect(templatesConfigured({templateConfigMap: ''})).to.equal(false)
      expect(templatesConfigured({templateConfigMap: '', wrapperServerImage: ''})).to.equal(false)
    })
  })

  describe('inlineResources', () => {
    it('parses --pod-requests and --pod-limits as `fnr serve` does; empty is none', () => {
      expect(inlineResources({podRequests: 'cpu=100m, memory=128Mi', podLimits: 'memory=256Mi'})).to.deep.equal({requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '256Mi'}})
      expect(inlineResources({podRequests: '', podLimits: ''})).to.deep.equal({requests: undefined, limits: undefined})
    })

    it('refuses a malformed pair or quantity as a Usage error naming the flag', () => {
      let err: unknown
      try {
        inlineResources({podRequests: 'cpu', podLimits: ''})
      } catch (e) {
        err = e
      }
      expect(err).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('Usage')
      expect((err as FnrError).message).to.match(/^--pod-requests: expected name=quantity pairs/)
      expect(() => inlineResources({podRequests: '', podLimits: 'memory=lots'})).to.throw(FnrError, /^--pod-limits: memory: /)
    })
  })

  describe('runnerTemplates', () => {
    it('without a ConfigMap or a wrapper-server image, is a Config error that says what to pass', async () => {
      const err = await rejection(runnerTemplates(clients([]), {...BASE, wrapperServerImage: undefined}))
      expect(err.kind).to.equal('Config')
      expect(err.message).to.equal("the runner's pod template is unknown: pass --wrapper-server-image (or set WRAPPER_SERVER_IMAGE) as for `fnr serve`, or --function-pod-template")
    })

    it('builds the inline template with the version `fnr serve` computes from the same flags', async () => {
      const options = {...BASE, podRequests: 'cpu=100m', podLimits: 'memory=256Mi'}
      const ours = await runnerTemplates(clients([]), options)
      const serve = TemplateSource.inline({wrapperServerImage: BASE.wrapperServerImage!, resources: inlineResources(options)}, {maxRequestBodySize: BASE.maxRequestBodySize}).current()
      expect(ours.version).to.equal(serve.version)
      expect(ours.origin).to.equal('the inline template')
      const fn = ours.pod.spec!.containers.find((c) => c.name === 'function')!
      expect(fn.resources).to.deep.include({requests: {cpu: '100m'}, limits: {memory: '256Mi'}})
    })

    it('folds the max message size, the resources and the wrapper-server image into the version', async () => {
      const version = async (over: Partial<RunnerTemplateOptions>): Promise<string> => (await runnerTemplates(clients([]), {...BASE, ...over})).version
      const base = await version({})
      expect(await version({})).to.equal(base)
      expect(await version({maxRequestBodySize: BASE.maxRequestBodySize + 1})).to.not.equal(base)
      expect(await version({podRequests: 'cpu=100m'})).to.not.equal(base)
      expect(await version({wrapperServerImage: 'ghcr.io/example/wrapper-server:v2'})).to.not.equal(base)
    })

    it('reads --function-pod-template from --runner-namespace, and the ConfigMap wins over the inline template', async () => {
      const reads: string[] = []
      const t = await runnerTemplates(clients([configMap('tmpl', 'porch-system-2')], reads), {...BASE, templateConfigMap: 'tmpl', runnerNamespace: 'porch-system-2'})
      expect(reads).to.deep.equal(['porch-system-2/tmpl'])
      expect(t.origin).to.not.equal('the inline template')
      expect(t.pod.spec!.containers[0]!.command).to.deep.equal(['/wrapper-server-tools/wrapper-server'])
    })

    it('a ConfigMap template is used as written unless --harden-pod-templates, as the runner uses it', async () => {
      const c = clients([configMap('tmpl', 'ns')])
      const asWritten = await runnerTemplates(c, {...BASE, templateConfigMap: 'tmpl', runnerNamespace: 'ns'})
      const hardened = await runnerTemplates(c, {...BASE, templateConfigMap: 'tmpl', runnerNamespace: 'ns', hardenTemplates: true})
      expect(asWritten.pod.spec!.automountServiceAccountToken).to.equal(undefined)
      expect(hardened.pod.spec!.automountServiceAccountToken).to.equal(false)
      expect(hardened.version).to.not.equal(asWritten.version)
    })

    it('a ConfigMap that is not there is a Config error naming it and the flag', async () => {
      const err = await rejection(runnerTemplates(clients([]), {...BASE, templateConfigMap: 'nope', runnerNamespace: 'ns'}))
      expect(err.kind).to.equal('Config')
      expect(err.message).to.equal('function pod template ConfigMap ns/nope (--function-pod-template) does not exist')
    })

    it('a ConfigMap that breaks the template contract is a Config error', async () => {
      const err = await rejection(runnerTemplates(clients([configMap('tmpl', 'ns', 'apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: other\n')]), {...BASE, templateConfigMap: 'tmpl', runnerNamespace: 'ns'}))
      expect(err.kind).to.equal('Config')
      expect(err.message).to.contain('no container is named "function"')
    })
  })
})
