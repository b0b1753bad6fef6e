/**
 * F: fair admission (docs/limits.md, "Fair admission, side by side with Porch's runner"), fnr serve beside Porch's own runner (func/server v1.5.8,
 * scripts/catalog-peers.mjs), on the same config.yaml and shell functions, with the scenarios of
 * test/support/fairness.ts. The number of each row is the wait of client B's normal call (ms) while
 * client A does something to the runner; the baseline is Porch's runner in the same run.
 *
 *   F-a20   20 calls that hang, no deadline, one connection; then B (deadline 20 s)
 *   F-a40   the same with 40 hung calls (the issue: Porch's runner answered B in 159 ms)
 *   F-b320  a burst of 320 x 3 s calls (asleep) over 20 connections; B 0.5 s later
 *   F-b12   a burst of 12 x 1 s busy calls over 3 connections, fnr with --max-concurrent-calls=2
 *           (Porch's runner has no limit); B once two run
 *   F-c     Porch's pattern: one connection, no deadlines, 24 hung and 8 normal calls; the longest
 *           normal call (cut at 30 s)
 *
 * fnr runs inside the budget of the Deployment's 1 GiB (--memory-limit=1Gi: 16 slots). A comes
 * over 127.0.0.1, B over ::1 (two clients). `FNR_FAIRNESS_BIN=/path/to/bin/run.js` measures
 * another build of fnr (the "before" column of docs/limits.md); `FNR_BENCH_COMPETITOR=N` runs N busy
 * processes beside the whole bench (porch-runner.ts startCompetitors). Run with
 * `node --import tsx bench/fairness.ts` after `npm run build`; writes bench/results/fairness.json.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {mkdtemp, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {buildPorchRunner} from '../scripts/catalog-peers.mjs'
import {startPorchRunner} from '../test/porch-side-by-side/support.js'
import {burstThenOther, fairnessBed, hungThenOther, IMAGES, porchPattern, round1, type FairnessBed} from '../test/support/fairness.js'
import {loadAverage, printTable, ROOT, saveResults, type Row} from './lib.js'
import {startCompetitors} from './porch-runner.js'

interface Fnr {
  child: ChildProcess
  port: number
}

async function startFnr(bin: string, bed: FairnessBed, extra: string[]): Promise<Fnr> {
  const args = [bin, 'serve', '--port=0', '--log-level=2', `--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod', '--memory-limit=1Gi', '--bind-address=::', ...extra]
  const child = spawn(process.execPath, args, {stdio: ['ignore', 'ignore', 'pipe']})
  let err = ''
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const deadline = Date.now() + 30_000
  for (;;) {
    const m = /"port":(\d+).*"msg":"fnr serve is ready"/.exec(err)
    if (m) return {child, port: Number(m[1])}
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`fnr serve did not start:\n${err}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function stopFnr(f: Fnr): Promise<void> {
  if (f.child.exitCode !== null) return
  f.child.kill('SIGTERM')
  await once(f.child, 'exit')
}

function row(name: string, fnrMs: number, porchMs: number, note: string): Row {
  return {case: name, p50: round1(fnrMs), baselineP50: round1(porchMs), ratio: porchMs > 0 ? round1(fnrMs / porchMs) : undefined, unit: 'ms', note}
}

export async function benchFairness(bin = path.join(ROOT, 'bin', 'run.js')): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const {server} = buildPorchRunner()
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-bench-fairness-'))
  const bed = await fairnessBed(dir)
  const porch = await startPorchRunner(server, bed)
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const addr = (port: number) => ({a: `127.0.0.1:${port}`, b: `[::1]:${port}`})
  try {
    const fnr = await startFnr(bin, bed, [])
    try {
      for (const hung of [20, 40]) {
        const f = await hungThenOther(bed, addr(fnr.port).a, {hung, bDeadlineMs: 20_000, bAddress: addr(fnr.port).b})
        const p = await hungThenOther(bed, addr(porch.port).a, {hung, bDeadlineMs: 20_000, bAddress: addr(porch.port).b})
        raw[`F-a${hung}`] = {fnr: f, porch: p}
        rows.push(row(`F-a${hung} B's call behind ${hung} hung calls`, f.b.ms, p.b.ms, `fnr ${f.b.code} (${f.hungStarted} hung running), Porch ${p.b.code} (${p.hungStarted})`))
      }
      const burst = {calls: 320, connections: 20, image: IMAGES.slow, runningBeforeB: 0, waitMs: 500}
      const fb = await burstThenOther(bed, addr(fnr.port).a, {...burst, bAddress: addr(fnr.port).b})
      const pb = await burstThenOther(bed, addr(porch.port).a, {...burst, bAddress: addr(porch.port).b})
      raw['F-b320'] = {fnr: {...fb, aCalls: undefined}, porch: {...pb, aCalls: undefined}}
      rows.push(row('F-b320 B\'s call behind 320 x 3 s calls', fb.b.ms, pb.b.ms, `A drained at ${Math.round(fb.aDrainedAt)} / ${Math.round(pb.aDrainedAt)} ms; ${fb.aEndedBeforeB} / ${pb.aEndedBeforeB} of A's ended before B`))
      const fc = await porchPattern(bed, addr(fnr.port).a, {hung: 24, normal: 8, capMs: 30_000})
      const pc = await porchPattern(bed, addr(porch.port).a, {hung: 24, normal: 8, capMs: 30_000})
      const worst = (rs: Array<{ms: number}>) => Math.max(...rs.map((r) => r.ms))
      raw['F-c'] = {fnr: fc, porch: pc}
      rows.push(row('F-c longest normal call among 24 hung, one connection', worst(fc.normal), worst(pc.normal), `stuck (cancelled at 30 s): fnr ${fc.normalStuck}, Porch ${pc.normalStuck}`))
    } finally {
      await stopFnr(fnr)
    }
    const two = await startFnr(bin, bed, ['--max-concurrent-calls=2'])
    try {
      const opts = {calls: 12, connections: 3, image: IMAGES.busy, runningBeforeB: 2}
      const f = await burstThenOther(bed, addr(two.port).a, {...opts, bAddress: addr(two.port).b})
      const p = await burstThenOther(bed, addr(porch.port).a, {...opts, bAddress: addr(porch.port).b})
      raw['F-b12'] = {fnr: f, porch: p}
      rows.push(row('F-b12 B\'s call behind 12 x 1 s busy calls (fnr: 2 slots)', f.b.ms, p.b.ms, `${f.aEndedBeforeB} / ${p.aEndedBeforeB} of A's ended before B; A drained at ${Math.round(f.aDrainedAt)} / ${Math.round(p.aDrainedAt)} ms`))
    } finally {
      await stopFnr(two)
    }
  } finally {
    await porch.stop()
    await rm(dir, {recursive: true, force: true})
  }
  return {rows, raw}
}

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const bin = process.env.FNR_FAIRNESS_BIN || path.join(ROOT, 'bin', 'run.js')
  const loadBefore = loadAverage()
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 0)
  const competitor = competitors > 0 ? startCompetitors(competitors) : undefined
  const {rows, raw} = await benchFairness(bin).finally(() => competitor?.stop())
  const load = `${loadBefore} -> ${loadAverage()}`
  console.log(`fnr: ${bin}; load average ${load}; ${competitors} busy processes beside it`)
  console.log(printTable(rows))
  const name = `${process.env.FNR_FAIRNESS_BIN ? 'fairness-other' : 'fairness'}${competitors > 0 ? '-competitor' : ''}`
  console.log(`written: ${await saveResults(name, {date: new Date().toISOString(), bin, load, competitors, rows, raw})}`)
}
