/** Bounded retries of Kubernetes API calls (429, 5xx, network errors), never past a deadline. */
import {FnrError} from '../errors.js'
import {isRetryableApiError, kubeError} from './errors.js'

export interface RetryOptions {
  /** Used in the error message: "<what>: <reason>". */
  what: string
  /** Absolute deadline (ms since the epoch). */
  deadline?: number
  /** Total attempts (default 4). */
  attempts?: number
  /** First back-off (default 200 ms), doubled each time, capped at 2 s. */
  delayMs?: number
  signal?: AbortSignal
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const timer = setTimeout(done, Math.max(0, ms))
    function done(): void {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, {once: true})
  })
}

export async function withApiRetries<T>(fn: () => Promise<T>, options: RetryOptions): Promise<T> {
  const attempts = Math.max(1, options.attempts ?? 4)
  let delay = options.delayMs ?? 200
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      const left = options.deadline === undefined ? Infinity : options.deadline - Date.now()
      if (attempt >= attempts || !isRetryableApiError(err) || left <= delay || options.signal?.aborted) {
        throw err instanceof FnrError ? err : kubeError(err, options.what)
      }
      await sleep(delay, options.signal)
      delay = Math.min(delay * 2, 2000)
    }
  }
}
