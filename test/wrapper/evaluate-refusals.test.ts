/** The wrapper server in process, on loopback: the requests it refuses before its function runs, its start-up check and its health service. The calls that run a function are in ./evaluate.test.ts. */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import path from 'node:path'

import {FnrError} from '../../src/lib/errors.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {startWrapperServer} from '../../src/lib/wrapper.js'
import {checkHealth, healthClient} from '../support/health.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {writeShellFunctions, type ShellFunction} from './support/functions.js'
import {expectStatus} from '../support/grpc.js'
import {MAX, Wrappers} from '../support/wrappers.js'

describe('wrapper-server: EvaluateFunction over loopback', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  const wrappers = new Wrappers()
  let sh: Record<ShellFunction, string>
  let dir: string

  before(async () => {
    dir = await temp.make('fnr-wrapper-')
    sh = await writeShellFunctions(path.join(dir, 'sh'))
  })

  after(async () => {
    await wrappers.stopAll()
    await temp.cleanup()
  })

  const call = (fn: ShellFunction, input?: Buffer, options?: {deadline?: number; image?: string}) => wrappers.call(sh[fn], input, options)

  describe('shell entrypoints', () => {
    it('rejects a request over the max message size with RESOURCE_EXHAUSTED', async () => {
      await expectStatus(call('cat', Buffer.alloc(MAX + 10, 'a')), grpc.status.RESOURCE_EXHAUSTED)
    })

    it('rejects an empty resource_list and an empty image with INVALID_ARGUMENT', async () => {
      const {client} = await wrappers.start([sh.cat])
      expect((await expectStatus(client.evaluateRaw('x', Buffer.alloc(0)), grpc.status.INVALID_ARGUMENT)).details).to.match(/resource_list is empty/)
      expect((await expectStatus(client.evaluateRaw('', SAMPLE_RL), grpc.status.INVALID_ARGUMENT)).details).to.match(/image is empty/)
    })
  })

  describe('startup and health', () => {
    it('refuses to start without an entrypoint (a clear startup error, not a crash on the first call)', async () => {
      for (const entrypoint of [[], [''], ['  ']]) {
        const err = await startWrapperServer({port: 0, host: '127.0.0.1', maxRequestBodySize: MAX, entrypoint, gracePeriodMs: 1000}, silentLogger, false).catch((e: unknown) => e)
        expect(err).to.be.instanceOf(FnrError)
        expect((err as FnrError).kind).to.equal('Config')
        expect((err as FnrError).message).to.contain('no function entrypoint')
      }
    })

    it('serves grpc.health.v1: SERVING when ready, for "" and evaluator.FunctionEvaluator', async () => {
      const {wrapper} = await wrappers.start([sh.cat])
      const health = healthClient(`127.0.0.1:${wrapper.port}`)
      try {
        expect(await checkHealth(health)).to.equal('SERVING')
        expect(await checkHealth(health, 'evaluator.FunctionEvaluator')).to.equal('SERVING')
      } finally {
        health.close()
      }
    })
  })
})
