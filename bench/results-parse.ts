/**
 * Reading the results of a failing function's output (process/results.ts) on hostile and large
 * shapes (docs/process.md, "Reading results: bounded work whatever the output"): time, heap growth and peak RSS, each shape in a fresh Node process.
 *
 *   node --import tsx bench/results-parse.ts            all shapes
 *   node --import tsx bench/results-parse.ts SHAPE      one shape (prints one JSON line)
 */
import {spawnSync} from 'node:child_process'
import {fileURLToPath} from 'node:url'

import {readResults} from '../src/lib/process/results.js'
import {functionFailedError} from '../src/lib/process/failure.js'
import {HOSTILE_OUTPUTS} from '../test/support/reliability/hostile-outputs.js'

export const SHAPES = HOSTILE_OUTPUTS

async function measureOne(shape: string): Promise<void> {
  const stdout = Buffer.from(SHAPES[shape]!())
  const heapBefore = process.memoryUsage().heapUsed
  const started = performance.now()
  const error = await functionFailedError('example.com/fn:v1', {stdout, stderr: Buffer.from('boom\n'), exitCode: 1, signal: null, stderrTruncated: false, durationMs: 1})
  const ms = performance.now() - started
  const heapAfter = process.memoryUsage().heapUsed
  const results = (await readResults(stdout)).length
  console.log(
    JSON.stringify({
      shape,
      bytes: stdout.length,
      ms: Math.round(ms),
      heapGrowthMB: Math.round((heapAfter - heapBefore) / 1e5) / 10,
      peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
      results,
      messageBytes: Buffer.byteLength(error.message),
    }),
  )
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const only = process.argv[2]
  if (only) await measureOne(only)
  else {
    for (const shape of Object.keys(SHAPES)) {
      const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), shape], {encoding: 'utf8', timeout: 600_000})
      process.stdout.write(r.stdout || `{"shape":"${shape}","failed":${JSON.stringify((r.stderr || String(r.signal)).slice(-300))}}\n`)
    }
  }
}
