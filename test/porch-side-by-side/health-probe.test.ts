/**
 * fnr's grpc-health-probe (lib/grpc/health-probe.ts) beside the real one (grpc-ecosystem's
 * grpc-health-probe, which Porch's wrapper-server image ships; test/peers/grpc-health-probe), in
 * one run, on the same servers and command lines. fnr ships it twice, and both are compared:
 * - the runner image's /home/nonroot/grpc-health-probe (dist/bin/grpc-health-probe.js);
 * - the wrapper folder's /wrapper-server-tools/grpc-health-probe (the packaged single executable
 *   run under that name), which Porch's pod templates use as readiness and liveness probe.
 * Exit codes and messages must be the same; after a flag error Go's flag package prints its usage,
 * so there only the first line is compared. Deliberate difference: -tls (and ALTS, SPIFFE) are
 * refused with exit 1 and a clear message, where grpc-health-probe dials TLS to a plaintext server
 * and times out (exit 2).
 */
import {execFile} from 'node:child_process'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {HealthImplementation} from 'grpc-health-check'

import {buildHealthProbe} from '../../scripts/catalog-peers.mjs'
import {REPO_ROOT} from '../support/serve.js'
import {packagedFolder} from '../wrapper/support/package.js'
import {packagedInterpreter} from '../wrapper/support/process.js'

interface ProbeRun {
  code: number | null
  err: string
}

function run(file: string, args: string[]): Promise<ProbeRun> {
  return new Promise((resolve) => {
    execFile(file, args, {encoding: 'utf8', timeout: 30_000}, (error, _stdout, stderr) => resolve({code: error ? ((error as {code?: number}).code ?? null) : 0, err: stderr}))
  })
}

function listen(server: grpc.Server): Promise<number> {
  return new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))))
}

describe("grpc-health-probe: fnr's beside grpc-ecosystem's (Porch's wrapper image ships it)", function () {
  this.timeout(300_000)
  let probes: Record<'go' | 'fnr-runner-image' | 'fnr-wrapper-folder', (args: string[]) => Promise<ProbeRun>>
  const servers: grpc.Server[] = []
  let healthy: number
  let bare: number
  let hung: number
  const seen: grpc.Metadata[] = []

  before(async () => {
    const goProbe = buildHealthProbe()
    const folder = await packagedFolder()
    const ld = packagedInterpreter(folder)
    probes = {
      go: (args) => run(goProbe, args),
      'fnr-runner-image': (args) => run(process.execPath, [path.join(REPO_ROOT, 'dist', 'bin', 'grpc-health-probe.js'), ...args]),
      'fnr-wrapper-folder': (args) => run(ld, ['--library-path', path.join(folder, 'lib'), path.join(folder, 'grpc-health-probe'), ...args]),
    }
    const withHealth = new grpc.Server()
    new HealthImplementation({'': 'SERVING', down: 'NOT_SERVING', unknown: 'UNKNOWN'}).addToServer(withHealth)
    const without = new grpc.Server()
    // A Health service whose Check records the request's metadata and never answers.
    const never = new grpc.Server()
    never.addService(
      {
        Check: {
          path: '/grpc.health.v1.Health/Check',
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      {Check: (call: grpc.ServerUnaryCall<Buffer, Buffer>) => void seen.push(call.metadata)},
    )
    servers.push(withHealth, without, never)
    ;[healthy, bare, hung] = await Promise.all(servers.map(listen)) as [number, number, number]
  })
  after(() => servers.forEach((s) => s.forceShutdown()))

  /** Runs ARGS through the three probes, one after another; returns {go, fnr…}. */
  async function all(args: string[]): Promise<Record<string, ProbeRun>> {
    const out: Record<string, ProbeRun> = {}
    for (const [name, probe] of Object.entries(probes)) out[name] = await probe(args)
    return out
  }

  function same(args: string[], runs: Record<string, ProbeRun>, compare: (err: string) => string = (e) => e): void {
    const go = runs.go!
    for (const [name, r] of Object.entries(runs)) {
      if (name === 'go') continue
      expect({code: r.code, err: compare(r.err)}, `${name} ${JSON.stringify(args)}`).to.deep.equal({code: go.code, err: compare(go.err)})
    }
  }

  it('answers as grpc-health-probe does: SERVING, NOT_SERVING, UNKNOWN, unknown service, no health service, nothing listening', async () => {
    const cases = [
      ['-addr', `localhost:${healthy}`],
      [`--addr=127.0.0.1:${healthy}`],
      ['-addr', `localhost:${healthy}`, '-service', 'down'],
      ['-addr', `localhost:${healthy}`, '-service', 'unknown'],
      ['-addr', `localhost:${healthy}`, '-service', 'nope'],
      ['-addr', `localhost:${bare}`],
      ['-addr', 'localhost:1', '-connect-timeout', '300ms'],
      ['-addr', 'localhost:1'],
      // Go's flag package stops at the first argument that is not a flag
      ['-addr', `localhost:${healthy}`, 'stray', '-nope'],
    ]
    for (const args of cases) {
      const runs = await all(args)
      same(args, runs)
    }
    const serving = await all(['-addr', `localhost:${healthy}`])
    expect(serving.go).to.deep.equal({code: 0, err: 'status: SERVING\n'})
  })

  it('times the RPC out as grpc-health-probe does, and sends its -rpc-header metadata', async () => {
    const args = ['-addr', `localhost:${hung}`, '-rpc-timeout', '400ms', '-rpc-header', 'X-Probe-From: side by side', '-user-agent', 'kubelet-probe']
    const runs = await all(args)
    same(args, runs)
    expect(runs.go!.code).to.equal(3)
    expect(seen).to.have.length(3)
    for (const md of seen) {
      expect(md.get('x-probe-from')).to.deep.equal(['side by side'])
      expect(String(md.get('user-agent')[0])).to.match(/^kubelet-probe/)
    }
  })

  it('refuses bad command lines as grpc-health-probe does (exit 1, its first line)', async () => {
    const firstLine = (e: string): string => e.split('\n')[0]!
    for (const args of [[], ['-addr'], ['-nope', 'x'], ['-addr', 'x:1', '-rpc-timeout', 'soon'], ['-addr', 'x:1', '-rpc-timeout', '0'], ['-addr', 'x:1', '-connect-timeout=-1s'], ['stray'], ['-v=maybe', '-addr', 'x:1'], ['---addr', 'x:1'], ['-h'], ['-addr', 'x:1', '-rpc-header', 'nocolon']]) {
      const runs = await all(args)
      same(args, runs, firstLine)
      expect(runs.go!.code, JSON.stringify(args)).to.equal(1)
    }
  })

  it('refuses -tls with a clear message where grpc-health-probe times out dialling TLS to a plaintext server', async () => {
    const runs = await all(['-addr', `localhost:${healthy}`, '-tls', '-connect-timeout', '300ms'])
    expect(runs.go!.code).to.equal(2)
    for (const name of ['fnr-runner-image', 'fnr-wrapper-folder']) expect(runs[name]).to.deep.equal({code: 1, err: 'error: -tls is not supported: this probe speaks plaintext gRPC only\n'})
  })
})
