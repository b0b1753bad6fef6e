/**
 * Property-based tests of the ResourceList reader/writer behind `fnr eval` (fast-check, in a
 * worker thread so a generated input that never finishes is caught by a per-input time limit):
 * round trips keep every item's content and comments, source → sink reproduces packages, and no
 * input, however broken, makes it throw anything but an FnrError.
 */
import {Worker} from 'node:worker_threads'

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

/** Runs one property in a worker; a silence of HANG_MS between ticks counts as a hang. */
function runProperty(worker: Worker, property: string, numRuns: number): Promise<Extract<WorkerMessage, {done: string}>> {
  return new Promise((resolve, reject) => {
    let last = '(before the first input)'
    let timer: NodeJS.Timeout
    const arm = (): void => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        tally.hang(`${property}: ${last}`)
        worker.off('message', onMessage)
        void worker.terminate()
        reject(new Error(`${property}: one input took more than ${HANG_MS} ms (hang); input: ${last}`))
      }, HANG_MS)
    }
    const onMessage = (m: WorkerMessage): void => {
      if ('tick' in m) {
        last = m.tick
        arm()
        return
      }
      clearTimeout(timer)
      worker.off('message', onMessage)
      resolve(m)
    }
    worker.on('message', onMessage)
    worker.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
    arm()
    worker.postMessage({property, numRuns, seed: SEED} satisfies RunRequest)
  })
}

describe('reliability: ResourceList properties (fast-check)', function () {
  this.timeout(LONG ? 600_000 : 120_000)
  let worker: Worker | undefined
  const newWorker = (): Worker => new Worker(new URL('../support/reliability/fuzz-worker.mjs', import.meta.url))

  before(() => {
    process.stdout.write(`      (fast-check seed ${SEED}; replay with FNR_FUZZ_SEED=${SEED})\n`)
  })

  after(async () => {
    await worker?.terminate()
  })

  it('covers every property', () => {
    expect(Object.keys(RUNS).sort()).to.deep.equal([...PROPERTY_NAMES].sort())
  })

  for (const property of Object.keys(RUNS)) {
    it(property, async () => {
      const numRuns = RUNS[property]! * (LONG ? 10 : 1)
      // One worker for all properties; a new one after a hang (the hung one is terminated).
      worker ??= newWorker()
      const result = await runProperty(worker, property, numRuns).catch((err: unknown) => {
        worker = undefined
        throw err
      })
      tally.generated += result.numRuns
      if (!result.ok && /not an FnrError/.test(result.report ?? '')) tally.crash(property, result.report!.split('\n')[0]!)
      expect(result.ok, `${property} (seed ${SEED}):\n${result.report}`).to.equal(true)
    })
  }
})
