/**
 * `fnr pods gc|ls` and replica Leases, on the real control plane: the CLI deletes a live replica's pods only
 * when they failed or ended (idle ones, even past their TTL, are left to that replica, whose own GC
 * sees its calls in flight), never by --older-than or --all; pods of replicas whose Lease expired
 * or was released go like orphans. `fnr pods ls` shows each owner's Lease state.
 */
import {expect} from 'chai'

import type {V1Lease} from '@kubernetes/client-node'

import {judgeLeasesAt} from '../../src/lib/pods/cluster/lease.js'
import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, ANNOTATION_TTL, LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {runCli} from '../support/cli.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {listPods, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until, closeAll, type RuntimeHandle} from '../support/pods/index.js'

const ago = (ms: number): string => new Date(Date.now() - ms).toISOString()

/** A pod with fnr's labels, as a replica leaves it (a no-process pod on the node). */
function fnrPod(name: string, owner: string, lastUsedAgoMs: number, ttlSeconds: number, containerImage = WRAPPER_IMAGE): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: {[LABEL_MANAGED_BY]: 'fnr', [LABEL_FN_IMAGE]: name, [LABEL_OWNER]: owner},
      annotations: {[ANNOTATION_IMAGE]: image('cat'), [ANNOTATION_LAST_USED]: ago(lastUsedAgoMs), [ANNOTATION_TTL]: String(ttlSeconds)},
    },
    spec: {restartPolicy: 'Never', containers: [{name: 'function', image: containerImage, command: ['/wrapper-server-tools/wrapper-server']}]},
  }
}

interface GcOut {
  items: Array<{kind: string; name: string; reason: string; deleted: boolean}>
  deleted: number
  skipped: number
  failed: number
}

describe('fnr pods gc|ls and replica Leases (on the real control plane)', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let ns: string
  const handles: RuntimeHandle[] = []
  const cli = (args: string[]) => runCli([...args, '--kubeconfig', pb.kubeconfigPath, '-n', ns], {timeout: 120_000})
  const createPod = (pod: object) => pb.admin.create(`/api/v1/namespaces/${ns}/pods`, pod)
  const phaseOf = async (name: string): Promise<string | undefined> => (await listPods(pb, ns)).find((p) => p.metadata!.name === name)?.status?.phase
  const leases = async (): Promise<V1Lease[]> => (await pb.admin.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`)).items as V1Lease[]

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: () => closeAll(handles),
  })

  /**
   * runner-live: live (5 s Lease), with a pod in use of its own, an idle one within its TTL (but
   * idle for an hour), one past its TTL and one that failed; runner-dead: died without a word
   * (1 s Lease, expired); runner-gone: stopped gracefully (Lease released). Each of the last two
   * left a pod.
   */
  async function populate(): Promise<{live: string; dead: string; gone: string}> {
    const start = async (owner: string, leaseDurationMs: number): Promise<RuntimeHandle> => {
      const h = await startClusterRuntime(pb, {namespace: ns, owner, leaseDurationMs})
      handles.push(h)
      return h
    }
    const live = await start('runner-live', 5000)
    await live.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const dead = await start('runner-dead', 1000)
    await dead.evaluator.evaluate({image: image('stderr'), resourceList: RL})
    const gone = await start('runner-gone', 1000)
    await gone.evaluator.evaluate({image: image('cat'), resourceList: RL})
    const names = {live: live.runtime.cache.snapshot()[0]!.name, dead: dead.runtime.cache.snapshot()[0]!.name, gone: gone.runtime.cache.snapshot()[0]!.name}
    dead.runtime.lease!.abandon()
    for (const h of [dead, gone]) {
      await h.close()
      handles.splice(handles.indexOf(h), 1)
    }
    await createPod(fnrPod('live-idle-hour', 'runner-live', 3600_000, 86_400))
    await createPod(fnrPod('live-expired', 'runner-live', 3 * 3600_000, 60))
    await createPod(fnrPod('live-failed', 'runner-live', 0, 1800, image('crash')))
    await until(async () => (await phaseOf('live-failed')) === 'Failed', 'the crashing pod failed')
    // As the CLI judges them: runner-dead's Lease unrenewed for two durations.
    await until(async () => judgeLeasesAt(await leases(), Date.now()).get('runner-dead') === 'expired', 'runner-dead\'s Lease expired', 30_000, 200)
    return names
  }

  it('ls shows each owner\'s Lease state (live, expired, released, none) in --json and the LEASE column', async () => {
    const names = await populate()
    await createPod(fnrPod('lone', 'lone-runner', 0, 1800))
    const j = await cli(['pods', 'ls', '--json'])
    expect(j.exitCode, j.stderr).to.equal(0)
    const byPod = new Map((JSON.parse(j.stdout) as {pods: Array<{pod: string; ownerLease: string}>}).pods.map((p) => [p.pod, p.ownerLease]))
    expect([names.live, 'live-idle-hour', names.dead, names.gone, 'lone'].map((n) => byPod.get(n))).to.deep.equal(['live', 'live', 'expired', 'released', 'none'])
    const text = await cli(['pods', 'ls'])
    const row = text.stdout.split('\n').find((l) => l.includes(names.dead))!
    expect(row).to.match(/runner-dead\s+expired$/)
  })

  it('gc deletes a live replica\'s pods only when failed or ended (idle ones, even past their TTL, are left to it; not --older-than, not --all); pods of expired or released replicas go like orphans', async () => {
    const names = await populate()
    const dry = await cli(['pods', 'gc', '--dry-run', '--json', '--older-than', '30m'])
    expect(dry.exitCode, dry.stderr).to.equal(0)
    const items = (JSON.parse(dry.stdout) as GcOut).items
    expect(items.map((i) => i.name).sort()).to.deep.equal([names.dead, names.gone, 'live-failed'].sort())
    expect(items.find((i) => i.name === names.dead)!.reason).to.equal('its runner runner-dead is gone (lease expired)')
    expect(items.find((i) => i.name === names.gone)!.reason).to.equal('its runner runner-gone is gone (lease released)')
    expect(items.find((i) => i.name === 'live-failed')!.reason).to.equal('the pod is Failed')

    const all = await cli(['pods', 'gc', '--dry-run', '--json', '--all'])
    const allItems = (JSON.parse(all.stdout) as GcOut).items.filter((i) => i.kind === 'pod')
    expect(allItems.map((i) => i.name).sort()).to.deep.equal([names.dead, names.gone, 'live-failed'].sort())
    expect(allItems.find((i) => i.name === 'live-failed')!.reason).to.equal('--all (replica runner-live is live: the pod is Failed)')
    // --include-live-replicas: every fnr pod, the live replica's too
    const wipe = await cli(['pods', 'gc', '--dry-run', '--json', '--all', '--include-live-replicas'])
    expect(wipe.exitCode, wipe.stderr).to.equal(0)
    const wipeNames = (JSON.parse(wipe.stdout) as GcOut).items.filter((i) => i.kind === 'pod').map((i) => i.name)
    expect(wipeNames.sort()).to.deep.equal([names.dead, names.gone, 'live-expired', 'live-failed', names.live, 'live-idle-hour'].sort())
    const alone = await cli(['pods', 'gc', '--dry-run', '--include-live-replicas'])
    expect(alone.exitCode).to.equal(2)

    const r = await cli(['pods', 'gc', '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(JSON.parse(r.stdout) as GcOut).to.deep.include({deleted: 3, skipped: 0, failed: 0})
    await until(async () => (await podNames(pb, ns)).join() === [names.live, 'live-expired', 'live-idle-hour'].sort().join(), `only the live replica's idle pods left (${await podNames(pb, ns)})`)
    // the live replica still serves from its pod
    const out = await handles[0]!.evaluator.evaluate({image: image('cat'), resourceList: RL})
    expect(Buffer.from(out.resourceList).toString()).to.equal(RL.toString())
  })

  it('gc reads the Leases after the pods, and when it cannot read them treats every runner as live (only failed pods go), said on stderr', async () => {
    await createPod(fnrPod('lone-expired', 'lone-runner', 3 * 3600_000, 60))
    await createPod(fnrPod('lone-failed', 'lone-runner', 0, 1800, image('crash')))
    await until(async () => (await phaseOf('lone-failed')) === 'Failed', 'the crashing pod failed')
    const since = pb.proxy.requests.length
    const ok = await cli(['pods', 'gc', '--dry-run', '--json'])
    expect(ok.exitCode, ok.stderr).to.equal(0)
    const order = pb.proxy.requests.slice(since).filter((q) => q.verb === 'list' && q.namespace === ns).map((q) => q.resource)
    expect(order.indexOf('leases'), order.join()).to.be.greaterThan(order.indexOf('pods'))
    expect(order.indexOf('leases'), order.join()).to.be.greaterThan(order.indexOf('services'))
    expect((JSON.parse(ok.stdout) as GcOut).items.map((i) => i.name).sort()).to.deep.equal(['lone-expired', 'lone-failed'])

    const fault = pb.proxy.failNext({verb: 'list', resource: 'leases', namespace: ns, code: 403, times: Infinity})
    try {
      const r = await cli(['pods', 'gc', '--dry-run', '--json'])
      expect(r.exitCode, r.stderr).to.equal(0)
      expect(r.stderr).to.include('Cannot read the replica Leases').and.include('only pods that failed or ended are deleted')
      expect((JSON.parse(r.stdout) as GcOut).items.map((i) => i.name)).to.deep.equal(['lone-failed'])
    } finally {
      fault.cancel()
    }
  })
})
