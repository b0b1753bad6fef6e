/**
 * The one grpc-health-probe work-alike fnr ships, for both exec probes Porch's files declare:
 * - the runner image's /home/nonroot/grpc-health-probe (docker/porch/grpc-health-probe runs
 *   bin/grpc-health-probe.ts): Porch's Deployment probes readiness with
 *   `/home/nonroot/grpc-health-probe -addr localhost:9445`;
 * - the wrapper folder's /wrapper-server-tools/grpc-health-probe (a symlink to the single
 *   executable, which dispatches here before it loads anything else: bin/wrapper-server.ts):
 *   Porch's pod templates probe readiness and liveness with `-addr localhost:9446`.
 *
 * Both are exec probes with Kubernetes' default timeout of 1 s, and three failed liveness probes
 * restart the function container, so start-up time is the probe's whole budget. @grpc/grpc-js
 * alone took 0.6-1.2 s to load on a busy 2-core machine; this probe speaks the one call it needs,
 * grpc.health.v1.Health/Check, over Node's built-in HTTP/2 (h2c), and starts in about the time
 * of a bare `node`.
 *
 * Flags and exit codes are grpc-health-probe's: -addr (required), -service, -connect-timeout
 * (1s), -rpc-timeout (1s), -v; TLS, ALTS and SPIFFE flags are refused (plaintext only);
 * 0 SERVING, 1 bad arguments, 2 connection failure, 3 RPC failure, 4 not SERVING.
 * "localhost" is dialled as 127.0.0.1 and, when nothing answers there, as ::1 (function images
 * need not have /etc/hosts).
 */
import http2 from 'node:http2'

import {formatDuration, parseGoBool, parseGoDuration} from '../config/go-flags.js'
import {decodeCheckResponse, encodeCheckRequest} from './health.js'
import {WireError} from './wire.js'

export const PROBE_EXIT = {serving: 0, invalidArguments: 1, connectionFailure: 2, rpcFailure: 3, unhealthy: 4} as const


export interface ProbeFlags {
  addr: string
  service: string
  connectTimeoutMs: number
  rpcTimeoutMs: number
  verbose: boolean
  userAgent: string
  /** -rpc-header 'name: value', in order (sent as request metadata) */
  headers: Array<[string, string]>
  /** -version: print what this probe is and exit 0 */
  version: boolean
}

/**
 * A command line Go's flag package refuses: printed as it prints them, then the usage. `-h` and
 * `-help` print the usage alone (helpOnly).
 */
export class ProbeFlagError extends Error {
  constructor(
    message: string,
    readonly helpOnly = false,
  ) {
    super(message)
  }
}
/** A command line grpc-health-probe refuses after parsing: printed as `error: …`. */
export class ProbeArgumentError extends Error {}

type FlagKind = 'string' | 'duration' | 'bool' | 'header' | 'tls'

/** grpc-health-probe's flags. TLS, ALTS and SPIFFE parse as they do there but are refused when turned on. */
const FLAGS: Record<string, {kind: FlagKind; usage: string}> = {
  addr: {kind: 'string', usage: '(required) tcp host:port to connect'},
  alts: {kind: 'tls', usage: 'use ALTS (not supported here: plaintext transport only)'},
  'connect-timeout': {kind: 'duration', usage: 'timeout for establishing connection (default 1s)'},
  gzip: {kind: 'bool', usage: 'accepted; requests are sent uncompressed'},
  'rpc-header': {kind: 'header', usage: "additional RPC headers in 'name: value' format. May specify more than one via multiple flags."},
  'rpc-timeout': {kind: 'duration', usage: 'timeout for health check rpc (default 1s)'},
  service: {kind: 'string', usage: 'service name to check (default: "")'},
  spiffe: {kind: 'tls', usage: 'use SPIFFE (not supported here: plaintext transport only)'},
  tls: {kind: 'tls', usage: 'use TLS (not supported here: plaintext transport only)'},
  'tls-ca-cert': {kind: 'tls', usage: '(with -tls) not supported here'},
  'tls-client-cert': {kind: 'tls', usage: '(with -tls) not supported here'},
  'tls-client-key': {kind: 'tls', usage: '(with -tls) not supported here'},
  'tls-no-verify': {kind: 'tls', usage: '(with -tls) not supported here'},
  'tls-server-name': {kind: 'tls', usage: '(with -tls) not supported here'},
  'user-agent': {kind: 'string', usage: 'user-agent header value of health check requests (default "grpc_health_probe")'},
  v: {kind: 'bool', usage: 'verbose logs'},
  version: {kind: 'bool', usage: 'show probe version and exit'},
}
const BOOL_KINDS = new Set<FlagKind>(['bool'])
const TLS_BOOLS = new Set(['tls', 'tls-no-verify', 'alts', 'spiffe'])

/** The usage Go's flag package prints after a flag error (its layout, fnr's flag list). */
export const PROBE_USAGE = `Usage:\n${Object.entries(FLAGS)
  .map(([name, f]) => {
    const type = f.kind === 'duration' ? ' duration' : f.kind === 'string' || (f.kind === 'tls' && !TLS_BOOLS.has(name)) ? ' string' : f.kind === 'header' ? ' value' : ''
    return name.length === 1 && type === '' ? `  -${name}\t${f.usage}` : `  -${name}${type}\n    \t${f.usage}`
  })
  .join('\n')}\n`

const DEFAULT_FLAGS: Readonly<ProbeFlags> = {addr: '', service: '', connectTimeoutMs: 1000, rpcTimeoutMs: 1000, verbose: false, userAgent: 'grpc_health_probe', headers: [], version: false}

/** One flag of the command line, split as Go's flag package splits it (undefined: not a flag, parsing stops). */
function splitFlag(arg: string): {name: string; inline?: string} | undefined {
  if (arg.length < 2 || !arg.startsWith('-') || arg === '--') return undefined
  const body = arg.slice(arg.startsWith('--') ? 2 : 1)
  if (body === '' || body.startsWith('-') || body.startsWith('=')) throw new ProbeFlagError(`bad flag syntax: ${arg}`)
  const eq = body.indexOf('=')
  return eq < 0 ? {name: body} : {name: body.slice(0, eq), inline: body.slice(eq + 1)}
}

/** Sets a boolean flag (-name or -name=value); TLS, ALTS and SPIFFE turned on go to `tls`. */
function setBool(flags: ProbeFlags, tls: string[], name: string, inline: string | undefined): void {
  const on = inline === undefined ? true : parseGoBool(inline)
  if (on === undefined) throw new ProbeFlagError(`invalid boolean value ${JSON.stringify(inline)} for -${name}: parse error`)
  if (name === 'v') flags.verbose = on
  else if (name === 'version') flags.version = on
  // -gzip only asks for compressed requests, which a health Check does not need: accepted, as its usage says
  else if (name !== 'gzip' && on) tls.push(name)
}

/** Sets a flag that takes a value. */
function setValue(flags: ProbeFlags, tls: string[], {name, kind}: {name: string; kind: FlagKind}, value: string): void {
  if (kind === 'duration') {
    const ms = parseGoDuration(value)
    if (ms === undefined) throw new ProbeFlagError(`invalid value ${JSON.stringify(value)} for flag -${name}: parse error`)
    if (name === 'connect-timeout') flags.connectTimeoutMs = ms
    else flags.rpcTimeoutMs = ms
  } else if (kind === 'header') {
    const colon = value.indexOf(':')
    if (colon < 0) throw new ProbeFlagError(`invalid value ${JSON.stringify(value)} for flag -${name}: invalid RPC header, expected 'key: value', got ${JSON.stringify(value)}`)
    flags.headers.push([value.slice(0, colon), value.slice(colon + 1).trimStart()])
  } else if (kind === 'tls') {
    if (value !== '') tls.push(name)
  } else if (name === 'addr') flags.addr = value
  else if (name === 'service') flags.service = value
  else flags.userAgent = value
}

/**
 * Parses the command line as grpc-health-probe does (Go's flag package: -flag, --flag, -flag=value,
 * -flag value for non-booleans; parsing stops at the first argument that is not a flag, and the
 * rest is ignored), then checks it as grpc-health-probe does. Throws ProbeFlagError or
 * ProbeArgumentError with grpc-health-probe's wording.
 */
export function parseProbeArgs(argv: readonly string[]): ProbeFlags {
  const flags: ProbeFlags = {...DEFAULT_FLAGS, headers: []}
  const tls: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const split = splitFlag(argv[i]!)
    if (!split) break
    const {name, inline} = split
    const flag = FLAGS[name]
    if (!flag) throw name === 'h' || name === 'help' ? new ProbeFlagError('', true) : new ProbeFlagError(`flag provided but not defined: -${name}`)
    if (BOOL_KINDS.has(flag.kind) || TLS_BOOLS.has(name)) {
      setBool(flags, tls, name, inline)
      continue
    }
    const value = inline ?? argv[++i]
    if (value === undefined) throw new ProbeFlagError(`flag needs an argument: -${name}`)
    setValue(flags, tls, {name, kind: flag.kind}, value)
  }
  if (!flags.version) checkFlags(flags, tls)
  return flags
}

/** grpc-health-probe's checks after parsing. */
function checkFlags(flags: ProbeFlags, tls: string[]): void {
  if (flags.addr === '') throw new ProbeArgumentError('-addr not specified')
  if (flags.connectTimeoutMs <= 0) throw new ProbeArgumentError(`-connect-timeout must be greater than zero (specified: ${formatDuration(flags.connectTimeoutMs)})`)
  if (flags.rpcTimeoutMs <= 0) throw new ProbeArgumentError(`-rpc-timeout must be greater than zero (specified: ${formatDuration(flags.rpcTimeoutMs)})`)
  // grpc-health-probe dials TLS, ALTS or SPIFFE here; the servers this probe checks (fnr's runner
  // and wrapper) speak plaintext, so asking for any of them is a mistake worth saying.
  if (tls.length > 0) throw new ProbeArgumentError(`-${tls[0]} is not supported: this probe speaks plaintext gRPC only`)
}

/** The protobuf HealthCheckRequest {service} in a gRPC frame (no compression). */
function requestFrame(service: string): Buffer {
  const body = encodeCheckRequest({service})
  const frame = Buffer.alloc(5)
  frame.writeUInt32BE(body.length, 1)
  return Buffer.concat([frame, body])
}

/** The :authority to send and the URLs to dial, in order, for -addr. */
export function probeTargets(addr: string): {authority: string; targets: string[]} {
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

/** gRPC status codes as grpc-go names them in its errors ("rpc error: code = NotFound desc = …"). */
const GO_CODE_NAMES = ['OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists', 'PermissionDenied', 'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange', 'Unimplemented', 'Internal', 'Unavailable', 'DataLoss', 'Unauthenticated']

/** Milliseconds (fractional) as Go prints a measured time.Duration, to the microsecond. */
function elapsed(ms: number): string {
  return formatDuration(Math.round(ms * 1000) / 1000)
}

type CheckResult = {grpcStatus: number; message?: string; data: Buffer} | {timeout: true}

/** The Check call's request headers: gRPC's, the user agent and every -rpc-header. */
function requestHeaders(flags: ProbeFlags, authority: string): http2.OutgoingHttpHeaders {
  const headers: http2.OutgoingHttpHeaders = {
    ':method': 'POST',
    ':path': '/grpc.health.v1.Health/Check',
    ':authority': authority,
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': `${Math.max(1, Math.ceil(flags.rpcTimeoutMs))}m`,
    'user-agent': flags.userAgent,
  }
  for (const [name, value] of flags.headers) {
    const key = name.toLowerCase()
    const prior = headers[key]
    headers[key] = prior === undefined ? value : [...(Array.isArray(prior) ? prior : [String(prior)]), value]
  }
  return headers
}

/** Makes the Check call on SESSION; resolves with its status and body, or a timeout. */
function check(session: http2.ClientHttp2Session, flags: ProbeFlags, authority: string): Promise<CheckResult> {
  return new Promise<CheckResult>((resolve) => {
    const req = session.request(requestHeaders(flags, authority))
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
    req.on('end', () => {
      clearTimeout(timer)
      const status = trailers['grpc-status'] ?? headers['grpc-status']
      const message = trailers['grpc-message'] ?? headers['grpc-message']
      resolve({grpcStatus: status === undefined ? 2 : Number(status), message: message === undefined ? undefined : decodeURIComponent(String(message)), data: Buffer.concat(chunks)})
    })
    req.on('error', () => {
      clearTimeout(timer)
      resolve({grpcStatus: 14, message: 'stream error', data: Buffer.alloc(0)})
    })
    req.end(requestFrame(flags.service))
  })
}

/** Says what the call's result means, as grpc-health-probe says it; returns the exit code. */
function report(result: CheckResult, flags: ProbeFlags, log: (line: string) => void, times: () => string): number {
  if ('timeout' in result || result.grpcStatus === 4) {
    log(`timeout: health rpc did not complete within ${formatDuration(flags.rpcTimeoutMs)}`)
    return PROBE_EXIT.rpcFailure
  }
  if (result.grpcStatus === 12) {
    log(`error: this server does not implement the grpc health protocol (grpc.health.v1.Health): ${result.message ?? ''}`)
    return PROBE_EXIT.rpcFailure
  }
  if (result.grpcStatus !== 0) {
    log(`error: health rpc failed: rpc error: code = ${GO_CODE_NAMES[result.grpcStatus] ?? `Code(${result.grpcStatus})`} desc = ${result.message ?? ''}`)
    return PROBE_EXIT.rpcFailure
  }
  const message = result.data.length >= 5 ? result.data.subarray(5, 5 + result.data.readUInt32BE(1)) : Buffer.alloc(0)
  let status: string
  try {
    status = String(decodeCheckResponse(message).status)
  } catch (err) {
    if (!(err instanceof WireError)) throw err
    // grpc-go's words for a response it cannot unmarshal
    log(`error: health rpc failed: rpc error: code = Internal desc = grpc: failed to unmarshal the received message: ${err.message}`)
    return PROBE_EXIT.rpcFailure
  }
  if (status !== 'SERVING') {
    log(`service unhealthy (responded with ${JSON.stringify(status)})`)
    return PROBE_EXIT.unhealthy
  }
  if (flags.verbose) log(`time elapsed: ${times()}`)
  log(`status: ${status}`)
  return PROBE_EXIT.serving
}

/** The first of TARGETS that accepts an HTTP/2 connection within the connect timeout. */
async function connectFirst(targets: string[], timeoutMs: number): Promise<http2.ClientHttp2Session | undefined> {
  const deadline = Date.now() + timeoutMs
  for (const target of targets) {
    const s = await connect(target, Math.max(1, deadline - Date.now()))
    if (!(s instanceof Error)) return s
  }
  return undefined
}

/** grpc-health-probe's -v lines before it connects. */
function logOptions(flags: ProbeFlags, log: (line: string) => void): void {
  log('parsed options:')
  log(`> addr=${flags.addr} conn_timeout=${formatDuration(flags.connectTimeoutMs)} rpc_timeout=${formatDuration(flags.rpcTimeoutMs)}`)
  if (flags.headers.length > 0) log(`> headers: ${flags.headers.map(([k, v]) => `${k.toLowerCase()}:[${v}]`).join(' ')}`)
  for (const line of ['> tls=false', '> alts=false', '> spiffe=false', 'establishing connection']) log(line)
}

/** The command line's flags, or the exit code after saying why there are none. */
function readArgs(argv: readonly string[], err: NodeJS.WritableStream): ProbeFlags | number {
  try {
    return parseProbeArgs(argv)
  } catch (e) {
    if (e instanceof ProbeFlagError) err.write(`${e.helpOnly ? '' : `${e.message}\n`}${PROBE_USAGE}`)
    else err.write(`error: ${(e as Error).message}\n`)
    return PROBE_EXIT.invalidArguments
  }
}

/**
 * Runs the probe; resolves with the exit code. Messages go to stderr with grpc-health-probe's
 * wording (its -version line to stdout).
 */
export async function runHealthProbe(argv: readonly string[], err: NodeJS.WritableStream = process.stderr, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const flags = readArgs(argv, err)
  if (typeof flags === 'number') return flags
  if (flags.version) {
    out.write("fnr grpc-health-probe (grpc-health-probe's flags and exit codes; plaintext only)\n")
    return PROBE_EXIT.serving
  }
  const log = (line: string): void => void err.write(`${line}\n`)
  if (flags.verbose) logOptions(flags, log)
  const {authority, targets} = probeTargets(flags.addr)
  const connectStart = performance.now()
  const session = await connectFirst(targets, flags.connectTimeoutMs)
  if (!session) {
    log(`timeout: failed to connect service ${JSON.stringify(flags.addr)} within ${formatDuration(flags.connectTimeoutMs)}`)
    return PROBE_EXIT.connectionFailure
  }
  const connectMs = performance.now() - connectStart
  if (flags.verbose) log(`connection established (took ${elapsed(connectMs)})`)
  const rpcStart = performance.now()
  try {
    const result = await check(session, flags, authority)
    return report(result, flags, log, () => `connect=${elapsed(connectMs)} rpc=${elapsed(performance.now() - rpcStart)}`)
  } finally {
    session.close()
    session.destroy()
  }
}
