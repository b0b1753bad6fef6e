/**
 * A server's first answered call, primed. V8 compiles JavaScript on first use: in a runner just
 * started, the first call that gets an answer also paid for compiling Node's HTTP/2 session code,
 * grpc-js's unary path and fnr's spawn path, ~15-20 ms that every later call skips and that Porch's
 * Go runner never pays (docs/limits.md "Fair admission, side by side with Porch's runner"). Once the
 * listener is up, this runs the same code once, off the caller's path: one health Check over
 * loopback, and one short process (`node --version`) through the server's launcher.
 *
 * Nothing a client or an operator counts changes: a health Check is not a call (no call metric, no
 * call log line), the process is not a function (no image, no evaluator), and a failure of either
 * is logged at debug level and otherwise ignored. A server with TLS on its listener primes only the
 * spawn path (a plaintext connection would be refused).
 */
import http2 from 'node:http2'
import {isSea} from 'node:sea'

import {ANY_ADDRESS} from './grpc/server.js'
import type {ProcessLauncher} from './process/launcher.js'
import {runFunctionProcess} from './process/run.js'
import type {Logger} from './telemetry/log.js'

export interface PrimeTarget {
  /** The bound port. */
  port: number
  /** The bound host ('' or a wildcard address: loopback is dialled). */
  host: string
  /** TLS on the listener: the HTTP/2 part is skipped. */
  tls: boolean
}

/** How long either part may take before it is given up (a busy node, a server stopping). */
export const PRIME_TIMEOUT_MS = 5_000

/** Runs both parts one after the other; resolves when both have ended, never rejects. */
export async function primeFirstCall(target: PrimeTarget, launcher: ProcessLauncher | undefined, logger: Logger): Promise<void> {
  const started = performance.now()
  const parts: string[] = []
  if (!target.tls) {
    const failure = await healthCheckOverLoopback(target)
    parts.push(failure ? `health check: ${failure}` : 'health check')
  }
  // process.execPath is Node itself, except in a single executable (where `--version` is not Node's).
  if (launcher && !isSea()) {
    const failure = await shortProcess(launcher)
    parts.push(failure ? `process: ${failure}` : 'process')
  }
  logger.debug('first call primed', {parts, ms: Math.round(performance.now() - started)})
}

/** The address to dial for a server bound to HOST. */
export function loopbackFor(host: string): string {
  if (host === '' || host === ANY_ADDRESS || host === '[::]' || host === '0.0.0.0') return '127.0.0.1'
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host
}

/** One grpc.health.v1 Check (service "") on a connection of its own; the failure's words, or undefined. */
function healthCheckOverLoopback(target: PrimeTarget): Promise<string | undefined> {
  return new Promise((resolve) => {
    let settled = false
    const session = http2.connect(`http://${loopbackFor(target.host)}:${target.port}`)
    const finish = (failure?: string): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      session.destroy()
      resolve(failure)
    }
    const timer = setTimeout(() => finish('timed out'), PRIME_TIMEOUT_MS)
    timer.unref()
    session.unref()
    session.on('error', (err) => finish(err.message))
    const req = session.request({':method': 'POST', ':path': '/grpc.health.v1.Health/Check', 'content-type': 'application/grpc', te: 'trailers'})
    req.on('error', (err) => finish(err.message))
    req.on('data', () => {})
    req.on('close', () => finish())
    // An empty HealthCheckRequest in a gRPC frame: not compressed, length 0.
    req.end(Buffer.alloc(5))
  })
}

/** `node --version` through LAUNCHER, as a call's function process runs; the failure's words, or undefined. */
async function shortProcess(launcher: ProcessLauncher): Promise<string | undefined> {
  try {
    await runFunctionProcess({
      command: process.execPath,
      args: ['--version'],
      input: new Uint8Array(0),
      maxStdoutBytes: 4096,
      label: 'first-call priming',
      launcher,
      deadline: Date.now() + PRIME_TIMEOUT_MS,
    })
    return undefined
  } catch (err) {
    return (err as Error).message
  }
}
