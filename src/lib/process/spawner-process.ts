/**
 * The spawner process: a small Node process that starts function processes for `fnr serve` and the
 * wrapper server (spawner.ts is the runner's side; docs/process.md says why).
 *
 * Starting a child from Node forks the whole process on the event loop's thread; in a runner
 * holding hundreds of MiB that fork takes tens of milliseconds, and thousands of them stall every
 * other call. This process holds almost nothing, so its forks are cheap, and they happen off the
 * runner's event loop.
 *
 * Protocol (the runner forks this process with an IPC channel):
 * - at start it listens on an abstract Unix socket named in FNR_SPAWNER_SOCKET and sends `ready`;
 * - for a call, the runner connects three sockets to it and writes on each a 16-byte token and one
 *   byte saying which descriptor it becomes (0 stdin, 1 stdout, 2 stderr), nothing more, and sends
 *   `spawn` with the same token over IPC (the two may arrive in either order);
 * - with the request and its three sockets, this process starts the function with the sockets as
 *   its stdio, closes its own copies and sends `spawned` (or `failed`); the runner writes the input
 *   only after `spawned`, so none of it is read here;
 * - when the function exits it sends `exit` with its code and signal.
 * When the IPC channel closes (the runner exited, or was killed) this process kills the process
 * groups of the functions still running and exits: no function outlives a runner that can no
 * longer end its call (a runner killed with SIGKILL used to leave them running).
 *
 * It imports nothing of fnr, to stay small.
 */
import {spawn} from 'node:child_process'
import net from 'node:net'

export const SPAWNER_SOCKET_ENV = 'FNR_SPAWNER_SOCKET'
/** Set in the environment of a packaged wrapper-server (a single executable) that must run as the spawner. */
export const SPAWNER_MODE_ENV = 'FNR_PROCESS_SPAWNER'
export const TOKEN_BYTES = 16
export const HEADER_BYTES = TOKEN_BYTES + 1
/** How long a request waits for its sockets, or sockets for their request. */
export const PAIRING_TIMEOUT_MS = 10_000

export interface SpawnRequest {
  t: 'spawn'
  id: number
  token: string
  command: string
  args: string[]
  env: Record<string, string>
  cwd?: string
}

export type SpawnerMessage =
  | {t: 'ready'}
  | {t: 'spawned'; id: number; pid: number}
  | {t: 'failed'; id: number; code?: string; message: string}
  | {t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null}

interface Pending {
  request?: SpawnRequest
  sockets: (net.Socket | undefined)[]
  timer: NodeJS.Timeout
}

/** A request and its three sockets, paired by token, in whichever order they come. */
class Pairing {
  private readonly pending = new Map<string, Pending>()

  constructor(
    private readonly start: (request: SpawnRequest, sockets: net.Socket[]) => void,
    private readonly send: (message: SpawnerMessage) => void,
  ) {}

  request(request: SpawnRequest): void {
    this.entry(request.token).request = request
    this.maybeStart(request.token)
  }

  /** A socket whose header is read: false when its place is taken (the caller closes it). */
  socket(token: string, index: number, socket: net.Socket): boolean {
    const p = this.entry(token)
    if (p.sockets[index]) return false
    p.sockets[index] = socket
    this.maybeStart(token)
    return true
  }

  private entry(token: string): Pending {
    let p = this.pending.get(token)
    if (!p) {
      p = {sockets: [undefined, undefined, undefined], timer: setTimeout(() => this.expire(token), PAIRING_TIMEOUT_MS)}
      this.pending.set(token, p)
    }
    return p
  }

  private expire(token: string): void {
    const p = this.pending.get(token)
    if (!p) return
    this.pending.delete(token)
    for (const s of p.sockets) s?.destroy()
    if (p.request) this.send({t: 'failed', id: p.request.id, code: 'ETIMEDOUT', message: `the function's stdio did not reach the spawner within ${PAIRING_TIMEOUT_MS} ms`})
  }

  private maybeStart(token: string): void {
    const p = this.pending.get(token)
    if (!p?.request || p.sockets.some((s) => s === undefined)) return
    this.pending.delete(token)
    clearTimeout(p.timer)
    this.start(p.request, p.sockets as net.Socket[])
  }
}

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

/** Starts a function with the sockets as its stdio and reports on it. */
function startFunction(request: SpawnRequest, sockets: net.Socket[], send: (message: SpawnerMessage) => void): void {
  let child: ReturnType<typeof spawn>
  try {
    child = spawn(request.command, request.args, {stdio: sockets, env: request.env, cwd: request.cwd, detached: true})
  } catch (err) {
    for (const s of sockets) s.destroy()
    const e = err as NodeJS.ErrnoException
    send({t: 'failed', id: request.id, code: e.code, message: e.message})
    return
  }
  // The function has its own copies of the descriptors now; closing ours does not end them.
  for (const s of sockets) s.destroy()
  let spawned = false
  child.on('error', (err: NodeJS.ErrnoException) => {
    if (!spawned) send({t: 'failed', id: request.id, code: err.code, message: err.message})
  })
  child.on('spawn', () => {
    spawned = true
    running.add(child.pid!)
    send({t: 'spawned', id: request.id, pid: child.pid!})
  })
  child.on('exit', (code, signal) => {
    running.delete(child.pid!)
    if (spawned) send({t: 'exit', id: request.id, code, signal})
  })
}

/** Reads a connection's header (token and descriptor index) and hands the socket to the pairing. */
function acceptSocket(socket: net.Socket, pairing: Pairing): void {
  socket.on('error', () => socket.destroy())
  const chunks: Buffer[] = []
  let size = 0
  const timer = setTimeout(() => socket.destroy(), PAIRING_TIMEOUT_MS)
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk)
    size += chunk.length
    if (size < HEADER_BYTES) return
    socket.removeListener('data', onData)
    socket.pause()
    clearTimeout(timer)
    const header = Buffer.concat(chunks, size)
    const index = header[TOKEN_BYTES]!
    // The runner writes the header and nothing else before `spawned`: more is not the runner.
    if (size !== HEADER_BYTES || index > 2 || !pairing.socket(header.subarray(0, TOKEN_BYTES).toString('hex'), index, socket)) socket.destroy()
  }
  socket.on('data', onData)
}

export function runSpawnerProcess(): void {
  const socketName = process.env[SPAWNER_SOCKET_ENV]
  if (!socketName || !process.send) {
    process.stderr.write('fnr spawner: started without its IPC channel or socket name; it is started by fnr serve and the wrapper server\n')
    process.exit(2)
  }
  // A runner that exited (or failed to start) closes the channel: then this process has no work.
  const send = (message: SpawnerMessage): void => {
    if (!process.connected) exitWithFunctions(0)
    process.send!(message, undefined, {}, (err) => {
      if (err) exitWithFunctions(0)
    })
  }
  const pairing = new Pairing((request, sockets) => startFunction(request, sockets, send), send)
  const server = net.createServer((socket) => acceptSocket(socket, pairing))
  server.on('error', (err) => {
    process.stderr.write(`fnr spawner: ${err.message}\n`)
    exitWithFunctions(1)
  })
  process.on('message', (message: SpawnRequest) => {
    if (message?.t === 'spawn') pairing.request(message)
  })
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
  // The name is that of an abstract socket (Linux): no file.
  server.listen({path: `\0${socketName}`, backlog: 1024}, () => send({t: 'ready'}))
}
