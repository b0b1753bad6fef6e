/**
 * Pre-started exec functions (src/lib/process/prestart.ts, docs/process.md "Pre-started
 * functions") through `fnr serve`'s gRPC API: a call served by a process started before it answers
 * byte for byte as a fresh one; a binary changed, a process killed while it waits, an idle TTL and
 * a shutdown each leave no process behind and never fail a call.
 */
import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import {rename, utimes, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {ExecConfig, type ExecFunction} from '../../src/lib/config/exec-config.js'
import {ExecEvaluator} from '../../src/lib/evaluators/exec.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {prestartStats} from '../../src/lib/process/prestart-stats.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import type {RunningServer} from '../../src/lib/serve.js'
import {scrape} from '../metrics/prom-text.js'
import {freePort} from '../support/registry/tools.js'
import {makeFunctionsDir, serveOptions, startInProcess, startServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {functionProcesses, functionsDirWith} from './support/functions.js'

/** Echoes its input, then its environment (the per-call marker left out), working directory and arguments as comments; its pid to stderr. */
const ECHO_FN = '#!/bin/sh\ncat\nenv | grep -v "^FNR_FUNCTION_CALL=" | sort | sed "s/^/# env /"\necho "# cwd $(pwd)"\necho "# args $#"\necho "pid $$" >&2\n'
/** Answers without reading its input: exits before its call when pre-started. */
const QUICK_FN = '#!/bin/sh\nprintf "kind: ResourceList\\nitems: []\\n"\n'

const ECHO = 'example.com/echo:v1'
const QUICK = 'example.com/quick:v1'

/** Polls `check` until it holds (each test's own mocha timeout bounds the wait). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 20))
}

/** The one process waiting in the pool of `launcher`'s server, once there is one. */
async function waitingPid(launcher: ProcessLauncher): Promise<number> {
  await until(() => launcher.idleFunctions.size === 1)
  return [...launcher.idleFunctions.keys()][0]!
}

/** True once `pid` has exited and been reaped: no process, no zombie (a pid the kernel gave to another process, one without a call marker, counts as gone). */
function reaped(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
    if (stat.charAt(stat.lastIndexOf(')') + 2) === 'Z') return false
    return !readFileSync(`/proc/${pid}/environ`, 'latin1').includes('FNR_FUNCTION_CALL=')
  } catch {
    return true
  }
}

function pidOf(log: Buffer): number {
  return Number(/pid (\d+)/.exec(log.toString())?.[1])
}

class PoolHarness {
  readonly temp = new TempDirs()
  running?: RunningServer
  client?: EvaluatorClient
  functionsDir = ''

  private fns: {configPath: string; functionsDir: string} | undefined

  /** The running server's launcher. */
  get launcher(): ProcessLauncher {
    if (!this.running) throw new Error('no server running')
    return this.running.launcher
  }

  /** Starts a server; `sameFunctions`: on the functions of the server stopped last (stopServer). */
  async start(perImage: number, idleTtlMs = 60_000, sameFunctions = false): Promise<EvaluatorClient> {
    const fns = sameFunctions && this.fns ? this.fns : await functionsDirWith(await this.temp.make(), {echo: ECHO_FN, quick: QUICK_FN})
    this.fns = fns
    this.functionsDir = fns.functionsDir
    const options = serveOptions(fns)
    options.exec.prestart = {perImage, idleTtlMs}
    this.running = await startInProcess(options)
    this.client = new EvaluatorClient(`127.0.0.1:${this.running.port}`)
    return this.client
  }

  async stopServer(): Promise<void> {
    this.client?.close()
    await this.running?.stop()
    this.running = undefined
  }

  async stop(): Promise<void> {
    await this.stopServer()
    this.fns = undefined
    await this.temp.cleanup()
  }
}

describe('fnr serve: pre-started exec functions', function () {
  this.timeout(60_000)
  const h = new PoolHarness()
  afterEach(() => h.stop())

  it('serves a call with the process started before it, and answers byte for byte as a fresh process (pool off)', async () => {
    let client = await h.start(0)
    const fresh = await client.evaluateRaw(ECHO, SAMPLE_RL)
    await h.stopServer()

    client = await h.start(1, 60_000, true)
    const hits = prestartStats().hits
    const first = await client.evaluateRaw(ECHO, SAMPLE_RL)
    const waiting = await waitingPid(h.launcher)
    const second = await client.evaluateRaw(ECHO, SAMPLE_RL)
    expect(prestartStats().hits).to.equal(hits + 1)
    expect(pidOf(second.log)).to.equal(waiting)
    expect(pidOf(first.log)).to.not.equal(waiting)
    // Same stdout (input, environment but for the marker, working directory, arguments) either way.
    expect(first.resourceList.equals(fresh.resourceList)).to.equal(true)
    expect(second.resourceList.equals(fresh.resourceList)).to.equal(true)
    expect(second.resourceList.toString()).to.contain(`# cwd ${h.functionsDir}`)
  })

  it('kills a waiting process whose binary changed and serves the call from a fresh one', async () => {
    const client = await h.start(1)
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const waiting = await waitingPid(h.launcher)
    const before = prestartStats().discarded['binary-changed']
    // Same file (the call-time re-check still passes), new modification time: a new identity.
    await utimes(path.join(h.functionsDir, 'echo'), new Date(), new Date(Date.now() + 5_000))
    const answer = await client.evaluateRaw(ECHO, SAMPLE_RL)
    expect(pidOf(answer.log)).to.not.equal(waiting)
    expect(prestartStats().discarded['binary-changed']).to.equal(before + 1)
    await until(() => reaped(waiting))
  })

  it('kills a waiting process as soon as its binary file changes, before any call comes', async () => {
    const client = await h.start(1)
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const waiting = await waitingPid(h.launcher)
    const before = prestartStats().discarded['binary-changed']
    const binary = path.join(h.functionsDir, 'echo')
    // A new modification time: a new identity (the call-time re-check still passes: same file).
    await utimes(binary, new Date(), new Date(Date.now() + 5_000))
    await until(() => reaped(waiting))
    expect(prestartStats().discarded['binary-changed']).to.equal(before + 1)
    // The watch is renewed after each change: the next waiting process goes on a write in place.
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const next = await waitingPid(h.launcher)
    await writeFile(binary, ECHO_FN)
    await until(() => reaped(next))
    expect(prestartStats().discarded['binary-changed']).to.equal(before + 2)
    // And on a new file renamed over it, the way an install replaces a binary (whose calls the
    // exec runtime then refuses: not the file it checked at start-up).
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const third = await waitingPid(h.launcher)
    await writeFile(`${binary}.new`, ECHO_FN, {mode: 0o755})
    await rename(`${binary}.new`, binary)
    await until(() => reaped(third))
    expect(prestartStats().discarded['binary-changed']).to.equal(before + 3)
  })

  it('kills a waiting process when the config stops mapping its image to that binary (a FunctionConfig change)', async () => {
    const dirs = new TempDirs()
    try {
      const fns = await functionsDirWith(await dirs.make(), {echo: ECHO_FN, quick: QUICK_FN})
      const echoFn = {name: 'echo', binary: path.join(fns.functionsDir, 'echo'), images: [ECHO]}
      let mapped: ExecFunction | undefined = echoFn
      // The exec runtime's view of FunctionConfigs is an ExecConfig whose lookup changes under it.
      const config = new (class extends ExecConfig {
        override lookup(image: string): ExecFunction | undefined {
          return image === ECHO ? mapped : undefined
        }
      })([], fns.functionsDir, 'example.com')
      const launcher = new ProcessLauncher()
      const exec = new ExecEvaluator({config, maxOutputBytes: 4 * 1024 * 1024, prestart: {perImage: 1, idleTtlMs: 60_000}, launcher})
      try {
        await exec.evaluate({image: ECHO, resourceList: Buffer.from(SAMPLE_RL)})
        const waiting = await waitingPid(launcher)
        const before = prestartStats().discarded['config-changed']
        exec.configChanged()
        expect(reaped(waiting), 'still mapped: kept').to.equal(false)
        mapped = {...echoFn, binary: path.join(fns.functionsDir, 'quick')}
        exec.configChanged()
        await until(() => reaped(waiting))
        expect(prestartStats().discarded['config-changed']).to.equal(before + 1)
        expect(exec.prestart?.size).to.equal(0)
      } finally {
        await exec.close()
        await launcher.close()
      }
    } finally {
      await dirs.cleanup()
    }
  })

  it('a process killed while it waits does not fail the call', async () => {
    const client = await h.start(1)
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const waiting = await waitingPid(h.launcher)
    process.kill(waiting, 'SIGKILL')
    const answer = await client.evaluateRaw(ECHO, SAMPLE_RL)
    expect(answer.resourceList.toString()).to.contain('kind: ResourceList')
    expect(pidOf(answer.log)).to.not.equal(waiting)
  })

  it('kills a process that waited past the idle TTL', async () => {
    const client = await h.start(1, 300)
    const before = prestartStats().discarded.idle
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const waiting = await waitingPid(h.launcher)
    await until(() => h.launcher.idleFunctions.size === 0)
    expect(prestartStats().discarded.idle).to.equal(before + 1)
    await until(() => reaped(waiting))
  })

  it('kills and reaps every waiting process at shutdown', async () => {
    const client = await h.start(1)
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    const waiting = await waitingPid(h.launcher)
    const {launcher} = h
    await h.stop()
    expect(launcher.idleFunctions.size).to.equal(0)
    await until(() => reaped(waiting))
  })

  it('stops pre-starting an image whose processes exit before their call, and its calls still succeed', async () => {
    const client = await h.start(1)
    const before = prestartStats().discarded.exited
    for (let i = 0; i < 6; i++) {
      expect((await client.evaluateRaw(QUICK, SAMPLE_RL)).resourceList.toString()).to.equal('kind: ResourceList\nitems: []\n')
      // Until the process started after this call has exited (or none was started).
      await new Promise((r) => setTimeout(r, 20))
      await until(() => prestartStats().size === 0)
    }
    // Three exits before use in a row; after that nothing is started for it.
    expect(prestartStats().discarded.exited - before).to.equal(3)
  })

  it('--prestart-functions=0 starts nothing ahead', async () => {
    const client = await h.start(0)
    await client.evaluateRaw(ECHO, SAMPLE_RL)
    await new Promise((r) => setTimeout(r, 200))
    expect(h.launcher.idleFunctions.size).to.equal(0)
  })
})

describe('fnr serve (the built CLI): --prestart-functions, the fnr_prestart_* metrics, nothing left at exit', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  for (const [args, on] of [[[], true], [['--prestart-functions=0'], false]] as const) {
    it(`${args.length ? args.join(' ') : 'by default'}: ${on ? 'the second and third calls take a waiting process' : 'nothing is started ahead'}`, async () => {
      const fns = await makeFunctionsDir(await temp.make())
      const metricsPort = await freePort()
      const serve = await startServeProcess(['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, `--metrics-port=${metricsPort}`, ...args])
      const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
      let waiting: number[] = []
      try {
        for (let i = 0; i < 3; i++) expect((await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL)).resourceList.equals(SAMPLE_RL)).to.equal(true)
        if (on) {
          await until(() => functionProcesses(serve.child.pid!).length === 1)
          waiting = functionProcesses(serve.child.pid!)
        }
        const m = await scrape(metricsPort)
        expect(m.value('fnr_prestart_hits_total', {})).to.equal(on ? 2 : 0)
        expect(m.value('fnr_prestart_misses_total', {})).to.equal(on ? 1 : 0)
        expect(m.value('fnr_prestart_processes', {})).to.equal(on ? 1 : 0)
      } finally {
        client.close()
        serve.child.kill('SIGTERM')
      }
      expect((await serve.exited).code).to.equal(0)
      for (const pid of waiting) await until(() => reaped(pid))
    })
  }
})
