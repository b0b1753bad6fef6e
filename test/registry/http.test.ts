/**
 * One HTTP exchange of the registry client (src/lib/registry/http.ts) against an in-process
 * loopback server: the body and headers, the request body's length, the size cap (an error for a
 * 2xx body, a truncation for an error body), a sink for large bodies, the deadline and an abort.
 */
import http from 'node:http'
import type {AddressInfo} from 'node:net'

import {expect} from 'chai'

import {BodyTooLargeError, formatMs, httpRequest, RequestTimeoutError, type HttpRequestOptions} from '../../src/lib/registry/http.js'

describe('registry HTTP: one exchange', () => {
  let server: http.Server
  let base: string
  const agent = new http.Agent({keepAlive: false})
  const seen: Array<{method?: string; length?: string; body: string}> = []

  before(async () => {
    server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (d: Buffer) => (body += d.toString()))
      req.on('end', () => {
        seen.push({method: req.method, length: req.headers['content-length'], body})
        const url = new URL(req.url!, 'http://x')
        if (url.pathname === '/ok') {
          res.writeHead(200, {'content-type': 'text/plain', 'x-test': 'yes'}).end('hello')
        } else if (url.pathname === '/big') {
          res.writeHead(200).end(Buffer.alloc(5000, 'b'))
        } else if (url.pathname === '/huge') {
          res.writeHead(200).end(Buffer.alloc(200_000, 'h'))
        } else if (url.pathname === '/error') {
          res.writeHead(500).end(Buffer.alloc(100_000, 'e'))
        } else if (url.pathname === '/slow') {
          res.writeHead(200)
          res.write('start')
          // never ends: the client's deadline or abort must end it
        } else {
          res.writeHead(404).end('no')
        }
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })

  after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    agent.destroy()
  })

  const options = (o: Partial<HttpRequestOptions> = {}): HttpRequestOptions => ({agent, timeoutMs: 5000, maxBytes: 1024 * 1024, ...o})

  it('returns the status, headers, body and URL; a request body goes with its length', async () => {
    const res = await httpRequest(new URL(`${base}/ok`), options({method: 'POST', body: 'payload', headers: {'x-sent': '1'}}))
    expect(res.status).to.equal(200)
    expect(res.headers['x-test']).to.equal('yes')
    expect(res.body.toString()).to.equal('hello')
    expect(res.url.href).to.equal(`${base}/ok`)
    expect(seen.at(-1)).to.deep.equal({method: 'POST', length: '7', body: 'payload'})
    const missing = await httpRequest(new URL(`${base}/nothing`), options({method: 'HEAD'}))
    expect(missing.status).to.equal(404)
  })

  it('a 2xx body over maxBytes fails with BodyTooLargeError; an error body is cut to the cap (at most 64 KiB) instead', async () => {
    const err = await httpRequest(new URL(`${base}/huge`), options({maxBytes: 1000})).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(BodyTooLargeError)
    expect((err as BodyTooLargeError).message).to.equal(`response from ${base}/huge is larger than 1000 bytes`)
    expect((err as BodyTooLargeError).code).to.equal('FNR_BODY_TOO_LARGE')
    // A body that comes in one chunk too (it used to end before the refusal settled, as an empty success).
    const oneChunk = await httpRequest(new URL(`${base}/big`), options({maxBytes: 1000})).catch((e: unknown) => e)
    expect(oneChunk).to.be.instanceOf(BodyTooLargeError)
    const small = await httpRequest(new URL(`${base}/error`), options({maxBytes: 1000}))
    expect(small.status).to.equal(500)
    expect(small.body.length).to.equal(1000)
    const capped = await httpRequest(new URL(`${base}/error`), options())
    expect(capped.body.length).to.equal(64 * 1024)
  })

  it('a sink gets a 2xx body as it comes (the response\'s own body stays empty), never an error body', async () => {
    const got: Buffer[] = []
    let begun = 0
    const sink = {begin: () => begun++, write: (c: Buffer) => got.push(c)}
    const res = await httpRequest(new URL(`${base}/big`), options({sink}))
    expect(begun).to.equal(1)
    expect(Buffer.concat(got).length).to.equal(5000)
    expect(res.body.length).to.equal(0)
    got.length = 0
    const failed = await httpRequest(new URL(`${base}/error`), options({sink, maxBytes: 10}))
    expect(begun).to.equal(1)
    expect(got).to.deep.equal([])
    expect(failed.body.toString()).to.equal('e'.repeat(10))
  })

  it('ends at its deadline with RequestTimeoutError, and at once when aborted, with the signal\'s reason', async () => {
    const err = await httpRequest(new URL(`${base}/slow`), options({timeoutMs: 200})).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(RequestTimeoutError)
    expect((err as RequestTimeoutError).message).to.equal(`no response from ${base}/slow within 200ms`)
    const abort = new AbortController()
    const pending = httpRequest(new URL(`${base}/slow`), options({signal: abort.signal})).catch((e: unknown) => e)
    setTimeout(() => abort.abort(new Error('stop')), 50)
    expect(((await pending) as Error).message).to.equal('stop')
    const before = new AbortController()
    before.abort(new Error('already'))
    expect(((await httpRequest(new URL(`${base}/ok`), options({signal: before.signal})).catch((e: unknown) => e)) as Error).message).to.equal('already')
  })

  it('says durations in whole seconds when they are, else in ms', () => {
    expect(formatMs(30_000)).to.equal('30s')
    expect(formatMs(1500)).to.equal('1500ms')
    expect(formatMs(0)).to.equal('0s')
  })
})
