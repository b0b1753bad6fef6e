/**
 * `fnr serve` with the pod runtime, as a real child process on the real control plane, killed
 * with SIGKILL while its pods exist (one busy with a call, one still starting), then restarted on
 * the same port, as the same runner identity and as a new one (whose takeover
 * waits for the killed runner's Lease to expire). Expected: the calls in flight get a clean error at once (never
 * a hang to their deadline); the restarted runner adopts the ready pods and deletes the one it
 * cannot use; after its GC scans no fnr pod or Service is leaked and none in use was deleted;
 * calls after the restart reuse the adopted pods (no new pod is created for them).
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {closeGate, createdThroughProxy, gateStarts, listPods} from '../support/pods/cluster-bed.js'
import {RL, until} from '../support/pods/index.js'
import {leakProblems, podFootprint, startPodServeBed, type PodServeBed} from '../support/reliability/pod-serve.js'
import {freePort, type ServeChild} from '../support/reliability/serve-process.js'

describe('reliability: fnr serve (pod runtime) killed with SIGKILL and restarted while its pods exist', function () {
  this.timeout(300_000)
  waitForClusterBinaries()
  let psb: PodServeBed
  const children: ServeChild[] = []

  before(async function () {
    this.timeout(120_000)
    psb = await startPodServeBed()
  })
  after(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL')
    await psb?.stop()
  })

  const podFor = async (ns: string, img: string): Promise<string | undefined> =>
    (await listPods(psb.pb, ns)).find((p) => p.spec!.containers.some((c) => c.name === 'function' && c.image === img))?.metadata!.name
  const gcScans = (ns: string): number => psb.pb.proxy.requestsFor({verb: 'list', resource: 'services', namespace: ns}).length

  // The same runner identity (its container restarted) and a new one (a new pod of the Deployment).
  for (const [restartedAs, how] of [['runner-a', 'as the same runner'], ['runner-b', 'as a new runner (new POD_NAME)']] as const) {
    it(`in-flight calls fail cleanly; restarted ${how} + GC: no leaked pod or Service, none in use deleted, adopted pods reused`, async () => {
      const {pb} = psb
      await closeGate(pb)
      const ns = await pb.namespace()
      const port = await freePort()
      // A short Lease, so a new runner takes over the killed one's pods soon (several replicas:
      // a live replica's pods are never touched, a dead one's are taken over once its Lease expires).
      const runnerArgs = ['--scan-interval=1s', '--replica-lease-duration=3s']
      const a = await psb.start(ns, 'runner-a', runnerArgs, port)
      children.push(a)
      const client = new EvaluatorClient(`127.0.0.1:${port}`)
      try {
        // Pods for three images; the gate call keeps its pod busy.
        for (const name of ['cat', 'stderr'] as const) {
          const res = await client.evaluateRaw(psb.image(name), RL, {deadline: Date.now() + 60_000})
          expect(res.resourceList.toString()).to.equal(RL.toString())
        }
        const deadline = Date.now() + 90_000
        const busy = client.evaluateRaw(psb.image('gate'), RL, {deadline}).then(
          () => undefined,
          (e: grpc.ServiceError) => ({code: e.code, at: Date.now()}),
        )
        await until(async () => (await gateStarts(pb)) === 1, 'the gate call running in its pod')
        // A pod still starting (its wrapper server comes up only after 30 s): a call waits for it.
        const starting = client.evaluateRaw(psb.image('slow'), RL, {deadline}).then(
          () => undefined,
          (e: grpc.ServiceError) => ({code: e.code, at: Date.now()}),
        )
        await until(() => podFor(ns, psb.image('slow')), 'the slow pod created')
        const before = {cat: (await podFor(ns, psb.image('cat')))!, stderr: (await podFor(ns, psb.image('stderr')))!, gate: (await podFor(ns, psb.image('gate')))!, slow: (await podFor(ns, psb.image('slow')))!}
        const createdBefore = createdThroughProxy(pb, ns, 'pods')

        const killedAt = Date.now()
        a.child.kill('SIGKILL')
        expect((await a.exited).signal).to.equal('SIGKILL')
        // Both callers hear at once (connection lost), long before their deadline.
        for (const [what, outcome] of [['busy call', await busy], ['call waiting for a starting pod', await starting]] as const) {
          expect(outcome, what).to.not.equal(undefined)
          expect(outcome!.code, what).to.equal(grpc.status.UNAVAILABLE)
          expect(outcome!.at - killedAt, what).to.be.lessThan(deadline - killedAt)
        }
        // the pods outlive their runner
        expect((await listPods(pb, ns)).map((p) => p.metadata!.name).sort()).to.deep.equal(Object.values(before).sort())

        const b = await psb.start(ns, restartedAs, runnerArgs, port)
        children.push(b)
        await until(() => /"msg":"pod runtime started"/.test(b.stderr()), 'adoption done')
        const startedLine = /\{[^\n]*"msg":"pod runtime started"[^\n]*\}/.exec(b.stderr())![0]
        if (restartedAs === 'runner-a') {
          // The same identity (a restarted container keeps POD_NAME): its own pods, adopted at once.
          expect(JSON.parse(startedLine)).to.deep.include({adopted: 3, deleted: 1})
        } else {
          // A new identity while runner-a's Lease is still live: nothing taken at startup; once
          // the Lease expires, a GC scan takes over the ready pods and deletes the starting one.
          expect(JSON.parse(startedLine)).to.deep.include({adopted: 0, deleted: 0})
          const ready = [before.cat, before.stderr, before.gate]
          await until(
            async () => !(await podFor(ns, psb.image('slow'))) && (await listPods(pb, ns)).filter((p) => ready.includes(p.metadata!.name!) && p.metadata!.labels!['fnr.dev/owner'] === restartedAs).length === 3,
            'the ready pods taken over by runner-b after runner-a\'s Lease expired, the starting one deleted',
          )
        }

        // Calls after the restart reuse the adopted pods; the gate pod is in use again meanwhile.
        await closeGate(pb)
        const busyAgain = client.evaluateRaw(psb.image('gate'), RL, {deadline: Date.now() + 90_000})
        await until(async () => (await gateStarts(pb)) === 1, 'a gate call running on the adopted pod')
        for (const name of ['cat', 'stderr'] as const) {
          const res = await client.evaluateRaw(psb.image(name), RL, {deadline: Date.now() + 60_000})
          expect(res.resourceList.toString()).to.equal(RL.toString())
        }
        // Two GC scans with the gate pod busy: nothing leaked, nothing in use deleted.
        const scans = gcScans(ns)
        await until(() => gcScans(ns) >= scans + 2, 'two GC scans after the restart')
        await until(async () => (await leakProblems(pb, ns)).length === 0 && !(await podFor(ns, psb.image('slow'))), `no leaked pod or Service (${(await leakProblems(pb, ns)).join('; ')})`)
        expect({cat: await podFor(ns, psb.image('cat')), stderr: await podFor(ns, psb.image('stderr')), gate: await podFor(ns, psb.image('gate'))}).to.deep.equal({cat: before.cat, stderr: before.stderr, gate: before.gate})
        expect(createdThroughProxy(pb, ns, 'pods'), 'no pod created after the restart').to.equal(createdBefore)
        await pb.openGate()
        expect((await busyAgain).resourceList.toString()).to.equal(RL.toString())
        await until(async () => (await listPods(pb, ns)).every((p) => p.metadata!.labels!['fnr.dev/owner'] === restartedAs), `the pods owned by ${restartedAs}`)
        process.stdout.write(`      (after restart: ${JSON.stringify(await podFootprint(pb, ns, b.child.pid!))})\n`)

        b.child.kill('SIGTERM')
        expect((await b.exited).code).to.equal(0)
      } finally {
        client.close()
        await pb.openGate()
      }
    })
  }
})
