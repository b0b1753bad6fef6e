import {expect} from 'chai'
import {execa} from 'execa'

import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, ANNOTATION_TTL, LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER, LABEL_POD} from '../../src/lib/pods/model/naming.js'
import {runCli} from '../support/cli.js'
import {BIN_RUN} from '../support/serve.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {gateStarts, listPods, listServices, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until, type RuntimeHandle} from '../support/pods/index.js'

/** A pod as another runner (or Porch) would have left it; runs as a no-process 'skip' pod. */
function strayPod(name: string, labels: Record<string, string>, annotations: Record<string, string> = {}, img = WRAPPER_IMAGE): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name, labels, annotations},
    spec: {restartPolicy: 'Never', containers: [{name: 'function', image: img, command: ['/wrapper-server-tools/wrapper-server']}]},
  }
}

const ours = (name: string, owner: string): Record<string, string> => ({[LABEL_MANAGED_BY]: 'fnr', [LABEL_FN_IMAGE]: name, [LABEL_OWNER]: owner})
const ago = (ms: number): string => new Date(Date.now() - ms).toISOString()

const POD_INFO_KEYS = ['pod', 'service', 'image', 'phase', 'ready', 'state', 'detail', 'created', 'ageSeconds', 'lastUsed', 'ttlSeconds', 'ttlLeftSeconds', 'templateVersion', 'owner', 'ownerLease', 'podIP']

describe('fnr pods ls|gc (on the real control plane)', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let h: RuntimeHandle | undefined
  let ns: string
  const cli = (args: string[]) => runCli([...args, '--kubeconfig', pb.kubeconfigPath, '-n', ns], {timeout: 120_000})
  const createPod = (pod: object) => pb.admin.create(`/api/v1/namespaces/${ns}/pods`, pod)
  const createService = (svc: object) => pb.admin.create(`/api/v1/namespaces/${ns}/services`, {apiVersion: 'v1', kind: 'Service', ...svc})
  const serviceNames = async (): Promise<string[]> => (await listServices(pb, ns)).map((s) => s.metadata!.name!)

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  /** Pods of every kind: one the runtime made (in use), and strays of other runners, Porch and others. */
  async function populate(): Promise<void> {
    h = await startClusterRuntime(pb, {namespace: ns})
    await h.evaluator.evaluate({image: image('cat'), resourceList: RL})
    await createPod(strayPod('other-expired', ours('other-expired', 'runner-b'), {[ANNOTATION_IMAGE]: image('cat'), [ANNOTATION_LAST_USED]: ago(3 * 3600_000), [ANNOTATION_TTL]: '60'}))
    await createPod(strayPod('other-fresh', ours('other-fresh', 'runner-b'), {[ANNOTATION_IMAGE]: image('cat'), [ANNOTATION_LAST_USED]: ago(0), [ANNOTATION_TTL]: '1800'}))
    await createPod(strayPod('other-idle-hour', ours('other-idle-hour', 'runner-b'), {[ANNOTATION_IMAGE]: image('stderr'), [ANNOTATION_LAST_USED]: ago(3600_000), [ANNOTATION_TTL]: '86400'}))
    await createPod(strayPod('other-failed', ours('other-failed', 'runner-b'), {[ANNOTATION_IMAGE]: image('crash'), [ANNOTATION_LAST_USED]: ago(0), [ANNOTATION_TTL]: '1800'}, image('crash')))
    await createPod(strayPod('porch-pod', {[LABEL_FN_IMAGE]: 'porch-pod'}, {[ANNOTATION_LAST_USED]: ago(3 * 3600_000), [ANNOTATION_TTL]: '60'}))
    await createPod(strayPod('unrelated', {app: 'web'}))
    await createService({metadata: {name: 'orphan-svc', labels: {[LABEL_MANAGED_BY]: 'fnr', [LABEL_POD]: 'gone-pod'}}, spec: {ports: [{port: 9446}], selector: {[LABEL_FN_IMAGE]: 'gone-pod'}}})
    await createService({metadata: {name: 'porch-svc'}, spec: {ports: [{port: 9446}], selector: {[LABEL_FN_IMAGE]: 'gone-pod'}}})
    await until(async () => (await listPods(pb, ns)).find((p) => p.metadata!.name === 'other-failed')?.status?.phase === 'Failed', 'the crashing pod failed')
  }

  it('ls: says so clearly when there are no function pods (text on stderr, nothing on stdout; JSON lists none)', async () => {
    await createPod(strayPod('unrelated', {app: 'web'}))
    const r = await cli(['pods', 'ls'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.equal('')
    expect(r.stderr).to.include(`No function pods managed by fnr in namespace ${ns}`)
    const j = await cli(['pods', 'ls', '--json'])
    expect(j.exitCode, j.stderr).to.equal(0)
    expect(JSON.parse(j.stdout)).to.deep.equal({namespace: ns, pods: []})
  })

  it('ls: lists every fnr pod with its Service, state, TTL and owner, never others; --image filters; --json has the documented schema', async () => {
    await populate()
    const [runtimePod] = h!.runtime.cache.snapshot()
    const j = await cli(['pods', 'ls', '--json'])
    expect(j.exitCode, j.stderr).to.equal(0)
    const out = JSON.parse(j.stdout) as {namespace: string; pods: Array<Record<string, unknown>>}
    expect(out.namespace).to.equal(ns)
    expect(out.pods.map((p) => p.pod).sort()).to.deep.equal([runtimePod!.name, 'other-expired', 'other-failed', 'other-fresh', 'other-idle-hour'].sort())
    for (const p of out.pods) expect(Object.keys(p)).to.have.members(POD_INFO_KEYS)
    const mine = out.pods.find((p) => p.pod === runtimePod!.name)!
    expect(mine).to.deep.include({service: runtimePod!.name, image: image('cat'), phase: 'Running', ready: true, state: 'ready', owner: 'runner-a', ownerLease: 'live', ttlSeconds: 1800, templateVersion: runtimePod!.templateVersion})
    expect(out.pods.find((p) => p.pod === 'other-fresh')!.ownerLease).to.equal('none') // runner-b holds no Lease
    expect(mine.ttlLeftSeconds).to.be.a('number').greaterThan(1700)
    expect(mine.ageSeconds).to.be.a('number')
    expect(out.pods.find((p) => p.pod === 'other-expired')!.ttlLeftSeconds).to.be.lessThan(0)
    expect(out.pods.find((p) => p.pod === 'other-failed')).to.deep.include({state: 'failed', ready: false, phase: 'Failed'})

    const text = await cli(['pods', 'ls'])
    expect(text.exitCode, text.stderr).to.equal(0)
    const lines = text.stdout.trim().split('\n')
    expect(lines[0]).to.match(/^IMAGE\s+POD\s+SERVICE\s+STATE\s+READY\s+AGE\s+LAST USED\s+TTL LEFT\s+TEMPLATE\s+OWNER\s+LEASE$/)
    expect(lines).to.have.length(6)
    expect(text.stdout).to.include(runtimePod!.name).and.include('expired').and.not.include('porch-pod').and.not.include('unrelated')

    const filtered = await cli(['pods', 'ls', '--json', '--image', image('stderr')])
    expect((JSON.parse(filtered.stdout) as {pods: Array<{pod: string}>}).pods.map((p) => p.pod)).to.deep.equal(['other-idle-hour'])
  })

  it('gc --dry-run lists what the GC rules collect and deletes nothing', async () => {
    await populate()
    const before = await podNames(pb, ns)
    const r = await cli(['pods', 'gc', '--dry-run', '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as {dryRun: boolean; items: Array<{kind: string; name: string; reason: string; deleted: boolean}>}
    expect(out.dryRun).to.equal(true)
    expect(out.items.map((i) => `${i.kind}/${i.name}`).sort()).to.deep.equal(['pod/other-expired', 'pod/other-failed'])
    expect(out.items.every((i) => !i.deleted)).to.equal(true)
    const text = await cli(['pods', 'gc', '--dry-run'])
    expect(text.stdout).to.include('would delete pod other-expired').and.include('would delete pod other-failed')
    expect(await podNames(pb, ns)).to.deep.equal(before)
    expect(await listServices(pb, ns)).to.have.length(3)
  })

  it('gc deletes expired and failed fnr pods with their Services; keeps pods in use, fresh ones and everything not fnr\'s', async () => {
    await populate()
    // the runtime's pod has a call in flight
    const inFlight = h!.evaluator.evaluate({image: image('gate'), resourceList: RL})
    await until(async () => (await gateStarts(pb)) === 1, 'the call running')
    const busy = h!.runtime.cache.snapshot().find((s) => s.image === image('gate'))!.name
    const r = await cli(['pods', 'gc'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.include('deleted pod other-expired').and.include('deleted pod other-failed')
    // not a terminal: one plain progress line per pod on stderr
    expect(r.stderr).to.include('ok: deleted pod other-expired')
    await until(async () => !(await podNames(pb, ns)).some((n) => n === 'other-expired' || n === 'other-failed'), 'the collected pods gone')
    expect(await podNames(pb, ns)).to.include.members([busy, 'other-fresh', 'other-idle-hour', 'porch-pod', 'unrelated'])
    expect(await serviceNames()).to.include.members(['porch-svc', 'orphan-svc'])
    await pb.openGate()
    await inFlight
  })

  it('gc --older-than collects pods idle longer than that, whatever their TTL', async () => {
    await populate()
    const r = await cli(['pods', 'gc', '--older-than', '30m', '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as {items: Array<{name: string; reason: string; deleted: boolean}>; deleted: number; failed: number}
    expect(out.items.map((i) => i.name).sort()).to.deep.equal(['other-expired', 'other-failed', 'other-idle-hour'])
    expect(out.items.find((i) => i.name === 'other-idle-hour')!.reason).to.equal('idle for longer than --older-than')
    expect(out).to.deep.include({deleted: 3, failed: 0})
    await until(async () => !(await podNames(pb, ns)).includes('other-idle-hour'), 'the idle pod gone')
    expect(await podNames(pb, ns)).to.include.members(['other-fresh', 'porch-pod'])
  })

  it('gc --all removes every fnr pod and Service, and nothing else (once the runner is stopped: a live replica\'s fresh pods are kept)', async () => {
    await populate()
    const mine = h!.runtime.cache.snapshot().map((s) => s.name)
    const live = await cli(['pods', 'gc', '--all', '--dry-run', '--json'])
    expect(live.exitCode, live.stderr).to.equal(0)
    const planned = (JSON.parse(live.stdout) as {items: Array<{name: string}>}).items.map((i) => i.name)
    expect(planned).to.include.members(['other-expired', 'other-fresh', 'other-idle-hour', 'other-failed']).and.not.include.members(mine)
    await h!.close() // releases its Lease
    h = undefined
    const r = await cli(['pods', 'gc', '--all', '--json'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as {items: Array<{kind: string; name: string}>; failed: number}
    expect(out.failed).to.equal(0)
    expect(out.items.filter((i) => i.kind === 'service').map((i) => i.name)).to.deep.equal(['orphan-svc'])
    await until(async () => (await podNames(pb, ns)).join() === 'porch-pod,unrelated', `only foreign pods left (${await podNames(pb, ns)})`)
    await until(async () => (await serviceNames()).join() === 'porch-svc', 'only the foreign Service left')
  })

  it('gc: a deletion that fails gives exit 1, a FAILED line, the other deletions done, and --json counts it', async () => {
    await populate()
    const fault = pb.proxy.failNext({verb: 'delete', resource: 'pods', namespace: ns, name: 'other-failed', code: 403, times: Infinity, message: 'pods "other-failed" is forbidden: no delete for you'})
    try {
      const r = await cli(['pods', 'gc'])
      expect(r.exitCode, r.stderr).to.equal(1)
      expect(r.stdout.split('\n').sort()).to.deep.equal([`FAILED pod other-failed: cannot delete pod ${ns}/other-failed: pods "other-failed" is forbidden: no delete for you (HTTP 403)`, 'deleted pod other-expired: idle for longer than its TTL'].sort())
      const lines = r.stderr.trim().split('\n')
      expect(lines).to.include('ok: deleted pod other-expired: idle for longer than its TTL')
      expect(lines.filter((l) => l.startsWith('FAILED: cannot delete pod other-failed: '))).to.have.length(1)
      expect(lines.at(-1)).to.equal('fnr: 1 of 2 deletions failed')
      expect(lines.filter((l) => l.startsWith('fnr: '))).to.have.length(1)
      await until(async () => !(await podNames(pb, ns)).includes('other-expired'), 'the expired pod gone')
      expect(await podNames(pb, ns)).to.include('other-failed')

      const j = await cli(['pods', 'gc', '--json'])
      expect(j.exitCode, j.stderr).to.equal(1)
      const out = JSON.parse(j.stdout) as {items: Array<{name: string; deleted: boolean; skipped: boolean; error?: string}>; deleted: number; skipped: number; failed: number}
      expect(out).to.deep.include({deleted: 0, skipped: 0, failed: 1})
      expect(out.items).to.have.length(1)
      expect(out.items[0]).to.deep.include({name: 'other-failed', deleted: false, skipped: false})
      expect(out.items[0]!.error).to.include('forbidden')
      expect(j.stderr.trim().split('\n').at(-1)).to.equal('fnr: 1 of 1 deletions failed')
      // The summary keeps its shape and says why the exit code is 1.
      expect((out as unknown as {error: unknown}).error).to.deep.equal({kind: 'Internal', message: '1 of 1 deletions failed', exitCode: 1})
    } finally {
      fault.cancel()
    }
  })

  it('gc on a terminal shows listr2 progress per pod (ticks and crosses), then the same result lines', async () => {
    await populate()
    const fault = pb.proxy.failNext({verb: 'delete', resource: 'pods', namespace: ns, name: 'other-failed', code: 403, times: Infinity})
    try {
      const q = (a: string): string => `'${a.replace(/'/g, "'\\''")}'`
      const args = [process.execPath, BIN_RUN, 'pods', 'gc', '--kubeconfig', pb.kubeconfigPath, '-n', ns]
      // util-linux script(1) runs the command on a pseudo-terminal (stdout and stderr are a TTY), 200 columns wide
      const r = await execa('script', ['-qec', `stty cols 200 rows 50; ${args.map(q).join(' ')}`, '/dev/null'], {reject: false, timeout: 120_000, env: {...process.env, TERM: 'xterm'}})
      const text = String(r.stdout).replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '')
      expect(r.exitCode, text).to.equal(1)
      expect(text).to.match(/✔ deleted pod other-expired: idle for longer than its TTL/)
      expect(text).to.match(/✖ cannot delete pod other-failed: /)
      expect(text).to.not.include('ok: ')
      expect(text).to.include('FAILED pod other-failed: ')
      expect(text).to.include('fnr: 1 of 2 deletions failed')
    } finally {
      fault.cancel()
    }
  })

  it('errors are one line with a non-zero exit and no stack trace', async () => {
    const r = await runCli(['pods', 'ls', '--kubeconfig', '/nonexistent/kubeconfig'])
    expect(r.exitCode).to.equal(3)
    expect(r.stderr.trim().split('\n')).to.have.length(1)
    expect(r.stderr).to.match(/^fnr: /)
    const bad = await runCli(['pods', 'gc', '--older-than', 'soon', '--kubeconfig', pb.kubeconfigPath])
    expect(bad.exitCode).to.equal(2)
    expect(bad.stderr.trim().split('\n')).to.have.length(1)
    const ctx = await runCli(['pods', 'ls', '--kubeconfig', pb.kubeconfigPath, '--context', 'nope'])
    expect(ctx.exitCode).to.equal(3)
    expect(ctx.stderr).to.include('no context "nope"')
  })
})
