/**
 * What fits in one EvaluateFunctionResponse (issue 16 item 6): the function's output and as much
 * of its stderr (the `log`) as the maximum message size leaves room for.
 *
 * gRPC's message limit applies to the protobuf bytes of the response (grpc-js compares the
 * serialized message, without its 5-byte frame header, with grpc.max_send_message_length; a
 * grpc-go client does the same on receive). The response is field 1 (resource_list) and field 2
 * (log): one tag byte and a varint length each, and an empty field is left out, as Go's protobuf
 * does (grpc/server.ts), so Porch's runner and fnr send the same bytes. For a 6 MiB limit that is
 * 1 + 4 = 5 bytes around an output with an empty log, so an output of up to max - 5 bytes is sent.
 * (fnr used to write the empty log too, 2 bytes more: outputs of max - 6 and max - 5 bytes, which
 * Porch's runner sends, were refused; and before that a flat 64 bytes were reserved.)
 */
import {FnrError} from '../errors.js'

export function varintLength(n: number): number {
  let length = 1
  for (let v = n; v > 0x7f; v = Math.floor(v / 128)) length++
  return length
}

/** Protobuf bytes of one length-delimited field of this length: none when it is empty (left out). */
export function fieldSize(length: number): number {
  return length === 0 ? 0 : 1 + varintLength(length) + length
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
 * The log to send with an output: all of it when it fits, else a notice saying how much was cut
 * and the end of the log that fits behind it. `droppedBefore` counts bytes of stderr dropped
 * before (run.ts keeps at most the message size). Throws ResourceExhausted when the output
 * itself does not fit.
 */
export function fitLog(maxMessageSize: number, label: string, output: Uint8Array, log: Buffer, droppedBefore = 0): Buffer {
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
