/**
 * The rules of the pre-started function pool (src/lib/process/prestart.ts) with fake processes:
 * hits and misses, the bounds, what a call's spec must match, processes that exit while they wait,
 * the idle TTL, close, and a start that throws. No process is started (a unit spec); the fakes
 * have no pid, so nothing is ever signalled.
 */
import {expect} from 'chai'
import {EventEmitter} from 'node:events'

import {MAX_EXITS_BEFORE_USE, PrestartPool, type PrestartPoolOptions, type PrestartSpec} from '../../src/lib/process/prestart.js'
import {prestartStats, type PrestartDiscardReason} from '../../src/lib/process/prestart-stats.js'
import type {StartedFunction} from '../../src/lib/process/run.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import type {FunctionChild} from '../../src/lib/process/spawner.js'

class FakeChild extends EventEmitter {
  pid: number | undefined = undefined
  stdout = null
  stderr = null
  writeInput(): void {}
}

const ENV = {PATH: '/bin'}
const spec = (over: Partial<PrestartSpec> = {}): PrestartSpec => ({command: '/fns/a', env: ENV, cwd: '/fns', identity: '1:2:3:4:5', ...over})

function fakePool(options: Partial<PrestartPoolOptions> = {}): {pool: PrestartPool; started: FakeChild[]} {
  const started: FakeChild[] = []
  const pool = new PrestartPool({
    perImage: 1,
    idleTtlMs: 60_000,
    launcher: new ProcessLauncher(),
    start: () => {
      const child = new FakeChild()
      started.push(child)
      return {child: child as unknown as FunctionChild, marker: `m${started.length}`, startedAt: Date.now()} satisfies StartedFunction
    },
    ...options,
  })
  return {pool, started}
}

function discardedDelta(before: Record<PrestartDiscardReason, number>): Partial<Record<PrestartDiscardReason, number>> {
  const now = prestartStats().discarded
  const out: Partial<Record<PrestartDiscardReason, number>> = {}
  for (const [k, v] of Object.entries(now) as [PrestartDiscardReason, number][]) if (v !== before[k]) out[k] = v - before[k]
  return out
}

describe('pre-started function pool: its rules', () => {
  const pools: PrestartPool[] = []
  const make = (options: Partial<PrestartPoolOptions> = {}): ReturnType<typeof fakePool> => {
    const made = fakePool(options)
    pools.push(made.pool)
    return made
  }
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.close()))
  })

  it('a call before any is started misses; after refill the next call takes the process started', () => {
    const {pool, started} = make()
    const {hits, misses} = prestartStats()
    expect(pool.take('img', spec())).to.equal(undefined)
    pool.refill('img', spec())
    expect(started).to.have.length(1)
    const taken = pool.take('img', spec())
    expect(taken?.child).to.equal(started[0])
    expect(pool.size).to.equal(0)
    expect(prestartStats().hits - hits).to.equal(1)
    expect(prestartStats().misses - misses).to.equal(1)
  })

  it('keeps at most perImage per image, maxTotal in all, and starts none while room() says no', () => {
    const {pool, started} = make({perImage: 2, maxTotal: 3})
    pool.refill('a', spec())
    pool.refill('a', spec())
    expect(started).to.have.length(2)
    pool.refill('b', spec())
    pool.refill('c', spec())
    expect(pool.size).to.equal(3)
    // Full: the image just called takes the place of the longest-waiting process of another
    // image, one per call, never one of its own.
    const lru = make({perImage: 2, maxTotal: 2})
    lru.pool.refill('a', spec())
    expect(lru.started).to.have.length(2)
    const before = {...prestartStats().discarded}
    lru.pool.refill('b', spec())
    expect(lru.pool.size).to.equal(2)
    expect(discardedDelta(before)).to.deep.equal({evicted: 1})
    expect(lru.pool.take('a', spec())?.child).to.equal(lru.started[1])
    expect(lru.pool.take('b', spec())?.child).to.equal(lru.started[2])
    lru.pool.refill('a', spec())
    lru.pool.refill('a', spec())
    expect(lru.pool.size).to.equal(2)
    expect(discardedDelta(before)).to.deep.equal({evicted: 1})
    let room = false
    const bounded = make({perImage: 2, room: () => room})
    bounded.pool.refill('a', spec())
    expect(bounded.started).to.have.length(0)
    room = true
    bounded.pool.refill('a', spec())
    expect(bounded.started).to.have.length(2)
  })

  it('a process started from another binary file or config serves no call: killed, counted, a miss', () => {
    const {pool} = make()
    const before = {...prestartStats().discarded}
    pool.refill('img', spec())
    expect(pool.take('img', spec({identity: '1:2:3:4:6'}))).to.equal(undefined)
    pool.refill('img', spec())
    expect(pool.take('img', spec({command: '/fns/b'}))).to.equal(undefined)
    pool.refill('img', spec())
    expect(pool.take('img', spec({env: {...ENV}}))).to.equal(undefined)
    expect(discardedDelta(before)).to.deep.equal({'binary-changed': 1, 'config-changed': 2})
  })

  it('prune kills at once the waiting processes its rule calls stale, with its reason, and keeps the rest', () => {
    const {pool, started} = make()
    const before = {...prestartStats().discarded}
    pool.refill('a', spec())
    pool.refill('b', spec({command: '/fns/b'}))
    pool.refill('c', spec({command: '/fns/c'}))
    // a: mapped to nothing now; b: another file at the same path; c: unchanged
    pool.prune((key) => (key === 'a' ? undefined : key === 'b' ? spec({command: '/fns/b', identity: '9:9:9:9:9'}) : spec({command: '/fns/c'})))
    expect(pool.size).to.equal(1)
    expect(discardedDelta(before)).to.deep.equal({'config-changed': 1, 'binary-changed': 1})
    expect(pool.take('a', spec())).to.equal(undefined)
    expect(pool.take('c', spec({command: '/fns/c'}))?.child).to.equal(started[2])
  })

  it('a process that died while waiting is dropped at the call, which misses', () => {
    const {pool, started} = make({alive: () => false})
    const before = {...prestartStats().discarded}
    pool.refill('img', spec())
    started[0]!.pid = 2 ** 22 + 12_345 // never signalled: alive() says it is gone
    expect(pool.take('img', spec())).to.equal(undefined)
    expect(discardedDelta(before)).to.deep.equal({died: 1})
  })

  it(`drops a process that exits while it waits; after ${MAX_EXITS_BEFORE_USE} in a row the image is not pre-started any more, and a hit or another binary resets the count`, () => {
    const {pool, started} = make()
    const before = {...prestartStats().discarded}
    for (let i = 0; i < MAX_EXITS_BEFORE_USE - 1; i++) {
      pool.refill('img', spec())
      started.at(-1)!.emit('exit', 0, null)
      expect(pool.size).to.equal(0)
    }
    pool.refill('img', spec())
    expect(pool.take('img', spec())).to.not.equal(undefined)
    for (let i = 0; i < MAX_EXITS_BEFORE_USE; i++) {
      pool.refill('img', spec())
      started.at(-1)!.emit('exit', 0, null)
    }
    const count = started.length
    pool.refill('img', spec())
    expect(started).to.have.length(count)
    expect(discardedDelta(before)).to.deep.equal({exited: 2 * MAX_EXITS_BEFORE_USE - 1})
    // Another binary: pre-started again.
    pool.refill('img', spec({identity: '9:9:9:9:9'}))
    expect(started).to.have.length(count + 1)
  })

  it('a start that throws is counted and never reaches the caller', () => {
    const {pool} = make({
      start: () => {
        throw new Error('EMFILE')
      },
    })
    const before = {...prestartStats().discarded}
    expect(() => pool.refill('img', spec())).to.not.throw()
    expect(discardedDelta(before)).to.deep.equal({'start-failed': 1})
  })

  it('kills a process that waited past the idle TTL', async function () {
    this.timeout(10_000)
    const {pool} = make({idleTtlMs: 10})
    const before = {...prestartStats().discarded}
    pool.refill('img', spec())
    while (pool.size > 0) await new Promise((r) => setTimeout(r, 5))
    expect(discardedDelta(before)).to.deep.equal({idle: 1})
  })

  it('close kills every waiting process; the pool then starts and serves none', async () => {
    const {pool, started} = make({perImage: 2})
    const before = {...prestartStats().discarded}
    pool.refill('a', spec())
    pool.refill('b', spec())
    const closing = pool.close()
    for (const c of started) c.emit('exit', null, 'SIGKILL')
    await closing
    expect(discardedDelta(before)).to.deep.equal({shutdown: 4})
    pool.refill('a', spec())
    expect(started).to.have.length(4)
    expect(pool.take('a', spec())).to.equal(undefined)
    expect(pool.size).to.equal(0)
  })
})
