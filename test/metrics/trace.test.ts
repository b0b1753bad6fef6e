import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import type {EvaluationRequest, EvaluationResponse, Evaluator} from '../../src/lib/evaluator.js'
import {PodEvaluator} from '../../src/lib/evaluators/pod.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import type {Logger} from '../../src/lib/telemetry/log.js'
import {continueTrace, parseTraceparent} from '../../src/lib/telemetry/trace.js'
import {SAMPLE_RL} from '../support/tmp.js'

/** A Logger that keeps the request lines. */
function capturingLogger(lines: Array<Record<string, unknown>>): Logger {
  const none = (): void => {}
  const logger: Logger = {
    error: none,
    warn: none,
    lifecycle: none,
    info: none,
    request: (msg, fields) => lines.push({msg, ...fields}),
    debug: none,
    trace: none,
    enabled: (v) => v <= 3,
    child: () => logger,
  }
  return logger
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'

describe('W3C trace context: caller → fnr serve → wrapper server', () => {
  const runnerLines: Array<Record<string, unknown>> = []
  const wrapperLines: Array<Record<string, unknown>> = []
  const seenByFunction: Array<EvaluationRequest['trace']> = []
  let wrapper: EvaluatorServer
  let runner: EvaluatorServer
  let toWrapper: EvaluatorClient
  let client: EvaluatorClient

  before(async () => {
    const fn: Evaluator = {
      name: 'wrapper',
      async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
        seenByFunction.push(request.trace)
        return {resourceList: request.resourceList, log: Buffer.alloc(0), evaluator: 'wrapper'}
      },
      async close() {},
    }
    wrapper = new EvaluatorServer({evaluator: fn, maxMessageSize: 4 * 1024 * 1024, logger: capturingLogger(wrapperLines), host: '127.0.0.1', port: 0})
    const wrapperPort = await wrapper.start()
    wrapper.setServing(true)
    toWrapper = new EvaluatorClient(`127.0.0.1:${wrapperPort}`)
    // The real pod evaluator, with a pod cache that always hands out the one "pod" above.
    const cache = {
      acquire: async () => ({usable: true, client: toWrapper, slot: {name: 'fake-pod'}, release: () => {}}),
      noteUnavailable: () => {},
    }
    const pod = new PodEvaluator({cache: cache as unknown as ConstructorParameters<typeof PodEvaluator>[0]['cache']})
    runner = new EvaluatorServer({evaluator: pod, maxMessageSize: 4 * 1024 * 1024, logger: capturingLogger(runnerLines), host: '127.0.0.1', port: 0})
    const runnerPort = await runner.start()
    runner.setServing(true)
    client = new EvaluatorClient(`127.0.0.1:${runnerPort}`)
  })
  after(() => {
    client.close()
    toWrapper.close()
    runner.forceShutdown()
    wrapper.forceShutdown()
  })
  beforeEach(() => {
    runnerLines.length = 0
    wrapperLines.length = 0
    seenByFunction.length = 0
  })

  it('continues the caller\'s trace with a span per hop, passing tracestate on', async () => {
    await client.evaluateRaw('example.com/fn:v1', SAMPLE_RL, {trace: {traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, tracestate: 'vendor=abc'}})
    const [r] = runnerLines
    const [w] = wrapperLines
    expect(r).to.include({traceId: TRACE_ID, parentSpanId: CALLER_SPAN})
    expect(r!.spanId).to.match(/^[0-9a-f]{16}$/).and.not.equal(CALLER_SPAN)
    expect(w).to.include({traceId: TRACE_ID, parentSpanId: r!.spanId})
    expect(w!.spanId).to.match(/^[0-9a-f]{16}$/).and.not.equal(r!.spanId)
    expect(seenByFunction[0]).to.include({traceparent: `00-${TRACE_ID}-${w!.spanId}-01`, tracestate: 'vendor=abc'})
  })

  it('starts a trace when the caller sends none (or an invalid one), and the wrapper joins it', async () => {
    for (const traceparent of [undefined, `ff-${TRACE_ID}-${CALLER_SPAN}-01`, `00-${'0'.repeat(32)}-${CALLER_SPAN}-01`, 'garbage']) {
      runnerLines.length = 0
      wrapperLines.length = 0
      await client.evaluateRaw('example.com/fn:v1', SAMPLE_RL, traceparent ? {trace: {traceparent}} : {})
      const [r] = runnerLines
      const [w] = wrapperLines
      expect(r!.traceId, String(traceparent)).to.match(/^[0-9a-f]{32}$/).and.not.equal(TRACE_ID)
      expect(r).not.to.have.property('parentSpanId')
      expect(w).to.include({traceId: r!.traceId, parentSpanId: r!.spanId})
    }
  })

  it('parses traceparent as the W3C spec says', () => {
    expect(parseTraceparent(`00-${TRACE_ID}-${CALLER_SPAN}-01`)).to.deep.equal({traceId: TRACE_ID, parentSpanId: CALLER_SPAN, flags: '01'})
    expect(parseTraceparent(`01-${TRACE_ID}-${CALLER_SPAN}-01-future`)).to.deep.equal({traceId: TRACE_ID, parentSpanId: CALLER_SPAN, flags: '01'})
    for (const bad of [`00-${TRACE_ID}-${CALLER_SPAN}-01-extra`, `ff-${TRACE_ID}-${CALLER_SPAN}-01`, `00-${TRACE_ID}-${'0'.repeat(16)}-01`, `00-${TRACE_ID.toUpperCase()}-${CALLER_SPAN}-01`, '']) {
      expect(parseTraceparent(bad), bad).to.equal(undefined)
    }
    const t = continueTrace(`00-${TRACE_ID}-${CALLER_SPAN}-01`)
    expect(t.traceparent).to.equal(`00-${TRACE_ID}-${t.spanId}-01`)
  })

  it('the status of a failing call still reaches the caller (tracing changes nothing else)', async () => {
    const err = await client.evaluateRaw('', SAMPLE_RL).catch((e: grpc.ServiceError) => e)
    expect((err as grpc.ServiceError).code).to.equal(grpc.status.INVALID_ARGUMENT)
    expect(runnerLines[0]).to.have.property('traceId')
  })

  it('a call no evaluator took logs evaluator "none", the runtime label its metric carries', async () => {
    await client.evaluateRaw('', SAMPLE_RL).catch(() => undefined)
    expect(runnerLines[0]).to.include({msg: 'EvaluateFunction', evaluator: 'none', code: grpc.status.INVALID_ARGUMENT})
  })
})
