/**
 * Overload numbers (docs/limits.md, "Numbers"), fnr serve inside a memory cgroup with the
 * Deployment's 1 GiB limit (test/support/reliability/cgroup.ts; needs root and a memory cgroup):
 *
 *   L1  small-call latency (p50/p99/max) while 8 calls of 5 MiB run back to back, against fnr serve
 *       (exec runtime, a copy of /bin/cat) and, in the same run, a bare grpc-js server (no fnr code:
 *       an echo handler on the same proto, default options) doing the same;
 *   L2  the largest burst of valid 6 MiB calls (no deadline, over 4 connections) that fnr serve
 *       survives under 1 GiB: bursts of 20, 40, 80, 160, 240 calls; OOM kills and outcome of each;
 *   L3  descriptors, processes and RSS of fnr serve before, during and after 5,000 idle sockets and
 *       after a slowloris of 200 streams (6,000,000 of 6,200,000 bytes each).
 *
 * Run: `node --import tsx bench/limits.ts` (after `npm run build`). Prints a markdown table and
 * writes bench/results/limits.json. Numbers only: nothing here fails on a missed target.
 */
import {spawn, spawnSync} from 'node:child_process'
import {once} from 'node:events'
import {writeFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'
import {mkdtemp, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'

import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {evaluatorServiceDefinition} from '../src/lib/grpc/proto.js'
import {createMemoryCgroup, startInCgroup, type CgroupServer, type MemoryCgroup} from '../test/support/reliability/cgroup.js'
import {makeReliabilityFunctions, type FunctionsDir} from '../test/support/reliability/functions.js'
import {bigResourceList, idleSockets, slowloris} from '../test/support/reliability/hostile.js'
import {smallWhileBig} from './head-of-line.js'
import {resourceUsage} from '../test/support/reliability/processes.js'
import {loadAverage, ROOT, round} from './lib.js'

const GiB = 1024 ** 3
const MiB = 1024 ** 2

interface Bed {
  cg: MemoryCgroup
  server: CgroupServer
  address: string
  port: number
}

async function serveBed(fns: FunctionsDir, extra: string[] = []): Promise<Bed> {
  const cg = createMemoryCgroup(GiB)
  const server = await startInCgroup(cg, ['serve', '--port=0', '--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--log-level=1', ...extra], /"msg":"fnr serve is ready"/)
  const line = server.stderr().split('\n').find((l) => /fnr serve is ready/.test(l)) ?? ''
  const port = Number(/"port":(\d+)/.exec(line)?.[1])
  return {cg, server, port, address: `127.0.0.1:${port}`}
}

async function stopBed(bed: Bed): Promise<void> {
  await bed.server.kill()
  bed.cg.remove()
}

/**
 * A bare grpc-js server: the evaluator proto, an echo handler, grpc-js's defaults plus the message
 * limit; in a process of its own (this file with --bare-server) inside the same 1 GiB cgroup setup,
 * so that it does not share the bench clients' event loop.
 */
async function bareServer(): Promise<{port: number; stop(): Promise<void>}> {
  const cg = createMemoryCgroup(GiB)
  const [cmd, ...rest] = cg.wrap([process.execPath, '--import', 'tsx', fileURLToPath(import.meta.url), '--bare-server'])
  const child = spawn(cmd!, rest, {stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT})
  const [line] = (await once(child.stdout!, 'data')) as [Buffer]
  const port = Number(line.toString().trim())
  return {
    port,
    stop: async () => {
      child.kill('SIGKILL')
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit')
      cg.remove()
    },
  }
}

async function runBareServer(): Promise<void> {
  const server = new grpc.Server({'grpc.max_receive_message_length': 6 * MiB, 'grpc.max_send_message_length': 6 * MiB})
  server.addService(evaluatorServiceDefinition(), {
    EvaluateFunction: (call: grpc.ServerUnaryCall<{resourceList: Buffer}, unknown>, cb: grpc.sendUnaryData<unknown>) => cb(null, {resourceList: call.request.resourceList, log: Buffer.alloc(0)}),
  })
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))))
  process.stdout.write(`${port}\n`)
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-bench-limits-'))
  const fns = await makeReliabilityFunctions(dir)
  const rows: Array<Record<string, unknown>> = []
  const load = loadAverage()
  try {
    // L1
    const smallCalls = Number(process.env.FNR_BENCH_LIMITS_SMALL ?? 100)
    const bed = await serveBed(fns)
    const progress = (line: string): void => void process.stderr.write(`L1 ${line}\n`)
    const {latencies: _f, ...fnr} = await smallWhileBig(bed.address, fns.image.catBinary!, smallCalls, progress)
    const fnrOom = bed.cg.oomKills()
    await stopBed(bed)
    const fnrLoad = loadAverage()
    const bare = await bareServer()
    const {latencies: _b, ...base} = await smallWhileBig(`127.0.0.1:${bare.port}`, 'any', smallCalls, progress)
    await bare.stop()
    rows.push({case: 'L1 small call (ms) while 8 x 5 MiB run: fnr serve (exec cat, 1 GiB cgroup)', ...fnr, oomKills: fnrOom, load: fnrLoad}, {case: 'L1 same on a bare grpc-js echo server (own process, 1 GiB cgroup)', ...base, load: loadAverage()})

    // L2
    let largest = 0
    for (const burst of (process.env.FNR_BENCH_LIMITS_BURSTS ?? '20,40,80,160,240').split(',').map(Number)) {
      const b = await serveBed(fns)
      const clients = Array.from({length: 4}, () => new EvaluatorClient(b.address, {channelOptions: {'grpc.use_local_subchannel_pool': 1}}))
      const input = bigResourceList(6 * MiB - 1024)
      const t = performance.now()
      process.stderr.write(`L2 burst of ${burst}\n`)
      const results = await Promise.allSettled(Array.from({length: burst}, (_, i) => clients[i % 4]!.evaluateRaw(fns.image.catBinary!, input)))
      clients.forEach((c) => c.close())
      const ok = results.filter((r) => r.status === 'fulfilled').length
      const oom = b.cg.oomKills()
      const alive = b.server.child.exitCode === null && b.server.child.signalCode === null
      const peak = Math.round(b.cg.usage().maxBytes / MiB)
      await stopBed(b)
      const refused = results.filter((r) => r.status === 'rejected' && (r.reason as {code?: number}).code === 8).length
      rows.push({case: `L2 burst of ${burst} x 6 MiB, 4 connections, no deadline`, ok, refusedResourceExhausted: refused, otherFailures: burst - ok - refused, oomKills: oom, alive, peakMiB: peak, seconds: round((performance.now() - t) / 1000, 1), load: loadAverage()})
      if (oom === 0 && alive) largest = burst
      else break
    }
    rows.push({case: 'L2 largest burst survived under 1 GiB', calls: largest})

    // L3
    const h = await serveBed(fns, ['--handshake-timeout=5s'])
    const pid = h.cg.pids()[0]!
    const before = resourceUsage(pid)
    const idle = await idleSockets('127.0.0.1', h.port, 5000)
    const withIdle = resourceUsage(pid)
    const until = Date.now() + 30_000
    while (idle.closedByServer() < idle.opened && Date.now() < until) await new Promise((r) => setTimeout(r, 250))
    const afterIdle = resourceUsage(pid)
    idle.close()
    const attack = await slowloris('127.0.0.1', h.port, 200, 6_200_000, 6_000_000)
    await new Promise((r) => setTimeout(r, 5000))
    const during = resourceUsage(pid)
    await attack.close()
    await new Promise((r) => setTimeout(r, 2000))
    const afterSlow = resourceUsage(pid)
    rows.push({
      case: 'L3 fnr serve fds / processes / RSS MiB',
      before: `${before.fds} / ${h.cg.pids().length} / ${Math.round(before.rssKiB / 1024)}`,
      with5000Idle: `${withIdle.fds} fds`,
      after5000Idle: `${afterIdle.fds} / ${h.cg.pids().length} / ${Math.round(afterIdle.rssKiB / 1024)}`,
      duringSlowloris: `${during.fds} / ${Math.round(during.rssKiB / 1024)} MiB`,
      afterSlowloris: `${afterSlow.fds} / ${h.cg.pids().length} / ${Math.round(afterSlow.rssKiB / 1024)}`,
      oomKills: h.cg.oomKills(),
      load: loadAverage(),
    })
    await stopBed(h)

    // Time to read 6 MB of structured results (bench/results-parse.ts, a fresh process).
    const parse = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/results-parse.ts'), 'structured-6MB'], {cwd: ROOT, encoding: 'utf8'})
    const parsed = JSON.parse(parse.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>
    rows.push({case: 'parse 6 MB of structured results (bench/results-parse.ts structured-6MB)', ...parsed, load: loadAverage()})
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
  console.log(`load average at start: ${load}`)
  for (const r of rows) console.log(`| ${Object.entries(r).map(([k, v]) => (k === 'case' ? v : `${k} ${v}`)).join(' | ')} |`)
  await writeFile(path.join(ROOT, 'bench/results/limits.json'), `${JSON.stringify({date: new Date().toISOString(), load, rows}, null, 2)}\n`)
}

if (process.argv.includes('--bare-server')) await runBareServer()
else await main()
