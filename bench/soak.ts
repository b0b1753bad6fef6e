/**
 * P6 (soak): a fresh `fnr serve` (exec runtime, /bin/cat) answers N calls (default 10,000, 8 in
 * flight); its RSS, open file descriptors and live child processes are read from /proc after a
 * warm-up and then after every tenth of the calls.
 *
 * No growth means: the same fd count, no children left behind, and RSS over the second half of
 * the calls within a few MiB. RSS first rises to a plateau (V8 grows its young generation to
 * match the allocation rate: ~+30 MiB of heap that is reused, not leaked); a leak keeps rising,
 * and even 1 KiB per call would add ~5 MiB over the second half of 10,000 calls.
 */
import {makeResourceList, startExecServe} from './fixture.js'
import {procStatus, round, runConcurrent, sleep, type ProcStatus, type Row} from './lib.js'

const WARM_UP = 1000
const CONCURRENCY = 8
/** RSS may move this much with GC timing without counting as growth. */
const RSS_SLACK_MIB = 5

export async function benchSoak(calls: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const rows: Row[] = []
  const fx = await startExecServe([{name: 'cat', source: '/bin/cat'}])
  const checkpoints: Array<{calls: number} & ProcStatus> = []
  try {
    await sleep(500)
    const idle = procStatus(fx.serve.pid)
    const input = makeResourceList(3)
    const image = fx.image('cat')
    const call = () => fx.client.evaluateRaw(image, input)
    await runConcurrent(WARM_UP, CONCURRENCY, call)
    await sleep(300)
    const warm = procStatus(fx.serve.pid)
    checkpoints.push({calls: 0, ...warm})
    const step = Math.max(1, Math.round(calls / 10))
    let done = 0
    const t0 = performance.now()
    while (done < calls) {
      const n = Math.min(step, calls - done)
      await runConcurrent(n, CONCURRENCY, call)
      done += n
      checkpoints.push({calls: done, ...procStatus(fx.serve.pid)})
    }
    const seconds = (performance.now() - t0) / 1000
    await sleep(500)
    const end = procStatus(fx.serve.pid)
    const half = checkpoints.find((c) => c.calls >= calls / 2) ?? checkpoints[0]!
    const growth = round(end.rssMiB - half.rssMiB, 1)
    const trend = checkpoints.map((c) => c.rssMiB).join(' → ')
    rows.push({
      case: `P6 RSS of fnr serve after ${calls} calls vs after ${half.calls}`,
      p50: end.rssMiB,
      baselineP50: half.rssMiB,
      added: growth,
      unit: 'MiB',
      target: `no growth (≤ +${RSS_SLACK_MIB} MiB over the second half)`,
      met: growth <= RSS_SLACK_MIB,
      note: `idle ${idle.rssMiB} MiB, ${warm.rssMiB} after ${WARM_UP} warm-up calls; then every ${step} calls: ${trend}; ${round(calls / seconds, 0)} calls/s at c=${CONCURRENCY}`,
    })
    rows.push({
      case: `P6 open fds of fnr serve after ${calls} calls vs after warm-up`,
      p50: end.fds,
      baselineP50: warm.fds,
      added: end.fds - warm.fds,
      unit: 'fds',
      target: 'no growth',
      met: end.fds <= warm.fds,
      note: `idle ${idle.fds}; max during the run ${Math.max(...checkpoints.map((c) => c.fds))}`,
    })
    rows.push({
      case: `P6 child processes of fnr serve after ${calls} calls`,
      p50: end.children,
      baselineP50: idle.children,
      added: end.children - idle.children,
      unit: 'procs',
      target: 'none left',
      met: end.children === 0,
    })
    return {rows, raw: {p6soak: {idle, warm, end, checkpoints, seconds}}}
  } finally {
    await fx.close()
  }
}
