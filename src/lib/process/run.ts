/**
 * Running one KRM function process: the single mechanism behind the exec evaluator, the wrapper
 * server and `fnr eval --exec`.
 *
 * - No shell: the command and its arguments are passed to the kernel as they are.
 * - stdin is the ResourceList bytes, untouched; stdout is collected up to a hard cap; stderr is
 *   kept as a bounded tail (a function flooding stderr cannot exhaust memory).
 * - The process runs in its own process group. On deadline, cancellation or an oversized stdout,
 *   the whole group is killed with SIGKILL, so grandchildren die too. After a normal exit the
 *   group is killed as well, so nothing the function left behind keeps running (unless the
 *   native helper saw that nothing was left: below).
 * - Descendants that left the group (setsid, setpgid, a double fork) are found by the call's
 *   marker in their environment and killed by a sweep of /proc when the call ends (sweep.ts);
 *   skipped for a call that ended cleanly when the native helper, a child subreaper, saw no
 *   process of it left (FunctionChild.leftNothing).
 *
 * It uses node:child_process directly rather than execa: it needs group kills, a tail-capped
 * stderr and a stdout cap that stops reading at the limit, and it is on the hot path of every
 * request, where execa's extra work costs about a millisecond per spawn (docs/process.md, "How servers start function processes: the spawner").
 */
import {accessSync, constants, statSync} from 'node:fs'

import {FnrError, withoutStack} from '../errors.js'
import {joinWithHeadroom, type Headroom} from '../headroom.js'
import {nextTurn} from '../turns.js'
import type {ProcessLauncher} from './launcher.js'
import type {FunctionChild} from './spawner.js'
import {CALL_MARKER_ENV, newCallMarker} from './sweep.js'

export interface FunctionProcessOptions {
  command: string
  args?: readonly string[]
  /** The ResourceList bytes written to stdin. */
  input: Uint8Array
  env?: NodeJS.ProcessEnv
  cwd?: string
  /** Absolute deadline (ms since the epoch); undefined or Infinity means none. */
  deadline?: number
  /** Aborting kills the process and the call ends Cancelled. */
  signal?: AbortSignal
  /** stdout larger than this kills the process and the call ends ResourceExhausted. */
  maxStdoutBytes: number
  /** Only the last this-many bytes of stderr are kept (default 256 KiB; the evaluators keep as much as a message holds). */
  maxStderrBytes?: number
  /** A name for messages (the image, or the exec path). */
  label: string
  /**
   * Who starts the process and keeps its call (launcher.ts): the server's, through its spawner, in
   * long-running servers, whose event loop must not pay for forking a large runner; the command's,
   * starting directly, in one-shot commands.
   */
  launcher: ProcessLauncher
  /**
   * Room around stdout when it is joined from several chunks (headroom.ts): `before` bytes free in
   * front of it, and `after` plus the length of the stderr kept behind it, for a caller that wraps
   * the output with a header and the stderr without copying the output again. Default none.
   */
  stdoutHeadroom?: Headroom
  /**
   * A process started ahead of this call for the same command, arguments, environment and working
   * directory (prestart.ts, startFunctionProcess), blocked on its stdin: the call writes its input
   * to it instead of starting one. Its deadline, cancellation and accounting are this call's.
   */
  prestarted?: StartedFunction
}

/** A function process started (perhaps ahead of its call): the process, its call marker and when it started. */
export interface StartedFunction {
  child: FunctionChild
  marker: string
  /** ms since the epoch: the sweep looks for the marker in processes started since. */
  startedAt: number
}

/**
 * Starts a function process with a call marker of its own, the way runFunctionProcess does;
 * throws what the launch throws (a NUL byte, EMFILE when started directly).
 */
export function startFunctionProcess(spec: {command: string; args?: readonly string[]; env?: NodeJS.ProcessEnv; cwd?: string; input?: Uint8Array}, launcher: ProcessLauncher): StartedFunction {
  const marker = newCallMarker()
  const startedAt = Date.now()
  const child = launcher.launch({command: spec.command, args: spec.args ?? [], env: {...(spec.env ?? minimalEnvironment()), [CALL_MARKER_ENV]: marker}, cwd: spec.cwd, inputBytes: spec.input?.length})
  return {child, marker, startedAt}
}

export interface FunctionProcessResult {
  stdout: Buffer
  stderr: Buffer
  /** Exit code, or null when the process was ended by a signal. */
  exitCode: number | null
  signal: NodeJS.Signals | null
  /** True when stderr was longer than maxStderrBytes and its head was dropped. */
  stderrTruncated: boolean
  /** How many bytes of stderr's head were dropped. */
  stderrDropped?: number
  durationMs: number
}

const DEFAULT_MAX_STDERR = 256 * 1024
/** How long to wait for stdio to close after the process exited (a grandchild may hold it). */
const STDIO_GRACE_MS = 200

/** The environment function processes get: just enough to find interpreters, nothing secret. */
export function minimalEnvironment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    HOME: '/tmp',
  }
  if (process.env.TZ) env.TZ = process.env.TZ
  return {...env, ...extra}
}

/** The runner's proxy settings, passed on to exec functions as Porch's exec runtime does (it passes its whole environment). */
export const PROXY_VARIABLES = ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy'] as const

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Checks names given to pass on (--exec-env); returns them split at commas, without blanks. */
export function parsePassEnv(names: readonly string[]): string[] {
  const out = names.flatMap((n) => n.split(',')).map((n) => n.trim()).filter((n) => n !== '')
  for (const n of out) {
    if (!VARIABLE_NAME.test(n)) throw new FnrError('Usage', `--exec-env: ${JSON.stringify(n)} is not an environment variable name (letters, digits and _, not starting with a digit)`)
  }
  return out
}

/**
 * The environment of an exec function: minimalEnvironment(), the runner's proxy variables that
 * are set, and the variables named in `pass` (--exec-env) that are set in the runner.
 */
export function execEnvironment(pass: readonly string[] = [], from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env = minimalEnvironment()
  for (const name of [...PROXY_VARIABLES, ...pass]) {
    const value = from[name]
    if (value !== undefined) env[name] = value
  }
  return env
}

class TailBuffer {
  private chunks: Buffer[] = []
  private size = 0
  dropped = 0

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk)
    this.size += chunk.length
    while (this.size > this.limit && this.chunks.length > 0) {
      const first = this.chunks[0]!
      const excess = this.size - this.limit
      if (first.length <= excess) {
        this.chunks.shift()
        this.size -= first.length
        this.dropped += first.length
      } else {
        this.chunks[0] = first.subarray(excess)
        this.size -= excess
        this.dropped += excess
      }
    }
  }

  toBuffer(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size)
  }
}

/** Outputs at least this large are joined in a turn of the event loop of their own. */
const LARGE_OUTPUT_BYTES = 1024 * 1024

/**
 * SIGKILLs a process group. After a normal exit the group is usually gone already, and
 * process.kill then throws ESRCH: that is the common case on every call, so the error is built
 * without a stack trace (~10 µs less per call than capturing one).
 */
export function killGroup(pid: number | undefined): void {
  if (pid === undefined) return
  withoutStack(() => {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {
      // ESRCH: the group is already gone.
    }
  })
}

/** The error for a call that must not start: cancelled, or its deadline already passed. */
export function notStartable(label: string, deadline: number | undefined, signal: AbortSignal | undefined): FnrError | undefined {
  if (signal?.aborted) return new FnrError('Cancelled', `function ${JSON.stringify(label)} was cancelled before it started`)
  if (deadline !== undefined && deadline <= Date.now()) return new FnrError('DeadlineExceeded', `deadline exceeded before function ${JSON.stringify(label)} started`)
  return undefined
}

/** The error for a function process that could not be started. */
function startError(options: FunctionProcessOptions, err: NodeJS.ErrnoException): FnrError {
  const where = `${JSON.stringify(options.label)} (${options.command})`
  if (err.code === 'EMFILE' || err.code === 'ENFILE' || err.code === 'EAGAIN' || err.code === 'ENOMEM') {
    // The runner (or its process spawner, which forks for it) is out of descriptors or processes:
    // a condition of the server, worth a retry.
    const what = err.code === 'EAGAIN' ? 'processes' : err.code === 'ENOMEM' ? 'memory' : 'file descriptors'
    const who = (err as {inSpawner?: boolean}).inSpawner ? "the runner's process spawner" : 'the runner'
    return new FnrError('Unavailable', `cannot start function ${where}: ${who} is out of ${what} (${err.code}); retry later`, {cause: err, details: {startFailed: true}})
  }
  const dir = options.cwd === undefined ? undefined : workingDirectoryProblem(options.cwd)
  if (dir !== undefined) {
    // Node (and the helper, as execvp) report a working directory that cannot be entered with the
    // errno of chdir: ENOENT read "executable not found" and sent users after a binary that was there.
    return new FnrError('FunctionFailed', `failed to start function ${JSON.stringify(options.label)}: working directory ${dir} (${options.cwd})`, {cause: err, details: {startFailed: true}})
  }
  const why = err.code === 'ENOENT' ? 'executable not found' : err.code === 'EACCES' ? 'permission denied' : err.message
  return new FnrError('FunctionFailed', `failed to start function ${JSON.stringify(options.label)}: ${why} (${options.command})`, {cause: err, details: {startFailed: true}})
}

/** What keeps a function from starting in `cwd`: it is missing, not a directory, or not searchable; undefined when none of those. */
function workingDirectoryProblem(cwd: string): string | undefined {
  try {
    if (!statSync(cwd).isDirectory()) return 'is not a directory'
    accessSync(cwd, constants.X_OK)
    return undefined
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    return code === 'ENOENT' ? 'not found' : code === 'EACCES' ? 'not accessible' : code === 'ENOTDIR' ? 'not found (a part of its path is a file)' : undefined
  }
}

function headroomFor(asked: Headroom | undefined, stderrLength: number): Headroom {
  return asked === undefined ? {before: 0, after: 0} : {before: asked.before, after: asked.after + stderrLength}
}

/**
 * Whether a call's group is killed and its processes swept when its stdio has closed. Not when
 * it ended normally (`ending` unset: not at its deadline, cancelled or over its stdout cap),
 * nothing asked for a sweep before (its stdio held open past its exit), and the spawner knows it
 * left no process alive (`leftNothing`: the native helper, a child subreaper, counted no orphan at
 * its exit): then there is nothing a sweep could find (docs/process.md). Otherwise always.
 */
export function sweepAtClose(call: {ending?: string; leftNothing?: boolean; sweepRequested: boolean}): boolean {
  return !(call.leftNothing === true && call.ending === undefined && !call.sweepRequested)
}

/**
 * Kills a started function process that will serve no call (a pre-started one dropped, or handed
 * to a call that must not start) and everything it started: its group now, or as soon as it has
 * a pid, then a sweep for its marker.
 */
export function abandonFunctionProcess(started: StartedFunction, label: string, launcher: ProcessLauncher): void {
  const {child, marker, startedAt} = started
  // An 'error' now (its spawn failed, or the spawner died) has nobody else to hear it.
  child.on('error', () => {})
  const kill = (): void => {
    killGroup(child.pid)
    ;(child as {stdin?: {destroy(): void} | null}).stdin?.destroy()
    child.stdout?.destroy()
    child.stderr?.destroy()
    if (child.pid !== undefined) launcher.sweeper.request({marker, pid: child.pid, startedAt, label})
  }
  // Started through the spawner, its descriptors may still be on their way, some of them or all
  // (the pid comes first): its group is killed now when known, and its streams are closed once
  // all are in. A stream closed before the others arrived left them open and unread, holding the
  // spawner's channel and so the runner's event loop: `fnr serve` stopped but did not exit.
  if (child.stdioPending) {
    if (child.pid !== undefined) killGroup(child.pid)
    child.once('spawn', kill)
  } else kill()
}

export function runFunctionProcess(options: FunctionProcessOptions): Promise<FunctionProcessResult> {
  const started = performance.now()
  const deadline = options.deadline ?? Number.POSITIVE_INFINITY
  const early = notStartable(options.label, options.deadline, options.signal)
  if (early) {
    if (options.prestarted) abandonFunctionProcess(options.prestarted, options.label, options.launcher)
    return Promise.reject(early)
  }

  return new Promise((resolve, reject) => {
    let settled = false
    let ending: 'deadline' | 'cancelled' | 'stdout-limit' | undefined
    const stdoutChunks: Buffer[] = []
    let stdoutSize = 0
    const stderr = new TailBuffer(options.maxStderrBytes ?? DEFAULT_MAX_STDERR)
    let timer: NodeJS.Timeout | undefined
    let graceTimer: NodeJS.Timeout | undefined

    let launched: StartedFunction
    try {
      launched = options.prestarted ?? startFunctionProcess(options, options.launcher)
    } catch (err) {
      settled = true
      reject(startError(options, err as NodeJS.ErrnoException))
      return
    }
    const {child, marker, startedAt} = launched
    const {liveCalls, feeding, sweeper} = options.launcher
    // Until its input is all written, the function waits for the runner: not asleep (launcher.ts feeding).
    let inputWritten = false
    const live = (pid: number): void => {
      liveCalls.set(pid, marker)
      if (!inputWritten) feeding.add(pid)
    }
    if (child.pid !== undefined) live(child.pid)
    else {
      // Through the spawner the pid comes a moment later; a call that ended meanwhile (deadline,
      // cancellation) kills the process as soon as it exists.
      child.once('spawn', () => {
        if (settled || ending) killGroup(child.pid)
        else live(child.pid!)
      })
    }
    let sweepRequested = false
    const forget = (): void => {
      if (child.pid !== undefined && liveCalls.get(child.pid) === marker) {
        liveCalls.delete(child.pid)
        feeding.delete(child.pid)
      }
    }
    const swept = (): void => {
      forget()
      sweepRequested = true
      sweeper.request({marker, pid: child.pid, startedAt, label: options.label})
    }

    const cleanup = (): void => {
      if (timer) clearTimeout(timer)
      if (graceTimer) clearTimeout(graceTimer)
      options.signal?.removeEventListener('abort', onAbort)
    }

    const fail = (err: FnrError): void => {
      if (settled) return
      settled = true
      cleanup()
      killGroup(child.pid)
      swept()
      reject(err)
    }

    const end = (reason: typeof ending): void => {
      if (ending) return
      ending = reason
      killGroup(child.pid)
      swept()
    }

    function onAbort(): void {
      end('cancelled')
    }

    if (Number.isFinite(deadline)) {
      // setTimeout takes at most a 32-bit delay; longer deadlines are effectively none.
      const delay = Math.max(0, Math.min(deadline - Date.now(), 2_147_483_647))
      timer = setTimeout(() => end('deadline'), delay)
    }
    options.signal?.addEventListener('abort', onAbort, {once: true})

    child.on('error', (err: NodeJS.ErrnoException) => fail(err instanceof FnrError ? err : startError(options, err)))

    const readOutput = (): void => {
      child.stdout!.on('data', (chunk: Buffer) => {
        if (ending) return
        stdoutSize += chunk.length
        if (stdoutSize > options.maxStdoutBytes) {
          end('stdout-limit')
          return
        }
        stdoutChunks.push(chunk)
      })
      child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk))
    }
    // Started directly, the streams are there at once. Through the spawner they arrive with
    // 'spawn'. When spawn itself fails (EMFILE: no descriptor left for the pipes), they never come
    // and the 'error' event above ends the call.
    if (child.stdout && child.stderr) readOutput()
    else if (child.stdioPending) child.once('spawn', readOutput)
    else return

    child.writeInput(options.input, () => {
      inputWritten = true
      if (child.pid !== undefined && liveCalls.get(child.pid) === marker) feeding.delete(child.pid)
    })

    child.on('exit', () => {
      // stdio normally closes right after exit. If a grandchild holds it open, kill the group;
      // if it is still open after that (a descendant that left the process group with setsid
      // holds it), stop reading: the function itself has ended, and the call must not wait for
      // a process it cannot kill.
      graceTimer = setTimeout(() => {
        killGroup(child.pid)
        swept()
        graceTimer = setTimeout(() => {
          child.stdout?.destroy()
          child.stderr?.destroy()
        }, STDIO_GRACE_MS)
      }, STDIO_GRACE_MS)
    })

    child.on('close', (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return
      settled = true
      cleanup()
      if (!sweepAtClose({ending, leftNothing: child.leftNothing, sweepRequested})) {
        // The group's id is not killed either: its leader is reaped, so the id may be a new process's.
        forget()
        sweeper.skipped++
      } else {
        killGroup(child.pid)
        swept()
      }
      const label = JSON.stringify(options.label)
      if (ending === 'deadline') {
        reject(new FnrError('DeadlineExceeded', `function ${label} did not finish before the deadline and was killed`, {details: {stderr: stderr.toBuffer()}}))
        return
      }
      if (ending === 'cancelled') {
        reject(new FnrError('Cancelled', `function ${label} was cancelled by the caller and killed`))
        return
      }
      if (ending === 'stdout-limit') {
        reject(
          new FnrError(
            'ResourceExhausted',
            `function ${label} wrote more than ${options.maxStdoutBytes} bytes to stdout (the maximum message size) and was killed`,
          ),
        )
        return
      }
      const stderrBytes = stderr.toBuffer()
      const result = (): FunctionProcessResult => ({
        stdout: joinWithHeadroom(stdoutChunks, stdoutSize, headroomFor(options.stdoutHeadroom, stderrBytes.length)),
        stderr: stderrBytes,
        exitCode: code,
        signal,
        stderrTruncated: stderr.dropped > 0,
        stderrDropped: stderr.dropped,
        durationMs: performance.now() - started,
      })
      // A large output is joined in a turn of its own: functions that end together must not
      // copy all their outputs in one go (turns.ts).
      if (stdoutChunks.length > 1 && stdoutSize > LARGE_OUTPUT_BYTES) void nextTurn().then(() => resolve(result()))
      else resolve(result())
    })
  })
}
