/**
 * `fnr pods gc`'s own parts that need no cluster (src/lib/pods/admin/gc.ts): the option checks (Usage
 * errors before any cluster call), the text line per item, and the failure a run with failed
 * deletions ends with. The rules that decide what is deleted are test/pods/gc-rules.test.ts; the
 * whole command on the control plane is test/operator/ and test/pods/gc.test.ts.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {CHANGED_SINCE_LISTED, type GcItemResult} from '../../src/lib/pods/admin/admin.js'
import {collectPods, gcFailure, gcItemLabel, gcLine, type CollectPodsOptions, type GcSummary} from '../../src/lib/pods/admin/gc.js'

const TEMPLATE = {templateConfigMap: '', podRequests: '', podLimits: '', maxRequestBodySize: 1024}

function result(over: Partial<GcItemResult> = {}): GcItemResult {
  return {kind: 'pod', name: 'cat-v1-1-abc', reason: 'idle past its TTL', deleted: true, skipped: false, ...over}
}

function summary(items: GcItemResult[], over: Partial<GcSummary> = {}): GcSummary {
  return {namespace: 'fn', dryRun: false, templateVersion: null, items, deleted: items.filter((i) => i.deleted).length, skipped: items.filter((i) => i.skipped).length, failed: items.filter((i) => !i.deleted && !i.skipped).length, ...over}
}

async function usageError(options: Partial<CollectPodsOptions>): Promise<FnrError> {
  // a kubeconfig that cannot exist: should a check be missed, the run fails on it instead of reaching a cluster
  const err = await collectPods({namespace: 'fn', template: TEMPLATE, staleGraceMs: 600_000, kube: {kubeconfig: '/nonexistent/kubeconfig'}, ...options}).then(() => undefined, (e: unknown) => e)
  expect(err).to.be.instanceOf(FnrError)
  expect((err as FnrError).kind).to.equal('Usage')
  return err as FnrError
}

describe('`fnr pods gc` (options, lines, failure)', () => {
  describe('option checks, before any cluster call', () => {
    it('--include-live-replicas only goes with --all', async () => {
      expect((await usageError({includeLive: true})).message).to.equal('--include-live-replicas only goes with --all')
    })

    it('--older-than must be positive', async () => {
      for (const olderThanMs of [0, -1, Number.NaN]) expect((await usageError({olderThanMs})).message).to.equal('--older-than must be a positive duration')
    })

    it('--stale-grace must be positive', async () => {
      for (const staleGraceMs of [0, -5, Number.NaN]) expect((await usageError({staleGraceMs})).message).to.equal('--stale-grace must be a positive duration')
    })

    it('a namespace that cannot be one is refused too', async () => {
      expect((await usageError({namespace: '-fn'})).message).to.equal('--namespace "-fn" is not a valid namespace name')
    })
  })

  describe('lines', () => {
    it('labels pods and Services by kind and name', () => {
      expect(gcItemLabel({kind: 'pod', name: 'a'})).to.equal('pod a')
      expect(gcItemLabel({kind: 'service', name: 'a'})).to.equal('Service a')
    })

    it('says what was deleted, left alone or failed, and why', () => {
      expect(gcLine(result())).to.equal('deleted pod cat-v1-1-abc: idle past its TTL')
      expect(gcLine(result({kind: 'service', deleted: true, reason: 'its pod is gone'}))).to.equal('deleted Service cat-v1-1-abc: its pod is gone')
      expect(gcLine(result({deleted: false, skipped: true}))).to.equal(`left pod cat-v1-1-abc alone: ${CHANGED_SINCE_LISTED}`)
      expect(gcLine(result({deleted: false, error: 'cannot delete pod fn/cat-v1-1-abc: forbidden (HTTP 403)'}))).to.equal('FAILED pod cat-v1-1-abc: cannot delete pod fn/cat-v1-1-abc: forbidden (HTTP 403)')
    })

    it('a dry run says what would be deleted, with the pod\'s image when known', () => {
      expect(gcLine(result({deleted: false, image: 'example.com/fn/cat:v1'}), true)).to.equal('would delete pod cat-v1-1-abc (example.com/fn/cat:v1): idle past its TTL')
      expect(gcLine(result({kind: 'service', deleted: false, reason: 'its pod is gone'}), true)).to.equal('would delete Service cat-v1-1-abc: its pod is gone')
    })
  })

  describe('gcFailure', () => {
    it('is nothing when every deletion went through or was left alone', () => {
      expect(gcFailure(summary([]))).to.equal(undefined)
      expect(gcFailure(summary([result(), result({deleted: false, skipped: true})]))).to.equal(undefined)
    })

    it('is an Internal error (exit 1) counting the failures and carrying the summary for --json', () => {
      const s = summary([result(), result({name: 'b', deleted: false, error: 'boom'}), result({name: 'c', deleted: false, skipped: true})])
      const err = gcFailure(s)!
      expect(err).to.be.instanceOf(FnrError)
      expect(err.kind).to.equal('Internal')
      expect(err.exitCode).to.equal(1)
      expect(err.message).to.equal('1 of 3 deletions failed')
      expect(err.details.report).to.equal(s)
    })
  })
})
