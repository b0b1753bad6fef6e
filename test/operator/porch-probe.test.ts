/**
 * The fnr image's /home/nonroot/grpc-health-probe (src/bin/grpc-health-probe.ts, lib/grpc/health-probe.ts; test/porch-side-by-side/health-probe.test.ts compares it with grpc-ecosystem's), which Porch's Deployment runs as
 * its readiness probe: grpc-health-probe's flags and exit codes, against a real grpc.health.v1 server (grpc-js with
 * grpc-health-check, as fnr serves it), run as a program the way the image's script runs it (dist/, built).
 */
import {execFile} from 'node:child_process'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {HealthImplementation} from 'grpc-health-check'

import {REPO_ROOT} from '../support/serve.js'

const PROBE = path.join(REPO_ROOT, 'dist', 'bin', 'grpc-health-probe.js')

/** Runs the probe (asynchronously: the server under test lives in this process). */
function probe(args: string[]): Promise<{code: number | null; err: string}> {
  return new Promise((resolve) => {
    execFile(process.execPath, [PROBE, ...args], {encoding: 'utf8', timeout: 30_000}, (error, _stdout, stderr) => resolve({code: error ? ((error as {code?: number}).code ?? null) : 0, err: stderr}))
  })
}

describe("the runner image's grpc-health-probe (Porch's readiness probe)", function () {
  this.timeout(60_000)
  let server: grpc.Server
  let port: number
  let health: HealthImplementation

  before(async () => {
    server = new grpc.Server()
    health = new HealthImplementation({'': 'SERVING', down: 'NOT_SERVING'})
    health.addToServer(server)
    port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))))
  })
  after(() => server.forceShutdown())

  it('exits 0 and says SERVING for Porch\'s command line shape (-addr localhost:PORT)', async () => {
    const r = await probe(['-addr', `localhost:${port}`])
    expect(r.code, r.err).to.equal(0)
    expect(r.err).to.equal('status: SERVING\n')
    expect((await probe([`--addr=127.0.0.1:${port}`])).code).to.equal(0)
  })

  it('exits 4 for NOT_SERVING, 3 for an unknown service, 2 when nothing listens, 1 for bad arguments', async () => {
    const down = await probe(['-addr', `localhost:${port}`, '-service', 'down'])
    expect(down.code).to.equal(4)
    expect(down.err).to.contain('service unhealthy (responded with "NOT_SERVING")')
    const unknown = await probe(['-addr', `localhost:${port}`, '-service', 'nope'])
    expect(unknown.code).to.equal(3)
    expect(unknown.err).to.equal('error: health rpc failed: rpc error: code = NotFound desc = Health status unknown for service nope\n')
    const closed = await probe(['-addr', 'localhost:1', '-connect-timeout', '300ms'])
    expect(closed.code).to.equal(2)
    expect(closed.err).to.contain('failed to connect service "localhost:1" within 300ms')
    for (const bad of [[], ['-addr'], ['-nope', 'x'], ['-addr', 'x:1', '-rpc-timeout', 'soon'], ['stray']]) expect((await probe(bad)).code, JSON.stringify(bad)).to.equal(1)
  })

  it('a server that does not speak the health protocol is an RPC failure (3)', async () => {
    const other = new grpc.Server()
    const otherPort = await new Promise<number>((resolve, reject) => other.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))))
    try {
      const r = await probe(['-addr', `localhost:${otherPort}`])
      expect(r.code).to.equal(3)
      expect(r.err).to.contain('does not implement the grpc health protocol')
    } finally {
      other.forceShutdown()
    }
  })
})
