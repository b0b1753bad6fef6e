/**
 * Porch's Deployment turns its runner's metrics on with OpenTelemetry's variables
 * (../shared/compat/porch/head/porch_2-function-runner.yaml: OTEL_METRICS_EXPORTER=prometheus,
 * OTEL_EXPORTER_PROMETHEUS_HOST=0.0.0.0, OTEL_EXPORTER_PROMETHEUS_PORT=9464,
 * OTEL_TRACES_EXPORTER=none, OTEL_SERVICE_NAME). fnr serve started with exactly that env (only the
 * port is a free one instead of 9464, which the shared test machine cannot promise) serves its
 * Prometheus metrics there, on IPv4 and IPv6, and keeps tracing off.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'
import {parseAllDocuments} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {prometheusFromOtelEnv} from '../../src/lib/telemetry/metrics.js'
import {FnrError} from '../../src/lib/errors.js'
import {freePort} from '../support/registry/tools.js'
import {makeFunctionsDir, REPO_ROOT, startServeProcess, type ServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {httpGet} from './prom-text.js'

const DEPLOYMENT = path.join(REPO_ROOT, '../shared/compat/porch/head/porch_2-function-runner.yaml')

/** The plain `value:` env of the function-runner container in Porch's Deployment. */
async function porchEnv(): Promise<Record<string, string>> {
  const docs = parseAllDocuments(await readFile(DEPLOYMENT, 'utf8')).map((d) => d.toJS() as {kind?: string; spec?: {template?: {spec?: {containers?: Array<{name: string; env?: Array<{name: string; value?: string}>}>}}}})
  const deployment = docs.find((d) => d?.kind === 'Deployment')!
  const container = deployment.spec!.template!.spec!.containers!.find((c) => c.name === 'function-runner')!
  return Object.fromEntries(container.env!.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]))
}

describe('Porch\'s OTEL metrics variables', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let serve: ServeProcess | undefined
  let env: Record<string, string>
  let port: number

  before(async () => {
    env = await porchEnv()
    expect(env).to.deep.include({OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_HOST: '0.0.0.0', OTEL_EXPORTER_PROMETHEUS_PORT: '9464', OTEL_TRACES_EXPORTER: 'none'})
    port = await freePort()
    const fns = await makeFunctionsDir(await temp.make())
    // Porch's runner env; the pod runtime (its WRAPPER_SERVER_IMAGE) needs a cluster, so exec only.
    serve = await startServeProcess(['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`], {...env, OTEL_EXPORTER_PROMETHEUS_PORT: String(port)})
  })
  after(async () => {
    serve?.child.kill('SIGTERM')
    await serve?.exited
    await temp.cleanup()
  })

  it('serves fnr\'s Prometheus metrics on OTEL_EXPORTER_PROMETHEUS_HOST:PORT, IPv4 and IPv6, and counts calls', async () => {
    const client = new EvaluatorClient(`127.0.0.1:${serve!.port}`)
    await client.evaluateRaw('example.com/cat:v1', Buffer.from(SAMPLE_RL)).catch(() => undefined)
    client.close()
    for (const host of ['127.0.0.1', '[::1]']) {
      const res = await httpGet(`http://${host}:${port}/metrics`)
      expect(res.status, host).to.equal(200)
      expect(res.body).to.match(/^fnr_evaluations_total\{.*\} 1$/m)
      expect(res.body).to.contain('fnr_admission_total')
      expect(res.body).to.contain('fnr_calls_queued 0')
    }
    expect(serve!.stderr()).to.match(new RegExp(`"metricsPort":${port}.*"msg":"fnr serve is ready"`))
  })

  it('keeps tracing off with OTEL_TRACES_EXPORTER=none', () => {
    expect(serve!.stderr()).to.not.contain('OpenTelemetry tracing on')
  })

  it('reads the variables as OpenTelemetry defines them', () => {
    expect(prometheusFromOtelEnv({})).to.equal(undefined)
    expect(prometheusFromOtelEnv({OTEL_METRICS_EXPORTER: 'none'})).to.equal(undefined)
    expect(prometheusFromOtelEnv({OTEL_METRICS_EXPORTER: 'prometheus'})).to.deep.equal({host: 'localhost', port: 9464})
    expect(prometheusFromOtelEnv({OTEL_METRICS_EXPORTER: 'otlp, prometheus', OTEL_EXPORTER_PROMETHEUS_HOST: '0.0.0.0', OTEL_EXPORTER_PROMETHEUS_PORT: '9464'})).to.deep.equal({host: '::', port: 9464})
    expect(prometheusFromOtelEnv({OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_HOST: '[::1]', OTEL_EXPORTER_PROMETHEUS_PORT: '19464'})).to.deep.equal({host: '::1', port: 19464})
    expect(prometheusFromOtelEnv({OTEL_METRICS_EXPORTER: 'prometheus', OTEL_SDK_DISABLED: 'true'})).to.equal(undefined)
    expect(() => prometheusFromOtelEnv({OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_PORT: 'ninety'})).to.throw(FnrError, /OTEL_EXPORTER_PROMETHEUS_PORT must be a port number/)
  })
})
