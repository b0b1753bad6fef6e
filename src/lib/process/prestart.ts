/**
 * Pre-started functions (docs/process.md "Pre-started functions"): for images called recently,
 * `fnr serve`'s exec runtime keeps a few function processes started and blocked on their stdin, so
 * that a call only writes its input instead of paying for the fork, the exec and the function's
 * runtime start-up.
 *
 * A pre-started process is started exactly as a call's (run.ts startFunctionProcess: same spawner
 * path, command, arguments, environment with a call marker of its own, working directory, process
 * group); the call that takes it hands it to runFunctionProcess, which from then on treats it as
 * its own: the deadline, cancellation, caps, the end-of-call sweep and the accounting start at the
 * call. The rules:
 *
 * - at most `perImage` per image and `maxTotal` in all, and one more only while `room()` says the
 *   runner's budget has a slot free for it (serve binds its call budget: running calls and
 *   waiting processes together stay under --max-concurrent-calls); with `maxTotal` waiting, the
 *   image just called takes the place of the longest-waiting process of another image (`evicted`,
 *   one per call);
 * - started after a call of the image ends, never ahead of an image's first call;
 * - killed after `idleTtlMs` without being taken, on close (shutdown), as soon as the config or
 *   the binary changes (prune: the exec runtime calls it on a FunctionConfig change and when the
 *   binary's file changes), and, should a change pass unseen, when taken by a call whose binary
 *   (path, working directory, or a stat of the file) is not the one it was started from: that call
 *   starts a fresh one;
 * - one that exited or died while it waited is dropped and the call starts a fresh one: a call
 *   never fails because of the pool. An image whose processes exit before their call three times
 *   in a row (a function that does not read its input) is not pre-started any more, until its
 *   binary changes.
 */
import {readFileSync} from 'node:fs'

import {prestartCounters, type PrestartDiscardReason} from './prestart-stats.js'
import {abandonFunctionProcess, startFunctionProcess, type StartedFunction} from './run.js'
import type {ProcessLauncher} from './launcher.js'

/** Processes kept per image unless the flag says otherwise (`fnr serve --prestart-functions`). */
export const DEFAULT_PRESTART_PER_IMAGE = 1
/** How long a pre-started process waits for a call before it is killed (`--prestart-idle-ttl`). */
export const DEFAULT_PRESTART_IDLE_TTL_MS = 60_000
/** Without a budget bound (serve binds one): the most processes waiting in all. */
export const DEFAULT_PRESTART_MAX_TOTAL = 8
/** Exits before the call, in a row, after which an image is not pre-started any more. */
export const MAX_EXITS_BEFORE_USE = 3
/** How long close() waits for killed processes to be reaped. */
const CLOSE_WAIT_MS = 2_000

export interface PrestartPoolOptions {
  perImage: number
  idleTtlMs: number
  maxTotal?: number
  /** The server's launcher: starts the processes and holds them while they wait (its idleFunctions). */
  launcher: ProcessLauncher
  /** Whether one more waiting process fits the runner's budget now (default: always). */
  room?: () => boolean
  /** How a process is started (default startFunctionProcess; the unit tests pass a fake). */
  start?: (spec: PrestartSpec, launcher: ProcessLauncher) => StartedFunction
  /** Whether a waiting process is still alive (default processAlive). */
  alive?: (pid: number) => boolean
}

/** What a call would start: a pre-started process serves it only when all of it matches. */
export interface PrestartSpec {
  command: string
  args?: readonly string[]
  env: NodeJS.ProcessEnv
  cwd?: string
  /** The binary's identity (a stat of it: exec.ts binaryIdentity) when the process was started, and at the call. */
  identity: string
}

interface Entry {
  readonly key: string
  readonly spec: PrestartSpec
  readonly started: StartedFunction
  timer: NodeJS.Timeout | undefined
  detach: () => void
}

/** SIGKILL's bit in /proc/PID/status's pending-signal masks. */
const SIGKILL_BIT = 1n << 8n
const STATE = /^State:\s*(\S)/m
const PENDING = [/^SigPnd:\s*([0-9a-f]+)/m, /^ShdPnd:\s*([0-9a-f]+)/m]

/**
 * True while `pid` is a live process: not a zombie, not exiting, and no SIGKILL pending for it
 * (one sent a moment ago that the process has not been scheduled to act on yet: an OOM kill, or
 * someone's `kill -9`). One read of /proc/PID/status, tens of microseconds.
 */
export function processAlive(pid: number): boolean {
  let status: string
  try {
    status = readFileSync(`/proc/${pid}/status`, 'latin1')
  } catch {
    return false
  }
  const state = STATE.exec(status)?.[1]
  if (state === undefined || state === 'Z' || state === 'X' || state === 'x') return false
  for (const pending of PENDING) {
    const mask = pending.exec(status)?.[1]
    if (mask !== undefined && (BigInt(`0x${mask}`) & SIGKILL_BIT) !== 0n) return false
  }
  return true
}

function sameArgs(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  const x = a ?? []
  const y = b ?? []
  return x.length === y.length && x.every((v, i) => v === y[i])
}

/** Why a waiting process cannot serve a call with `spec`, or undefined when it can. */
function unfit(entry: Entry, spec: PrestartSpec, alive: (pid: number) => boolean): PrestartDiscardReason | undefined {
  const s = entry.spec
  if (s.command !== spec.command || s.cwd !== spec.cwd || !sameArgs(s.args, spec.args) || s.env !== spec.env) return 'config-changed'
  if (s.identity !== spec.identity) return 'binary-changed'
  const pid = entry.started.child.pid
  if (pid !== undefined && !alive(pid)) return 'died'
  return undefined
}

export class PrestartPool {
  private readonly byKey = new Map<string, Entry[]>()
  private total = 0
  private closed = false
  /** Exits before the call, in a row, per image, and the binary they were of (another binary starts the count again). */
  private readonly exitsBeforeUse = new Map<string, {count: number; identity: string; command: string}>()
  private readonly perImage: number
  private readonly idleTtlMs: number
  private maxTotal: number
  private room: () => boolean

  constructor(private readonly options: PrestartPoolOptions) {
    this.perImage = Math.max(0, Math.floor(options.perImage))
    this.idleTtlMs = options.idleTtlMs
    this.maxTotal = options.maxTotal ?? DEFAULT_PRESTART_MAX_TOTAL
    this.room = options.room ?? (() => true)
  }

  /** Bounds the pool by the runner's budget: `room()` before each start, and at most `maxTotal` waiting. */
  bindBudget(room: () => boolean, maxTotal: number): void {
    this.room = room
    this.maxTotal = Math.max(0, Math.floor(maxTotal))
    while (this.total > this.maxTotal) this.discardOldest('config-changed')
  }

  /** Processes waiting now. */
  get size(): number {
    return this.total
  }

  /**
   * A pre-started process for a call of `key` with `spec`, or undefined (a miss: the call starts
   * one as usual). Processes that do not match the spec any more, or died while waiting, are
   * killed on the way and counted.
   */
  take(key: string, spec: PrestartSpec): StartedFunction | undefined {
    const counters = prestartCounters()
    const list = this.byKey.get(key)
    while (list !== undefined && list.length > 0) {
      const entry = list.shift()!
      this.forget(entry)
      entry.detach()
      const reason = unfit(entry, spec, this.options.alive ?? processAlive)
      if (reason) {
        this.discard(entry, reason)
        continue
      }
      if (list.length === 0) this.byKey.delete(key)
      this.exitsBeforeUse.delete(key)
      counters.hits++
      return entry.started
    }
    if (list !== undefined && list.length === 0) this.byKey.delete(key)
    if (!this.closed && this.perImage > 0) counters.misses++
    return undefined
  }

  /**
   * After a call of `key`: starts processes until the image has `perImage` waiting, as far as the
   * total and the budget allow. Never throws: a process that cannot be started is counted and
   * the next call starts one as usual.
   */
  refill(key: string, spec: PrestartSpec): void {
    if (this.closed || this.perImage === 0) return
    if (this.givenUp(key, spec)) return
    let list = this.byKey.get(key)
    // At most one process of another image gives way per call (evictOther).
    let evicted = false
    const fits = (): boolean => this.total < this.maxTotal || (!evicted && (evicted = this.evictOther(key)))
    while ((list?.length ?? 0) < this.perImage && fits() && this.room()) {
      let started: StartedFunction
      try {
        started = (this.options.start ?? startFunctionProcess)(spec, this.options.launcher)
      } catch {
        prestartCounters().discarded['start-failed']++
        return
      }
      if (!list) {
        list = []
        this.byKey.set(key, list)
      }
      list.push(this.watch(key, spec, started))
      this.total++
      prestartCounters().size++
    }
  }

  /**
   * Makes room in a full pool for the image just called: kills the longest-waiting process of
   * another image (an image called recently is likelier to be called again than one whose
   * process has waited longest). False when every waiting process is of this image.
   */
  private evictOther(key: string): boolean {
    let oldest: Entry | undefined
    for (const [k, list] of this.byKey) {
      if (k === key) continue
      for (const entry of list) if (oldest === undefined || entry.started.startedAt < oldest.started.startedAt) oldest = entry
    }
    if (oldest === undefined) return false
    this.lost(oldest, 'evicted')
    return true
  }

  /** Whether the image's processes exited before their call too often, for this same binary (another one starts the count again). */
  private givenUp(key: string, spec: PrestartSpec): boolean {
    const exits = this.exitsBeforeUse.get(key)
    if (!exits) return false
    if (exits.identity === spec.identity && exits.command === spec.command) return exits.count >= MAX_EXITS_BEFORE_USE
    this.exitsBeforeUse.delete(key)
    return false
  }

  /**
   * Kills the waiting processes that could no longer serve their image's call: `current` gives
   * what a call of the image would start now (undefined: the image is mapped to nothing), and a
   * process is judged against it by the rule a call's take() applies. Called when the config or a
   * binary changes, so a stale process does not wait for its next call or the idle TTL.
   */
  prune(current: (key: string) => PrestartSpec | undefined): void {
    for (const list of [...this.byKey.values()]) {
      for (const entry of [...list]) {
        const spec = current(entry.key)
        const why = spec === undefined ? 'config-changed' : unfit(entry, spec, this.options.alive ?? processAlive)
        if (why) this.lost(entry, why)
      }
    }
  }

  /** Kills every waiting process and waits (bounded) until they are reaped. */
  async close(): Promise<void> {
    this.closed = true
    const gone: Promise<void>[] = []
    for (const list of [...this.byKey.values()]) {
      for (const entry of [...list]) {
        this.forget(entry)
        entry.detach()
        gone.push(ended(entry.started))
        this.discard(entry, 'shutdown')
      }
    }
    this.byKey.clear()
    await Promise.all(gone)
  }

  /** Keeps a process waiting: drops it when it exits, fails or waits too long. */
  private watch(key: string, spec: PrestartSpec, started: StartedFunction): Entry {
    const {child, marker} = started
    const entry: Entry = {key, spec, started, timer: undefined, detach: () => {}}
    const onSpawn = (): void => {
      if (child.pid !== undefined) this.options.launcher.idleFunctions.set(child.pid, marker)
    }
    const onError = (): void => this.lost(entry, 'start-failed')
    const onExit = (): void => {
      const exits = this.exitsBeforeUse.get(key)
      this.exitsBeforeUse.set(key, {count: (exits?.count ?? 0) + 1, identity: spec.identity, command: spec.command})
      this.lost(entry, 'exited')
    }
    if (child.pid !== undefined) onSpawn()
    else child.once('spawn', onSpawn)
    child.on('error', onError)
    child.once('exit', onExit)
    entry.timer = setTimeout(() => this.lost(entry, 'idle'), this.idleTtlMs)
    entry.timer.unref()
    entry.detach = () => {
      clearTimeout(entry.timer)
      child.off('spawn', onSpawn)
      child.off('error', onError)
      child.off('exit', onExit)
      if (child.pid !== undefined) this.options.launcher.idleFunctions.delete(child.pid)
    }
    return entry
  }

  /** A waiting process that will not serve: out of the pool, killed, counted. */
  private lost(entry: Entry, reason: PrestartDiscardReason): void {
    const list = this.byKey.get(entry.key)
    const i = list?.indexOf(entry) ?? -1
    if (i < 0) return
    list!.splice(i, 1)
    if (list!.length === 0) this.byKey.delete(entry.key)
    this.forget(entry)
    entry.detach()
    this.discard(entry, reason)
  }

  private discardOldest(reason: PrestartDiscardReason): void {
    const first = this.byKey.values().next().value?.[0]
    if (first) this.lost(first, reason)
  }

  private forget(_entry: Entry): void {
    this.total--
    prestartCounters().size--
  }

  private discard(entry: Entry, reason: PrestartDiscardReason): void {
    prestartCounters().discarded[reason]++
    if (entry.started.child.pid !== undefined) this.options.launcher.idleFunctions.delete(entry.started.child.pid)
    abandonFunctionProcess(entry.started, entry.key, this.options.launcher)
  }
}

/** Resolves once a killed process has exited (or failed to start), at most CLOSE_WAIT_MS later. */
function ended(started: StartedFunction): Promise<void> {
  const {child} = started
  return new Promise((resolve) => {
    const timer = setTimeout(done, CLOSE_WAIT_MS)
    timer.unref()
    function done(): void {
      clearTimeout(timer)
      child.off('exit', done)
      child.off('error', done)
      resolve()
    }
    child.once('exit', done)
    child.once('error', done)
  })
}
