/**
 * fnr's trailers. Both are optional extras for callers that look for them; a Porch server
 * ignores them.
 *
 *   fnr-evaluator       which evaluator answered (exec, pod)
 *   fnr-failure-bin     JSON of a FunctionFailure (exit code, signal, results, stderr tail) when a
 *                       function failed; on success, JSON of {results} when the function
 *                       reported error-severity results
 *   fnr-refused         set on a call refused before it ran, whose request was dropped unread
 *                       (hygiene.ts: "held-bytes"): sending it again cannot run it twice, so
 *                       fnr's client does (client.ts)
 */
import * as grpc from '@grpc/grpc-js'

import type {FunctionFailure} from '../process/failure.js'
import type {FunctionResult} from '../process/results.js'

export const FAILURE_TRAILER = 'fnr-failure-bin'
export const EVALUATOR_TRAILER = 'fnr-evaluator'
export const REFUSED_TRAILER = 'fnr-refused'
/** REFUSED_TRAILER's value for a request refused over the budget of request bytes held. */
export const REFUSED_HELD_BYTES = 'held-bytes'

/** Trailers must stay well under the 8 KiB metadata limit most gRPC clients use by default. */
const MAX_TRAILER_BYTES = 6 * 1024

function shrink<T extends {results: FunctionResult[]; truncated?: boolean}>(value: T): Buffer {
  const json = Buffer.from(JSON.stringify(value))
  if (json.length <= MAX_TRAILER_BYTES) return json
  const copy = {...value, results: [] as FunctionResult[], truncated: true}
  if ('stderrTail' in copy && typeof copy.stderrTail === 'string' && copy.stderrTail.length > 512) {
    ;(copy as {stderrTail: string}).stderrTail = copy.stderrTail.slice(-512)
  }
  // Keep the longest prefix of results that fits. Each result is measured once: re-encoding the
  // whole list per dropped result took 48 s of blocked event loop for 20,000 results.
  let used = Buffer.byteLength(JSON.stringify(copy))
  for (const result of value.results) {
    const size = Buffer.byteLength(JSON.stringify(result)) + 1
    if (used + size > MAX_TRAILER_BYTES) break
    used += size
    copy.results.push(result)
  }
  const cut = Buffer.from(JSON.stringify(copy))
  return cut.length > MAX_TRAILER_BYTES ? Buffer.from(JSON.stringify({...copy, results: [], truncated: true, stderrTail: ''})) : cut
}

export function failureMetadata(failure: FunctionFailure, evaluator?: string): grpc.Metadata {
  const md = new grpc.Metadata()
  md.set(FAILURE_TRAILER, shrink(failure))
  if (evaluator) md.set(EVALUATOR_TRAILER, evaluator)
  return md
}

export function resultsMetadata(results: FunctionResult[], evaluator?: string): grpc.Metadata {
  const md = new grpc.Metadata()
  if (results.length > 0) md.set(FAILURE_TRAILER, shrink({results, truncated: false}))
  if (evaluator) md.set(EVALUATOR_TRAILER, evaluator)
  return md
}

/** Reads the fnr-failure-bin trailer from a status or metadata, if there is one. */
export function readFailure(md: grpc.Metadata | undefined): (Partial<FunctionFailure> & {results: FunctionResult[]}) | undefined {
  const raw = md?.get(FAILURE_TRAILER)[0]
  if (raw === undefined) return undefined
  try {
    return JSON.parse(Buffer.isBuffer(raw) ? raw.toString('utf8') : raw) as Partial<FunctionFailure> & {results: FunctionResult[]}
  } catch {
    return undefined
  }
}
