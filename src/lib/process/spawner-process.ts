/**
 * The spawner process: a small Node process that starts function processes for `fnr serve` and the
 * wrapper server (spawner.ts is the runner's side; docs/process.md says why).
 *
 * Starting a child from Node forks the whole process on the event loop's thread; in a runner
 * holding hundreds of MiB that fork takes tens of milliseconds, and thousands of them stall every
 * other call. This process holds almost nothing, so its forks are cheap, and they happen off the
 * runner's event loop.
 *
 * Protocol: the runner starts this process with a pipe as its stdin and an IPC channel (a Unix
 * socketpair it inherits at start; nothing listens, so no other process can reach either):
 * - at start this process sends `ready` on the channel;
 * - for a call the runner writes `spawn` (command, arguments, environment, working directory) on
 *   this process's stdin, one JSON line, as to the native helper (native/fnr-spawn.c);
 * - this process starts the function with three new socketpairs as its stdio, sends `spawned`
 *   (its pid), then its own end of each pair, one `stdio` message each, with the descriptor
 *   attached (SCM_RIGHTS, Node's handle passing), and closes its copies once the runner has them.
 *   It never reads from them: the function's input and output flow between the runner and the
 *   function directly. (`failed` instead when it cannot be started.)
 * - when the function exits it sends `exit` with its code and signal.
 * When the IPC channel or stdin closes (the runner exited, or was killed) this process kills the
 * process groups of the functions still running and exits: no function outlives a runner that can
 * no longer end its call (a runner killed with SIGKILL used to leave them running).
 *
 * It imports nothing of fnr, to stay small.
 */
import {spawn} from 'node:child_process'
import type {Socket} from 'node:net'

/**
 * Set in the environment of the spawner process: a packaged wrapper-server (a single executable)
 * runs as the spawner when it sees it, and it tells the spawner from a function in `ps`/`/proc`.
 */
export const SPAWNER_MODE_ENV = 'FNR_PROCESS_SPAWNER'

/** What to start (the runner's side: spawner.ts, native-spawner.ts). */
export interface LaunchSpec {
  command: string
  args: readonly string[]
  env: NodeJS.ProcessEnv
  cwd?: string
  /** The input's size when the call knows it: the native helper gives a large input larger pipes (native-spawner.ts). */
  inputBytes?: number
}

export interface SpawnRequest {
  t: 'spawn'
  id: number
  command: string
  args: string[]
  env: Record<string, string>
  cwd?: string
}

export type SpawnerMessage =
  | {t: 'ready'}
  | {t: 'spawned'; id: number; pid: number}
  /** Carries the runner's end of the function's descriptor `fd` (0 stdin, 1 stdout, 2 stderr). */
  | {t: 'stdio'; id: number; fd: 0 | 1 | 2}
  /** `code` is the errno name; the failure happened in this process (its descriptors, its processes). */
  | {t: 'failed'; id: number; code?: string; message: string}
  /**
   * `orphans` (the native helper only, a child subreaper): how many processes it had as children,
   * besides running functions, when this one was reaped (-1: it could not tell). 0 means the
   * function left no process alive anywhere (docs/process.md "Function processes never outlive
   * their call").
   */
  | {t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null; orphans?: number}

/** Process groups of the functions started and not yet exited (each function leads its own). */
const running = new Set<number>()

/**
 * Exits, first killing every function still running: the runner that would have ended their calls
 * is gone (it exited, or was killed), and a function must not outlive its call.
 */
function exitWithFunctions(code: number): never {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  process.exit(code)
}

type Send = (message: SpawnerMessage, handle?: Socket) => void

/** Starts a function with new socketpairs as its stdio and hands the runner its ends of them. */
function startFunction(request: SpawnRequest, send: Send): void {
  let child: ReturnType<typeof spawn>
  try {
    child = spawn(request.command, request.args, {stdio: ['pipe', 'pipe', 'pipe'], env: request.env, cwd: request.cwd, detached: true})
  } catch (err) {
    const e = err as NodeJS.ErrnoException
    send({t: 'failed', id: request.id, code: e.code, message: e.message})
    return
  }
  const stdio = [child.stdin, child.stdout, child.stderr] as (Socket | null)[]
  // Node starts reading a child's stdout and stderr at once; stop that in this same turn of the
  // event loop, before anything can be read: every byte the function writes is the runner's.
  for (const socket of stdio) {
    const handle = (socket as unknown as {_handle?: {readStop(): number; reading: boolean} | null} | null)?._handle
    if (handle) {
      handle.reading = false
      handle.readStop()
    }
  }
  let spawned = false
  child.on('error', (err: NodeJS.ErrnoException) => {
    if (spawned) return
    for (const socket of stdio) socket?.destroy()
    send({t: 'failed', id: request.id, code: err.code, message: err.message})
  })
  child.on('spawn', () => {
    spawned = true
    running.add(child.pid!)
    send({t: 'spawned', id: request.id, pid: child.pid!})
    // Node closes this process's copy of each once the runner acknowledged it.
    stdio.forEach((socket, fd) => send({t: 'stdio', id: request.id, fd: fd as 0 | 1 | 2}, socket!))
  })
  child.on('exit', (code, signal) => {
    running.delete(child.pid!)
    if (spawned) send({t: 'exit', id: request.id, code, signal})
  })
}

export function runSpawnerProcess(): void {
  if (!process.send) {
    process.stderr.write('fnr spawner: started without its IPC channel; it is started by fnr serve and the wrapper server\n')
    process.exit(2)
  }
  // A runner that exited (or failed to start) closes the channel: then this process has no work.
  const send: Send = (message, handle) => {
    if (!process.connected) exitWithFunctions(0)
    process.send!(message, handle, {}, (err) => {
      if (err) exitWithFunctions(0)
    })
  }
  // Requests: one JSON line each on stdin. What comes on the channel is not a request.
  let pending = ''
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', (chunk: string) => {
    pending += chunk
    for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      let message: SpawnRequest | undefined
      try {
        message = JSON.parse(line) as SpawnRequest
      } catch {
        continue
      }
      if (message?.t === 'spawn') startFunction(message, send)
    }
  })
  process.stdin.on('end', () => exitWithFunctions(0))
  process.stdin.on('error', () => exitWithFunctions(0))
  process.on('disconnect', () => exitWithFunctions(0))
  // And if the channel's end is missed (the runner exited while this process started), being
  // re-parented says the same.
  const parent = process.ppid
  setInterval(() => {
    if (process.ppid !== parent || !process.connected) exitWithFunctions(0)
  }, 1000).unref()
  // Signals meant for the runner's process group (a terminal's ^C, a supervisor's TERM) are the
  // runner's to handle: it drains its calls, which need this process until they end.
  process.on('SIGINT', () => {})
  process.on('SIGTERM', () => {})
  // SIGUSR1 would open Node's inspector where the runner could not start this process with
  // --disable-sigusr1 (a listener stops Node from starting it; docs/process.md "No debugger by signal").
  process.on('SIGUSR1', () => {})
  send({t: 'ready'})
}
