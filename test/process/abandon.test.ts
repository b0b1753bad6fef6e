/**
 * abandonFunctionProcess on a function started through the spawner whose descriptors are still on
 * their way (its pid known, its streams not all in): the group dies at once, and every stream is
 * closed once all have arrived. Closing only those already in left the others open and unread,
 * holding the spawner's channel and so the event loop: `fnr serve` logged "stopped" and stayed.
 */
import {spawn} from 'node:child_process'
import {once, EventEmitter} from 'node:events'
import {PassThrough} from 'node:stream'

import {expect} from 'chai'

import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {abandonFunctionProcess} from '../../src/lib/process/run.js'
import type {FunctionChild} from '../../src/lib/process/spawner.js'

class ChildOnItsWay extends EventEmitter implements FunctionChild {
  stdout: PassThrough | undefined
  stderr: PassThrough | undefined
  stdioPending = true
  constructor(readonly pid: number) {
    super()
  }
  writeInput(): void {}
  /** The rest of its descriptors arrive. */
  arrive(): void {
    this.stderr = new PassThrough()
    this.stdioPending = false
    this.emit('spawn')
  }
}

describe('abandoning a function whose descriptors are on their way', () => {
  it('kills its group at once and closes every stream, those that arrive later included', async () => {
    const group = spawn('sleep', ['30'], {detached: true, stdio: 'ignore'})
    const exited = once(group, 'exit')
    const child = new ChildOnItsWay(group.pid!)
    child.stdout = new PassThrough()
    const launcher = new ProcessLauncher()
    abandonFunctionProcess({child, marker: 'fnr-test-abandon-marker', startedAt: Date.now()}, 'example.com/abandoned:v1', launcher)
    const [, signal] = await exited
    expect(signal, 'killed at once, before its streams are in').to.equal('SIGKILL')
    expect(child.stdout.destroyed, 'not closed before all are in').to.equal(false)
    child.arrive()
    expect(child.stdout.destroyed).to.equal(true)
    expect(child.stderr!.destroyed).to.equal(true)
  })
})
