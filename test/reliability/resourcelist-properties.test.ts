/**
 * Property-based tests of the ResourceList reader/writer behind `fnr eval` (fast-check, in a
 * child process so a generated input that never finishes is caught by a per-input time limit):
 * round trips keep every item's content and comments, source → sink reproduces packages, and no
 * input, however broken, makes it throw anything but an FnrError.
 */
import {fork, type ChildProcess} from 'node:child_process'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'

import {PROPERTY_NAMES, type RunRequest, type WorkerMessage} from '../support/reliability/fuzz-properties.js'
import {HANG_MS, LONG, registerSummary, tally} from '../support/reliability/tally.js'

registerSummary()

/** Runs per property (x10 in the long run); the seed is printed so any failure can be replayed. */
const RUNS: Record<string, number> = {
  'wrapped ResourceList round trip': 100,
  'plain documents round trip': 100,
  'package source → sink': 15,
  'arbitrary bytes never crash': 300,
  'YAML token soup never crashes': 300,
  'mutated ResourceLists never crash': 80,
  'alias bombs stay bounded': 30,
}
const SEED = Number(process.env.FNR_FUZZ_SEED ?? Date.now() % 2 ** 31)

const RUNNER = fileURLToPath(new URL('../support/reliability/fuzz-properties.ts', import.meta.url))

/** Forks the property runner (tsx in the child; FNR_FUZZ_CHILD=1 makes it listen). */
function newRunner(): ChildProcess {
  return fork(RUNNER, [], {execArgv: ['--import=tsx'], env: {...process.env, FNR_FUZZ_CHILD: '1'}, stdio: ['ignore', 'inherit', 'inherit', 'ipc']})
}

/** Kills a runner and waits until it is gone (and reaped). */
function stopRunner(runner: ChildProcess): Promise<void> {
  if (runner.exitCode !== null || runner.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    runner.once('exit', () => resolve())
    runner.kill('SIGKILL')
  })
}

/** Runs one property in the runner; a silence of HANG_MS between ticks counts as a hang. */
function runProperty(runner: ChildProcess, property: string, numRuns: number): Promise<Extract<WorkerMessage, {done: string}>> {
  return new Promise((resolve, reject) => {
    let last = '(before the first input)'
    let timer: NodeJS.Timeout | undefined
    const finish = (): void => {
      clearTimeout(timer)
      runner.off('message', onMessage)
      runner.off('error', onError)
      runner.off('exit', onExit)
    }
    const arm = (): void => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        finish()
        tally.hang(`${property}: ${last}`)
        reject(new Error(`${property}: one input took more than ${HANG_MS} ms (hang); input: ${last}`))
      }, HANG_MS)
    }
    const onMessage = (m: WorkerMessage): void => {
      if ('tick' in m) {
        last = m.tick
        arm()
        return
      }
      finish()
      resolve(m)
    }
    const onError = (err: Error): void => {
      finish()
      reject(err)
    }
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      finish()
      reject(new Error(`${property}: the property runner exited (${signal ?? `code ${code}`}) during ${last}`))
    }
    runner.on('message', onMessage)
    runner.once('error', onError)
    runner.once('exit', onExit)
    arm()
    runner.send({property, numRuns, seed: SEED} satisfies RunRequest)
  })
}

describe('reliability: ResourceList properties (fast-check)', function () {
  this.timeout(LONG ? 600_000 : 120_000)
  let runner: ChildProcess | undefined

  before(() => {
    process.stdout.write(`      (fast-check seed ${SEED}; replay with FNR_FUZZ_SEED=${SEED})\n`)
  })

  after(async () => {
    if (runner) await stopRunner(runner)
  })

  it('covers every property', () => {
    expect(Object.keys(RUNS).sort()).to.deep.equal([...PROPERTY_NAMES].sort())
  })

  for (const property of Object.keys(RUNS)) {
    it(property, async () => {
      const numRuns = RUNS[property]! * (LONG ? 10 : 1)
      // One runner for all properties; a new one after a failure (the old one is killed).
      runner ??= newRunner()
      const current = runner
      const result = await runProperty(current, property, numRuns).catch(async (err: unknown) => {
        runner = undefined
        await stopRunner(current)
        throw err
      })
      tally.generated += result.numRuns
      if (!result.ok && /not an FnrError/.test(result.report ?? '')) tally.crash(property, result.report!.split('\n')[0]!)
      expect(result.ok, `${property} (seed ${SEED}):\n${result.report}`).to.equal(true)
    })
  }
})
