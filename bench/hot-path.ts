/**
 * H: what `fnr serve`'s exec path does per call besides the function itself, piece by piece, in
 * one process: logging, metrics, tracing, budget accounting and the response-cache lookup (the
 * gRPC layer's share, src/lib/grpc/server.ts), and the exec runtime's own steps (the binary
 * re-check, the function's environment and its request to the native helper, the end-of-call
 * sweep). Each piece runs `--calls` times with the inputs of a 1 KiB call to a /bin/cat function,
 * in rounds (the median round is reported, in µs of CPU per call: an awaited piece may also wait
 * for a timer, which is not work); the sweep is measured for one call.
 *
 *   node --import tsx bench/hot-path.ts [--calls 20000] [--rounds 7] [--out NAME (bench/results/NAME.json; hot-path)]
 *
 * The target (docs/performance.md, "What a call costs besides its function"): logging, metrics,
 * tracing, budget accounting and the cache lookup together under 0.1 ms (100 µs) per call on the
 * default configuration.
 */
import {spawnSync} from 'node:child_process'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {copyFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {parseArgs} from 'node:util'

import {CallBudget, deriveBudget} from '../src/lib/budget.js'
import {CachingEvaluator, DEFAULT_RESPONSE_CACHE} from '../src/lib/cache/response-cache.js'
import {loadExecConfig} from '../src/lib/config/exec-config.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from '../src/lib/evaluator.js'
import {binaryIdentity, ExecEvaluator} from '../src/lib/evaluators/exec.js'
import {createLogger} from '../src/lib/telemetry/log.js'
import {createMetrics, NO_METRICS} from '../src/lib/telemetry/metrics.js'
import {continueTrace} from '../src/lib/telemetry/trace.js'
import {ProcessLauncher} from '../src/lib/process/launcher.js'
import {nativeRequest} from '../src/lib/process/native-spawner.js'
import {execEnvironment} from '../src/lib/process/run.js'
import {CALL_MARKER_ENV, newCallMarker, sweep} from '../src/lib/process/sweep.js'
import {makeResourceList} from './fixture.js'
import {loadAverage, median, round, saveResults} from './lib.js'

const {values} = parseArgs({options: {calls: {type: 'string', default: '20000'}, rounds: {type: 'string', default: '7'}, out: {type: 'string', default: 'hot-path'}}})
const CALLS = Number(values.calls)
const ROUNDS = Number(values.rounds)

/** µs of CPU per call of `fn` (this process's user + system time), the median of ROUNDS rounds of CALLS calls (a warm-up round first). */
async function perCall(fn: (i: number) => unknown): Promise<number> {
  const rounds: number[] = []
  for (let r = -1; r < ROUNDS; r++) {
    const cpu = process.cpuUsage()
    for (let i = 0; i < CALLS; i++) {
      const v = fn(i)
      if (v instanceof Promise) await v
    }
    const used = process.cpuUsage(cpu)
    if (r >= 0) rounds.push((used.user + used.system) / CALLS)
  }
  return round(median(rounds), 3)
}

const input = makeResourceList(3, 340)
const image = 'example.com/cat:v1'
const loadBefore = loadAverage()
const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-hot-path-'))
try {
  copyFileSync('/bin/cat', path.join(dir, 'cat'))
  await writeFile(path.join(dir, 'config.yaml'), `functions:\n- function: cat\n  images: [${image}]\n`)
  const config = await loadExecConfig({configPath: path.join(dir, 'config.yaml'), functionsDir: dir})
  const fn = config.lookup(image)!

  const rows: Array<{piece: string; owner: string; usPerCall: number; onByDefault: boolean; note?: string}> = []
  const add = (piece: string, owner: string, usPerCall: number, onByDefault: boolean, note?: string): void => {
    rows.push({piece, owner, usPerCall, onByDefault, ...(note ? {note} : {})})
    process.stderr.write(`${piece}: ${usPerCall} µs\n`)
  }

  // Logging: the default level (info, 2) only asks whether the request line is on.
  const quiet = createLogger({verbosity: 2, name: 'bench', destination: 1})
  add('log: request line off (default --log-level)', 'telemetry/log.ts', await perCall(() => quiet.enabled(3)), true)
  const devnull = (await import('node:fs')).openSync('/dev/null', 'w')
  const loud = createLogger({verbosity: 3, name: 'bench', destination: devnull})
  add('log: request line on (--log-level 3), to /dev/null', 'telemetry/log.ts', await perCall(() => {
    if (loud.enabled(3)) loud.request('EvaluateFunction', {image, bytesIn: input.length, bytesOut: input.length, code: 0, evaluator: 'exec', ms: 3.1, traceId: 'a'.repeat(32), spanId: 'b'.repeat(16)})
  }), false)

  // Metrics: without --metrics-port the process has the no-op metrics.
  add('metrics: evaluation, no --metrics-port', 'telemetry/metrics.ts', await perCall(() => NO_METRICS.evaluation('exec', image, 'OK', 0.003)), true)
  const prom = await createMetrics({defaultMetrics: false})
  add('metrics: evaluation, with --metrics-port', 'telemetry/metrics.ts', await perCall(() => prom.evaluation('exec', image, 'OK', 0.003)), false)

  // Tracing: without OpenTelemetry every call still gets ids for its log line.
  add('trace: context without a traceparent (OpenTelemetry off)', 'telemetry/trace.ts', await perCall(() => continueTrace(undefined, undefined)), true)
  const parent = `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01`
  add('trace: context continuing a traceparent', 'telemetry/trace.ts', await perCall(() => continueTrace(parent, undefined)), false)

  // Budget accounting: admit and release one call (a settled promise: one microtask).
  const budget = new CallBudget(deriveBudget(), quiet)
  add('budget: admit + release (claimReception, admit, release)', 'budget.ts (lead)', await perCall(async () => {
    const handover = budget.claimReception(undefined)
    const release = await budget.admit(input.length, image, undefined, {client: '127.0.0.1', connection: 'c1', handover})
    release()
  }), true)

  // Response cache: off by default (not in the evaluator chain); on: identify, hash, look up.
  const answer: EvaluationResponse = {resourceList: input, log: Buffer.alloc(0), evaluator: 'exec'}
  const stub: Evaluator = {name: 'exec', evaluate: async () => answer, identify: async () => binaryIdentity(fn.binary), close: async () => {}}
  const cache = new CachingEvaluator({inner: stub, settings: {...DEFAULT_RESPONSE_CACHE, ttlMs: 60_000}})
  const request: EvaluationRequest = {image, resourceList: input}
  await cache.evaluate(request)
  add('response cache: hit (--cache-ttl set): identify (stat) + sha256 of 1 KiB + lookup', 'cache/response-cache.ts', await perCall(() => cache.evaluate(request)), false)
  await cache.close()

  // The exec runtime's own per-call steps.
  const evaluator = new ExecEvaluator({config, maxOutputBytes: 6 << 20, launcher: new ProcessLauncher()})
  add('exec: binary re-check (one stat while the binary is unchanged)', 'evaluators/exec.ts', await perCall(() => (evaluator as unknown as {recheck(i: string, f: typeof fn): void}).recheck(image, fn)), true)
  const env = execEnvironment()
  add('exec: environment + marker + the native helper\'s request', 'process/run.ts, native-spawner.ts', await perCall((i) => nativeRequest(i, {command: fn.binary, args: [], env: {...env, [CALL_MARKER_ENV]: newCallMarker()}, cwd: dir})), true)

  // The sweep a call paid at its end before (now only when the native helper saw something left):
  // one target whose function process (a /bin/true just run) is gone, the common case.
  const sweeps: number[] = []
  const sweepCpu: number[] = []
  for (let r = 0; r < 50; r++) {
    const startedAt = Date.now()
    const fnPid = spawnSync('/bin/true').pid
    const t = performance.now()
    const cpu = process.cpuUsage()
    await sweep([{marker: `${process.pid}.bench${r}`, pid: fnPid, startedAt}])
    const used = process.cpuUsage(cpu)
    sweeps.push((performance.now() - t) * 1000)
    sweepCpu.push(used.user + used.system)
  }
  add('exec: end-of-call /proc sweep, CPU (off the response path; now skipped when the helper saw nothing left)', 'process/sweep.ts', round(median(sweepCpu), 1), false, `wall ${round(median(sweeps), 1)} µs; before this change every call paid one (coalesced when calls end together)`)

  const total = (names: string[]): number => round(rows.filter((r) => names.includes(r.piece)).reduce((s, r) => s + r.usPerCall, 0), 3)
  const defaults = rows.filter((r) => r.onByDefault && /^(log|metrics|trace|budget|response cache)/.test(r.piece)).map((r) => r.piece)
  const summary = {
    telemetryBudgetCacheDefaultUs: total(defaults),
    targetUs: 100,
  }
  const result = {date: new Date().toISOString(), node: process.version, calls: CALLS, rounds: ROUNDS, loadBefore, loadAfter: loadAverage(), rows, summary}
  const file = await saveResults(values.out!, result)
  console.log(JSON.stringify({summary, file}, null, 1))
  console.table(rows.map(({piece, owner, usPerCall, onByDefault}) => ({piece, owner, usPerCall, onByDefault})))
} finally {
  await rm(dir, {recursive: true, force: true})
}
