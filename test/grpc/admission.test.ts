/**
 * Fair admission (docs/limits.md), pure parts: the per-client round-robin queue
 * (src/lib/fair-queue.ts), the judgement of which function process groups sleep
 * (src/lib/idle-calls.ts), and the call budget lending the slots of sleeping calls and taking turns
 * between clients (src/lib/budget.ts), with a scripted idle source instead of /proc.
 */
import {expect} from 'chai'

import {CallBudget, QUIET_SAMPLE_INTERVAL_MS, type BudgetSettings, type IdleSource} from '../../src/lib/budget.js'
import {FnrError} from '../../src/lib/errors.js'
import {FairQueue, peerKey} from '../../src/lib/fair-queue.js'
import {IdleSampler, judgeGroups, MIN_IDLE_AGE_MS, MIN_IDLE_WEIGHT, MIN_IDLE_WINDOW_MS, SAMPLE_INTERVAL_MS, SAMPLE_SLICE_MS, type GroupReading, type IdleSample} from '../../src/lib/idle-calls.js'
import {parseLimitFlags, serverLimits} from '../../src/lib/grpc/limits.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {parseWrapperArgs} from '../../src/lib/wrapper.js'

const MiB = 1024 * 1024
const GiB = 1024 * MiB

function settings(over: Partial<BudgetSettings> = {}): BudgetSettings {
  return {memoryLimit: {bytes: GiB, source: 'flag'}, maxConcurrentCalls: 2, maxQueuedCalls: 100, maxHeldBytes: 100 * MiB, maxRunningBytes: 1000 * MiB, maxConcurrentStreams: 4, ...over}
}

/** An idle source whose answer the test sets. */
class ScriptedIdle implements IdleSource {
  answer: IdleSample = {idle: 0, lent: 0}
  samples = 0
  sample(): IdleSample {
    this.samples++
    return this.answer
  }
  resets = 0
  reset(): void {
    this.resets++
  }
}

const A = (n: number) => ({client: '10.0.0.1', connection: `10.0.0.1:${n}`})
const B = {client: '10.0.0.2', connection: '10.0.0.2:1'}
const turn = () => new Promise((resolve) => setImmediate(resolve))
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await turn()
}

describe('fair admission', () => {
  describe('FairQueue', () => {
    it('takes turns between clients, one call each, and keeps the order within a connection', () => {
      const q = new FairQueue<string>()
      for (let i = 0; i < 5; i++) q.push(`a${i}`, A(1))
      q.push('b0', B)
      q.push('b1', B)
      expect(q.size).to.equal(7)
      expect(q.clientCount).to.equal(2)
      expect(q.largestClient()).to.equal(5)
      const order: string[] = []
      while (q.size > 0) order.push(q.shift()!)
      expect(order).to.deep.equal(['a0', 'b0', 'a1', 'b1', 'a2', 'a3', 'a4'])
      expect(q.clientCount).to.equal(0)
    })

    it('gives a client\'s connections its turns between them: more connections buy no more turns', () => {
      const q = new FairQueue<string>()
      for (let c = 1; c <= 3; c++) for (let i = 0; i < 2; i++) q.push(`a${c}.${i}`, A(c))
      q.push('b0', B)
      q.push('b1', B)
      const order: string[] = []
      while (q.size > 0) order.push(q.shift()!)
      // B gets every other turn although A has three connections.
      expect(order.slice(0, 4)).to.deep.equal(['a1.0', 'b0', 'a2.0', 'b1'])
      expect(order.slice(4)).to.deep.equal(['a3.0', 'a1.1', 'a2.1', 'a3.1'])
    })

    it('a client arriving behind a burst waits for at most one call of each client ahead of it', () => {
      const q = new FairQueue<string>()
      for (let i = 0; i < 300; i++) q.push(`a${i}`, A(1))
      q.shift()
      q.shift()
      q.push('b', B)
      expect(q.shift()).to.equal('a2')
      expect(q.shift()).to.equal('b')
    })

    it('removes a queued call wherever it is and drops empty clients; peek does not take', () => {
      const q = new FairQueue<string>()
      q.push('a0', A(1))
      q.push('b0', B)
      q.push('a1', A(1))
      expect(q.remove('b0')).to.equal(true)
      expect(q.remove('b0')).to.equal(false)
      expect(q.clientCount).to.equal(1)
      expect(q.peek()).to.equal('a0')
      expect(q.size).to.equal(2)
      expect([q.shift(), q.shift(), q.shift()]).to.deep.equal(['a0', 'a1', undefined])
    })

    it('lets a chooser pick which of a connection\'s calls goes on its turn; turns between clients and connections stay', () => {
      // the chooser takes the first call whose name does not start with "h"
      const q = new FairQueue<string>((waiting) => Math.max(0, waiting.findIndex((c) => !c.includes('.h'))))
      for (const c of ['a1.h0', 'a1.h1', 'a1.n0', 'a1.h2', 'a1.n1']) q.push(c, A(1))
      q.push('a2.h0', A(2))
      q.push('b.h0', B)
      expect(q.peek()).to.equal('a1.n0')
      expect(q.firstOf((client) => client === B.client)).to.equal('b.h0')
      const order: string[] = []
      while (q.size > 0) order.push(q.shift()!)
      expect(order).to.deep.equal(['a1.n0', 'b.h0', 'a2.h0', 'a1.n1', 'a1.h0', 'a1.h1', 'a1.h2'])
    })

    it('keys a peer by its address (client) and address with port (connection)', () => {
      expect(peerKey('127.0.0.1:5000')).to.deep.equal({client: '127.0.0.1', connection: '127.0.0.1:5000'})
      expect(peerKey('ipv4:127.0.0.1:5000')).to.deep.equal({client: '127.0.0.1', connection: '127.0.0.1:5000'})
      expect(peerKey('[::1]:6000')).to.deep.equal({client: '::1', connection: '[::1]:6000'})
      expect(peerKey('[::ffff:10.1.2.3]:6000').client).to.equal('10.1.2.3')
      expect(peerKey('::ffff:10.1.2.3:6000').client).to.equal('10.1.2.3')
      expect(peerKey(undefined)).to.deep.equal({client: 'unknown', connection: 'unknown'})
      expect(peerKey('unknown').client).to.equal('unknown')
    })
  })

  describe('judgeGroups', () => {
    const slot = 64 * MiB
    const reading = (over: Partial<GroupReading>): GroupReading => ({cpuMs: 0, rssBytes: MiB, ioBytes: 100, startedAt: 0, ageMs: 10_000, at: 10_000, runnable: false, ...over})

    it('counts a group asleep when it used under 5 % of a core and moved no byte since the previous reading, weighed by its memory', () => {
      const prev = new Map([1, 2, 3, 4].map((pid) => [pid, reading({cpuMs: 900, at: 9_000})] as const))
      const now = new Map([
        [1, reading({cpuMs: 910})], // 1 % since the previous reading: asleep, 1 MiB -> the least weight
        [2, reading({cpuMs: 1_500})], // 60 %: working
        [3, reading({cpuMs: 901, rssBytes: 32 * MiB})], // asleep, half a slot of memory
        [4, reading({cpuMs: 900, ioBytes: 4_000_100})], // no CPU, but its pipes moved 4 MB: fed by a slow runner
        [5, reading({cpuMs: 900, runnable: true})], // no CPU, but ready to run: waiting for a core of a busy machine
      ])
      prev.set(5, reading({cpuMs: 900, at: 9_000}))
      const s = judgeGroups(now, prev, slot)
      expect(s.idle).to.equal(2)
      expect(s.lent).to.be.closeTo(1 - MIN_IDLE_WEIGHT + 0.5, 1e-9)
    })

    it(`a group without a reading at least ${MIN_IDLE_WINDOW_MS} ms older, or under ${MIN_IDLE_AGE_MS} ms old, is working`, () => {
      const young = MIN_IDLE_AGE_MS - 1
      const prev = new Map([[1, reading({at: 10_000 - MIN_IDLE_WINDOW_MS + 1})], [2, reading({at: 9_000, ageMs: young - 1_000})]])
      const now = new Map([
        [1, reading({})], // compared over a window 1 ms too short
        [2, reading({ageMs: young})], // 1 ms too young: starting
        [3, reading({})], // no previous reading
      ])
      expect(judgeGroups(now, prev, slot)).to.deep.equal({idle: 0, lent: 0})
      // the same groups a millisecond later on both counts are asleep
      const prevOld = new Map([[1, reading({at: 10_000 - MIN_IDLE_WINDOW_MS})], [2, reading({at: 10_000 - MIN_IDLE_WINDOW_MS})]])
      expect(judgeGroups(new Map([[1, reading({})], [2, reading({ageMs: young + 1})]]), prevOld, slot).idle).to.equal(2)
    })

    it('a group that uses a whole slot of memory lends nothing; a reading of another process with the same pid is not compared', () => {
      const prev = new Map([[1, reading({at: 9_000, startedAt: 5_000})], [2, reading({at: 9_000})]])
      const now = new Map([[1, reading({})], [2, reading({rssBytes: 100 * MiB})]])
      expect(judgeGroups(now, prev, slot)).to.deep.equal({idle: 1, lent: 0})
    })

    it(`IdleSampler compares with a reading at least ${MIN_IDLE_WINDOW_MS} ms old, and samples at most every minIntervalMs`, () => {
      let cpu = 0
      let reads = 0
      const sampler = new IdleSampler(() => [7], slot, 10, (_leader, at) => {
        reads++
        return {cpuMs: cpu, rssBytes: MiB, ioBytes: 0, startedAt: 0, ageMs: at, at, runnable: false}
      })
      cpu = 10_000 // busy for its first 10 s
      expect(sampler.sample(10_000).idle).to.equal(0)
      expect(sampler.sample(10_005).idle).to.equal(0)
      expect(reads).to.equal(1)
      // then asleep: no CPU since the reading of 10 000, but compared over too short a window first
      expect(sampler.sample(10_000 + MIN_IDLE_WINDOW_MS - 10).idle).to.equal(0)
      expect(reads).to.equal(2)
      expect(sampler.sample(10_000 + MIN_IDLE_WINDOW_MS + 10).idle).to.equal(1)
      // and stays asleep at every sample after that, 100 ms apart (a sliding window)
      for (let at = 10_000 + MIN_IDLE_WINDOW_MS + 150; at < 11_200; at += 100) expect(sampler.sample(at).idle, `at ${at}`).to.equal(1)
      cpu = 10_200 // awake again
      expect(sampler.sample(11_200).idle).to.equal(0)
    })

    it(`IdleSampler reads many groups in slices of ${SAMPLE_SLICE_MS} ms, giving the event loop back between them, and says when the sample is complete`, async () => {
      const groups = Array.from({length: 40}, (_, i) => i + 1)
      const busyFor = (ms: number) => {
        const until = performance.now() + ms
        while (performance.now() < until) {
          // a slow /proc read
        }
      }
      let slow = false
      const sampler = new IdleSampler(() => groups, slot, 10, (_leader, at) => {
        if (slow) busyFor(0.25)
        return {cpuMs: 0, rssBytes: MiB, ioBytes: 0, startedAt: 0, ageMs: 60_000, at, runnable: false}
      })
      let completed = 0
      sampler.onSample = () => completed++
      // fast readings: the sample is complete when sample() returns (baselines for the next one)
      expect(sampler.sample(10_000)).to.deep.equal({idle: 0, lent: 0})
      // 40 readings of 0.25 ms: several slices; sample() returns the last complete sample meanwhile
      slow = true
      const at = 10_000 + MIN_IDLE_WINDOW_MS + 10
      expect(sampler.sample(at).idle).to.equal(0)
      let turnsBetween = 0
      const ticker = setInterval(() => turnsBetween++, 0)
      try {
        for (let i = 0; i < 200 && completed === 0; i++) await turn()
      } finally {
        clearInterval(ticker)
      }
      expect(completed, 'onSample called once the last slice was read').to.equal(1)
      expect(turnsBetween, 'timers ran between the slices').to.be.greaterThan(0)
      expect(sampler.sample(at + 1).idle, 'the completed sample (no new one inside minIntervalMs)').to.equal(40)
      // reset() drops a sample being read: it never completes, and the next sample() starts anew
      sampler.sample(at + 1000)
      sampler.reset()
      for (let i = 0; i < 50; i++) await turn()
      expect(completed).to.equal(1)
      expect(sampler.sample(at + 1001), 'reset forgot the last sample').to.deep.equal({idle: 0, lent: 0})
      for (let i = 0; i < 200 && completed === 1; i++) await turn()
      expect(completed).to.equal(2)
      expect(sampler.sample(at + 1002).idle).to.equal(40)
    })
  })

  describe('CallBudget with calls asleep', () => {
    it('lends the slots of sleeping calls: sixteen hung calls no longer hold the next call', async () => {
      const idle = new ScriptedIdle()
      const budget = new CallBudget(settings({maxConcurrentCalls: 16}), undefined, {idle})
      const hung: Array<() => void> = []
      // A's fifteen take the shared slots, B's first the spare one (B had nothing running).
      for (let i = 0; i < 16; i++) {
        hung.push(await budget.admit(10, 'hang', undefined, i < 15 ? A(1) : B))
        await turn()
      }
      let started = false
      const next = budget.admit(10, 'normal', undefined, B).then((r) => ((started = true), r))
      await turns(3)
      expect(started, 'every slot is taken by a working call').to.equal(false)
      // The sampler finds the sixteen asleep, a sixteenth of a slot each.
      idle.answer = {idle: 16, lent: 16 * (1 - MIN_IDLE_WEIGHT)}
      const release = await next
      expect(started).to.equal(true)
      expect(budget.snapshot()).to.include({running: 17, idle: 16, queued: 0})
      release()
      for (const r of hung) r()
      expect(budget.snapshot().running).to.equal(0)
    })

    it('keeps one slot for a client with nothing running: another client\'s burst or hung calls never make it wait for a judgment', async () => {
      const idle = new ScriptedIdle()
      const budget = new CallBudget(settings({maxConcurrentCalls: 16}), undefined, {idle, paceStarts: false})
      expect(budget.spareSlots).to.equal(1)
      const a: Array<Promise<() => void>> = Array.from({length: 40}, () => budget.admit(10, 'hang', undefined, A(1)))
      await turn()
      expect(budget.snapshot(), 'one client alone takes all but the spare slot').to.include({running: 15, queued: 25})
      // B has nothing running: it starts at once, ahead of A's queued calls.
      const b1 = await budget.admit(10, 'normal', undefined, B)
      expect(budget.snapshot()).to.include({running: 16, queued: 25})
      // B's second call is an ordinary call: it waits its turn.
      let second = false
      const b2 = budget.admit(10, 'normal', undefined, B).then((r) => ((second = true), r))
      await turns(3)
      expect(second).to.equal(false)
      // Once B's first has ended, the spare is B's again; A still cannot take it.
      b1()
      ;(await b2)()
      expect(budget.snapshot()).to.include({running: 15, queued: 25})
      // A third client queued behind A's turn takes the spare from the queue when it frees.
      const c = {client: '10.0.0.3', connection: '10.0.0.3:1'}
      const held = await budget.admit(10, 'normal', undefined, B)
      let cStarted = false
      const c1 = budget.admit(10, 'normal', undefined, c).then((r) => ((cStarted = true), r))
      await turns(3)
      expect(cStarted, 'the spare is taken by B').to.equal(false)
      held()
      ;(await c1)()
      expect(cStarted).to.equal(true)
      expect(budget.snapshot()).to.include({running: 15, queued: 25})
      // A judgment lends the slots of A's calls asleep: every queued call that fits starts at once,
      // not one per sample, and the spare slot is still kept.
      idle.answer = {idle: 15, lent: 15 * (1 - MIN_IDLE_WEIGHT)}
      const more = budget.admit(10, 'hang', undefined, A(2))
      // the budget samples every SAMPLE_INTERVAL_MS while calls wait
      await new Promise((resolve) => setTimeout(resolve, 3 * SAMPLE_INTERVAL_MS))
      expect(budget.snapshot(), 'fifteen asleep lend fourteen slots and a sixteenth: fifteen more start').to.include({running: 30, queued: 11})
      idle.answer = {idle: 0, lent: 0}
      await Promise.all([...a, more].map(async (p) => (await p)()))
      expect(budget.snapshot()).to.include({running: 0, queued: 0})
    })

    it('keeps no spare slot under four slots: one client may use them all', async () => {
      const budget = new CallBudget(settings({maxConcurrentCalls: 3}), undefined, {idle: null, paceStarts: false})
      expect(budget.spareSlots).to.equal(0)
      const r = await Promise.all([1, 2, 3].map(() => budget.admit(10, 'c', undefined, A(1))))
      expect(budget.snapshot()).to.include({running: 3, queued: 0})
      for (const release of r) release()
    })

    it('asks the idle source only when a call would otherwise wait for a slot', async () => {
      const idle = new ScriptedIdle()
      const budget = new CallBudget(settings({maxConcurrentCalls: 2}), undefined, {idle})
      const r1 = await budget.admit(10, 'a')
      await turn()
      expect(idle.samples).to.equal(0)
      const r2 = await budget.admit(10, 'b')
      await turn()
      expect(idle.samples).to.equal(0)
      const waiting = budget.admit(10, 'c')
      await turn()
      expect(idle.samples).to.be.greaterThan(0)
      r1()
      ;(await waiting)()
      r2()
    })

    it('keeps sampling for a second after the slots stop being full: a call that ends does not throw the readings away', async () => {
      const idle = new ScriptedIdle()
      const budget = new CallBudget(settings({maxConcurrentCalls: 2}), undefined, {idle})
      const r1 = await budget.admit(10, 'a')
      await turn()
      const r2 = await budget.admit(10, 'b') // every slot taken: sampling starts, slowly (nothing waits)
      await new Promise((resolve) => setTimeout(resolve, QUIET_SAMPLE_INTERVAL_MS + 50))
      const before = idle.samples
      expect(before).to.be.at.least(1)
      r2() // a slot free again, for a moment
      await new Promise((resolve) => setTimeout(resolve, QUIET_SAMPLE_INTERVAL_MS + 50))
      expect(idle.resets, 'the sampler was not reset').to.equal(0)
      expect(idle.samples).to.be.greaterThan(before)
      r1()
    })

    it('samples every 20 ms while a call waits for a slot, every 250 ms while none does', async () => {
      const idle = new ScriptedIdle()
      const budget = new CallBudget(settings({maxConcurrentCalls: 2, maxQueuedCalls: 10}), undefined, {idle})
      const running = [await budget.admit(10, 'a')]
      await turn()
      running.push(await budget.admit(10, 'b'))
      await turn()
      const quiet = idle.samples
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(idle.samples - quiet, 'slots full, nothing waiting: no sample within 200 ms').to.equal(0)
      const waiting = budget.admit(10, 'c')
      const from = idle.samples
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(idle.samples - from, 'a call waiting: a sample every 20 ms').to.be.at.least(4)
      running[0]!()
      ;(await waiting)()
      running[1]!()
    })

    it('starts the calls gathered in a turn together at its end when starts do not fork the runner (paceStarts: false), one per turn otherwise', async () => {
      for (const paceStarts of [false, true]) {
        const budget = new CallBudget(settings({maxConcurrentCalls: 4}), undefined, {idle: null, paceStarts})
        const releases = await Promise.all([1, 2, 3].map((n) => budget.admit(10, `c${n}`)))
        // Paced, the second and third wait for turns of the event loop (Promise.all above lets them).
        expect(budget.snapshot().running).to.equal(3)
        for (const r of releases) r()
      }
      const paced = new CallBudget(settings({maxConcurrentCalls: 4}), undefined, {idle: null})
      await paced.admit(10, 'first')
      let second = false
      void paced.admit(10, 'second').then(() => (second = true))
      await Promise.resolve()
      expect(second, 'paced: the second start waits for the next turn').to.equal(false)
      await turn()
      expect(second).to.equal(true)
      const unpaced = new CallBudget(settings({maxConcurrentCalls: 4}), undefined, {idle: null, paceStarts: false})
      await unpaced.admit(10, 'first')
      expect(unpaced.snapshot().running).to.equal(1)
      // Gathered: calls that come in the turn in which one started wait for its end, then all start.
      const more = [unpaced.admit(10, 'second'), unpaced.admit(10, 'third')]
      expect(unpaced.snapshot()).to.include({running: 1, queued: 2})
      await new Promise((r) => setImmediate(r))
      expect(unpaced.snapshot(), 'not paced: both start at the end of the turn').to.include({running: 3, queued: 0})
      for (const r of await Promise.all(more)) r()
    })

    it('still holds a call by the running-bytes budget, asleep or not', async () => {
      const idle = new ScriptedIdle()
      idle.answer = {idle: 1, lent: 1 - MIN_IDLE_WEIGHT}
      const budget = new CallBudget(settings({maxConcurrentCalls: 2, maxRunningBytes: 4 * MiB}), undefined, {idle})
      const big = await budget.admit(MiB, 'big') // 3 MiB + 256 KiB of working set
      await turn()
      let started = false
      const p = budget.admit(MiB, 'next').then((r) => ((started = true), r))
      await turns(3)
      expect(started).to.equal(false)
      big()
      ;(await p)()
    })

    it('takes turns between clients: a client behind a burst of another starts after at most one of its calls', async () => {
      const budget = new CallBudget(settings({maxConcurrentCalls: 2}), undefined, {idle: null})
      const order: string[] = []
      const releases: Array<() => void> = []
      const admitAs = (name: string, key: {client: string; connection: string}): Promise<void> =>
        budget.admit(10, name, undefined, key).then((r) => {
          order.push(name)
          releases.push(r)
        })
      await admitAs('a-first', A(1))
      await turn()
      await admitAs('a-second', A(1))
      const burst = Array.from({length: 10}, (_, i) => admitAs(`a${i}`, A(1)))
      await turn()
      const b = admitAs('b', B)
      expect(budget.snapshot()).to.include({queued: 11, queuedClients: 2, largestClientQueue: 10})
      // Calls finish one at a time, oldest first.
      while (order.length < 13) {
        releases.shift()?.()
        await turns(3)
      }
      await Promise.all([...burst, b])
      for (const r of releases) r()
      const queued = order.slice(2)
      expect(queued.indexOf('b'), queued.join(' ')).to.be.at.most(1)
      expect(budget.snapshot()).to.include({running: 0, queued: 0})
    })

    it('a queued call aborted with a DeadlineExceeded reason fails with that reason; any other abort is Cancelled', async () => {
      const budget = new CallBudget(settings({maxConcurrentCalls: 1}), undefined, {idle: null})
      const r = await budget.admit(10, 'a')
      const d = new AbortController()
      const c = new AbortController()
      const pd = budget.admit(10, 'b', d.signal)
      const pc = budget.admit(10, 'c', c.signal)
      const reason = new FnrError('DeadlineExceeded', 'past the runner\'s limit')
      d.abort(reason)
      c.abort(new FnrError('Cancelled', 'the caller cancelled the call'))
      expect(await pd.catch((e: unknown) => e)).to.equal(reason)
      const ec = (await pc.catch((e: unknown) => e)) as FnrError
      expect(ec.kind).to.equal('Cancelled')
      expect(ec.message).to.match(/waiting \d+ ms for a turn/)
      expect(budget.snapshot()).to.include({queued: 0, heldBytes: 10})
      r()
    })
  })

  it('parses --default-deadline (a duration, 0 for none) as the other limit flags', () => {
    expect(parseLimitFlags((n) => (n === 'default-deadline' ? '90s' : undefined))).to.deep.equal({defaultDeadlineMs: 90_000})
    expect(parseLimitFlags((n) => (n === 'default-deadline' ? '0' : undefined))).to.deep.equal({defaultDeadlineMs: 0})
    expect(() => parseLimitFlags((n) => (n === 'default-deadline' ? 'soon' : undefined))).to.throw(/--default-deadline: expected a duration/)
    // fnr wrapper-server (the packaged binary's parser) takes it too; absent, the server gets 5 minutes.
    expect(parseWrapperArgs(['--default-deadline=1m', '--', '/bin/cat']).options.limits).to.deep.equal({defaultDeadlineMs: 60_000})
    expect(serverLimits(undefined, silentLogger).defaultDeadlineMs).to.equal(5 * 60_000)
    expect(serverLimits({defaultDeadlineMs: 0}, silentLogger).defaultDeadlineMs).to.equal(0)
  })
})
