import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {EVALUATOR_TRAILER, FAILURE_TRAILER, readFailure} from '../../src/lib/grpc/metadata.js'
import {checkHealth, healthClient} from '../support/health.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'
import {CONFIGMAP_OLD_NS, SHELL_FUNCTIONS, resourceList, writeNodeFunctions, writeShellFunctions, type ShellFunction} from './support/functions.js'
import {isAlive, waitFor} from './support/process.js'
import {expectStatus} from '../support/grpc.js'
import {Wrappers} from '../support/wrappers.js'

describe('wrapper-server: EvaluateFunction over loopback', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  const wrappers = new Wrappers()
  let sh: Record<ShellFunction, string>
  let nodeFns: {annotate: string; failJson: string}
  let dir: string

  before(async () => {
    dir = await temp.make('fnr-wrapper-')
    sh = await writeShellFunctions(path.join(dir, 'sh'))
    nodeFns = await writeNodeFunctions(path.join(dir, 'node'))
  })

  after(async () => {
    await wrappers.stopAll()
    await temp.cleanup()
  })

  const call = (fn: ShellFunction, input?: Buffer, options?: {deadline?: number; image?: string}) => wrappers.call(sh[fn], input, options)

  describe('shell entrypoints', () => {
    it('returns stdout byte for byte, with the fnr-evaluator trailer', async () => {
      const res = await call('cat')
      expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
      expect(res.log.length).to.equal(0)
      expect(res.trailers.get(EVALUATOR_TRAILER)).to.deep.equal(['wrapper'])
      expect(res.trailers.get(FAILURE_TRAILER)).to.deep.equal([])
    })

    it('runs the entrypoint the wrapper was started with, whatever the image says', async () => {
      const res = await call('setNamespace', CONFIGMAP_OLD_NS, {image: 'gcr.io/kpt-fn/something-else:v9'})
      expect(res.resourceList.toString()).to.equal(CONFIGMAP_OLD_NS.toString().replace('namespace: old', 'namespace: new'))
    })

    it('passes the entrypoint\'s arguments unchanged, without a shell', async () => {
      const {client} = await wrappers.start([sh.args, 'a b', '$HOME', "'quoted'", '*', ''])
      const out = (await client.evaluateRaw('x', SAMPLE_RL)).resourceList.toString()
      expect(out).to.contain('# argc=5')
      expect(out).to.contain('# arg=[a b]\n# arg=[$HOME]\n# arg=[\'quoted\']\n# arg=[*]\n# arg=[]\n')
    })

    it('returns stderr as log', async () => {
      const res = await call('stderr')
      expect(res.log.toString()).to.equal('working on it\n')
      expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
    })

    it('refuses exit 0 with empty or whitespace-only output as INTERNAL, saying so (an empty ResourceList would delete the package)', async () => {
      const empty = await expectStatus(call('empty'), grpc.status.INTERNAL)
      expect(empty.details).to.match(/^function "example.com\/fn:v1" exited with code 0 but wrote no output to stdout, not a ResourceList: refusing to return it/)
      expect(empty.details).to.contain('would delete every resource of the package')
      const blank = await expectStatus(call('blank'), grpc.status.INTERNAL)
      expect(blank.details).to.contain('wrote only whitespace (4 bytes) to stdout')
    })

    it('reports a non-zero exit as INTERNAL with the exit code, error results and stderr, and the same in the fnr-failure-bin trailer', async () => {
      const e = await expectStatus(call('failWithResults'), grpc.status.INTERNAL)
      expect(e.details).to.contain('exited with code 3')
      expect(e.details).to.contain('[error] apps/v1/Deployment/prod/web spec.replicas: replicas must be at most 3')
      expect(e.details).to.match(/replicas must be at most 3[\s\S]*\[info\]: just saying/)
      expect(e.details).to.contain('fatal: boom')
      const failure = readFailure(e.metadata)!
      expect(failure.exitCode).to.equal(3)
      expect(failure.signal).to.equal(null)
      expect(failure.results.map((r) => r.severity)).to.deep.equal(['error', 'info'])
      expect(failure.results[0]).to.include({message: 'replicas must be at most 3', severity: 'error'})
      expect(failure.results[0]!.field).to.deep.equal({path: 'spec.replicas'})
      expect(failure.results[0]!.resourceRef).to.deep.equal({apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', namespace: 'prod'})
      expect(failure.stderrTail).to.equal('fatal: boom')
    })

    it('returns success for exit 0 with error-severity results, and hands the results over in the trailer', async () => {
      const res = await call('okWithErrorResults')
      expect(res.resourceList.toString()).to.contain('image tag is not pinned')
      const seen = readFailure(res.trailers)!
      expect(seen.results).to.have.length(1)
      expect(seen.results[0]).to.include({message: 'image tag is not pinned', severity: 'error'})
      expect(seen.exitCode).to.equal(undefined)
    })

    it('fails a function that echoes its input and exits 1 (Porch\'s case) with the exit code', async () => {
      const e = await expectStatus(call('echoAndFail'), grpc.status.INTERNAL)
      expect(e.details).to.match(/^function "example.com\/fn:v1" exited with code 1$/)
      expect(readFailure(e.metadata)!.results).to.deep.equal([])
    })

    it('rejects output that is not a ResourceList as INTERNAL, naming stderr', async () => {
      const e = await expectStatus(call('notResourceList'), grpc.status.INTERNAL)
      expect(e.details).to.contain('is not a ResourceList')
      expect(e.details).to.contain('bad things')
    })

    it('reports a missing executable as INTERNAL with the path', async () => {
      const {client} = await wrappers.start([path.join(dir, 'no-such-function')])
      const e = await expectStatus(client.evaluateRaw('x', SAMPLE_RL), grpc.status.INTERNAL)
      expect(e.details).to.contain('executable not found')
      expect(e.details).to.contain('no-such-function')
    })

    it('ends DEADLINE_EXCEEDED at the caller\'s deadline and kills the function\'s whole process group', async () => {
      const {wrapper, client} = await wrappers.start([sh.sleepWithChild])
      await expectStatus(client.evaluateRaw('x', SAMPLE_RL, {deadline: Date.now() + 800}), grpc.status.DEADLINE_EXCEEDED)
      const pidFile = `${sh.sleepWithChild}.child`
      await waitFor(async () => (await readFile(pidFile, 'utf8').catch(() => '')).trim() !== '', 'the grandchild pid file')
      const grandchild = Number((await readFile(pidFile, 'utf8')).trim())
      await waitFor(() => !isAlive(grandchild), `grandchild ${grandchild} to be killed`)
      await waitFor(() => wrapper.server.activeCalls === 0, 'no calls in flight')
    })

    it('cuts off output over the max message size with RESOURCE_EXHAUSTED', async () => {
      const e = await expectStatus(call('flood'), grpc.status.RESOURCE_EXHAUSTED)
      expect(e.details).to.match(/wrote more than \d+ bytes to stdout/)
    })

    it('kills the function\'s process group when the caller cancels', async () => {
      const script = await writeExecutable(path.join(dir, 'cancel-me'), SHELL_FUNCTIONS.sleepWithChild)
      const {wrapper, client} = await wrappers.start([script])
      const ac = new AbortController()
      const p = client.evaluateRaw('x', SAMPLE_RL, {signal: ac.signal})
      await waitFor(async () => (await readFile(`${script}.child`, 'utf8').catch(() => '')).trim() !== '', 'the function to start its child')
      ac.abort()
      await expectStatus(p, grpc.status.CANCELLED)
      const grandchild = Number((await readFile(`${script}.child`, 'utf8')).trim())
      await waitFor(() => !isAlive(grandchild), `grandchild ${grandchild} to be killed`)
      await waitFor(() => wrapper.server.activeCalls === 0, 'the cancelled call to end')
    })

    it('runs the function in the wrapper\'s working directory with the wrapper\'s environment (the container\'s)', async () => {
      const {client: envClient} = await wrappers.start([sh.env])
      const env = (await envClient.evaluateRaw('x', SAMPLE_RL)).resourceList.toString()
      // process.env of this test process is the "container" environment here.
      expect(env).to.contain(`# PATH=${process.env.PATH}\n`)
      const {client: pwdClient} = await wrappers.start([sh.pwd])
      expect((await pwdClient.evaluateRaw('x', SAMPLE_RL)).resourceList.toString()).to.contain(`# cwd=${process.cwd()}\n`)
    })
  })

  describe('Node entrypoints', () => {
    it('runs a Node function (interpreter plus script) and returns its output and log', async () => {
      const {client} = await wrappers.start([process.execPath, nodeFns.annotate])
      const res = await client.evaluateRaw('example.com/annotate:v1', SAMPLE_RL)
      expect(res.resourceList.toString()).to.contain('annotations: {fnr.test/seen-by: "node"}')
      expect(res.log.toString()).to.match(/^annotated by node \d+\n$/)
    })

    it('reports a Node function\'s JSON error results and exit code', async () => {
      const {client} = await wrappers.start([process.execPath, nodeFns.failJson])
      const e = await expectStatus(client.evaluateRaw('example.com/fail:v1', SAMPLE_RL), grpc.status.INTERNAL)
      expect(e.details).to.contain('exited with code 2')
      expect(e.details).to.contain('[error] v1/ConfigMap/cfg: from node')
      const failure = readFailure(e.metadata)!
      expect(failure.exitCode).to.equal(2)
      expect(failure.results).to.deep.equal([{message: 'from node', severity: 'error', resourceRef: {apiVersion: 'v1', kind: 'ConfigMap', name: 'cfg'}}])
      expect(failure.stderrTail).to.equal('node says no')
    })
  })

  describe('concurrency', () => {
    it('runs concurrent calls in separate processes; outputs, logs and failures do not mix', async () => {
      const {client} = await wrappers.start([process.execPath, nodeFns.annotate])
      const inputs = Array.from({length: 16}, (_, i) =>
        resourceList(`- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-${i}\n`, i % 4 === 3 ? `# exit=${i}\n` : ''),
      )
      const settled = await Promise.allSettled(inputs.map((input) => client.evaluateRaw('example.com/annotate:v1', input)))
      const pids = new Set<string>()
      settled.forEach((s, i) => {
        if (i % 4 === 3) {
          expect(s.status, `call ${i}`).to.equal('rejected')
          const e = (s as PromiseRejectedResult).reason as grpc.ServiceError
          expect(e.code).to.equal(grpc.status.INTERNAL)
          expect(readFailure(e.metadata)!.exitCode).to.equal(i)
          return
        }
        expect(s.status, `call ${i}`).to.equal('fulfilled')
        const res = (s as PromiseFulfilledResult<{resourceList: Buffer; log: Buffer}>).value
        const expected = inputs[i]!.toString().replace('  metadata:\n', '  metadata:\n    annotations: {fnr.test/seen-by: "node"}\n')
        expect(res.resourceList.toString()).to.equal(expected)
        const log = res.log.toString()
        expect(log).to.match(/^annotated by node \d+\n$/)
        pids.add(log)
      })
      expect(pids.size, 'one process per call').to.equal(12)
    })

    it('does not hold fast calls behind a slow one on the same wrapper', async () => {
      const {wrapper, client} = await wrappers.start([sh.sleepIfAsked])
      const slow = client.evaluateRaw('x', Buffer.from(`${SAMPLE_RL.toString()}# slow\n`)).catch((e: grpc.ServiceError) => e)
      await waitFor(() => wrapper.server.activeCalls === 1, 'the slow call to start')
      const results = await Promise.all(Array.from({length: 4}, (_, i) => client.evaluateRaw('x', Buffer.from(`${SAMPLE_RL.toString()}# fast ${i}\n`))))
      results.forEach((r, i) => expect(r.resourceList.toString()).to.equal(`${SAMPLE_RL.toString()}# fast ${i}\n`))
      expect(wrapper.server.activeCalls, 'the slow call is still running').to.equal(1)
      expect((await wrapper.stop()).forced).to.equal(true)
      expect(((await slow) as grpc.ServiceError).code).to.be.oneOf([grpc.status.CANCELLED, grpc.status.UNAVAILABLE])
    })
  })

  describe('startup and health', () => {
    it('drains: a call in flight finishes, health turns NOT_SERVING, new calls are refused', async () => {
      const {wrapper, client} = await wrappers.start([sh.slowCat])
      const health = healthClient(`127.0.0.1:${wrapper.port}`)
      try {
        const inFlight = client.evaluateRaw('x', SAMPLE_RL)
        await waitFor(() => wrapper.server.activeCalls === 1, 'the call to start')
        const stopping = wrapper.stop()
        expect(await checkHealth(health).catch(() => 'gone')).to.be.oneOf(['NOT_SERVING', 'gone'])
        expect((await inFlight).resourceList.equals(SAMPLE_RL)).to.equal(true)
        expect((await stopping).forced).to.equal(false)
        const err = await client.evaluateRaw('x', SAMPLE_RL, {deadline: Date.now() + 2000}).catch((e: grpc.ServiceError) => e)
        expect((err as grpc.ServiceError).code).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED])
      } finally {
        health.close()
      }
    })
  })
})
