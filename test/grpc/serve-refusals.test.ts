/** fnr serve over gRPC (exec runtime, in process): the calls it refuses before any function runs. The calls that run a function are in ./serve.test.ts. */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import type {EvaluatorClient} from '../../src/lib/grpc/client.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {startServeWithClient, stopServeWithClient} from '../support/serve-client.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {expectStatus} from '../support/grpc.js'

describe('fnr serve over gRPC (exec runtime): refusals before a function runs', () => {
  const temp = new TempDirs()
  let running: RunningServer
  let client: EvaluatorClient
  const MAX = 1024 * 1024

  before(async () => {
    ;({running, client} = await startServeWithClient(temp, MAX))
  })

  after(() => stopServeWithClient({running, client}, temp))

  it('answers NOT_FOUND for an unmapped image, with Porch\'s message', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/unknown:v1', SAMPLE_RL), grpc.status.NOT_FOUND)
    expect(e.details).to.equal('function "example.com/unknown:v1" not found')
  })

  it('rejects a request over the maximum message size with RESOURCE_EXHAUSTED', async () => {
    const big = Buffer.alloc(MAX + 10, 'a')
    await expectStatus(client.evaluateRaw('example.com/cat:v1', big), grpc.status.RESOURCE_EXHAUSTED)
  })

  it('rejects an empty resource_list and an empty image with INVALID_ARGUMENT', async () => {
    const a = await expectStatus(client.evaluateRaw('example.com/cat:v1', Buffer.alloc(0)), grpc.status.INVALID_ARGUMENT)
    expect(a.details).to.match(/resource_list is empty/)
    const b = await expectStatus(client.evaluateRaw('', SAMPLE_RL), grpc.status.INVALID_ARGUMENT)
    expect(b.details).to.match(/image is empty/)
  })
})
