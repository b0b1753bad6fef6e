/**
 * SIGINT/SIGTERM on fnr eval and fnr test (real signals to the real CLI): the function's whole
 * process group dies, nothing is written, scratch folders are removed, exit 130/143.
 */
import {expect} from 'chai'
import {execa, type ResultPromise} from 'execa'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {BIN_RUN} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n'

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Resolves once process `pid` sleeps (state S) and used no CPU over three readings 100 ms apart. */
async function waitAsleep(pid: number, ms = 60_000): Promise<void> {
  const reading = async (): Promise<{state: string; cpu: number}> => {
    const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).replace(/^.*\) /s, '').split(' ')
    return {state: fields[0]!, cpu: Number(fields[11]) + Number(fields[12])}
  }
  const until = Date.now() + ms
  let quiet = 0
  let last = await reading()
  while (quiet < 3) {
    if (Date.now() > until) throw new Error(`process ${pid} never went to sleep`)
    await new Promise((r) => setTimeout(r, 100))
    const now = await reading()
    quiet = now.state === 'S' && now.cpu === last.cpu ? quiet + 1 : 0
    last = now
  }
}

async function waitFor(file: string, ms = 20_000): Promise<number> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (existsSync(file)) {
      const text = (await readFile(file, 'utf8')).trim()
      if (text !== '') return Number(text)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${file} did not appear`)
}

async function gone(pid: number, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (!alive(pid)) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

describe('interrupts (SIGINT/SIGTERM) on fnr eval and fnr test', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  const started: ResultPromise[] = []
  const pids: number[] = []
  after(async () => {
    for (const p of started) p.kill('SIGKILL')
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
    await temp.cleanup()
  })

  /** A function that records its pid and a grandchild's, then hangs. */
  async function hangingFunction(dir: string): Promise<{fn: string; pidFile: string; childFile: string}> {
    const pidFile = path.join(dir, 'fn.pid')
    const childFile = path.join(dir, 'fn.child')
    const fn = await writeExecutable(path.join(dir, 'hang'), `#!/bin/sh\ncat >/dev/null\nsleep 60 &\necho $! > ${childFile}\necho $$ > ${pidFile}\nwait\n`)
    return {fn, pidFile, childFile}
  }

  for (const [signal, code, env] of [
    ['SIGINT', 130, {}],
    ['SIGTERM', 143, {}],
    ['SIGINT', 130, {FNR_NO_FAST_PATH: '1'}],
  ] as const) {
    it(`fnr eval${'FNR_NO_FAST_PATH' in env ? ' (through oclif)' : ''}: ${signal} kills the function's process group, writes nothing, exits ${code}`, async () => {
      const dir = await temp.make('fnr-int-')
      const pkg = path.join(dir, 'pkg')
      await mkdir(pkg)
      await writeFile(path.join(pkg, 'cm.yaml'), CM)
      const {fn, pidFile, childFile} = await hangingFunction(dir)
      const proc = execa(process.execPath, [BIN_RUN, 'eval', '--input', pkg, '-o', pkg, '--exec', fn], {reject: false, env})
      started.push(proc)
      const pid = await waitFor(pidFile)
      const child = await waitFor(childFile)
      pids.push(pid, child)
      expect(alive(pid) && alive(child)).to.equal(true)
      proc.kill(signal)
      const r = await proc
      expect(r.exitCode, String(r.stderr)).to.equal(code)
      expect(String(r.stderr)).to.contain(`interrupted by ${signal}`)
      expect(await gone(pid)).to.equal(true)
      expect(await gone(child)).to.equal(true)
      expect(await readdir(pkg)).to.deep.equal(['cm.yaml'])
      expect(await readFile(path.join(pkg, 'cm.yaml'), 'utf8')).to.equal(CM)
    })
  }

  it('fnr eval: SIGINT while it waits for stdin exits 130 without waiting for the end of stdin', async () => {
    const proc = execa(process.execPath, [BIN_RUN, 'eval', '-', '--exec', 'cat'], {reject: false, stdin: 'pipe'})
    started.push(proc)
    // Waiting on stdin: asleep, and no CPU used for a while (a fixed 700 ms was too short for a
    // start at load 18, and the signal came before fnr's handler).
    await waitAsleep(proc.pid!)
    proc.kill('SIGINT')
    // stdin stays open: the run ends only because of the signal.
    const r = await proc
    expect(r.exitCode).to.equal(130)
  })

  it('fnr sink: SIGINT while it waits for stdin exits 130 and writes nothing', async () => {
    const out = path.join(await temp.make('fnr-int-sink-'), 'out')
    const proc = execa(process.execPath, [BIN_RUN, 'sink', out], {reject: false, stdin: 'pipe'})
    started.push(proc)
    proc.stdin!.write('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: half\n')
    await waitAsleep(proc.pid!)
    proc.kill('SIGINT')
    const r = await proc
    expect(r.exitCode).to.equal(130)
    expect(existsSync(out)).to.equal(false)
  })

  it('fnr test: SIGTERM kills the running functions, removes its scratch folders and exits 143', async () => {
    const dir = await temp.make('fnr-int-test-')
    const tmp = path.join(dir, 'tmp')
    await mkdir(tmp)
    const {fn, pidFile, childFile} = await hangingFunction(dir)
    const cases = path.join(dir, 'cases')
    for (const name of ['one', 'two', 'three']) {
      await mkdir(path.join(cases, name, '.expected'), {recursive: true})
      await writeFile(path.join(cases, name, 'cm.yaml'), CM)
    }
    const proc = execa(process.execPath, [BIN_RUN, 'test', cases, '--exec', fn, '--concurrency', '1'], {reject: false, env: {TMPDIR: tmp}})
    started.push(proc)
    const pid = await waitFor(pidFile)
    const child = await waitFor(childFile)
    pids.push(pid, child)
    expect((await readdir(tmp)).filter((n) => n.startsWith('fnr-test-case-'))).to.have.length(1)
    proc.kill('SIGTERM')
    const r = await proc
    expect(r.exitCode, String(r.stderr)).to.equal(143)
    // The report (stdout without --json) names the signal; the running case is INTERRUPTED, not FAIL.
    expect(`${String(r.stdout)}\n${String(r.stderr)}`).to.contain('interrupted by SIGTERM').and.not.match(/^FAIL /m)
    expect(await gone(pid)).to.equal(true)
    expect(await gone(child)).to.equal(true)
    // (Node's compile cache, bin/run.js, lives in TMPDIR too, and stays: it is not a scratch folder.)
    expect((await readdir(tmp)).filter((n) => n !== 'node-compile-cache')).to.deep.equal([])
  })

  it('fnr render: SIGINT kills the function\'s process group, writes nothing, exits 130', async () => {
    const dir = await temp.make('fnr-int-render-')
    const {fn, pidFile, childFile} = await hangingFunction(dir)
    const pkg = path.join(dir, 'pkg')
    await mkdir(pkg)
    const kptfile = `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - exec: ${fn}\n`
    await writeFile(path.join(pkg, 'Kptfile'), kptfile)
    await writeFile(path.join(pkg, 'cm.yaml'), CM)
    const proc = execa(process.execPath, [BIN_RUN, 'render', pkg, '--allow-exec'], {reject: false})
    started.push(proc)
    const pid = await waitFor(pidFile)
    const child = await waitFor(childFile)
    pids.push(pid, child)
    proc.kill('SIGINT')
    const r = await proc
    expect(r.exitCode, String(r.stderr)).to.equal(130)
    expect(String(r.stderr)).to.contain('interrupted by SIGINT')
    expect(await gone(pid)).to.equal(true)
    expect(await gone(child)).to.equal(true)
    expect(await readdir(pkg)).to.deep.equal(['Kptfile', 'cm.yaml'])
    expect(await readFile(path.join(pkg, 'Kptfile'), 'utf8')).to.equal(kptfile)
  })
})
