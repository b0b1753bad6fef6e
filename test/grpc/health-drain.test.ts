import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {makeFunctionsDir, startServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'

describe('fnr serve process: signals and drain', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('on SIGTERM lets the call in flight finish, refuses new ones and exits 0', async () => {
    const fns = await makeFunctionsDir(await temp.make())
    const proc = await startServeProcess([`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--disable-runtimes=pod'])
    const client = new EvaluatorClient(`127.0.0.1:${proc.port}`)
    try {
      // Connected first: on a busy machine the lazy connect could still be under way at the SIGTERM.
      await client.waitForReady(Date.now() + 20_000)
      const inFlight = client.evaluateRaw('example.com/slowcat:v1', SAMPLE_RL) // sleeps 1 s
      await new Promise((r) => setTimeout(r, 300))
      proc.child.kill('SIGTERM')
      const res = await inFlight
      expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
      const {code} = await proc.exited
      expect(code, proc.stderr()).to.equal(0)
      expect(proc.stderr()).to.match(/"msg":"draining"/)
      const err = await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL, {deadline: Date.now() + 2000}).catch((e: grpc.ServiceError) => e)
      expect((err as grpc.ServiceError).code).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED])
    } finally {
      client.close()
      proc.child.kill('SIGKILL')
    }
  })

  it('cancels calls still running after the grace period and still exits', async () => {
    const fns = await makeFunctionsDir(await temp.make())
    const proc = await startServeProcess([`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--disable-runtimes=pod', '--grace-period=300ms'])
    const client = new EvaluatorClient(`127.0.0.1:${proc.port}`)
    try {
      // Connected first: on a busy machine the lazy connect could still be under way at the SIGTERM.
      await client.waitForReady(Date.now() + 20_000)
      const inFlight = client.evaluateRaw('example.com/sleep:v1', SAMPLE_RL).catch((e: grpc.ServiceError) => e)
      await new Promise((r) => setTimeout(r, 300))
      proc.child.kill('SIGTERM')
      const err = (await inFlight) as grpc.ServiceError
      expect(err.code).to.be.oneOf([grpc.status.CANCELLED, grpc.status.UNAVAILABLE])
      const {code} = await proc.exited
      expect(code).to.equal(0)
      expect(proc.stderr()).to.match(/"forced":true/)
    } finally {
      client.close()
      proc.child.kill('SIGKILL')
    }
  })
})
