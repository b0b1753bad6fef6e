/**
 * Load on the pod path: concurrent EvaluateFunction calls through a real `fnr serve`
 * child process whose pod runtime runs the function in pods on the real control plane (the real
 * wrapper server on the control plane's node), one client channel as Porch uses: 0 errors, every
 * caller gets its own bytes, and the pods, Services, processes and the server's file descriptors
 * counted before and after. 1,000 calls at once, on one pod and on two (the number, in the
 * short run too: 12-13 s each on the 2-core machine with other control planes running).
 */
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {RL, until} from '../support/pods/index.js'
import {concurrentLoad} from '../support/reliability/load.js'
import {leakProblems, podFootprint, startPodServeBed, type PodFootprint, type PodServeBed} from '../support/reliability/pod-serve.js'
import {type ServeChild} from '../support/reliability/serve-process.js'

describe('reliability: load on the pod path (fnr serve → pods on the real control plane)', function () {
  this.timeout(600_000)
  waitForClusterBinaries()
  let psb: PodServeBed
  let serve: ServeChild | undefined

  before(async function () {
    this.timeout(120_000)
    psb = await startPodServeBed()
  })
  after(async () => {
    if (serve && serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGKILL')
    await psb?.stop()
  })

  const calls = 1000
  for (const pods of [1, 2]) {
    it(`${calls} concurrent calls on ${pods} pod${pods > 1 ? 's' : ''}: 0 errors, own answers, no pods, Services, processes or fds left over`, async () => {
      const {pb} = psb
      const ns = await pb.namespace()
      serve = await psb.start(ns, 'load-runner', [`--max-parallel-pods-per-function=${pods}`, '--max-waitlist-length=2', '--scan-interval=2s'])
      const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
      try {
        // first calls: the pod(s) exist and the channel is up before counting
        await Promise.all(Array.from({length: 2 * pods + 1}, () => client.evaluateRaw(psb.image('fastcat'), RL, {deadline: Date.now() + 60_000})))
        await until(() => pb.kubelet.podInfos().filter((p) => p.namespace === ns && p.pid !== undefined).length === pods, `${pods} pod processes`)
        const before = await podFootprint(pb, ns, serve.child.pid!)
        const r = await concurrentLoad(client, psb.image('fastcat'), calls)
        process.stdout.write(`      (${calls} concurrent calls on ${pods} pod(s): ${r.errors.length} errors, ${r.ms} ms, latency p50 ${r.p50} ms, p99 ${r.p99} ms)\n`)
        expect(r.errors.slice(0, 5), `${r.errors.length} errors`).to.deep.equal([])
        expect(r.wrongAnswers).to.equal(0)

        // Function processes end with their calls; sockets settle: compare once things are quiet.
        let after: PodFootprint = await podFootprint(pb, ns, serve.child.pid!)
        await until(async () => {
          after = await podFootprint(pb, ns, serve!.child.pid!)
          return after.functionProcesses === 0 && after.serveFds <= before.serveFds + 4
        }, 'function processes gone and fds back', 30_000, 200).catch(() => undefined)
        process.stdout.write(`      before ${JSON.stringify(before)}\n      after  ${JSON.stringify(after)}\n`)
        expect({pods: after.pods, services: after.services, podProcesses: after.podProcesses, serveChildren: after.serveChildren, functionProcesses: after.functionProcesses}).to.deep.equal({
          pods: before.pods,
          services: before.services,
          podProcesses: before.podProcesses,
          serveChildren: 0,
          functionProcesses: 0,
        })
        expect(after.pods).to.equal(pods)
        expect(after.serveFds, 'serve fds').to.be.at.most(before.serveFds + 4)
        expect(await leakProblems(pb, ns, pods)).to.deep.equal([])
      } finally {
        client.close()
        serve.child.kill('SIGTERM')
        expect((await serve.exited).code).to.equal(0)
      }
    })
  }
})
