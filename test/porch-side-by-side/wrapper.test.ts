/**
 * The in-pod side, side by side: fnr's wrapper server and Porch v1.5.8's wrapper-server (built from
 * the module proxy), each fronting the same function binary as in a function pod, called by the
 * Go client (as porch-server's pod runtime is reached through the runner). Per function, the
 * conformance corpus cases of that function: byte-identical outputs, failures with the same gRPC
 * code that carry what the function said.
 */
import {expect} from 'chai'
import path from 'node:path'

import {buildGoClient, buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {startWrapperServer} from '../../src/lib/wrapper.js'
import {BUILD_TIMEOUT_MS, readConfig, stableOutput} from '../catalog/support.js'
import {TempDirs} from '../support/tmp.js'
import {conformanceCorpus, goClient, grpcCode, runnerBed, startPorchWrapper, type CorpusCase, type RunnerBed} from './support.js'

describe('fnr\'s wrapper server and Porch\'s wrapper-server side by side', function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let goclient: string
  let wrapperServer: string
  let bed: RunnerBed
  let byFunction: Map<string, CorpusCase[]>

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    goclient = buildGoClient()
    wrapperServer = buildPorchRunner().wrapperServer
    const work = await temp.make('fnr-wrapper-side-by-side-')
    bed = await runnerBed(work)
    const corpus = await conformanceCorpus(work)
    const entries = await readConfig(bed.configPath)
    byFunction = new Map()
    for (const c of corpus) {
      const fn = entries.find((e) => e.images.includes(c.image))?.function
      if (!fn) continue
      byFunction.set(fn, [...(byFunction.get(fn) ?? []), c])
    }
  })
  after(() => temp.cleanup())

  it('every function of the corpus: byte-identical outputs, and failures with the same gRPC code carrying the function\'s stderr', async function () {
    this.timeout(10 * 60_000)
    expect([...byFunction.keys()]).to.include.members(['set-namespace', 'apply-setters', 'starlark', 'cat', 'exit-2', 'fail-with-results', 'dev-stdio'])
    let identical = 0
    let failedOnBoth = 0
    for (const [fn, cases] of byFunction) {
      const entrypoint = [path.join(bed.functionsDir, fn)]
      const fnr = await startWrapperServer({port: 0, host: '127.0.0.1', maxRequestBodySize: 6 * 1024 * 1024, entrypoint, gracePeriodMs: 2000}, silentLogger, false)
      const porch = await startPorchWrapper(wrapperServer, entrypoint)
      try {
        const fromFnr = await goClient(goclient, `127.0.0.1:${fnr.port}`, cases)
        const fromPorch = await goClient(goclient, `127.0.0.1:${porch.port}`, cases)
        for (const [i, p] of fromPorch.entries()) {
          const f = fromFnr[i]!
          const label = `${fn}: ${p.name}\n  porch: ${p.error ?? 'ok'}\n  fnr:   ${f.error ?? 'ok'}`
          if (p.error === undefined) {
            expect(f.error, label).to.equal(undefined)
            expect(stableOutput(f.output).toString(), label).to.equal(stableOutput(p.output).toString())
            expect(Buffer.compare(stableOutput(f.output), stableOutput(p.output)), label).to.equal(0)
            identical++
          } else {
            expect(f.error, label).to.be.a('string')
            expect(grpcCode(f.error), label).to.equal(grpcCode(p.error))
            failedOnBoth++
          }
        }
        if (fn === 'exit-2') for (const r of [...fromFnr, ...fromPorch]) expect(r.error).to.contain('bad things happened')
        // Pipes as the function's stdio on both (fnr gave socketpairs before 2026-12-01: ENXIO).
        if (fn === 'dev-stdio') for (const r of [...fromFnr, ...fromPorch]) expect(r.error).to.equal(undefined)
        if (fn === 'fail-with-results') for (const r of [...fromFnr, ...fromPorch]) expect(r.error).to.contain('fatal: boom')
      } finally {
        await fnr.stop()
        await porch.stop()
      }
    }
    expect(identical).to.be.greaterThan(10)
    expect(failedOnBoth).to.be.greaterThan(3)
  })
})
