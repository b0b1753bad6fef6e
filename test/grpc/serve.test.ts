import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {FAILURE_TRAILER, readFailure} from '../../src/lib/grpc/metadata.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {startServeWithClient, stopServeWithClient} from '../support/serve-client.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {expectStatus} from '../support/grpc.js'

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('fnr serve over gRPC (exec runtime)', () => {
  const temp = new TempDirs()
  let running: RunningServer
  let client: EvaluatorClient
  let functionsDir: string
  const MAX = 1024 * 1024

  before(async () => {
    ;({running, client, functionsDir} = await startServeWithClient(temp, MAX))
  })

  after(() => stopServeWithClient({running, client}, temp))

  it('runs a mapped function and returns its stdout unchanged', async () => {
    const res = await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL)
    expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
    expect(res.log.length).to.equal(0)
    expect(res.trailers.get('fnr-evaluator')).to.deep.equal(['exec'])
  })

  it('returns stderr as log', async () => {
    const res = await client.evaluateRaw('example.com/stderr:v1', SAMPLE_RL)
    expect(res.log.toString()).to.equal('working on it\n')
    expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
  })

  it('reports a non-zero exit with the exit code, error results and stderr, and structured details', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/failwithresults:v1', SAMPLE_RL), grpc.status.INTERNAL)
    expect(e.details).to.contain('exited with code 3')
    expect(e.details).to.contain('[error] apps/v1/Deployment/prod/web spec.replicas: replicas must be at most 3')
    // all results, errors first (Porch's wrapper puts every result in its message)
    expect(e.details).to.match(/replicas must be at most 3[\s\S]*\[info\]: just saying/)
    expect(e.details).to.contain('fatal: boom')
    expect(e.metadata.get(FAILURE_TRAILER)).to.have.length(1)
    const failure = readFailure(e.metadata)!
    expect(failure.exitCode).to.equal(3)
    expect(failure.results).to.have.length(2)
    expect(failure.results[0]).to.include({message: 'replicas must be at most 3', severity: 'error'})
    expect(failure.stderrTail).to.contain('fatal: boom')
  })

  it('ends DEADLINE_EXCEEDED at the caller\'s deadline and kills the whole process group', async () => {
    const started = Date.now()
    await expectStatus(client.evaluateRaw('example.com/sleepwithchild:v1', SAMPLE_RL, {deadline: Date.now() + 700}), grpc.status.DEADLINE_EXCEEDED)
    expect(Date.now() - started).to.be.below(10_000)
    const childPid = Number((await readFile(path.join(functionsDir, 'sleepWithChild.child'), 'utf8')).trim())
    // The server notices the deadline independently of the client; give it a moment.
    for (let i = 0; i < 50 && isAlive(childPid); i++) await new Promise((r) => setTimeout(r, 100))
    expect(isAlive(childPid), `grandchild ${childPid} should be killed`).to.equal(false)
    // The call ends once its killed group's stdio has closed, which may come a moment after the
    // grandchild is seen gone (CI once found the call still counted right then).
    for (let i = 0; i < 50 && running.server.activeCalls > 0; i++) await new Promise((r) => setTimeout(r, 100))
    expect(running.server.activeCalls).to.equal(0)
  })

  it('cuts off output over the maximum message size with RESOURCE_EXHAUSTED', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/flood:v1', SAMPLE_RL), grpc.status.RESOURCE_EXHAUSTED)
    expect(e.details).to.match(/wrote more than \d+ bytes to stdout/)
  })

  it('runs concurrent calls independently', async () => {
    const inputs = Array.from({length: 24}, (_, i) => Buffer.from(`${SAMPLE_RL.toString()}# call ${i}\n`))
    const results = await Promise.all(inputs.map((input) => client.evaluateRaw('example.com/cat:v1', input)))
    results.forEach((res, i) => expect(res.resourceList.equals(inputs[i]!)).to.equal(true))
  })

  it('gives functions a minimal environment', async () => {
    const res = await client.evaluateRaw('example.com/env:v1', SAMPLE_RL)
    const names = res.resourceList
      .toString()
      .trim()
      .split('\n')
      .map((l) => l.split('=')[0])
      .filter((n) => n !== 'PWD' && n !== 'SHLVL' && n !== '_')
    // plus the call's marker (process/sweep.ts) and the runner's proxy variables, when it has any
    const proxies = ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy'].filter((n) => process.env[n] !== undefined)
    expect(names.sort()).to.deep.equal(['HOME', 'LANG', 'PATH', 'FNR_FUNCTION_CALL', ...proxies].concat(process.env.TZ ? ['TZ'] : []).sort())
  })

  it('keeps serving after cancelled calls', async () => {
    const ac = new AbortController()
    const p = client.evaluateRaw('example.com/sleep:v1', SAMPLE_RL, {signal: ac.signal})
    setTimeout(() => ac.abort(), 200)
    await expectStatus(p, grpc.status.CANCELLED)
    for (let i = 0; i < 50 && running.server.activeCalls > 0; i++) await new Promise((r) => setTimeout(r, 50))
    expect(running.server.activeCalls).to.equal(0)
    const res = await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL)
    expect(res.resourceList.equals(SAMPLE_RL)).to.equal(true)
  })
})
