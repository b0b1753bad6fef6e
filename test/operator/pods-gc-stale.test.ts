/**
 * The stale-template rule of `fnr pods gc` (the built CLI against the real control plane): pods made from
 * another template version than the runner's current one go once idle past --stale-grace; pods
 * of the current version, and pods used recently or with a call in flight, stay.
 */
import {expect} from 'chai'

import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, ANNOTATION_TEMPLATE_VERSION, ANNOTATION_TTL, LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER} from '../../src/lib/pods/model/naming.js'
import {inlineTemplates, templatesFromConfigMap} from '../../src/lib/pods/model/template.js'
import {inlineResources} from '../../src/lib/pods/admin/templates.js'
import {runCli} from '../support/cli.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {gateStarts, podNames, startClusterRuntime, useClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image, until, type RuntimeHandle} from '../support/pods/index.js'

const MiB6 = 6 * 1024 * 1024
/** The version `fnr serve` gives its inline template with default flags and WRAPPER_IMAGE. */
const CURRENT = inlineTemplates({wrapperServerImage: WRAPPER_IMAGE, resources: inlineResources({podRequests: 'cpu=100m,memory=128Mi', podLimits: 'memory=1Gi'})}, {maxRequestBodySize: MiB6}).version
const ago = (ms: number): string => new Date(Date.now() - ms).toISOString()

/** An fnr pod as a runner leaves it (a no-process 'skip' pod), of some template version. */
function fnrPod(name: string, version: string | undefined, lastUsedAgoMs: number, ttlSeconds = 86_400): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: {[LABEL_MANAGED_BY]: 'fnr', [LABEL_FN_IMAGE]: name, [LABEL_OWNER]: 'runner-b'},
      annotations: {[ANNOTATION_IMAGE]: image('cat'), [ANNOTATION_LAST_USED]: ago(lastUsedAgoMs), [ANNOTATION_TTL]: String(ttlSeconds), ...(version ? {[ANNOTATION_TEMPLATE_VERSION]: version} : {})},
    },
    spec: {restartPolicy: 'Never', containers: [{name: 'function', image: WRAPPER_IMAGE, command: ['/wrapper-server-tools/wrapper-server']}]},
  }
}

interface GcOut {
  dryRun: boolean
  templateVersion: string | null
  items: Array<{kind: string; name: string; reason: string; deleted: boolean}>
  deleted: number
  failed: number
}

describe('fnr pods gc: the stale-template rule (on the real control plane)', function () {
  this.timeout(180_000)
  waitForClusterBinaries()
  let pb: ClusterPodBed
  let ns: string
  let h: RuntimeHandle | undefined
  const env = (): NodeJS.ProcessEnv => {
    const e = {...process.env}
    delete e.WRAPPER_SERVER_IMAGE
    return e
  }
  const gc = (args: string[]) => runCli(['pods', 'gc', '--kubeconfig', pb.kubeconfigPath, '-n', ns, ...args], {timeout: 120_000, env: env(), extendEnv: false})
  const createPod = (pod: object) => pb.admin.create(`/api/v1/namespaces/${ns}/pods`, pod)

  useClusterPodBed({
    bed: (bed) => (pb = bed),
    setup: async () => {
      pb.kubelet.setImage('fnr.test/wrapper-server:v0', 'skip')
    },
    namespace: (name) => (ns = name),
    cleanup: async () => {
      await h?.close()
      h = undefined
    },
  })

  /** Pods of the current and old template versions, idle, recently used, and one with a call in flight. */
  async function populate(): Promise<string> {
    // A runner of an older wrapper-server image (so another template version) with a call in
    // flight; started first, as its startup adoption deletes other versions' pods.
    h = await startClusterRuntime(pb, {namespace: ns, wrapperServerImage: 'fnr.test/wrapper-server:v0', owner: 'runner-old'})
    const inFlight = h.evaluator.evaluate({image: image('gate'), resourceList: RL})
    inFlight.catch(() => {})
    await until(async () => (await gateStarts(pb)) === 1, 'the call running')
    const busy = h.runtime.cache.snapshot().find((s) => s.image === image('gate'))!
    expect(busy.templateVersion).to.not.equal(CURRENT)
    await createPod(fnrPod('old-idle', 'inline-000000000000', 3600_000))
    await createPod(fnrPod('unversioned-idle', undefined, 3600_000))
    await createPod(fnrPod('current-idle', CURRENT, 3600_000))
    await createPod(fnrPod('old-recent', 'inline-000000000000', 300_000))
    // versions from FunctionConfig sources, which the CLI does not read: never judged stale
    await createPod(fnrPod('fc-overlay-idle', `${CURRENT}-fc0123456789ab`, 3600_000))
    await createPod(fnrPod('porch-base-idle', 'porch-0123456789ab', 3600_000))
    return busy.name
  }

  it('--dry-run lists pods of another template version idle past --stale-grace, and deletes nothing', async () => {
    const busy = await populate()
    const before = await podNames(pb, ns)
    const r = await gc(['--dry-run', '--json', '--wrapper-server-image', WRAPPER_IMAGE])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as GcOut
    expect(out.templateVersion).to.equal(CURRENT)
    expect(out.items.map((i) => i.name).sort()).to.deep.equal(['old-idle', 'unversioned-idle'])
    expect(out.items.find((i) => i.name === 'old-idle')!.reason).to.equal(`stale template: version inline-000000000000 is not the current ${CURRENT}`)
    const text = await gc(['--dry-run', '--wrapper-server-image', WRAPPER_IMAGE])
    expect(text.stdout).to.include('would delete pod old-idle').and.include('stale template')
    expect(text.stderr).to.include(`Current template version ${CURRENT} (the inline template)`)
    expect(await podNames(pb, ns)).to.deep.equal(before)
    expect(before).to.include(busy)
  })

  it('deletes stale idle pods; keeps the current version, recently used pods and the busy pod of an old template', async () => {
    const busy = await populate()
    const r = await gc(['--json', '--wrapper-server-image', WRAPPER_IMAGE])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as GcOut
    expect(out).to.deep.include({deleted: 2, failed: 0})
    await until(async () => !(await podNames(pb, ns)).some((n) => n === 'old-idle' || n === 'unversioned-idle'), 'the stale pods gone')
    expect(await podNames(pb, ns)).to.deep.equal(['current-idle', 'fc-overlay-idle', 'old-recent', 'porch-base-idle', busy].sort())
    // --stale-grace shorter than the recent pod's idle time: it goes too; the busy pod (used just now) stays
    const short = await gc(['--json', '--wrapper-server-image', WRAPPER_IMAGE, '--stale-grace', '2m'])
    expect((JSON.parse(short.stdout) as GcOut).items.map((i) => i.name)).to.deep.equal(['old-recent'])
    await until(async () => !(await podNames(pb, ns)).includes('old-recent'), 'the recent stale pod gone')
    expect(await podNames(pb, ns)).to.include(busy)
    await pb.openGate()
  })

  it('reads the current version from the runner\'s template ConfigMap (--function-pod-template)', async () => {
    const name = `gc-template-${ns}`
    const data = {
      template: 'apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: function\n    image: placeholder\n    command: [/wrapper-server-tools/wrapper-server]\n',
      serviceTemplate: 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n',
    }
    await pb.admin.create(`/api/v1/namespaces/${pb.runnerNs}/configmaps`, {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name}, data})
    const version = templatesFromConfigMap({metadata: {name, namespace: pb.runnerNs}, data}, {maxRequestBodySize: MiB6}).version
    await createPod(fnrPod('cm-current', version, 3600_000))
    await createPod(fnrPod('inline-old', CURRENT, 3600_000))
    const r = await gc(['--dry-run', '--json', '--function-pod-template', name, '--runner-namespace', pb.runnerNs])
    expect(r.exitCode, r.stderr).to.equal(0)
    const out = JSON.parse(r.stdout) as GcOut
    expect(out.templateVersion).to.equal(version)
    expect(out.items.map((i) => i.name)).to.deep.equal(['inline-old'])
    const missing = await gc(['--dry-run', '--function-pod-template', 'nope', '--runner-namespace', pb.runnerNs])
    expect(missing.exitCode).to.equal(3)
    expect(missing.stderr.trim().split('\n')).to.have.length(1)
    expect(missing.stderr).to.include(`ConfigMap ${pb.runnerNs}/nope`)
  })

  it('is off without the runner\'s template settings, and says so', async () => {
    await createPod(fnrPod('old-idle', 'inline-000000000000', 3600_000))
    const r = await gc(['--dry-run'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stderr).to.include('Stale-template rule off')
    expect(r.stdout).to.equal('')
    const j = JSON.parse((await gc(['--dry-run', '--json'])).stdout) as GcOut
    expect(j).to.deep.include({templateVersion: null, items: []})
  })

  it('--help has examples and explains the rule', async () => {
    const r = await runCli(['pods', 'gc', '--help'])
    expect(r.exitCode).to.equal(0)
    expect(r.stdout).to.include('EXAMPLES').and.include('--stale-grace').and.include('Stale templates')
  })
})
