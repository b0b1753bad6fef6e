/**
 * Protocol Buffers' wire format, the part fnr's messages use: varints, length-delimited fields
 * (bytes, strings, nested messages) and skipping the fields a message does not know. fnr's
 * messages are four small ones (messages.ts: evaluator.proto's request and response, and
 * grpc.health.v1's); coding them here keeps protobufjs and its code generation out of a server's
 * start (docs/performance.md "Start → SERVING"). test/grpc/wire.test.ts checks every message
 * against protobufjs loaded from the .proto files, byte for byte both ways.
 *
 * Decoding follows Go's protobuf (Porch's runner): fields may come in any order and a field that
 * comes twice keeps its last value; a field of a number the message does not know, or of a known
 * number but another wire type, is skipped; a message that ends inside a field, or has a field of
 * number 0, a wire type 6 or 7, or an unmatched group end, is malformed (WireError), and so is a
 * string field that is not UTF-8 (proto3's rule, which Go enforces). Nothing is copied: a bytes
 * field is a view of the message's memory. test/porch-side-by-side/request-frames.test.ts sends
 * malformed requests to Porch's runner and fnr in the same run.
 */
import {isUtf8} from 'node:buffer'

/** Wire types. */
export const VARINT = 0
export const FIXED64 = 1
export const LENGTH_DELIMITED = 2
const START_GROUP = 3
const END_GROUP = 4
export const FIXED32 = 5

/** A message that cannot be read; grpc-js answers such a request INTERNAL, as grpc-go does. */
export class WireError extends Error {
  override name = 'WireError'
}

/** Bytes of a varint holding n (n up to 2^53: lengths are counted without 32-bit shifts). */
export function varintLength(n: number): number {
  let length = 1
  for (let v = n; v > 0x7f; v = Math.floor(v / 128)) length++
  return length
}

/** Writes n (0 to 2^53) as a varint at `offset`; returns the offset after it. */
export function writeVarint(buf: Uint8Array, offset: number, n: number): number {
  let v = n
  let at = offset
  while (v > 0x7f) {
    buf[at++] = (v % 128) | 0x80
    v = Math.floor(v / 128)
  }
  buf[at++] = v
  return at
}

/** A field's key: its number and wire type. */
export function fieldKey(field: number, wireType: number): number {
  return field * 8 + wireType
}

/** Protobuf bytes of one length-delimited field of this length and number (below 16: a one-byte key); none when empty (proto3 leaves it out). */
export function fieldSize(length: number, field = 1): number {
  return length === 0 ? 0 : varintLength(fieldKey(field, LENGTH_DELIMITED)) + varintLength(length) + length
}

/** Writes a length-delimited field's key and length at `offset`; returns the offset of its bytes. */
export function writeFieldHeader(buf: Uint8Array, offset: number, field: number, length: number): number {
  return writeVarint(buf, writeVarint(buf, offset, fieldKey(field, LENGTH_DELIMITED)), length)
}

/** A message under construction: fields in the order they are added, empty ones left out (proto3 defaults). */
export class MessageWriter {
  private readonly parts: Array<{field: number; bytes?: Uint8Array; varint?: number}> = []
  private size = 0

  /** A bytes, string or message field. */
  bytes(field: number, value: Uint8Array | string): this {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value
    if (bytes.length === 0) return this
    this.parts.push({field, bytes})
    this.size += fieldSize(bytes.length, field)
    return this
  }

  /** A varint field (an enum or an unsigned integer below 2^53). */
  varint(field: number, value: number): this {
    if (value === 0) return this
    this.parts.push({field, varint: value})
    this.size += varintLength(fieldKey(field, VARINT)) + varintLength(value)
    return this
  }

  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.size)
    let at = 0
    for (const part of this.parts) {
      if (part.bytes) {
        at = writeFieldHeader(out, at, part.field, part.bytes.length)
        out.set(part.bytes, at)
        at += part.bytes.length
      } else {
        at = writeVarint(out, writeVarint(out, at, fieldKey(part.field, VARINT)), part.varint!)
      }
    }
    return out
  }
}

/** One field as read: a varint's value, or a length-delimited field's bytes (a view of the message). */
export type WireValue = {wireType: typeof VARINT; value: number} | {wireType: typeof LENGTH_DELIMITED; bytes: Buffer}

/** Reads the fields of a message, calling `onField` for each varint and length-delimited one (the others are skipped). */
export function readMessage(message: Uint8Array, onField: (field: number, value: WireValue) => void): void {
  const buf = Buffer.isBuffer(message) ? message : Buffer.from(message.buffer, message.byteOffset, message.length)
  const reader = {buf, at: 0}
  while (reader.at < buf.length) {
    const key = readVarint(reader)
    const field = Math.floor(key / 8)
    const wireType = key % 8
    if (field === 0) throw new WireError('invalid field number 0')
    if (wireType === END_GROUP) throw new WireError(`unexpected end of group ${field}`)
    if (wireType === VARINT) onField(field, {wireType, value: readVarint(reader)})
    else if (wireType === LENGTH_DELIMITED) onField(field, {wireType, bytes: readLengthDelimited(reader)})
    else skipValue(reader, field, wireType)
  }
}

interface Reader {
  buf: Buffer
  at: number
}

/** A string field's text: proto3 strings are UTF-8, and Go's protobuf refuses a message whose string is not. */
export function readString(bytes: Buffer): string {
  if (!isUtf8(bytes)) throw new WireError('string field contains invalid UTF-8')
  return bytes.toString('utf8')
}

/** A varint of up to 10 bytes; values above 2^53 lose their low bits (fnr's fields are lengths, enums and tags). */
function readVarint(r: Reader): number {
  let value = 0
  let scale = 1
  for (let i = 0; i < 10; i++) {
    if (r.at >= r.buf.length) throw new WireError('message ends inside a varint')
    const b = r.buf[r.at++]!
    value += (b & 0x7f) * scale
    if (b < 0x80) return value
    scale *= 128
  }
  throw new WireError('varint longer than 10 bytes')
}

function readLengthDelimited(r: Reader): Buffer {
  const length = readVarint(r)
  if (length > r.buf.length - r.at) throw new WireError(`field of ${length} bytes runs past the end of the message`)
  const bytes = r.buf.subarray(r.at, r.at + length)
  r.at += length
  return bytes
}

/** Skips one value of a field the caller does not read; a group up to its matching end. */
function skipValue(r: Reader, field: number, wireType: number): void {
  const skipBytes = (n: number): void => {
    if (n > r.buf.length - r.at) throw new WireError('message ends inside a fixed-size field')
    r.at += n
  }
  if (wireType === VARINT) readVarint(r)
  else if (wireType === FIXED64) skipBytes(8)
  else if (wireType === LENGTH_DELIMITED) readLengthDelimited(r)
  else if (wireType === FIXED32) skipBytes(4)
  else if (wireType === START_GROUP) {
    for (;;) {
      if (r.at >= r.buf.length) throw new WireError(`group ${field} has no end`)
      const key = readVarint(r)
      if (key % 8 === END_GROUP) {
        if (Math.floor(key / 8) !== field) throw new WireError(`group ${field} ends as group ${Math.floor(key / 8)}`)
        return
      }
      skipValue(r, Math.floor(key / 8), key % 8)
    }
  } else throw new WireError(`invalid wire type ${wireType}`)
}
