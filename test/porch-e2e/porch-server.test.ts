/**
 * Porch itself calling fnr (docs/porch-swap.md, "porch-server itself with fnr as its runner"): porch-server v1.5.8
 * (built from the module proxy, scripts/porch-peers.mjs) as a process on loopback behind the project's control plane
 * (etcd 3.6, the aggregation layer), with Porch's CRDs and APIService as written, a git smart-HTTP server standing in
 * for Gitea, and `--function-runner` pointing at `fnr serve` (exec runtime, the catalog binaries mapped by
 * functions/catalog.yaml). Through porchctl: register a Repository, clone Porch's test blueprint `bucket/v1` (its
 * pipeline runs apply-setters v0.2.2), edit its setters (render again), propose, approve. The same scenario then runs
 * with Porch's own runner (func/server v1.5.8) in its place, and what each published to git is compared byte for byte.
 *
 * Opt-in (`npm run porch-e2e`, scripts/porch-e2e.mjs): porch-server's cold build takes most of an hour on two cores.
 */
import {expect} from 'chai'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {loadavg, tmpdir} from 'node:os'
import path from 'node:path'

import {execa} from 'execa'

import {buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {buildPorchServer} from '../../scripts/porch-peers.mjs'
import {porchServerFiles} from './porch-files.js'
import {startGitHttpServer, type GitHttpServer} from './git-http.js'
import {git, installPorchApi, startPorchServer, until, waitForPorchApi, type PorchServer} from './porch-server.js'
import {runnerBed, startPorchRunner, type PorchRunner} from '../porch-side-by-side/support.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import {startControlPlane} from '../support/cluster/controlplane.js'
import {adminClient} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import type {KubeObject} from '../support/k8s/status.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'

const BLUEPRINTS = 'test-blueprints.git'
const PACKAGE = 'bucket-copy'

interface Step {
  what: string
  ms: number
}

interface Outcome {
  /** path under the package → bytes, as committed on main after approval. */
  published: Map<string, Buffer>
  tags: string[]
  /** The PackageRevision's lifecycle after approval. */
  lifecycle: string
  renderStatus: KubeObject | undefined
  steps: Step[]
}

/** A bare repository `name` under `root` with one commit on main (Porch registers a branch that exists). */
async function seedRepo(root: string, name: string, work: string): Promise<void> {
  const bare = path.join(root, name)
  await git(['init', '-q', '--bare', '-b', 'main', bare])
  const clone = path.join(work, `seed-${name}`)
  await git(['init', '-q', '-b', 'main', clone])
  await writeFile(path.join(clone, 'README.md'), `# ${name}\n`)
  await git(['add', '.'], clone)
  await git(['commit', '-q', '-m', 'initial'], clone)
  await git(['push', '-q', bare, 'main'], clone)
}

describe('porch-server v1.5.8 on the real control plane, with fnr serve as its function runner', function () {
  this.timeout(1_800_000)
  let work: string
  let cp: ControlPlane | undefined
  let client: KubeRestClient
  let gitServer: GitHttpServer | undefined
  let fnr: ServeProcess | undefined
  let porchRunner: PorchRunner | undefined
  let porchctl: string
  let porchBinary: string
  let server: PorchServer | undefined
  const outcomes: Record<string, Outcome> = {}

  before(async function () {
    const files = porchServerFiles()
    const built = buildPorchServer()
    porchctl = built.porchctl
    porchBinary = built.porch
    const runner = buildPorchRunner().server
    work = await mkdtemp(path.join(tmpdir(), 'fnr-porch-e2e-'))
    cp = await startControlPlane({dir: path.join(work, 'cluster'), kubelet: false, scheduler: false})
    client = adminClient(cp)
    await installPorchApi(cp, client, files)
    const repos = path.join(work, 'git')
    await mkdir(repos, {recursive: true})
    await git(['clone', '-q', '--bare', files.blueprintsBundle, path.join(repos, BLUEPRINTS)])
    gitServer = await startGitHttpServer(repos)
    const bed = await runnerBed(path.join(work, 'runner'))
    // fnr first: porch-server's client backs off for ~40 s when its runner is not up yet (docs/porch-swap.md).
    fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
    porchRunner = await startPorchRunner(runner, bed)
  })

  after(async function () {
    await server?.stop()
    fnr?.child.kill('SIGTERM')
    if (fnr) await fnr.exited
    await porchRunner?.stop()
    await gitServer?.stop()
    client?.close()
    await cp?.stop()
    if (work) await rm(work, {recursive: true, force: true})
  })

  /** porchctl with the admin kubeconfig; timed into `steps`. */
  const ctl = async (steps: Step[], what: string, args: string[]): Promise<string> => {
    const t = performance.now()
    const r = await execa(porchctl, args, {env: {KUBECONFIG: cp!.kubeconfigPath, HOME: work}, reject: false, timeout: 300_000})
    steps.push({what, ms: Math.round(performance.now() - t)})
    if (r.exitCode !== 0) throw new Error(`porchctl ${args.join(' ')} exited ${r.exitCode}:\n${String(r.stdout)}\n${String(r.stderr)}\nporch-server log (last lines):\n${server?.log().split('\n').slice(-30).join('\n')}`)
    return String(r.stdout)
  }

  const packageRevision = async (ns: string): Promise<KubeObject> =>
    until(`the PackageRevision of ${PACKAGE} in ${ns}`, 60_000, async () => {
      const list = await client.get(`/apis/porch.kpt.dev/v1alpha1/namespaces/${ns}/packagerevisions`)
      return (list.items as KubeObject[]).find((p) => p.spec?.packageName === PACKAGE && p.spec?.workspaceName === 'v1')
    })

  /** fnr's request log lines for apply-setters calls (JSON, with the call's time in ms). */
  const fnrCalls = (): Array<{code: number; evaluator: string; ms: number; image: string}> =>
    fnr!.stderr().split('\n').filter((l) => l.includes('apply-setters') && l.includes('"ms"')).map((l) => JSON.parse(l))

  /** The whole scenario against porch-server calling `runner`: what it published to git, and the time of each step. */
  async function scenario(label: string, runner: string): Promise<Outcome> {
    const steps: Step[] = []
    const ns = `porch-e2e-${label}`
    const repoName = `deployments-${label}.git`
    await seedRepo(path.join(work, 'git'), repoName, work)
    await server?.stop()
    let t = performance.now()
    server = await startPorchServer(porchBinary, cp!, path.join(work, `porch-server-${label}`), runner)
    await waitForPorchApi(server, client)
    steps.push({what: 'porch-server start → APIService Available', ms: Math.round(performance.now() - t)})
    await client.create('/api/v1/namespaces', {apiVersion: 'v1', kind: 'Namespace', metadata: {name: ns}})

    await ctl(steps, 'porchctl repo reg', ['repo', 'reg', `${gitServer!.url}/${repoName}`, '--name=deployments', '--branch=main', `--namespace=${ns}`])
    t = performance.now()
    await until('Repository deployments Ready', 180_000, async () => {
      const repo = await client.get(`/apis/config.porch.kpt.dev/v1alpha1/namespaces/${ns}/repositories/deployments`)
      return (repo.status?.conditions ?? []).some((c: KubeObject) => c.type === 'Ready' && c.status === 'True')
    })
    steps.push({what: 'Repository Ready', ms: Math.round(performance.now() - t)})

    await ctl(steps, 'porchctl rpkg clone bucket/v1 (render)', ['rpkg', 'clone', `${gitServer!.url}/${BLUEPRINTS}`, PACKAGE, '--directory=bucket', '--ref=bucket/v1', '--repository=deployments', '--workspace=v1', `--namespace=${ns}`])
    const name = (await packageRevision(ns)).metadata.name as string

    // Edit the setters and push: porch-server renders again (apply-setters through the runner).
    const dir = path.join(work, `pull-${label}`)
    await ctl(steps, 'porchctl rpkg pull', ['rpkg', 'pull', name, dir, `--namespace=${ns}`])
    const settersPath = path.join(dir, 'setters.yaml')
    const setters = await readFile(settersPath, 'utf8')
    expect(setters).to.contain('name: bucket2').and.contain('storage-class: nearline')
    await writeFile(settersPath, setters.replace('name: bucket2', 'name: fnr-bucket').replace('#project-id: project-id', 'project-id: swap-proof').replace('storage-class: nearline', 'storage-class: coldline'))
    await ctl(steps, 'porchctl rpkg push (render)', ['rpkg', 'push', name, dir, `--namespace=${ns}`])
    const resources = await client.get(`/apis/porch.kpt.dev/v1alpha1/namespaces/${ns}/packagerevisionresources/${name}`)
    const renderStatus = resources.status?.renderStatus as KubeObject | undefined

    await ctl(steps, 'porchctl rpkg propose', ['rpkg', 'propose', name, `--namespace=${ns}`])
    await ctl(steps, 'porchctl rpkg approve', ['rpkg', 'approve', name, `--namespace=${ns}`])

    const lifecycle = (await packageRevision(ns)).spec.lifecycle as string
    // What porch-server committed: the package folder on main, and its tag.
    const bare = path.join(work, 'git', repoName)
    const paths = (await git(['--git-dir', bare, 'ls-tree', '-r', '--name-only', 'main', '--', PACKAGE])).split('\n').filter(Boolean)
    const published = new Map<string, Buffer>()
    for (const p of paths) {
      const r = await execa('git', ['--git-dir', bare, 'show', `main:${p}`], {encoding: 'buffer'})
      published.set(p, Buffer.from(r.stdout))
    }
    const tags = (await git(['--git-dir', bare, 'tag', '--list'])).split('\n').filter(Boolean)
    return {published, tags, lifecycle, renderStatus, steps}
  }

  it('fnr serve: registers the repository, clones bucket/v1, renders, edits and renders again, proposes and approves', async () => {
    const o = await scenario('fnr', `127.0.0.1:${fnr!.port}`)
    outcomes.fnr = o
    // fnr served porch-server's calls: apply-setters, through the exec runtime.
    const calls = fnrCalls()
    expect(calls.length, fnr!.stderr().slice(-3000)).to.be.greaterThan(0)
    for (const c of calls) expect(c).to.include({code: 0, evaluator: 'exec', image: 'ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.2'})
    o.steps.push(...calls.map((c) => ({what: 'fnr: one EvaluateFunction call (apply-setters, exec)', ms: c.ms})))
    expect(o.tags).to.include(`${PACKAGE}/v1`)
    expect(o.lifecycle).to.equal('Published')
    // What porch-server keeps of the last render: kpt's result, exit code 0, no error.
    expect(o.renderStatus, 'renderStatus').to.deep.equal({result: {metadata: {}, exitCode: 0}, error: ''})
    const bucket = o.published.get(`${PACKAGE}/bucket.yaml`)?.toString()
    expect(bucket, [...o.published.keys()].join(', ')).to.contain('name: swap-proof-fnr-bucket').and.contain('storageClass: coldline').and.contain('cnrm.cloud.google.com/project-id: swap-proof')
  })

  it("Porch's own runner in its place: the same package, byte for byte, in git", async function () {
    expect(outcomes.fnr, 'the fnr scenario ran').to.not.equal(undefined)
    const fnrCallsBefore = fnrCalls().length
    const o = await scenario('porch', `127.0.0.1:${porchRunner!.port}`)
    outcomes.porch = o
    // porch-server called Porch's runner this time, not fnr.
    expect(fnrCalls().length).to.equal(fnrCallsBefore)
    expect(o.lifecycle).to.equal('Published')
    expect(o.renderStatus).to.deep.equal(outcomes.fnr!.renderStatus)
    expect([...o.published.keys()]).to.deep.equal([...outcomes.fnr!.published.keys()])
    for (const [p, bytes] of o.published) expect(outcomes.fnr!.published.get(p)!.equals(bytes), `${p}, byte for byte:\n${outcomes.fnr!.published.get(p)}\n---\n${bytes}`).to.equal(true)
    expect(o.tags).to.deep.equal(outcomes.fnr!.tags)
    // The measurements (docs/porch-swap.md records them).
    const rows = o.steps.map((s, i) => `| ${s.what} | ${outcomes.fnr!.steps[i]?.ms ?? ''} | ${s.ms} |`)
    rows.push(...outcomes.fnr!.steps.slice(o.steps.length).map((s) => `| ${s.what} | ${s.ms} | |`))
    console.log(`\n      published: ${[...o.published].map(([p, b]) => `${p} (${b.length} bytes)`).join(', ')}; tags: ${o.tags.join(', ')}`)
    console.log(`\n      load average ${loadavg().map((l) => l.toFixed(2)).join(', ')}\n      | step | fnr (ms) | Porch's runner (ms) |\n      |---|---|---|\n${rows.map((r) => `      ${r}`).join('\n')}`)
  })
})
