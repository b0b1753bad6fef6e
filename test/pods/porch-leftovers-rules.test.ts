/**
 * Which pods and Services are Porch's runner's (src/lib/pods/cluster/porch-leftovers.ts), and what
 * collecting them does with each answer of the API server, on a fake CoreV1Api (no cluster). The
 * same flow on the real control plane is test/pods/porch-leftovers.test.ts.
 */
import type {CoreV1Api, V1Pod, V1Service} from '@kubernetes/client-node'
import {expect} from 'chai'

import {PORCH_POD_SELECTOR, collectPorchLeftovers, findPorchLeftovers, isPorchFunctionPod, isPorchFunctionService} from '../../src/lib/pods/cluster/porch-leftovers.js'
import {FnrError} from '../../src/lib/errors.js'
import {memoryLogger} from '../support/memory-logger.js'

const ID = 'set-labels-v0-2-2-1-0a1b2c3d'
const GONE = 'apply-setters-v0-2-0-1-ffeeddcc'

function porchPod(name: string, podId: string, over: Partial<V1Pod['metadata']> = {}, containers = [{name: 'function', image: 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2'}]): V1Pod {
  return {metadata: {name, resourceVersion: '7', labels: {'fn.kpt.dev/image': podId}, annotations: {'fn.kpt.dev/template-version': 'inline-v1'}, ...over}, spec: {containers}}
}

function service(name: string, selector: Record<string, string> | undefined, labels?: Record<string, string>): V1Service {
  return {metadata: {name, resourceVersion: '9', ...(labels ? {labels} : {})}, spec: selector ? {selector} : {}}
}

function apiError(code: number, message?: string): Error {
  return Object.assign(new Error(`HTTP-Code: ${code}\nMessage: x`), {code, ...(message ? {body: JSON.stringify({kind: 'Status', message})} : {})})
}

interface FakeCore {
  core: CoreV1Api
  calls: string[]
  podSelectors: Array<string | undefined>
}

/** A CoreV1Api that lists the objects given and answers deletions from `fail` (name → error), else deletes. */
function fakeCore(pods: V1Pod[], services: V1Service[], fail: Record<string, Error> = {}): FakeCore {
  const calls: string[] = []
  const podSelectors: Array<string | undefined> = []
  const core = {
    listNamespacedPod: async ({labelSelector}: {labelSelector?: string}) => {
      calls.push('list pods')
      podSelectors.push(labelSelector)
      return {items: pods}
    },
    listNamespacedService: async () => {
      calls.push('list services')
      return {items: services}
    },
    deleteNamespacedPod: async ({name, namespace, body}: {name: string; namespace: string; body: {preconditions: {resourceVersion?: string}}}) => {
      calls.push(`delete pod ${namespace}/${name} rv=${body.preconditions.resourceVersion}`)
      if (fail[name]) throw fail[name]
      return {}
    },
    deleteNamespacedService: async ({name, namespace, body}: {name: string; namespace: string; body: {preconditions: {resourceVersion?: string}}}) => {
      calls.push(`delete service ${namespace}/${name} rv=${body.preconditions.resourceVersion}`)
      if (fail[name]) throw fail[name]
      return {}
    },
  }
  return {core: core as unknown as CoreV1Api, calls, podSelectors}
}

describe("Porch's leftover function pods (rules, on a fake API)", () => {
  describe('classification', () => {
    it('asks the API server for pods with Porch\'s label and without fnr\'s', () => {
      expect(PORCH_POD_SELECTOR).to.equal('fn.kpt.dev/image,app.kubernetes.io/managed-by!=fnr')
    })

    it('a pod is Porch\'s when it has fn.kpt.dev/image and is not managed by fnr', () => {
      expect(isPorchFunctionPod(porchPod('a', ID))).to.equal(true)
      expect(isPorchFunctionPod(porchPod('a', ID, {labels: {'fn.kpt.dev/image': ID, 'app.kubernetes.io/managed-by': 'fnr'}}))).to.equal(false)
      // another manager's label does not make it fnr's
      expect(isPorchFunctionPod(porchPod('a', ID, {labels: {'fn.kpt.dev/image': ID, 'app.kubernetes.io/managed-by': 'helm'}}))).to.equal(true)
      // an empty value is still the label
      expect(isPorchFunctionPod(porchPod('a', '', {}))).to.equal(true)
      expect(isPorchFunctionPod({metadata: {name: 'app', labels: {app: 'x'}}})).to.equal(false)
      expect(isPorchFunctionPod({})).to.equal(false)
    })

    it('a Service is Porch\'s when its selector is exactly fn.kpt.dev/image=… and it is not fnr\'s', () => {
      expect(isPorchFunctionService(service(ID, {'fn.kpt.dev/image': ID}))).to.equal(true)
      expect(isPorchFunctionService(service(ID, {'fn.kpt.dev/image': ID}, {'app.kubernetes.io/managed-by': 'fnr'}))).to.equal(false)
      expect(isPorchFunctionService(service(ID, {'fn.kpt.dev/image': ID, app: 'x'}))).to.equal(false)
      expect(isPorchFunctionService(service('app', {app: 'x'}))).to.equal(false)
      expect(isPorchFunctionService(service('headless', undefined))).to.equal(false)
    })
  })

  describe('findPorchLeftovers', () => {
    it('lists pods with the selector, filters both lists again, and skips the Service list when told', async () => {
      const fnrPod = porchPod('mine', ID, {labels: {'fn.kpt.dev/image': ID, 'app.kubernetes.io/managed-by': 'fnr'}})
      const f = fakeCore([porchPod('p', ID), fnrPod], [service(ID, {'fn.kpt.dev/image': ID}), service('app', {app: 'x'})])
      const found = await findPorchLeftovers(f.core, 'ns')
      expect(found.pods.map((p) => p.metadata!.name)).to.deep.equal(['p'])
      expect(found.services.map((s) => s.metadata!.name)).to.deep.equal([ID])
      expect(f.podSelectors).to.deep.equal([PORCH_POD_SELECTOR])
      const podsOnly = fakeCore([porchPod('p', ID)], [service(ID, {'fn.kpt.dev/image': ID})])
      expect((await findPorchLeftovers(podsOnly.core, 'ns', {services: false})).services).to.deep.equal([])
      expect(podsOnly.calls).to.deep.equal(['list pods'])
    })

    it('a list the API server refuses is one typed error naming the namespace', async () => {
      const core = {listNamespacedPod: async () => Promise.reject(apiError(403, 'pods is forbidden: User "x" cannot list resource "pods"'))} as unknown as CoreV1Api
      const err = await findPorchLeftovers(core, 'porch-fn-system').catch((e: unknown) => e)
      expect(err).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('PermissionDenied')
      expect((err as FnrError).message).to.match(/^cannot list the function pods Porch's runner left in porch-fn-system: pods is forbidden/)
    })
  })

  describe('collectPorchLeftovers', () => {
    it('deletes Porch\'s pods with a resourceVersion precondition, then their Services and those of pods already gone', async () => {
      const f = fakeCore([porchPod(`${ID}-x7k2p`, ID)], [service(ID, {'fn.kpt.dev/image': ID}), service(GONE, {'fn.kpt.dev/image': GONE}), service('app', {app: 'x'})])
      const logger = memoryLogger()
      const out = await collectPorchLeftovers({core: f.core, namespace: 'ns', logger})
      expect(out).to.deep.equal([
        {kind: 'Pod', name: `${ID}-x7k2p`, podId: ID, image: 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2', deleted: true},
        {kind: 'Service', name: ID, podId: ID, deleted: true},
        {kind: 'Service', name: GONE, podId: GONE, deleted: true},
      ])
      expect(f.calls.filter((c) => c.startsWith('delete'))).to.deep.equal([`delete pod ns/${ID}-x7k2p rv=7`, `delete service ns/${ID} rv=9`, `delete service ns/${GONE} rv=9`])
      expect(logger.lines).to.deep.equal([
        {level: 'info', msg: "collected the function pods left by Porch's runner", fields: {namespace: 'ns', pods: [`${ID}-x7k2p`], services: [ID, GONE], deleted: 3, failed: 0}},
      ])
    })

    it('takes the image of the container named "function", else the first container\'s, else none', async () => {
      const pods = [
        porchPod('a', 'a', {}, [{name: 'sidecar', image: 'side:1'}, {name: 'function', image: 'fn:1'}]),
        porchPod('b', 'b', {}, [{name: 'main', image: 'main:1'}]),
        porchPod('c', 'c', {}, []),
      ]
      const out = await collectPorchLeftovers({core: fakeCore(pods, []).core, namespace: 'ns', dryRun: true})
      expect(out.map((o) => o.image)).to.deep.equal(['fn:1', 'main:1', undefined])
      expect(out[2]).to.not.have.property('image')
    })

    it('a dry run deletes nothing and lists every pod and Service, in a "(dry run)" log line', async () => {
      const f = fakeCore([porchPod('p', ID)], [service(ID, {'fn.kpt.dev/image': ID})])
      const logger = memoryLogger()
      const out = await collectPorchLeftovers({core: f.core, namespace: 'ns', dryRun: true, logger})
      expect(f.calls.filter((c) => c.startsWith('delete'))).to.deep.equal([])
      expect(out.map((o) => [o.kind, o.name, o.deleted, o.skipped])).to.deep.equal([
        ['Pod', 'p', false, undefined],
        ['Service', ID, false, undefined],
      ])
      expect(logger.lines.map((l) => l.msg)).to.deep.equal(["function pods left by Porch's runner (dry run)"])
    })

    it('leaves a pod already being deleted, and then its Service, alone', async () => {
      const f = fakeCore([porchPod('p', ID, {deletionTimestamp: new Date(0)})], [service(ID, {'fn.kpt.dev/image': ID})])
      const out = await collectPorchLeftovers({core: f.core, namespace: 'ns'})
      expect(out.map((o) => o.skipped)).to.deep.equal(['already being deleted', 'its pod is still there'])
      expect(f.calls.filter((c) => c.startsWith('delete'))).to.deep.equal([])
    })

    it('a pod that changed since it was listed (409) is left, with its Service', async () => {
      const f = fakeCore([porchPod('p', ID)], [service(ID, {'fn.kpt.dev/image': ID})], {p: apiError(409)})
      const out = await collectPorchLeftovers({core: f.core, namespace: 'ns'})
      expect(out.map((o) => [o.name, o.deleted, o.skipped, o.error])).to.deep.equal([
        ['p', false, 'changed since it was listed', undefined],
        [ID, false, 'its pod is still there', undefined],
      ])
    })

    it('a pod already gone when its delete came (404) no longer holds its Service: the Service is deleted', async () => {
      const f = fakeCore([porchPod('p', ID)], [service(ID, {'fn.kpt.dev/image': ID})], {p: apiError(404)})
      const out = await collectPorchLeftovers({core: f.core, namespace: 'ns'})
      expect(out.map((o) => [o.name, o.deleted, o.skipped])).to.deep.equal([
        ['p', false, 'already gone'],
        [ID, true, undefined],
      ])
      expect(f.calls).to.include(`delete service ns/${ID} rv=9`)
    })

    it('reports other failures per object, never throws, and warns once per failure', async () => {
      const f = fakeCore([porchPod('p', ID), porchPod('q', 'q')], [service(GONE, {'fn.kpt.dev/image': GONE}), service('other', {'fn.kpt.dev/image': 'other'})], {
        p: apiError(403, 'pods "p" is forbidden'),
        [GONE]: apiError(404),
        other: apiError(409),
      })
      const logger = memoryLogger()
      const out = await collectPorchLeftovers({core: f.core, namespace: 'ns', logger})
      expect(out.map((o) => [o.name, o.deleted, o.skipped ?? null, o.error ?? null])).to.deep.equal([
        ['p', false, null, 'cannot delete pod ns/p: pods "p" is forbidden (HTTP 403)'],
        ['q', true, null, null],
        [GONE, false, 'already gone', null],
        ['other', false, 'changed since it was listed', null],
      ])
      expect(logger.lines.find((l) => l.level === 'info')!.fields).to.deep.include({deleted: 1, failed: 1})
      expect(logger.lines.filter((l) => l.level === 'warn')).to.deep.equal([
        {level: 'warn', msg: "cannot delete a function pod left by Porch's runner", fields: {kind: 'Pod', name: 'p', error: 'cannot delete pod ns/p: pods "p" is forbidden (HTTP 403)'}},
      ])
    })

    it('with nothing left by Porch, logs nothing and returns nothing', async () => {
      const logger = memoryLogger()
      expect(await collectPorchLeftovers({core: fakeCore([], [service('app', {app: 'x'})]).core, namespace: 'ns', logger})).to.deep.equal([])
      expect(logger.lines).to.deep.equal([])
    })
  })
})
