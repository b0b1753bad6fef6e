/**
 * The long load and soak run of scripts/reliability.mjs, against a real `fnr serve` process
 * (built CLI): rounds of N concurrent calls, then a soak of a given duration that keeps a mix of
 * good calls, bad inputs, faulty functions (hostile outputs among them), deadlines and cancels in flight. It samples the
 * server's RSS, open file descriptors and processes every 250 ms and exits non-zero when a call
 * failed unexpectedly, the server stopped answering, something was left behind, or the soak's
 * last third grew beyond its first third after the warm-up (soak-judge.ts: RSS max(10 %, 16 MiB),
 * fds max(10 %, 8), processes max(10 %, 4)).
 *
 * The server runs inside a memory cgroup with the limit manifests/deployment.yaml sets (1 GiB), as
 * in its container, when the machine allows (root and a memory controller; `--no-cgroup` to run it
 * bare): OOM kills in the cgroup fail the run. A health check every 50 ms from a process of its own
 * measures the server's stalls (hostile.ts, probeHealth): one over 1 s of the server's own time
 * fails the run.
 *
 *   node --import tsx test/support/reliability/long-run.ts --rounds 5 --calls 1000 --soak 60s
 *   … --pods            then the same against the pod runtime on the Kubernetes test bed
 *                       (pod-long-run.ts; --pod-soak DURATION, default the --soak duration)
 */
import {readdirSync, readFileSync} from 'node:fs'

import * as grpc from '@grpc/grpc-js'

import {EvaluatorClient} from '../../../src/lib/grpc/client.js'
import {checkHealth, healthClient} from '../health.js'
import {SAMPLE_RL, TempDirs} from '../tmp.js'
import {makeReliabilityFunctions, type FunctionsDir} from './functions.js'
import {imageCases, payloadCases} from './inputs.js'
import {concurrentLoad} from './load.js'
import {killAllUnder, leftoversAfter, processesUnder, resourceUsage} from './processes.js'
import {createMemoryCgroup, deploymentMemoryLimit, memoryCgroupProblem, startInCgroup} from './cgroup.js'
import {probeHealth, type ProbeResult} from './hostile.js'
import {HOSTILE_OUTPUTS, hostileInput} from './hostile-outputs.js'
import {freePort, startServeChild} from './serve-process.js'
import {judgeSoak, soakWarmupMs, startProcSampler} from './soak-judge.js'

interface Options {
  rounds: number
  calls: number
  soakMs: number
  concurrency: number
  pods: boolean
  podSoakMs?: number
  cgroup: boolean
}

function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text)
  if (!m) throw new Error(`expected a duration like 90s, 10m or 1h, got ${JSON.stringify(text)}`)
  return Number(m[1]) * {ms: 1, s: 1000, m: 60_000, h: 3_600_000}[m[2] as 'ms' | 's' | 'm' | 'h']
}

function parseOptions(argv: string[]): Options {
  const o: Options = {rounds: 5, calls: 1000, soakMs: 60_000, concurrency: 64, pods: false, cgroup: true}
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split('=', 2) as [string, string | undefined]
    const value = (): string => inline ?? argv[++i] ?? ''
    if (flag === '--rounds') o.rounds = Number(value())
    else if (flag === '--calls') o.calls = Number(value())
    else if (flag === '--soak') o.soakMs = parseDuration(value())
    else if (flag === '--concurrency') o.concurrency = Number(value())
    else if (flag === '--pods') o.pods = true
    else if (flag === '--pod-soak') o.podSoakMs = parseDuration(value())
    else if (flag === '--no-cgroup') o.cgroup = false
    else throw new Error(`unknown argument ${argv[i]}`)
  }
  return o
}

/** Processes of the server: its children (function processes) plus anything under the functions dir. */
function serverProcesses(pid: number, fns: FunctionsDir): number {
  let children = 0
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(rest[1]) === pid && rest[0] !== 'Z') children++
    } catch {
      // gone
    }
  }
  return Math.max(children, processesUnder(fns.dir).length)
}

function sample(pid: number, fns: FunctionsDir): {rssMiB: number; fds: number; processes: number} {
  const u = resourceUsage(pid)
  return {rssMiB: Math.round(u.rssKiB / 102.4) / 10, fds: u.fds, processes: serverProcesses(pid, fns)}
}

type Outcome = 'ok' | 'expected-error' | 'unexpected'

/** The first unexpected outcomes of the soak, described. */
const unexpectedSeen: string[] = []

/** One call of the soak mix: what it is, and which status codes are fine for it. */
function soakCall(client: EvaluatorClient, fns: FunctionsDir, n: number): Promise<Outcome> {
  const images = imageCases()
  const payloads = payloadCases()
  const S = grpc.status
  const pick = n % 10
  let call: Promise<unknown>
  let allowed: number[]
  let what: string
  if (pick < 4) {
    const input = Buffer.from(`${SAMPLE_RL}# soak ${n}\n`)
    call = client.evaluateRaw(fns.image.catBinary!, input, {deadline: Date.now() + 60_000}).then((r) => {
      if (!r.resourceList.equals(input)) throw Object.assign(new Error('wrong answer'), {code: -1})
    })
    allowed = [S.OK]
    what = 'good call'
  } else if (pick === 4) {
    const c = images[n % images.length]!
    call = client.evaluateRaw(c.image, SAMPLE_RL, {deadline: Date.now() + 60_000})
    allowed = [S.OK, ...c.codes]
    what = `image ${c.label}`
  } else if (pick === 5) {
    const p = payloads[n % payloads.length]!
    call = client.evaluateRaw(fns.image.cat!, p.payload, {deadline: Date.now() + 60_000})
    // a blank echo is refused: never an empty package
    allowed = p.wrapper === 'blank' ? [S.INTERNAL] : [S.OK]
    what = `payload ${p.label}`
  } else if (pick === 6) {
    const faults = ['exitMidWrite', 'killedSelf', 'floodStdoutForever', 'floodStderr', 'closeStdin', 'failWithResults', 'hugeErrorResult', 'hostileOutput']
    const fault = faults[n % faults.length]!
    // hostileOutput: the input picks one of the hostile output shapes (hostile-outputs.ts)
    const shapes = Object.keys(HOSTILE_OUTPUTS)
    const input = fault === 'hostileOutput' ? hostileInput(shapes[Math.floor(n / faults.length) % shapes.length]!) : SAMPLE_RL
    call = client.evaluateRaw(fns.image[fault]!, input, {deadline: Date.now() + 60_000})
    allowed = [S.OK, S.INTERNAL, S.RESOURCE_EXHAUSTED]
    what = `fault ${fault}`
  } else if (pick === 7) {
    call = client.evaluateRaw(n % 2 ? fns.image.sleepWithChild! : fns.image.hangNoRead!, SAMPLE_RL, {deadline: Date.now() + 200 + (n % 300)})
    allowed = [S.DEADLINE_EXCEEDED]
    what = 'deadline'
  } else if (pick === 8) {
    call = client.evaluateRaw(fns.image.sleep!, SAMPLE_RL, {signal: AbortSignal.timeout(50 + (n % 200))})
    allowed = [S.CANCELLED]
    what = 'cancel'
  } else {
    call = client.evaluateRaw(fns.image.cat!, Buffer.alloc(7 * 1024 * 1024, 'a'), {deadline: Date.now() + 60_000})
    allowed = [S.RESOURCE_EXHAUSTED]
    what = 'oversize request'
  }
  const unexpected = (how: string): Outcome => {
    if (unexpectedSeen.length < 10) unexpectedSeen.push(`${what}: ${how}`)
    return 'unexpected'
  }
  return call.then(
    () => (allowed.includes(S.OK) ? 'ok' : unexpected('OK')),
    (err: {code?: number; details?: string}) => (err.code !== undefined && allowed.includes(err.code) ? 'expected-error' : unexpected(`${err.code}: ${err.details ?? String(err)}`)),
  )
}

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2))
  const temp = new TempDirs()
  const fns = await makeReliabilityFunctions(await temp.make('fnr-rel-long-'), {hostileOutputs: true})
  const port = await freePort()
  // Without pre-started functions: the end checks that no function process is left while the
  // server still runs, and a pre-started one waits there by design (docs/process.md).
  const serveArgs = [`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--log-level=1', '--prestart-functions=0']
  const problem = options.cgroup ? memoryCgroupProblem() : 'run with --no-cgroup'
  const cg = problem === undefined ? createMemoryCgroup(deploymentMemoryLimit()) : undefined
  const serve = cg
    ? await startInCgroup(cg, ['serve', `--port=${port}`, '--disable-runtimes=pod', ...serveArgs], /"msg":"fnr serve is ready"/)
    : await startServeChild(port, serveArgs)
  const pid = serve.child.pid!
  const prober = probeHealth(`127.0.0.1:${port}`, pid)
  let probed: ProbeResult | undefined
  const client = new EvaluatorClient(`127.0.0.1:${port}`)
  const health = healthClient(`127.0.0.1:${port}`)
  let failed = false
  const say = (line: string): void => void process.stdout.write(`${line}\n`)
  try {
    // Warm up once so the baseline is a running server, not a cold one.
    await concurrentLoad(client, fns.image.catBinary!, 20)
    const before = sample(pid, fns)
    say(`fnr serve (pid ${pid}) before: RSS ${before.rssMiB} MiB, ${before.fds} fds, ${before.processes} processes; ${cg ? `in a memory cgroup of ${deploymentMemoryLimit() / 1024 ** 3} GiB (manifests/deployment.yaml)` : `no memory cgroup (${problem})`}`)

    say(`\nload: ${options.rounds} rounds of ${options.calls} concurrent calls (exec, one channel)`)
    say('round  errors  wrong  total ms  p50 ms  p99 ms  RSS MiB  fds')
    for (let round = 1; round <= options.rounds; round++) {
      const r = await concurrentLoad(client, fns.image.catBinary!, options.calls)
      const s = sample(pid, fns)
      if (r.errors.length > 0 || r.wrongAnswers > 0) failed = true
      say(`${String(round).padStart(5)}  ${String(r.errors.length).padStart(6)}  ${String(r.wrongAnswers).padStart(5)}  ${String(r.ms).padStart(8)}  ${String(r.p50).padStart(6)}  ${String(r.p99).padStart(6)}  ${String(s.rssMiB).padStart(7)}  ${String(s.fds).padStart(3)}`)
      if (r.errors.length > 0) say(`       first errors: ${r.errors.slice(0, 3).join(' | ')}`)
    }

    const warmupMs = soakWarmupMs(options.soakMs)
    say(`\nsoak: ${options.soakMs / 1000} s (the first ${warmupMs / 1000} s a warm-up), ${options.concurrency} calls in flight (good calls, bad images and payloads, faults, deadlines, cancels, oversize)`)
    say('   s    calls  unexpected  RSS MiB  fds  processes')
    const counts = {ok: 0, 'expected-error': 0, unexpected: 0}
    const end = Date.now() + options.soakMs
    let n = 0
    const started = Date.now()
    const lane = async (): Promise<void> => {
      while (Date.now() < end) {
        const outcome = await soakCall(client, fns, n++)
        counts[outcome]++
      }
    }
    const sampler = startProcSampler({pid, dir: fns.dir})
    const reporter = setInterval(() => {
      const s = sample(pid, fns)
      say(`${String(Math.round((Date.now() - started) / 1000)).padStart(4)}  ${String(counts.ok + counts['expected-error'] + counts.unexpected).padStart(7)}  ${String(counts.unexpected).padStart(10)}  ${String(s.rssMiB).padStart(7)}  ${String(s.fds).padStart(3)}  ${String(s.processes).padStart(9)}`)
    }, Math.max(5000, Math.min(60_000, options.soakMs / 10)))
    await Promise.all(Array.from({length: options.concurrency}, lane))
    clearInterval(reporter)
    const samples = await sampler.stop()
    if (counts.unexpected > 0) failed = true
    say(`soak calls: ${counts.ok} ok, ${counts['expected-error']} failed as they should, ${counts.unexpected} unexpected`)
    for (const u of unexpectedSeen) say(`  unexpected: ${u.slice(0, 300)}`)
    const trend = judgeSoak(samples, warmupMs)
    for (const line of trend.lines) say(line)
    if (!trend.ok) failed = true

    const left = await leftoversAfter([fns.dir], 10_000)
    // Let the server settle (GC, closed streams) before the last sample.
    await new Promise((r) => setTimeout(r, 2000))
    const after = sample(pid, fns)
    const status = await checkHealth(health)
    probed = await prober.stop()
    const oomKills = cg?.oomKills() ?? 0
    say(`stalls: the server's own ${probed.stallMs} ms (worst health check ${probed.worst.wallMs} ms, ${probed.worst.cpuMs} ms of it on its event-loop thread); longest health check ${probed.maxMs} ms, p99 ${probed.p99} ms, ${probed.probes} probes, ${probed.failures} failed`)
    if (cg) say(`memory cgroup: peak ${Math.round(cg.usage().maxBytes / 2 ** 20)} MiB of ${deploymentMemoryLimit() / 2 ** 20} MiB, ${oomKills} OOM kills`)
    if (oomKills > 0 || probed.stallMs >= 1000) failed = true
    say(`\nfnr serve after: RSS ${after.rssMiB} MiB (${after.rssMiB >= before.rssMiB ? '+' : ''}${Math.round((after.rssMiB - before.rssMiB) * 10) / 10}), ${after.fds} fds (${after.fds - before.fds >= 0 ? '+' : ''}${after.fds - before.fds}), ${after.processes} processes; health ${status}; processes left under the functions dir: ${left.length}`)
    if (status !== 'SERVING' || left.length > 0 || after.processes > before.processes || after.fds > before.fds + 4) failed = true
    serve.child.kill('SIGTERM')
    const exit = await serve.exited
    say(`fnr serve stopped with ${exit.code ?? exit.signal} on SIGTERM`)
    if (exit.code !== 0) failed = true
  } finally {
    client.close()
    health.close()
    if (!probed) await prober.stop().catch(() => undefined)
    serve.child.kill('SIGKILL')
    await serve.exited
    killAllUnder([fns.dir])
    cg?.remove()
    await temp.cleanup()
  }
  if (options.pods) {
    const {runPodLeg} = await import('./pod-long-run.js')
    const podOk = await runPodLeg({rounds: options.rounds, calls: options.calls, soakMs: options.podSoakMs ?? options.soakMs, concurrency: options.concurrency}, say)
    if (!podOk) failed = true
  }
  say(failed ? '\nlong run: FAILED' : '\nlong run: passed')
  return failed ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`long run: ${(err as Error).stack ?? String(err)}\n`)
    process.exit(1)
  },
)
