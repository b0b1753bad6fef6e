/**
 * Kubernetes API failures as FnrErrors: a short one-line message (the Status message the API
 * server sent, never client-node's dump of headers and body), the HTTP status and the Status
 * reason in details, and the original error as the cause.
 */
import {FnrError, firstLine, type ErrorKind} from '../errors.js'

/** The HTTP status of a client-node error (ApiException.code, or statusCode on watch errors). */
export function apiStatusCode(err: unknown): number | undefined {
  if (err instanceof FnrError) {
    const s = err.details.status
    return typeof s === 'number' ? s : undefined
  }
  const e = err as {code?: unknown; statusCode?: unknown} | null
  for (const v of [e?.code, e?.statusCode]) if (typeof v === 'number' && v >= 100 && v < 600) return v
  return undefined
}

interface StatusBody {
  message?: string
  reason?: string
}

function parseBody(err: unknown): StatusBody {
  const body = (err as {body?: unknown} | null)?.body
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as unknown
      if (parsed && typeof parsed === 'object') return parsed as StatusBody
    } catch {
      return {message: body.split('\n', 1)[0]}
    }
  } else if (body && typeof body === 'object') {
    return body as StatusBody
  }
  return {}
}

/** The Status reason of an API error (AlreadyExists, Conflict, NotFound, …), if the body had one. */
export function apiStatusReason(err: unknown): string | undefined {
  if (err instanceof FnrError) return err.details.reason
  return parseBody(err).reason
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED', 'UND_ERR_SOCKET'])

/**
 * The error that says what went wrong on the network: client-node 2 (undici's fetch) throws
 * "fetch failed" with the socket's error as its `cause` (an AggregateError's first when it tried
 * several addresses); 1.x threw the socket's error, or one carrying its code. The innermost of
 * at most four such links.
 */
function networkCause(err: unknown): {message?: unknown; code?: unknown} | null {
  let e = err as {message?: unknown; code?: unknown; cause?: unknown; errors?: unknown} | null
  for (let i = 0; i < 4 && e !== null && typeof e === 'object'; i++) {
    const next = e.cause ?? (Array.isArray(e.errors) ? e.errors[0] : undefined)
    if (next === undefined || next === null || typeof next !== 'object') break
    e = next as typeof e
  }
  return e
}

/** True for failures worth another try: 429, 5xx, and network errors. */
export function isRetryableApiError(err: unknown): boolean {
  const status = apiStatusCode(err)
  if (status !== undefined) return status === 429 || status >= 500
  if (err instanceof FnrError) return err.kind === 'Unavailable'
  const code = (err as {code?: unknown} | null)?.code ?? networkCause(err)?.code
  return typeof code === 'string' && NETWORK_CODES.has(code)
}

function kindFor(status: number | undefined): ErrorKind {
  if (status === undefined) return 'Unavailable'
  if (status === 401) return 'Unauthenticated'
  if (status === 403) return 'PermissionDenied'
  if (status === 404) return 'NotFound'
  if (status === 409) return 'FailedPrecondition'
  if (status === 400 || status === 422) return 'InvalidArgument'
  if (status === 429 || status >= 500) return 'Unavailable'
  return 'Internal'
}

/** What an error without a Kubernetes Status body says: the network failure under it, or its own first line. */
function errorReason(err: unknown, status: number | undefined): string {
  // "fetch failed" says nothing: the socket's own error does ("connect ECONNREFUSED …").
  const inner = status === undefined ? networkCause(err) : null
  const cause = inner !== err ? inner : null
  const code = (err as {code?: unknown} | null)?.code ?? cause?.code
  const own = err instanceof Error ? err.message : String(err)
  const text = typeof cause?.message === 'string' && cause.message.length > 0 ? cause.message : own
  // ApiException's message starts "HTTP-Code: 500\nMessage: …\nBody: …"; keep only the status.
  const reason = status !== undefined && own.startsWith('HTTP-Code:') ? `HTTP ${status}` : firstLine(text, 200)
  return typeof code === 'string' && !reason.includes(code) ? `${reason} (${code})` : reason
}

/**
 * Wraps an API error: "<what>: <reason>". An FnrError passes through unchanged. A 404 stays
 * NotFound here; callers that must never answer NotFound (the pod evaluator) re-kind it.
 */
export function kubeError(err: unknown, what: string): FnrError {
  if (err instanceof FnrError) return err
  const status = apiStatusCode(err)
  const body = parseBody(err)
  let reason = body.message ?? ''
  if (reason === '') reason = errorReason(err, status)
  if (status !== undefined && !reason.includes(String(status))) reason = `${reason} (HTTP ${status})`
  return new FnrError(kindFor(status), `${what}: ${firstLine(reason, 300)}`, {cause: err, details: {status, reason: body.reason}})
}
