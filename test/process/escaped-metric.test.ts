/**
 * Processes that escaped their call's process group are counted and logged (docs/process.md):
 * the end-of-call sweep reports, per call, how many processes it killed outside the function's
 * process group; `fnr serve` logs one warning per such call (image, count) and counts them in
 * fnr_function_escaped_processes_total. A double fork that stays in the group is killed with the
 * group and is not an escape. Real setsid(1), sh and env(1).
 */
import {expect} from 'chai'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {runFunctionProcess} from '../../src/lib/process/run.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {escapedProcesses, onEscapedProcesses, type EscapeReport} from '../../src/lib/process/sweep.js'
import {freePort} from '../support/registry/tools.js'
import {startServeProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'
import {functionsDirWith} from './support/functions.js'

// Each waits until its daemon has left the group (it creates a file once in its new session):
// otherwise the call could end first, and the group kill would take the daemon (no escape).
const SCRIPTS = {
  /** One daemon in its own session. */
  setsid: '#!/bin/sh\nf="$0.$$"\nsetsid sh -c \': > "$1"; exec sleep 71\' x "$f" </dev/null >/dev/null 2>&1 &\nwhile [ ! -e "$f" ]; do sleep 0.01; done\nrm -f "$f"\nexec cat\n',
  /** A new session whose child clears its environment: two processes outside the group. */
  twoEscaped: '#!/bin/sh\nf="$0.$$"\nsetsid sh -c \'env -i /bin/sleep 72 & : > "$1"; exec sleep 73\' x "$f" </dev/null >/dev/null 2>&1 &\nwhile [ ! -e "$f" ]; do sleep 0.01; done\nrm -f "$f"\nexec cat\n',
  /** A double fork that stays in the function's process group: killed with the group, no escape. */
  inGroup: '#!/bin/sh\n( sleep 74 </dev/null >/dev/null 2>&1 & )\nexec cat\n',
} as const

describe('processes that escaped their call: report, log line and metric', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let dir: string
  after(() => temp.cleanup())
  before(async () => {
    dir = await temp.make('fnr-escaped-')
    for (const [name, script] of Object.entries(SCRIPTS)) await writeExecutable(path.join(dir, name), script)
  })

  const runAndSweep = async (name: keyof typeof SCRIPTS): Promise<{reports: EscapeReport[]; counted: number}> => {
    const reports: EscapeReport[] = []
    const before = escapedProcesses()
    const off = onEscapedProcesses((r) => reports.push(r))
    const launcher = new ProcessLauncher()
    try {
      const r = await runFunctionProcess({command: path.join(dir, name), input: SAMPLE_RL, maxStdoutBytes: 1024 * 1024, label: `example.com/${name}:v1`, launcher})
      expect(r.stdout.equals(SAMPLE_RL)).to.equal(true)
      await launcher.close()
    } finally {
      off()
    }
    return {reports, counted: escapedProcesses() - before}
  }

  it('reports a setsid daemon once, with the function\'s label', async () => {
    const {reports, counted} = await runAndSweep('setsid')
    expect(reports).to.deep.equal([{label: 'example.com/setsid:v1', count: 1}])
    expect(counted).to.equal(1)
  })

  it('counts every escaped process of a call in one report (a session leader and its environment-clearing child)', async () => {
    const {reports, counted} = await runAndSweep('twoEscaped')
    expect(reports).to.deep.equal([{label: 'example.com/twoEscaped:v1', count: 2}])
    expect(counted).to.equal(2)
  })

  it('does not count a double fork that stayed in the process group', async () => {
    const {reports, counted} = await runAndSweep('inGroup')
    expect(reports).to.deep.equal([])
    expect(counted).to.equal(0)
  })

  it('fnr serve (the built CLI) logs one warning per call with escapes and exposes fnr_function_escaped_processes_total', async () => {
    const fns = await functionsDirWith(await temp.make('fnr-escaped-serve-'), {escaper: SCRIPTS.setsid, quiet: '#!/bin/sh\nexec cat\n'})
    const metricsPort = await freePort()
    const serve = await startServeProcess(['--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, `--metrics-port=${metricsPort}`])
    const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
    try {
      const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
      expect(await scrape()).to.match(/^fnr_function_escaped_processes_total 0$/m)
      for (let i = 0; i < 3; i++) await client.evaluateRaw('example.com/escaper:v1', SAMPLE_RL)
      await client.evaluateRaw('example.com/quiet:v1', SAMPLE_RL)
      const warnings = (): Array<Record<string, unknown>> =>
        serve
          .stderr()
          .split('\n')
          .filter((l) => l.includes('escaped the call'))
          .map((l) => JSON.parse(l) as Record<string, unknown>)
      const until = Date.now() + 10_000
      while (warnings().length < 3 && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
      expect(warnings()).to.have.length(3)
      for (const w of warnings()) {
        expect(w).to.include({msg: "function processes escaped the call's process group and were killed", image: 'example.com/escaper:v1', count: 1})
      }
      expect(await scrape()).to.match(/^fnr_function_escaped_processes_total 3$/m)
    } finally {
      client.close()
      serve.child.kill('SIGKILL')
      await serve.exited
    }
  })
})
