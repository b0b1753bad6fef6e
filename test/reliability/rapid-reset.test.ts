/**
 * HTTP/2 rapid-reset protection and what fnr makes of it (found by the pod-runtime soak).
 *
 * Node's HTTP/2 server (nghttp2 ≥ 1.57, CVE-2023-44487) allows a peer a burst of 1,000 stream
 * resets, refilled at 33 a second; past that it ends the whole session with GOAWAY(INTERNAL_ERROR),
 * and every call still in flight on it fails. A gRPC call whose deadline passes or that is
 * cancelled is one reset, so a caller cancelling faster than that for long enough loses its
 * connection: porch-server towards `fnr serve`, and `fnr serve` towards a function pod's wrapper
 * server. Node 20 cannot raise the limit (streamResetBurst/streamResetRate came later, and grpc-js
 * does not pass them on).
 *
 * grpc-js reports such calls as INTERNAL "Received RST_STREAM with code 2 triggered by internal
 * client error: Session closed with error code 2". fnr's client used to read every INTERNAL as
 * the function's failure; it is a transport failure, so it is Unavailable (the pod evaluator then
 * retries the call), pinned here on a real server and client.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from '../../src/lib/evaluator.js'
import {EvaluatorClient, isTransportFailure} from '../../src/lib/grpc/client.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'

const RL = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n')

/** 'slow' runs until cancelled or released; anything else echoes. */
class SlowEvaluator implements Evaluator {
  readonly name = 'test'
  private releases: Array<() => void> = []
  evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    const done: EvaluationResponse = {resourceList: request.resourceList, log: Buffer.alloc(0), evaluator: this.name}
    if (request.image !== 'slow') return Promise.resolve(done)
    return new Promise((resolve, reject) => {
      this.releases.push(() => resolve(done))
      request.signal?.addEventListener('abort', () => reject(new FnrError('Cancelled', 'cancelled')), {once: true})
    })
  }
  releaseAll(): void {
    for (const r of this.releases.splice(0)) r()
  }
  async close(): Promise<void> {}
}

describe('reliability: HTTP/2 rapid-reset limit (a caller cancelling over 1,000 calls in a burst)', function () {
  this.timeout(60_000)
  let server: EvaluatorServer
  let evaluator: SlowEvaluator
  let client: EvaluatorClient

  before(async () => {
    evaluator = new SlowEvaluator()
    server = new EvaluatorServer({evaluator, maxMessageSize: 4 * 1024 * 1024, host: '127.0.0.1', port: 0})
    const port = await server.start()
    server.setServing(true)
    client = new EvaluatorClient(`127.0.0.1:${port}`)
  })
  after(() => {
    evaluator.releaseAll()
    client?.close()
    server?.forceShutdown()
  })

  it('the server ends the session; the call in flight fails as Unavailable (a transport failure), never as a function failure; the client then reconnects', async () => {
    const inFlight = client.evaluate('slow', RL, {deadline: Date.now() + 50_000}).then(
      () => undefined,
      (e: unknown) => e,
    )
    let settled = false
    void inFlight.then(() => (settled = true))
    // Bursts of calls cancelled a few ms after they start, until the session is gone.
    let cancelled = 0
    for (let burst = 0; burst < 60 && !settled; burst++) {
      await Promise.all(
        Array.from({length: 250}, (_, i) => {
          cancelled++
          return client.evaluateRaw('slow', RL, {signal: AbortSignal.timeout(2 + (i % 5))}).catch(() => undefined)
        }),
      )
    }
    const err = await inFlight
    process.stdout.write(`      (session ended after ${cancelled} cancelled calls)\n`)
    expect(err, 'the long call ended with the session').to.be.instanceOf(FnrError)
    const e = err as FnrError
    expect(e.details.grpcCode, e.message).to.equal(grpc.status.INTERNAL)
    expect(e.message).to.match(/^Received RST_STREAM with code 2/)
    expect(isTransportFailure(e.message)).to.equal(true)
    expect(e.kind).to.equal('Unavailable')
    // The channel opens a new session by itself. A call made while the GOAWAY is still being
    // processed can meet the dying session and fail as a dropped connection: Unavailable, which
    // callers retry (the pod evaluator does); only that failure is allowed, and only a few times.
    const retried: string[] = []
    for (;;) {
      const res: Awaited<ReturnType<EvaluatorClient['evaluate']>> | Error = await client.evaluate('cat', RL, {deadline: Date.now() + 20_000}).catch((e: Error) => e)
      if (!(res instanceof Error)) {
        expect(res.resourceList.equals(RL)).to.equal(true)
        break
      }
      expect(res, 'a call after the reset').to.be.instanceOf(FnrError)
      expect((res as FnrError).kind, res.message).to.equal('Unavailable')
      retried.push(res.message)
      expect(retried.length, `calls after the reset kept failing: ${retried.join('; ')}`).to.be.below(5)
      await new Promise((r) => setTimeout(r, 100))
    }
  })

  it('a real function failure (INTERNAL with details) stays FunctionFailed', async () => {
    const {fnrErrorFromStatus} = await import('../../src/lib/grpc/client.js')
    const failed = Object.assign(new Error('13 INTERNAL: function "x" exited with code 1'), {code: grpc.status.INTERNAL, details: 'function "x" exited with code 1', metadata: new grpc.Metadata()}) as grpc.ServiceError
    expect(fnrErrorFromStatus(failed).kind).to.equal('FunctionFailed')
    const reset = Object.assign(new Error('x'), {code: grpc.status.INTERNAL, details: 'Received RST_STREAM with code 2 (Internal server error)', metadata: new grpc.Metadata()}) as grpc.ServiceError
    expect(fnrErrorFromStatus(reset).kind).to.equal('Unavailable')
  })
})
