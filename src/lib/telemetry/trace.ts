/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) propagation, without a tracing SDK:
 * each EvaluateFunction call continues the caller's trace (the `traceparent` gRPC metadata key)
 * or starts one, gets a span id of its own, logs both ids on its request line, and hands
 * `traceparent` with its own span id as the parent to the next hop (runner → function pod's
 * wrapper server). `tracestate` is passed on unchanged. A tracing backend can then join fnr's log
 * lines to the caller's spans by trace id.
 */
import {randomFillSync} from 'node:crypto'

export const TRACEPARENT = 'traceparent'
export const TRACESTATE = 'tracestate'

const PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const ZERO_TRACE = '0'.repeat(32)
const ZERO_SPAN = '0'.repeat(16)

export interface TraceContext {
  traceId: string
  /** This hop's span id. */
  spanId: string
  /** The caller's span id, when the call came with a valid traceparent. */
  parentSpanId?: string
  /** Trace flags (01: sampled). */
  flags: string
  /** The traceparent to send to the next hop (this span as the parent). */
  traceparent: string
  tracestate?: string
}

/** Parses a traceparent header; undefined when it is missing or invalid (then a new trace starts). */
export function parseTraceparent(value: string | undefined): {traceId: string; parentSpanId: string; flags: string} | undefined {
  if (value === undefined) return undefined
  const m = PATTERN.exec(value.trim())
  if (!m) return undefined
  const [, version, traceId, parentSpanId, flags, rest] = m
  // Version ff is forbidden; version 00 has exactly four fields; all-zero ids are invalid.
  if (version === 'ff' || (version === '00' && rest !== undefined) || traceId === ZERO_TRACE || parentSpanId === ZERO_SPAN) return undefined
  return {traceId: traceId!, parentSpanId: parentSpanId!, flags: flags!}
}

/**
 * Random bytes for ids, drawn from a pool filled 4 KiB at a time: one randomBytes() per id
 * cost a trip into the crypto library for every call (a tenth of the server's time when a
 * client opens and resets thousands of streams at once).
 */
const pool = Buffer.alloc(4096)
let poolUsed = pool.length

function randomHex(bytes: number): string {
  if (poolUsed + bytes > pool.length) {
    randomFillSync(pool)
    poolUsed = 0
  }
  const hex = pool.toString('hex', poolUsed, poolUsed + bytes)
  poolUsed += bytes
  return hex
}

function newSpanId(): string {
  for (;;) {
    const id = randomHex(8)
    if (id !== ZERO_SPAN) return id
  }
}

/** Continues the incoming trace (or starts a new, unsampled one) with a new span for this call. */
export function continueTrace(traceparent: string | undefined, tracestate?: string): TraceContext {
  const incoming = parseTraceparent(traceparent)
  const traceId = incoming?.traceId ?? randomHex(16)
  const spanId = newSpanId()
  const flags = incoming?.flags ?? '00'
  return {
    traceId,
    spanId,
    ...(incoming ? {parentSpanId: incoming.parentSpanId} : {}),
    flags,
    traceparent: `00-${traceId}-${spanId}-${flags}`,
    ...(incoming && tracestate ? {tracestate} : {}),
  }
}
