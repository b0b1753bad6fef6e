/**
 * The EvaluateFunctionResponse on the wire: what fits in one (the function's output and as much
 * of its stderr, the `log`, as the maximum message size leaves room for) and its bytes.
 *
 * gRPC's message limit applies to the protobuf bytes of the response (grpc-js compares the
 * serialized message, without its 5-byte frame header, with grpc.max_send_message_length; a
 * grpc-go client does the same on receive). The response is field 1 (resource_list) and field 2
 * (log): one tag byte and a varint length each, and an empty field is left out, as Go's protobuf
 * does, so Porch's runner and fnr send the same bytes. For a 6 MiB limit that is 1 + 4 = 5 bytes
 * around an output with an empty log, so an output of up to max - 5 bytes is sent. (fnr used to
 * write the empty log too, 2 bytes more: outputs of max - 6 and max - 5 bytes, which Porch's
 * runner sends, were refused; and before that a flat 64 bytes were reserved.) docs/process.md.
 */
import type * as grpc from '@grpc/grpc-js'

import {FnrError} from '../errors.js'
import {claimHeadroom, type Headroom} from '../headroom.js'
import {encodeResponse, type EvaluateFunctionResponse} from './proto.js'
import {fieldSize, varintLength, writeFieldHeader} from './wire.js'

/** Field 1 (resource_list) and field 2 (log) of EvaluateFunctionResponse, length-delimited. */
const RESOURCE_LIST_FIELD = 1
const LOG_FIELD = 2

/** The most bytes a length-delimited field's tag and length take (a length below 2^32: 1 + 5). */
const MAX_FIELD_HEADER = 1 + varintLength(0xffff_ffff)

/** gRPC's message prefix: a compressed-flag byte and the message length (32 bits, big-endian). */
const GRPC_PREFIX = 5

/**
 * The room a response needs around a function's output to be written in place: gRPC's prefix and
 * a field header in front of it, and behind it a field header and the log (which is at most the
 * stderr the process runner adds to `after`, unless the log was cut and carries a notice; then it
 * is copied). Asked of the process runner through EvaluationRequest.outputHeadroom.
 */
export const REPLY_HEADROOM: Readonly<Headroom> = Object.freeze({before: GRPC_PREFIX + MAX_FIELD_HEADER, after: MAX_FIELD_HEADER})

/**
 * Serialized responses written with gRPC's prefix in front of them: message -> prefix and message.
 * One map per process, whatever loads this module: grpc-js's framing is replaced once per process
 * (internals.ts) with the takePrefixed of whoever came first, and a test run can load this module
 * twice (mocha requires a spec, or imports it when that fails).
 */
const prefixed: WeakMap<Buffer, Buffer> = ((globalThis as Record<symbol, unknown>)[Symbol.for('fnr.prefixedResponses')] ??= new WeakMap<Buffer, Buffer>()) as WeakMap<Buffer, Buffer>

/**
 * The message with gRPC's prefix, when the serializer wrote one in front of it (the output had
 * room); undefined otherwise. Taken once: grpc-js's framing (internals.ts) asks for it, and
 * copies the message behind a prefix of its own when there is none.
 */
export function takePrefixed(message: Buffer): Buffer | undefined {
  const framed = prefixed.get(message)
  if (framed !== undefined) prefixed.delete(message)
  return framed
}

/** Protobuf bytes of a response with this output and a log of this length. */
export function responseSize(outputLength: number, logLength: number): number {
  return fieldSize(outputLength) + fieldSize(logLength)
}

/** The largest log length that fits after an output of this length, or -1 when the output alone does not fit. */
export function logRoom(maxMessageSize: number, outputLength: number): number {
  const free = maxMessageSize - fieldSize(outputLength)
  if (free < 0) return -1
  // A log needs its tag byte and length besides its bytes.
  let room = Math.max(0, free - 1 - varintLength(free))
  while (fieldSize(room + 1) <= free) room++
  while (room > 0 && fieldSize(room) > free) room--
  return room
}

/** The notice put in front of a log whose start was cut. */
export function logCutNotice(leftOut: number): string {
  return `[fnr: the first ${leftOut} bytes of this function's stderr were left out to fit the maximum message size; the rest follows]\n`
}

/**
 * The log to send with an evaluator's answer: all of it when it fits beside the output, else a
 * notice saying how much was cut and the end of the log that fits behind it. `logDropped` counts
 * bytes of stderr dropped before (the process runner keeps at most the message size). Throws
 * ResourceExhausted, naming `label`, when the output itself does not fit.
 */
export function fitLog(maxMessageSize: number, label: string, answer: {resourceList: Uint8Array; log: Buffer; logDropped?: number}): Buffer {
  const {resourceList: output, log, logDropped: droppedBefore = 0} = answer
  const room = logRoom(maxMessageSize, output.length)
  if (room < 0) {
    throw new FnrError(
      'ResourceExhausted',
      `function ${JSON.stringify(label)} returned ${output.length} bytes, more than fit in the maximum message size ${maxMessageSize} (the response adds ${responseSize(output.length, 0) - output.length} bytes of framing)`,
    )
  }
  if (log.length <= room && droppedBefore === 0) return log
  // the notice's own length depends on the number in it: size it for the largest possible number
  const notice = (left: number): Buffer => Buffer.from(logCutNotice(left))
  const longest = notice(droppedBefore + log.length).length
  if (longest >= room) return Buffer.alloc(0)
  const keep = Math.min(log.length, room - longest)
  return Buffer.concat([notice(droppedBefore + log.length - keep), log.subarray(log.length - keep)])
}

/** Writes one length-delimited field at `offset`; an empty one is left out. Returns the offset after it. */
function writeField(message: Buffer, offset: number, field: number, bytes: Buffer): number {
  if (bytes.length === 0) return offset
  const at = writeFieldHeader(message, offset, field, bytes.length)
  bytes.copy(message, at)
  return at + bytes.length
}

/**
 * The response serializer. The bytes are those Go's protobuf writes (Porch's runner): resource_list,
 * then log, each left out when empty (proto3 bytes fields at their default); fnr once wrote an
 * empty log as 2 bytes, which made an output of max - 6 or max - 5 bytes that Porch's
 * runner sends too large. An output with room around it (REPLY_HEADROOM, headroom.ts: the process
 * runner leaves it when it joins the output from several chunks) gets the field headers, the log
 * and gRPC's prefix written there, and the message is a view of that memory, so a large output is
 * not copied once more, neither here nor into grpc-js's frame (takePrefixed). Anything else goes
 * to `fallback` (the protocol's own encoder, proto.ts), which writes the same bytes into a new
 * buffer.
 */
export function framedResponseSerializer(fallback: grpc.serialize<EvaluateFunctionResponse> = encodeResponse): grpc.serialize<EvaluateFunctionResponse> {
  return (value) => {
    const {resourceList, log} = value
    if (!Buffer.isBuffer(resourceList) || !Buffer.isBuffer(log)) return fallback(value)
    const room = claimHeadroom(resourceList)
    const head = resourceList.length === 0 ? 0 : 1 + varintLength(resourceList.length)
    const tail = fieldSize(log.length)
    if (room !== undefined && room.after >= tail && head <= room.before && head > 0) {
      const message = Buffer.from(resourceList.buffer, resourceList.byteOffset - head, head + resourceList.length + tail)
      // the output is in place already, behind its header
      writeField(message, writeFieldHeader(message, 0, RESOURCE_LIST_FIELD, resourceList.length) + resourceList.length, LOG_FIELD, log)
      if (room.before >= head + GRPC_PREFIX) {
        const framed = Buffer.from(message.buffer, message.byteOffset - GRPC_PREFIX, GRPC_PREFIX + message.length)
        framed[0] = 0 // not compressed
        framed.writeUInt32BE(message.length, 1)
        prefixed.set(message, framed)
      }
      return message
    }
    return fallback(value)
  }
}
