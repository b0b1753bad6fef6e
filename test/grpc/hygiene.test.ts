/**
 * HTTP/2 hygiene of fnr's listeners (src/lib/grpc/hygiene.ts, docs/limits.md) and their
 * addresses: streams per connection, partial messages past the budget or the receive timeout,
 * sockets that never send the preface, idle connections (and Porch's busy one, which stays), accept
 * errors at the file-descriptor limit, and listening on every address family by default.
 */
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdtemp, rm} from 'node:fs/promises'
import http2 from 'node:http2'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {CallBudget, deriveBudget} from '../../src/lib/budget.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {http2ServersOf} from '../../src/lib/grpc/internals.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {MiB, RL, h2, startServer} from '../support/grpc-listener.js'
import {makeReliabilityFunctions} from '../support/reliability/functions.js'
import {BIN_RUN} from '../support/serve.js'

/** A protobuf varint. */
function varint(n: number): Buffer {
  const out: number[] = []
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80)
    n = Math.floor(n / 128)
  }
  out.push(n)
  return Buffer.from(out)
}

/** Opens an EvaluateFunction stream declaring `declared` bytes and sends `sent` of them; resolves with its RST code when it closes. */
function partialStream(session: http2.ClientHttp2Session, declared: number, sent: number): Promise<number> {
  const s = session.request({':method': 'POST', ':path': '/evaluator.FunctionEvaluator/EvaluateFunction', 'content-type': 'application/grpc', te: 'trailers'}, {endStream: false})
  s.on('error', () => {})
  s.on('data', () => {})
  const header = Buffer.alloc(5)
  header.writeUInt32BE(declared, 1)
  s.write(header)
  s.write(Buffer.alloc(sent, 0x61))
  return new Promise((resolve) => s.on('close', () => resolve(s.rstCode ?? -1)))
}

/**
 * Sends a `size`-byte request on a raw stream, its second half 300 ms after the first; resolves with
 * the status and message it was answered with, whether that answer came before the request was
 * complete, and the stream's RST code.
 */
async function refusedOnTheWire(session: http2.ClientHttp2Session, size: number): Promise<{status?: string; message?: string; refused?: string; early: boolean; rstCode: number}> {
  const s = session.request({':method': 'POST', ':path': '/evaluator.FunctionEvaluator/EvaluateFunction', 'content-type': 'application/grpc', te: 'trailers'}, {endStream: false})
  s.on('error', () => {})
  s.on('data', () => {})
  let headers: http2.IncomingHttpHeaders | undefined
  s.on('response', (h) => (headers = h))
  const closed = new Promise<void>((resolve) => s.on('close', () => resolve()))
  const header = Buffer.alloc(5)
  header.writeUInt32BE(size, 1)
  s.write(header)
  s.write(Buffer.alloc(size / 2, 0x61))
  await new Promise((r) => setTimeout(r, 300))
  const early = headers !== undefined
  s.end(Buffer.alloc(size - size / 2, 0x61))
  await closed
  return {status: headers?.['grpc-status'] as string | undefined, message: headers?.['grpc-message'] === undefined ? undefined : decodeURIComponent(headers['grpc-message'] as string), refused: headers?.['fnr-refused'] as string | undefined, early, rstCode: s.rstCode ?? -1}
}

describe('gRPC listener hygiene', function () {
  this.timeout(30_000)
  const servers: EvaluatorServer[] = []
  afterEach(() => {
    for (const s of servers.splice(0)) s.forceShutdown()
  })

  it('resets a stream whose message stalls for the receive timeout, and frees what it held', async () => {
    const server = await startServer({http2: {receiveTimeoutMs: 300}})
    servers.push(server)
    const session = await h2(`127.0.0.1:${server.port}`)
    const started = Date.now()
    const code = await partialStream(session, 200_000, 100_000)
    expect(code).to.equal(http2.constants.NGHTTP2_CANCEL)
    expect(Date.now() - started).to.be.within(250, 5000)
    expect(server.budget.snapshot().heldBytes).to.equal(0)
    session.destroy()
    // The server goes on serving.
    const client = new EvaluatorClient(`127.0.0.1:${server.port}`)
    expect((await client.evaluateRaw('x', RL)).resourceList.equals(RL)).to.equal(true)
    client.close()
  })

  it('never resets a request that keeps arriving, however long it takes past the receive timeout', async () => {
    // Before, the timeout counted from the stream's opening: a valid upload slowed by a busy
    // runner (or sharing its connection's window with other large requests) was reset CANCEL.
    const server = await startServer({http2: {receiveTimeoutMs: 300}})
    servers.push(server)
    const client = http2.connect(`http://127.0.0.1:${server.port}`)
    client.on('error', () => {})
    const s = client.request({':method': 'POST', ':path': '/evaluator.FunctionEvaluator/EvaluateFunction', 'content-type': 'application/grpc', te: 'trailers'}, {endStream: false})
    s.on('error', () => {})
    const reply: Buffer[] = []
    s.on('data', (c: Buffer) => reply.push(c))
    let trailers: http2.IncomingHttpHeaders | undefined
    s.on('trailers', (t) => (trailers = t))
    s.on('response', (h) => (trailers ??= h['grpc-status'] === undefined ? undefined : h))
    const closed = new Promise<number>((resolve) => s.on('close', () => resolve(s.rstCode ?? -1)))
    // An EvaluateFunction request (field 1, the ResourceList) sent in 200-byte pieces, one every
    // 50 ms: about 4 KiB/s, 1.8 s in all (six windows), never a whole window without bytes.
    const resourceList = Buffer.concat([RL, Buffer.from(`# ${'x'.repeat(7000)}\n`)])
    const field = Buffer.concat([Buffer.from([0x0a]), varint(resourceList.length), resourceList, Buffer.from([0x12, 1, 0x78])])
    const frame = Buffer.alloc(5 + field.length)
    frame.writeUInt32BE(field.length, 1)
    field.copy(frame, 5)
    const started = Date.now()
    for (let at = 0; at < frame.length; at += 200) {
      s.write(frame.subarray(at, Math.min(frame.length, at + 200)))
      await new Promise((r) => setTimeout(r, 50))
    }
    s.end()
    const code = await closed
    expect(Date.now() - started).to.be.above(1500)
    expect(code, 'not reset').to.equal(http2.constants.NGHTTP2_NO_ERROR)
    expect(trailers?.['grpc-status'], JSON.stringify(trailers)).to.equal('0')
    expect(Buffer.concat(reply).includes(resourceList)).to.equal(true)
    client.destroy()
  })

  it('resets a refused request that stalls while the client is still sending it', async () => {
    const budget = new CallBudget({...deriveBudget({memoryLimitBytes: 1024 * MiB}), maxHeldBytes: 1 * MiB})
    const server = await startServer({budget, http2: {receiveTimeoutMs: 300}})
    servers.push(server)
    const session = await h2(`127.0.0.1:${server.port}`)
    const started = Date.now()
    // Over the budget at once (refused, its bytes dropped), then nothing more: reset CANCEL once
    // a whole window passes without bytes, never answered (the client has not finished).
    const code = await partialStream(session, 2 * MiB, 1.5 * MiB)
    expect(code).to.equal(http2.constants.NGHTTP2_CANCEL)
    expect(Date.now() - started).to.be.within(250, 5000)
    expect(server.budget.snapshot().heldBytes).to.equal(0)
    session.destroy()
  })

  it('refuses a message that would pass the budget of bytes held (RESOURCE_EXHAUSTED), and serves the rest', async () => {
    const budget = new CallBudget({...deriveBudget({memoryLimitBytes: 1024 * MiB}), maxHeldBytes: 3 * MiB})
    const server = await startServer({budget})
    servers.push(server)
    const session = await h2(`127.0.0.1:${server.port}`)
    const hog = partialStream(session, 2_500_000, 2_400_000)
    const client = new EvaluatorClient(`127.0.0.1:${server.port}`)
    // Wait until the hog's bytes are held.
    for (let i = 0; i < 100 && budget.snapshot().heldBytes < 2_000_000; i++) await new Promise((r) => setTimeout(r, 20))
    // On the wire: the RESOURCE_EXHAUSTED status once the client has sent its whole request, then
    // the stream ends as a call's does (no reset). A reset with or a turn after the status broke
    // connections, or lost the status (hygiene.ts, refuseWhenSent).
    const wire = await refusedOnTheWire(session, 2 * MiB)
    expect(wire.status, JSON.stringify(wire)).to.equal('8')
    expect(wire.message).to.match(/too many request bytes .*; retry later$/)
    // the call did not run: fnr's client sends it again (client.ts refusedOverHeldBytes)
    expect(wire.refused).to.equal('held-bytes')
    expect(wire.early, 'answered before the request was complete').to.equal(false)
    expect(wire.rstCode).to.equal(http2.constants.NGHTTP2_NO_ERROR)
    // grpc-js reads the status too: a bare reset reached it on Node 26 as UNAVAILABLE "Write
    // error" (its write of the rest of the message failed first), which the pod runtime takes for a
    // dead pod.
    const err = await client.evaluateRaw('x', Buffer.alloc(2 * MiB, 0x61)).then(() => undefined, (e: grpc.ServiceError) => e)
    expect(err?.code, String(err)).to.equal(grpc.status.RESOURCE_EXHAUSTED)
    expect(err?.details).to.match(/too many request bytes .*; retry later$/)
    expect((await client.evaluateRaw('x', RL)).resourceList.equals(RL)).to.equal(true)
    session.destroy()
    expect(await hog).to.be.a('number')
    for (let i = 0; i < 100 && budget.snapshot().heldBytes > 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(budget.snapshot().heldBytes).to.equal(0)
    expect((await client.evaluateRaw('x', Buffer.alloc(2 * MiB, 0x61))).resourceList.length).to.equal(2 * MiB)
    client.close()
  })

  it('refusals over the budget free their stream: more refusals than the stream limit on one connection, then calls still run', async () => {
    const budget = new CallBudget({...deriveBudget({memoryLimitBytes: 1024 * MiB}), maxHeldBytes: MiB, maxConcurrentStreams: 2})
    const server = await startServer({budget, http2: {maxConcurrentStreams: 2}})
    servers.push(server)
    const client = new EvaluatorClient(`127.0.0.1:${server.port}`)
    const outcomes: string[] = []
    for (let i = 0; i < 6; i++) outcomes.push(await client.evaluateRaw('x', Buffer.alloc(2 * MiB, 0x61)).then(() => 'ok', (e: grpc.ServiceError) => `${e.code} ${e.details}`))
    // A refused stream that stayed paused after the client's reset kept its slot: from the third on,
    // Node refused every stream of the connection (14 "Write error: … ENHANCE_YOUR_CALM").
    for (const o of outcomes) expect(o).to.match(/^8 the runner is holding too many request bytes/)
    expect((await client.evaluateRaw('x', RL)).resourceList.equals(RL)).to.equal(true)
    for (let i = 0; i < 100 && budget.snapshot().heldBytes > 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(budget.snapshot().heldBytes).to.equal(0)
    client.close()
  })

  it('closes sockets that never send the HTTP/2 preface after the handshake timeout; clients that speak stay', async () => {
    const server = await startServer({http2: {handshakeTimeoutMs: 300}})
    servers.push(server)
    const silent = net.connect({host: '127.0.0.1', port: server.port})
    silent.on('error', () => {})
    silent.resume()
    const started = Date.now()
    await once(silent, 'close')
    expect(Date.now() - started).to.be.within(200, 5000)
    const session = await h2(`127.0.0.1:${server.port}`)
    await new Promise((r) => setTimeout(r, 600))
    expect(session.closed || session.destroyed).to.equal(false)
    session.destroy()
  })

  it('a runner whose event loop was held up past the handshake timeout keeps the connections whose preface arrived meanwhile', async () => {
    const server = await startServer({http2: {handshakeTimeoutMs: 200}})
    servers.push(server)
    // The runner's loop is busy for 500 ms once the connection is accepted and its timer set (the client's
    // preface and SETTINGS arrive meanwhile), so the timeout is due before the preface is read.
    const busy = (): void => {
      const until = Date.now() + 500
      while (Date.now() < until) {
        // hold the event loop
      }
    }
    const [h2server] = http2ServersOf((server as unknown as {server: grpc.Server}).server)
    let first = true
    h2server!.on('session', () => {
      if (first) busy()
      first = false
    })
    const session = http2.connect(`http://127.0.0.1:${server.port}`)
    session.on('error', () => {})
    await once(session, 'remoteSettings')
    await new Promise((r) => setTimeout(r, 400))
    expect(session.closed || session.destroyed, 'the connection was closed').to.equal(false)
    const client = new EvaluatorClient(`127.0.0.1:${server.port}`)
    expect((await client.evaluateRaw('x', RL)).resourceList.equals(RL)).to.equal(true)
    client.close()
    session.destroy()
  })

  it('sends GOAWAY to a connection idle for --connection-idle-timeout; a connection that keeps calling stays, and an idle client reconnects', async () => {
    // The idle timeout is 1.2 s and the busy connection calls every ~100 ms: with 500 ms and 150 ms a CI
    // run at niceness 10 on a loaded machine saw the test's own timer late enough to leave a 500 ms gap.
    const server = await startServer({http2: {connectionIdleMs: 1200}})
    servers.push(server)
    const idle = await h2(`127.0.0.1:${server.port}`)
    const goaway = once(idle, 'goaway')
    const busy = await h2(`127.0.0.1:${server.port}`)
    let busyGoaway = false
    busy.on('goaway', () => (busyGoaway = true))
    const client = new EvaluatorClient(`127.0.0.1:${server.port}`)
    const until = Date.now() + 2400
    while (Date.now() < until) {
      await new Promise<void>((resolve) => {
        const s = busy.request({':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers'})
        s.on('error', () => resolve())
        s.on('data', () => {})
        s.on('close', () => resolve())
        s.end(Buffer.from([0, 0, 0, 0, 0]))
      })
      await new Promise((r) => setTimeout(r, 100))
    }
    await goaway
    expect(busyGoaway, 'the connection that keeps calling got GOAWAY').to.equal(false)
    expect((await client.evaluateRaw('x', RL)).resourceList.equals(RL)).to.equal(true)
    await new Promise((r) => setTimeout(r, 1700))
    expect((await client.evaluateRaw('x', RL)).resourceList.equals(RL)).to.equal(true)
    client.close()
    idle.destroy()
    busy.destroy()
  })

  it('wrapper-server --bind-address chooses the address; at the file-descriptor limit it closes what it cannot accept and goes on', async function () {
    this.timeout(60_000)
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-emfile-'))
    const fns = await makeReliabilityFunctions(dir)
    // 40 descriptors: node needs ~25 of its own, so 60 silent sockets pass the limit. libuv then
    // accepts and closes each connection it has no descriptor for (the client sees it closed
    // at once); an accept error it does report is logged by the guard, never fatal.
    const child = spawn('/bin/sh', ['-c', 'ulimit -n 40 && exec "$@"', 'sh', process.execPath, BIN_RUN, 'wrapper-server', '--port=0', '--bind-address=::1', '--handshake-timeout=4s', '--', path.join(fns.functionsDir, 'catBinary')], {stdio: ['ignore', 'ignore', 'pipe'], env: {...process.env, FNR_BIND_ADDRESS: ''}})
    let err = ''
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
    const sockets: net.Socket[] = []
    try {
      for (let i = 0; i < 300 && !/wrapper server is ready/.test(err); i++) await new Promise((r) => setTimeout(r, 100))
      const port = Number(/"port":(\d+)/.exec(err.split('\n').find((l) => /wrapper server is ready/.test(l)) ?? '')?.[1])
      expect(port, err).to.be.greaterThan(0)
      let closedEarly = 0
      for (let i = 0; i < 60; i++) {
        const s = net.connect({host: '::1', port})
        s.on('error', () => {})
        s.resume()
        s.on('close', () => closedEarly++)
        sockets.push(s)
      }
      await new Promise((r) => setTimeout(r, 1500))
      expect(closedEarly, 'connections over the descriptor limit closed at once').to.be.greaterThan(0)
      expect(closedEarly, 'connections within the limit wait for the handshake timeout').to.be.below(60)
      expect(child.exitCode, err).to.equal(null)
      // The silent sockets are closed after the handshake timeout; then calls work again.
      for (let i = 0; i < 100 && closedEarly < 60; i++) await new Promise((r) => setTimeout(r, 100))
      expect(closedEarly).to.equal(60)
      const client = new EvaluatorClient(`[::1]:${port}`)
      expect((await client.evaluateRaw('x', RL, {deadline: Date.now() + 10_000})).resourceList.equals(RL)).to.equal(true)
      client.close()
      const v4 = new EvaluatorClient(`127.0.0.1:${port}`)
      const refused = await v4.evaluateRaw('x', RL, {deadline: Date.now() + 2000}).then(() => undefined, (e: grpc.ServiceError) => e)
      expect(refused?.code).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED])
      v4.close()
      expect(err).to.not.match(/TypeError|uncaught/i)
    } finally {
      sockets.forEach((s) => s.destroy())
      child.kill('SIGKILL')
      await once(child, 'exit').catch(() => {})
      await rm(dir, {recursive: true, force: true})
    }
  })
})
