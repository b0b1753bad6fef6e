/**
 * The pod-runtime leg of the long run (long-run.ts --pods): a real `fnr serve` child process with
 * only the pod runtime, on the real control plane (pod-serve.ts). Rounds of N concurrent calls,
 * then a soak that mixes good calls, a failing function, deadlines, cancels and unknown images,
 * while API faults (5xx on pod creation, dropped watches) are injected and a short pod TTL makes
 * pods come and go through GC. Prints the footprint (pods, Services, processes, the server's RSS
 * and fds) before, during and after; samples the server's RSS, fds and child processes every
 * 250 ms; returns false when a call ended unexpectedly, something was left behind, or the soak's
 * last third grew beyond its first third after the warm-up (soak-judge.ts).
 */
import * as grpc from '@grpc/grpc-js'

import {EvaluatorClient, isTransportFailure} from '../../../src/lib/grpc/client.js'
import {closeGate} from '../pods/cluster-bed.js'
import {RL, until} from '../pods/index.js'
import {concurrentLoad} from './load.js'
import {leakProblems, podFootprint, startPodServeBed, type PodFootprint} from './pod-serve.js'
import {judgeSoak, soakWarmupMs, startProcSampler} from './soak-judge.js'

export interface PodLegOptions {
  rounds: number
  calls: number
  soakMs: number
  concurrency: number
}

const fmt = (f: PodFootprint): string =>
  `${f.pods} pods, ${f.services} Services, ${f.podProcesses} pod processes, ${f.functionProcesses} function processes; serve RSS ${f.serveRssMiB} MiB, ${f.serveFds} fds, ${f.serveChildren} children`

export async function runPodLeg(options: PodLegOptions, say: (line: string) => void): Promise<boolean> {
  const psb = await startPodServeBed()
  const {pb} = psb
  const ns = await pb.namespace()
  let ok = true
  await closeGate(pb)
  const serve = await psb.start(ns, 'long-run', ['--log-level=1', '--pod-ttl=5s', '--scan-interval=1s', '--max-parallel-pods-per-function=2'])
  const pid = serve.child.pid!
  const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
  // Deadlines and cancels go over a connection of their own: each is an HTTP/2 stream reset, and
  // past nghttp2's rapid-reset budget (a burst of 1,000, then 33 a second) fnr serve ends that
  // connection (test/reliability/rapid-reset.test.ts); the good calls' connection must not share it.
  const resetter = new EvaluatorClient(`127.0.0.1:${serve.port}`, {channelOptions: {'grpc.use_local_subchannel_pool': 1}})
  const S = grpc.status
  try {
    await concurrentLoad(client, psb.image('fastcat'), 20)
    await concurrentLoad(resetter, psb.image('fastcat'), 2) // its connection counts in the baseline too
    const before = await podFootprint(pb, ns, pid)
    say(`\npod runtime: fnr serve (pid ${pid}) on the real control plane; before: ${fmt(before)}`)
    say('round  errors  wrong  total ms  p50 ms  p99 ms  RSS MiB  fds  pods')
    for (let round = 1; round <= options.rounds; round++) {
      const r = await concurrentLoad(client, psb.image('fastcat'), options.calls)
      const f = await podFootprint(pb, ns, pid)
      if (r.errors.length > 0 || r.wrongAnswers > 0) ok = false
      say(`${String(round).padStart(5)}  ${String(r.errors.length).padStart(6)}  ${String(r.wrongAnswers).padStart(5)}  ${String(r.ms).padStart(8)}  ${String(r.p50).padStart(6)}  ${String(r.p99).padStart(6)}  ${String(f.serveRssMiB).padStart(7)}  ${String(f.serveFds).padStart(3)}  ${String(f.pods).padStart(4)}`)
      if (r.errors.length > 0) say(`       first errors: ${r.errors.slice(0, 3).join(' | ')}`)
    }

    const warmupMs = soakWarmupMs(options.soakMs)
    say(`\npod soak: ${options.soakMs / 1000} s (the first ${warmupMs / 1000} s a warm-up), ${options.concurrency} calls in flight (good calls, a failing function, deadlines, cancels, unknown images), API 5xx and dropped watches every 2 s, pod TTL 5 s`)
    say('   s    calls  unexpected  pods  services  RSS MiB  fds')
    const counts = {ok: 0, expected: 0, unexpected: 0, sessionResets: 0}
    const unexpected: string[] = []
    const end = Date.now() + options.soakMs
    const started = Date.now()
    let n = 0
    const one = async (i: number): Promise<void> => {
      const pick = i % 20
      let call: Promise<unknown>
      let allowed: number[]
      let what: string
      if (pick < 9) {
        const input = Buffer.from(`${RL}# pod soak ${i}\n`)
        call = client.evaluateRaw(psb.image('fastcat'), input, {deadline: Date.now() + 60_000}).then((r) => {
          if (!r.resourceList.equals(input)) throw Object.assign(new Error('wrong answer'), {code: -1})
        })
        allowed = [S.OK]
        what = 'good call'
      } else if (pick < 11) {
        call = client.evaluateRaw(psb.image('stderr'), RL, {deadline: Date.now() + 60_000})
        allowed = [S.OK]
        what = 'stderr'
      } else if (pick < 13) {
        call = client.evaluateRaw(psb.image('fail'), RL, {deadline: Date.now() + 60_000})
        allowed = [S.INTERNAL]
        what = 'failing function'
      } else if (pick < 15) {
        call = resetter.evaluateRaw(psb.image('gate'), RL, {deadline: Date.now() + 300 + (i % 400)})
        // UNAVAILABLE: fnr serve's own connection to the pod was reset the same way (then retried)
        allowed = [S.DEADLINE_EXCEEDED, S.UNAVAILABLE]
        what = 'deadline'
      } else if (pick < 18) {
        call = resetter.evaluateRaw(psb.image(i % 2 ? 'gate' : 'fastcat'), RL, {signal: AbortSignal.timeout(50 + (i % 200)), deadline: Date.now() + 60_000})
        allowed = [S.OK, S.CANCELLED, S.UNAVAILABLE]
        what = 'cancel'
      } else {
        call = client.evaluateRaw(`${psb.registry.host}/fn/missing-${i % 3}:v1`, RL, {deadline: Date.now() + 60_000})
        allowed = [S.FAILED_PRECONDITION]
        what = 'unknown image'
      }
      await call.then(
        () => {
          if (allowed.includes(S.OK)) counts.ok++
          else {
            counts.unexpected++
            if (unexpected.length < 10) unexpected.push(`${what}: OK`)
          }
        },
        (err: {code?: number; details?: string}) => {
          if (err.code !== undefined && allowed.includes(err.code)) counts.expected++
          else if ((what === 'deadline' || what === 'cancel') && err.code === S.INTERNAL && isTransportFailure(err.details)) counts.sessionResets++
          else {
            counts.unexpected++
            if (unexpected.length < 10) unexpected.push(`${what}: ${err.code}: ${err.details ?? String(err)}`)
          }
        },
      )
    }
    const lane = async (): Promise<void> => {
      while (Date.now() < end) await one(n++)
    }
    const faults = setInterval(() => {
      pb.proxy.failNext({verb: 'create', resource: 'pods', namespace: ns, code: 500, times: 1})
      pb.proxy.failNext({verb: 'delete', resource: 'pods', namespace: ns, code: 503, times: 1})
      pb.proxy.dropWatches({resource: 'pods', namespace: ns, mode: 'destroy'})
    }, 2000)
    // the pod runtime spawns no processes: its children must stay 0
    const sampler = startProcSampler({pid})
    const reporter = setInterval(() => {
      void podFootprint(pb, ns, pid).then((f) => say(`${String(Math.round((Date.now() - started) / 1000)).padStart(4)}  ${String(counts.ok + counts.expected + counts.sessionResets + counts.unexpected).padStart(7)}  ${String(counts.unexpected).padStart(10)}  ${String(f.pods).padStart(4)}  ${String(f.services).padStart(8)}  ${String(f.serveRssMiB).padStart(7)}  ${String(f.serveFds).padStart(3)}`))
    }, Math.max(5000, Math.min(60_000, options.soakMs / 10)))
    try {
      await Promise.all(Array.from({length: options.concurrency}, lane))
    } finally {
      clearInterval(faults)
      clearInterval(reporter)
    }
    const samples = await sampler.stop()
    say(`pod soak calls: ${counts.ok} ok, ${counts.expected} failed as they should, ${counts.sessionResets} ended with their connection (rapid-reset limit), ${counts.unexpected} unexpected`)
    for (const u of unexpected) say(`  unexpected: ${u.slice(0, 300)}`)
    if (counts.unexpected > 0) ok = false
    const trend = judgeSoak(samples, warmupMs)
    for (const line of trend.lines) say(line)
    if (!trend.ok) ok = false

    // Quiet: idle pods expire (TTL 5 s) and GC removes them with their Services.
    let after = await podFootprint(pb, ns, pid)
    const settled = await until(
      async () => {
        after = await podFootprint(pb, ns, pid)
        return after.pods === 0 && after.services === 0 && after.functionProcesses === 0 && (await leakProblems(pb, ns, 2)).length === 0
      },
      'pods collected',
      60_000,
      500,
    ).then(
      () => true,
      () => false,
    )
    say(`pod runtime after (idle, GC done): ${fmt(after)}; RSS ${after.serveRssMiB - before.serveRssMiB >= 0 ? '+' : ''}${Math.round((after.serveRssMiB - before.serveRssMiB) * 10) / 10} MiB, fds ${after.serveFds - before.serveFds >= 0 ? '+' : ''}${after.serveFds - before.serveFds}`)
    if (!settled) {
      say(`  left behind: ${(await leakProblems(pb, ns, 2)).join('; ') || fmt(after)}`)
      ok = false
    }
    if (after.serveChildren > 0 || after.serveFds > before.serveFds + 4) ok = false
    serve.child.kill('SIGTERM')
    const exit = await serve.exited
    say(`fnr serve (pod runtime) stopped with ${exit.code ?? exit.signal} on SIGTERM`)
    if (exit.code !== 0) ok = false
  } finally {
    client.close()
    resetter.close()
    serve.child.kill('SIGKILL')
    await pb.openGate()
    await psb.stop()
  }
  return ok
}
