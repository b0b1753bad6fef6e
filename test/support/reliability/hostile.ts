/**
 * Hostile and heavy clients for the memory-limit suite (test/reliability/memory-limit.test.ts)
 * and bench/limits.ts: a slowloris over raw HTTP/2, sockets that never speak, a health-check
 * prober that measures how long the server takes to answer while under attack. Every client
 * talks to loopback only and is closed by the caller.
 */
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import http2 from 'node:http2'
import net from 'node:net'
import path from 'node:path'

import {atNormalPriority} from './cgroup.js'

const EVALUATE_PATH = '/evaluator.FunctionEvaluator/EvaluateFunction'

export interface Slowloris {
  /** Streams the server reset (RST_STREAM) or closed. */
  reset(): number
  /** Streams still open. */
  open(): number
  close(): Promise<void>
}

/**
 * Opens `streams` streams on one HTTP/2 connection, each declaring a gRPC message of `declared`
 * bytes and sending only `sent` of them, never ending. One buffer is shared by every stream.
 */
export async function slowloris(host: string, port: number, streams: number, declared: number, sent: number): Promise<Slowloris> {
  const session = http2.connect(`http://${host.includes(':') ? `[${host}]` : host}:${port}`, {settings: {initialWindowSize: 65_535}, peerMaxConcurrentStreams: streams})
  session.on('error', () => {})
  await once(session, 'connect')
  const header = Buffer.alloc(5)
  header.writeUInt32BE(declared, 1)
  const body = Buffer.alloc(sent, 0x61)
  let reset = 0
  let open = 0
  for (let i = 0; i < streams; i++) {
    const s = session.request({':method': 'POST', ':path': EVALUATE_PATH, 'content-type': 'application/grpc', te: 'trailers'}, {endStream: false})
    open++
    s.on('error', () => {})
    s.on('close', () => {
      open--
      reset++
    })
    s.on('data', () => {})
    s.write(header)
    s.write(body)
  }
  return {
    reset: () => reset,
    open: () => open,
    close: async () => {
      session.destroy()
      if (!session.closed) await once(session, 'close').catch(() => {})
    },
  }
}

export interface IdleSockets {
  /** Sockets the server closed. */
  closedByServer(): number
  opened: number
  close(): void
}

/** Opens `count` TCP connections that never send anything (no HTTP/2 preface). */
export async function idleSockets(host: string, port: number, count: number): Promise<IdleSockets> {
  const sockets: net.Socket[] = []
  let closed = 0
  let opened = 0
  const batch = 250
  for (let i = 0; i < count; i += batch) {
    await Promise.all(
      Array.from({length: Math.min(batch, count - i)}, async () => {
        const s = net.connect({host, port})
        s.on('error', () => {})
        s.on('data', () => {})
        s.on('close', () => closed++)
        sockets.push(s)
        try {
          await once(s, 'connect')
          opened++
        } catch {
          // refused: counted by opened
        }
      }),
    )
  }
  return {closedByServer: () => closed, opened, close: () => sockets.forEach((s) => s.destroy())}
}

export interface ProbeResult {
  /** Longest health-check round trip (ms), its 99th percentile, how many probes ran and failed. */
  maxMs: number
  p99: number
  probes: number
  failures: number
  /**
   * The server's own stall (ms): over every probe, the least of its round trip and the CPU time
   * the server's event-loop thread spent while it waited; the largest of those. A round trip
   * stretched by a busy machine (the thread waiting for a core) does not count, the server's own
   * work holding the loop does.
   */
  stallMs: number
  /** The probe behind stallMs: its round trip and the server thread's CPU time meanwhile (ms). */
  worst: {wallMs: number; cpuMs: number}
}

export interface Prober {
  stop(): Promise<ProbeResult>
}

/**
 * Sends grpc.health.v1.Health/Check on its own connection every `everyMs` from a process of its
 * own (stall-prober.mjs), so the test's own load does not delay it, and reads the CPU time of the
 * server's event-loop thread (`serverPid`) meanwhile.
 */
export function probeHealth(address: string, serverPid: number, everyMs = 50): Prober {
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'stall-prober.mjs'), address, String(serverPid), String(everyMs)], {stdio: ['pipe', 'pipe', 'inherit']})
  atNormalPriority(child.pid)
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  const exited = once(child, 'exit')
  return {
    stop: async () => {
      child.stdin.end()
      await exited
      const {probes, failures} = JSON.parse(out) as {probes: {wallMs: number; cpuMs?: number}[]; failures: number}
      const walls = probes.map((p) => p.wallMs).sort((a, b) => a - b)
      let worst = {wallMs: 0, cpuMs: 0}
      let stallMs = 0
      for (const p of probes) {
        // No CPU reading (the server is gone): the round trip counts whole.
        const own = Math.min(p.wallMs, p.cpuMs ?? p.wallMs)
        if (own >= stallMs) {
          stallMs = own
          worst = {wallMs: Math.round(p.wallMs), cpuMs: Math.round(p.cpuMs ?? p.wallMs)}
        }
      }
      return {
        maxMs: Math.round(walls.at(-1) ?? 0),
        p99: Math.round(walls[Math.floor(walls.length * 0.99)] ?? 0),
        probes: probes.length,
        failures,
        stallMs: Math.round(stallMs),
        worst,
      }
    },
  }
}

/** Makes a valid ResourceList of about `bytes` bytes (one ConfigMap with a large data value). */
export function bigResourceList(bytes: number, tag = ''): Buffer {
  const head = `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: big${tag}\n  data:\n    v: "`
  const tail = '"\n'
  return Buffer.concat([Buffer.from(head), Buffer.alloc(Math.max(0, bytes - head.length - tail.length), 0x78), Buffer.from(tail)])
}

export interface StallControl {
  /** The longest timer delay the control process saw (ms). */
  stop(): Promise<number>
}

/**
 * An idle Node process that measures its own event-loop delay (a 10 ms timer's lateness): what a
 * busy machine alone does to any process's event loop, the margin a stall of the server under test
 * is judged against.
 */
export async function startStallControl(): Promise<StallControl> {
  const {spawn} = await import('node:child_process')
  const script = `let max = 0, last = performance.now();
const t = setInterval(() => { const now = performance.now(); max = Math.max(max, now - last - 10); last = now }, 10);
process.stdin.on('end', () => { clearInterval(t); process.stdout.write(String(Math.round(max))) }); process.stdin.resume()`
  const child = spawn(process.execPath, ['-e', script], {stdio: ['pipe', 'pipe', 'ignore']})
  atNormalPriority(child.pid)
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  const exited = once(child, 'exit')
  return {
    stop: async () => {
      child.stdin.end()
      await exited
      return Number(out) || 0
    },
  }
}
