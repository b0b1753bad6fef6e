/**
 * Head-of-line: how long a small call waits while big calls keep the runner busy. Eight workers
 * send 5 MiB calls back to back on one channel; meanwhile small calls go one at a time on another.
 * Used by limits.ts (L1, fnr serve against a bare grpc-js server) and porch-runner.ts (R-P5, fnr
 * serve against Porch's runner in the same run).
 */
import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {bigResourceList} from '../test/support/reliability/hostile.js'
import {percentile, round} from './lib.js'

const SMALL = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n')
export const BIG_CALL_BYTES = 5 * 1024 * 1024
export const BIG_WORKERS = 8

export interface HeadOfLine {
  /** small-call latencies, ms */
  latencies: number[]
  p50: number
  p99: number
  max: number
  /** big calls completed meanwhile */
  bigCalls: number
}

export async function smallWhileBig(address: string, image: string, smallCalls: number, progress?: (line: string) => void): Promise<HeadOfLine> {
  const big = new EvaluatorClient(address, {channelOptions: {'grpc.use_local_subchannel_pool': 1}})
  const small = new EvaluatorClient(address, {channelOptions: {'grpc.use_local_subchannel_pool': 1}})
  const input = bigResourceList(BIG_CALL_BYTES)
  let stop = false
  let bigCalls = 0
  const workers = Array.from({length: BIG_WORKERS}, async () => {
    while (!stop) {
      await big.evaluateRaw(image, input, {deadline: Date.now() + 120_000}).then(
        () => bigCalls++,
        (err: Error) => process.stderr.write(`head-of-line: a big call failed: ${err.message}\n`),
      )
    }
  })
  try {
    await new Promise((r) => setTimeout(r, 1000))
    const latencies: number[] = []
    for (let i = 0; i < smallCalls; i++) {
      const t = performance.now()
      await small.evaluateRaw(image, SMALL, {deadline: Date.now() + 60_000})
      latencies.push(performance.now() - t)
      if (i % 25 === 0) progress?.(`${address}: ${i}/${smallCalls} small calls, ${bigCalls} big`)
    }
    return {latencies, p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(Math.max(...latencies)), bigCalls}
  } finally {
    stop = true
    await Promise.all(workers)
    big.close()
    small.close()
  }
}
