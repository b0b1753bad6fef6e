/**
 * Kubernetes API failures as FnrErrors (src/lib/k8s/errors.ts): the HTTP status and Status reason
 * read from client-node's errors whatever their shape, the kind each status maps to, a one-line
 * message (the Status message, never a dump of headers and body), and which failures are worth
 * another try. The errors are built as client-node builds them; no API server is involved.
 */
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {apiStatusCode, apiStatusReason, isRetryableApiError, kubeError} from '../../src/lib/k8s/errors.js'

/** client-node's ApiException: code, a multi-line message, the Status body as a JSON string. */
function apiException(code: number, status: {message?: string; reason?: string} | string): Error {
  const body = typeof status === 'string' ? status : JSON.stringify({kind: 'Status', apiVersion: 'v1', status: 'Failure', ...status, code})
  return Object.assign(new Error(`HTTP-Code: ${code}\nMessage: Unknown API Status Code!\nBody: ${body}\nHeaders: {"audit-id":"x"}`), {code, body})
}

describe('Kubernetes API errors', () => {
  it('reads the HTTP status from code or statusCode, only when it is one; and from an FnrError\'s details', () => {
    expect(apiStatusCode(apiException(409, {reason: 'Conflict'}))).to.equal(409)
    expect(apiStatusCode({statusCode: 410})).to.equal(410)
    expect(apiStatusCode(Object.assign(new Error('x'), {code: 'ECONNREFUSED'}))).to.equal(undefined)
    expect(apiStatusCode({code: 42})).to.equal(undefined)
    expect(apiStatusCode(null)).to.equal(undefined)
    expect(apiStatusCode(new FnrError('NotFound', 'x', {details: {status: 404}}))).to.equal(404)
    expect(apiStatusCode(new FnrError('NotFound', 'x'))).to.equal(undefined)
  })

  it('reads the Status reason from a JSON body (string or object), and an FnrError\'s details', () => {
    expect(apiStatusReason(apiException(409, {reason: 'AlreadyExists', message: 'pods "p" already exists'}))).to.equal('AlreadyExists')
    expect(apiStatusReason({body: {reason: 'Conflict'}})).to.equal('Conflict')
    expect(apiStatusReason({body: 'not json\nsecond line'})).to.equal(undefined)
    expect(apiStatusReason(new Error('plain'))).to.equal(undefined)
    expect(apiStatusReason(new FnrError('FailedPrecondition', 'x', {details: {reason: 'Conflict'}}))).to.equal('Conflict')
  })

  it('maps each status to a kind, keeps the Status message on one line with the status, and keeps the cause', () => {
    const cases: Array<[number, string]> = [
      [400, 'InvalidArgument'],
      [401, 'Unauthenticated'],
      [403, 'PermissionDenied'],
      [404, 'NotFound'],
      [409, 'FailedPrecondition'],
      [422, 'InvalidArgument'],
      [429, 'Unavailable'],
      [500, 'Unavailable'],
      [503, 'Unavailable'],
      [418, 'Internal'],
    ]
    for (const [code, kind] of cases) {
      const cause = apiException(code, {message: 'the server refused it', reason: 'Something'})
      const e = kubeError(cause, 'cannot create pod p')
      expect(e.kind, String(code)).to.equal(kind)
      expect(e.message, String(code)).to.equal(`cannot create pod p: the server refused it (HTTP ${code})`)
      expect(e.details).to.deep.include({status: code, reason: 'Something'})
      expect(e.cause).to.equal(cause)
    }
    // a message that already names the status is not told it twice
    expect(kubeError(apiException(404, {message: 'pods "p" not found (404)'}), 'get').message).to.equal('get: pods "p" not found (404)')
  })

  it('without a Status body: the status alone, never client-node\'s dump; a body that is not JSON gives its first line', () => {
    const bare = Object.assign(new Error('HTTP-Code: 502\nMessage: Unknown API Status Code!\nBody: undefined\nHeaders: {}'), {code: 502})
    expect(kubeError(bare, 'list pods').message).to.equal('list pods: HTTP 502')
    expect(kubeError(apiException(500, 'upstream broke\n<html>…'), 'list pods').message).to.equal('list pods: upstream broke (HTTP 500)')
  })

  it('a network failure is Unavailable and names the socket error under "fetch failed"', () => {
    const socket = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), {code: 'ECONNREFUSED'})
    const fetchFailed = new TypeError('fetch failed', {cause: socket})
    const e = kubeError(fetchFailed, 'cannot reach the API server')
    expect(e.kind).to.equal('Unavailable')
    expect(e.message).to.equal('cannot reach the API server: connect ECONNREFUSED 127.0.0.1:6443')
    const several = new TypeError('fetch failed', {cause: new AggregateError([Object.assign(new Error('connect EHOSTUNREACH 10.0.0.1:443'), {code: 'EHOSTUNREACH'})], 'x')})
    expect(kubeError(several, 'list').message).to.equal('list: connect EHOSTUNREACH 10.0.0.1:443')
    const coded = Object.assign(new Error('socket hang up'), {code: 'ECONNRESET'})
    expect(kubeError(coded, 'watch').message).to.equal('watch: socket hang up (ECONNRESET)')
    const already = new FnrError('Usage', 'as it was')
    expect(kubeError(already, 'anything')).to.equal(already)
  })

  it('retries 429, 5xx and network failures; not other statuses, nor other errors', () => {
    expect(isRetryableApiError(apiException(429, {}))).to.equal(true)
    expect(isRetryableApiError(apiException(503, {}))).to.equal(true)
    expect(isRetryableApiError(apiException(409, {}))).to.equal(false)
    expect(isRetryableApiError(apiException(404, {}))).to.equal(false)
    expect(isRetryableApiError(Object.assign(new Error('x'), {code: 'ETIMEDOUT'}))).to.equal(true)
    expect(isRetryableApiError(new TypeError('fetch failed', {cause: Object.assign(new Error('x'), {code: 'ENOTFOUND'})}))).to.equal(true)
    expect(isRetryableApiError(Object.assign(new Error('x'), {code: 'EACCES'}))).to.equal(false)
    expect(isRetryableApiError(new FnrError('Unavailable', 'x'))).to.equal(true)
    expect(isRetryableApiError(new FnrError('Internal', 'x'))).to.equal(false)
    expect(isRetryableApiError(new FnrError('Unavailable', 'x', {details: {status: 409}}))).to.equal(false)
  })
})
