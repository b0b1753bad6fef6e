/**
 * Faulty functions (hang, flood stdout or stderr, exit mid-write, killed by a signal, leave a
 * process behind) on the exec runtime and the wrapper server, and `fnr serve` itself killed with
 * SIGKILL and restarted. Every fault must end the call with a clear status, within the hang
 * limit, and leave the server healthy.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {checkHealth, healthClient} from '../support/health.js'
import {faultInput, GOOD_OUTPUT, makeReliabilityFunctions} from '../support/reliability/functions.js'
import {describeProcesses, killAllUnder, leftoversAfter, processesUnder} from '../support/reliability/processes.js'
import {freePort, startServeChild, type ServeChild} from '../support/reliability/serve-process.js'
import {eventually, registerSummary, tally, withinHangLimit} from '../support/reliability/tally.js'
import {sharedTargets, type ServeTarget, type Target, type WrapperTarget} from '../support/reliability/targets.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'

registerSummary()

const S = grpc.status

interface Outcome {
  code: number
  details: string
  response?: Buffer
  log?: Buffer
}

async function outcomeOf(p: Promise<{resourceList: Buffer; log: Buffer}>): Promise<Outcome> {
  try {
    const r = await p
    return {code: S.OK, details: '', response: r.resourceList, log: r.log}
  } catch (err) {
    const e = err as grpc.ServiceError
    if (typeof e.code !== 'number') throw err
    return {code: e.code, details: e.details ?? ''}
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

interface FaultCase {
  label: string
  target: 'serve' | 'wrapper'
  /** Exec function name (serve) or dispatcher fault name (wrapper). */
  fault: string
  input?: Buffer
  deadlineMs?: number
  code: number
  message?: RegExp
  check?: (o: Outcome) => void
}

const CASES: FaultCase[] = [
  // (The caller's own deadline timer ends the call on its side, so its message is the client's.)
  {label: 'hangs (reads its input, never ends)', target: 'serve', fault: 'sleep', deadlineMs: 400, code: S.DEADLINE_EXCEEDED},
  {label: 'hangs without reading its input', target: 'serve', fault: 'hangNoRead', input: Buffer.alloc(900_000, 'h'), deadlineMs: 400, code: S.DEADLINE_EXCEEDED},
  {label: 'hangs with a grandchild', target: 'serve', fault: 'sleepWithChild', deadlineMs: 400, code: S.DEADLINE_EXCEEDED},
  {label: 'floods stdout (7 MiB)', target: 'serve', fault: 'floodStdout', code: S.RESOURCE_EXHAUSTED, message: /wrote more than \d+ bytes to stdout/},
  {label: 'floods stdout without end', target: 'serve', fault: 'floodStdoutForever', code: S.RESOURCE_EXHAUSTED},
  {
    label: 'floods stderr (64 MiB), then answers',
    target: 'serve',
    fault: 'floodStderr',
    code: S.OK,
    check: (o) => {
      expect(o.response!.toString()).to.equal(GOOD_OUTPUT)
      // Only the tail of stderr is kept, and the response stays under the message size.
      expect(o.log!.length).to.be.greaterThan(0).and.at.most(1024 * 1024)
    },
  },
  {label: 'floods stderr without end', target: 'serve', fault: 'floodStderrForever', deadlineMs: 400, code: S.DEADLINE_EXCEEDED},
  {label: 'exits 1 in the middle of its output', target: 'serve', fault: 'exitMidWrite', code: S.INTERNAL, message: /exited with code 1/},
  {label: 'exits 0 in the middle of its output (passed through as it is)', target: 'serve', fault: 'exitMidWriteZero', code: S.OK, check: (o) => expect(o.response!.toString()).to.equal(GOOD_OUTPUT.slice(0, 60))},
  {label: 'is killed by SIGKILL', target: 'serve', fault: 'killedSelf', code: S.INTERNAL, message: /was killed by SIGKILL/},
  {label: 'is killed by SIGTERM', target: 'serve', fault: 'terminatedSelf', code: S.INTERNAL, message: /was killed by SIGTERM/},
  {label: 'crashes with SIGSEGV', target: 'serve', fault: 'segfault', code: S.INTERNAL, message: /was killed by SIGSEGV/},
  {label: 'closes stdin before reading a 900 kB input', target: 'serve', fault: 'closeStdin', input: Buffer.alloc(900_000, 'c'), code: S.OK},
  {label: 'wrapper: hangs', target: 'wrapper', fault: 'hang', deadlineMs: 400, code: S.DEADLINE_EXCEEDED},
  {label: 'wrapper: floods stdout', target: 'wrapper', fault: 'flood-stdout', code: S.RESOURCE_EXHAUSTED},
  {label: 'wrapper: floods stderr without end', target: 'wrapper', fault: 'flood-stderr', deadlineMs: 400, code: S.DEADLINE_EXCEEDED},
  {label: 'wrapper: exits 1 in the middle of its output', target: 'wrapper', fault: 'exit-mid-write', code: S.INTERNAL, message: /exited with code 1/},
  {label: 'wrapper: is killed by SIGKILL', target: 'wrapper', fault: 'killed', code: S.INTERNAL, message: /was killed by SIGKILL/},
  {label: 'wrapper: prints something that is not a ResourceList', target: 'wrapper', fault: 'not-a-resource-list', code: S.INTERNAL, message: /is not a ResourceList/},
]

describe('reliability: faulty functions', function () {
  this.timeout(60_000)
  let serve: ServeTarget
  let wrapper: WrapperTarget

  before(async () => {
    ;({serve, wrapper} = await sharedTargets())
  })

  for (const c of CASES) {
    it(`a function that ${c.label.replace(/^wrapper: /, '')}${c.target === 'wrapper' ? ' (wrapper server)' : ''}`, async () => {
      tally.fault(c.label)
      const t: Target = c.target === 'serve' ? serve : wrapper
      const image = c.target === 'serve' ? serve.fns.image[c.fault]! : 'example.com/any:v1'
      const input = c.target === 'serve' ? (c.input ?? SAMPLE_RL) : faultInput(c.fault)
      const o = await withinHangLimit(c.label, outcomeOf(t.client.evaluateRaw(image, input, c.deadlineMs ? {deadline: Date.now() + c.deadlineMs} : {})))
      if (o.code !== c.code && (o.code === S.UNKNOWN || o.code === S.UNAVAILABLE)) tally.crash(c.label, `status ${o.code}: ${o.details}`)
      expect(o.code, `${c.label}: ${o.code} ${o.details.slice(0, 300)}`).to.equal(c.code)
      if (c.message) expect(o.details).to.match(c.message)
      c.check?.(o)
      await t.assertHealthy(c.label)
    })
  }

  for (const target of ['serve', 'wrapper'] as const) {
    it(`a function that leaves a process in its own session holding stdout does not hang the call (${target})`, async () => {
      // Regression: the call waited for the escaped process to close stdout (forever, for a daemon).
      // fnr cannot kill a process that left the process group; it stops reading instead, and the
      // escaped process is the function's own leak (in a pod, it dies with the container).
      const label = `${target}: setsid escape`
      tally.fault(label)
      const t: Target = target === 'serve' ? serve : wrapper
      const image = target === 'serve' ? serve.fns.image.setsidEscape! : 'example.com/any:v1'
      const input = target === 'serve' ? SAMPLE_RL : faultInput('setsid-escape')
      const o = await withinHangLimit(label, outcomeOf(t.client.evaluateRaw(image, input)))
      expect(o.code, `${label}: ${o.details}`).to.equal(S.OK)
      expect(o.response!.toString()).to.equal(GOOD_OUTPUT)
      const script = target === 'serve' ? 'setsidEscape' : 'dispatcher'
      const escaped = Number((await readFile(path.join(t.fns.functionsDir, `${script}.escaped`), 'utf8')).trim())
      if (isAlive(escaped)) process.kill(escaped, 'SIGKILL')
      await t.assertHealthy(label)
    })
  }
})

describe('reliability: fnr serve killed with SIGKILL and restarted', function () {
  this.timeout(90_000)
  const temp = new TempDirs()
  let dir: string
  let first: ServeChild | undefined
  let second: ServeChild | undefined

  after(async () => {
    first?.child.kill('SIGKILL')
    second?.child.kill('SIGKILL')
    killAllUnder([dir])
    await temp.cleanup()
  })

  it('in-flight calls end UNAVAILABLE, the restarted server serves, and the same client recovers', async () => {
    tally.fault('fnr serve SIGKILL and restart')
    dir = await temp.make('fnr-rel-kill-')
    const fns = await makeReliabilityFunctions(dir)
    const port = await freePort()
    // Without pre-started functions: the end checks that no function process is left while the
    // restarted server runs, and a pre-started one waits there by design (test/process/prestart.test.ts
    // covers the pool across shutdowns).
    const args = [`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--log-level=1', '--prestart-functions=0']
    first = await startServeChild(port, args)
    const client = new EvaluatorClient(`127.0.0.1:${port}`)
    const health = healthClient(`127.0.0.1:${port}`)
    try {
      expect((await client.evaluateRaw(fns.image.cat!, SAMPLE_RL)).resourceList.equals(SAMPLE_RL)).to.equal(true)
      // Calls in flight: functions that would run for a long time.
      const inFlight = Array.from({length: 8}, (_, i) => outcomeOf(client.evaluateRaw(i % 2 ? fns.image.sleep! : fns.image.sleepWithChild!, SAMPLE_RL, {deadline: Date.now() + 60_000})))
      expect(await eventually(() => processesUnder(dir).length >= 8, 10_000), 'the functions started').to.equal(true)

      first.child.kill('SIGKILL')
      expect((await first.exited).signal).to.equal('SIGKILL')
      const outcomes = await withinHangLimit('in-flight calls after SIGKILL', Promise.all(inFlight))
      for (const o of outcomes) {
        expect(o.code, o.details).to.equal(S.UNAVAILABLE)
        expect(o.details).to.not.equal('')
      }

      // Known limit: a SIGKILLed fnr cannot kill its function processes (Node has no parent-death
      // signal); they are orphaned and run to their end. In a pod they die with the container.
      const orphans = processesUnder(dir)
      process.stdout.write(`      (orphaned function processes after SIGKILL: ${orphans.length}; the test kills them)\n`)
      killAllUnder([dir])
      expect(await leftoversAfter([dir]), 'orphans killed by the test').to.deep.equal([])

      second = await startServeChild(port, args)
      // The same client (and channel) reconnects by itself.
      let recovered: Outcome | undefined
      await withinHangLimit(
        'the same client after the restart',
        eventually(async () => {
          recovered = await outcomeOf(client.evaluateRaw(fns.image.cat!, SAMPLE_RL, {deadline: Date.now() + 5000}))
          return recovered.code === S.OK
        }, 9_000, 200),
      )
      expect(recovered?.code, recovered?.details).to.equal(S.OK)
      expect(await checkHealth(health)).to.equal('SERVING')
      // And it still enforces everything: a hanging function ends at the deadline, with nothing left.
      const o = await outcomeOf(client.evaluateRaw(fns.image.sleepWithChild!, SAMPLE_RL, {deadline: Date.now() + 400}))
      expect(o.code).to.equal(S.DEADLINE_EXCEEDED)
      const left = await leftoversAfter([dir])
      expect(left, describeProcesses(left)).to.deep.equal([])

      second.child.kill('SIGTERM')
      expect((await second.exited).code).to.equal(0)
    } finally {
      client.close()
      health.close()
    }
  })
})
