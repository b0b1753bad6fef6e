/**
 * fnr's grpc-health-probe (src/lib/grpc/health-probe.ts) run in process: its exit codes and
 * grpc-health-probe's wording for each outcome, on a grpc-js health server and on raw HTTP/2 servers
 * on loopback that answer what grpc-js would not (odd statuses, no answer). The same command lines
 * beside grpc-ecosystem's own probe, as processes, are test/porch-side-by-side/health-probe.test.ts;
 * the parser alone is also in test/wrapper/flags.test.ts.
 */
import http2 from 'node:http2'
import type {AddressInfo} from 'node:net'
import {Writable} from 'node:stream'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {HealthImplementation} from 'grpc-health-check'

import {PROBE_EXIT, PROBE_USAGE, ProbeArgumentError, ProbeFlagError, parseProbeArgs, runHealthProbe} from '../../src/lib/grpc/health-probe.js'

class Sink extends Writable {
  text = ''
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString()
    done()
  }
}

interface Run {
  code: number
  err: string
  out: string
}

async function probe(args: string[]): Promise<Run> {
  const err = new Sink()
  const out = new Sink()
  const code = await runHealthProbe(args, err, out)
  return {code, err: err.text, out: out.text}
}

/** One HTTP/2 Check request as a raw server saw it. */
interface Seen {
  headers: http2.IncomingHttpHeaders
  body: Buffer
}

/** A gRPC response frame around a protobuf HealthCheckResponse {status}. */
function statusFrame(status: number): Buffer {
  const body = status === 0 ? Buffer.alloc(0) : Buffer.from([0x08, status])
  const frame = Buffer.alloc(5)
  frame.writeUInt32BE(body.length, 1)
  return Buffer.concat([frame, body])
}

/** A raw h2c server on 127.0.0.1; `answer` handles each stream once its request body is read. */
async function rawServer(answer: (stream: http2.ServerHttp2Stream, seen: Seen) => void): Promise<{port: number; seen: Seen[]; close: () => Promise<void>}> {
  const seen: Seen[] = []
  const server = http2.createServer()
  const sessions = new Set<http2.ServerHttp2Session>()
  server.on('session', (s) => sessions.add(s))
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = []
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('end', () => {
      const s = {headers, body: Buffer.concat(chunks)}
      seen.push(s)
      answer(stream as http2.ServerHttp2Stream, s)
    })
    stream.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => {
      for (const s of sessions) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Answers 200 with BODY and the trailers given. */
function reply(stream: http2.ServerHttp2Stream, body: Buffer, trailers: Record<string, string>): void {
  stream.respond({':status': 200, 'content-type': 'application/grpc'}, {waitForTrailers: true})
  stream.on('wantTrailers', () => stream.sendTrailers(trailers))
  stream.end(body)
}

describe('grpc-health-probe (in process)', function () {
  this.timeout(10_000)

  describe('command line', () => {
    it('a flag error prints Go\'s line and then the usage, exit 1', async () => {
      const r = await probe(['-nope'])
      expect(r).to.deep.equal({code: PROBE_EXIT.invalidArguments, err: `flag provided but not defined: -nope\n${PROBE_USAGE}`, out: ''})
    })

    it('-h and -help print the usage alone, exit 1 (as Go\'s flag package)', async () => {
      for (const h of ['-h', '--help']) expect(await probe([h])).to.deep.equal({code: 1, err: PROBE_USAGE, out: ''})
      let err: unknown
      try {
        parseProbeArgs(['-help'])
      } catch (e) {
        err = e
      }
      expect(err).to.be.instanceOf(ProbeFlagError)
      expect((err as ProbeFlagError).helpOnly).to.equal(true)
    })

    it('an argument error after parsing is one "error:" line, exit 1', async () => {
      expect(await probe([])).to.deep.equal({code: 1, err: 'error: -addr not specified\n', out: ''})
      expect(await probe(['-addr', 'x:1', '-connect-timeout', '-2s'])).to.deep.equal({code: 1, err: 'error: -connect-timeout must be greater than zero (specified: -2s)\n', out: ''})
      expect(() => parseProbeArgs(['-addr', 'x:1', '-spiffe'])).to.throw(ProbeArgumentError, '-spiffe is not supported: this probe speaks plaintext gRPC only')
    })

    it('-version prints what it is on stdout and exits 0 without -addr or a connection', async () => {
      expect(await probe(['-version'])).to.deep.equal({code: 0, err: '', out: "fnr grpc-health-probe (grpc-health-probe's flags and exit codes; plaintext only)\n"})
    })

    it('the usage lists the flags in Go\'s layout: name and type, then a tab-indented line; a one-letter boolean on one line', () => {
      const lines = PROBE_USAGE.split('\n')
      expect(lines[0]).to.equal('Usage:')
      expect(lines.slice(1, 3)).to.deep.equal(['  -addr string', '    \t(required) tcp host:port to connect'])
      expect(lines).to.include('  -connect-timeout duration')
      expect(lines).to.include('  -rpc-header value')
      expect(lines).to.include('  -tls')
      expect(lines).to.include('  -tls-ca-cert string')
      expect(lines).to.include('  -v\tverbose logs')
      expect(PROBE_USAGE.endsWith('\n')).to.equal(true)
    })

    it('-gzip is accepted (requests stay uncompressed), as its usage line says', () => {
      for (const g of ['-gzip', '-gzip=true', '--gzip']) expect(parseProbeArgs(['-addr', 'a:1', g]).addr, g).to.equal('a:1')
      expect(PROBE_USAGE).to.contain('accepted; requests are sent uncompressed')
    })

    it('TLS, ALTS and SPIFFE turned off are accepted; repeated headers are kept in order', () => {
      const flags = parseProbeArgs(['-addr', 'a:1', '-tls=false', '-spiffe=f', '-alts=0', '-rpc-header', 'a: 1', '-rpc-header', 'a:2', '-user-agent', 'kubelet'])
      expect(flags.headers).to.deep.equal([['a', '1'], ['a', '2']])
      expect(flags.userAgent).to.equal('kubelet')
    })
  })

  describe('against a grpc-js health service', () => {
    let server: grpc.Server
    let bare: grpc.Server
    let port: number
    let barePort: number
    before(async () => {
      server = new grpc.Server()
      new HealthImplementation({'': 'SERVING', down: 'NOT_SERVING', unknown: 'UNKNOWN'}).addToServer(server)
      bare = new grpc.Server()
      const bind = (s: grpc.Server): Promise<number> => new Promise((resolve, reject) => s.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))))
      ;[port, barePort] = await Promise.all([bind(server), bind(bare)])
    })
    after(() => {
      server.forceShutdown()
      bare.forceShutdown()
    })

    it('SERVING: exit 0 and "status: SERVING", also through localhost', async () => {
      expect(await probe(['-addr', `127.0.0.1:${port}`])).to.deep.equal({code: PROBE_EXIT.serving, err: 'status: SERVING\n', out: ''})
      expect((await probe([`--addr=localhost:${port}`])).code).to.equal(0)
    })

    it('NOT_SERVING and UNKNOWN: exit 4 naming the status', async () => {
      expect(await probe(['-addr', `127.0.0.1:${port}`, '-service', 'down'])).to.deep.include({code: PROBE_EXIT.unhealthy, err: 'service unhealthy (responded with "NOT_SERVING")\n'})
      expect(await probe(['-addr', `127.0.0.1:${port}`, '-service', 'unknown'])).to.deep.include({code: 4, err: 'service unhealthy (responded with "UNKNOWN")\n'})
    })

    it('an unknown service is grpc-go\'s "rpc error: code = NotFound", exit 3', async () => {
      const r = await probe(['-addr', `127.0.0.1:${port}`, '-service', 'nope'])
      expect(r.code).to.equal(PROBE_EXIT.rpcFailure)
      expect(r.err).to.match(/^error: health rpc failed: rpc error: code = NotFound desc = .+\n$/)
    })

    it('a server without the health service: exit 3, saying it does not implement the protocol', async () => {
      const r = await probe(['-addr', `127.0.0.1:${barePort}`])
      expect(r.code).to.equal(3)
      expect(r.err).to.match(/^error: this server does not implement the grpc health protocol \(grpc\.health\.v1\.Health\): .*\n$/)
    })

    it('-v says the options and the timings before the status, as grpc-health-probe -v', async () => {
      const r = await probe(['-addr', `127.0.0.1:${port}`, '-v', '-rpc-header', 'X-From: test', '-connect-timeout', '2s'])
      expect(r.code).to.equal(0)
      const lines = r.err.trimEnd().split('\n')
      expect(lines.slice(0, 7)).to.deep.equal(['parsed options:', `> addr=127.0.0.1:${port} conn_timeout=2s rpc_timeout=1s`, '> headers: x-from:[test]', '> tls=false', '> alts=false', '> spiffe=false', 'establishing connection'])
      expect(lines[7]).to.match(/^connection established \(took [0-9.]+(µs|ms|s)\)$/)
      expect(lines[8]).to.match(/^time elapsed: connect=[0-9.]+(µs|ms|s) rpc=[0-9.]+(µs|ms|s)$/)
      expect(lines[9]).to.equal('status: SERVING')
      expect(lines).to.have.length(10)
    })
  })

  describe('against raw HTTP/2 servers', () => {
    it('sends grpc-health-probe\'s request: path, authority, timeout, user agent, headers and the service name', async () => {
      const s = await rawServer((stream) => reply(stream, statusFrame(1), {'grpc-status': '0'}))
      try {
        const r = await probe(['-addr', `localhost:${s.port}`, '-service', 'evaluator.FunctionEvaluator', '-rpc-timeout', '1500ms', '-user-agent', 'kube-probe/1.33', '-rpc-header', 'X-A: 1', '-rpc-header', 'x-a: 2'])
        expect(r.code).to.equal(0)
        const {headers, body} = s.seen[0]!
        expect(headers).to.deep.include({':method': 'POST', ':path': '/grpc.health.v1.Health/Check', ':authority': `localhost:${s.port}`, 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': '1500m', 'user-agent': 'kube-probe/1.33'})
        expect(headers['x-a']).to.equal('1, 2')
        const name = Buffer.from('evaluator.FunctionEvaluator')
        expect(body).to.deep.equal(Buffer.concat([Buffer.from([0, 0, 0, 0, name.length + 2, 0x0a, name.length]), name]))
      } finally {
        await s.close()
      }
    })

    it('an empty service name is an empty message', async () => {
      const s = await rawServer((stream) => reply(stream, statusFrame(1), {'grpc-status': '0'}))
      try {
        expect((await probe(['-addr', `127.0.0.1:${s.port}`])).code).to.equal(0)
        expect(s.seen[0]!.body).to.deep.equal(Buffer.from([0, 0, 0, 0, 0]))
        expect(s.seen[0]!.headers['user-agent']).to.equal('grpc_health_probe')
      } finally {
        await s.close()
      }
    })

    it('names each status: SERVICE_UNKNOWN, an unnamed number, and no status field (UNKNOWN)', async () => {
      const statuses = [3, 9, 0]
      const s = await rawServer((stream) => reply(stream, statusFrame(statuses.shift()!), {'grpc-status': '0'}))
      try {
        for (const want of ['"SERVICE_UNKNOWN"', '"9"', '"UNKNOWN"']) expect(await probe(['-addr', `127.0.0.1:${s.port}`])).to.deep.include({code: 4, err: `service unhealthy (responded with ${want})\n`})
      } finally {
        await s.close()
      }
    })

    it('a response it cannot read is an RPC failure in grpc-go\'s words (Internal, failed to unmarshal), exit 3', async () => {
      // field 1 as a length-delimited field of 9 bytes, with 1 byte there
      const body = Buffer.from('0a0901', 'hex')
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, body.length]), body])
      const s = await rawServer((stream) => reply(stream, frame, {'grpc-status': '0'}))
      try {
        expect(await probe(['-addr', `127.0.0.1:${s.port}`])).to.deep.include({code: 3, err: 'error: health rpc failed: rpc error: code = Internal desc = grpc: failed to unmarshal the received message: field of 9 bytes runs past the end of the message\n'})
      } finally {
        await s.close()
      }
    })

    it('words an RPC failure as grpc-go does, the message percent-decoded; a code grpc-go does not name is Code(n)', async () => {
      const trailers: Array<Record<string, string>> = [{'grpc-status': '7', 'grpc-message': 'not%20for%20you'}, {'grpc-status': '42', 'grpc-message': 'odd'}, {}]
      const s = await rawServer((stream) => reply(stream, Buffer.alloc(0), trailers.shift()!))
      try {
        expect(await probe(['-addr', `127.0.0.1:${s.port}`])).to.deep.include({code: 3, err: 'error: health rpc failed: rpc error: code = PermissionDenied desc = not for you\n'})
        expect(await probe(['-addr', `127.0.0.1:${s.port}`])).to.deep.include({code: 3, err: 'error: health rpc failed: rpc error: code = Code(42) desc = odd\n'})
        // no grpc-status at all: Unknown
        expect(await probe(['-addr', `127.0.0.1:${s.port}`])).to.deep.include({code: 3, err: 'error: health rpc failed: rpc error: code = Unknown desc = \n'})
      } finally {
        await s.close()
      }
    })

    it('DEADLINE_EXCEEDED from the server, or no answer within -rpc-timeout, is the timeout line, exit 3', async () => {
      let hang = false
      const s = await rawServer((stream) => (hang ? undefined : reply(stream, Buffer.alloc(0), {'grpc-status': '4'})))
      try {
        expect(await probe(['-addr', `127.0.0.1:${s.port}`, '-rpc-timeout', '250ms'])).to.deep.include({code: 3, err: 'timeout: health rpc did not complete within 250ms\n'})
        hang = true
        const started = Date.now()
        expect(await probe(['-addr', `127.0.0.1:${s.port}`, '-rpc-timeout', '100ms'])).to.deep.include({code: 3, err: 'timeout: health rpc did not complete within 100ms\n'})
        expect(Date.now() - started).to.be.lessThan(2000)
      } finally {
        await s.close()
      }
    })

    it('nothing listening: exit 2, naming the address and the connect timeout', async () => {
      const s = await rawServer(() => {})
      const {port} = s
      await s.close()
      expect(await probe(['-addr', `127.0.0.1:${port}`, '-connect-timeout', '300ms'])).to.deep.equal({code: PROBE_EXIT.connectionFailure, err: `timeout: failed to connect service "127.0.0.1:${port}" within 300ms\n`, out: ''})
      // localhost: 127.0.0.1 and then ::1 are tried, and the line still names localhost
      expect(await probe(['-addr', `localhost:${port}`])).to.deep.include({code: 2, err: `timeout: failed to connect service "localhost:${port}" within 1s\n`})
    })
  })
})
