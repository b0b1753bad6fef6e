/**
 * Function processes never outlive their call (docs/process.md): descendants that left the
 * function's process group with setsid, or double-forked, are killed when the call ends, at its
 * deadline, and on the second SIGTERM of the server. Real setsid(1) and sh, no stand-ins.
 */
import {execFileSync, spawn} from 'node:child_process'
import {once} from 'node:events'
import {existsSync, readFileSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {runFunctionProcess} from '../../src/lib/process/run.js'
import {nativeHelperPath} from '../../src/lib/process/native-spawner.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {CALL_MARKER_ENV} from '../../src/lib/process/sweep.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'
import {startWrapperProcess} from '../wrapper/support/process.js'
import {startServeProcess} from '../support/serve.js'
import {functionProcesses, functionsDirWith} from './support/functions.js'

function isAlive(pid: number): boolean {
  try {
    // a zombie is dead for this purpose: it runs nothing and only waits to be reaped
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    return !/^\S+ \(.*\) [ZX]/s.test(stat)
  } catch {
    return false
  }
}

async function waitForFile(file: string, ms = 10_000): Promise<string> {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (existsSync(file)) {
      const text = (await readFile(file, 'utf8')).trim()
      if (text !== '') return text
    }
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`${file} did not appear`)
}

async function waitDead(pids: number[], ms = 5000): Promise<void> {
  const until = Date.now() + ms
  while (pids.some(isAlive) && Date.now() < until) await new Promise((r) => setTimeout(r, 20))
  expect(pids.filter(isAlive), 'processes still alive').to.deep.equal([])
}

/** sh scripts that leave processes behind in ways a process-group kill does not reach. */
const ESCAPES = {
  /** A daemon in its own session, stdio closed: the call returns at once and knows nothing of it. */
  setsidQuiet: '#!/bin/sh\nsetsid sleep 61 </dev/null >/dev/null 2>&1 &\necho $! > "$0.pids"\nexec cat\n',
  /** A double fork into a new session that keeps stdout open. */
  doubleForkHolding: '#!/bin/sh\n( setsid sh -c \'echo $$ > "$1.pids"; exec sleep 62\' x "$0" & )\nwhile [ ! -s "$0.pids" ]; do sleep 0.01; done\nexec cat\n',
  /** A new session whose child clears its environment (the marker) while its parent lives. */
  envCleared: '#!/bin/sh\nsetsid sh -c \'env -i /bin/sleep 63 & echo "$$ $!" > "$1.pids"; exec sleep 64\' x "$0" </dev/null >/dev/null 2>&1 &\nwhile [ ! -s "$0.pids" ]; do sleep 0.01; done\nexec cat\n',
  /** Starts a daemon, then hangs until the deadline. */
  setsidThenHang: '#!/bin/sh\ncat >/dev/null\nsetsid sleep 65 </dev/null >/dev/null 2>&1 &\necho $! > "$0.pids"\nsleep 60\n',
  env: '#!/bin/sh\ncat >/dev/null\necho "kind: ResourceList"\nenv | sed "s/^/# /"\n',
} as const

describe('function processes never outlive their call', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  const launcher = new ProcessLauncher()
  after(() => launcher.close())
  let dir: string
  const fns: Record<string, string> = {}
  before(async () => {
    dir = await temp.make('fnr-escape-')
    for (const [name, script] of Object.entries(ESCAPES)) {
      fns[name] = path.join(dir, name)
      await writeExecutable(fns[name]!, script)
    }
  })
  after(() => temp.cleanup())

  const run = (name: keyof typeof ESCAPES, deadline?: number) =>
    runFunctionProcess({command: fns[name]!, input: SAMPLE_RL, maxStdoutBytes: 1024 * 1024, label: name, deadline, launcher})

  for (const name of ['setsidQuiet', 'doubleForkHolding', 'envCleared'] as const) {
    it(`kills what a function left behind when the call ends: ${name}`, async () => {
      const r = await run(name)
      expect(r.exitCode).to.equal(0)
      expect(r.stdout.equals(SAMPLE_RL)).to.equal(true)
      const pids = (await waitForFile(`${fns[name]}.pids`)).split(/\s+/).map(Number)
      await launcher.sweeper.whenIdle()
      await waitDead(pids)
      expect(launcher.liveCalls.size).to.equal(0)
    })
  }

  it('kills a setsid daemon at the deadline, with the function', async () => {
    const err = await run('setsidThenHang', Date.now() + 800).then(
      () => expect.fail('should time out'),
      (e: Error & {kind?: string}) => e,
    )
    expect(err.kind).to.equal('DeadlineExceeded')
    const pid = Number(await waitForFile(`${fns.setsidThenHang}.pids`))
    await launcher.sweeper.whenIdle()
    await waitDead([pid])
  })

  it('marks each call with its own FNR_FUNCTION_CALL value', async () => {
    const [a, b] = await Promise.all([run('env'), run('env')])
    const marker = (out: Buffer) => new RegExp(`^# ${CALL_MARKER_ENV}=(\\S+)$`, 'm').exec(out.toString())?.[1]
    expect(marker(a.stdout)).to.match(/^\d+\.\d+$/)
    expect(marker(a.stdout)).not.to.equal(marker(b.stdout))
  })

  it('the second SIGTERM kills in-flight functions and what they started before the server exits', async () => {
    const fn = path.join(dir, 'second-signal')
    await writeExecutable(fn, ESCAPES.setsidThenHang)
    const wrapper = await startWrapperProcess('entry', ['--port=0', '--grace-period=30s', '--', fn])
    const client = new EvaluatorClient(wrapper.address)
    try {
      const call = client.evaluateRaw('example.com/fn:v1', SAMPLE_RL).catch((e: unknown) => e)
      const daemon = Number(await waitForFile(`${fn}.pids`))
      const children = functionProcesses(wrapper.child.pid!)
      expect(children).to.have.length(1)
      wrapper.child.kill('SIGTERM')
      await new Promise((r) => setTimeout(r, 300))
      expect(isAlive(children[0]!), 'the first signal drains: the call keeps running').to.equal(true)
      wrapper.child.kill('SIGTERM')
      const {code} = await wrapper.exited
      expect(code).to.equal(1)
      await waitDead([children[0]!, daemon], 2000)
      await call
    } finally {
      client.close()
      await wrapper.kill()
    }
  })
})

describe('through the native helper (a child subreaper): the sweep runs only when something was left', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  const launcher = new ProcessLauncher('native')
  after(() => launcher.close())
  let dir: string
  const fns: Record<string, string> = {}
  const SCRIPTS = {
    ...ESCAPES,
    /** A double fork whose middle process exits at once: the daemon is re-parented while the function hangs. */
    doubleForkThenHang: '#!/bin/sh\ncat >/dev/null\n( setsid sleep 67 </dev/null >/dev/null 2>&1 & echo $! > "$0.pids" )\nsleep 60\n',
    /** Clean: a child that ends before the function does. */
    childEndsFirst: '#!/bin/sh\n/bin/true\nexec cat\n',
  }
  before(async () => {
    // Built as `npm run build` does (the spec needs the helper; no compiler is a failure here).
    execFileSync(process.execPath, [path.resolve('scripts/build-native.mjs')], {stdio: 'inherit'})
    if (!nativeHelperPath()) throw new Error('the native helper was not built (no C compiler?)')
    dir = await temp.make('fnr-escape-native-')
    for (const [name, script] of Object.entries(SCRIPTS)) {
      fns[name] = path.join(dir, name)
      await writeExecutable(fns[name]!, script)
    }
    launcher.start(() => {})
    for (let i = 0; ; i++) {
      const child = launcher.launch({command: '/bin/true', args: [], env: {}})
      const viaHelper = child.constructor.name !== 'ChildProcess'
      await once(child, 'close')
      if (viaHelper) break
      if (i > 200) throw new Error('the native helper did not become ready')
      await new Promise((r) => setTimeout(r, 25))
    }
    await launcher.sweeper.whenIdle()
  })
  after(() => temp.cleanup())

  const run = (name: keyof typeof SCRIPTS, deadline?: number) =>
    runFunctionProcess({command: fns[name]!, input: SAMPLE_RL, maxStdoutBytes: 1024 * 1024, label: name, deadline, launcher})

  it('a call that left nothing is not swept (/bin/cat, and a function whose child ended first)', async () => {
    const before = {requested: launcher.sweeper.requested, skipped: launcher.sweeper.skipped}
    for (let i = 0; i < 5; i++) {
      const [a, b] = await Promise.all([
        runFunctionProcess({command: '/bin/cat', input: SAMPLE_RL, maxStdoutBytes: 1024 * 1024, label: 'cat', launcher}),
        run('childEndsFirst'),
      ])
      expect(a.stdout.equals(SAMPLE_RL) && b.stdout.equals(SAMPLE_RL)).to.equal(true)
    }
    await launcher.sweeper.whenIdle()
    expect({requested: launcher.sweeper.requested - before.requested, skipped: launcher.sweeper.skipped - before.skipped}).to.deep.equal({requested: 0, skipped: 10})
    expect(launcher.liveCalls.size).to.equal(0)
  })

  for (const name of ['setsidQuiet', 'doubleForkHolding', 'envCleared'] as const) {
    it(`a call that left a process is swept, and what it left is killed: ${name}`, async () => {
      const requested = launcher.sweeper.requested
      const r = await run(name)
      expect(r.exitCode).to.equal(0)
      expect(r.stdout.equals(SAMPLE_RL)).to.equal(true)
      const pids = (await waitForFile(`${fns[name]}.pids`)).split(/\s+/).map(Number)
      await launcher.sweeper.whenIdle()
      await waitDead(pids)
      expect(launcher.sweeper.requested).to.be.above(requested)
      expect(launcher.liveCalls.size).to.equal(0)
    })
  }

  it('an orphan is re-parented to the helper, not to PID 1, and killed at the deadline', async () => {
    const call = run('doubleForkThenHang', Date.now() + 3000).then(
      () => expect.fail('should time out'),
      (e: Error & {kind?: string}) => e,
    )
    const daemon = Number(await waitForFile(`${fns.doubleForkThenHang}.pids`))
    const parentOf = (pid: number): number => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    }
    // The subshell that wrote the pid may not have exited yet: the daemon is re-parented once it has.
    const helper = launcher.spawnerPid('native')
    for (const until = Date.now() + 2000; parentOf(daemon) !== helper && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20))
    expect(parentOf(daemon), 'the daemon\'s parent').to.equal(helper)
    expect((await call).kind).to.equal('DeadlineExceeded')
    await launcher.sweeper.whenIdle()
    await waitDead([daemon])
  })
})

describe('fnr serve (the built CLI): the second SIGTERM', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('kills in-flight exec functions and what they started, and --exec-env reaches them', async () => {
    const dir = await temp.make('fnr-escape-serve-')
    const fns = await functionsDirWith(dir, {hang: ESCAPES.setsidThenHang})
    const pidFile = path.join(fns.functionsDir, 'hang.pids')
    const serve = await startServeProcess(['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--grace-period=30s', '--exec-env=FNR_TEST_PASSED'], {FNR_TEST_PASSED: 'yes'})
    const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
    try {
      const call = client.evaluateRaw('example.com/hang:v1', SAMPLE_RL).catch((e: unknown) => e)
      const daemon = Number(await waitForFile(pidFile))
      // The call's function only: serve's start-up also runs one short process through its
      // launcher (first-call.ts, `node --version`), still there on a loaded machine.
      const fn = functionProcesses(serve.child.pid!).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes('hang'))
      expect(fn).to.have.length(1)
      expect(readFileSync(`/proc/${fn[0]}/environ`, 'latin1').split('\0')).to.include('FNR_TEST_PASSED=yes')
      serve.child.kill('SIGTERM')
      await new Promise((r) => setTimeout(r, 300))
      expect(isAlive(fn[0]!), 'the first signal drains: the call keeps running').to.equal(true)
      serve.child.kill('SIGTERM')
      const {code} = await serve.exited
      expect(code).to.equal(1)
      await waitDead([fn[0]!, daemon], 2000)
      await call
    } finally {
      client.close()
      serve.child.kill('SIGKILL')
    }
  })
})

describe('a function process that cannot be started for lack of descriptors', function () {
  this.timeout(60_000)
  it('is a clean UNAVAILABLE error (EMFILE), not a TypeError', async () => {
    const script = `
      import {openSync} from 'node:fs'
      import {runFunctionProcess} from ${JSON.stringify(path.resolve('src/lib/process/run.ts'))}
      import {ProcessLauncher} from ${JSON.stringify(path.resolve('src/lib/process/launcher.ts'))}
      const launcher = new ProcessLauncher()
      const fds = []
      try { for (;;) fds.push(openSync('/dev/null', 'r')) } catch {}
      try {
        await runFunctionProcess({command: '/bin/cat', input: Buffer.from('x'), maxStdoutBytes: 1024, label: 'example.com/fn:v1', launcher})
        console.log(JSON.stringify({ok: true}))
      } catch (e) {
        console.log(JSON.stringify({name: e.name, kind: e.kind, message: e.message}))
      }
      process.exit(0)
    `
    const child = spawn('prlimit', ['--nofile=128', process.execPath, '--import', 'tsx', '--input-type=module', '-e', script], {stdio: ['ignore', 'pipe', 'pipe']})
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    child.stderr.on('data', (c: Buffer) => (err += c))
    await once(child, 'close')
    const result = JSON.parse(out.trim().split('\n').pop() ?? '{}', ) as {name?: string; kind?: string; message?: string}
    expect(result, err).to.include({name: 'FnrError', kind: 'Unavailable'})
    expect(result.message).to.match(/cannot start function "example.com\/fn:v1" \(\/bin\/cat\): the runner is out of file descriptors \((EMFILE|ENFILE)\); retry later/)
  })
})
