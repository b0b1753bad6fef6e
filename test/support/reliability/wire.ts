/**
 * Talking to a gRPC server below the level of a generated client: arbitrary protobuf bytes
 * through grpc-js, hand-made HTTP/2 requests (bad framing, bad headers, early resets), and raw
 * TCP bytes. Used to feed malformed requests to `fnr serve` and the wrapper server.
 */
import http2 from 'node:http2'
import net from 'node:net'

import * as grpc from '@grpc/grpc-js'

import {EVALUATE_METHOD_PATH} from '../../../src/lib/grpc/proto.js'

// ---------------------------------------------------------------------------------------------
// Protobuf bytes

export function varint(n: number | bigint): Buffer {
  let v = BigInt(n)
  const out: number[] = []
  do {
    let byte = Number(v & 0x7fn)
    v >>= 7n
    if (v > 0n) byte |= 0x80
    out.push(byte)
  } while (v > 0n)
  return Buffer.from(out)
}

/** A length-delimited field (wire type 2). */
export function bytesField(field: number, value: Buffer | string): Buffer {
  const v = Buffer.isBuffer(value) ? value : Buffer.from(value)
  return Buffer.concat([varint((field << 3) | 2), varint(v.length), v])
}

/** A varint field (wire type 0). */
export function varintField(field: number, value: number | bigint): Buffer {
  return Buffer.concat([varint((field << 3) | 0), varint(value)])
}

/** EvaluateFunctionRequest: resource_list = 1, image = 2. */
export function requestBytes(image: string | Buffer, resourceList: Buffer | string): Buffer {
  return Buffer.concat([bytesField(1, resourceList), bytesField(2, image)])
}

// ---------------------------------------------------------------------------------------------
// grpc-js with raw bytes

export interface RawOutcome {
  code: number
  details: string
  /** Response bytes on success. */
  response?: Buffer
}

const identity = (b: Buffer): Buffer => b

export class RawEvaluatorClient {
  private readonly client: grpc.Client

  constructor(address: string, maxMessageSize = 64 * 1024 * 1024) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': maxMessageSize,
      'grpc.max_receive_message_length': maxMessageSize,
    })
  }

  /** Sends `bytes` as the EvaluateFunction request message (no checks on the client side). */
  call(bytes: Buffer, options: {deadline?: number; path?: string} = {}): Promise<RawOutcome> {
    return new Promise((resolve) => {
      this.client.makeUnaryRequest(options.path ?? EVALUATE_METHOD_PATH, identity, identity, bytes, {deadline: options.deadline ?? Date.now() + 30_000}, (err, value) => {
        if (err) resolve({code: err.code, details: err.details})
        else resolve({code: grpc.status.OK, details: '', response: value})
      })
    })
  }

  close(): void {
    this.client.close()
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP/2 by hand

export interface Http2Request {
  path?: string
  /** Extra or replacing headers (content-type, te, grpc-timeout, …). */
  headers?: Record<string, string>
  /** Bytes of the request body (already gRPC-framed, or not). */
  body?: Buffer
  /** Reset the stream right after sending the headers (a cancel before any message). */
  resetAfterHeaders?: boolean
  /** Reset the stream this many ms after sending the body (left open unless halfClose). */
  resetAfterMs?: number
  /** With resetAfterMs: end the request (END_STREAM) before the reset. */
  halfClose?: boolean
}

export interface Http2Outcome {
  httpStatus?: number
  grpcStatus?: number
  grpcMessage?: string
  /** Set when the stream or session failed instead of answering. */
  error?: string
  /** The stream was reset by us on purpose. */
  reset?: boolean
}

/** Frames a message the way gRPC does: 1 byte compressed flag, 4 bytes length, the message. */
export function grpcFrame(message: Buffer, options: {compressed?: boolean; declaredLength?: number} = {}): Buffer {
  const head = Buffer.alloc(5)
  head.writeUInt8(options.compressed ? 1 : 0, 0)
  head.writeUInt32BE(options.declaredLength ?? message.length, 1)
  return Buffer.concat([head, message])
}

/** One HTTP/2 request on its own session; resolves with what came back (never rejects). */
export function http2Exchange(port: number, req: Http2Request): Promise<Http2Outcome> {
  return new Promise((resolve) => {
    const session = http2.connect(`http://127.0.0.1:${port}`)
    const outcome: Http2Outcome = {}
    let done = false
    const finish = (): void => {
      if (done) return
      done = true
      session.close()
      session.destroy()
      resolve(outcome)
    }
    session.on('error', (err) => {
      outcome.error ??= `session: ${err.message}`
      finish()
    })
    const headers: Record<string, string> = {':method': 'POST', ':path': req.path ?? EVALUATE_METHOD_PATH, 'content-type': 'application/grpc', te: 'trailers', ...req.headers}
    // An empty value leaves the header out.
    for (const [k, v] of Object.entries(headers)) if (v === '') delete headers[k]
    const stream = session.request(headers, {endStream: false})
    const readStatus = (headers: http2.IncomingHttpHeaders): void => {
      if (headers[':status'] !== undefined) outcome.httpStatus = Number(headers[':status'])
      if (headers['grpc-status'] !== undefined) outcome.grpcStatus = Number(headers['grpc-status'])
      if (headers['grpc-message'] !== undefined) outcome.grpcMessage = decodeURIComponent(String(headers['grpc-message']))
    }
    stream.on('response', readStatus)
    stream.on('trailers', readStatus)
    stream.on('data', () => {})
    stream.on('error', (err) => {
      outcome.error ??= `stream: ${err.message}`
    })
    stream.on('close', finish)
    if (req.resetAfterHeaders) {
      outcome.reset = true
      stream.close(http2.constants.NGHTTP2_CANCEL)
      return
    }
    if (req.body) stream.write(req.body)
    if (req.resetAfterMs !== undefined) {
      if (req.halfClose) stream.end()
      setTimeout(() => {
        outcome.reset = true
        stream.close(http2.constants.NGHTTP2_CANCEL)
      }, req.resetAfterMs)
    } else stream.end()
  })
}

// ---------------------------------------------------------------------------------------------
// Raw TCP

/**
 * Writes `bytes` to a fresh TCP connection and waits for the server to close it or `holdMs`
 * to pass; resolves with what the server answered (if anything) and whether it closed.
 */
export function tcpExchange(port: number, bytes: Buffer, holdMs = 300): Promise<{closedByServer: boolean; answer: Buffer}> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let closedByServer = false
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes))
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', () => {})
    socket.on('end', () => {
      closedByServer = true
    })
    const timer = setTimeout(() => socket.destroy(), holdMs)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({closedByServer, answer: Buffer.concat(chunks)})
    })
  })
}
