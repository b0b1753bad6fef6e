import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'

import {expect} from 'chai'

import {CALL_MARKER_ENV, sweep} from '../../src/lib/process/sweep.js'

describe('process sweep: which processes it reads', () => {
  describe('on this machine', function () {
    const started: ChildProcess[] = []
    const marked = (marker: string): ChildProcess => {
      const child = spawn('/bin/sleep', ['30'], {detached: true, stdio: 'ignore', env: {PATH: process.env.PATH, [CALL_MARKER_ENV]: marker}})
      started.push(child)
      return child
    }
    after(() => {
      for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    })

    it('kills a marked process created after the call\'s function process; one created before it is not read (no wrap)', async () => {
      const marker = `${process.pid}.sweep-test`
      const older = marked(marker)
      const fn = spawn('/bin/true', [], {detached: true, stdio: 'ignore'})
      await once(fn, 'exit')
      const newer = marked(marker)
      const newerExit = once(newer, 'exit')
      const killed = await sweep([{marker, pid: fn.pid, startedAt: Date.now() - 1000}])
      const [, signal] = await newerExit
      expect(signal).to.equal('SIGKILL')
      // older's pid is below the function's unless the counter wrapped in between: then it is read, and killed too
      const wrapped = older.pid! > fn.pid!
      expect(killed).to.equal(wrapped ? 2 : 1)
      expect(older.exitCode === null && older.signalCode === null).to.equal(!wrapped)
    })

    it('reads every process when a target has no pid (as after a wrap of the pid counter), and counts each kill once', async () => {
      const marker = `${process.pid}.sweep-test-all`
      const first = marked(marker)
      const second = marked(marker)
      const exits = [once(first, 'exit'), once(second, 'exit')]
      expect(await sweep([{marker, startedAt: Date.now() - 1000}])).to.equal(2)
      for (const [, signal] of await Promise.all(exits)) expect(signal).to.equal('SIGKILL')
    })
  })
})
