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
 * Both are read here and nowhere else. Two private methods of grpc-js are replaced here too, to
 * save a whole-message copy on the event loop each (frameResponsesInPlace, decodeMessagesInPlace);
 * without them (another grpc-js) grpc-js copies as before. The grpc-js version is pinned in package.json to one listed
 * in TESTED_GRPC_JS, and test/grpc/internals.test.ts fails when the installed grpc-js is not one
 * of them or when either access stops working, so an upgrade is caught by the tests. At run time
 * a grpc-js without the field is not a warning: the server refuses to start (InternalError), since
 * running without its limits is what an attacker would want.
 */
import type {Http2Session, IncomingHttpHeaders, ServerHttp2Stream} from 'node:http2'
import {createRequire} from 'node:module'

import type * as grpc from '@grpc/grpc-js'
// grpc-js's own modules, the instances its server and client use (a static import, so that a bundle
// such as the wrapper server's carries them: a require by name at run time finds nothing there).
import * as serverInterceptors from '@grpc/grpc-js/build/src/server-interceptors.js'
import * as streamDecoder from '@grpc/grpc-js/build/src/stream-decoder.js'

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

/** grpc-js's message decoder (1.14: stream-decoder.ts), with the state fnr's write keeps on it. */
interface MessageDecoder {
  maxReadMessageLength: number
  /** The 5-byte prefix being read, and how much of it is in. */
  fnrPrefix?: Buffer
  fnrPrefixIn?: number
  /** The message being read (prefix included), and how much of it is in. */
  fnrMessage?: Buffer
  fnrMessageIn?: number
}

const DECODER_PATCHED = Symbol.for('fnr.decodesInPlace')

/**
 * Reads gRPC messages from data frames into one buffer each, allocated at the size the prefix
 * declares and filled as frames arrive. The same messages and errors as grpc-js's decoder (1.14,
 * StreamDecoder.write, private), which keeps a message's frames and joins them once the last one
 * is in: for a 5 MiB request a copy and the page faults of a new 5 MiB buffer at once, on the event
 * loop that serves every other call, where this spreads the same work over the frames. Only the
 * declared size is reserved (bounded by the maximum message size grpc-js checks first); its pages
 * are touched only as bytes arrive.
 */
function writeInPlace(this: MessageDecoder, data: Buffer): Buffer[] {
  const messages: Buffer[] = []
  let at = 0
  while (at < data.length) at = this.fnrMessage === undefined ? readPrefix(this, data, at, messages) : readBody(this, data, at, messages)
  return messages
}

/** Reads what `data` holds of a message's prefix from `at`; a whole prefix starts the message. Returns where it stopped. */
function readPrefix(decoder: MessageDecoder, data: Buffer, at: number, messages: Buffer[]): number {
  const prefix = (decoder.fnrPrefix ??= Buffer.alloc(5))
  const had = decoder.fnrPrefixIn ?? 0
  const n = Math.min(5 - had, data.length - at)
  data.copy(prefix, had, at, at + n)
  decoder.fnrPrefixIn = had + n
  if (decoder.fnrPrefixIn < 5) return at + n
  decoder.fnrPrefixIn = 0
  const size = prefix.readUInt32BE(1)
  if (decoder.maxReadMessageLength !== -1 && size > decoder.maxReadMessageLength) {
    throw new Error(`Received message larger than max (${size} vs ${decoder.maxReadMessageLength})`)
  }
  const message = Buffer.allocUnsafe(5 + size)
  prefix.copy(message, 0)
  if (size === 0) messages.push(message)
  else {
    decoder.fnrMessage = message
    decoder.fnrMessageIn = 5
  }
  return at + n
}

/** Copies what `data` holds of the message being read from `at`; a whole message is passed on. Returns where it stopped. */
function readBody(decoder: MessageDecoder, data: Buffer, at: number, messages: Buffer[]): number {
  const message = decoder.fnrMessage!
  const had = decoder.fnrMessageIn ?? 5
  const n = Math.min(message.length - had, data.length - at)
  data.copy(message, had, at, at + n)
  decoder.fnrMessageIn = had + n
  if (decoder.fnrMessageIn === message.length) {
    messages.push(message)
    decoder.fnrMessage = undefined
  }
  return at + n
}

/**
 * Installs writeInPlace as grpc-js's message decoder (servers and clients of this process; once).
 * False when grpc-js has no such decoder (another version): it then joins messages as before.
 */
export function decodeMessagesInPlace(): boolean {
  const proto = (streamDecoder as unknown as {StreamDecoder?: {prototype: MessageDecoder & {write?: unknown} & Record<symbol, unknown>}}).StreamDecoder?.prototype
  if (proto === undefined || typeof proto.write !== 'function') return false
  if (!proto[DECODER_PATCHED]) {
    proto.write = writeInPlace
    proto[DECODER_PATCHED] = true
  }
  return true
}
