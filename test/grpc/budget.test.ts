/**
 * The call budget (src/lib/budget.ts) and its flags (src/lib/grpc/limits.ts): limits read from
 * cgroup files (v1 and v2, the smallest on the way up, "unlimited"), the derivation for the
 * Deployment's 1 GiB, FIFO admission, refusals that say which limit, cancellation while queued.
 */
import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {CallBudget, cgroupMemoryLimit, deriveBudget, parseByteQuantity, type BudgetSettings} from '../../src/lib/budget.js'
import {FnrError} from '../../src/lib/errors.js'
import {parseLimitFlags} from '../../src/lib/grpc/limits.js'
import {silentLogger, type Logger} from '../../src/lib/telemetry/log.js'

const MiB = 1024 * 1024
const GiB = 1024 * MiB

function settings(over: Partial<BudgetSettings> = {}): BudgetSettings {
  return {memoryLimit: {bytes: GiB, source: 'flag'}, maxConcurrentCalls: 2, maxQueuedCalls: 3, maxHeldBytes: 100 * MiB, maxRunningBytes: 1000 * MiB, maxConcurrentStreams: 4, ...over}
}

async function rejection(p: Promise<unknown>): Promise<FnrError> {
  try {
    await p
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    return err as FnrError
  }
  return expect.fail('expected a rejection')
}

describe('call budget', () => {
  describe('memory limit from cgroup files', () => {
    let root: string
    beforeEach(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'fnr-cgroup-'))
    })
    afterEach(async () => rm(root, {recursive: true, force: true}))

    it('reads cgroup v1 memory.limit_in_bytes, the smallest on the way up, and ignores "unlimited"', async () => {
      await mkdir(path.join(root, 'memory/kubepods/pod1/c1'), {recursive: true})
      await writeFile(path.join(root, 'memory/memory.limit_in_bytes'), '9223372036854771712\n')
      await writeFile(path.join(root, 'memory/kubepods/memory.limit_in_bytes'), String(8 * GiB))
      await writeFile(path.join(root, 'memory/kubepods/pod1/memory.limit_in_bytes'), String(GiB))
      await writeFile(path.join(root, 'memory/kubepods/pod1/c1/memory.limit_in_bytes'), '9223372036854771712')
      await writeFile(path.join(root, 'self'), '4:memory:/kubepods/pod1/c1\n0::/\n')
      const limit = cgroupMemoryLimit(root, path.join(root, 'self'))
      expect(limit).to.deep.equal({bytes: GiB, source: 'cgroup-v1', file: path.join(root, 'memory/kubepods/pod1/memory.limit_in_bytes')})
    })

    it('reads cgroup v2 memory.max ("max" is no limit)', async () => {
      await mkdir(path.join(root, 'kubepods/pod1'), {recursive: true})
      await writeFile(path.join(root, 'kubepods/memory.max'), 'max\n')
      await writeFile(path.join(root, 'kubepods/pod1/memory.max'), `${512 * MiB}\n`)
      await writeFile(path.join(root, 'self'), '0::/kubepods/pod1\n')
      expect(cgroupMemoryLimit(root, path.join(root, 'self'))).to.deep.include({bytes: 512 * MiB, source: 'cgroup-v2'})
      await writeFile(path.join(root, 'kubepods/pod1/memory.max'), 'max\n')
      expect(cgroupMemoryLimit(root, path.join(root, 'self'))).to.equal(undefined)
    })

    it('finds no limit without cgroup files', () => {
      expect(cgroupMemoryLimit(root, path.join(root, 'missing'))).to.equal(undefined)
    })
  })

  it('derives the Deployment\'s budget from 1 GiB, and the flags override it', () => {
    const b = deriveBudget({}, () => ({bytes: GiB, source: 'cgroup-v1'}))
    expect(b).to.deep.include({maxConcurrentCalls: 16, maxQueuedCalls: 1024, maxConcurrentStreams: 32})
    expect(b.maxHeldBytes).to.equal(Math.floor(GiB * 0.25))
    expect(b.maxRunningBytes).to.be.at.most(GiB / 6)
    const o = deriveBudget({memoryLimitBytes: 4 * GiB, maxConcurrentCalls: 3, maxQueuedCalls: 0, maxHeldBytes: 10 * MiB, maxConcurrentStreams: 50})
    expect(o).to.deep.include({maxConcurrentCalls: 3, maxQueuedCalls: 0, maxHeldBytes: 10 * MiB, maxConcurrentStreams: 50})
    expect(o.memoryLimit).to.deep.equal({bytes: 4 * GiB, source: 'flag'})
    // Small limits still run two calls; huge ones at most 256.
    expect(deriveBudget({memoryLimitBytes: 64 * MiB}).maxConcurrentCalls).to.equal(2)
    expect(deriveBudget({memoryLimitBytes: 1024 * GiB}).maxConcurrentCalls).to.equal(256)
  })

  it('parses the limit flags, and refuses bad values as usage errors', () => {
    expect(parseLimitFlags((n) => ({'memory-limit': '1Gi', 'max-concurrent-calls': '8', 'max-inflight-bytes': '300Mi', 'message-receive-timeout': '30s', 'connection-idle-timeout': '0', 'handshake-timeout': '2s'})[n as string])).to.deep.equal({
      memoryLimitBytes: GiB,
      maxConcurrentCalls: 8,
      maxHeldBytes: 300 * MiB,
      receiveTimeoutMs: 30_000,
      connectionIdleMs: 0,
      handshakeTimeoutMs: 2000,
    })
    expect(parseLimitFlags(() => undefined)).to.deep.equal({})
    expect(parseByteQuantity('x', '1048576')).to.equal(MiB)
    expect(parseByteQuantity('x', '1G')).to.equal(1e9)
    for (const [name, value, message] of [
      ['memory-limit', 'lots', /--memory-limit: expected bytes/],
      ['memory-limit', '1Mi', /at least 64Mi/],
      ['max-concurrent-calls', '0', /1 or more/],
      ['max-concurrent-calls', '-3', /whole number/],
      ['message-receive-timeout', 'soon', /duration/],
      ['max-concurrent-streams', '0', /1 or more/],
    ] as const) {
      let err: unknown
      try {
        parseLimitFlags((n) => (n === name ? value : undefined))
      } catch (e) {
        err = e
      }
      expect(err, `${name}=${value}`).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('Usage')
      expect((err as Error).message).to.match(message)
    }
  })

  it('runs up to maxConcurrentCalls at once and starts queued calls in order', async () => {
    const budget = new CallBudget(settings())
    const r1 = await budget.admit(10, 'a')
    const r2 = await budget.admit(10, 'b')
    const started: string[] = []
    const q = ['c', 'd', 'e'].map((n) => budget.admit(10, n).then((r) => (started.push(n), r)))
    await new Promise((r) => setImmediate(r))
    expect(started).to.deep.equal([])
    expect(budget.snapshot()).to.deep.include({running: 2, queued: 3, heldBytes: 50})
    r1()
    r1() // twice is once
    await new Promise((r) => setImmediate(r))
    expect(started).to.deep.equal(['c'])
    r2()
    await new Promise((r) => setImmediate(r))
    expect(started).to.deep.equal(['c', 'd'])
    for (const r of await Promise.all(q.slice(0, 2))) r()
    ;(await q[2]!)()
    expect(budget.snapshot()).to.deep.include({running: 0, queued: 0, heldBytes: 0, runningBytes: 0, idle: 0, queuedClients: 0})
  })

  it('gives a connection\'s turn to its waiting call whose image has the fewest calls running (Porch\'s one connection: a normal call does not wait behind hung ones of another function)', async () => {
    const budget = new CallBudget(settings({maxConcurrentCalls: 3, maxQueuedCalls: 10}))
    const porch = {client: 'porch', connection: 'porch:1'}
    const hung = [await budget.admit(10, 'hang', undefined, porch), await budget.admit(10, 'hang', undefined, porch)]
    const normal = await budget.admit(10, 'cat', undefined, porch)
    const started: string[] = []
    const q = ['hang-1', 'hang-2', 'cat-1', 'cat-2', 'other-1'].map((n) => budget.admit(10, n.split('-')[0]!, undefined, porch).then((r) => (started.push(n), r)))
    await new Promise((r) => setImmediate(r))
    expect(started).to.deep.equal([])
    const step = async (release: () => void, expected: string[]) => {
      release()
      await new Promise((r) => setImmediate(r))
      expect(started).to.deep.equal(expected)
    }
    // hang has one call running, cat one, other none: other goes first, although it came last.
    await step(hung[0]!, ['other-1'])
    // hang 1, cat 0, other 1: cat's oldest.
    await step(normal, ['other-1', 'cat-1'])
    // hang 1, cat 1, other 0 and none waiting: a tie goes to the oldest (hang-1).
    await step(await q[4]!, ['other-1', 'cat-1', 'hang-1'])
    // hang 2, cat 0: the second cat, ahead of the older hang-2; then hang-2.
    await step(await q[2]!, ['other-1', 'cat-1', 'hang-1', 'cat-2'])
    await step(hung[1]!, ['other-1', 'cat-1', 'hang-1', 'cat-2', 'hang-2'])
    for (const r of await Promise.all(q)) r()
    expect(budget.snapshot()).to.deep.include({running: 0, queued: 0, heldBytes: 0})
  })

  it('starts the calls that arrive in one turn of the event loop by turns, not in arrival order, and counts as queued only those left waiting at its end', async () => {
    const queued: string[] = []
    const logger = {...silentLogger, info: (msg: string, fields?: Record<string, unknown>) => void queued.push(`${msg} ${String(fields?.image)}`)}
    // Four slots: one client runs three (one is kept for another client); no pacing (a spawner starts the functions).
    const budget = new CallBudget(settings({maxConcurrentCalls: 4, maxQueuedCalls: 10}), logger as Logger, {idle: null, paceStarts: false})
    const porch = {client: 'porch', connection: 'porch:1'}
    const started: string[] = []
    // Porch's server sends its calls on one connection, read in one go: three that hang come first.
    const calls = ['hang-1', 'hang-2', 'hang-3', 'cat-1'].map((n) => budget.admit(10, n.split('-')[0]!, undefined, porch).then((r) => (started.push(n), r)))
    // The first starts at once (a call that arrives alone never waits); the others wait for the end of the turn.
    expect(budget.snapshot()).to.deep.include({running: 1, queued: 3})
    await new Promise((r) => setImmediate(r))
    // hang has one running, cat none: cat goes before the older hang-2; hang-3 waits for a slot.
    expect(started).to.deep.equal(['hang-1', 'cat-1', 'hang-2'])
    expect(budget.snapshot()).to.deep.include({running: 3, queued: 1})
    expect(queued).to.deep.equal(['call queued: the runner is at its concurrency or memory budget hang'])
    ;(await calls[3]!)()
    await new Promise((r) => setImmediate(r))
    expect(started).to.deep.equal(['hang-1', 'cat-1', 'hang-2', 'hang-3'])
    for (const r of await Promise.all(calls)) r()
    expect(budget.snapshot()).to.deep.include({running: 0, queued: 0, heldBytes: 0})
  })

  it('refuses a call when the queue is full, or when its bytes would pass the held-bytes budget, saying which', async () => {
    const budget = new CallBudget(settings({maxConcurrentCalls: 1, maxQueuedCalls: 1}))
    const r1 = await budget.admit(MiB, 'a')
    const queued = budget.admit(MiB, 'b')
    const full = await rejection(budget.admit(MiB, 'c'))
    expect(full.kind).to.equal('ResourceExhausted')
    expect(full.message).to.match(/overloaded, retry later: 1 calls are already waiting \(--max-queued-calls=1\)/)
    r1()
    ;(await queued)()
    const small = new CallBudget(settings({maxConcurrentCalls: 1, maxHeldBytes: 3 * MiB}))
    const s1 = await small.admit(2 * MiB, 'a')
    const memory = await rejection(small.admit(2 * MiB, 'b'))
    expect(memory.message).to.match(/hold 2\.0 MiB of requests, and 2\.0 MiB more would pass --max-inflight-bytes=3\.0 MiB/)
    s1()
  })

  it('lets one call run whatever its size, and holds the next by the running-bytes budget', async () => {
    const budget = new CallBudget(settings({maxConcurrentCalls: 10, maxRunningBytes: 10 * MiB}))
    const big = await budget.admit(5 * MiB, 'big')
    let second = false
    const p = budget.admit(MiB, 'small').then((r) => ((second = true), r))
    await new Promise((r) => setImmediate(r))
    expect(second).to.equal(false)
    big()
    ;(await p)()
    expect(second).to.equal(true)
  })

  it('takes a call cancelled while queued out of the queue, and the held bytes with it', async () => {
    const budget = new CallBudget(settings({maxConcurrentCalls: 1}))
    const r1 = await budget.admit(10, 'a')
    const abort = new AbortController()
    const waiting = budget.admit(20, 'b', abort.signal)
    const after = budget.admit(30, 'c')
    abort.abort()
    const err = await rejection(waiting)
    expect(err.kind).to.equal('Cancelled')
    expect(budget.snapshot()).to.deep.include({queued: 1, heldBytes: 40})
    r1()
    ;(await after)()
    expect(budget.snapshot().heldBytes).to.equal(0)
  })

  it('reserves request bytes being received against the same held-bytes budget', () => {
    const budget = new CallBudget(settings({maxHeldBytes: 100}))
    expect(budget.reserveReceive(60)).to.equal(true)
    expect(budget.reserveReceive(50)).to.equal(false)
    budget.releaseReceive(60)
    expect(budget.reserveReceive(100)).to.equal(true)
  })

  it('a complete request keeps its bytes until its call is admitted: another stream cannot take the room in between', async () => {
    const budget = new CallBudget(settings({maxHeldBytes: 100}))
    const a = budget.openReception()
    expect(budget.reserveReceive(60, a)).to.equal(true)
    // a's request is complete; its call is not admitted yet. Before, its bytes were given back at
    // the end of the stream, b took them, and a's admission was refused (held 50 + 60 > 100).
    const b = budget.openReception()
    expect(budget.reserveReceive(50, b)).to.equal(false)
    expect(budget.snapshot().heldBytes).to.equal(60)
    const handover = budget.claimReception(a.id)
    expect(handover).to.equal(60)
    expect(budget.claimReception(a.id), 'claimed once').to.equal(0)
    const release = await budget.admit(60, 'a', undefined, {client: 'x', connection: 'x:1', handover})
    expect(budget.snapshot().heldBytes, 'counted once').to.equal(60)
    budget.closeReception(a) // the stream closes after its call: nothing more to release
    expect(budget.snapshot().heldBytes).to.equal(60)
    release()
    expect(budget.snapshot().heldBytes).to.equal(0)
    // a request no call claims (refused before admission, or a health check) is released with its stream
    const c = budget.openReception()
    expect(budget.reserveReceive(30, c)).to.equal(true)
    budget.closeReception(c)
    expect(budget.snapshot().heldBytes).to.equal(0)
    expect(budget.claimReception(c.id)).to.equal(0)
  })
})
