/**
 * P1: EvaluateFunction latency through `fnr serve` (exec runtime) versus spawning the same binary
 * directly with the same stdin, environment and working directory, keeping its stdout as serve
 * does, interleaved in one run.
 * Also P6 (idle): the RSS of a freshly started `fnr serve`.
 */
import {idleRssRows, percentile, round, timedSpawn, type Row} from './lib.js'
import {makeResourceList, startExecServe, type FunctionUnderTest} from './fixture.js'

// bench/wrapper.ts and older callers import these from here.
export {makeResourceList, startServe, type FunctionUnderTest, type ServeHandle} from './fixture.js'

export async function benchServeExec(functions: FunctionUnderTest[], iterations: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  const fx = await startExecServe(functions)
  try {
    const idle = await idleRssRows(fx.serve.pid, 'exec runtime', 'with the pod runtime too: the P6 rows of P5')
    rows.push(...idle.rows)
    raw.idleRss = idle.settled
    raw.idleRssJustStarted = idle.justStarted
    const input = makeResourceList(3)
    for (const fn of functions) {
      const image = fx.image(fn.name)
      const binary = fx.binary(fn.name)
      for (let i = 0; i < 10; i++) {
        await fx.client.evaluateRaw(image, input)
        await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true})
      }
      const viaServe: number[] = []
      const direct: number[] = []
      for (let i = 0; i < iterations; i++) {
        // Alternate which goes first, so neither always runs right after the other.
        if (i % 2 === 0) direct.push(await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true}))
        const t0 = performance.now()
        await fx.client.evaluateRaw(image, input)
        viaServe.push(performance.now() - t0)
        if (i % 2 === 1) direct.push(await timedSpawn(binary, [], input, {...fx.spawnOptions, collect: true}))
      }
      const p50 = round(percentile(viaServe, 50))
      const base = round(percentile(direct, 50))
      const added = round(p50 - base)
      rows.push({
        case: `P1 serve exec (${fn.name}) vs direct spawn`,
        p50,
        p95: round(percentile(viaServe, 95)),
        baselineP50: base,
        baselineP95: round(percentile(direct, 95)),
        added,
        unit: 'ms',
        target: '≤ 2 ms added at p50',
        met: added <= 2,
      })
      raw[`p1-${fn.name}`] = {viaServe, direct}
    }
  } finally {
    await fx.close()
  }
  return {rows, raw}
}
