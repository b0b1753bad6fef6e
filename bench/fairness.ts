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
 * over 127.0.0.1, B over ::1 (two clients). Each scenario runs FNR_FAIRNESS_ROUNDS times (default
 * 3), the arms in a rotating order; a row gives the median over the rounds, the longest, and every
 * round's value. `FNR_FAIRNESS_BEFORE_BIN=/path/to/bin/run.js` adds another build of fnr as a third
 * arm in the same run (the "before" column of docs/limits.md); `FNR_FAIRNESS_BIN` replaces this
 * build (results then go to fairness-other.json); `FNR_BENCH_COMPETITOR=N` runs N busy processes
 * beside the whole bench (porch-runner.ts besideCompetitors). Run with
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
import {loadAverage, median, printTable, ROOT, saveResults, type Row} from './lib.js'
import {besideCompetitors} from './porch-runner.js'

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

/** One runner under test: fnr (this build, or another at `bin`), or Porch's runner. */
interface Arm {
  name: 'fnr' | 'fnr-before' | 'porch'
  /** fnr's bin/run.js; none for Porch's runner. */
  bin?: string
}

/** B's wait (ms) in each round, per arm; F-c's is the longest normal call of the round. */
type Waits = Record<string, number[]>

function row(name: string, waits: Waits, note: string): Row {
  const p50 = (arm: string): number | undefined => (waits[arm]?.length ? round1(median(waits[arm])) : undefined)
  const fnr = p50('fnr') ?? 0
  const porch = p50('porch') ?? 0
  const list = (arm: string) => (waits[arm] ?? []).map((w) => Math.round(w)).join(' / ')
  const before = waits['fnr-before'] ? `; fnr before: p50 ${p50('fnr-before')} ms (${list('fnr-before')})` : ''
  return {case: name, p50: fnr, p95: round1(Math.max(...(waits.fnr ?? [0]))), baselineP50: porch, baselineP95: round1(Math.max(...(waits.porch ?? [0]))), ratio: porch > 0 ? round1(fnr / porch) : undefined, unit: 'ms', note: `${note}; each round: fnr ${list('fnr')}, Porch ${list('porch')}${before}; the p95 columns hold the longest`}
}

/**
 * Every scenario `rounds` times, the arms in a rotating order within each round (each round starts
 * with another arm), so that fnr, an earlier build of fnr (`beforeBin`) and Porch's runner are
 * measured side by side in one run. Each fnr build runs as two servers: the Deployment's budget, and
 * two slots for F-b12.
 */
export async function benchFairness(bin = path.join(ROOT, 'bin', 'run.js'), beforeBin?: string, rounds = 3): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const {server} = buildPorchRunner()
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-bench-fairness-'))
  const bed = await fairnessBed(dir)
  const arms: Arm[] = [{name: 'fnr', bin}, ...(beforeBin ? [{name: 'fnr-before' as const, bin: beforeBin}] : []), {name: 'porch'}]
  const porch = await startPorchRunner(server, bed)
  const servers = new Map<string, {port: number; two: number}>([['porch', {port: porch.port, two: porch.port}]])
  const started: Fnr[] = []
  const rows: Row[] = []
  const raw: Record<string, Record<string, unknown[]>> = {}
  const waits: Record<string, Waits> = {}
  const record = (scenario: string, arm: string, wait: number, detail: unknown) => {
    ;((waits[scenario] ??= {})[arm] ??= []).push(wait)
    ;((raw[scenario] ??= {})[arm] ??= []).push(detail)
  }
  const addr = (port: number) => ({a: `127.0.0.1:${port}`, b: `[::1]:${port}`})
  try {
    for (const arm of arms) {
      if (!arm.bin) continue
      const full = await startFnr(arm.bin, bed, [])
      const two = await startFnr(arm.bin, bed, ['--max-concurrent-calls=2'])
      started.push(full, two)
      servers.set(arm.name, {port: full.port, two: two.port})
    }
    for (let r = 0; r < rounds; r++) {
      const order = arms.map((_, i) => arms[(i + r) % arms.length]!)
      for (const arm of order) {
        const {port, two} = servers.get(arm.name)!
        for (const hung of [20, 40]) {
          const res = await hungThenOther(bed, addr(port).a, {hung, bDeadlineMs: 20_000, bAddress: addr(port).b})
          record(`F-a${hung}`, arm.name, res.b.ms, {...res, note: `${res.b.code}, ${res.hungStarted} hung running`})
        }
        const burst = {calls: 320, connections: 20, image: IMAGES.slow, runningBeforeB: 0, waitMs: 500}
        const fb = await burstThenOther(bed, addr(port).a, {...burst, bAddress: addr(port).b})
        record('F-b320', arm.name, fb.b.ms, {...fb, aCalls: undefined})
        const fc = await porchPattern(bed, addr(port).a, {hung: 24, normal: 8, capMs: 30_000})
        record('F-c', arm.name, Math.max(...fc.normal.map((c) => c.ms)), fc)
        const f12 = await burstThenOther(bed, addr(two).a, {calls: 12, connections: 3, image: IMAGES.busy, runningBeforeB: 2, bAddress: addr(two).b})
        record('F-b12', arm.name, f12.b.ms, {...f12, aCalls: undefined})
      }
    }
    const drained = (scenario: string, arm: string) => (raw[scenario]?.[arm] ?? []).map((d) => Math.round((d as {aDrainedAt: number}).aDrainedAt)).join(' / ')
    const stuck = (arm: string) => (raw['F-c']?.[arm] ?? []).reduce((n: number, d) => n + (d as {normalStuck: number}).normalStuck, 0)
    for (const hung of [20, 40]) rows.push(row(`F-a${hung} B's call behind ${hung} hung calls`, waits[`F-a${hung}`]!, `B's codes: fnr ${(raw[`F-a${hung}`]!.fnr as Array<{note: string}>).map((d) => d.note).join('; ')}`))
    rows.push(row("F-b320 B's call behind 320 x 3 s calls", waits['F-b320']!, `A drained at: fnr ${drained('F-b320', 'fnr')}, Porch ${drained('F-b320', 'porch')} ms`))
    rows.push(row('F-c longest normal call among 24 hung, one connection', waits['F-c']!, `normal calls stuck (cancelled at 30 s): fnr ${stuck('fnr')}, Porch ${stuck('porch')}`))
    rows.push(row("F-b12 B's call behind 12 x 1 s busy calls (fnr: 2 slots)", waits['F-b12']!, `A drained at: fnr ${drained('F-b12', 'fnr')}, Porch ${drained('F-b12', 'porch')} ms`))
  } finally {
    for (const f of started) await stopFnr(f)
    await porch.stop()
    await rm(dir, {recursive: true, force: true})
  }
  return {rows, raw}
}

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const bin = process.env.FNR_FAIRNESS_BIN || path.join(ROOT, 'bin', 'run.js')
  const before = process.env.FNR_FAIRNESS_BEFORE_BIN || undefined
  const rounds = Number(process.env.FNR_FAIRNESS_ROUNDS ?? 3)
  const loadBefore = loadAverage()
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 0)
  const {rows, raw} = await besideCompetitors(competitors, () => benchFairness(bin, before, rounds))
  const load = `${loadBefore} -> ${loadAverage()}`
  console.log(`fnr: ${bin}${before ? `; fnr before: ${before}` : ''}; ${rounds} rounds; load average ${load}; ${competitors} busy processes beside it`)
  console.log(printTable(rows))
  const name = `${process.env.FNR_FAIRNESS_BIN ? 'fairness-other' : 'fairness'}${competitors > 0 ? '-competitor' : ''}`
  console.log(`written: ${await saveResults(name, {date: new Date().toISOString(), bin, before, rounds, load, competitors, rows, raw})}`)
}
