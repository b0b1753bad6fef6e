/**
 * How the soak of `npm run reliability -- --soak 10m` (long-run.ts, pod-long-run.ts) judges the
 * server's footprint (test/support/reliability/soak-judge.ts): RSS, fds and child processes
 * sampled through the soak, the first and last thirds after the warm-up compared (RSS by the
 * median, fds and processes by the floor).
 */
import {expect} from 'chai'

import {judgeSoak, soakWarmupMs, type SoakSample} from '../support/reliability/soak-judge.js'

/** One sample a second for `seconds`, from a function of the second. */
function samples(seconds: number, at: (s: number) => Partial<SoakSample>): SoakSample[] {
  return Array.from({length: seconds}, (_, s) => ({t: s * 1000, rssMiB: 120, fds: 40, processes: 10, ...at(s)}))
}

describe('reliability: judging a soak (RSS, fds, processes)', () => {
  it('the warm-up is 10 % of the soak, at least 10 s and at most 60 s', () => {
    expect([soakWarmupMs(30_000), soakWarmupMs(300_000), soakWarmupMs(600_000), soakWarmupMs(3_600_000)]).to.deep.equal([10_000, 30_000, 60_000, 60_000])
  })

  it('a flat footprint with noise passes (medians: one GC spike or burst of calls moves nothing)', () => {
    const v = judgeSoak(samples(120, (s) => ({rssMiB: 120 + (s % 7) - 3 + (s === 100 ? 80 : 0), fds: 40 + (s % 5), processes: 10 + (s % 3)})), 20_000)
    expect(v.ok, v.lines.join('\n')).to.equal(true)
    expect(v.lines[1]).to.match(/^ {2}rssMiB +median 120 MiB → 120 MiB \(\+0, limit \+16\): ok$/)
  })

  it('fds and processes that rise and fall with the calls in flight pass; a rising floor fails', () => {
    // bursts of calls holding pipes: the median moves with the mix, the floor does not
    const bursty = judgeSoak(samples(120, (s) => ({fds: s > 80 && s % 3 ? 140 : 40, processes: s > 80 && s % 3 ? 46 : 0})), 20_000)
    expect(bursty.ok, bursty.lines.join('\n')).to.equal(true)
    const leak = judgeSoak(samples(120, (s) => ({fds: 40 + Math.floor(s / 4) + (s % 2 ? 100 : 0)})), 20_000)
    expect(leak.ok).to.equal(false)
    expect(leak.lines.join('\n')).to.match(/fds +floor +45 → 62 \(\+17, limit \+8\): GROWTH/)
  })

  it('RSS growth past max(10 %, 16 MiB) fails; the same growth during the warm-up does not count', () => {
    const leaking = judgeSoak(samples(120, (s) => ({rssMiB: 120 + s * 0.3})), 20_000)
    expect(leaking.ok).to.equal(false)
    expect(leaking.lines.join('\n')).to.match(/rssMiB .*: GROWTH/)
    // 10 % of a big server is more than 16 MiB: 400 → 430 MiB is within the margin
    expect(judgeSoak(samples(120, (s) => ({rssMiB: 400 + (s > 60 ? 30 : 0)})), 20_000).ok).to.equal(true)
    // a server that grows while it warms up and then stays flat
    expect(judgeSoak(samples(120, (s) => ({rssMiB: s < 20 ? 60 + s * 3 : 120})), 20_000).ok).to.equal(true)
  })

  it('leaking file descriptors or processes fails', () => {
    const fds = judgeSoak(samples(90, (s) => ({fds: 40 + Math.floor(s / 3)})), 15_000)
    expect(fds.ok).to.equal(false)
    expect(fds.lines.join('\n')).to.match(/fds .*: GROWTH/)
    const procs = judgeSoak(samples(90, (s) => ({processes: 10 + Math.floor(s / 10)})), 15_000)
    expect(procs.ok).to.equal(false)
    expect(procs.lines.join('\n')).to.match(/processes .*: GROWTH/)
  })

  it('too few samples after the warm-up is a failure, not a pass', () => {
    const v = judgeSoak(samples(12, () => ({})), 10_000)
    expect(v).to.deep.equal({ok: false, lines: ['only 2 samples after the 10 s warm-up (need 6 or more): run the soak longer']})
  })
})
