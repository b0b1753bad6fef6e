import {spawn} from 'node:child_process'
import {once} from 'node:events'

import {expect} from 'chai'

import {killGroup, runFunctionProcess} from '../../src/lib/process/run.js'

describe('process runner: group kill', () => {
  it('is quiet for a group that is already gone and leaves Error.stackTraceLimit as it was', async () => {
    const child = spawn('/bin/true', [], {detached: true, stdio: 'ignore'})
    await once(child, 'exit')
    const before = Error.stackTraceLimit
    expect(() => killGroup(child.pid)).not.to.throw()
    expect(() => killGroup(undefined)).not.to.throw()
    expect(Error.stackTraceLimit).to.equal(before)
    // Stack traces still work afterwards.
    expect(new Error('x').stack).to.match(/run\.test\.ts/)
  })

  it('kills a live group', async () => {
    const child = spawn('/bin/sh', ['-c', 'sleep 30 & wait'], {detached: true, stdio: 'ignore'})
    const exited = once(child, 'exit')
    killGroup(child.pid)
    const [code, signal] = await exited
    expect(code).to.equal(null)
    expect(signal).to.equal('SIGKILL')
  })

  it('runs a function to completion with the kill after exit', async () => {
    const input = Buffer.from('kind: ResourceList\n')
    const res = await runFunctionProcess({command: '/bin/cat', input, maxStdoutBytes: 1024, label: 'cat'})
    expect(res.exitCode).to.equal(0)
    expect(res.stdout.equals(input)).to.equal(true)
  })
})
