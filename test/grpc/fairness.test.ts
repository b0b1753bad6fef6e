/**
 * Fair admission side by side with Porch's own runner (docs/limits.md). The same functions
 * (test/support/fairness.ts: a function that hangs, a 1 s busy loop, cat) and the same client
 * code go to `fnr serve` (inside the budget of the Deployment's 1 GiB: 16 slots) and to Porch
 * v1.5.8's func/server (built by scripts/catalog-peers.mjs), in the same run:
 *
 *   (a) 20 hung calls without a deadline from client A, then a normal call from client B: B is
 *       answered on both (before, fnr kept B waiting until its 20 s deadline);
 *   (b) a burst from A over three connections on a runner with two slots, then B's call: B ends
 *       before A's burst has drained, after at most one turn of A's (before: after the whole burst);
 *   (c) Porch's pattern, one connection, no deadlines, hung and normal calls mixed: every normal
 *       call is answered (before, the hung calls took every stream of the connection);
 *   (d) --default-deadline: a hung call without a deadline fails DEADLINE_EXCEEDED and its process
 *       group is killed, counted in fnr_hung_calls_killed_total.
 *
 * Outcomes and orderings are asserted; the waits of both runners are printed (and measured by
 * bench/fairness.ts), never asserted. A and B are different clients: A connects over 127.0.0.1, B
 * over ::1.
 */
import {expect} from 'chai'

import {buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {BUILD_TIMEOUT_MS} from '../catalog/support.js'
import {httpGet} from '../metrics/prom-text.js'
import {burstThenOther, fairnessBed, hungThenOther, hungWithoutDeadline, IMAGES, porchPattern, round1, type FairnessBed} from '../support/fairness.js'
import {freePort} from '../support/registry/tools.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {startPorchRunner, type PorchRunner} from '../porch-side-by-side/support.js'

describe('fair admission side by side with Porch\'s runner', function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  const started: ServeProcess[] = []
  let bed: FairnessBed
  let porch: PorchRunner | undefined
  const waits: string[] = []

  /**
   * fnr serve on every address (A comes over 127.0.0.1, B over ::1) with the Deployment's memory
   * limit. Without pre-started functions: the bed's functions record their pid when they start,
   * and a process waiting for its call (docs/process.md "Pre-started functions") would count as
   * one left after the cancel.
   */
  async function fnrServe(...args: string[]): Promise<ServeProcess> {
    const s = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod', '--memory-limit=1Gi', '--bind-address=::', '--prestart-functions=0', ...args])
    started.push(s)
    return s
  }

  before(async function () {
    const porchServer = buildPorchRunner().server
    bed = await fairnessBed(await temp.make('fnr-fairness-'))
    porch = await startPorchRunner(porchServer, bed)
  })

  after(async () => {
    for (const s of started) s.child.kill('SIGTERM')
    await Promise.all(started.map((s) => s.exited))
    await porch?.stop()
    await temp.cleanup()
    console.log(`      waits (ms; load ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}):\n${waits.map((w) => `        ${w}`).join('\n')}`)
  })

  it('(a) 20 hung calls without a deadline from one client: another client\'s call is answered, on fnr as on Porch\'s runner', async function () {
    this.timeout(5 * 60_000)
    const fnr = await fnrServe()
    const f = await hungThenOther(bed, `127.0.0.1:${fnr.port}`, {hung: 20, bDeadlineMs: 20_000, bAddress: `[::1]:${fnr.port}`})
    const p = await hungThenOther(bed, `127.0.0.1:${porch!.port}`, {hung: 20, bDeadlineMs: 20_000, bAddress: `[::1]:${porch!.port}`})
    waits.push(`(a) B after 20 hung calls: fnr ${round1(f.b.ms)} (${f.b.code}, ${f.hungStarted} hung running), Porch ${round1(p.b.ms)} (${p.b.code}, ${p.hungStarted} hung running)`)
    expect(p.b.code, 'Porch\'s runner').to.equal('OK')
    expect(p.hungStarted).to.equal(20)
    expect(f.b.code, `fnr: ${fnr.stderr().slice(-2000)}`).to.equal('OK')
    // All twenty run at once (16 slots and 16 streams per connection: the asleep ones lend theirs).
    expect(f.hungStarted).to.equal(20)
    expect(f.hungEndedBeforeB).to.equal(0)
    expect(f.left, 'fnr: function processes left after the cancel').to.deep.equal([])
    expect(p.left, 'Porch: function processes left after the cancel').to.deep.equal([])
  })

  it('(b) a burst from one client: another client\'s call ends before the burst has drained, after at most one turn of it', async function () {
    this.timeout(5 * 60_000)
    const fnr = await fnrServe('--max-concurrent-calls=2')
    const opts = {calls: 12, connections: 3, image: IMAGES.busy, runningBeforeB: 2}
    const f = await burstThenOther(bed, `127.0.0.1:${fnr.port}`, {...opts, bAddress: `[::1]:${fnr.port}`})
    const p = await burstThenOther(bed, `127.0.0.1:${porch!.port}`, {...opts, bAddress: `[::1]:${porch!.port}`})
    waits.push(`(b) B behind 12 x 1 s busy calls (fnr: 2 slots): fnr ${round1(f.b.ms)} (${f.aEndedBeforeB} of A's ended first, drained at ${round1(f.aDrainedAt)}), Porch ${round1(p.b.ms)} (${p.aEndedBeforeB} of A's ended first, drained at ${round1(p.aDrainedAt)})`)
    expect(p.b.code).to.equal('OK')
    expect(f.b.code).to.equal('OK')
    expect(f.aCalls.map((c) => c.code)).to.deep.equal(Array(12).fill('OK'))
    // B waits for the two calls running and at most one turn of A's: 4 of A's 12 at most end first
    // (one FIFO queue made it wait for all of them).
    expect(f.aEndedBeforeB).to.be.at.most(4)
    expect(f.b.endedAt).to.be.lessThan(f.aDrainedAt)
  })

  it('(b2) the spare slot: while one client\'s calls fill every other slot, not yet judged asleep, another client\'s call starts at once', async function () {
    this.timeout(5 * 60_000)
    const fnr = await fnrServe()
    // 40 calls asleep for 3 s over two connections; B once fifteen of them run (the shared slots
    // of sixteen), before they can have been judged asleep or not.
    const opts = {calls: 40, connections: 2, image: IMAGES.slow, runningBeforeB: 15}
    const f = await burstThenOther(bed, `127.0.0.1:${fnr.port}`, {...opts, bAddress: `[::1]:${fnr.port}`})
    const p = await burstThenOther(bed, `127.0.0.1:${porch!.port}`, {...opts, bAddress: `[::1]:${porch!.port}`})
    waits.push(`(b2) B behind 40 x 3 s calls asleep: fnr ${round1(f.b.ms)} (${f.b.code}), Porch ${round1(p.b.ms)} (${p.b.code})`)
    expect(p.b.code).to.equal('OK')
    expect(f.b.code).to.equal('OK')
    expect(f.aCalls.map((c) => c.code)).to.deep.equal(Array(40).fill('OK'))
    expect(f.aEndedBeforeB).to.equal(0)
    // A's calls over the slots queued; B's call never did (the runner logs every call it queues).
    const queued = fnr.stderr().split('\n').filter((l) => l.includes('"msg":"call queued'))
    expect(queued.some((l) => l.includes(IMAGES.slow)), 'A\'s calls over the slots queued').to.equal(true)
    expect(queued.filter((l) => l.includes(IMAGES.cat)), 'B\'s call queued').to.deep.equal([])
  })

  it('(c) Porch\'s pattern, one connection without deadlines, hung and normal calls mixed: every normal call is answered', async function () {
    this.timeout(5 * 60_000)
    const fnr = await fnrServe()
    const opts = {hung: 24, normal: 8, capMs: 60_000}
    const f = await porchPattern(bed, `127.0.0.1:${fnr.port}`, opts)
    const p = await porchPattern(bed, `127.0.0.1:${porch!.port}`, opts)
    const worst = (rs: Array<{ms: number}>) => round1(Math.max(...rs.map((r) => r.ms)))
    const each = (rs: Array<{ms: number}>) => rs.map((r) => Math.round(r.ms)).join(' ')
    waits.push(`(c) normal calls among 24 hung on one connection: fnr longest ${worst(f.normal)} (${f.normalStuck} stuck; in order ${each(f.normal)}), Porch longest ${worst(p.normal)} (${p.normalStuck} stuck; ${each(p.normal)})`)
    expect(p.normal.map((r) => r.code)).to.deep.equal(Array(8).fill('OK'))
    expect(f.normal.map((r) => r.code), fnr.stderr().slice(-2000)).to.deep.equal(Array(8).fill('OK'))
    expect(f.hungStarted).to.equal(24)
    expect(f.left).to.deep.equal([])
    expect(p.left).to.deep.equal([])
  })

  it('(d) --default-deadline: a hung call without a deadline fails DEADLINE_EXCEEDED, its process group is killed and counted', async function () {
    this.timeout(2 * 60_000)
    const metricsPort = await freePort()
    const fnr = await fnrServe('--default-deadline=2s', `--metrics-port=${metricsPort}`)
    const r = await hungWithoutDeadline(bed, `127.0.0.1:${fnr.port}`)
    expect(r.code).to.equal('DEADLINE_EXCEEDED')
    expect(r.message).to.match(/came without a deadline .* --default-deadline \(2s\): its function was killed/)
    expect(r.pids, 'the function and its background child both started').to.have.length(2)
    expect(r.left, 'processes of the group left').to.deep.equal([])
    const body = (await httpGet(`http://127.0.0.1:${metricsPort}/metrics`)).body
    expect(body).to.match(/^fnr_hung_calls_killed_total 1$/m)
    waits.push(`(d) hung call without a deadline under --default-deadline=2s: ${r.code}`)
  })
})
