/**
 * Which running function processes are asleep, for the call budget (budget.ts, docs/limits.md).
 *
 * A call's function runs in a process group of its own (process/run.ts; `liveCalls` of the server's
 * launcher, process/launcher.ts, lists the group leaders of the calls running now). A group that used almost no
 * CPU and read or wrote nothing for a while (a function waiting on a remote server, or one that
 * hangs) costs the runner little
 * but the memory it holds: the budget counts it as a fraction of a slot, its resident memory over a
 * slot's share of the memory limit (at least MIN_IDLE_WEIGHT), and lends the rest of its slot to
 * calls that wait. A group that wakes up costs a whole slot again at the next sample.
 *
 * The sample reads /proc/PID/stat and /proc/PID/io of each group's leader and its descendants
 * (through /proc/PID/task/TID/children): CPU time (the process's and its reaped children's),
 * resident memory, bytes read and written by system calls. A function blocked on its pipes while the
 * runner is slow to feed it or to read it (a large input, a busy runner) moves bytes between two
 * samples, and is not asleep. `judgeGroups` is the pure part.
 */
import {readdirSync, readFileSync} from 'node:fs'

/** A group is asleep below this share of one core over the sampled window. */
export const IDLE_CPU_SHARE = 0.05
/**
 * A group younger than this is never asleep: it is starting (reading its input, loading). Short:
 * calls that hang on one connection hold its streams and the slots until they are judged asleep,
 * and every other call of the connection waits that long (test/grpc/fairness.test.ts (c): with
 * 300 ms here and a 250 ms window, normal calls among 24 hung ones waited up to 1.25 s, three times
 * what they waited with Porch's runner, which has no limit; with 100 ms and 50 ms, on cores where a
 * function starts in a few ms, they still waited 3.5x Porch's runner, docs/limits.md). A function
 * still loading is runnable or uses CPU, and one reading its input moves bytes: either keeps it
 * working whatever its age.
 */
export const MIN_IDLE_AGE_MS = 30
/**
 * A group is judged over at least this long between two readings. Two clock ticks: a group that
 * used one tick in it (half of a core) is working.
 */
export const MIN_IDLE_WINDOW_MS = 20
/**
 * How often the budget samples the running groups while it needs to (budget.ts keepSampling), at
 * least: a sample reads a few /proc files per process, ~5 ms for 300 groups, and the sampler waits
 * at least SAMPLE_COST_FACTOR times as long as its last reading took (IdleSampler), so that sampling
 * never takes more than a tenth of the event loop, however many calls run.
 */
export const SAMPLE_INTERVAL_MS = 20
/** The sampler waits at least this many times its last reading's duration before the next one. */
export const SAMPLE_COST_FACTOR = 10
/** The least fraction of a slot an asleep group costs: at most 16 of them per slot. */
export const MIN_IDLE_WEIGHT = 1 / 16
/** Clock ticks per second of /proc/PID/stat's times (USER_HZ: 100 on every Linux fnr runs on). */
const CLK_TCK = 100
const PAGE_SIZE = 4096

/** One reading of a process group. */
export interface GroupReading {
  /** CPU time used so far by the group's processes (and the children they reaped), ms. */
  cpuMs: number
  /** Resident memory of the group's processes, bytes. */
  rssBytes: number
  /** Bytes the group's processes read and wrote so far (rchar + wchar of /proc/PID/io). */
  ioBytes: number
  /**
   * When the leader started (ms since the epoch, to the second the kernel gives its boot time):
   * tells one process from a later one with the same pid.
   */
  startedAt: number
  /**
   * How long the leader has run, from the kernel's own clock (/proc/uptime against the start time
   * in /proc/PID/stat). Not `at - startedAt`: the boot time is whole seconds, and the wall clock
   * drifts from the kernel's, so that difference was off by up to a second.
   */
  ageMs: number
  /** When it was read (ms since the epoch). */
  at: number
  /**
   * Whether one of its processes was running or waiting for the disk when read (state R or D), or
   * its leader had exited (Z: the call is ending): a group working, or ready to work on a busy
   * machine, is never asleep, however little CPU it got.
   */
  runnable: boolean
}

/** What the budget needs to know: the slot fraction every sleeping group gives back. */
export interface IdleSample {
  /** Groups judged asleep. */
  idle: number
  /** Sum over asleep groups of (1 - their weight): slots lent to waiting calls. */
  lent: number
}

/**
 * Judges each group from its reading now and the previous one, at least `minWindowMs` older and of
 * the same process (same start time): asleep when the group is older than MIN_IDLE_AGE_MS, moved no
 * byte through its system calls, used less than IDLE_CPU_SHARE of a core in between, and none of its
 * processes is runnable now. Without
 * such a reading a group is working. Its weight is its resident memory over `slotBytes`, at least
 * MIN_IDLE_WEIGHT, at most 1.
 */
export function judgeGroups(now: ReadonlyMap<number, GroupReading>, previous: ReadonlyMap<number, GroupReading>, slotBytes: number, minWindowMs = MIN_IDLE_WINDOW_MS): IdleSample {
  let idle = 0
  let lent = 0
  for (const [pgid, r] of now) {
    const p = previous.get(pgid)
    if (!p || p.startedAt !== r.startedAt || r.at - p.at < minWindowMs || r.ageMs < MIN_IDLE_AGE_MS) continue
    if (r.runnable || r.ioBytes !== p.ioBytes || (r.cpuMs - p.cpuMs) / (r.at - p.at) >= IDLE_CPU_SHARE) continue
    const weight = Math.min(1, Math.max(MIN_IDLE_WEIGHT, r.rssBytes / slotBytes))
    idle++
    lent += 1 - weight
  }
  return {idle, lent}
}

let bootTimeMs: number | undefined
function bootTime(): number {
  if (bootTimeMs === undefined) {
    try {
      bootTimeMs = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'latin1'))?.[1] ?? 0) * 1000
    } catch {
      bootTimeMs = 0
    }
  }
  return bootTimeMs
}

/** utime+stime+cutime+cstime (ticks), rss (pages), start time (ticks since boot), running or in disk wait, exited and not yet reaped, of one process. */
function statTimes(pid: number): {ticks: number; rssPages: number; start: number; runnable: boolean; zombie: boolean} | undefined {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1')
  } catch {
    return undefined
  }
  // Fields follow the last ')' (the command may hold spaces and parentheses): [0] is the state.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return {ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]), rssPages: Number(f[21]), start: Number(f[19]), runnable: f[0] === 'R' || f[0] === 'D', zombie: f[0] === 'Z'}
}

/** rchar + wchar of /proc/PID/io (0 when it cannot be read). */
function ioOf(pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'latin1')
    return Number(/^rchar: (\d+)$/m.exec(io)?.[1] ?? 0) + Number(/^wchar: (\d+)$/m.exec(io)?.[1] ?? 0)
  } catch {
    return 0
  }
}

/** The children of every thread of `pid`. */
function childrenOf(pid: number): number[] {
  const out: number[] = []
  let tasks: string[]
  try {
    tasks = readdirSync(`/proc/${pid}/task`)
  } catch {
    return out
  }
  for (const tid of tasks) {
    try {
      for (const c of readFileSync(`/proc/${pid}/task/${tid}/children`, 'latin1').split(' ')) if (c.trim() !== '') out.push(Number(c))
    } catch {
      // gone, or a kernel without CONFIG_PROC_CHILDREN: the leader alone is counted
    }
  }
  return out
}

/** Most processes counted in one group (a fork bomb is not walked to its end). */
const MAX_GROUP_PROCESSES = 64

/** The kernel's time since boot, ms (the clock /proc/PID/stat's start times count on). */
function uptimeMs(): number {
  try {
    return Number(readFileSync('/proc/uptime', 'latin1').split(' ')[0]) * 1000
  } catch {
    return Number.NaN
  }
}

/** Reads one group (leader pid = pgid) at `at`, its age from `uptime` (uptimeMs()); undefined when it is gone. */
export function readGroup(leader: number, at: number, uptime = uptimeMs()): GroupReading | undefined {
  const head = statTimes(leader)
  if (!head) return undefined
  let ticks = head.ticks
  let rssPages = head.rssPages
  let ioBytes = ioOf(leader)
  // A leader that has exited (not yet reaped, or reaped and its end not yet read by the runner) is
  // ending, not asleep: its call ends in a moment, and its slot is free then. Judged asleep, it
  // lent its slot to one more call while it still counted among the container's processes (a
  // flooded runner reads exits late: 17-19 processes at 16 slots, test/reliability/memory-limit.test.ts).
  let runnable = head.runnable || head.zombie
  const todo = childrenOf(leader)
  for (let seen = 1; todo.length > 0 && seen < MAX_GROUP_PROCESSES; seen++) {
    const pid = todo.pop()!
    const s = statTimes(pid)
    if (!s) continue
    ticks += s.ticks
    rssPages += s.rssPages
    ioBytes += ioOf(pid)
    runnable ||= s.runnable
    todo.push(...childrenOf(pid))
  }
  return {cpuMs: (ticks * 1000) / CLK_TCK, rssBytes: rssPages * PAGE_SIZE, ioBytes, startedAt: bootTime() + (head.start * 1000) / CLK_TCK, ageMs: uptime - (head.start * 1000) / CLK_TCK, at, runnable}
}

/** Reads each group (leader pid = pgid) now; groups already gone are left out. */
export function readGroups(leaders: Iterable<number>, at = Date.now()): Map<number, GroupReading> {
  const out = new Map<number, GroupReading>()
  const uptime = uptimeMs()
  for (const leader of leaders) {
    const r = readGroup(leader, at, uptime)
    if (r) out.set(leader, r)
  }
  return out
}

/**
 * Longest the sampler reads /proc without giving the event loop back (ms). A reading of 300 groups
 * takes 5-15 ms; read in one go, it held every call that came meanwhile (another client's call
 * behind a burst of calls asleep waited for it: bench/fairness.ts F-b320). Past this, the rest is
 * read on later turns of the event loop (setImmediate), and the sample completes then.
 */
export const SAMPLE_SLICE_MS = 1

/** Reads one group at `at` (ms since the epoch); the sampler's default is readGroup. */
export type GroupReader = (leader: number, at: number) => GroupReading | undefined

/** A sample being read: the groups left, the readings so far, and the CPU time they took. */
interface PendingRead {
  leaders: number[]
  next: number
  readings: Map<number, GroupReading>
  costMs: number
  /** sample()'s `now`, and performance.now() then: later slices' readings are timed from them. */
  now: number
  startedPerf: number
}

/**
 * Samples the running function groups (`leaders()`), keeping the previous reading of each to
 * measure the CPU used between two. Not cheap enough for every call (a few /proc reads per process):
 * the budget samples only while calls wait, at most every `minIntervalMs`. A sample is read in
 * slices of SAMPLE_SLICE_MS: one that fits in its first slice is returned by the sample() that
 * started it; a longer one goes on over the next turns of the event loop, sample() returns the last
 * complete one meanwhile, and `onSample` is called when the new one is complete.
 */
export class IdleSampler implements IdleSource {
  /** Per group, its readings since the newest one at least MIN_IDLE_WINDOW_MS old (oldest first). */
  private history = new Map<number, GroupReading[]>()
  private last: IdleSample = {idle: 0, lent: 0}
  private lastAt = 0
  private pending: PendingRead | undefined
  /** Called when a sample that took more than one slice is complete (the budget drains then). */
  onSample: (() => void) | undefined

  constructor(
    private readonly leaders: () => Iterable<number>,
    private readonly slotBytes: number,
    private readonly minIntervalMs = SAMPLE_INTERVAL_MS,
    private readonly read?: GroupReader,
  ) {}

  /** How long the last reading took (ms of the event loop): the next one waits at least SAMPLE_COST_FACTOR times that. */
  private lastCostMs = 0

  /**
   * The last sample; a new one is started first when the last is older than minIntervalMs (and
   * SAMPLE_COST_FACTOR times the last reading's cost), and returned if it was read in one slice.
   */
  sample(now = Date.now()): IdleSample {
    if (this.pending || now - this.lastAt < Math.max(this.minIntervalMs, SAMPLE_COST_FACTOR * this.lastCostMs)) return this.last
    this.lastAt = now
    this.pending = {leaders: [...this.leaders()], next: 0, readings: new Map(), costMs: 0, now, startedPerf: performance.now()}
    this.readSlice(this.pending, false)
    return this.last
  }

  /** Reads groups of `p` for one slice; completes the sample, or goes on at the next turn. */
  private readSlice(p: PendingRead, later: boolean): void {
    if (this.pending !== p) return // reset meanwhile
    const started = performance.now()
    const uptime = this.read ? 0 : uptimeMs()
    const read: GroupReader = this.read ?? ((leader, at) => readGroup(leader, at, uptime))
    while (p.next < p.leaders.length) {
      const leader = p.leaders[p.next++]!
      // The first slice's readings carry sample()'s `now`; later ones the time passed since.
      const r = read(leader, later ? p.now + Math.round(performance.now() - p.startedPerf) : p.now)
      if (r) p.readings.set(leader, r)
      if (performance.now() - started >= SAMPLE_SLICE_MS) break
    }
    p.costMs += performance.now() - started
    if (p.next < p.leaders.length) {
      setImmediate(() => this.readSlice(p, true))
      return
    }
    this.pending = undefined
    this.lastCostMs = p.costMs
    this.judge(p.readings)
    if (later) this.onSample?.()
  }

  private judge(readings: Map<number, GroupReading>): void {
    // Each group is compared with its newest reading at least a window old: a sliding window, so a
    // group asleep stays asleep from one sample to the next. (Comparing with one kept reading, as
    // before, judged every group working at each sample after the window restarted: the calls
    // asleep were counted at one sample in three and a waiting call got a turn only then.)
    const baseline = new Map<number, GroupReading>()
    const next = new Map<number, GroupReading[]>()
    for (const [pgid, r] of readings) {
      const kept = (this.history.get(pgid) ?? []).filter((p) => p.startedAt === r.startedAt && p.at < r.at)
      let from = -1
      for (let i = kept.length - 1; i >= 0; i--) {
        if (r.at - kept[i]!.at >= MIN_IDLE_WINDOW_MS) {
          from = i
          break
        }
      }
      if (from >= 0) baseline.set(pgid, kept[from]!)
      next.set(pgid, [...kept.slice(Math.max(0, from)), r])
    }
    this.last = judgeGroups(readings, baseline, this.slotBytes)
    this.history = next
  }

  /** Forgets the last sample (no call waits: nothing to lend), and drops one being read. */
  reset(): void {
    this.pending = undefined
    this.last = {idle: 0, lent: 0}
    this.lastAt = 0
  }
}

/** What the call budget (budget.ts) reads which running calls are asleep from: IdleSampler, or a test's stand-in. */
export interface IdleSource {
  sample(now?: number): IdleSample
  reset(): void
  /** Set by the budget: called when a sample completes after sample() returned (read over several turns). */
  onSample?: (() => void) | undefined
}
