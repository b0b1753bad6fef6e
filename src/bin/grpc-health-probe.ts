/**
 * The runner image's /home/nonroot/grpc-health-probe (docker/porch/grpc-health-probe runs it):
 * Porch's function-runner Deployment probes readiness with
 * `/home/nonroot/grpc-health-probe -addr localhost:9445`, an exec probe with Kubernetes' default
 * timeout of 1 s. The wrapper's probe (bin/health-probe.ts) loads @grpc/grpc-js, which alone
 * took 0.6-1.2 s to start on a busy 2-core machine; this one speaks the one gRPC call it needs,
 * grpc.health.v1.Health/Check, over Node's built-in HTTP/2 (h2c), and starts in about the time of
 * a bare `node`.
 *
 * Flags and exit codes are grpc-health-probe's, as bin/health-probe.ts has them: -addr (required),
 * -service, -connect-timeout (1s), -rpc-timeout (1s), -v; 0 SERVING, 1 bad arguments,
 * 2 connection failure, 3 RPC failure, 4 not SERVING. "localhost" is dialled as 127.0.0.1 and,
 * when nothing answers there, as ::1.
 */
import http2 from 'node:http2'

import {parseGoDuration} from '../lib/config/go-flags.js'

export const EXIT = {serving: 0, invalidArguments: 1, connectionFailure: 2, rpcFailure: 3, unhealthy: 4} as const

/** grpc.health.v1.HealthCheckResponse.ServingStatus */
const STATUS_NAMES = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN']

export interface LeanProbeFlags {
  addr: string
  service: string
  connectTimeoutMs: number
  rpcTimeoutMs: number
  verbose: boolean
}

class UsageError extends Error {}

const VALUE_FLAGS = new Set(['addr', 'service', 'connect-timeout', 'rpc-timeout', 'user-agent', 'rpc-header'])
const BOOL_FLAGS = new Set(['v', 'gzip'])

export function parseLeanProbeArgs(argv: readonly string[]): LeanProbeFlags {
  const values = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const m = /^--?([A-Za-z][\w-]*)(?:=(.*))?$/s.exec(arg)
    if (!m) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`)
    const name = m[1]!
    if (BOOL_FLAGS.has(name)) {
      values.set(name, m[2] ?? 'true')
      continue
    }
    if (!VALUE_FLAGS.has(name)) throw new UsageError(`flag provided but not defined: -${name}`)
    const value = m[2] ?? argv[++i]
    if (value === undefined) throw new UsageError(`flag needs an argument: -${name}`)
    values.set(name, value)
  }
  const addr = values.get('addr') ?? ''
  if (addr === '') throw new UsageError('-addr not specified')
  const duration = (name: string): number => {
    const raw = values.get(name) ?? '1s'
    const ms = parseGoDuration(raw)
    if (ms === undefined || ms <= 0) throw new UsageError(`-${name} must be a positive duration, got ${JSON.stringify(raw)}`)
    return ms
  }
  return {addr, service: values.get('service') ?? '', connectTimeoutMs: duration('connect-timeout'), rpcTimeoutMs: duration('rpc-timeout'), verbose: values.get('v') === 'true'}
}

/** The protobuf HealthCheckRequest {service} in a gRPC frame (no compression). */
function requestFrame(service: string): Buffer {
  const name = Buffer.from(service, 'utf8')
  const body = name.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a]), varint(name.length), name])
  const frame = Buffer.alloc(5)
  frame.writeUInt32BE(body.length, 1)
  return Buffer.concat([frame, body])
}

function varint(n: number): Buffer {
  const out: number[] = []
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80)
    n >>>= 7
  }
  out.push(n)
  return Buffer.from(out)
}

/** The status field (1, varint) of a HealthCheckResponse message. */
function statusOf(message: Buffer): number {
  let i = 0
  let status = 0
  while (i < message.length) {
    const key = message[i++]!
    let value = 0
    let shift = 0
    if ((key & 7) !== 0) break
    for (;;) {
      const b = message[i++]!
      value |= (b & 0x7f) << shift
      shift += 7
      if (!(b & 0x80) || i >= message.length) break
    }
    if (key >> 3 === 1) status = value
  }
  return status
}

function hosts(addr: string): {authority: string; targets: string[]} {
  const m = /^(.*):(\d+)$/.exec(addr)
  if (!m) return {authority: addr, targets: [`http://${addr}`]}
  const [, host, port] = m as unknown as [string, string, string]
  if (host === 'localhost' || host === '') return {authority: addr, targets: [`http://127.0.0.1:${port}`, `http://[::1]:${port}`]}
  return {authority: addr, targets: [`http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`]}
}

function connect(target: string, timeoutMs: number): Promise<http2.ClientHttp2Session | Error> {
  return new Promise((resolve) => {
    const session = http2.connect(target)
    const timer = setTimeout(() => {
      session.destroy()
      resolve(new Error('timeout'))
    }, timeoutMs)
    session.once('connect', () => {
      clearTimeout(timer)
      resolve(session)
    })
    session.once('error', (err) => {
      clearTimeout(timer)
      session.destroy()
      resolve(err)
    })
  })
}

/** Runs the probe; resolves with the exit code. Messages go to stderr, as grpc-health-probe's do. */
export async function runLeanHealthProbe(argv: readonly string[], err: NodeJS.WritableStream = process.stderr): Promise<number> {
  let flags: LeanProbeFlags
  try {
    flags = parseLeanProbeArgs(argv)
  } catch (e) {
    err.write(`error: ${(e as Error).message}\n`)
    return EXIT.invalidArguments
  }
  const {authority, targets} = hosts(flags.addr)
  const deadline = Date.now() + flags.connectTimeoutMs
  let session: http2.ClientHttp2Session | undefined
  for (const target of targets) {
    const s = await connect(target, Math.max(1, deadline - Date.now()))
    if (!(s instanceof Error)) {
      session = s
      break
    }
  }
  if (!session) {
    err.write(`timeout: failed to connect service ${JSON.stringify(flags.addr)} within ${flags.connectTimeoutMs}ms\n`)
    return EXIT.connectionFailure
  }
  try {
    const result = await new Promise<{grpcStatus: number; message?: string; data: Buffer} | {timeout: true}>((resolve) => {
      const req = session!.request({
        ':method': 'POST',
        ':path': '/grpc.health.v1.Health/Check',
        ':authority': authority,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': `${flags.rpcTimeoutMs}m`,
      })
      const timer = setTimeout(() => {
        req.close(http2.constants.NGHTTP2_CANCEL)
        resolve({timeout: true})
      }, flags.rpcTimeoutMs)
      const chunks: Buffer[] = []
      let headers: http2.IncomingHttpHeaders = {}
      let trailers: http2.IncomingHttpHeaders = {}
      req.on('response', (h) => (headers = h))
      req.on('trailers', (t) => (trailers = t))
      req.on('data', (c: Buffer) => chunks.push(c))
      const done = (): void => {
        clearTimeout(timer)
        const status = trailers['grpc-status'] ?? headers['grpc-status']
        const message = trailers['grpc-message'] ?? headers['grpc-message']
        resolve({grpcStatus: status === undefined ? 2 : Number(status), message: message === undefined ? undefined : decodeURIComponent(String(message)), data: Buffer.concat(chunks)})
      }
      req.on('end', done)
      req.on('error', () => {
        clearTimeout(timer)
        resolve({grpcStatus: 14, message: 'stream error', data: Buffer.alloc(0)})
      })
      req.end(requestFrame(flags.service))
    })
    if ('timeout' in result) {
      err.write(`timeout: health rpc did not complete within ${flags.rpcTimeoutMs}ms\n`)
      return EXIT.rpcFailure
    }
    if (result.grpcStatus !== 0) {
      if (result.grpcStatus === 12) err.write(`error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${result.message ?? ''}\n`)
      else err.write(`error: health rpc failed: code ${result.grpcStatus}: ${result.message ?? ''}\n`)
      return EXIT.rpcFailure
    }
    const message = result.data.length >= 5 ? result.data.subarray(5, 5 + result.data.readUInt32BE(1)) : Buffer.alloc(0)
    const status = STATUS_NAMES[statusOf(message)] ?? String(statusOf(message))
    if (status !== 'SERVING') {
      err.write(`service unhealthy (responded with ${JSON.stringify(status)})\n`)
      return EXIT.unhealthy
    }
    err.write(`status: ${status}\n`)
    return EXIT.serving
  } finally {
    session.close()
    session.destroy()
  }
}

// Run as a program (not when imported by the tests).
if (process.argv[1] && /grpc-health-probe(\.[cm]?[jt]s)?$/.test(process.argv[1])) {
  void runLeanHealthProbe(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`grpc-health-probe: ${(err as Error).message}\n`)
      process.exit(2)
    },
  )
}
