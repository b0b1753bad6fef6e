/**
 * The one module that reaches into private state of grpc-js and of Node's HTTP/2 sessions.
 *
 * fnr's HTTP/2 limits (hygiene.ts) and receive windows (flow-control.ts) act on the HTTP/2 servers
 * grpc-js creates for a bound grpc.Server and on the sockets under their sessions. Neither grpc-js
 * (1.14) nor Node's http2 module exposes them:
 *   - grpc-js keeps its HTTP/2 servers in the private field `http2Servers` (a Map whose keys are
 *     the servers);
 *   - an Http2Session's `socket` is a proxy that throws once the session is unbound; the
 *     net.Socket it wraps sits under a symbol described as 'socket'.
 * Both are read here and nowhere else. One private method of grpc-js is replaced here too, to save
 * a whole-message copy of each response on the event loop (frameResponsesInPlace); without it
 * (another grpc-js) grpc-js copies as before. The grpc-js version is pinned in package.json to one listed
 * in TESTED_GRPC_JS, and test/grpc/internals.test.ts fails when the installed grpc-js is not one
 * of them or when either access stops working, so an upgrade is caught by the tests. At run time
 * a grpc-js without the field is not a warning: the server refuses to start (InternalError), since
 * running without its limits is what an attacker would want.
 */
import type {Http2Session, IncomingHttpHeaders, ServerHttp2Stream} from 'node:http2'
import {createRequire} from 'node:module'

import type * as grpc from '@grpc/grpc-js'
// grpc-js's own module, the instance its server uses (a static import, so that a bundle such as the
// wrapper server's carries it: a require by name at run time finds nothing there).
import * as serverInterceptors from '@grpc/grpc-js/build/src/server-interceptors.js'

import {FnrError} from '../errors.js'

/** grpc-js versions whose private `http2Servers` field this module was tested with. */
export const TESTED_GRPC_JS: readonly string[] = ['1.14.7']

/** What fnr uses of one of grpc-js's HTTP/2 servers: Node's public http2.Http2Server events. */
export interface Http2Listening {
  on(event: 'session', listener: (session: Http2Session) => void): unknown
  on(event: 'stream', listener: (stream: ServerHttp2Stream) => void): unknown
  on(event: 'error', listener: (err: NodeJS.ErrnoException) => void): unknown
  /** Runs before grpc-js's own 'stream' listener, which reads the call's metadata from `headers`. */
  prependListener(event: 'stream', listener: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void): unknown
}

/** The installed grpc-js version. */
export function grpcJsVersion(): string {
  try {
    return (createRequire(import.meta.url)('@grpc/grpc-js/package.json') as {version: string}).version
  } catch {
    return 'unknown (bundled)' // a bundle (the wrapper server's) has no package.json to read
  }
}

/**
 * The HTTP/2 servers of a bound grpc-js server. Throws an InternalError naming the grpc-js
 * version when they cannot be found (the field moved in another grpc-js version).
 */
export function http2ServersOf(server: grpc.Server): Http2Listening[] {
  const field = (server as unknown as {http2Servers?: unknown}).http2Servers
  const servers = field instanceof Map ? [...field.keys()].filter((s): s is Http2Listening => !!s && typeof (s as Http2Listening).on === 'function' && typeof (s as Http2Listening).prependListener === 'function') : []
  if (servers.length === 0) {
    throw new FnrError(
      'Internal',
      `cannot reach the HTTP/2 servers of grpc-js ${grpcJsVersion()} (tested: ${TESTED_GRPC_JS.join(', ')}): fnr's HTTP/2 limits and windows cannot be installed, so the server does not start; install a tested grpc-js version`,
    )
  }
  return servers
}

/**
 * The net.Socket under an HTTP/2 session, still readable after the session closed (session.socket
 * throws once unbound); undefined when Node keeps it elsewhere.
 */
export function sessionSocket(session: Http2Session): {bytesRead: number} | undefined {
  const key = Object.getOwnPropertySymbols(session).find((k) => k.description === 'socket')
  const socket = key ? (session as unknown as Record<symbol, unknown>)[key] : undefined
  return socket && typeof (socket as {bytesRead?: unknown}).bytesRead === 'number' ? (socket as {bytesRead: number}) : undefined
}

/** grpc-js's server call, as far as its framing of a response is concerned (1.14: server-interceptors.ts). */
interface ServerCallFraming {
  handler?: {serialize?: (value: unknown) => Buffer}
  serializeMessage(value: unknown): Buffer
}

const FRAMING_PATCHED = Symbol.for('fnr.framesInPlace')

/** Responses framed since start: sent from where they were written (`inPlace`), or `copied` behind a new prefix (one count per process, as the patch is). */
export const framingCounts: {inPlace: number; copied: number} = ((globalThis as Record<symbol, unknown>)[Symbol.for('fnr.framingCounts')] ??= {inPlace: 0, copied: 0}) as {inPlace: number; copied: number}

/**
 * grpc-js frames each response message by copying it behind a 5-byte prefix of its own
 * (BaseServerInterceptingCall.serializeMessage, private): for a 5 MiB output a copy, and the page
 * faults of a new 5 MiB buffer, on the event loop that serves every other call. With this, a
 * message for which `framed(message)` gives the bytes with their prefix already in front (the
 * reply serializer wrote it in the room the process runner left: reply.ts) is sent as it is;
 * anything else is framed as grpc-js frames it. Installed once per process; false when grpc-js has
 * no such method (another version), and grpc-js then copies, as before.
 */
export function frameResponsesInPlace(framed: (message: Buffer) => Buffer | undefined): boolean {
  const proto = (serverInterceptors as unknown as {BaseServerInterceptingCall?: {prototype: ServerCallFraming & Record<symbol, unknown>}}).BaseServerInterceptingCall?.prototype
  if (proto === undefined || typeof proto.serializeMessage !== 'function') return false
  if (proto[FRAMING_PATCHED]) return true
  const original = proto.serializeMessage
  proto.serializeMessage = function (this: ServerCallFraming, value: unknown): Buffer {
    const serialize = this.handler?.serialize
    if (typeof serialize !== 'function') return original.call(this, value)
    const message = serialize(value)
    const inPlace = framed(message)
    if (inPlace !== undefined) {
      framingCounts.inPlace++
      return inPlace
    }
    framingCounts.copied++
    const output = Buffer.allocUnsafe(message.length + 5)
    output[0] = 0
    output.writeUInt32BE(message.length, 1)
    message.copy(output, 5)
    return output
  }
  proto[FRAMING_PATCHED] = true
  return true
}
