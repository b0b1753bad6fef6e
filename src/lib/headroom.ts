/**
 * Buffers with free bytes around them. Whoever copies several chunks into one new buffer anyway
 * can leave room in front of the bytes and behind them; a later writer that wraps the bytes (a
 * header before, more bytes after) then writes into that room instead of copying the bytes once
 * more. The room belongs to the first one who claims it: the second claim of the same buffer, and
 * the claim of any other buffer, get nothing.
 */

/** Bytes free in front of a buffer's bytes (`before`) and behind them (`after`). */
export interface Headroom {
  before: number
  after: number
}

const rooms = new WeakMap<Buffer, Headroom>()

/**
 * Joins chunks (`size` bytes in all) into one buffer of its own memory (not the pool's) with the
 * given room around them. One chunk or none is passed on as it is, without room.
 */
export function joinWithHeadroom(chunks: readonly Buffer[], size: number, room: Headroom): Buffer {
  if (chunks.length <= 1) return chunks[0] ?? Buffer.alloc(0)
  const store = Buffer.allocUnsafeSlow(room.before + size + room.after)
  let offset = room.before
  for (const chunk of chunks) {
    chunk.copy(store, offset)
    offset += chunk.length
  }
  const bytes = store.subarray(room.before, room.before + size)
  if (room.before > 0 || room.after > 0) rooms.set(bytes, {before: room.before, after: room.after})
  return bytes
}

/** The room around a buffer from joinWithHeadroom, which the caller may then write, once; undefined otherwise. */
export function claimHeadroom(bytes: Buffer): Headroom | undefined {
  const room = rooms.get(bytes)
  if (room !== undefined) rooms.delete(bytes)
  return room
}
