/** Concurrent EvaluateFunction load (the load test and scripts/reliability.mjs). */
import type {EvaluatorClient} from '../../../src/lib/grpc/client.js'
import {SAMPLE_RL} from '../tmp.js'

export interface LoadResult {
  calls: number
  errors: string[]
  wrongAnswers: number
  ms: number
  p50: number
  p99: number
}

/** Sends `calls` concurrent calls to the cat function; every answer must be its own input. */
export async function concurrentLoad(client: EvaluatorClient, image: string, calls: number): Promise<LoadResult> {
  const started = performance.now()
  const latencies: number[] = []
  const errors: string[] = []
  let wrongAnswers = 0
  await Promise.all(
    Array.from({length: calls}, async (_, i) => {
      const input = Buffer.from(`${SAMPLE_RL}# call ${i}\n`)
      const t = performance.now()
      try {
        const res = await client.evaluateRaw(image, input, {deadline: Date.now() + 120_000})
        if (!res.resourceList.equals(input)) wrongAnswers++
      } catch (err) {
        errors.push(`${(err as {code?: number}).code}: ${(err as Error).message}`)
      }
      latencies.push(performance.now() - t)
    }),
  )
  latencies.sort((a, b) => a - b)
  const at = (q: number): number => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!)
  return {calls, errors, wrongAnswers, ms: Math.round(performance.now() - started), p50: at(0.5), p99: at(0.99)}
}
