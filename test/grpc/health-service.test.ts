/**
 * The health service of the gRPC server (in process, on a loopback port; src/lib/grpc/health.ts),
 * read with grpc-health-check's own client and proto; the drain of a real `fnr serve` process is
 * in ./health-drain.test.ts.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import type {EvaluationRequest, Evaluator} from '../../src/lib/evaluator.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {checkHealth, healthClient} from '../support/health.js'
import {SAMPLE_RL} from '../support/tmp.js'

class SlowEcho implements Evaluator {
  readonly name = 'slow'
  async evaluate(req: EvaluationRequest) {
    await new Promise((r) => setTimeout(r, 300))
    if (req.image === 'missing') throw new FnrError('NotFound', 'nope')
    return {resourceList: req.resourceList, log: Buffer.alloc(0), evaluator: this.name}
  }
  async close() {}
}

describe('health service', () => {
  it('is NOT_SERVING until ready, SERVING when ready, NOT_SERVING while draining; Watch follows', async () => {
    const server = new EvaluatorServer({evaluator: new SlowEcho(), maxMessageSize: 1 << 20, host: '127.0.0.1', port: 0})
    const port = await server.start()
    const health = healthClient(`127.0.0.1:${port}`)
    try {
      expect(await checkHealth(health)).to.equal('NOT_SERVING')
      expect(await checkHealth(health, 'evaluator.FunctionEvaluator')).to.equal('NOT_SERVING')
      const seen: string[] = []
      const stream = health.watch({service: ''})
      stream.on('data', (m: {status: string}) => seen.push(m.status))
      stream.on('error', () => {})
      await new Promise((r) => setTimeout(r, 100))
      server.setServing(true)
      expect(await checkHealth(health)).to.equal('SERVING')
      expect(await checkHealth(health, 'evaluator.FunctionEvaluator')).to.equal('SERVING')
      const client = new EvaluatorClient(`127.0.0.1:${port}`)
      const inFlight = client.evaluateRaw('x', SAMPLE_RL)
      await new Promise((r) => setTimeout(r, 50))
      const shutdown = server.shutdown(5000)
      expect(await checkHealth(health).catch(() => 'gone')).to.be.oneOf(['NOT_SERVING', 'gone'])
      const res = await inFlight
      expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
      expect((await shutdown).forced).to.equal(false)
      stream.cancel()
      client.close()
      expect(seen.slice(0, 2)).to.deep.equal(['NOT_SERVING', 'SERVING'])
      expect(seen).to.include('SERVING')
    } finally {
      health.close()
      server.forceShutdown()
    }
  })

  it('unknown services are NOT_FOUND, as the health protocol says', async () => {
    const server = new EvaluatorServer({evaluator: new SlowEcho(), maxMessageSize: 1 << 20, host: '127.0.0.1', port: 0})
    const port = await server.start()
    const health = healthClient(`127.0.0.1:${port}`)
    try {
      server.setServing(true)
      const err = await checkHealth(health, 'no.such.Service').catch((e: grpc.ServiceError) => e)
      expect((err as grpc.ServiceError).code).to.equal(grpc.status.NOT_FOUND)
    } finally {
      health.close()
      server.forceShutdown()
    }
  })

  it('Watch of an unknown service says SERVICE_UNKNOWN, then follows the status once it is set; List gives every service', async () => {
    const server = new EvaluatorServer({evaluator: new SlowEcho(), maxMessageSize: 1 << 20, host: '127.0.0.1', port: 0})
    const port = await server.start()
    const health = healthClient(`127.0.0.1:${port}`)
    try {
      const seen: string[] = []
      const stream = health.watch({service: 'later.Service'})
      stream.on('data', (m: {status: string}) => seen.push(m.status))
      stream.on('error', () => {})
      await new Promise((r) => setTimeout(r, 100))
      server.health.setStatus('later.Service', 'SERVING')
      server.health.setStatus('later.Service', 'NOT_SERVING')
      await new Promise((r) => setTimeout(r, 100))
      stream.cancel()
      expect(seen).to.deep.equal(['SERVICE_UNKNOWN', 'SERVING', 'NOT_SERVING'])
      server.setServing(true)
      const listed = await new Promise<Record<string, {status: string}>>((resolve, reject) => health.list({}, (err, res) => (err ? reject(err) : resolve(res!.statuses))))
      expect(listed).to.deep.equal({'': {status: 'SERVING'}, 'evaluator.FunctionEvaluator': {status: 'SERVING'}, 'later.Service': {status: 'NOT_SERVING'}})
    } finally {
      health.close()
      server.forceShutdown()
    }
  })
})
