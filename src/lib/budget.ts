/**
 * The memory and concurrency budget of `fnr serve` and `fnr wrapper-server` (docs/limits.md).
 *
 * Everything a call holds is counted against limits derived from the container's memory limit
 * (cgroup v2 memory.max, cgroup v1 memory.limit_in_bytes; "unlimited" falls back to the machine's
 * memory), so that no sequence of valid-size calls can push the process past its limit:
 *
 *   - held bytes: request bytes being received (partial messages, counted by grpc/hygiene.ts),
 *     waiting in the queue, or being evaluated. A message that would push them past
 *     `maxHeldBytes` is refused (its stream is reset: the client sees RESOURCE_EXHAUSTED);
 *   - running calls: `maxConcurrentCalls` slots (each call runs a function process or holds a
 *     pod call), and their working set (request + expected output + parsed results, estimated as
 *     RUNNING_COST_FACTOR x the request) at most `maxRunningBytes` (one call is always let
 *     through, whatever its size). A running call takes a whole slot while its function works; one
 *     whose function process group sleeps (no CPU for a while: it waits on the network, or hangs)
 *     takes only the share of a slot its resident memory is of a slot's share of the memory limit
 *     (at least 1/16; idle-calls.ts), and lends the rest to calls that wait. Its working set stays
 *     counted. So calls that hang cannot lock the runner: sixteen of them take one slot. From four
 *     slots on, one is kept for a client with no call running (spareSlots), so that another client's
 *     burst never makes it wait for a judgment;
 *   - the rest wait in a fair queue (fair-queue.ts): round-robin between clients, then between a
 *     client's connections; a connection's turn goes to its oldest call of the function (image) with
 *     the fewest calls running (chooseOnTurn); at most `maxQueuedCalls` of them. The calls that
 *     arrive in the turn of the event loop in which one started wait for its end and then take
 *     these turns too (gather), instead of starting in arrival order. A call
 *     beyond that fails RESOURCE_EXHAUSTED with a message that says which limit was hit. A call
 *     cancelled (or past its deadline) while queued leaves the queue;
 *   - HTTP/2 streams: each connection may open `maxConcurrentStreams`, plus one per call asleep
 *     (the runner's SETTINGS are raised as calls fall asleep, never lowered on a live connection),
 *     so that calls that hang on Porch's one connection do not use up its streams.
 *
 * Every queueing and every rejection is logged and counted (metrics.ts: fnr_admission_total), and
 * the wait of every queued call too (fnr_queue_wait_seconds).
 */
import {readFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import v8 from 'node:v8'

import type {Http2Session} from 'node:http2'

import {FnrError, withoutStack} from './errors.js'
import {FairQueue, type QueueKey} from './fair-queue.js'
import {IdleSampler, SAMPLE_INTERVAL_MS, type IdleSample, type IdleSource} from './idle-calls.js'
import {MemoryReclaimer} from './reclaim.js'
import {silentLogger, type Logger} from './telemetry/log.js'
import type {Metrics} from './telemetry/metrics.js'
import {metricsOf, type Telemetry} from './telemetry/telemetry.js'

/** A request being received: the bytes its stream holds, until its call claims them. */
export interface Reception {
  readonly id: string
  bytes: number
  claimed: boolean
}

/**
 * The request header hygiene.ts sets on every stream it guards (overwriting any the client sent),
 * through which the call claims its request's bytes (server.ts).
 */
export const RECEPTION_HEADER = 'fnr-reception'

/** A running call's working set, as a multiple of its request: request, output, parsed results. */
export const RUNNING_COST_FACTOR = 3
/** Fixed cost of any running call (its process, pipes, buffers), counted on top. */
export const RUNNING_COST_BASE = 256 * 1024

/** v1's "no limit" is a page-rounded 2^63 - 1; anything this large is no limit. */
const UNLIMITED_THRESHOLD = 2 ** 60

export interface MemoryLimit {
  /** The limit in bytes. */
  bytes: number
  /** Where it came from: cgroup v2, cgroup v1, the machine's memory, or a flag. */
  source: 'cgroup-v2' | 'cgroup-v1' | 'machine' | 'flag'
  /** The file that set it (cgroups). */
  file?: string
}

/** Reads a cgroup file, or undefined. */
function readNumber(file: string): number | 'max' | undefined {
  try {
    const text = readFileSync(file, 'utf8').trim()
    if (text === 'max') return 'max'
    const n = Number(text)
    return Number.isFinite(n) && n > 0 ? n : undefined
  } catch {
    return undefined
  }
}

/**
 * The memory limit of the cgroup this process runs in: the smallest limit on the way from its
 * cgroup up to the root (a parent's limit binds its children too). cgroup v2 where the unified
 * hierarchy has the memory controller, else v1's memory hierarchy. Undefined: no limit found.
 */
export function cgroupMemoryLimit(root = '/sys/fs/cgroup', procSelfCgroup = '/proc/self/cgroup'): MemoryLimit | undefined {
  let lines: string[]
  try {
    lines = readFileSync(procSelfCgroup, 'utf8').split('\n')
  } catch {
    return undefined
  }
  const candidates: Array<{top: string; dir: string; file: string; source: 'cgroup-v2' | 'cgroup-v1'}> = []
  for (const line of lines) {
    const [, controllers, cgPath] = /^\d+:([^:]*):(.*)$/.exec(line) ?? []
    if (controllers === undefined || cgPath === undefined) continue
    if (controllers === '') {
      // v2: /sys/fs/cgroup itself (unified) or /sys/fs/cgroup/unified (hybrid, rarely with memory).
      for (const top of [root, path.join(root, 'unified')]) candidates.push({top, dir: path.join(top, cgPath), file: 'memory.max', source: 'cgroup-v2'})
    } else if (controllers.split(',').includes('memory')) {
      // Inside a container the cgroup's own directory is often mounted as the hierarchy's root.
      const top = path.join(root, 'memory')
      candidates.push({top, dir: path.join(top, cgPath), file: 'memory.limit_in_bytes', source: 'cgroup-v1'}, {top, dir: top, file: 'memory.limit_in_bytes', source: 'cgroup-v1'})
    }
  }
  let best: MemoryLimit | undefined
  for (const c of candidates) {
    // Walk up to the hierarchy's root: the smallest limit binds.
    for (let dir = c.dir; dir.startsWith(c.top); dir = path.dirname(dir)) {
      const v = readNumber(path.join(dir, c.file))
      if (typeof v === 'number' && v < UNLIMITED_THRESHOLD && (!best || v < best.bytes)) best = {bytes: v, source: c.source, file: path.join(dir, c.file)}
      if (dir === c.top) break
    }
  }
  return best
}

/** The memory this process may use: the cgroup's limit, else the machine's memory. */
export function detectMemoryLimit(): MemoryLimit {
  const cgroup = cgroupMemoryLimit()
  const machine = os.totalmem()
  if (cgroup && cgroup.bytes < machine) return cgroup
  return {bytes: machine, source: 'machine'}
}

export interface BudgetSettings {
  /** The memory limit the budget is derived from. */
  memoryLimit: MemoryLimit
  /** Calls evaluated at once. */
  maxConcurrentCalls: number
  /** Calls waiting for a turn, beyond which a call is refused. */
  maxQueuedCalls: number
  /** Request bytes held by calls being received, queued or running. */
  maxHeldBytes: number
  /** Working set of running calls (RUNNING_COST_FACTOR x request + RUNNING_COST_BASE each). */
  maxRunningBytes: number
  /** HTTP/2 streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number
}

export interface BudgetOverrides {
  /** --memory-limit: bytes, instead of the detected limit. */
  memoryLimitBytes?: number
  /** --max-concurrent-calls */
  maxConcurrentCalls?: number
  /** --max-queued-calls */
  maxQueuedCalls?: number
  /** --max-inflight-bytes (held bytes) */
  maxHeldBytes?: number
  /** --max-concurrent-streams */
  maxConcurrentStreams?: number
}

const MiB = 1024 * 1024

/**
 * Share of the memory limit for request bytes held. Receiving costs more than the bytes: the
 * HTTP/2 chunks and grpc-js's joined copy both live until the next GC (measured: ~2.5x the
 * request bytes at peak with 4 MB requests), hence well under half.
 */
const HELD_SHARE = 0.25
/**
 * Share of the limit (1 / RUNNING_DIVISOR) for the working sets of running calls. At 35 % held and
 * a quarter running, a burst of 80 x 6 MiB calls over 4 connections got the runner OOM-killed
 * under 1 GiB (bench/limits.ts L2; responses waiting for slow clients count too: holdSend): receiving costs ~2x the bytes counted (HTTP/2 chunks, then
 * grpc-js's joined copy) and a running 6 MiB call ~5x (request, function output, response frame).
 */
const RUNNING_DIVISOR = 6

function clamp(n: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(hi, Math.floor(n)))
}

/**
 * The budget for a memory limit (docs/limits.md has the table): 25% of the limit for request
 * (and response) bytes held, a sixth for running calls' working sets, one running call per 64 MiB (2 to 256),
 * twice as many HTTP/2 streams per connection, 64 queued calls per running one (at most 10,000). Node's own heap limit caps the derivation too:
 * parsed results live on the heap.
 */
export function deriveBudget(overrides: BudgetOverrides = {}, detected: () => MemoryLimit = detectMemoryLimit): BudgetSettings {
  const memoryLimit: MemoryLimit = overrides.memoryLimitBytes ? {bytes: overrides.memoryLimitBytes, source: 'flag'} : detected()
  const limit = memoryLimit.bytes
  const heap = v8.getHeapStatistics().heap_size_limit
  const maxConcurrentCalls = overrides.maxConcurrentCalls ?? clamp(limit / (64 * MiB), 2, 256)
  return {
    memoryLimit,
    maxConcurrentCalls,
    maxQueuedCalls: overrides.maxQueuedCalls ?? clamp(maxConcurrentCalls * 64, 64, 10_000),
    maxHeldBytes: overrides.maxHeldBytes ?? Math.floor(limit * HELD_SHARE),
    maxRunningBytes: Math.floor(Math.min(limit / RUNNING_DIVISOR, heap / 2)),
    // Twice as many streams per connection as calls may run: a client with more calls keeps them
    // itself (grpc-go waits for stream quota, in order). The runner sees as many calls again as it
    // can run, so that a turn can go to a call of another function (chooseOnTurn) rather than to the
    // next in the client's order: with one stream per slot, normal calls on Porch's one connection
    // waited in the client behind calls that hang. At the default request size (6 MiB), a single
    // connection's requests then hold at most 2 x 6 MiB per 64 MiB slot (19 % of the memory limit), within
    // the held-bytes budget (25 %).
    maxConcurrentStreams: overrides.maxConcurrentStreams ?? Math.max(4, 2 * maxConcurrentCalls),
  }
}

/** Checks flag values; throws a Usage error. */
export function validateBudgetOverrides(o: BudgetOverrides): void {
  if (o.maxConcurrentCalls !== undefined && o.maxConcurrentCalls < 1) throw new FnrError('Usage', '--max-concurrent-calls must be 1 or more')
  if (o.maxQueuedCalls !== undefined && o.maxQueuedCalls < 0) throw new FnrError('Usage', '--max-queued-calls must be 0 or more')
  if (o.memoryLimitBytes !== undefined && o.memoryLimitBytes < 64 * MiB) throw new FnrError('Usage', '--memory-limit must be at least 64Mi')
  if (o.maxHeldBytes !== undefined && o.maxHeldBytes < MiB) throw new FnrError('Usage', '--max-inflight-bytes must be at least 1Mi')
}

/** Parses a Kubernetes-style quantity of bytes (1Gi, 512Mi, 1G, 1048576). */
export function parseByteQuantity(flag: string, value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|k|K|M|G|T)?\s*$/.exec(value)
  if (!m) throw new FnrError('Usage', `--${flag}: expected bytes like 1Gi, 512Mi or 1048576, got ${JSON.stringify(value)}`)
  const units: Record<string, number> = {Ki: 1024, Mi: MiB, Gi: 1024 * MiB, Ti: 1024 * 1024 * MiB, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12}
  return Math.floor(Number(m[1]) * (m[2] ? units[m[2]]! : 1))
}

/** What a running call gives back when it ends. */
export type Release = () => void

interface Waiter {
  key: QueueKey
  image: string
  bytes: number
  cost: number
  resolve: (release: Release) => void
  reject: (err: FnrError) => void
  signal?: AbortSignal
  onAbort?: () => void
  queuedAt: number
  /** It would have started at once, but came in a turn of the event loop in which a call started (gathered), and this turn has not ended. */
  gathered?: boolean
  /** Started, refused or cancelled: no longer waiting. */
  settled?: boolean
}

/** Where a call comes from when the server does not say (one client, one connection). */
const NO_PEER: QueueKey = {client: '', connection: ''}

/** How many of a connection's waiting calls chooseOnTurn looks at. */
const CHOOSE_WINDOW = 64

/** How long sampling goes on after it was last needed. */
const SAMPLING_LINGER_MS = 1_000

/** How often the budget samples while no call waits for a slot, but the slots are full or calls are asleep (keepSampling). */
export const QUIET_SAMPLE_INTERVAL_MS = 250

export type {IdleSource} from './idle-calls.js'

export interface CallBudgetOptions {
  /**
   * Which running calls are asleep. Default: an IdleSampler over `runningPids` (the process groups of
   * the server's running calls whose input is all written, its launcher's sleepCandidates, read from
   * /proc); none without those.
   * null: no call is ever asleep (every call costs a slot).
   */
  idle?: IdleSource | null
  /** The pids of the server's running function processes that may be judged asleep (process/launcher.ts sleepCandidates). */
  runningPids?: () => Iterable<number>
  /**
   * Whether starting a call forks the runner itself (functions started directly: `pacing` says why
   * that needs pacing). Default true. Through a spawner a start is a message on a socket, and
   * pacing only delays calls: 16 starts took 85 ms paced against 50 ms, and normal calls behind hung
   * ones on one connection waited ~50 ms longer (test/grpc/fairness.test.ts (c)).
   */
  paceStarts?: boolean
  /** Where admissions and queue waits are counted (the server's); default none. */
  telemetry?: Telemetry
}

/** The admission control of one server (see the top of the file). */
export class CallBudget {
  private running = 0
  /** Calls running per client (the queue key's client): the spare slot is for a client with none. */
  private readonly runningByClient = new Map<string, number>()
  /** Calls running per image: a connection's turn goes to its waiting call whose image has the fewest (chooseOnTurn). */
  private readonly runningByImage = new Map<string, number>()
  private runningBytes = 0
  /** Request bytes held: being received (hygiene.ts), queued, running. */
  private held = 0
  /** Requests being received, by the id their stream carries (openReception). */
  private readonly receptions = new Map<string, Reception>()
  private receptionSeq = 0
  private readonly queue = new FairQueue<Waiter>((waiting) => this.chooseOnTurn(waiting))
  private readonly logger: Logger
  /** Gives back the memory of what calls released (reclaim.ts). */
  private readonly reclaimer: MemoryReclaimer
  private readonly idleSource: IdleSource | null
  private readonly paceStarts: boolean
  /** The last sample: running calls asleep, and the slots they lend. */
  private idle: IdleSample = {idle: 0, lent: 0}
  /** The next sample's timer (keepSampling), and when it is due (performance.now()). */
  private sampling: NodeJS.Timeout | undefined
  private samplingDueAt = 0
  /** Sampling has started and not stopped (keepSampling). */
  private samplingOn = false
  /** When sampling was last needed (performance.now()). */
  private neededAt = 0
  /** The HTTP/2 sessions of the server and the stream limit each was sent, raised with the calls asleep. */
  private readonly sessions = new Map<Http2Session, number>()
  private extraStreams = 0
  private readonly metrics: Metrics

  constructor(readonly settings: BudgetSettings, logger?: Logger, options: CallBudgetOptions = {}) {
    this.logger = logger ?? silentLogger
    this.metrics = metricsOf(options.telemetry)
    this.reclaimer = new MemoryReclaimer({
      // an eighth of the limit, at most 128 MiB
      reclaimAfter: Math.min(128 * MiB, Math.floor(settings.memoryLimit.bytes / 8)),
      busy: () => this.held > 0 || this.running > 0 || this.queue.size > 0,
      logger: this.logger,
    })
    const {runningPids} = options
    this.paceStarts = options.paceStarts ?? true
    this.idleSource = options.idle !== undefined ? options.idle : runningPids ? new IdleSampler(runningPids, this.slotBytes) : null
    // A sample read over several turns of the event loop (many groups) lends their slots when it completes.
    if (this.idleSource)
      this.idleSource.onSample = () => {
        this.refreshIdle()
        this.drain()
        this.keepSampling()
      }
  }

  /** A slot's share of the memory limit: what a call asleep is weighed against. */
  get slotBytes(): number {
    return Math.max(MiB, Math.floor(this.settings.memoryLimit.bytes / this.settings.maxConcurrentCalls))
  }

  /**
   * An HTTP/2 session of the server opened (hygiene.ts): its stream limit is raised by one for each
   * running call asleep, so that hung calls do not use up the streams of the connection they came on.
   * It is never lowered again while the session lives: a client may already have opened streams up
   * to the raised limit, and nghttp2 refuses (REFUSED_STREAM) every stream over a lowered one, which
   * grpc-js reports as UNAVAILABLE. The held-bytes budget still bounds what those streams bring.
   */
  sessionOpened(session: Http2Session): void {
    this.sessions.set(session, this.settings.maxConcurrentStreams)
    session.once('close', () => this.sessions.delete(session))
    if (this.extraStreams > 0) this.applyStreams(session)
  }

  /** The server's HTTP/2 sessions still open (those sessionOpened was told of): a forced stop resets them (server.ts). */
  openSessions(): Http2Session[] {
    return [...this.sessions.keys()]
  }

  private applyStreams(session: Http2Session): void {
    const limit = this.settings.maxConcurrentStreams + this.extraStreams
    if (session.destroyed || session.closed || limit <= (this.sessions.get(session) ?? Infinity)) return
    try {
      session.settings({maxConcurrentStreams: limit})
      this.sessions.set(session, limit)
    } catch {
      // too many SETTINGS not yet acknowledged: the next change sends it
    }
  }

  /** Reads which running calls sleep (at most every SAMPLE_INTERVAL_MS, idle-calls.ts); updates the lent slots and the stream limits. */
  private refreshIdle(): void {
    if (!this.idleSource) return
    this.idle = this.running > 0 ? this.idleSource.sample() : {idle: 0, lent: 0}
    const extra = this.idle.idle
    if (extra !== this.extraStreams) {
      this.extraStreams = extra
      for (const session of this.sessions.keys()) this.applyStreams(session)
    }
  }

  /**
   * Samples every SAMPLE_INTERVAL_MS while a call waits for a slot; every QUIET_SAMPLE_INTERVAL_MS
   * while none does but every slot is taken or calls are asleep, and for SAMPLING_LINGER_MS after
   * that; stops otherwise. Stopping the moment a call ended and restarting when the next one filled
   * the slots again threw away the readings a judgment needs and delayed the first new one by a
   * whole interval: with hung and normal calls on one connection (slots taken, freed, taken again
   * every few ms), no sample came for 180 ms at a time. Sampling fast while nothing waits cost a
   * runner holding 24 hung calls ~0.1 s of CPU per second, for as long as they hung (Porch's
   * runner: none); a call that comes then is judged at once against the quiet readings (fits()
   * samples before it queues), and sampling turns fast while it waits.
   */
  private keepSampling(): void {
    if (!this.idleSource) return
    const waiting = this.queue.size > this.gatheredWaiting
    const needed = waiting || this.running >= this.settings.maxConcurrentCalls || this.extraStreams > 0
    const now = performance.now()
    if (needed) this.neededAt = now
    if (needed || now - this.neededAt < SAMPLING_LINGER_MS) {
      this.samplingOn = true
      const interval = waiting ? SAMPLE_INTERVAL_MS : QUIET_SAMPLE_INTERVAL_MS
      if (this.sampling && this.samplingDueAt <= now + interval) return
      clearTimeout(this.sampling)
      this.samplingDueAt = now + interval
      this.sampling = setTimeout(() => {
        this.sampling = undefined
        this.refreshIdle()
        this.drain()
        this.keepSampling()
      }, interval)
      this.sampling.unref()
    } else if (this.samplingOn) {
      clearTimeout(this.sampling)
      this.sampling = undefined
      this.samplingOn = false
      this.idleSource.reset()
      this.idle = {idle: 0, lent: 0}
    }
  }

  /** Notes `bytes` of requests (and what came with them) released: garbage, to be collected. */
  private noteFreed(bytes: number): void {
    this.reclaimer.noteFreed(bytes)
  }

  /**
   * Calls being evaluated (and how many of them sleep), calls waiting, request bytes held, the
   * clients with calls waiting and the most calls one of them has waiting.
   */
  snapshot(): {running: number; idle: number; queued: number; heldBytes: number; runningBytes: number; queuedClients: number; largestClientQueue: number} {
    return {
      running: this.running,
      idle: this.idle.idle,
      queued: this.queue.size,
      heldBytes: this.held,
      runningBytes: this.runningBytes,
      queuedClients: this.queue.clientCount,
      largestClientQueue: this.queue.largestClient(),
    }
  }

  /**
   * Reserves `bytes` of request data being received, for `reception` when given. False when that
   * would pass maxHeldBytes (the caller refuses the message).
   */
  reserveReceive(bytes: number, reception?: Reception): boolean {
    if (this.held + bytes > this.settings.maxHeldBytes) return false
    this.held += bytes
    if (reception) reception.bytes += bytes
    return true
  }

  /**
   * A stream whose request is being received (hygiene.ts): its bytes stay held under its id until
   * its call claims them (claimReception, then admit's handover) or the stream closes
   * (closeReception). Between the request's last byte and the call's admission, another stream
   * could otherwise take the room the request had just given back, and the complete request was
   * refused at admission (calls that should have queued failed RESOURCE_EXHAUSTED under load).
   */
  openReception(): Reception {
    const reception: Reception = {id: String(++this.receptionSeq), bytes: 0, claimed: false}
    this.receptions.set(reception.id, reception)
    return reception
  }

  /** The stream closed: what its request still holds (no call claimed it) is released. */
  closeReception(reception: Reception): void {
    this.receptions.delete(reception.id)
    if (reception.claimed || reception.bytes === 0) return
    this.releaseReceive(reception.bytes)
    reception.bytes = 0
  }

  /**
   * The call of the stream `id` takes over its request's bytes: returns them for admit's
   * `handover` (0 for an unknown or already claimed id); they stay held until then.
   */
  claimReception(id: string | undefined): number {
    const reception = id === undefined ? undefined : this.receptions.get(id)
    if (!reception || reception.claimed) return 0
    reception.claimed = true
    return reception.bytes
  }

  releaseReceive(bytes: number): void {
    this.held = Math.max(0, this.held - bytes)
    // Bytes of a stream reset or abandoned are garbage now. Those of a message that completed move
    // on to the call (admit counts them again), but the chunks they came in are garbage too:
    // grpc-js joins them into one copy.
    this.noteFreed(bytes)
  }

  /**
   * A response of `bytes` bytes is being sent: it stays in memory (the HTTP/2 stream's queue) until
   * the client has read it, which a busy or slow client does long after the call released its
   * turn. Held, never refused (hygiene.ts calls releaseSend when the stream closes). Without it,
   * responses queued for 4 connections took the runner past 1 GiB while the budget saw room.
   */
  holdSend(bytes: number): void {
    this.held += bytes
  }

  releaseSend(bytes: number): void {
    this.held = Math.max(0, this.held - bytes)
    this.noteFreed(bytes)
    this.drain()
  }

  /**
   * A connection that received `bytesRead` bytes closed. Whatever it buffered (partial messages
   * in grpc-js and Node's streams, beyond the bytes counted while received) is garbage now: a
   * slowloris client that leaves frees hundreds of MiB this way, with no call released and no
   * allocation after it to start a collection (RSS stayed at 570-880 MiB). Counted as freed, so
   * that an idle runner collects (noteFreed).
   */
  connectionClosed(bytesRead: number): void {
    if (bytesRead >= MiB) this.noteFreed(bytesRead)
  }

  /**
   * Admits a call whose request has `bytes` bytes: resolves with its release once it may run,
   * at once when there is room, else when its turn comes (fair-queue.ts: `origin` says which client
   * and connection it came on). Rejects with ResourceExhausted when the queue is full, and when
   * `signal` aborts while queued with its reason if that is a DeadlineExceeded FnrError (the
   * server's limit for calls without a deadline), else Cancelled.
   */
  admit(bytes: number, image: string, signal?: AbortSignal, origin: QueueKey & {handover?: number} = NO_PEER): Promise<Release> {
    const key: QueueKey = {client: origin.client, connection: origin.connection}
    // The bytes its stream held while it was received (`handover`, from claimReception) are counted
    // as the call's from here on, in the same turn: no other stream can take their room in between.
    if (origin.handover) this.releaseReceive(origin.handover)
    const cost = bytes * RUNNING_COST_FACTOR + RUNNING_COST_BASE
    // Ahead of the queue only where the queue would not be: nothing waits, or this client has
    // nothing running and takes the spare slot (the calls waiting are other clients' that do not fit).
    const fits = (this.queue.size === this.gatheredWaiting || !this.runningByClient.has(key.client)) && this.fits(cost, key.client)
    if (fits && !this.pacing && !this.gathering) {
      this.held += bytes
      return Promise.resolve(this.start(bytes, cost, key.client, image))
    }
    const s = this.settings
    if (this.queue.size >= s.maxQueuedCalls) {
      return Promise.reject(this.reject('queue-full', image, bytes, `${this.queue.size} calls are already waiting (--max-queued-calls=${s.maxQueuedCalls})`))
    }
    if (this.held + bytes > s.maxHeldBytes) {
      return Promise.reject(this.reject('memory', image, bytes, `calls in flight already hold ${fmtBytes(this.held)} of requests, and ${fmtBytes(bytes)} more would pass --max-inflight-bytes=${fmtBytes(s.maxHeldBytes)} (from a memory limit of ${fmtBytes(s.memoryLimit.bytes)}, ${s.memoryLimit.source})`))
    }
    if (signal?.aborted) return Promise.reject(withoutStack(() => new FnrError('Cancelled', 'the call was cancelled before it could run')))
    this.held += bytes
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {key, image, bytes, cost, resolve, reject, signal, queuedAt: performance.now()}
      if (signal) {
        waiter.onAbort = () => {
          if (!this.queue.remove(waiter)) return
          this.settle(waiter)
          this.held -= bytes
          this.noteFreed(bytes)
          const waited = Math.round(performance.now() - waiter.queuedAt)
          this.metrics.queueWait(waited / 1000)
          const reason: unknown = signal.reason
          reject(
            reason instanceof FnrError && reason.kind === 'DeadlineExceeded'
              ? reason
              : withoutStack(() => new FnrError('Cancelled', `the call was cancelled after waiting ${waited} ms for a turn (${this.running} calls running, --max-concurrent-calls=${s.maxConcurrentCalls})`)),
          )
          this.drain()
        }
        signal.addEventListener('abort', waiter.onAbort, {once: true})
      }
      this.queue.push(waiter, key)
      // Only waiting for the end of the turn of the event loop (gathered, or paced) is not queueing;
      // a gathered call left waiting once the turn's calls have started is (endTurn).
      if (!fits) this.noteQueued(waiter)
      else {
        waiter.gathered = true
        this.gatheredCalls.push(waiter)
        this.gatheredWaiting++
      }
      this.keepSampling()
    })
  }

  private noteQueued(w: Waiter): void {
    this.metrics.admission('queued')
    this.logger.info('call queued: the runner is at its concurrency or memory budget', {image: w.image, bytes: w.bytes, running: this.running, idle: this.idle.idle, queued: this.queue.size, runningBytes: this.runningBytes, maxConcurrentCalls: this.settings.maxConcurrentCalls})
  }

  /**
   * Slots kept for a client with no call running: with four slots or more, one. A client's burst
   * (or its calls that hang) fills the others, and the next client still starts at once instead
   * of waiting for the calls asleep to be judged (idle-calls.ts: 30-50 ms, longer with hundreds of
   * calls to read), as it would with Porch's runner, which has no limit. A runner with one client
   * (Porch's server) runs one call fewer at once than --max-concurrent-calls says.
   */
  get spareSlots(): number {
    return this.settings.maxConcurrentCalls >= 4 ? 1 : 0
  }

  /**
   * Whether a call of `client` with working set `cost` may start: the slots taken (running calls,
   * less what the calls asleep lend) leave one for it (the spare one too when the client has
   * nothing running), and the working sets leave room. The calls asleep are read again (at most
   * every SAMPLE_INTERVAL_MS) before a call is kept waiting for a slot.
   */
  private fits(cost: number, client: string): boolean {
    if (this.running === 0) return true
    if (this.runningBytes + cost > this.settings.maxRunningBytes) return false
    if (this.hasSlot(client)) return true
    this.refreshIdle()
    return this.hasSlot(client)
  }

  private hasSlot(client: string): boolean {
    const taken = this.running - this.idle.lent
    const slots = this.settings.maxConcurrentCalls - (this.runningByClient.has(client) ? this.spareSlots : 0)
    return taken < slots
  }

  private start(bytes: number, cost: number, client: string, image: string): Release {
    this.running++
    this.runningByClient.set(client, (this.runningByClient.get(client) ?? 0) + 1)
    this.runningByImage.set(image, (this.runningByImage.get(image) ?? 0) + 1)
    this.runningBytes += cost
    this.gather()
    this.keepSampling()
    let released = false
    return () => {
      if (released) return
      released = true
      this.running--
      const left = (this.runningByClient.get(client) ?? 1) - 1
      if (left > 0) this.runningByClient.set(client, left)
      else this.runningByClient.delete(client)
      const ofImage = (this.runningByImage.get(image) ?? 1) - 1
      if (ofImage > 0) this.runningByImage.set(image, ofImage)
      else this.runningByImage.delete(image)
      // The call may have been one of those asleep: its lent share goes with it until the next sample.
      if (this.idle.lent > 0) this.idle = {idle: Math.max(0, this.idle.idle - 1), lent: Math.max(0, this.idle.lent - (1 - 1 / 16))}
      this.runningBytes -= cost
      this.held = Math.max(0, this.held - bytes)
      // The request, the output and whatever the call parsed are garbage now. The fixed
      // RUNNING_COST_BASE is an allowance, not memory the call held: counting it made a runner
      // answering small calls one at a time run full collections every ~64 calls.
      this.noteFreed(cost - RUNNING_COST_BASE)
      this.drain()
    }
  }

  /**
   * Which of a connection's waiting calls (in arrival order) goes when its turn comes: the first of
   * the image with the fewest calls running, among the first CHOOSE_WINDOW.
   */
  private chooseOnTurn(waiting: readonly Waiter[]): number {
    let best = 0
    let fewest = Infinity
    const n = Math.min(waiting.length, CHOOSE_WINDOW)
    for (let i = 0; i < n && fewest > 0; i++) {
      const running = this.runningByImage.get(waiting[i]!.image) ?? 0
      if (running < fewest) {
        fewest = running
        best = i
      }
    }
    return best
  }

  /**
   * The calls that arrive in the turn of the event loop in which a call started wait for the end of
   * that turn, and then start by turns (drain), instead of in the order they arrived. HTTP/2 delivers
   * a client's burst of calls in one read: Porch's server sends its hung and normal calls on one
   * connection, and in arrival order the slots went to the hung calls that came first while the normal
   * ones waited for them to be judged asleep (test/grpc/fairness.test.ts (c)). One call that arrives
   * alone still starts at once.
   */
  private gathering = false
  /** The calls gathered in this turn that would have started at once (noteQueued when they wait on). */
  private gatheredCalls: Waiter[] = []
  /** How many of them still wait: the queue less these is what really waits (keepSampling, admit). */
  private gatheredWaiting = 0
  /**
   * At most one call starts per turn of the event loop when starts fork the runner (`paceStarts`):
   * spawn() forks the runner on the event loop's thread and returns once the child has exec'd, ~3-10
   * ms each for a runner of a few hundred MiB, more on a busy machine. Sixteen calls started in one
   * turn held every other call, health checks included, for seconds
   * (test/reliability/memory-limit.test.ts); one per turn lets the event loop serve its sockets
   * between two.
   */
  private pacing = false

  private gather(): void {
    if (this.paceStarts) this.pacing = true
    if (this.gathering) return
    this.gathering = true
    setImmediate(() => this.endTurn())
  }

  private endTurn(): void {
    this.gathering = false
    this.pacing = false
    this.drain()
    if (this.pacing) {
      // One started, paced: the others that fit wait for the next turn, as if they came in it.
      this.gatheredCalls = this.gatheredCalls.filter((w) => !w.settled)
      this.keepSampling()
      return
    }
    const gathered = this.gatheredCalls
    this.gatheredCalls = []
    this.gatheredWaiting = 0
    for (const w of gathered) {
      w.gathered = false
      if (!w.settled) this.noteQueued(w)
    }
    this.keepSampling()
  }

  /** A waiter leaves the queue (started, or cancelled). */
  private settle(w: Waiter): void {
    w.settled = true
    if (w.gathered) {
      w.gathered = false
      this.gatheredWaiting--
    }
  }

  /**
   * Starts the queued calls whose turn it is while they fit: all the room a release or a sample
   * made, at once (one only when starts are paced: the next in the next turn of the event loop).
   * Starting one per sample let a sample that found fifteen calls asleep start one waiting call
   * per SAMPLE_INTERVAL_MS, the others waiting for later samples or releases.
   */
  private drain(): void {
    while (!this.pacing) {
      const next = this.queue.peek()
      if (!next) {
        this.keepSampling()
        return
      }
      let w: Waiter | undefined = next
      if (!this.fits(next.cost, next.key.client)) {
        // The spare slot may be free for a client with nothing running, waiting behind the turn.
        w = this.queue.firstOf((client) => !this.runningByClient.has(client))
        if (!w || !this.fits(w.cost, w.key.client)) return
      }
      if (w === next) this.queue.shift()
      else this.queue.remove(w)
      this.settle(w)
      if (w.signal && w.onAbort) w.signal.removeEventListener('abort', w.onAbort)
      this.metrics.queueWait((performance.now() - w.queuedAt) / 1000)
      w.resolve(this.start(w.bytes, w.cost, w.key.client, w.image))
    }
  }

  private reject(reason: 'queue-full' | 'memory', image: string, bytes: number, why: string): FnrError {
    this.metrics.admission(`rejected-${reason}`)
    this.logger.warn('call refused: the runner is over its budget', {image, bytes, reason, running: this.running, queued: this.queue.size, heldBytes: this.held})
    return new FnrError('ResourceExhausted', `fnr is overloaded, retry later: ${why}; ${this.running} calls are running (--max-concurrent-calls=${this.settings.maxConcurrentCalls})`, {details: {reason}})
  }
}

export function fmtBytes(n: number): string {
  if (n >= 1024 * MiB) return `${(n / (1024 * MiB)).toFixed(2)} GiB`
  if (n >= MiB) return `${(n / MiB).toFixed(1)} MiB`
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${n} B`
}
