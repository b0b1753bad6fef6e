/**
 * fnr's trailers. Both are optional extras for callers that look for them; a Porch server
 * ignores them.
 *
 *   fnr-evaluator       which evaluator answered (exec, pod)
 *   fnr-failure-bin     JSON of a FunctionFailure (exit code, signal, results, stderr tail) when a
 *                       function failed; on success, JSON of {results} when the function
 *                       reported error-severity results
 */
import * as grpc from '@grpc/grpc-js'

import type {FunctionFailure} from '../process/failure.js'
import type {FunctionResult} from '../process/results.js'

export const FAILURE_TRAILER = 'fnr-failure-bin'
export const EVALUATOR_TRAILER = 'fnr-evaluator'

/** Trailers must stay well under the 8 KiB metadata limit most gRPC clients use by default. */
const MAX_TRAILER_BYTES = 6 * 1024

function shrink<T extends {results: FunctionResult[]; truncated?: boolean}>(value: T): Buffer {
  let json = Buffer.from(JSON.stringify(value))
  const copy = {...value, results: [...value.results]}
  while (json.length > MAX_TRAILER_BYTES && copy.results.length > 0) {
    copy.results.pop()
    copy.truncated = true
    if ('stderrTail' in copy && typeof copy.stderrTail === 'string' && copy.stderrTail.length > 512) {
      ;(copy as {stderrTail: string}).stderrTail = copy.stderrTail.slice(-512)
    }
    json = Buffer.from(JSON.stringify(copy))
  }
  return json.length > MAX_TRAILER_BYTES ? Buffer.from(JSON.stringify({...copy, results: [], truncated: true, stderrTail: ''})) : json
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
