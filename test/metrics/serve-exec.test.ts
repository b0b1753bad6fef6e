import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {MAX_IMAGE_LABELS} from '../../src/lib/telemetry/metrics.js'
import {freePort} from '../support/registry/tools.js'
import {makeFunctionsDir, startServeProcess, type ServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {httpGet, scrape} from './prom-text.js'

describe('fnr serve --metrics-port (exec runtime, real child processes)', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let serve: ServeProcess
  let client: EvaluatorClient
  let metricsPort: number

  before(async () => {
    const fns = await makeFunctionsDir(await temp.make())
    metricsPort = await freePort()
    serve = await startServeProcess(['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, `--metrics-port=${metricsPort}`])
    client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
  })
  after(async () => {
    client?.close()
    serve?.child.kill('SIGTERM')
    await serve?.exited
    await temp.cleanup()
  })

  it('serves /metrics in the Prometheus text format, /healthz, and 404 elsewhere', async () => {
    const res = await httpGet(`http://127.0.0.1:${metricsPort}/metrics`)
    expect(res.status).to.equal(200)
    expect(res.contentType).to.match(/^text\/plain; version=0\.0\.4/)
    expect(res.body).to.contain('# TYPE fnr_evaluation_duration_seconds histogram')
    expect(res.body).to.contain('# TYPE fnr_evaluations_total counter')
    expect(res.body).to.contain('fnr_process_resident_memory_bytes')
    expect((await httpGet(`http://127.0.0.1:${metricsPort}/healthz`)).body).to.equal('ok\n')
    expect((await httpGet(`http://127.0.0.1:${metricsPort}/nope`)).status).to.equal(404)
    expect(serve.stderr()).to.match(new RegExp(`"metricsPort":${metricsPort}.*"msg":"fnr serve is ready"`))
  })

  it('counts calls by runtime, image and code, and observes their latency', async () => {
    const before = await scrape(metricsPort)
    const cat = 'example.com/cat:v1'
    for (let i = 0; i < 3; i++) await client.evaluateRaw(cat, SAMPLE_RL)
    const fail = await client.evaluateRaw('example.com/failwithresults:v1', SAMPLE_RL).catch((e: grpc.ServiceError) => e)
    expect((fail as grpc.ServiceError).code).to.equal(grpc.status.INTERNAL)
    const missing = await client.evaluateRaw('example.com/unknown:v1', SAMPLE_RL).catch((e: grpc.ServiceError) => e)
    expect((missing as grpc.ServiceError).code).to.equal(grpc.status.NOT_FOUND)
    const empty = await client.evaluateRaw('', SAMPLE_RL).catch((e: grpc.ServiceError) => e)
    expect((empty as grpc.ServiceError).code).to.equal(grpc.status.INVALID_ARGUMENT)
    const after = await scrape(metricsPort)
    const delta = (name: string, labels: Record<string, string>): number => after.value(name, labels) - before.value(name, labels)

    expect(delta('fnr_evaluations_total', {runtime: 'exec', image: cat, code: 'OK'})).to.equal(3)
    expect(delta('fnr_evaluations_total', {runtime: 'exec', image: 'example.com/failwithresults:v1', code: 'INTERNAL'})).to.equal(1)
    // images no runtime served are not labels of their own
    expect(delta('fnr_evaluations_total', {runtime: 'none', image: 'unknown', code: 'NOT_FOUND'})).to.equal(1)
    expect(delta('fnr_evaluations_total', {runtime: 'none', image: 'unknown', code: 'INVALID_ARGUMENT'})).to.equal(1)
    expect(delta('fnr_evaluations_total', {})).to.equal(6)
    // The histogram: 3 observations for cat, cumulative buckets, a positive sum.
    expect(delta('fnr_evaluation_duration_seconds_count', {runtime: 'exec', image: cat})).to.equal(3)
    expect(delta('fnr_evaluation_duration_seconds_bucket', {runtime: 'exec', image: cat, le: '+Inf'})).to.equal(3)
    expect(delta('fnr_evaluation_duration_seconds_sum', {runtime: 'exec', image: cat})).to.be.greaterThan(0)
    const buckets = after.matching('fnr_evaluation_duration_seconds_bucket', {runtime: 'exec', image: cat})
    const values = buckets.map((b) => b.value)
    expect(values).to.deep.equal([...values].sort((a, b) => a - b))
    expect(after.types.get('fnr_evaluation_duration_seconds')).to.equal('histogram')
    expect(after.value('fnr_evaluations_in_flight')).to.equal(0)
  })

  it('500 calls with made-up image names (one with U+202E) leave the labels alone: a real image after them is still labelled by name', async () => {
    const images = Array.from({length: 500}, (_, i) => `example.com/made-up-${i}${i === 7 ? '\u202E' : ''}:v1`)
    await Promise.all(images.map((image) => client.evaluateRaw(image, SAMPLE_RL).catch(() => undefined)))
    await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL)
    const after = await scrape(metricsPort)
    const labels = after.labelValues('fnr_evaluations_total', 'image')
    expect(labels.filter((l) => l.includes('made-up'))).to.deep.equal([])
    expect(labels.length).to.be.at.most(MAX_IMAGE_LABELS)
    expect(labels).to.include('example.com/cat:v1')
    expect(after.text).to.not.contain('\u202E')
    // Every call is still counted.
    expect(after.value('fnr_evaluations_total', {image: 'unknown', code: 'NOT_FOUND'})).to.be.at.least(images.length)
  })
})
