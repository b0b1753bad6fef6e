/**
 * FNR_DNS_SERVER's gRPC resolver (src/lib/grpc/dns-server.ts), in process: a scripted DNS server on
 * UDP loopback answers A queries, a grpc-js server on 127.0.0.1 stands for the function pod. The
 * same resolver against the test DNS server fed by the real control plane is test/node/dns.test.ts.
 */
import dgram from 'node:dgram'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {HealthImplementation} from 'grpc-health-check'

import {DNS_SERVER_SCHEME, dnsServerTarget, parseDnsServer} from '../../src/lib/grpc/dns-server.js'
import {answer, parseQuestion} from '../support/node/dns.js'

/** How the scripted DNS server answers one query: addresses (NOERROR, maybe none) or an rcode. */
type Reply = string[] | {rcode: number}

class ScriptedDns {
  readonly queries: Array<{name: string; type: number}> = []
  /** Answers in order; the last one repeats. */
  replies: Reply[] = [['127.0.0.1']]

  private constructor(private readonly socket: dgram.Socket) {}

  static async start(): Promise<ScriptedDns> {
    const socket = dgram.createSocket('udp4')
    const dns = new ScriptedDns(socket)
    socket.on('message', (msg, rinfo) => {
      const q = parseQuestion(msg)
      if (!q) return
      dns.queries.push(q.question)
      const reply = dns.replies.length > 1 ? dns.replies.shift()! : dns.replies[0]!
      const [rcode, addrs] = Array.isArray(reply) ? [0, q.question.type === 1 ? reply : []] : [reply.rcode, []]
      socket.send(answer(msg, q.end, rcode, addrs, 0), rinfo.port, rinfo.address)
    })
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject)
      socket.bind(0, '127.0.0.1', () => resolve())
    })
    return dns
  }

  get address(): string {
    return `127.0.0.1:${this.socket.address().port}`
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()))
  }
}

/** grpc.health.v1.Health/Check with an empty request; resolves with the raw response or the error. */
function check(client: grpc.Client, deadlineMs: number, waitForReady = true): Promise<Buffer | grpc.ServiceError> {
  return new Promise((resolve) => {
    client.makeUnaryRequest('/grpc.health.v1.Health/Check', (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), new grpc.Metadata({waitForReady}), {deadline: Date.now() + deadlineMs}, (err, res) => resolve(err ?? res!))
  })
}

describe('FNR_DNS_SERVER: resolving function pod names through a chosen DNS server', function () {
  this.timeout(10_000)

  describe('parseDnsServer', () => {
    it('normalises an IPv4 or bracketed IPv6 address to host:port, 53 by default', () => {
      expect(parseDnsServer('10.96.0.10')).to.equal('10.96.0.10:53')
      expect(parseDnsServer('10.96.0.10:5353')).to.equal('10.96.0.10:5353')
      expect(parseDnsServer('[fd00::a]')).to.equal('[fd00::a]:53')
      expect(parseDnsServer('\t[::1]:65535\n')).to.equal('[::1]:65535')
      expect(parseDnsServer('1.2.3.4:1')).to.equal('1.2.3.4:1')
    })

    it('refuses names, a bare IPv6 address, what only looks like an address, ports out of range and schemes, quoting the value', () => {
      for (const bad of ['kube-dns.kube-system', '::1', '[::1]:0', '1.2.3.4:65536', '1.2.3.4:', 'udp://1.2.3.4', '1.2.3.4:53:53', '1.2.3', '999.1.1.1', '1.2.3.4.5', '[abc]', '[1.2.3.4]']) {
        expect(() => parseDnsServer(bad), bad).to.throw(`DNS server must be an IP address with an optional port (1.2.3.4, 1.2.3.4:5353, [::1]:5353), got ${JSON.stringify(bad)}`)
      }
    })
  })

  describe('dnsServerTarget', () => {
    it('is the fnr-dns scheme, the normalised server as authority and the name:port as path', () => {
      expect(DNS_SERVER_SCHEME).to.equal('fnr-dns')
      expect(dnsServerTarget(' 10.96.0.10 ', 'cat-v1-1-abc.porch-fn-system.svc.cluster.local:9446')).to.equal('fnr-dns://10.96.0.10:53/cat-v1-1-abc.porch-fn-system.svc.cluster.local:9446')
      expect(() => dnsServerTarget('dns.example', 'x:1')).to.throw(/DNS server must be an IP address/)
    })
  })

  describe('the resolver', () => {
    let dns: ScriptedDns
    let server: grpc.Server
    let port: number
    before(async () => {
      server = new grpc.Server()
      new HealthImplementation({'': 'SERVING'}).addToServer(server)
      port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))))
    })
    beforeEach(async () => {
      dns = await ScriptedDns.start()
    })
    afterEach(() => dns.close())
    after(() => server.forceShutdown())

    const client = (name: string): grpc.Client => new grpc.Client(dnsServerTarget(dns.address, `${name}:${port}`), grpc.credentials.createInsecure(), {'grpc.initial_reconnect_backoff_ms': 100})

    it('asks the chosen server for the A record of the name and calls the address it answers, on the port of the target', async () => {
      const c = client('cat-v1-1-abc.fn.svc.cluster.test')
      try {
        const res = await check(c, 5000)
        expect(res).to.deep.equal(Buffer.from([0x08, 0x01]))
        expect(dns.queries[0]).to.deep.equal({name: 'cat-v1-1-abc.fn.svc.cluster.test', type: 1})
        expect(dns.queries.every((q) => q.type === 1), 'A queries only').to.equal(true)
      } finally {
        c.close()
      }
    })

    it('an empty answer (no ready endpoint yet) is asked again by the resolver itself until there is an address', async () => {
      dns.replies = [[], [], ['127.0.0.1']]
      const c = client('fn-late.fn.svc.cluster.test')
      try {
        const started = Date.now()
        const res = await check(c, 5000)
        expect(res).to.deep.equal(Buffer.from([0x08, 0x01]))
        expect(dns.queries.length).to.be.at.least(3)
        // retried at 100 ms, then 200 ms: well under the seconds grpc-js's own backoff would wait
        expect(Date.now() - started).to.be.lessThan(3000)
      } finally {
        c.close()
      }
    })

    it('a failed lookup fails a call that does not wait for ready as UNAVAILABLE, naming the name', async () => {
      dns.replies = [{rcode: 3}]
      const c = client('nope.fn.svc.cluster.test')
      try {
        const err = (await check(c, 3000, false)) as grpc.ServiceError
        expect(err).to.be.instanceOf(Error)
        expect(err.code).to.equal(grpc.status.UNAVAILABLE)
        expect(err.details).to.match(/^DNS resolution of nope\.fn\.svc\.cluster\.test failed: /)
      } finally {
        c.close()
      }
    })

    it('stops asking once the channel is closed (a retry already scheduled is dropped)', async () => {
      dns.replies = [[]]
      const c = client('gone.fn.svc.cluster.test')
      void check(c, 400)
      const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 50))
      while (dns.queries.length === 0) await pause()
      // the empty answer scheduled a retry in 100 ms; close before it runs
      c.close()
      await pause()
      const asked = dns.queries.length
      for (let i = 0; i < 5; i++) await pause()
      expect(dns.queries.length, 'no query after close').to.equal(asked)
    })
  })
})
