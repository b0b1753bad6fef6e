/**
 * gRPC listener hygiene (in process, loopback): the SETTINGS the server announces, a request's bytes
 * counted once, the address families it listens on. The stalls, timeouts and refusals on the wire
 * and the wrapper server's process are in ./hygiene.test.ts.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {CallBudget, deriveBudget} from '../../src/lib/budget.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import type {Evaluator} from '../../src/lib/evaluator.js'
import {MiB, RL, h2, startServer} from '../support/grpc-listener.js'

describe('gRPC listener hygiene (settings, byte count, address families)', function () {
  this.timeout(30_000)
  const servers: EvaluatorServer[] = []
  afterEach(() => {
    for (const s of servers.splice(0)) s.forceShutdown()
  })

  it('announces --max-concurrent-streams (default: twice the calls that may run at once) in its SETTINGS', async () => {
    const server = await startServer({budget: new CallBudget(deriveBudget({memoryLimitBytes: 1024 * MiB}))})
    servers.push(server)
    const session = await h2(`127.0.0.1:${server.port}`)
    expect(session.remoteSettings.maxConcurrentStreams).to.equal(32)
    session.destroy()
    const other = await startServer({http2: {maxConcurrentStreams: 3}})
    servers.push(other)
    const s2 = await h2(`127.0.0.1:${other.port}`)
    expect(s2.remoteSettings.maxConcurrentStreams).to.equal(3)
    s2.destroy()
  })

  it("a call's request is counted once, from its first byte to the call's end (its stream's bytes pass to the call)", async () => {
    let running: () => void = () => {}
    let finish: () => void = () => {}
    const slow: Evaluator = {
      name: 'slow',
      evaluate: async (r) => {
        running()
        await new Promise<void>((resolve) => (finish = resolve))
        return {resourceList: r.resourceList, log: Buffer.alloc(0), evaluator: 'slow'}
      },
      close: async () => {},
    }
    const budget = new CallBudget(deriveBudget({memoryLimitBytes: 1024 * MiB}))
    const server = await startServer({evaluator: slow, budget})
    servers.push(server)
    const client = new EvaluatorClient(`127.0.0.1:${server.port}`)
    const body = Buffer.alloc(MiB, 0x61)
    const started = new Promise<void>((resolve) => (running = resolve))
    const call = client.evaluateRaw('x', body)
    await started
    // Counted once: had the call not claimed its stream's bytes, they would count twice until the
    // stream closed (2 MiB); had it claimed them and the stream released them too, 0.
    expect(budget.snapshot().heldBytes).to.be.within(MiB, MiB + 64)
    finish()
    expect((await call).resourceList.length).to.equal(MiB)
    for (let i = 0; i < 100 && budget.snapshot().heldBytes > 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(budget.snapshot().heldBytes).to.equal(0)
    client.close()
  })

  it('listens on every address family by default (IPv4 and IPv6 clients), on one with a chosen address', async () => {
    const saved = process.env.FNR_BIND_ADDRESS
    delete process.env.FNR_BIND_ADDRESS
    try {
      const any = await startServer({host: undefined})
      servers.push(any)
      for (const address of [`127.0.0.1:${any.port}`, `[::1]:${any.port}`]) {
        const client = new EvaluatorClient(address)
        expect((await client.evaluateRaw('x', RL, {deadline: Date.now() + 5000})).resourceList.equals(RL), address).to.equal(true)
        client.close()
      }
      for (const [host, reachable, unreachable] of [
        ['127.0.0.1', '127.0.0.1', '[::1]'],
        ['::1', '[::1]', '127.0.0.1'],
      ] as const) {
        const one = await startServer({host})
        servers.push(one)
        const ok = new EvaluatorClient(`${reachable}:${one.port}`)
        expect((await ok.evaluateRaw('x', RL, {deadline: Date.now() + 5000})).resourceList.equals(RL)).to.equal(true)
        ok.close()
        const no = new EvaluatorClient(`${unreachable}:${one.port}`)
        const err = await no.evaluateRaw('x', RL, {deadline: Date.now() + 2000}).then(() => undefined, (e: grpc.ServiceError) => e)
        expect(err?.code, `${host} answered on ${unreachable}`).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED])
        no.close()
      }
    } finally {
      if (saved !== undefined) process.env.FNR_BIND_ADDRESS = saved
    }
  })
})
