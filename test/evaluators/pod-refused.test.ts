/**
 * The pod evaluator against a pod that refuses streams (HTTP/2 REFUSED_STREAM) and one that drops
 * its connections, through the real grpc-js client: a refused stream is retried and evicts
 * nothing (the pod answered: alive and busy), a dropped connection evicts the pod. The "pods" are
 * node:http2 servers on loopback that answer every stream the one way.
 */
import {expect} from 'chai'
import http2 from 'node:http2'
import type {AddressInfo} from 'node:net'

import {FnrError} from '../../src/lib/errors.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {PodEvaluator} from '../../src/lib/evaluators/pod.js'

const RL = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n')

interface FakePod {
  address: string
  streams: number
  close(): Promise<void>
}

/** An HTTP/2 server answering every stream with `answer`. */
async function fakePod(answer: (stream: http2.ServerHttp2Stream) => void): Promise<FakePod> {
  const server = http2.createServer()
  const pod: FakePod = {address: '', streams: 0, close: () => new Promise((resolve) => server.close(() => resolve()))}
  const sessions = new Set<http2.ServerHttp2Session>()
  server.on('session', (s) => {
    sessions.add(s)
    s.on('close', () => sessions.delete(s))
  })
  server.on('stream', (stream) => {
    pod.streams++
    stream.on('error', () => {})
    // @types/node 26 types the server's stream event with the session's Http2Stream; the server
    // passes a ServerHttp2Stream.
    answer(stream as http2.ServerHttp2Stream)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  pod.address = `127.0.0.1:${(server.address() as AddressInfo).port}`
  const close = pod.close
  pod.close = () => {
    for (const s of sessions) s.destroy()
    return close()
  }
  return pod
}

/** The real pod evaluator with a cache that hands out `client` and records evictions. */
function evaluatorFor(client: EvaluatorClient, evicted: string[], callRetries = 1): PodEvaluator {
  const cache = {
    acquire: async () => ({usable: true, client, slot: {name: 'busy-pod', address: 'x'}, release: () => {}}),
    noteUnavailable: (_slot: unknown, reason: string) => evicted.push(reason),
    describe: async () => ({}),
  }
  return new PodEvaluator({cache: cache as unknown as ConstructorParameters<typeof PodEvaluator>[0]['cache'], callRetries})
}

describe('pod evaluator: a refused stream is retried without evicting the pod; a dropped connection evicts it', function () {
  this.timeout(20_000)
  const pods: FakePod[] = []
  const clients: EvaluatorClient[] = []
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close()
    for (const p of pods.splice(0)) await p.close()
  })

  const big = Buffer.concat([RL, Buffer.alloc(2 * 1024 * 1024, 0x20)])
  for (const [what, code, body] of [
    ['REFUSED_STREAM on a small request (the reset arrives before the client writes: "Stream refused by server")', http2.constants.NGHTTP2_REFUSED_STREAM, RL],
    ['REFUSED_STREAM on a 2 MiB request (the client\'s write may fail first: "Write error: … REFUSED_STREAM")', http2.constants.NGHTTP2_REFUSED_STREAM, big],
    // Node's server refuses a stream over its own stream count this way (its bookkeeping of closed
    // streams lags the protocol under load); grpc-js: "Write error: … ENHANCE_YOUR_CALM".
    ['ENHANCE_YOUR_CALM on a 2 MiB request (Node\'s refusal of a stream over its limit)', http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, big],
  ] as const) {
    it(`${what}: retried, Unavailable with details.refusedStream, no eviction`, async () => {
      const pod = await fakePod((stream) => stream.close(code))
      pods.push(pod)
      const client = new EvaluatorClient(pod.address)
      clients.push(client)
      const evicted: string[] = []
      const err = await evaluatorFor(client, evicted, 2)
        .evaluate({image: 'example.com/fn:v1', resourceList: body, deadline: Date.now() + 10_000})
        .then(() => undefined, (e: unknown) => e)
      expect(err).to.be.instanceOf(FnrError)
      const e = err as FnrError
      expect(evicted).to.deep.equal([])
      // grpc-js reports an ENHANCE_YOUR_CALM reset that arrives before its write fails as
      // RESOURCE_EXHAUSTED ("Bandwidth exhausted…", Node 22): passed on as it is, no retry.
      if (code === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM && e.kind === 'ResourceExhausted') return
      expect(e.kind).to.equal('Unavailable')
      expect(e.details.refusedStream, e.message).to.equal(true)
      expect(e.message).to.match(/^function pod busy-pod for image "example.com\/fn:v1" refused the call \(busy: over its stream limit; the pod stays\)/)
      expect(evicted).to.deep.equal([])
      // grpc-js retries a refused small message once by itself (its transparent retry); either
      // way every one of fnr's three attempts reached the pod.
      expect(pod.streams).to.be.at.least(3)
    })
  }

  it('a connection the pod drops mid-call: Unavailable, the pod is evicted', async () => {
    const pod = await fakePod((stream) => stream.session?.destroy())
    pods.push(pod)
    const client = new EvaluatorClient(pod.address)
    clients.push(client)
    const evicted: string[] = []
    const err = (await evaluatorFor(client, evicted, 1)
      .evaluate({image: 'example.com/fn:v1', resourceList: RL, deadline: Date.now() + 10_000})
      .then(() => undefined, (e: unknown) => e)) as FnrError
    expect(err.kind).to.equal('Unavailable')
    expect(err.details.refusedStream).to.equal(undefined)
    expect(err.message).to.match(/is unavailable: /)
    expect(evicted).to.have.length(2)
  })
})
