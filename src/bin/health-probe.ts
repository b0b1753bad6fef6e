/**
 * A grpc-health-probe work-alike, so Porch's pod template works unchanged: its readinessProbe
 * runs `/wrapper-server-tools/grpc-health-probe -addr localhost:9446`, and the packaged folder
 * has `grpc-health-probe` as a symlink to the wrapper-server executable, which dispatches here
 * when invoked under that name (src/bin/wrapper-server.ts).
 *
 * Flags (Go's flag syntax: -flag value, -flag=value, one or two dashes): -addr (required),
 * -service, -connect-timeout (1s), -rpc-timeout (1s), -v. TLS, ALTS and SPIFFE flags are refused.
 * Exit codes are grpc-health-probe's: 0 SERVING, 1 bad arguments, 2 connection failure,
 * 3 RPC failure, 4 not SERVING.
 *
 * "localhost" is dialled as 127.0.0.1: function images need not have /etc/hosts (a pod always
 * has one, a bare container may not), and the wrapper listens on IPv4 by default.
 */
import * as grpc from '@grpc/grpc-js'
import {service as healthService} from 'grpc-health-check'

import {parseGoDuration} from '../lib/config/go-flags.js'

export const PROBE_EXIT = {serving: 0, invalidArguments: 1, connectionFailure: 2, rpcFailure: 3, unhealthy: 4} as const

interface ProbeFlags {
  addr: string
  service: string
  connectTimeoutMs: number
  rpcTimeoutMs: number
  verbose: boolean
}

const VALUE_FLAGS = new Set(['addr', 'service', 'connect-timeout', 'rpc-timeout', 'user-agent', 'rpc-header'])
const BOOL_FLAGS = new Set(['v', 'gzip'])
const UNSUPPORTED = new Set(['tls', 'tls-no-verify', 'tls-ca-cert', 'tls-client-cert', 'tls-client-key', 'tls-server-name', 'alts', 'spiffe'])

class ProbeUsageError extends Error {}

export function parseProbeArgs(argv: readonly string[]): ProbeFlags {
  const values = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const m = /^--?([A-Za-z][\w-]*)(?:=(.*))?$/s.exec(arg)
    if (!m) throw new ProbeUsageError(`unexpected argument ${JSON.stringify(arg)}`)
    const name = m[1]!
    if (UNSUPPORTED.has(name)) throw new ProbeUsageError(`-${name} is not supported: this probe speaks plaintext gRPC only`)
    if (BOOL_FLAGS.has(name)) {
      values.set(name, m[2] ?? 'true')
      continue
    }
    if (!VALUE_FLAGS.has(name)) throw new ProbeUsageError(`flag provided but not defined: -${name}`)
    const value = m[2] ?? argv[++i]
    if (value === undefined) throw new ProbeUsageError(`flag needs an argument: -${name}`)
    values.set(name, value)
  }
  const addr = values.get('addr') ?? ''
  if (addr === '') throw new ProbeUsageError('-addr not specified')
  const duration = (name: string): number => {
    const raw = values.get(name) ?? '1s'
    const ms = parseGoDuration(raw)
    if (ms === undefined || ms <= 0) throw new ProbeUsageError(`-${name} must be a positive duration, got ${JSON.stringify(raw)}`)
    return ms
  }
  return {
    addr,
    service: values.get('service') ?? '',
    connectTimeoutMs: duration('connect-timeout'),
    rpcTimeoutMs: duration('rpc-timeout'),
    verbose: values.get('v') === 'true',
  }
}

/** "localhost:9446" → "127.0.0.1:9446" (see the header); everything else unchanged. */
export function probeTarget(addr: string): string {
  return addr.replace(/^localhost(?=:\d+$)/, '127.0.0.1')
}

type HealthClient = grpc.Client & {
  check(req: {service: string}, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: {status: string}) => void): void
}

/** Runs the probe; resolves with the exit code. Messages go to stderr, as grpc-health-probe's do. */
export async function runHealthProbe(argv: readonly string[], err: NodeJS.WritableStream = process.stderr): Promise<number> {
  let flags: ProbeFlags
  try {
    flags = parseProbeArgs(argv)
  } catch (e) {
    err.write(`error: ${(e as Error).message}\n`)
    return PROBE_EXIT.invalidArguments
  }
  const Ctor = grpc.makeGenericClientConstructor(healthService, 'Health') as unknown as new (
    address: string,
    credentials: grpc.ChannelCredentials,
  ) => HealthClient
  const client = new Ctor(probeTarget(flags.addr), grpc.credentials.createInsecure())
  try {
    const connected = await new Promise<Error | undefined>((resolve) => client.waitForReady(Date.now() + flags.connectTimeoutMs, (e) => resolve(e ?? undefined)))
    if (connected) {
      err.write(`timeout: failed to connect service ${JSON.stringify(flags.addr)} within ${flags.connectTimeoutMs}ms\n`)
      return PROBE_EXIT.connectionFailure
    }
    const result = await new Promise<{err?: grpc.ServiceError; status?: string}>((resolve) =>
      client.check({service: flags.service}, new grpc.Metadata(), {deadline: Date.now() + flags.rpcTimeoutMs}, (e, res) => resolve(e ? {err: e} : {status: res?.status})),
    )
    if (result.err) {
      const e = result.err
      if (e.code === grpc.status.UNIMPLEMENTED) err.write(`error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${e.details}\n`)
      else if (e.code === grpc.status.DEADLINE_EXCEEDED) err.write(`timeout: health rpc did not complete within ${flags.rpcTimeoutMs}ms\n`)
      else err.write(`error: health rpc failed: ${grpc.status[e.code] ?? e.code}: ${e.details}\n`)
      return PROBE_EXIT.rpcFailure
    }
    if (result.status !== 'SERVING') {
      err.write(`service unhealthy (responded with ${JSON.stringify(result.status)})\n`)
      return PROBE_EXIT.unhealthy
    }
    err.write(`status: ${result.status}\n`)
    return PROBE_EXIT.serving
  } finally {
    client.close()
  }
}
