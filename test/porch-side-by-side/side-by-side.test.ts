/**
 * A second client and Porch's own runner, side by side with fnr (docs/catalog-functions.md).
 *
 * The Go client calls as porch-server does (grpc-go, Porch's generated client, no deadline, 6 MiB
 * limits, only resource_list read, errors as text). The same conformance corpus goes through fnr
 * serve and through Porch v1.5.8's func/server, both on one config.yaml and functions dir (the
 * real catalog binaries, Porch's layout, plus shell functions): successful outputs must be
 * byte-identical (set-namespace's list of changed namespaces, in Go map order, sorted first),
 * failures must fail on both with the same gRPC code and carry what the function
 * said.
 */
import {expect} from 'chai'

import {buildGoClient, buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {BUILD_TIMEOUT_MS, stableOutput} from '../catalog/support.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {conformanceCorpus, goClient, grpcCode, runnerBed, startPorchRunner, stopRunners, type CorpusCase, type GoReply, type PorchRunner, type RunnerBed} from './support.js'

/** The corpus's small input (its `cat` case's). */
const small = (corpus: CorpusCase[]): string => corpus.find((c) => c.name === 'cat')!.input.toString()

describe('a Go client and Porch\'s own runner side by side with fnr serve', function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let goclient: string
  let porchServer: string
  let bed: RunnerBed
  let corpus: CorpusCase[]
  let fnr: ServeProcess | undefined
  let porch: PorchRunner | undefined
  let fromFnr: GoReply[]
  let fromPorch: GoReply[]

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    goclient = buildGoClient()
    porchServer = buildPorchRunner().server
    const work = await temp.make('fnr-side-by-side-')
    bed = await runnerBed(work)
    corpus = await conformanceCorpus(work)
    fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
    porch = await startPorchRunner(porchServer, bed)
  })

  after(async () => {
    await stopRunners(fnr, porch)
    await temp.cleanup()
  })

  it('the Go client runs the conformance corpus against fnr serve: every case answers, as porch-server would see it', async function () {
    this.timeout(10 * 60_000)
    fromFnr = await goClient(goclient, `127.0.0.1:${fnr!.port}`, corpus)
    expect(fromFnr.map((r) => r.name)).to.deep.equal(corpus.map((c) => c.name))
    const by = new Map(fromFnr.map((r) => [r.name, r]))
    expect(by.get('bare name')!.error).to.equal(undefined)
    expect(by.get('bare name')!.output.toString()).to.contain('namespace: ns1')
    expect(by.get('cat')!.output.toString()).to.equal(corpus.find((c) => c.name === 'cat')!.input.toString())
    expect(by.get('2 MiB through cat')!.output.length).to.equal(corpus.find((c) => c.name === '2 MiB through cat')!.input.length)
    expect(grpcCode(by.get('unknown image')!.error)).to.equal('NotFound')
    expect(by.get('unknown image')!.error).to.match(/^func eval "example\.com\/not-there:v1" failed: rpc error: code = NotFound desc = /)
    expect(grpcCode(by.get('7 MiB (over the client limit)')!.error)).to.equal('ResourceExhausted')
    expect(by.get('exit 2')!.error).to.contain('bad things happened')
    expect(by.get('failure with results')!.error).to.contain('fatal: boom')
    // Before 2026-12-01 fnr gave functions socketpairs: the script failed (ENXIO on /dev/stderr).
    expect(by.get('stdio by name (/dev/stdin)')!.error).to.equal(undefined)
    expect(by.get('stdio by name (/dev/stdin)')!.output.toString()).to.equal(small(corpus))
    const ok = fromFnr.filter((r) => r.error === undefined)
    expect(ok.length).to.be.greaterThan(corpus.length / 2)
    for (const r of ok) expect(r.output.toString(), r.name).to.match(/^(apiVersion|\{)/)
  })

  it('Porch\'s runner gives byte-identical outputs and failures with the same gRPC code, on the same corpus', async function () {
    this.timeout(10 * 60_000)
    fromPorch = await goClient(goclient, `127.0.0.1:${porch!.port}`, corpus)
    expect(fromPorch.map((r) => r.name)).to.deep.equal(corpus.map((c) => c.name))
    let identical = 0
    let failedOnBoth = 0
    for (const [i, p] of fromPorch.entries()) {
      const f = fromFnr[i]!
      const label = `${p.name}\n  porch: ${p.error ?? 'ok'}\n  fnr:   ${f.error ?? 'ok'}`
      if (p.name === 'bare name') {
        // fnr's one documented extension: a name without a registry gets --default-image-prefix
        // (porch-server adds that prefix itself before calling; Porch's runner matches exactly).
        expect(grpcCode(p.error), label).to.equal('NotFound')
        expect(f.error, label).to.equal(undefined)
        continue
      }
      if (p.error === undefined) {
        expect(f.error, label).to.equal(undefined)
        // Byte for byte, but for set-namespace's namespace list in Go map order (stableOutput).
        expect(stableOutput(f.output).toString(), label).to.equal(stableOutput(p.output).toString())
        expect(Buffer.compare(stableOutput(f.output), stableOutput(p.output)), label).to.equal(0)
        identical++
      } else {
        expect(f.error, label).to.be.a('string')
        expect(grpcCode(f.error), label).to.equal(grpcCode(p.error))
        failedOnBoth++
      }
    }
    expect(fromPorch.find((r) => r.name === 'stdio by name (/dev/stdin)')!.error).to.equal(undefined)
    expect(identical).to.be.greaterThan(10)
    expect(failedOnBoth).to.be.greaterThan(3)
  })

  it('what the function said reaches the client from both runners when it fails', () => {
    for (const name of ['exit 2', 'failure with results']) {
      const p = fromPorch.find((r) => r.name === name)!
      const f = fromFnr.find((r) => r.name === name)!
      const said = name === 'exit 2' ? 'bad things happened' : 'fatal: boom'
      expect(p.error, `porch: ${name}`).to.contain(said)
      expect(f.error, `fnr: ${name}`).to.contain(said)
    }
  })
})
