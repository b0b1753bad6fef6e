import http2 from 'node:http2'
import type {AddressInfo} from 'node:net'

import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {loopbackFor, primeFirstCall} from '../../src/lib/first-call.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {eventually} from '../support/k8s/fixtures.js'
import {memoryLogger, type LogLine} from '../support/memory-logger.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'

/** Waits for the debug line of a priming and returns its fields. */
async function primed(lines: LogLine[]): Promise<{parts: string[]; ms: number}> {
  const line = await eventually(() => lines.find((l) => l.msg === 'first call primed'), 20_000, 10)
  return line.fields as {parts: string[]; ms: number}
}

describe('first-call priming (first-call.ts)', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('dials loopback for a wildcard bind and the address itself otherwise', () => {
    expect(loopbackFor('')).to.equal('127.0.0.1')
    expect(loopbackFor('::')).to.equal('127.0.0.1')
    expect(loopbackFor('0.0.0.0')).to.equal('127.0.0.1')
    expect(loopbackFor('::1')).to.equal('[::1]')
    expect(loopbackFor('[::1]')).to.equal('[::1]')
    expect(loopbackFor('10.1.2.3')).to.equal('10.1.2.3')
    expect(loopbackFor('localhost')).to.equal('localhost')
  })

  it('a started server primes both paths itself, and none of it is a call', async () => {
    const fns = await makeFunctionsDir(await temp.make())
    const logger = memoryLogger()
    const running = await startInProcess(serveOptions(fns), logger)
    try {
      const fields = await primed(logger.lines)
      expect(fields.parts).to.deep.equal(['health check', 'process'])
      // The process was a call of the launcher's own, and it is over.
      expect(running.launcher.liveCalls.size).to.equal(0)
      // No call was logged or counted: a health Check and a process without an image.
      expect(logger.lines.filter((l) => l.level === 'request')).to.deep.equal([])
      expect(running.server.activeCalls).to.equal(0)
      // And the server then answers as before.
      const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
      try {
        const res = await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL, {deadline: Date.now() + 20_000})
        expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
      } finally {
        client.close()
      }
    } finally {
      await running.stop()
      await running.done
    }
  })

  it('a server on ::1 is dialled there', async () => {
    const fns = await makeFunctionsDir(await temp.make())
    const logger = memoryLogger()
    const running = await startInProcess(serveOptions({...fns, host: '::1'}), logger)
    try {
      expect((await primed(logger.lines)).parts).to.deep.equal(['health check', 'process'])
    } finally {
      await running.stop()
      await running.done
    }
  })

  it('sends one health Check with an empty request in a gRPC frame', async () => {
    const seen: {path?: string; contentType?: string; body: Buffer[]} = {body: []}
    const server = http2.createServer()
    server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
      seen.path = String(headers[':path'])
      seen.contentType = String(headers['content-type'])
      stream.on('data', (c: Buffer) => seen.body.push(c))
      stream.on('end', () => {
        stream.respond({':status': 200, 'content-type': 'application/grpc'}, {waitForTrailers: true})
        stream.on('wantTrailers', () => stream.sendTrailers({'grpc-status': '0'}))
        stream.end(Buffer.from([0, 0, 0, 0, 2, 8, 1]))
      })
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const logger = memoryLogger()
    try {
      await primeFirstCall({port: (server.address() as AddressInfo).port, host: '127.0.0.1', tls: false}, undefined, logger)
      expect(seen.path).to.equal('/grpc.health.v1.Health/Check')
      expect(seen.contentType).to.equal('application/grpc')
      expect(Buffer.concat(seen.body)).to.deep.equal(Buffer.alloc(5))
      expect((await primed(logger.lines)).parts).to.deep.equal(['health check'])
    } finally {
      await new Promise((r) => server.close(r))
    }
  })

  it('skips the plaintext check on a TLS listener, and never rejects when the server is gone', async () => {
    const launcher = new ProcessLauncher('direct')
    try {
      const logger = memoryLogger()
      await primeFirstCall({port: 1, host: '127.0.0.1', tls: true}, launcher, logger)
      expect((await primed(logger.lines)).parts).to.deep.equal(['process'])

      // Nothing listens on the port: the failure is in the debug line, not an error.
      const probe = http2.createServer()
      await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r))
      const port = (probe.address() as AddressInfo).port
      await new Promise((r) => probe.close(r))
      const gone = memoryLogger()
      await primeFirstCall({port, host: '127.0.0.1', tls: false}, undefined, gone)
      const [part] = (await primed(gone.lines)).parts
      expect(part).to.match(/^health check: .*ECONNREFUSED/)
      expect(gone.lines.filter((l) => l.level !== 'debug')).to.deep.equal([])
    } finally {
      await launcher.close()
    }
  })
})
