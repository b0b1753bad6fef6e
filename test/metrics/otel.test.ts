import {expect} from 'chai'
import http from 'node:http'
import type {AddressInfo} from 'node:net'

import {stringify} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {Logger} from '../../src/lib/telemetry/log.js'
import {tracingRequested} from '../../src/lib/telemetry/otel.js'
import {inlinePodTemplate, inlineServiceTemplate} from '../../src/lib/pods/model/template.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {listPods, startClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until} from '../support/pods/index.js'
import {makeFunctionsDir, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

interface ReceivedSpan {
  service: string
  name: string
  kind: number
  traceId: string
  spanId: string
  parentSpanId: string
  attributes: Record<string, unknown>
}

/** A fake OTLP/HTTP trace receiver (http/json, what the exporter sends) on 127.0.0.1. */
async function startReceiver(): Promise<{url: string; spans: ReceivedSpan[]; contentTypes: Set<string>; close(): Promise<void>}> {
  const spans: ReceivedSpan[] = []
  const contentTypes = new Set<string>()
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      contentTypes.add(String(req.headers['content-type']))
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end()
        return
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: Array<{resource: {attributes: Array<{key: string; value: {stringValue?: string}}>}; scopeSpans: Array<{spans: Array<Record<string, unknown>>}>}>
      }
      for (const rs of body.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? ''
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) {
            const attributes = Object.fromEntries(((s.attributes ?? []) as Array<{key: string; value: Record<string, unknown>}>).map((a) => [a.key, Object.values(a.value)[0]]))
            spans.push({service, name: String(s.name), kind: Number(s.kind), traceId: String(s.traceId), spanId: String(s.spanId), parentSpanId: String(s.parentSpanId ?? ''), attributes})
          }
        }
      }
      res.writeHead(200, {'content-type': 'application/json'}).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`
  return {url, spans, contentTypes, close: () => new Promise((resolve) => server.close(() => resolve()))}
}

/** A logger at --log-level 3 (request lines), otherwise silent. */
function levelThree(): Logger {
  const none = (): void => {}
  const logger: Logger = {error: none, warn: none, lifecycle: none, info: none, request: none, debug: none, trace: none, enabled: (v) => v <= 3, child: () => logger}
  return logger
}

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'

describe('OpenTelemetry: opt-in through the standard environment', () => {
  it('OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint turns export on; none (Porch\'s Deployment), OTEL_SDK_DISABLED or nothing leave it off', () => {
    expect(tracingRequested({}).on).to.equal(false)
    expect(tracingRequested({OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318'}).on).to.equal(false)
    expect(tracingRequested({OTEL_SERVICE_NAME: 'porch-function-runner', OTEL_METRICS_EXPORTER: 'prometheus', OTEL_TRACES_EXPORTER: 'none'}).on).to.equal(false)
    expect(tracingRequested({OTEL_TRACES_EXPORTER: 'otlp'}).on).to.equal(true)
    expect(tracingRequested({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318'}).on).to.equal(true)
    expect(tracingRequested({OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces'}).on).to.equal(true)
    expect(tracingRequested({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true'}).on).to.equal(false)
    expect(tracingRequested({OTEL_TRACES_EXPORTER: 'zipkin'})).to.deep.equal({on: false, problem: 'OTEL_TRACES_EXPORTER zipkin is not supported (only otlp, over HTTP)'})
  })
})

describe('OpenTelemetry: a call through fnr serve\'s pod runtime and the wrapper server is one trace (on the real control plane, fake OTLP receiver)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let pb: ClusterPodBed
  let receiver: Awaited<ReturnType<typeof startReceiver>>
  let running: RunningServer | undefined
  let client: EvaluatorClient | undefined
  let ns: string
  const saved: Record<string, string | undefined> = {}

  before(async () => {
    receiver = await startReceiver()
    pb = await startClusterPodBed()
    // The wrappers export because the pod template gives their container the OTEL_* env.
    const pod = inlinePodTemplate({wrapperServerImage: WRAPPER_IMAGE})
    pod.spec!.containers[0]!.env = [
      {name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', value: receiver.url},
      {name: 'OTEL_SERVICE_NAME', value: 'fn-wrapper'},
    ]
    await pb.admin.create(`/api/v1/namespaces/${pb.runnerNs}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'traced-template'}, data: {template: stringify(pod), serviceTemplate: stringify(inlineServiceTemplate())}})
    // The runner exports because its own environment says so (read once at startup).
    const env = {OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'fnr-runner', OTEL_SDK_DISABLED: undefined}
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k]
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
    try {
      const fns = await makeFunctionsDir(await temp.make())
      const base = serveOptions({...fns, disableRuntimes: 'exec'})
      running = await startInProcess(
        {
          ...base,
          pod: {...base.pod, namespace: (ns = await pb.namespace()), templateConfigMap: 'traced-template', runnerNamespace: pb.runnerNs, podAddress: 'pod-ip', metadata: pb.metadata, kubeconfig: pb.kubeconfigPath, owner: 'otel-test'},
        },
        levelThree(),
      )
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
    client = new EvaluatorClient(`127.0.0.1:${running.port}`)
  })
  after(async () => {
    client?.close()
    await running?.stop()
    await pb?.stop()
    await receiver?.close()
    await temp.cleanup()
  })

  it('runner spans (EvaluateFunction, pod.acquire, pod.create, wrapper.call) and wrapper spans (EvaluateFunction, function.process) share the caller\'s trace id with correct parents', async () => {
    const res = await client!.evaluateRaw(image('stderr'), RL, {deadline: Date.now() + 60_000, trace: {traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`}})
    expect(res.log.toString()).to.equal('working on it\n')
    // The runner's spans are exported by its batch processor within a second or so; the wrapper's too.
    const names = ['EvaluateFunction@fnr-runner', 'pod.acquire@fnr-runner', 'pod.create@fnr-runner', 'wrapper.call@fnr-runner', 'EvaluateFunction@fn-wrapper', 'function.process@fn-wrapper']
    await until(() => names.every((n) => receiver.spans.some((s) => `${s.name}@${s.service}` === n && s.traceId === CALLER_TRACE)), 'all spans received')
    const span = (name: string, service: string): ReceivedSpan => receiver.spans.find((s) => s.name === name && s.service === service && s.traceId === CALLER_TRACE)!
    const runnerCall = span('EvaluateFunction', 'fnr-runner')
    const acquire = span('pod.acquire', 'fnr-runner')
    const create = span('pod.create', 'fnr-runner')
    const wrapperCall = span('wrapper.call', 'fnr-runner')
    const wrapper = span('EvaluateFunction', 'fn-wrapper')
    const proc = span('function.process', 'fn-wrapper')
    expect(runnerCall.parentSpanId).to.equal(CALLER_SPAN)
    expect(acquire.parentSpanId).to.equal(runnerCall.spanId)
    expect(create.parentSpanId).to.equal(acquire.spanId)
    expect(wrapperCall.parentSpanId).to.equal(runnerCall.spanId)
    expect(wrapper.parentSpanId).to.equal(wrapperCall.spanId)
    expect(proc.parentSpanId).to.equal(wrapper.spanId)
    // kinds: SERVER 2, CLIENT 3, INTERNAL 1
    expect([runnerCall.kind, wrapperCall.kind, wrapper.kind, proc.kind, acquire.kind]).to.deep.equal([2, 3, 2, 1, 1])
    expect(runnerCall.attributes).to.deep.include({'fn.image': image('stderr'), 'fnr.runtime': 'pod', 'rpc.grpc.status_code': 0})
    expect(acquire.attributes).to.deep.include({'fnr.pod.started': true})
    expect(proc.attributes).to.deep.include({'process.exit.code': 0})
    expect([...receiver.contentTypes]).to.deep.equal(['application/json'])

    // The runner's --log-level 3 reaches the wrapper (--verbosity 3): its request line carries the trace ids.
    const [pod] = await listPods(pb, ns)
    const args = pod!.spec!.containers.find((c) => c.name === 'function')!.args!
    expect(args.slice(0, 2)).to.deep.equal(['--verbosity', '3'])
    await until(() => /"msg":"EvaluateFunction"/.test(pb.kubelet.logs(ns, pod!.metadata!.name!) ?? ''), 'the wrapper\'s request line')
    const line = (pb.kubelet.logs(ns, pod!.metadata!.name!) ?? '').split('\n').find((l) => l.includes('"msg":"EvaluateFunction"'))!
    expect(JSON.parse(line)).to.deep.include({traceId: CALLER_TRACE, spanId: wrapper.spanId, parentSpanId: wrapperCall.spanId})

    // A second call on the warm pod: no pod.create in its trace.
    const second = '0af7651916cd43dd8448eb211c80319c'
    await client!.evaluateRaw(image('stderr'), RL, {deadline: Date.now() + 60_000, trace: {traceparent: `00-${second}-b7ad6b7169203331-01`}})
    await until(() => receiver.spans.some((s) => s.traceId === second && s.name === 'function.process'), 'the second trace')
    expect(receiver.spans.filter((s) => s.traceId === second && s.name === 'pod.create')).to.deep.equal([])
    expect(receiver.spans.find((s) => s.traceId === second && s.name === 'pod.acquire')!.attributes).to.deep.include({'fnr.pod.started': false})
  })
})
