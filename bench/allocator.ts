/**
 * A: the allocator `fnr serve` runs with in its image (docker/fnr.Dockerfile: jemalloc, preloaded),
 * side by side in one run with the glibc settings the image had before it (every buffer of 64 KiB
 * or more mapped and unmapped on its own), glibc's defaults, and Porch's runner (v1.5.8,
 * scripts/catalog-peers.mjs) as the baseline:
 *
 *   A-hol  head-of-line (head-of-line.ts): a small call's wait while 8 x 5 MiB calls run back to
 *          back, the 5 MiB calls done meanwhile, and the runner's CPU per 5 MiB call (the runner
 *          and its children, /proc)
 *   A-rss  memory that returns (fnr's arms): RSS 3 s after a client that opened 400 streams of
 *          6,000,000 of 6,200,000 bytes (test/reliability/memory-limit.test.ts's slowloris) left
 *
 * Arms alternate in a rotating order, two rounds. `node --import tsx bench/allocator.ts` after
 * `npm run build`; FNR_BENCH_HOL_CALLS small calls per arm and round (default 150); writes
 * bench/results/allocator.json.
 */
import {readFileSync} from 'node:fs'

import {buildPorchRunner} from '../scripts/catalog-peers.mjs'
import {imageAllocatorEnv} from '../test/support/node/fnr-image.js'
import {slowloris} from '../test/support/reliability/hostile.js'
import {startExecServe, type ServeFixture} from './fixture.js'
import {BIG_WORKERS, smallWhileBig} from './head-of-line.js'
import {loadAverage, percentile, printTable, procTreeCpuMs, round, saveResults, type Row} from './lib.js'
import {startPorch, type PorchHandle} from './porch-runner.js'

const ALLOCATORS: Record<string, Record<string, string> | 'image'> = {
  'jemalloc (the image)': 'image',
  'glibc, the image before': {MALLOC_TRIM_THRESHOLD_: '65536', MALLOC_MMAP_THRESHOLD_: '65536'},
  'glibc defaults': {},
}

interface Sample {
  latencies: number[]
  bigCalls: number
  cpuMs: number
  rssAfterMiB: number[]
}

function statusKiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1])
}

/** The slowloris of memory-limit.test.ts: RSS (MiB) 3 s after its client left. */
async function rssAfterSlowloris(port: number, pid: number): Promise<number> {
  const attacks = [await slowloris('127.0.0.1', port, 200, 6_200_000, 6_000_000)]
  for (let i = 0; i < 20; i++) attacks.push(await slowloris('127.0.0.1', port, 10, 6_200_000, 6_000_000))
  await new Promise((r) => setTimeout(r, 6000))
  await Promise.all(attacks.map((a) => a.close()))
  await new Promise((r) => setTimeout(r, 3000))
  return Math.round(statusKiB(pid, 'VmRSS') / 1024)
}

async function main(): Promise<void> {
  const holCalls = Number(process.env.FNR_BENCH_HOL_CALLS ?? 150)
  const {server} = buildPorchRunner()
  const image = await imageAllocatorEnv()
  const loadStart = loadAverage()
  const names = [...Object.keys(ALLOCATORS), 'porch']
  const samples: Record<string, Sample> = Object.fromEntries(names.map((n) => [n, {latencies: [], bigCalls: 0, cpuMs: 0, rssAfterMiB: []}]))
  for (let round_ = 0; round_ < 2; round_++) {
    for (const name of names.map((_, i) => names[(i + round_) % names.length]!)) {
      // A fresh runner for each arm and round: what the allocator kept from one round is not the next's.
      let fx: ServeFixture | undefined
      let porch: PorchHandle | undefined
      try {
        const arm = ALLOCATORS[name]
        fx = await startExecServe([{name: 'cat', source: '/bin/cat'}], [], arm === 'image' ? image : (arm ?? {}))
        if (name === 'porch') porch = await startPorch(server, fx)
        const [port, pid] = porch ? [porch.port, porch.pid] : [fx.serve.port, fx.serve.pid]
        const cpu0 = procTreeCpuMs(pid)
        const res = await smallWhileBig(`127.0.0.1:${port}`, fx.image('cat'), holCalls)
        const cpu1 = procTreeCpuMs(pid)
        const s = samples[name]!
        s.latencies.push(...res.latencies)
        s.bigCalls += res.bigCalls
        s.cpuMs += cpu1.self - cpu0.self + cpu1.children - cpu0.children
        if (!porch) s.rssAfterMiB.push(await rssAfterSlowloris(port, pid))
        process.stderr.write(`allocator: round ${round_ + 1}, ${name}: p50 ${round(percentile(res.latencies, 50))} ms, ${res.bigCalls} big calls${s.rssAfterMiB.length ? `, RSS after the slowloris ${s.rssAfterMiB.at(-1)} MiB` : ''}\n`)
      } finally {
        await porch?.stop()
        await fx?.close()
      }
    }
  }
  const porch = samples.porch!
  const perBig = (s: Sample): number => round(s.cpuMs / Math.max(1, s.bigCalls))
  const rows: Row[] = []
  for (const name of Object.keys(ALLOCATORS)) {
    const s = samples[name]!
    rows.push({
      case: `A-hol head-of-line, fnr serve with ${name} vs Porch's runner: a small call while ${BIG_WORKERS} x 5 MiB calls run`,
      p50: round(percentile(s.latencies, 50)),
      p95: round(percentile(s.latencies, 99)),
      baselineP50: round(percentile(porch.latencies, 50)),
      baselineP95: round(percentile(porch.latencies, 99)),
      ratio: round(percentile(s.latencies, 50) / percentile(porch.latencies, 50)),
      unit: 'ms',
      note: `the p95 columns hold p99; CPU per 5 MiB call ${perBig(s)} ms vs Porch ${perBig(porch)} ms (${round(perBig(s) / perBig(porch))}x); 5 MiB calls done ${s.bigCalls} vs ${porch.bigCalls}; ${s.latencies.length} small calls`,
    })
    rows.push({case: `A-rss fnr serve with ${name}: RSS 3 s after a slowloris client left`, p50: Math.max(...s.rssAfterMiB), unit: 'MiB', note: `each round: ${s.rssAfterMiB.join(', ')} MiB`})
  }
  const loadEnd = loadAverage()
  console.log(printTable(rows))
  console.log(`load average ${loadStart} -> ${loadEnd}`)
  console.log(`wrote ${await saveResults('allocator', {date: new Date().toISOString(), loadStart, loadEnd, holCalls, rows, samples})}`)
}

await main()
