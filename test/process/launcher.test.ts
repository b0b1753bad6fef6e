/**
 * Launchers (src/lib/process/launcher.ts, docs/process.md "Who owns the processes"): two in one
 * process share nothing but the pids. One's forced stop kills its own functions only (before, the
 * drain's kill took every function of the process: a second server's too); each has its own
 * spawner, which its close ends; and a sweep of one spares a process the other holds.
 */
import {existsSync, readFileSync} from 'node:fs'
import path from 'node:path'

import {expect} from 'chai'

import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {runFunctionProcess, type FunctionProcessResult} from '../../src/lib/process/run.js'
import {sweep} from '../../src/lib/process/sweep.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {isAlive, waitFor} from '../wrapper/support/process.js'

/** Runs `fn` (writes its pid to `pidFile`, then sleeps) through `launcher`; resolves with the outcome, whatever it is. */
function runSleeper(launcher: ProcessLauncher, fn: string): Promise<FunctionProcessResult | Error> {
  return runFunctionProcess({command: fn, input: Buffer.alloc(0), maxStdoutBytes: 1024, label: 'sleeper', launcher}).catch((e: Error) => e)
}

async function pidIn(file: string): Promise<number> {
  let pid = 0
  await waitFor(() => {
    try {
      pid = Number(readFileSync(file, 'utf8').trim())
    } catch {
      return false
    }
    return pid > 0
  }, `${file} to hold a pid`)
  return pid
}

const MiB = 1024 * 1024

describe('process launchers: two in one process share nothing but the pids', function () {
  this.timeout(30_000)
  const temp = new TempDirs()
  let dir: string
  const sleeper = (name: string): Promise<string> => writeExecutable(path.join(dir, name), `#!/bin/sh\necho $$ > ${path.join(dir, `${name}.pid`)}\nexec sleep 30\n`)
  before(async () => {
    dir = await temp.make('fnr-launcher-')
  })
  after(() => temp.cleanup())

  it("one launcher's killAll (a server's forced stop) kills its own running functions, not another's", async () => {
    const a = new ProcessLauncher()
    const b = new ProcessLauncher()
    const callA = runSleeper(a, await sleeper('a'))
    const callB = runSleeper(b, await sleeper('b'))
    const [pidA, pidB] = [await pidIn(path.join(dir, 'a.pid')), await pidIn(path.join(dir, 'b.pid'))]
    await waitFor(() => a.liveCalls.has(pidA) && b.liveCalls.has(pidB), 'both calls to be held')
    expect(a.killAll()).to.equal(1)
    await waitFor(() => !isAlive(pidA), "a's function to die")
    expect(isAlive(pidB), "b's function lives on").to.equal(true)
    expect(b.liveCalls.has(pidB)).to.equal(true)
    expect(await callA).to.not.be.instanceOf(Error)
    expect(b.killAll()).to.equal(1)
    await callB
    await a.close()
    await b.close()
  })

  for (const mode of ['direct', 'spawner', 'native'] as const) {
    it(`a call whose input is still being written is not a candidate for sleep; once its function has it all, it is (${mode})`, async () => {
      const launcher = new ProcessLauncher(mode).start(() => {}, mode === 'spawner' ? {FNR_SPAWNER: 'node'} : process.env)
      // Writes its pid, lets its stdin fill (a megabyte does not fit a pipe), then reads it all and sleeps.
      const fn = await writeExecutable(path.join(dir, `slow-reader-${mode}`), `#!/bin/sh\necho $$ > ${path.join(dir, `slow-reader-${mode}.pid`)}\nsleep 0.5\ncat > /dev/null\necho read > ${path.join(dir, `slow-reader-${mode}.read`)}\nexec sleep 30\n`)
      const abort = new AbortController()
      const call = runFunctionProcess({command: fn, input: Buffer.alloc(MiB, 'x'), maxStdoutBytes: 1024, label: 'slow-reader', launcher, signal: abort.signal}).catch((e: Error) => e)
      const pid = await pidIn(path.join(dir, `slow-reader-${mode}.pid`))
      await waitFor(() => launcher.liveCalls.has(pid), 'the call to be held')
      expect(launcher.sleepCandidates(), 'its input not all written').to.not.include(pid)
      await waitFor(() => existsSync(path.join(dir, `slow-reader-${mode}.read`)), 'the function to read its input')
      await waitFor(() => launcher.sleepCandidates().includes(pid), 'the call to be a candidate for sleep')
      abort.abort()
      expect(await call).to.be.instanceOf(Error)
      expect(launcher.liveCalls.has(pid)).to.equal(false)
      expect(launcher.feeding.size).to.equal(0)
      await launcher.close()
    })
  }

  it("a sweep spares a process another launcher holds (a pid the kernel gave again), and takes it once that one let go", async () => {
    const holder = new ProcessLauncher()
    const call = runSleeper(holder, await sleeper('held'))
    const pid = await pidIn(path.join(dir, 'held.pid'))
    await waitFor(() => holder.liveCalls.has(pid), 'the call to be held')
    // As an ended call of another launcher whose function had that pid: its group is the held one's.
    expect(await sweep([{marker: 'fnr-test.ended', pid}])).to.equal(0)
    expect(isAlive(pid)).to.equal(true)
    holder.liveCalls.delete(pid)
    expect(await sweep([{marker: 'fnr-test.ended', pid}])).to.equal(1)
    await waitFor(() => !isAlive(pid), 'the process to die')
    await call
    await holder.close()
  })

  it('each launcher has its own spawner; closing one ends its spawner, and the other still serves calls through its own', async () => {
    const a = new ProcessLauncher('spawner').start(() => {}, {FNR_SPAWNER: 'node'})
    const b = new ProcessLauncher('spawner').start(() => {}, {FNR_SPAWNER: 'node'})
    await waitFor(() => a.spawnerPid('node') !== undefined && b.spawnerPid('node') !== undefined, 'both spawners to start')
    const [spawnerA, spawnerB] = [a.spawnerPid('node')!, b.spawnerPid('node')!]
    expect(spawnerA).to.not.equal(spawnerB)
    await a.close()
    await waitFor(() => !isAlive(spawnerA), "a's spawner to end")
    // b's calls go through b's spawner: the function is its child.
    let parent = 0
    await waitFor(async () => {
      const r = await runFunctionProcess({command: '/bin/sh', args: ['-c', 'echo $PPID'], input: Buffer.alloc(0), maxStdoutBytes: 1024, label: 'ppid', launcher: b})
      parent = Number(r.stdout.toString().trim())
      return parent === spawnerB
    }, "b's spawner to be ready")
    expect(isAlive(spawnerB)).to.equal(true)
    // a, closed, starts what it is still asked to directly.
    const r = await runFunctionProcess({command: '/bin/sh', args: ['-c', 'echo $PPID'], input: Buffer.alloc(0), maxStdoutBytes: 1024, label: 'ppid', launcher: a})
    expect(Number(r.stdout.toString().trim())).to.equal(process.pid)
    await b.close()
    await waitFor(() => !isAlive(spawnerB), "b's spawner to end")
  })

  it('each launcher reports its own spawner given up to its own server', async () => {
    const told: Record<string, string[]> = {a: [], b: []}
    // a's native helper cannot be run (FNR_SPAWN_HELPER names nothing): a falls back to its Node spawner and says so; b hears nothing.
    const saved = process.env.FNR_SPAWN_HELPER
    process.env.FNR_SPAWN_HELPER = '/nonexistent/fnr-spawn'
    const a = new ProcessLauncher('native').start((m) => told.a!.push(m))
    const b = new ProcessLauncher('spawner').start((m) => told.b!.push(m), {FNR_SPAWNER: 'node'})
    try {
      await waitFor(() => told.a!.length > 0, 'a to say its helper was given up')
      expect(told.a).to.deep.equal(['the process spawner could not be started (spawn /nonexistent/fnr-spawn ENOENT); functions are started through the Node process spawner'])
      expect(a.spawnerUsable('native')).to.equal(false)
      expect(told.b).to.deep.equal([])
      expect(b.spawnerUsable('node')).to.equal(true)
    } finally {
      if (saved === undefined) delete process.env.FNR_SPAWN_HELPER
      else process.env.FNR_SPAWN_HELPER = saved
      await a.close()
      await b.close()
    }
  })
})
