/**
 * One HTTP exchange over node:http/https (global fetch cannot take a CA per request): a deadline,
 * a body size cap, and an AbortSignal. No retries, redirects or auth here; client.ts adds those.
 */
import http, {type IncomingHttpHeaders} from 'node:http'
import https from 'node:https'

export interface HttpResponse {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
  url: URL
}

export interface HttpRequestOptions {
  method?: 'GET' | 'HEAD' | 'POST'
  headers?: Record<string, string>
  body?: string | Buffer
  agent: http.Agent | https.Agent
  /** Whole-exchange deadline in ms (connect, headers and body). */
  timeoutMs: number
  signal?: AbortSignal
  /** A bigger body fails the request (BodyTooLargeError); error responses are truncated instead. */
  maxBytes: number
  /**
   * Where a 2xx body goes instead of memory (the response's body is then empty): begin() when its
   * headers are in, write() per chunk. With a sink, timeoutMs is an idle timeout, renewed by each
   * chunk, so a large blob may take as long as it needs while it keeps coming.
   */
  sink?: BodySink
}

/** Receives a response body as it arrives (a blob streamed to a file). */
export interface BodySink {
  begin(): void
  write(chunk: Buffer): void
}

/** The request took longer than its deadline. */
export class RequestTimeoutError extends Error {
  readonly code = 'FNR_REQUEST_TIMEOUT'
  constructor(readonly url: string, readonly timeoutMs: number) {
    super(`no response from ${url} within ${formatMs(timeoutMs)}`)
    this.name = 'RequestTimeoutError'
  }
}

/** The response body was larger than allowed. */
export class BodyTooLargeError extends Error {
  readonly code = 'FNR_BODY_TOO_LARGE'
  constructor(readonly url: string, readonly maxBytes: number) {
    super(`response from ${url} is larger than ${maxBytes} bytes`)
    this.name = 'BodyTooLargeError'
  }
}

export function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`
}

export function httpRequest(url: URL, options: HttpRequestOptions): Promise<HttpResponse> {
  return new Promise<HttpResponse>((resolve, reject) => {
    const {signal} = options
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const transport = url.protocol === 'http:' ? http : https
    const headers: Record<string, string> = {...options.headers}
    if (options.body !== undefined) headers['content-length'] = String(Buffer.byteLength(options.body))
    let settled = false
    const finish = (err: unknown, res?: HttpResponse): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      if (err !== undefined) reject(err)
      else resolve(res!)
    }
    // Settled before the request is destroyed: a body that came in one chunk has ended already, and its 'end' resolved.
    const fail = (err: Error): void => {
      finish(err)
      req.destroy(err)
    }
    const req = transport.request(url, {method: options.method ?? 'GET', headers, agent: options.agent}, (res) => {
      const chunks: Buffer[] = []
      let size = 0
      const status = res.statusCode ?? 0
      const isError = status < 200 || status >= 300
      const limit = isError ? Math.min(options.maxBytes, 64 * 1024) : options.maxBytes
      let truncated = false
      const sink = isError ? undefined : options.sink
      sink?.begin()
      res.on('data', (chunk: Buffer) => {
        if (truncated || settled) return
        size += chunk.length
        if (sink !== undefined && size <= limit) {
          armTimer()
          try {
            sink.write(chunk)
          } catch (err) {
            fail(err as Error)
          }
          return
        }
        if (size > limit) {
          if (!isError) {
            fail(new BodyTooLargeError(url.href, options.maxBytes))
            return
          }
          chunks.push(chunk.subarray(0, chunk.length - (size - limit)))
          truncated = true
          res.destroy()
          finish(undefined, {status, headers: res.headers, body: Buffer.concat(chunks), url})
          return
        }
        chunks.push(chunk)
      })
      res.on('end', () => finish(undefined, {status, headers: res.headers, body: Buffer.concat(chunks), url}))
      res.on('error', (err) => finish(err))
      res.on('close', () => {
        if (!res.complete) finish(Object.assign(new Error(`connection to ${url.host} closed before the response ended`), {code: 'ECONNRESET'}))
      })
    })
    const onAbort = (): void => {
      req.destroy()
      finish(signal!.reason)
    }
    let timer: NodeJS.Timeout | undefined
    const armTimer = (): void => {
      clearTimeout(timer)
      timer = setTimeout(() => fail(new RequestTimeoutError(url.href, options.timeoutMs)), options.timeoutMs)
    }
    armTimer()
    signal?.addEventListener('abort', onAbort, {once: true})
    req.on('error', (err) => finish(err))
    req.end(options.body)
  })
}
