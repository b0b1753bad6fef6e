/**
 * The real catalog functions answer byte for byte the same whether `fnr serve` runs them in a
 * process started for the call or in one pre-started before it (docs/process.md "Pre-started
 * functions"): each corpus case through a server with the pool off, then twice through one with
 * it on (the second call takes the process the first one left waiting).
 */
import type * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {prestartStats} from '../../src/lib/process/prestart-stats.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {argsConfigMap, BUILD_TIMEOUT_MS, catalogBed, CORPUS_CONFIGS, corpusPackages, corpusResourceList, readConfig, stableOutput, writePackage, CATALOG_YAML, type CatalogBed} from './support.js'

interface Answer {
  ok: boolean
  bytes: Buffer
  log: string
  code?: number
}

async function call(client: EvaluatorClient, image: string, input: Buffer): Promise<Answer> {
  try {
    const r = await client.evaluateRaw(image, input, {deadline: Date.now() + 120_000})
    return {ok: true, bytes: stableOutput(r.resourceList), log: r.log.toString()}
  } catch (err) {
    const e = err as grpc.ServiceError
    return {ok: false, bytes: Buffer.from(e.details ?? ''), log: '', code: e.code}
  }
}

describe('catalog functions: pre-started processes answer as fresh ones', function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let work: string
  let bed: CatalogBed
  const servers: RunningServer[] = []
  const clients: EvaluatorClient[] = []

  async function serve(perImage: number): Promise<EvaluatorClient> {
    const options = serveOptions({configPath: bed.configPath, functionsDir: bed.functionsDir})
    options.exec.prestart = {perImage, idleTtlMs: 60_000}
    const running = await startInProcess(options)
    servers.push(running)
    const client = new EvaluatorClient(`127.0.0.1:${running.port}`)
    clients.push(client)
    return client
  }

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    work = await temp.make('fnr-catalog-prestart-')
    bed = await catalogBed(work)
  })
  after(async () => {
    for (const c of clients) c.close()
    await Promise.all(servers.map((s) => s.stop()))
    await temp.cleanup()
  })

  it('every corpus case: the same output, log, or failure with the pool on (a hit) and off', async function () {
    this.timeout(10 * 60_000)
    const off = await serve(0)
    const on = await serve(1)
    const onLauncher = servers.at(-1)!.launcher
    const entries = await readConfig(CATALOG_YAML)
    const [pkg] = corpusPackages(1, 7)
    let hits = 0
    let cases = 0
    for (const fn of bed.built) {
      const image = entries.find((e) => e.function === fn)!.images.at(-1)!
      for (const [ci, cfg] of CORPUS_CONFIGS[fn]!.entries()) {
        const dir = path.join(work, fn, String(ci))
        await writePackage(dir, pkg!)
        const input = await corpusResourceList(dir, cfg.fnConfig ?? argsConfigMap(cfg.args))
        const label = `${fn} / ${cfg.label}`
        const fresh = await call(off, image, input)
        await call(on, image, input)
        // Every process the pool started has its pid (it is running, blocked on stdin) before the next call.
        await new Promise((r) => setTimeout(r, 10))
        while (onLauncher.idleFunctions.size !== prestartStats().size) await new Promise((r) => setTimeout(r, 10))
        const before = prestartStats().hits
        const pooled = await call(on, image, input)
        hits += prestartStats().hits - before
        expect({ok: pooled.ok, code: pooled.code, log: pooled.log}, label).to.deep.equal({ok: fresh.ok, code: fresh.code, log: fresh.log})
        expect(Buffer.compare(pooled.bytes, fresh.bytes), `${label}: bytes`).to.equal(0)
        cases++
      }
    }
    expect(cases).to.be.greaterThan(10)
    expect(hits, 'every second call took a pre-started process').to.equal(cases)
  })
})
