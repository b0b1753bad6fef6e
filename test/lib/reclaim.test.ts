import {setTimeout as sleep} from 'node:timers/promises'
import v8 from 'node:v8'
import vm from 'node:vm'

import {expect} from 'chai'

import {FIRST_DELAY_MS, IDLE_FOLLOW_UPS, IDLE_RECLAIM_BYTES, MemoryReclaimer, lastMajorGcAt} from '../../src/lib/reclaim.js'

const MiB = 1024 * 1024

interface Bed {
  r: MemoryReclaimer
  /** performance.now() of each collection run */
  gcs: number[]
  state: {busy: boolean; v8At: number}
  /** Delays of the timers scheduled and not yet run. */
  timers: () => number[]
  /** Runs the timers due now (one round). */
  tick: () => void
}

/** A reclaimer with a scripted collection, V8 clock, busy state and timer. */
function bed(): Bed {
  const gcs: number[] = []
  const state = {busy: true, v8At: Number.NEGATIVE_INFINITY}
  let due: Array<{run: () => void; ms: number}> = []
  const r = new MemoryReclaimer({
    reclaimAfter: 64 * MiB,
    busy: () => state.busy,
    gc: () => gcs.push(performance.now()),
    lastMajorGcAt: () => state.v8At,
    schedule: (run, ms) => due.push({run, ms}),
  })
  return {
    r,
    gcs,
    state,
    timers: () => due.map((t) => t.ms),
    tick: () => {
      const now = due
      due = []
      for (const t of now) t.run()
    },
  }
}

describe('memory reclaimer: when freed request and response memory is collected', () => {
  it('busy: collects once reclaimAfter bytes were freed and V8 has not collected since, with no follow-ups', () => {
    const {r, gcs, timers, tick} = bed()
    r.noteFreed(40 * MiB)
    expect(timers()).to.deep.equal([])
    r.noteFreed(30 * MiB)
    r.noteFreed(30 * MiB) // one collection for a burst of releases
    expect(timers()).to.deep.equal([FIRST_DELAY_MS])
    tick()
    expect(gcs).to.have.length(1)
    expect(timers()).to.deep.equal([])
    expect(r.stats).to.deep.equal({collected: 1, skipped: 0})
  })

  it('busy: skips the collection when V8 made one of its own since the bytes began to add up, and still collects once the runner goes idle', () => {
    const {r, gcs, state, timers, tick} = bed()
    r.noteFreed(70 * MiB)
    state.v8At = performance.now() + 1 // V8 collected after the first byte was freed
    tick()
    expect(gcs).to.have.length(0)
    expect(r.stats.skipped).to.equal(1)
    // the count stays: the next release checks again; V8 has not collected since its last one: forced
    r.noteFreed(MiB)
    tick()
    expect(gcs).to.have.length(1)
    // the burst ends right after another V8 collection: the last (small) release still collects, and follows up
    r.noteFreed(70 * MiB)
    state.v8At = performance.now() + 1
    tick()
    expect(gcs).to.have.length(1)
    state.busy = false
    r.noteFreed(1024)
    tick()
    expect(gcs).to.have.length(2)
    for (let i = 0; i < IDLE_FOLLOW_UPS; i++) {
      expect(timers()).to.deep.equal([FIRST_DELAY_MS * 4 ** (i + 1)])
      tick()
    }
    expect(gcs).to.have.length(2 + IDLE_FOLLOW_UPS)
    expect(timers()).to.deep.equal([])
  })

  it('idle: collects once IDLE_RECLAIM_BYTES were freed, then follows up only while idle; a runner that freed less does not collect', () => {
    const {r, gcs, state, timers, tick} = bed()
    state.busy = false
    state.v8At = performance.now() + 1e9 // V8's collections do not matter when idle
    r.noteFreed(IDLE_RECLAIM_BYTES / 2)
    expect(timers()).to.deep.equal([])
    r.noteFreed(IDLE_RECLAIM_BYTES / 2)
    tick()
    expect(gcs).to.have.length(1)
    tick() // first follow-up
    expect(gcs).to.have.length(2)
    state.busy = true
    tick() // the one already scheduled runs only if V8 has not collected: it has
    expect(gcs).to.have.length(2)
    expect(timers()).to.deep.equal([])
  })

  it('idle, then busy again before the collection: none is forced on the calls that came; it runs once the runner is idle again', () => {
    const {r, gcs, state, tick} = bed()
    state.busy = false
    r.noteFreed(IDLE_RECLAIM_BYTES) // a call of a client that sends one after another ends
    state.busy = true // its next call came before the timer
    tick()
    expect(gcs).to.have.length(0)
    expect(r.stats).to.deep.equal({collected: 0, skipped: 1})
    state.busy = false
    r.noteFreed(MiB) // the last call ends: idle, what both freed is collected
    tick()
    expect(gcs).to.have.length(1)
  })

  it('without a collection function (gc unavailable) nothing is scheduled', () => {
    let scheduled = 0
    const r = new MemoryReclaimer({reclaimAfter: MiB, busy: () => false, gc: null, lastMajorGcAt: () => 0, schedule: () => scheduled++})
    r.noteFreed(100 * MiB)
    expect(scheduled).to.equal(0)
  })

  it('sees this process\'s real major collections', async () => {
    const before = lastMajorGcAt()
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc') as () => void
    gc()
    let after = lastMajorGcAt()
    for (let i = 0; i < 50 && after <= before; i++) {
      await sleep(10) // the entry arrives a turn or so later
      after = lastMajorGcAt()
    }
    expect(after).to.be.greaterThan(before)
    expect(after).to.be.at.most(performance.now())
  })
})
