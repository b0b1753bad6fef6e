import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {isClientNodeModule, traceServeModules} from '../support/module-trace.js'
import {freePort} from '../support/registry/tools.js'
import {BIN_RUN, REPO_ROOT, makeFunctionsDir} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('metrics, the response cache and OpenTelemetry cost nothing when off', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('`fnr serve` loads neither prom-client, lru-cache nor OpenTelemetry unless --metrics-port / --cache-ttl / OTEL_* turn them on (module-resolution trace)', async () => {
    const dir = await temp.make()
    const fns = await makeFunctionsDir(dir)
    const noOtel = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')))
    const run = async (args: string[], env: NodeJS.ProcessEnv = {}): Promise<string[]> =>
      (await traceServeModules(dir, ['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, ...args], {...noOtel, ...env})).modules
    const loads = (modules: string[], name: string): boolean => modules.some((u) => u.includes(`/node_modules/${name}/`))
    const off = await run([])
    expect(off.some((u) => u.includes('/dist/lib/serve.js'))).to.equal(true)
    expect(loads(off, 'prom-client')).to.equal(false)
    expect(loads(off, 'lru-cache')).to.equal(false)
    expect(loads(off, '@opentelemetry/api')).to.equal(false)
    const on = await run([`--metrics-port=${await freePort()}`, '--cache-ttl=1m'])
    expect(loads(on, 'prom-client')).to.equal(true)
    expect(loads(on, 'lru-cache')).to.equal(true)
    expect(loads(on, '@opentelemetry/api')).to.equal(false)
    // Porch's Deployment sets OTEL_TRACES_EXPORTER=none: off, nothing loaded.
    const porch = await run([], {OTEL_TRACES_EXPORTER: 'none', OTEL_SERVICE_NAME: 'porch-function-runner', OTEL_METRICS_EXPORTER: 'prometheus'})
    expect(porch.some((u) => u.includes('/dist/lib/serve.js'))).to.equal(true)
    expect(porch.some((u) => u.includes('/node_modules/@opentelemetry/'))).to.equal(false)
    const traced = await run([], {OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces'})
    expect(loads(traced, '@opentelemetry/sdk-trace-base')).to.equal(true)
    expect(loads(traced, '@opentelemetry/exporter-trace-otlp-http')).to.equal(true)
  })

  it('`fnr eval` never loads OpenTelemetry, prom-client or lru-cache (module-resolution trace)', async () => {
    const dir = await temp.make()
    const fns = await makeFunctionsDir(dir)
    const trace = path.join(dir, 'modules.txt')
    await writeFile(trace, '')
    const hook = path.join(REPO_ROOT, 'test', 'support', 'pods', 'module-trace.mjs')
    const input = path.join(dir, 'cm.yaml')
    await writeFile(input, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n')
    const child = spawn(process.execPath, ['--import', hook, BIN_RUN, 'eval', '--input', input, '--exec', path.join(fns.functionsDir, 'cat')], {
      env: {...process.env, FNR_MODULE_TRACE: trace, OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9'},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child.stdout!.resume()
    child.stderr!.resume()
    const [code] = await once(child, 'exit')
    expect(code).to.equal(0)
    const modules = (await readFile(trace, 'utf8')).split('\n').filter((l) => l !== '')
    expect(modules.length).to.be.greaterThan(0)
    for (const name of ['@opentelemetry/', 'prom-client/', 'lru-cache/']) expect(modules.some((u) => u.includes(`/node_modules/${name}`)), name).to.equal(false)
    expect(modules.filter(isClientNodeModule), '@kubernetes/client-node').to.deep.equal([])
  })
})
