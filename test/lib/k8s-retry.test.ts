/**
 * src/lib/k8s/retry.ts: bounded retries of Kubernetes API calls. Retried: 429, 5xx and network
 * errors; never past the attempts, the deadline or an abort; what is finally thrown is an FnrError
 * ("<what>: <reason>", k8s/errors.ts kubeError), an FnrError from the call unchanged.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {sleep, withApiRetries} from '../../src/lib/k8s/retry.js'

/** An error shaped like client-node's ApiException. */
function apiError(code: number, message = `status ${code}`, reason?: string): Error {
  return Object.assign(new Error(`HTTP-Code: ${code}\nMessage: x\nBody: y`), {code, body: JSON.stringify({message, ...(reason ? {reason} : {})})})
}

function netError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:6443`), {code})
}

/** A call that fails with each error in turn, then returns 'ok'. */
function flaky(errors: unknown[]): {fn: () => Promise<string>; calls: () => number} {
  let n = 0
  return {
    fn: async () => {
      const err = errors[n++]
      if (err !== undefined) throw err
      return 'ok'
    },
    calls: () => n,
  }
}

async function rejection(p: Promise<unknown>): Promise<FnrError> {
  try {
    await p
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    return err as FnrError
  }
  throw new Error('expected a rejection')
}

describe('k8s/retry: withApiRetries', () => {
  it('returns the first success without retrying', async () => {
    const f = flaky([])
    expect(await withApiRetries(f.fn, {what: 'w', delayMs: 1})).to.equal('ok')
    expect(f.calls()).to.equal(1)
  })

  it('retries 429, 5xx and network errors until the call succeeds', async () => {
    const f = flaky([apiError(429), apiError(503), netError('ECONNRESET')])
    expect(await withApiRetries(f.fn, {what: 'w', delayMs: 1})).to.equal('ok')
    expect(f.calls()).to.equal(4)
  })

  it('stops after the attempts (4 by default) and throws the last error as "<what>: <reason>"', async () => {
    const f = flaky(Array.from({length: 10}, () => apiError(503, 'etcd is sad')))
    const err = await rejection(withApiRetries(f.fn, {what: 'cannot create pod ns/p', delayMs: 1}))
    expect(f.calls()).to.equal(4)
    expect(err.kind).to.equal('Unavailable')
    expect(err.message).to.equal('cannot create pod ns/p: etcd is sad (HTTP 503)')
    expect(err.details.status).to.equal(503)
  })

  it('honours a given number of attempts, and makes at least one', async () => {
    const two = flaky(Array.from({length: 10}, () => apiError(500)))
    await rejection(withApiRetries(two.fn, {what: 'w', attempts: 2, delayMs: 1}))
    expect(two.calls()).to.equal(2)
    const none = flaky(Array.from({length: 10}, () => apiError(500)))
    await rejection(withApiRetries(none.fn, {what: 'w', attempts: 0, delayMs: 1}))
    expect(none.calls()).to.equal(1)
  })

  it('does not retry what another try cannot fix, and keeps its kind', async () => {
    const cases: Array<[number, string]> = [[404, 'NotFound'], [409, 'FailedPrecondition'], [422, 'InvalidArgument'], [403, 'PermissionDenied'], [401, 'Unauthenticated']]
    for (const [code, kind] of cases) {
      const f = flaky([apiError(code, 'no', 'Reason')])
      const err = await rejection(withApiRetries(f.fn, {what: 'cannot read x', delayMs: 1}))
      expect(f.calls(), String(code)).to.equal(1)
      expect(err.kind, String(code)).to.equal(kind)
      expect(err.details.reason).to.equal('Reason')
      expect(err.message).to.equal(`cannot read x: no (HTTP ${code})`)
    }
  })

  it('passes an FnrError the call threw through unchanged (and retries it only when Unavailable)', async () => {
    const own = new FnrError('InvalidArgument', 'bad input')
    const f = flaky([own])
    expect(await withApiRetries(f.fn, {what: 'w', delayMs: 1}).catch((e: unknown) => e)).to.equal(own)
    expect(f.calls()).to.equal(1)
    const unavailable = new FnrError('Unavailable', 'later')
    const g = flaky([unavailable, unavailable])
    expect(await withApiRetries(g.fn, {what: 'w', delayMs: 1})).to.equal('ok')
    expect(g.calls()).to.equal(3)
  })

  it('does not wait past the deadline: gives up when less than the next back-off is left', async () => {
    const f = flaky(Array.from({length: 10}, () => apiError(503)))
    const started = Date.now()
    const err = await rejection(withApiRetries(f.fn, {what: 'w', delayMs: 10_000, deadline: Date.now() + 5_000}))
    expect(f.calls()).to.equal(1)
    expect(Date.now() - started).to.be.lessThan(1000)
    expect(err.kind).to.equal('Unavailable')
    const past = flaky([apiError(503)])
    await rejection(withApiRetries(past.fn, {what: 'w', delayMs: 1, deadline: Date.now() - 1}))
    expect(past.calls()).to.equal(1)
  })

  it('stops retrying once the signal is aborted, and an abort cuts a back-off short', async () => {
    const aborted = new AbortController()
    aborted.abort()
    const f = flaky([apiError(503)])
    await rejection(withApiRetries(f.fn, {what: 'w', delayMs: 1, signal: aborted.signal}))
    expect(f.calls()).to.equal(1)

    const ac = new AbortController()
    const g = flaky(Array.from({length: 10}, () => apiError(503)))
    const started = Date.now()
    const p = withApiRetries(g.fn, {what: 'w', delayMs: 60_000, signal: ac.signal})
    setTimeout(() => ac.abort(), 10)
    await rejection(p)
    expect(Date.now() - started).to.be.lessThan(2000)
    expect(g.calls()).to.equal(2)
  })

  it('doubles the back-off from delayMs', async () => {
    const f = flaky([apiError(503), apiError(503), apiError(503)])
    const started = Date.now()
    await withApiRetries(f.fn, {what: 'w', delayMs: 5})
    // 5 + 10 + 20 ms (5 + 5 + 5 without doubling); timers may fire a millisecond early
    expect(Date.now() - started).to.be.at.least(30)
  })
})

describe('k8s/retry: sleep', () => {
  it('waits about the time asked', async () => {
    const started = Date.now()
    await sleep(20)
    expect(Date.now() - started).to.be.at.least(18)
  })

  it('returns at once for an aborted signal or a negative time, and early on abort', async () => {
    const aborted = new AbortController()
    aborted.abort()
    let started = Date.now()
    await sleep(60_000, aborted.signal)
    await sleep(-5)
    expect(Date.now() - started).to.be.lessThan(500)
    const ac = new AbortController()
    started = Date.now()
    setTimeout(() => ac.abort(), 5)
    await sleep(60_000, ac.signal)
    expect(Date.now() - started).to.be.lessThan(1000)
  })
})
