/**
 * How function processes are started: directly with child_process.spawn (one-shot commands such as
 * `fnr eval`), or through the spawner process (spawner-process.ts) in long-running servers
 * (`fnr serve`'s exec runtime and the wrapper server).
 *
 * Why a spawner: Node starts a child by forking the whole runner on the event loop's thread. The
 * fork copies the runner's page tables, so its cost grows with the runner's memory: ~3 ms at
 * 45 MiB, ~40 ms at 450 MiB, and under a flood of calls those forks add up to stalls of seconds
 * for every other call (docs/process.md). The spawner is a small Node process that does the forks.
 * The runner reaches it only through the IPC channel it starts it with (a socketpair inherited at
 * start; nothing listens): per call it sends one request, and the spawner hands back the runner's
 * ends of the function's stdin, stdout and stderr (descriptor passing), so the data flows between
 * the runner and the function directly, as before.
 *
 * Each launcher (process/launcher.ts, one per server) has its spawner, started when the server
 * starts (serverLaunchMode) or at its first call; calls made before it is ready start directly. If it
 * cannot be started, or dies three times in a row without a call getting through, the runner
 * keeps starting functions directly and logs why. Calls running when it dies fail UNAVAILABLE.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {EventEmitter} from 'node:events'
import {existsSync} from 'node:fs'
import {createRequire} from 'node:module'
import type {Socket} from 'node:net'
import path from 'node:path'
import type {Readable} from 'node:stream'
import {fileURLToPath} from 'node:url'

import {FnrError} from '../errors.js'
import {nativeHelperPath} from './native-spawner.js'
import {SPAWNER_MODE_ENV, type LaunchSpec, type SpawnRequest, type SpawnerMessage} from './spawner-process.js'

export type {LaunchSpec} from './spawner-process.js'

/**
 * A started function process, however it was started. Events, as node's ChildProcess: 'spawn'
 * (pid known), 'error' (it could not be started, or the spawner died while it ran), 'exit'
 * (code, signal) and 'close' (code, signal; after 'exit' and once stdout and stderr closed).
 */
export interface FunctionChild extends EventEmitter {
  readonly pid: number | undefined
  /** Undefined when the process could not be given stdio (EMFILE), in which case 'error' follows, or while stdioPending. */
  readonly stdout: Readable | null | undefined
  readonly stderr: Readable | null | undefined
  /** True while the streams are on their way (started through the spawner): they are there at 'spawn'. */
  readonly stdioPending?: boolean
  /**
   * Writes the whole input to stdin and closes it (a process that does not read it is no error).
   * `written` is called once the function has it all (the pipe took its last byte), or it can no
   * longer take it (it exited, or closed its stdin).
   */
  writeInput(input: Uint8Array, written?: () => void): void
  /**
   * True once it exited when the spawner knows it left no process alive: the native helper is a
   * child subreaper and counted no orphan at its exit (run.ts then skips the /proc sweep).
   * Undefined when nobody can tell (started directly or by the Node spawner): sweep.
   */
  readonly leftNothing?: boolean
}

/**
 * 'direct': the runner forks; 'spawner': through the Node spawner; 'native': through the native
 * spawn helper (native-spawner.ts), and through the Node spawner once the helper is given up
 * (process/launcher.ts ProcessLauncher starts functions the way its mode says).
 */
export type LaunchMode = 'direct' | 'spawner' | 'native'

/** Starts a function process from the runner itself (child_process.spawn), in a process group of its own. */
export function launchDirect(spec: LaunchSpec): FunctionChild {
  const child = spawn(spec.command, spec.args, {stdio: ['pipe', 'pipe', 'pipe'], env: spec.env, cwd: spec.cwd, detached: true, windowsHide: true})
  return Object.assign(child, {
    writeInput(input: Uint8Array, written?: () => void): void {
      // A function may exit without reading its input: EPIPE on stdin is not an error.
      if (!child.stdin) {
        written?.()
        return
      }
      child.stdin.on('error', () => written?.())
      child.stdin.end(input, () => written?.())
    },
  }) as ChildProcess & FunctionChild
}

/** How the runner starts its spawner: its own executable re-run in spawner mode, or the entry module. */
function spawnerCommand(): {execPath: string; args: string[]; env: NodeJS.ProcessEnv} {
  // A single executable (the packaged wrapper-server) has no module files: it runs itself with the
  // mode variable set, and its main runs the spawner (src/bin/wrapper-server.ts).
  // Run through its dynamic loader (`ld-linux… wrapper-server-sea`, as the tests do outside a
  // container), execPath is the loader and argv0 the executable.
  if (isSingleExecutable()) {
    const viaLoader = /^ld-.*\.so/.test(path.basename(process.execPath))
    return {execPath: process.execPath, args: viaLoader ? [process.argv0] : [], env: {[SPAWNER_MODE_ENV]: '1'}}
  }
  const entry = fileURLToPath(new URL('./spawner-entry.js', import.meta.url))
  // No debugger by signal (docs/process.md): Node 22.14 and later take --disable-sigusr1.
  const noDebugSignal = process.allowedNodeEnvironmentFlags.has('--disable-sigusr1') ? ['--disable-sigusr1'] : []
  if (existsSync(entry)) return {execPath: process.execPath, args: [...noDebugSignal, entry], env: {[SPAWNER_MODE_ENV]: '1'}}
  // Run from sources (tsx): the .ts module, with the runner's module loader flags (only those: a
  // runner started with -e would otherwise run its script again).
  return {execPath: process.execPath, args: [...noDebugSignal, ...loaderFlags(process.execArgv), entry.replace(/\.js$/, '.ts')], env: {[SPAWNER_MODE_ENV]: '1'}}
}

/** The module loader flags among node's flags (`--import tsx`, `--import=tsx`, `--loader …`, `--require …`). */
export function loaderFlags(execArgv: readonly string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < execArgv.length; i++) {
    const a = execArgv[i]!
    const name = /^(--import|--require|-r|--loader|--experimental-loader)(=|$)/.exec(a)
    if (!name) continue
    if (name[2] === '=') out.push(a)
    else if (i + 1 < execArgv.length) out.push(a, execArgv[++i]!)
  }
  return out
}

function isSingleExecutable(): boolean {
  try {
    const sea = createRequire(process.execPath)('node:sea') as {isSea?: () => boolean}
    return sea.isSea?.() === true
  } catch {
    return false
  }
}

/**
 * How long the runner waits for a started function's three descriptors after the spawner said it
 * started. They come right behind that message; one that does not (the runner could not take a
 * descriptor in, being out of them itself) must not leave the call waiting without end.
 */
export const STDIO_ARRIVAL_TIMEOUT_MS = 10_000

/** A function started through the spawner. */
class SpawnedFunction extends EventEmitter implements FunctionChild {
  pid: number | undefined
  /** The runner's ends of the function's stdio, as the spawner hands them over. */
  stdin: Socket | undefined
  stdout: Socket | undefined
  stderr: Socket | undefined
  /** stdin's message came: with the descriptor (stdin), or without it (the function had exited). */
  private stdinArrived = false
  private input: Uint8Array | undefined
  private written: (() => void) | undefined
  private spawned = false
  private ended = false
  private exit: {code: number | null; signal: NodeJS.Signals | null} | undefined
  private open = 2
  leftNothing: boolean | undefined
  private timer: NodeJS.Timeout | undefined

  /**
   * `pipes`: its stdio are pipes (the native helper's), not socketpairs (the Node spawner's). A pipe
   * has no half-close: the function sees the end of its input only when the runner's end is
   * closed, so that end is destroyed once the input is written.
   */
  constructor(
    readonly id: number,
    private readonly pipes = false,
  ) {
    super()
  }

  get stdioPending(): boolean {
    return !this.spawned && !this.ended
  }

  writeInput(input: Uint8Array, written?: () => void): void {
    this.written = written
    if (this.spawned) this.endInput(input)
    else this.input = input
  }

  /** The input is all in the pipe, or cannot go there any more: tells writeInput's caller, once. */
  private inputDone(): void {
    const written = this.written
    this.written = undefined
    written?.()
  }

  private endInput(input: Uint8Array): void {
    const stdin = this.stdin
    if (!stdin) {
      this.inputDone()
      return
    }
    if (!this.pipes) {
      stdin.end(input, () => this.inputDone())
      return
    }
    // A pipe's end closes as soon as the input is written, in the write's own callback: end()
    // would first ask for a shutdown, which a pipe does not have and which takes the event loop
    // another turn, and a function that has read its input meanwhile waits for the end of it
    // (asleep to the call budget, which lends its slot).
    stdin.write(input, () => {
      stdin.destroy()
      this.inputDone()
    })
  }

  /** The spawner started it; its descriptors follow. */
  started(pid: number): void {
    if (this.ended) return
    this.pid = pid
    this.timer = setTimeout(
      () => this.failed(new FnrError('Unavailable', `the function's stdio did not arrive from the runner's process spawner within ${STDIO_ARRIVAL_TIMEOUT_MS} ms (the runner may be out of file descriptors); retry the call`)),
      STDIO_ARRIVAL_TIMEOUT_MS,
    )
    this.timer.unref()
  }

  /**
   * One of its descriptors arrived (the runner's end of the pipe or socketpair), or its message came
   * without it (`socket` undefined): the spawner hands descriptors over one at a time, and Node
   * closes a child's stdin the moment the child exits, so a function that ended quickly (or was
   * killed at once, a cancelled call) has no stdin left to send. Its input has nowhere to go; the
   * call goes on with its output. stdout and stderr stay open until read, so a missing one is the
   * spawner's fault and fails the call.
   */
  received(fd: 0 | 1 | 2, socket: Socket | undefined): void {
    if (this.ended || this.pid === undefined || [this.stdinArrived, this.stdout, this.stderr][fd]) {
      socket?.destroy()
      return
    }
    if (!socket) {
      if (fd === 0) this.stdinArrived = true
      else this.failed(new FnrError('Unavailable', `the function's ${fd === 1 ? 'stdout' : 'stderr'} was closed in the runner's process spawner before it was handed over; retry the call`))
      if (fd === 0) this.maybeSpawned()
      return
    }
    socket.on('error', () => {
      // stdin's EPIPE (a function that does not read its input) or a reset ends that stream only.
    })
    if (fd === 0) {
      this.stdin = socket
      this.stdinArrived = true
      // Nothing comes from the function's stdin; what a function writes there is dropped (a
      // socketpair's; a pipe's write end has nothing to read, and reading it fails only once the
      // function closed its end, an error dropped above like EPIPE).
      socket.resume()
    } else {
      if (fd === 1) this.stdout = socket
      else this.stderr = socket
      socket.once('close', () => {
        this.open--
        this.maybeClose()
      })
    }
    this.maybeSpawned()
  }

  /** All three descriptors are in (stdin perhaps already closed): the function's streams are the runner's. */
  private maybeSpawned(): void {
    if (!this.stdinArrived || !this.stdout || !this.stderr) return
    clearTimeout(this.timer)
    this.spawned = true
    this.emit('spawn')
    if (this.input) {
      this.endInput(this.input)
      this.input = undefined
    }
    this.maybeClose()
  }

  /** It exited; `orphans`: the native helper's count of other children at that moment (spawner-process.ts). */
  exited(code: number | null, signal: NodeJS.Signals | null, orphans?: number): void {
    if (this.ended || this.exit) return
    if (this.pid !== undefined && !this.spawned) {
      // A spawner sends a function's descriptors before its exit: those missing were lost on the
      // way (Node drops a descriptor message it cannot take in, the runner being out of
      // descriptors) and will not come.
      this.failed(new FnrError('Unavailable', `the function's stdio was lost on its way from the runner's process spawner (the runner may be out of file descriptors); retry the call`))
      return
    }
    this.exit = {code, signal}
    this.leftNothing = orphans === 0
    this.emit('exit', code, signal)
    this.maybeClose()
  }

  failed(err: Error): void {
    if (this.ended) return
    this.ended = true
    clearTimeout(this.timer)
    this.inputDone()
    for (const socket of [this.stdin, this.stdout, this.stderr]) socket?.destroy()
    this.emit('error', err)
  }

  private maybeClose(): void {
    if (this.ended || !this.spawned || !this.exit || this.open > 0) return
    this.ended = true
    this.stdin?.destroy()
    this.inputDone()
    this.emit('close', this.exit.code, this.exit.signal)
  }
}

/**
 * Calls being started through the spawner at once; more wait in the runner. Node hands descriptors
 * over one at a time (each waits for the other side's acknowledgement), so a started function's
 * descriptors wait in the spawner meanwhile: this bounds how many it holds (3 each).
 */
const MAX_STARTING = 128

/** How a spawner process is started (spawnerCommand, or another for tests). */
export type SpawnerCommand = () => {execPath: string; args: string[]; env: NodeJS.ProcessEnv}

/** A spawner's request for a call: the Node spawner's SpawnRequest, or the native helper's (nativeRequest). May throw (a NUL byte). */
export type SpawnRequestEncoder = (id: number, spec: LaunchSpec) => object

function nodeRequest(id: number, spec: LaunchSpec): SpawnRequest {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(spec.env)) if (v !== undefined) env[k] = v
  return {t: 'spawn', id, command: spec.command, args: [...spec.args], env, cwd: spec.cwd}
}

/** A runner's spawner process: started at the first call, restarted when it dies. */
export class ProcessSpawner {
  private child: ChildProcess | undefined
  private ready = false
  /** Resolved when the spawner is ready or given up (whenReady). */
  private readyWaiters: (() => void)[] = []
  /** Calls sent to the spawner whose function has not started yet, or whose descriptors are on their way (at most MAX_STARTING). */
  private starting = 0
  /** Calls waiting for one of those places. */
  private waiting: {fn: SpawnedFunction; request: object}[] = []
  /** Calls sent to the spawner, until they close or fail. */
  private calls = new Map<number, SpawnedFunction>()
  private nextId = 1
  /** Spawner starts that ended without any call getting through; at 3 the runner spawns directly. */
  private failedStarts = 0
  private disabledBecause: string | undefined
  /** Told once when the spawner is given up (the servers pass their logger's warn). */
  onDisabled: ((why: string) => void) | undefined

  /**
   * `fallback`: how functions start once this spawner is given up, for the message saying so.
   * `encode`: the request a call sends (the Node spawner's by default). `pipes`: the spawner hands
   * over pipes (the native helper), not socketpairs. Requests go to the spawner's stdin, one JSON
   * line each, and answers come on the IPC channel: the native helper then never wakes for Node's
   * acknowledgements of the descriptors it sends (native/fnr-spawn.c).
   */
  constructor(
    private readonly command: SpawnerCommand = spawnerCommand,
    private readonly options: {encode?: SpawnRequestEncoder; fallback?: string; pipes?: boolean} = {},
  ) {}

  usable(): boolean {
    return this.disabledBecause === undefined
  }

  /** The spawner's pid, once it runs (for tests and diagnostics). */
  pid(): number | undefined {
    return this.child?.pid
  }

  /** Starts the spawner ahead of the first call (a server at start-up), so that call does not wait for it. */
  warm(): void {
    if (this.usable()) this.ensureChild()
  }

  /**
   * Resolves once the spawner takes calls (true), or when it is given up or `timeoutMs` passed
   * first (false). Starts it. A launcher's calls made before it is ready wait for it this way
   * (launcher.ts), so every function starts the same way.
   */
  async whenReady(timeoutMs: number): Promise<boolean> {
    if (!this.usable()) return false
    this.ensureChild()
    if (this.ready) return true
    let timer: NodeJS.Timeout | undefined
    await new Promise<void>((resolve) => {
      this.readyWaiters.push(resolve)
      timer = setTimeout(resolve, timeoutMs)
    })
    clearTimeout(timer)
    return this.ready && this.usable()
  }

  private wakeReadyWaiters(): void {
    const waiters = this.readyWaiters
    this.readyWaiters = []
    for (const wake of waiters) wake()
  }

  /** Starts a function through the spawner; undefined while it is not ready (the caller starts it directly). */
  launch(spec: LaunchSpec): FunctionChild | undefined {
    if (!this.usable()) return undefined
    if (!this.ready) {
      this.ensureChild()
      return undefined
    }
    const id = this.nextId++
    // Before anything is kept: a request that cannot be made (a NUL byte) throws to the caller, as spawn does.
    const request = (this.options.encode ?? nodeRequest)(id, spec)
    const fn = new SpawnedFunction(id, this.options.pipes)
    this.calls.set(fn.id, fn)
    this.holdLoop()
    const forget = (): void => {
      this.calls.delete(fn.id)
      this.holdLoop()
    }
    fn.once('close', forget)
    fn.once('error', forget)
    if (this.starting < MAX_STARTING) this.send(fn, request)
    else this.waiting.push({fn, request})
    return fn
  }

  /** The IPC channel keeps the runner's event loop alive only while calls wait on it. */
  private holdLoop(): void {
    if (this.calls.size > 0) this.child?.channel?.ref()
    else this.child?.channel?.unref()
  }

  private send(fn: SpawnedFunction, request: object): void {
    this.starting++
    let done = false
    const started = (): void => {
      if (done) return
      done = true
      this.starting--
      while (this.starting < MAX_STARTING && this.waiting.length > 0) {
        const next = this.waiting.shift()!
        if (this.calls.has(next.fn.id)) this.send(next.fn, next.request)
      }
    }
    fn.once('spawn', started)
    fn.once('error', started)
    this.child!.stdin!.write(`${JSON.stringify(request)}\n`)
  }

  private ensureChild(): void {
    if (this.child) return
    const how = this.command()
    let child: ChildProcess
    try {
      // The IPC channel is a socketpair the spawner inherits: the only way to it (no listening
      // socket, nothing another process can connect to).
      child = spawn(how.execPath, how.args, {
        stdio: ['pipe', 'inherit', 'inherit', 'ipc'],
        env: {PATH: process.env.PATH ?? '/usr/bin:/bin', ...how.env},
        serialization: 'json',
      })
    } catch (err) {
      this.disable(`the process spawner could not be started (${(err as Error).message}); functions are started ${this.fallback()}`)
      return
    }
    this.child = child
    this.ready = false
    // The spawner must not keep a runner (or a test) alive: calls in flight hold their sockets.
    child.unref()
    child.channel?.unref()
    // The request pipe: unreferenced too, and a spawner gone is told by its exit, not a write's EPIPE.
    const requests = child.stdin as Socket
    requests.unref()
    requests.on('error', () => {})
    child.on('message', (message: SpawnerMessage, handle?: unknown) => this.onMessage(message, handle as Socket | undefined))
    // 'error' at start: the executable cannot be run at all (ENOENT, EACCES), retrying will not help.
    child.on('error', (err) => {
      this.onChildGone(child, `could not be started: ${err.message}`)
      this.disable(`the process spawner could not be started (${err.message}); functions are started ${this.fallback()}`)
    })
    child.on('exit', (code, signal) => this.onChildGone(child, signal ? `was killed by ${signal}` : `exited with code ${code}`))
  }

  private onMessage(message: SpawnerMessage, handle: Socket | undefined): void {
    switch (message.t) {
      case 'ready': {
        this.ready = true
        this.wakeReadyWaiters()
        return
      }
      case 'spawned': {
        this.failedStarts = 0
        this.calls.get(message.id)?.started(message.pid)
        return
      }
      case 'stdio': {
        const fn = this.calls.get(message.id)
        if (fn) fn.received(message.fd, handle)
        else handle?.destroy()
        return
      }
      case 'failed': {
        // inSpawner: the spawner, not the runner, was out of descriptors or processes (run.ts says which).
        const err = Object.assign(new Error(message.message), {code: message.code, inSpawner: true}) as NodeJS.ErrnoException
        this.calls.get(message.id)?.failed(err)
        return
      }
      case 'exit': {
        this.calls.get(message.id)?.exited(message.code, message.signal, message.orphans)
      }
    }
  }

  private onChildGone(child: ChildProcess, why: string): void {
    if (this.child !== child) return
    this.child = undefined
    this.ready = false
    this.wakeReadyWaiters()
    this.starting = 0
    this.waiting = []
    const error = new FnrError('Unavailable', `the runner's process spawner ${why}; retry the call`)
    const calls = [...this.calls.values()]
    this.calls.clear()
    for (const fn of calls) fn.failed(error)
    this.failedStarts++
    if (this.failedStarts >= 3) this.disable(`the process spawner ${why}, 3 times in a row; functions are now started ${this.fallback()}`)
  }

  /**
   * Stops the spawner for good (its launcher is closed, after its server stopped): no call is sent
   * to it any more, and its process is killed. A call still waiting on it then fails as when a
   * spawner dies (onChildGone), so nothing waits for an answer that cannot come. The functions run
   * in groups of their own: the native helper's death kills those it holds, the launcher the rest.
   */
  close(): void {
    this.disabledBecause ??= 'closed'
    this.wakeReadyWaiters()
    const child = this.child
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }

  private fallback(): string {
    return this.options.fallback ?? 'directly by the runner'
  }

  private disable(why: string): void {
    if (this.disabledBecause) return
    this.disabledBecause = why
    this.wakeReadyWaiters()
    this.onDisabled?.(why)
  }
}

/**
 * A server's choice of how functions start (serverLaunchMode): `off`: directly (as `fnr eval`
 * does); `node`: through the Node spawner; `native`: through the native helper; `on`: through a
 * spawner whatever the memory limit (the helper when it is there).
 */
export const SPAWNER_SWITCH_ENV = 'FNR_SPAWNER'

/**
 * Below this memory limit a server without the native helper forks its functions itself. The Node
 * spawner adds ~16 MiB to the container's memory (the packaged wrapper in a 1 GiB cgroup: 99 ->
 * 116 MiB), which could push a function pod with a tight limit (a FunctionConfig's
 * templateOverrides may set one) over it; and a process that small forks in a few ms, so the
 * spawner would gain it little. The native helper holds about 1 MiB: it is used at any limit.
 */
export const SPAWNER_MIN_MEMORY = 256 * 1024 * 1024

/**
 * The launch mode of a long-running server's evaluators: FNR_SPAWNER if set; else the native
 * helper when it is built (`helper`, its path, null when it is not); else the Node spawner when the memory limit (the
 * container's, else the machine's) is at least SPAWNER_MIN_MEMORY.
 */
export function serverLaunchMode(memoryLimitBytes: number, env: NodeJS.ProcessEnv = process.env, helper: string | null = nativeHelperPath(env) ?? null): LaunchMode {
  switch (env[SPAWNER_SWITCH_ENV]) {
    case 'off':
      return 'direct'
    case 'node':
      return 'spawner'
    case 'native':
      return 'native'
    case 'on':
      return helper ? 'native' : 'spawner'
  }
  if (helper) return 'native'
  return memoryLimitBytes >= SPAWNER_MIN_MEMORY ? 'spawner' : 'direct'
}
