/**
 * `fnr pods gc` and busy pods (the real control plane, a real pod runtime, the built CLI): the runner keeps
 * a busy pod's fnr.dev/last-used fresh at its GC passes during a long call, and the CLI deletes
 * every pod with a resourceVersion precondition, so a pod that changed between its listing and
 * its deletion (here: its runner refreshed the annotation because the pod is in use) is left
 * alone and reported as such.
 */
import {expect} from 'chai'

import {ANNOTATION_LAST_USED, ANNOTATION_TTL} from '../../src/lib/pods/model/naming.js'
import {runCli} from '../support/cli.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {gateStarts, listPods, listServices, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, image, until, type RuntimeHandle} from '../support/pods/index.js'

const ago = (ms: number): string => new Date(Date.now() - ms).toISOString()

interface GcOut {
  items: Array<{kind: string; name: string; reason: string; deleted: boolean; skipped: boolean; error?: string}>
  deleted: number
  skipped: number
  failed: number
}

describe('fnr pods gc and busy pods (on the real control plane)', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined
  let ns: string
  const cli = (args: string[]) => runCli([...args, '--kubeconfig', pb.kubeconfigPath, '-n', ns], {timeout: 120_000})
  const lastUsed = async (pod: string): Promise<string | undefined> => (await listPods(pb, ns)).find((p) => p.metadata!.name === pod)?.metadata?.annotations?.[ANNOTATION_LAST_USED]
  /** A merge patch of a pod's annotations, straight to kube-apiserver (as the runner or a user would write them). */
  const annotate = (pod: string, annotations: Record<string, string>) => pb.admin.patch(`/api/v1/namespaces/${ns}/pods/${pod}`, {metadata: {annotations}})

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  /** A runtime with a gate call in flight: the name of its busy pod. */
  async function busyPod(): Promise<{name: string; inFlight: Promise<unknown>}> {
    const inFlight = h!.evaluator.evaluate({image: image('gate'), resourceList: RL})
    inFlight.catch(() => {})
    await until(async () => (await gateStarts(pb)) === 1, 'the call running')
    return {name: h!.runtime.cache.snapshot().find((s) => s.image === image('gate'))!.name, inFlight}
  }

  it('the runner refreshes a busy pod\'s fnr.dev/last-used at its GC passes while a long call runs', async () => {
    // TTL 1 s: the refresh interval is TTL/10, at least 5 s
    h = await startClusterRuntime(pb, {namespace: ns, ttlMs: 1000})
    const {name, inFlight} = await busyPod()
    const written = (await lastUsed(name))!
    expect(Date.parse(written)).to.be.a('number').and.not.NaN
    // Only GC passes run from here on: no call takes the pod, so only they can write the annotation.
    const refreshed = await until(
      async () => {
        await h!.runtime.gc.runOnce()
        const now = await lastUsed(name)
        return now !== undefined && Date.parse(now) > Date.parse(written) && now
      },
      'a GC pass refreshed the busy pod\'s last use',
      30_000,
      250,
    )
    expect((await listPods(pb, ns)).find((p) => p.metadata!.name === name)!.metadata!.annotations![ANNOTATION_TTL]).to.equal('1')
    // the pod stayed (busy pods are never collected), and the call is still in flight
    expect(await podNames(pb, ns)).to.deep.equal([name])
    expect(h.runtime.cache.snapshot()[0]!.load).to.equal(1)
    expect(Date.parse(refreshed)).to.be.greaterThan(Date.parse(written))
    await pb.openGate()
    await inFlight
  })

  it('leaves a busy pod alone when it changed between listing and deleting (its runner refreshed fnr.dev/last-used), and reports it', async () => {
    // A runner without a Lease: the CLI applies the TTL rule to its pods.
    h = await startClusterRuntime(pb, {namespace: ns, owner: 'runner-nolease', leaseDurationMs: 0})
    const {name, inFlight} = await busyPod()
    // The annotation as a long call can leave it: older than the pod's TTL.
    await annotate(name, {[ANNOTATION_LAST_USED]: ago(3 * 3600_000), [ANNOTATION_TTL]: '60'})
    const dry = await cli(['pods', 'gc', '--dry-run', '--json'])
    expect(dry.exitCode, dry.stderr).to.equal(0)
    expect((JSON.parse(dry.stdout) as GcOut).items).to.deep.include({kind: 'pod', name, reason: 'idle for longer than its TTL', image: image('gate'), deleted: false, skipped: false})

    // The deletion is held up on its way; meanwhile the runner refreshes the annotation.
    pb.proxy.addLatency({verb: 'delete', resource: 'pods', namespace: ns, name, ms: 3000, times: 1})
    const run = cli(['pods', 'gc', '--json'])
    await until(() => pb.proxy.requestsFor({verb: 'delete', resource: 'pods', namespace: ns, name}).length > 0, 'the deletion sent')
    await annotate(name, {[ANNOTATION_LAST_USED]: new Date().toISOString()})
    const r = await run
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as GcOut
    expect(out).to.deep.include({deleted: 0, skipped: 1, failed: 0})
    expect(out.items).to.deep.equal([{kind: 'pod', name, reason: 'idle for longer than its TTL', image: image('gate'), deleted: false, skipped: true}])
    expect(r.stderr).to.include(`ok: left pod ${name} alone: it changed since it was listed`)
    // pod and Service are still there, the call goes on and ends well
    expect(await podNames(pb, ns)).to.deep.equal([name])
    expect((await listServices(pb, ns)).map((s) => s.metadata!.name)).to.deep.equal([name])
    expect(pb.proxy.requestsFor({verb: 'delete', resource: 'services', namespace: ns})).to.deep.equal([])
    await pb.openGate()
    const res = (await inFlight) as {resourceList: Uint8Array}
    expect(Buffer.from(res.resourceList).toString()).to.equal(RL.toString())
  })

  it('the text output says which pods were left alone', async () => {
    h = await startClusterRuntime(pb, {namespace: ns, owner: 'runner-nolease', leaseDurationMs: 0})
    const {name} = await busyPod()
    await annotate(name, {[ANNOTATION_LAST_USED]: ago(3 * 3600_000), [ANNOTATION_TTL]: '60'})
    pb.proxy.addLatency({verb: 'delete', resource: 'pods', namespace: ns, name, ms: 3000, times: 1})
    const run = cli(['pods', 'gc'])
    await until(() => pb.proxy.requestsFor({verb: 'delete', resource: 'pods', namespace: ns, name}).length > 0, 'the deletion sent')
    await annotate(name, {[ANNOTATION_LAST_USED]: new Date().toISOString()})
    const r = await run
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.equal(`left pod ${name} alone: it changed since it was listed (a call took it, a replica took it over, or it went away)`)
    expect(await podNames(pb, ns)).to.deep.equal([name])
  })
})
