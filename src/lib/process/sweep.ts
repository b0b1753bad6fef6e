/**
 * Killing what a function started, even after it left its process group (docs/process.md,
 * "Function processes never outlive their call").
 *
 * runFunctionProcess runs each function in its own process group and kills the group. A
 * descendant that calls setsid(2) (or setpgid) leaves the group, and once its parent exits it
 * is re-parented to PID 1 (or the nearest subreaper): nothing links it to the call any more.
 * The runner (Node) can neither become a subreaper (prctl) nor wait for processes it did
 * not start, and per-call cgroups or pid namespaces need privileges a function runner's pod does
 * not have. So each call is marked instead:
 *
 *   - every function process gets FNR_FUNCTION_CALL=<runner pid>.<call number> in its
 *     environment, which its descendants inherit (docs/process.md: what it does not catch);
 *   - when the call ends (normally, at its deadline, on cancellation or on the second signal)
 *     a sweep reads /proc and SIGKILLs every process whose environment holds that marker,
 *     every process whose process group or session is the function's own, and every
 *     descendant of those; it repeats while it finds new ones (a fork during the sweep).
 *
 * Sweeps run off the response path and are coalesced: calls ending together share one scan. A
 * call started by the native helper that ended cleanly is not swept when the helper, a child
 * subreaper, saw no process of it left (run.ts, native/fnr-spawn.c).
 *
 * What a sweep kills outside the call's process group had escaped it: those are counted per call
 * (fnr_function_escaped_processes_total) and reported to onEscapedProcesses listeners, which log
 * one warning per call (logEscapedProcesses).
 */
import {close, open, read, readdirSync, readFileSync} from 'node:fs'

import {nextTurn} from '../turns.js'

export const CALL_MARKER_ENV = 'FNR_FUNCTION_CALL'
const MARKER_PREFIX = Buffer.from(`\0${CALL_MARKER_ENV}=`)

let calls = 0

/** A marker unique to one call of this runner process. */
export function newCallMarker(): string {
  return `${process.pid}.${++calls}`
}

/**
 * What holds function processes: each ProcessLauncher (launcher.ts) keeps its running calls and
 * its pre-started processes, pid -> the call's marker. A sweep for an ended call never touches the
 * group, session or descendants of a process any of them holds, even when the kernel gave the ended
 * function's pid to a new function process, whichever launcher of the process started that one:
 * pids are the process's, not a launcher's, so this one check is over all of them.
 */
export interface FunctionHolder {
  holds(pid: number): boolean
}

const holders = new Set<FunctionHolder>()

/** Adds a holder whose processes every sweep spares (a launcher, from its construction to its close). */
export function addFunctionHolder(holder: FunctionHolder): void {
  holders.add(holder)
}

export function removeFunctionHolder(holder: FunctionHolder): void {
  holders.delete(holder)
}

/** A function process running a call or waiting for one: a sweep never kills its group, session or descendants by relation. */
function running(pid: number): boolean {
  for (const holder of holders) if (holder.holds(pid)) return true
  return false
}

/** What a sweep looks for: the markers of ended calls, and their function processes' pids. */
export interface SweepTarget {
  marker: string
  /** The function process (leader of its group and session-less descendants). */
  pid?: number
  /** When the call started (ms since the epoch): only processes started since can carry its marker. */
  startedAt?: number
  /** The function (image or exec label), for the escape report. */
  label?: string
}

/** A call whose processes escaped its process group: the sweep killed `count` of them. */
export interface EscapeReport {
  label?: string
  count: number
}

const escapeListeners = new Set<(report: EscapeReport) => void>()
let escapedTotal = 0

/** Processes sweeps killed outside their call's process group since this process started. */
export function escapedProcesses(): number {
  return escapedTotal
}

/** Calls `listener` once per swept call that had escaped processes. Returns the unsubscribe function. */
export function onEscapedProcesses(listener: (report: EscapeReport) => void): () => void {
  escapeListeners.add(listener)
  return () => escapeListeners.delete(listener)
}

/** Logs one warning per call that had escaped processes (image, count). Returns the unsubscribe function. */
export function logEscapedProcesses(logger: {warn(msg: string, fields?: Record<string, unknown>): void}): () => void {
  return onEscapedProcesses(({label, count}) => logger.warn('function processes escaped the call\'s process group and were killed', {image: label, count}))
}

function reportEscapes(escapes: Escapes): void {
  for (const [target, count] of escapes.perTarget) {
    if (count === 0) continue
    escapedTotal += count
    for (const listener of escapeListeners) {
      try {
        listener({label: target.label, count})
      } catch {
        // a listener must never fail a sweep
      }
    }
  }
}

interface ProcInfo {
  pid: number
  ppid: number
  pgrp: number
  session: number
  /** Start time in seconds since the epoch (from the boot time and the start ticks). */
  started: number
}

/** Clock ticks per second of /proc/PID/stat's start time (USER_HZ: 100 on every Linux fnr runs on). */
const USER_HZ = 100
let bootTime: number | undefined

/** The boot time in seconds since the epoch (/proc/stat btime), read once. */
function bootEpoch(): number {
  if (bootTime === undefined) {
    try {
      bootTime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'latin1'))?.[1] ?? 0)
    } catch {
      bootTime = 0
    }
  }
  return bootTime
}

/** The earliest start (epoch seconds, with slack for the 1 s resolution of btime) a process must have to be read for markers. */
function readSince(targets: readonly SweepTarget[]): number {
  const starts = targets.map((t) => t.startedAt ?? 0)
  const earliest = Math.min(...starts)
  return earliest > 0 && bootEpoch() > 0 ? earliest / 1000 - 2 : 0
}

/** The last pid the kernel handed out in this pid namespace (/proc/sys/kernel/ns_last_pid), or undefined. */
function lastPid(): number | undefined {
  try {
    const n = Number(readFileSync('/proc/sys/kernel/ns_last_pid', 'latin1').trim())
    return Number.isInteger(n) && n > 0 ? n : undefined
  } catch {
    return undefined
  }
}

/**
 * The lowest pid a process the targets concern can have. The kernel hands out pids in increasing
 * order, wrapping at pid_max: a function's descendants, the members of its group and session,
 * and every process carrying its marker were all created after the function process, so their
 * pids are higher, unless the counter wrapped since. A last pid below a target's pid means it
 * did, and so does a target without a pid: then 0 (every process is read). On a shared machine
 * this skips reading the stat of hundreds of older processes per sweep (docs/process.md).
 */
export function lowestPid(targets: readonly SweepTarget[], last: number | undefined): number {
  if (last === undefined || targets.length === 0) return 0
  let lowest = Number.POSITIVE_INFINITY
  for (const t of targets) {
    if (t.pid === undefined || t.pid > last) return 0
    lowest = Math.min(lowest, t.pid)
  }
  return lowest
}

/** Parses /proc/PID/stat (the command may contain spaces and parentheses: fields follow the last ')'). */
function parseStat(pid: number, stat: string): ProcInfo | undefined {
  const close = stat.lastIndexOf(')')
  if (close < 0) return undefined
  const fields = stat.slice(close + 2).split(' ')
  // fields[0] = state, [1] = ppid, [2] = pgrp, [3] = session, [19] = start time in ticks since boot
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined
  return {pid, ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]), started: bootEpoch() + Number(fields[19]) / USER_HZ}
}

/** The marker in an environ block (NUL-separated), if any. */
function markerOf(environ: Buffer): string | undefined {
  // environ starts without a NUL: look at its start, then after each NUL
  const head = MARKER_PREFIX.subarray(1)
  let at = environ.subarray(0, head.length).equals(head) ? 0 : -1
  if (at < 0) {
    const found = environ.indexOf(MARKER_PREFIX)
    if (found < 0) return undefined
    at = found + 1
  }
  const start = at + head.length
  const end = environ.indexOf(0, start)
  return environ.toString('latin1', start, end < 0 ? environ.length : end)
}

/** The targets of a sweep by marker and by function pid. */
function index(targets: readonly SweepTarget[]): {markers: Map<string, SweepTarget>; roots: Map<number, SweepTarget>} {
  const markers = new Map<string, SweepTarget>()
  const roots = new Map<number, SweepTarget>()
  for (const t of targets) {
    markers.set(t.marker, t)
    if (t.pid !== undefined) roots.set(t.pid, t)
  }
  return {markers, roots}
}

/**
 * Picks the processes to kill among a /proc snapshot: marked ones, the function's groups and
 * sessions, and their descendants; each with the call it belongs to.
 */
function victims(procs: ProcInfo[], marked: Map<number, SweepTarget>, roots: Map<number, SweepTarget>): Map<number, SweepTarget> {
  const kill = new Map<number, SweepTarget>()
  for (const p of procs) {
    if (p.pid === process.pid) continue
    const byMarker = marked.get(p.pid)
    if (byMarker) kill.set(p.pid, byMarker)
    else if (roots.has(p.pgrp) && !running(p.pgrp)) kill.set(p.pid, roots.get(p.pgrp)!)
    else if (roots.has(p.session) && !running(p.session)) kill.set(p.pid, roots.get(p.session)!)
  }
  // descendants of those (a child that cleared its environment but still has a marked parent)
  const children = new Map<number, number[]>()
  for (const p of procs) {
    const list = children.get(p.ppid)
    if (list) list.push(p.pid)
    else children.set(p.ppid, [p.pid])
  }
  const stack = [...kill.keys()]
  while (stack.length > 0) {
    const parent = stack.pop()!
    for (const c of children.get(parent) ?? []) {
      if (c !== process.pid && !kill.has(c) && !running(c)) {
        kill.set(c, kill.get(parent)!)
        stack.push(c)
      }
    }
  }
  return kill
}

/** The escapes a sweep found: per call, and the pids counted (a process killed but not dead yet is seen again next round). */
interface Escapes {
  perTarget: Map<SweepTarget, number>
  counted: Set<number>
}

/**
 * SIGKILLs the victims; returns how many it killed. A victim outside its call's process group
 * (whose id is the function's pid) had escaped it: counted into `escapes`, once.
 */
function killAll(kill: Map<number, SweepTarget>, procs: ProcInfo[], escapes: Escapes): number {
  const pgrps = new Map(procs.map((p) => [p.pid, p.pgrp]))
  let killed = 0
  for (const [pid, target] of kill) {
    try {
      process.kill(pid, 'SIGKILL')
      killed++
      if ((target.pid === undefined || pgrps.get(pid) !== target.pid) && !escapes.counted.has(pid)) {
        escapes.counted.add(pid)
        escapes.perTarget.set(target, (escapes.perTarget.get(target) ?? 0) + 1)
      }
    } catch {
      // gone already, or not ours
    }
  }
  return killed
}

const MAX_ROUNDS = 4

/** A process's stat (read synchronously: see STAT_BATCH), or undefined when it is gone or a zombie. */
function statOf(pid: number): ProcInfo | undefined {
  try {
    return parseStat(pid, readFileSync(`/proc/${pid}/stat`, 'latin1'))
  } catch {
    return undefined
  }
}

const ENVIRON_CHUNK = 16 * 1024

/**
 * A process's environment, read through the thread pool (open, read to the end, close: one hop
 * each, where fs/promises' readFile costs several times the CPU), or undefined when it cannot be
 * read (another user's process: EACCES; gone).
 */
function readEnviron(pid: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    open(`/proc/${pid}/environ`, 'r', (err, fd) => {
      if (err) {
        resolve(undefined)
        return
      }
      const chunks: Buffer[] = []
      const next = (): void => {
        const buf = Buffer.allocUnsafe(ENVIRON_CHUNK)
        read(fd, buf, 0, buf.length, null, (readErr, n) => {
          if (readErr || n === 0) {
            close(fd, () => resolve(readErr ? undefined : Buffer.concat(chunks)))
            return
          }
          chunks.push(buf.subarray(0, n))
          next()
        })
      }
      next()
    })
  })
}

/**
 * Environment reads in flight at once: at most half of libuv's thread pool (4 threads by
 * default). A read of /proc/PID/environ can wait on the other process's memory lock, so it goes
 * through the pool, and a sweep must never hold the whole pool, which file reads and DNS of the
 * server's calls share.
 */
const READ_CONCURRENCY = 2

/**
 * Stat files read in one turn of the event loop. /proc/PID/stat takes no lock of the other
 * process and reads in ~20-60 µs synchronously, where a read through the thread pool costs ~10
 * times the CPU; the sweep yields between batches so a full scan (after the pid counter wrapped)
 * never holds the event loop for long.
 */
const STAT_BATCH = 32

/** Pids looked up one by one rather than listing /proc (pidsToRead). */
const PROBE_RANGE = 64

/**
 * The pids a sweep reads: when the pid counter moved less than PROBE_RANGE since the oldest
 * target's function process, each pid from there to the last one handed out is looked up
 * directly (a pid that is free is skipped); else /proc is listed (~0.5 ms for ~130 processes on
 * the loaded test machine, most of a sweep's cost) and filtered from that floor on.
 */
function pidsToRead(targets: readonly SweepTarget[]): number[] | undefined {
  const last = lastPid()
  const floor = lowestPid(targets, last)
  if (floor > 0 && last! - floor < PROBE_RANGE) return Array.from({length: last! - floor + 1}, (_, i) => floor + i)
  let names: string[]
  try {
    names = readdirSync('/proc')
  } catch {
    return undefined
  }
  // read after the listing: a process listed is older than the last pid seen here
  const listedFloor = lowestPid(targets, lastPid())
  const pids: number[] = []
  for (const name of names) {
    const c = name.charCodeAt(0)
    if (c < 0x30 || c > 0x39) continue
    const pid = Number(name)
    if (pid >= listedFloor) pids.push(pid)
  }
  return pids
}

/** The stat of each process among `pids` (not this one, not 1 or 2), and the pids of those started since `since` (epoch seconds). */
async function statsOf(pids: readonly number[], since: number): Promise<{procs: ProcInfo[]; recent: number[]}> {
  const procs: ProcInfo[] = []
  const recent: number[] = []
  let statted = 0
  for (const pid of pids) {
    if (pid === process.pid || pid <= 2) continue
    if (++statted % STAT_BATCH === 0) await nextTurn()
    const info = statOf(pid)
    if (!info) continue
    procs.push(info)
    if (info.started >= since) recent.push(pid)
  }
  return {procs, recent}
}

/**
 * A pid looked up directly may be a thread's (listing /proc shows only processes): its stat reads
 * like a process's, and a signal to it goes to its whole process. Victims are checked (they are
 * few) so only processes, never this one's threads, are counted and killed.
 */
function isProcess(pid: number): boolean {
  try {
    const tgid = Number(/^Tgid:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1])
    return tgid === pid
  } catch {
    return false
  }
}

/** How long a process caught mid-exec (an empty environment) is given before its environment is read again. */
const EXEC_SETTLE_MS = 10

/** Reads a process's environment (NUL-separated), or undefined when it cannot be read. */
export type EnvironReader = (pid: number) => Promise<Buffer | undefined>

/** The pids among `pids` whose environment holds one of the markers, each with its call. */
export async function markedAmong(
  pids: readonly number[],
  markers: ReadonlyMap<string, SweepTarget>,
  readEnv: EnvironReader = readEnviron,
): Promise<Map<number, SweepTarget>> {
  const marked = new Map<number, SweepTarget>()
  for (let i = 0; i < pids.length; i += READ_CONCURRENCY) {
    const batch = pids.slice(i, i + READ_CONCURRENCY)
    const environs = await Promise.all(batch.map(readEnv))
    // An empty environment is read from a process in the middle of execve (its old memory is gone,
    // the new not yet readable): a setsid'd daemon exec'ing its program escaped a CI run that way.
    // Read those once more, a moment later (a process whose environment is really empty is rare).
    const empty = batch.filter((_, j) => environs[j]?.length === 0)
    if (empty.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, EXEC_SETTLE_MS))
      const again = await Promise.all(empty.map(readEnv))
      empty.forEach((pid, k) => {
        environs[batch.indexOf(pid)] = again[k]
      })
    }
    environs.forEach((environ, j) => markIfTarget(marked, batch[j]!, environ, markers))
  }
  return marked
}

/**
 * One sweep over /proc for the targets. Returns the number of processes killed. Only processes
 * created since the oldest target's function process are read (lowestPid), and only those
 * started since the calls began have their environment read.
 */
export async function sweep(targets: readonly SweepTarget[]): Promise<number> {
  if (targets.length === 0 || process.platform !== 'linux') return 0
  const {markers, roots} = index(targets)
  const since = readSince(targets)
  const escapes: Escapes = {perTarget: new Map(), counted: new Set()}
  let total = 0
  // A process SIGKILLed in one round may still be listed, not yet a zombie, in the next.
  const done = new Set<number>()
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const pids = pidsToRead(targets)
    if (!pids) break
    const {procs, recent} = await statsOf(pids, since)
    const marked = await markedAmong(recent, markers)
    const kill = new Map([...victims(procs, marked, roots)].filter(([pid]) => !done.has(pid) && isProcess(pid)))
    for (const pid of kill.keys()) done.add(pid)
    const killed = killAll(kill, procs, escapes)
    total += killed
    if (killed === 0) break
  }
  reportEscapes(escapes)
  return total
}

function readEnvironSync(pid: number): Buffer | undefined {
  try {
    return readFileSync(`/proc/${pid}/environ`)
  } catch {
    return undefined // gone, or not ours
  }
}

function markIfTarget(marked: Map<number, SweepTarget>, pid: number, environ: Buffer | undefined, markers: ReadonlyMap<string, SweepTarget>): void {
  const m = environ && markerOf(environ)
  const target = m === undefined ? undefined : markers.get(m)
  if (target) marked.set(pid, target)
}

/** sweep, synchronously: for the last moments of a process that is about to exit. */
export function sweepSync(targets: readonly SweepTarget[]): number {
  if (targets.length === 0 || process.platform !== 'linux') return 0
  const since = readSince(targets)
  const {markers, roots} = index(targets)
  const escapes: Escapes = {perTarget: new Map(), counted: new Set()}
  let total = 0
  for (let round = 0; round < MAX_ROUNDS; round++) {
    let names: string[]
    try {
      names = readdirSync('/proc')
    } catch {
      break
    }
    const procs: ProcInfo[] = []
    const marked = new Map<number, SweepTarget>()
    const midExec: number[] = []
    for (const name of names) {
      const c = name.charCodeAt(0)
      if (c < 0x30 || c > 0x39) continue
      const pid = Number(name)
      if (pid === process.pid || pid <= 2) continue
      let info: ProcInfo | undefined
      try {
        info = parseStat(pid, readFileSync(`/proc/${pid}/stat`, 'latin1'))
      } catch {
        continue
      }
      if (!info) continue
      procs.push(info)
      if (info.started < since) continue
      const environ = readEnvironSync(pid)
      if (environ?.length === 0) midExec.push(pid)
      markIfTarget(marked, pid, environ, markers)
    }
    // as in markedAmong: a process caught mid-execve is read once more, a moment later
    if (midExec.length > 0) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, EXEC_SETTLE_MS)
      for (const pid of midExec) markIfTarget(marked, pid, readEnvironSync(pid), markers)
    }
    const killed = killAll(victims(procs, marked, roots), procs, escapes)
    total += killed
    if (killed === 0) break
  }
  reportEscapes(escapes)
  return total
}

/**
 * Coalesces sweeps: targets requested while a sweep runs are swept together by the next one.
 * `whenIdle()` resolves once every requested target has been swept (tests, shutdown). Each
 * launcher has one (launcher.ts).
 */
export class Sweeper {
  private pending: SweepTarget[] = []
  private running: Promise<void> | undefined
  /** Processes killed by sweeps so far (after a call ended: they had escaped its group). */
  killed = 0
  /** Calls whose sweep was asked for, and calls that ended with nothing to sweep (run.ts; for tests and benches). */
  requested = 0
  skipped = 0

  request(target: SweepTarget): void {
    this.requested++
    this.pending.push(target)
    this.running ??= this.loop()
  }

  private async loop(): Promise<void> {
    try {
      // Off the response path: the call that asked for the sweep answers first, and calls
      // ending in the same turn share this sweep.
      await nextTurn()
      while (this.pending.length > 0) {
        const batch = this.pending
        this.pending = []
        try {
          this.killed += await sweep(batch)
        } catch {
          // a sweep must never fail a call
        }
      }
    } finally {
      this.running = undefined
    }
  }

  /** Takes the targets not swept yet (for a synchronous last sweep). */
  takePending(): SweepTarget[] {
    const batch = this.pending
    this.pending = []
    return batch
  }

  async whenIdle(): Promise<void> {
    while (this.running) await this.running
  }
}
