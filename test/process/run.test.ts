import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {claimHeadroom} from '../../src/lib/headroom.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {killGroup, runFunctionProcess} from '../../src/lib/process/run.js'

const launcher = new ProcessLauncher()

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
    const res = await runFunctionProcess({command: '/bin/cat', input, maxStdoutBytes: 1024, label: 'cat', launcher})
    expect(res.exitCode).to.equal(0)
    expect(res.stdout.equals(input)).to.equal(true)
  })
})

describe('process runner: room around stdout (headroom.ts)', () => {
  // `head -c` through a pipe writes in pieces: 300 KiB reaches the runner as several chunks.
  const run = (stdoutHeadroom?: {before: number; after: number}) =>
    runFunctionProcess({command: '/bin/sh', args: ['-c', 'head -c 307200 /dev/zero; printf oops >&2'], input: Buffer.alloc(0), maxStdoutBytes: 1 << 20, label: 'zeros', stdoutHeadroom, launcher})

  it('leaves the room asked for around an output joined from chunks, with the stderr length added behind it', async () => {
    const res = await run({before: 6, after: 6})
    expect(res.stdout.length).to.equal(307_200)
    expect(res.stderr.toString()).to.equal('oops')
    expect(claimHeadroom(res.stdout)).to.deep.equal({before: 6, after: 6 + 4})
    expect(res.stdout.byteOffset).to.equal(6)
    expect(res.stdout.buffer.byteLength).to.equal(6 + 307_200 + 10)
  })

  it('leaves none unless asked (fnr eval has no use for it)', async () => {
    const res = await run()
    expect(res.stdout.length).to.equal(307_200)
    expect(claimHeadroom(res.stdout)).to.equal(undefined)
  })
})

describe('process runner: a function that cannot start in its working directory', () => {
  // Node reports a chdir that failed with chdir's errno, so a missing directory read "executable
  // not found" and sent users after a binary that was there.
  const start = async (cwd: string, command = '/bin/cat'): Promise<string> => {
    try {
      await runFunctionProcess({command, input: Buffer.alloc(0), maxStdoutBytes: 1024, label: 'fn', launcher, cwd})
    } catch (err) {
      return (err as Error).message
    }
    return 'started'
  }

  it('says the working directory is missing, or not a directory, rather than the executable', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fnr-cwd-'))
    try {
      const file = path.join(dir, 'a-file')
      writeFileSync(file, '')
      expect(await start(path.join(dir, 'gone'))).to.equal(`failed to start function "fn": working directory not found (${dir}/gone)`)
      expect(await start(file)).to.equal(`failed to start function "fn": working directory is not a directory (${file})`)
      expect(await start(`${file}/below`)).to.equal(`failed to start function "fn": working directory not found (a part of its path is a file) (${file}/below)`)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  it('still names a missing executable when the working directory is fine', async () => {
    expect(await start('/tmp', '/nonexistent/fn')).to.equal('failed to start function "fn": executable not found (/nonexistent/fn)')
    expect(await start('/tmp')).to.equal('started')
  })
})
