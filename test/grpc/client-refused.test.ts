/**
 * fnr's gRPC client sends a call again when the server refused it before running it (REFUSED_STREAM,
 * a Node server's ENHANCE_YOUR_CALM refusal), the way grpc-go retries such calls transparently;
 * grpc-js does that at most once, and only for messages under its 256 KiB retry buffer; and when an
 * fnr runner refused it over its budget of held request bytes (a status with the fnr-refused
 * trailer). The servers are node:http2 servers on loopback that refuse the first streams and then
 * answer.
 */
import {expect} from 'chai'
import http2 from 'node:http2'
import type {AddressInfo} from 'node:net'

import * as grpc from '@grpc/grpc-js'

import {FnrError} from '../../src/lib/errors.js'
import {EvaluatorClient, HELD_BYTES_MAX_PAUSE_MS, REFUSED_RETRIES, isRefusal, refusedRetryDelay} from '../../src/lib/grpc/client.js'
import {REFUSED_HELD_BYTES, REFUSED_TRAILER} from '../../src/lib/grpc/metadata.js'

const RL = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n')
const BIG = Buffer.concat([RL, Buffer.alloc(2 * 1024 * 1024, 0x20)])

/** An EvaluateFunctionResponse with `resourceList` (field 1), as one gRPC message. */
function responseFrame(resourceList: Buffer): Buffer {
  const len: number[] = []
  for (let n = resourceList.length; ; n >>>= 7) {
    if (n < 0x80) {
      len.push(n)
      break
    }
    len.push((n & 0x7f) | 0x80)
  }
  const body = Buffer.concat([Buffer.from([0x0a, ...len]), resourceList])
  const head = Buffer.alloc(5)
  head.writeUInt32BE(body.length, 1)
  return Buffer.concat([head, body])
}

interface FakeServer {
  address: string
  streams: number
  close(): Promise<void>
}

/** Answers stream n (from 1) with `answer(n, stream)`. */
async function fakeServer(answer: (n: number, stream: http2.ServerHttp2Stream) => void): Promise<FakeServer> {
  const server = http2.createServer()
  const sessions = new Set<http2.ServerHttp2Session>()
  const fake: FakeServer = {
    address: '',
    streams: 0,
    close: () =>
      new Promise((resolve) => {
        for (const s of sessions) s.destroy()
        server.close(() => resolve())
      }),
  }
  server.on('session', (s) => {
    sessions.add(s)
    s.on('close', () => sessions.delete(s))
  })
  server.on('stream', (stream) => {
    stream.on('error', () => {})
    // @types/node 26 types the server's stream event with the session's Http2Stream; the server
    // passes a ServerHttp2Stream.
    answer(++fake.streams, stream as http2.ServerHttp2Stream)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  fake.address = `127.0.0.1:${(server.address() as AddressInfo).port}`
  return fake
}

/** Reads the whole request, then answers OK with `RL` as the resource list. */
function answerOk(stream: http2.ServerHttp2Stream): void {
  stream.resume()
  stream.on('end', () => {
    stream.respond({':status': 200, 'content-type': 'application/grpc'}, {waitForTrailers: true})
    stream.on('wantTrailers', () => stream.sendTrailers({'grpc-status': '0'}))
    stream.end(responseFrame(RL))
  })
}

describe('gRPC client: a call the server refused before running it is sent again', function () {
  this.timeout(20_000)
  const servers: FakeServer[] = []
  const clients: EvaluatorClient[] = []
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close()
    for (const s of servers.splice(0)) await s.close()
  })
  async function setup(answer: (n: number, stream: http2.ServerHttp2Stream) => void): Promise<{server: FakeServer; client: EvaluatorClient}> {
    const server = await fakeServer(answer)
    servers.push(server)
    const client = new EvaluatorClient(server.address)
    clients.push(client)
    return {server, client}
  }

  for (const [what, code, body] of [
    ['REFUSED_STREAM, small request', http2.constants.NGHTTP2_REFUSED_STREAM, RL],
    ['REFUSED_STREAM, 2 MiB request (grpc-js: "Write error", beyond its own retry buffer)', http2.constants.NGHTTP2_REFUSED_STREAM, BIG],
    ['ENHANCE_YOUR_CALM (a Node server over its stream count), 2 MiB request', http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, BIG],
  ] as const) {
    it(`${what}: the third stream answers, the call succeeds`, async () => {
      const {server, client} = await setup((n, stream) => (n <= 2 ? stream.close(code) : answerOk(stream)))
      const res = await client.evaluateRaw('example.com/fn:v1', body, {deadline: Date.now() + 10_000})
      expect(res.resourceList.toString()).to.equal(RL.toString())
      expect(server.streams).to.equal(3)
    })
  }

  it(`a server that keeps refusing: ${REFUSED_RETRIES + 1} attempts, then Unavailable with details.refusedStream`, async () => {
    const {server, client} = await setup((_n, stream) => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM))
    const err = await client.evaluate('example.com/fn:v1', BIG, {deadline: Date.now() + 10_000}).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Unavailable')
    expect((err as FnrError).details.refusedStream).to.equal(true)
    expect(server.streams).to.equal(REFUSED_RETRIES + 1)
  })

  it("a server's own RESOURCE_EXHAUSTED status (its budget) is not sent again", async () => {
    const {server, client} = await setup((_n, stream) => {
      stream.respond({':status': 200, 'content-type': 'application/grpc', 'grpc-status': '8', 'grpc-message': 'busy'}, {endStream: true})
    })
    const err = (await client.evaluateRaw('example.com/fn:v1', RL, {deadline: Date.now() + 10_000}).then(
      () => undefined,
      (e: unknown) => e,
    )) as grpc.ServiceError
    expect(err.code).to.equal(grpc.status.RESOURCE_EXHAUSTED)
    expect(server.streams).to.equal(1)
  })

  it("an fnr runner's refusal over its held request bytes (RESOURCE_EXHAUSTED with the fnr-refused trailer) is sent again until the runner has room, past REFUSED_RETRIES when the deadline allows", async () => {
    const refusals = REFUSED_RETRIES + 2
    const {server, client} = await setup((n, stream) => {
      if (n > refusals) return answerOk(stream)
      stream.resume()
      stream.on('end', () => stream.respond({':status': 200, 'content-type': 'application/grpc', 'grpc-status': '8', 'grpc-message': 'held', [REFUSED_TRAILER]: REFUSED_HELD_BYTES}, {endStream: true}))
    })
    const res = await client.evaluateRaw('example.com/fn:v1', RL, {deadline: Date.now() + 15_000})
    expect(res.resourceList.toString()).to.equal(RL.toString())
    expect(server.streams).to.equal(refusals + 1)
  })

  it('an abort while waiting to send again ends the call CANCELLED, without another attempt', async () => {
    const controller = new AbortController()
    const {server, client} = await setup((_n, stream) => {
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM)
      setTimeout(() => controller.abort(), 5)
    })
    const err = (await client.evaluateRaw('example.com/fn:v1', RL, {signal: controller.signal}).then(
      () => undefined,
      (e: unknown) => e,
    )) as grpc.ServiceError
    expect(err.code).to.equal(grpc.status.CANCELLED)
    // grpc-js's own transparent retry may have sent the small message twice before fnr saw it.
    expect(server.streams).to.be.at.most(2)
  })

  describe('refusedRetryDelay', () => {
    const refused = {code: grpc.status.UNAVAILABLE, details: 'Stream refused by server'}
    it('pauses 20, 40, … 640 ms for refusals, then gives up', () => {
      expect(Array.from({length: REFUSED_RETRIES + 1}, (_, i) => refusedRetryDelay(refused, i, {}, {now: 0}))).to.deep.equal([20, 40, 80, 160, 320, 640, undefined])
    })
    it('never for other failures, an aborted call, or one whose deadline comes first', () => {
      expect(refusedRetryDelay({code: grpc.status.UNAVAILABLE, details: 'Connection dropped'}, 0)).to.equal(undefined)
      expect(refusedRetryDelay({code: grpc.status.RESOURCE_EXHAUSTED, details: 'the runner is holding too many request bytes'}, 0)).to.equal(undefined)
      const aborted = new AbortController()
      aborted.abort()
      expect(refusedRetryDelay(refused, 0, {signal: aborted.signal})).to.equal(undefined)
      expect(refusedRetryDelay(refused, 2, {deadline: 1_000 + 50}, {now: 1_000})).to.equal(undefined)
      expect(refusedRetryDelay(refused, 2, {deadline: 1_000 + 100}, {now: 1_000})).to.equal(80)
    })
    it("held-bytes refusals: pauses doubling to HELD_BYTES_MAX_PAUSE_MS, spread by a random half, until the deadline; without one, REFUSED_RETRIES times", () => {
      const metadata = new grpc.Metadata()
      metadata.set(REFUSED_TRAILER, REFUSED_HELD_BYTES)
      const held = {code: grpc.status.RESOURCE_EXHAUSTED, details: 'the runner is holding too many request bytes', metadata}
      expect(isRefusal(held)).to.equal(true)
      expect([0, 1, 5, 6, 20].map((i) => refusedRetryDelay(held, i, {deadline: 100_000}, {now: 0, random: () => 1}))).to.deep.equal([20, 40, 640, HELD_BYTES_MAX_PAUSE_MS, HELD_BYTES_MAX_PAUSE_MS])
      expect([0, 6].map((i) => refusedRetryDelay(held, i, {deadline: 100_000}, {now: 0, random: () => 0}))).to.deep.equal([10, HELD_BYTES_MAX_PAUSE_MS / 2])
      expect(refusedRetryDelay(held, 50, {deadline: 10_000}, {now: 9_500, random: () => 1})).to.equal(undefined)
      expect(refusedRetryDelay(held, REFUSED_RETRIES - 1, {}, {now: 0, random: () => 1})).to.equal(640)
      expect(refusedRetryDelay(held, REFUSED_RETRIES, {}, {now: 0, random: () => 1})).to.equal(undefined)
      // the same status without the trailer (a full queue, say) is the server's answer: not retried
      expect(refusedRetryDelay({...held, metadata: new grpc.Metadata()}, 0, {deadline: 100_000}, {now: 0})).to.equal(undefined)
    })
    it('isRefusal: the texts grpc-js gives a refused stream', () => {
      expect(isRefusal({code: grpc.status.UNAVAILABLE, details: 'Write error: Stream closed with error code NGHTTP2_REFUSED_STREAM'})).to.equal(true)
      expect(isRefusal({code: grpc.status.UNAVAILABLE, details: 'Write error: Stream closed with error code NGHTTP2_ENHANCE_YOUR_CALM'})).to.equal(true)
      expect(isRefusal({code: grpc.status.RESOURCE_EXHAUSTED, details: 'Bandwidth exhausted or memory limit exceeded'})).to.equal(true)
      expect(isRefusal({code: grpc.status.INTERNAL, details: 'Received RST_STREAM with code 1'})).to.equal(false)
    })
  })
})
