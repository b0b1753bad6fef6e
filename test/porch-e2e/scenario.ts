/**
 * The package scenario of test/porch-e2e/porch-server.test.ts, shared with bench/porch-server.ts: porch-server v1.5.8
 * (scripts/porch-peers.mjs) on loopback behind the project's control plane, Porch's CRDs and APIService as written, a
 * git smart-HTTP server for Gitea, and `fnr serve` and Porch's own runner both running, so that porch-server can be
 * started with either as its `--function-runner`.
 *
 * `packageScenario` runs what a Porch user does, through porchctl and the Porch API: register a Repository, clone
 * Porch's test blueprint `bucket/v1` (its pipeline runs apply-setters v0.2.2: a render), pull, edit its setters, push
 * (a second render), propose, approve; then `rpkg init` a new package, give it a resource and a pipeline
 * (set-labels v0.2.2, and with the bed's `podImage` a step fnr runs in a function pod), push (a render), propose,
 * approve. It times each step and returns what porch-server
 * published to git.
 */
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import path from 'node:path'

import {execa} from 'execa'
import {parse, parseDocument, stringify} from 'yaml'

import {buildCatalogFunctions, buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {buildPorchServer} from '../../scripts/porch-peers.mjs'
import {porchServerFiles} from './porch-files.js'
import {startGitHttpServer, type GitHttpServer} from './git-http.js'
import {deployPorchServer, GIT_URL, pushPorchServerImage} from './porch-pod.js'
import {git, installPorchApi, startPorchServer, until, waitForPorchApi} from './porch-server.js'
import {runnerBed, startPorchRunner, type PorchRunner} from '../porch-side-by-side/support.js'
import {startControlPlane, type ControlPlane} from '../support/cluster/controlplane.js'
import {applyRunnerManifests, deletePorchNamespaces, POD_NS, runnerKubeconfig} from '../support/cluster/porch-namespaces.js'
import {adminClient} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import type {KubeObject} from '../support/k8s/status.js'
import {pushWrapperServerImage} from '../support/node/fixtures.js'
import {TestDnsServer} from '../support/node/index.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {REPO_ROOT, startServeProcess, type ServeProcess} from '../support/serve.js'

const BLUEPRINTS = 'test-blueprints.git'
export const PACKAGE = 'bucket-copy'
/** The image of the blueprint's pipeline step, as porch-server sends it. */
export const APPLY_SETTERS = 'ghcr.io/kptdev/krm-functions-catalog/apply-setters:v0.2.2'
/** The package `rpkg init` makes, and the function its pipeline gets. */
export const INIT_PACKAGE = 'team-config'
export const SET_LABELS = 'ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2'

export interface Step {
  what: string
  ms: number
}

export interface Outcome {
  /** path under the package → bytes, as committed on main after approval. */
  published: Map<string, Buffer>
  tags: string[]
  /** The PackageRevision's lifecycle after approval. */
  lifecycle: string
  renderStatus: KubeObject | undefined
  steps: Step[]
}

/** Everything the scenario runs against; `stop` ends all of it and removes its files. */
export interface PorchBed {
  work: string
  cp: ControlPlane
  client: KubeRestClient
  git: GitHttpServer
  fnr: ServeProcess
  porchRunner: PorchRunner
  porchctl: string
  porchBinary: string
  /**
   * With `pods`: the catalog's set-annotations as an image in a registry of the bed, which fnr's exec
   * configuration does not map (fnr runs it in a function pod on the runc node) and Porch's runner's does (exec).
   */
  podImage?: string
  /**
   * With `porchPod`: porch-server's image laid out from Porch's Dockerfile (./porch-pod.ts), in a registry of the
   * bed; packageScenario then deploys porch-server from Porch's Deployment instead of starting the process.
   */
  porchImage?: string
  /** How long laying out and pushing that image took (ms). */
  porchImageMs?: number
  /** The porch-server running now (packageScenario starts one per run), process or pod. */
  server?: {log(): string | Promise<string>; stop(): Promise<void>}
  stop(): Promise<void>
}

/** What the pod runtime's part of the bed gives `fnr serve`, and the function image the scenario runs in a pod. */
interface PodParts {
  image: string
  /** The plain registry of the bed (the wrapper server's image is there). */
  registry: TestRegistry
  serveArgs: string[]
  serveEnv: Record<string, string>
}

/** The tag of the pod function's image. */
const POD_FUNCTION_TAG = 'v0.1.5'

/**
 * What fnr's pod runtime needs on the bed's control plane, as test/cluster/runner.test.ts sets it up: the wrapper
 * server image in a plain registry, set-annotations (the catalog binary at /usr/local/bin/function, as the catalog's
 * images are) in a TLS registry with credentials (fnr reads entrypoints over TLS only; the pod pulls through fnr's
 * pull Secret), fnr's manifests and the runner's token, the test DNS server for Service names. What it starts is
 * stopped by what it adds to `stops` (the bed's stop runs them, also after a failure half way).
 */
async function startPodParts(cp: ControlPlane, client: KubeRestClient, work: string, stops: Array<() => Promise<void>>): Promise<PodParts> {
  stops.push(() => deletePorchNamespaces(client).catch(() => {}))
  const registry = await TestRegistry.start({mode: 'none'})
  stops.push(() => registry.stop())
  const tlsRegistry = await TestRegistry.start({mode: 'tls'})
  stops.push(() => tlsRegistry.stop())
  const dns = await TestDnsServer.start(client)
  stops.push(() => dns.stop())
  await pushWrapperServerImage(registry, 'fnr/wrapper-server:v1')
  const authFile = await tlsRegistry.writeAuthFile('testuser', 'testpass')
  const binary = await readFile(path.join(buildCatalogFunctions(), 'set-annotations'))
  await pushImage(tlsRegistry, `kptdev/krm-functions-catalog/set-annotations:${POD_FUNCTION_TAG}`, {entrypoint: ['/usr/local/bin/function'], files: {'usr/local/bin/function': binary}, gzipLevel: 1}, authFile)
  await applyRunnerManifests(cp, path.join(REPO_ROOT, 'manifests'))
  const kubeconfig = await runnerKubeconfig(cp, client, work)
  const image = `${tlsRegistry.host}/kptdev/krm-functions-catalog/set-annotations:${POD_FUNCTION_TAG}`
  const serveArgs = [
    `--kubeconfig=${kubeconfig}`,
    `--pod-namespace=${POD_NS}`,
    '--warm-up-pod-cache=false',
    '--pod-cache-config=',
    '--enable-private-registries',
    `--registry-auth-secret-path=${authFile}`,
    '--enable-private-registries-tls',
    `--tls-secret-path=${tlsRegistry.certDir}`,
  ]
  return {image, registry, serveArgs, serveEnv: {WRAPPER_SERVER_IMAGE: `${registry.host}/fnr/wrapper-server:v1`, POD_NAME: '', FNR_DNS_SERVER: dns.address}}
}

/**
 * Builds (or reuses) the peers and starts the bed. `serveArgs` go to `fnr serve`. `pods`: a node (runc) and the
 * scheduler on the control plane, and fnr's pod runtime on, with `podImage` for the scenario. `porchPod` (with
 * `pods`): porch-server runs as a pod from Porch's Deployment (./porch-pod.ts): kube-apiserver's
 * `--enable-aggregator-routing` on (the APIService reaches the pod through its Service's EndpointSlice), Porch's
 * `api` Service as Porch writes it instead of the ExternalName one, and porch-server's image in the bed's registry.
 */
export async function startPorchBed(serveArgs: string[] = [], options: {pods?: boolean; porchPod?: boolean} = {}): Promise<PorchBed> {
  if (options.porchPod && !options.pods) throw new Error('startPorchBed: porchPod needs pods (the runc node)')
  const files = porchServerFiles()
  const built = buildPorchServer()
  const runner = buildPorchRunner().server
  const work = await mkdtemp(path.join(tmpdir(), 'fnr-porch-e2e-'))
  const parts: Partial<PorchBed> = {work, porchctl: built.porchctl, porchBinary: built.porch}
  /** The pod runtime's parts, stopped in reverse order. */
  const podStops: Array<() => Promise<void>> = []
  const stop = async (): Promise<void> => {
    await parts.server?.stop()
    parts.fnr?.child.kill('SIGTERM')
    if (parts.fnr) await parts.fnr.exited
    await parts.porchRunner?.stop()
    await parts.git?.stop()
    for (const stopPart of podStops.reverse()) await stopPart()
    parts.client?.close()
    await parts.cp?.stop()
    await rm(work, {recursive: true, force: true})
  }
  try {
    const node = options.pods ? {kubelet: {imageMap: {}, maxGracePeriodSeconds: 2, stopGraceMs: 1000}, scheduler: true} : {kubelet: false as const, scheduler: false}
    parts.cp = await startControlPlane({dir: path.join(work, 'cluster'), ...node, aggregatorRouting: options.porchPod === true})
    parts.client = adminClient(parts.cp)
    await installPorchApi(parts.cp, parts.client, files, {externalName: !options.porchPod})
    const repos = path.join(work, 'git')
    await mkdir(repos, {recursive: true})
    await git(['clone', '-q', '--bare', files.blueprintsBundle, path.join(repos, BLUEPRINTS)])
    parts.git = await startGitHttpServer(repos)
    const bed = await runnerBed(path.join(work, 'runner'))
    // fnr first: porch-server's client backs off for ~40 s when its runner is not up yet (docs/porch-swap.md).
    if (options.pods) {
      const pods = await startPodParts(parts.cp, parts.client, work, podStops)
      parts.podImage = pods.image
      if (options.porchPod) {
        const pushed = await pushPorchServerImage(pods.registry, built.porch)
        parts.porchImage = pushed.image
        parts.porchImageMs = pushed.ms
      }
      parts.fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, ...pods.serveArgs, ...serveArgs], pods.serveEnv)
      // Porch's runner has no pod runtime here: its own exec configuration maps the image to the same binary.
      const porchConfig = path.join(work, 'runner', 'porch-config.yaml')
      const config = parse(await readFile(bed.configPath, 'utf8')) as {functions: Array<{function: string; images: string[]}>}
      config.functions.push({function: 'set-annotations', images: [pods.image]})
      await writeFile(porchConfig, stringify(config))
      parts.porchRunner = await startPorchRunner(runner, {...bed, configPath: porchConfig})
    } else {
      parts.fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod', ...serveArgs])
      parts.porchRunner = await startPorchRunner(runner, bed)
    }
  } catch (err) {
    await stop()
    throw err
  }
  const ready = parts as PorchBed
  ready.stop = stop
  return ready
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

/** fnr's request log lines for calls to `image` (JSON, with the call's time in ms); apply-setters by default. */
export function fnrCallsTo(bed: PorchBed, image = APPLY_SETTERS): Array<{code: number; evaluator: string; ms: number; image: string}> {
  return bed.fnr
    .stderr()
    .split('\n')
    .filter((l) => l.includes('"ms"') && l.includes(`"image":"${image}"`))
    .map((l) => JSON.parse(l) as {code: number; evaluator: string; ms: number; image: string})
}

/**
 * The whole scenario against a porch-server (started here, after stopping the previous one) calling `runner`
 * (host:port), in namespace `porch-e2e-LABEL` with a repository of its own: what it published to git, and the time of
 * each step. The porch-server step is timed apart from the package's steps. With the bed's `porchImage`, porch-server
 * is a pod from Porch's Deployment instead (./porch-pod.ts): the Deployment names the runner's Service, whose
 * endpoint becomes `runner`'s port; it reaches git through the Service of GIT_URL.
 */
export async function packageScenario(bed: PorchBed, label: string, runner: string): Promise<Outcome> {
  const steps: Step[] = []
  const ns = `porch-e2e-${label}`
  const repoName = `deployments-${label}.git`
  const {client, work} = bed
  await seedRepo(path.join(work, 'git'), repoName, work)
  await bed.server?.stop()
  let t = performance.now()
  let gitUrl = bed.git.url
  if (bed.porchImage) {
    const runnerPort = Number(runner.slice(runner.lastIndexOf(':') + 1))
    bed.server = await deployPorchServer(bed.cp, client, bed.porchImage, {runnerPort, gitAlsoListen: (host) => bed.git.alsoListen(host)})
    gitUrl = GIT_URL
    steps.push({what: 'porch-server Deployment applied → APIService Available (pod)', ms: Math.round(performance.now() - t)})
  } else {
    const server = await startPorchServer(bed.porchBinary, bed.cp, path.join(work, `porch-server-${label}`), runner)
    bed.server = server
    await waitForPorchApi(server, client)
    steps.push({what: 'porch-server start → APIService Available', ms: Math.round(performance.now() - t)})
  }
  const server = bed.server
  await client.create('/api/v1/namespaces', {apiVersion: 'v1', kind: 'Namespace', metadata: {name: ns}})

  const ctl = async (what: string, args: string[]): Promise<string> => {
    const started = performance.now()
    const r = await execa(bed.porchctl, args, {env: {KUBECONFIG: bed.cp.kubeconfigPath, HOME: work}, reject: false, timeout: 300_000})
    steps.push({what, ms: Math.round(performance.now() - started)})
    if (r.exitCode !== 0) throw new Error(`porchctl ${args.join(' ')} exited ${r.exitCode}:\n${String(r.stdout)}\n${String(r.stderr)}\nporch-server log (last lines):\n${(await server.log()).split('\n').slice(-30).join('\n')}`)
    return String(r.stdout)
  }
  const packageRevision = async (pkg = PACKAGE): Promise<KubeObject> =>
    until(`the PackageRevision of ${pkg} in ${ns}`, 60_000, async () => {
      const list = await client.get(`/apis/porch.kpt.dev/v1alpha1/namespaces/${ns}/packagerevisions`)
      return (list.items as KubeObject[]).find((p) => p.spec?.packageName === pkg && p.spec?.workspaceName === 'v1')
    })

  await ctl('porchctl repo reg', ['repo', 'reg', `${gitUrl}/${repoName}`, '--name=deployments', '--branch=main', `--namespace=${ns}`])
  t = performance.now()
  await until('Repository deployments Ready', 180_000, async () => {
    const repo = await client.get(`/apis/config.porch.kpt.dev/v1alpha1/namespaces/${ns}/repositories/deployments`)
    return (repo.status?.conditions ?? []).some((c: KubeObject) => c.type === 'Ready' && c.status === 'True')
  })
  steps.push({what: 'Repository Ready', ms: Math.round(performance.now() - t)})

  await ctl('porchctl rpkg clone bucket/v1 (render)', ['rpkg', 'clone', `${gitUrl}/${BLUEPRINTS}`, PACKAGE, '--directory=bucket', '--ref=bucket/v1', '--repository=deployments', '--workspace=v1', `--namespace=${ns}`])
  const name = (await packageRevision()).metadata.name as string

  // Edit the setters and push: porch-server renders again (apply-setters through the runner).
  const dir = path.join(work, `pull-${label}`)
  await ctl('porchctl rpkg pull', ['rpkg', 'pull', name, dir, `--namespace=${ns}`])
  const settersPath = path.join(dir, 'setters.yaml')
  const setters = await readFile(settersPath, 'utf8')
  if (!setters.includes('name: bucket2') || !setters.includes('storage-class: nearline')) throw new Error(`${settersPath}: not the blueprint's setters:\n${setters}`)
  await writeFile(settersPath, setters.replace('name: bucket2', 'name: fnr-bucket').replace('#project-id: project-id', 'project-id: swap-proof').replace('storage-class: nearline', 'storage-class: coldline'))
  await ctl('porchctl rpkg push (render)', ['rpkg', 'push', name, dir, `--namespace=${ns}`])
  const resources = await client.get(`/apis/porch.kpt.dev/v1alpha1/namespaces/${ns}/packagerevisionresources/${name}`)
  const renderStatus = resources.status?.renderStatus as KubeObject | undefined

  await ctl('porchctl rpkg propose', ['rpkg', 'propose', name, `--namespace=${ns}`])
  await ctl('porchctl rpkg approve', ['rpkg', 'approve', name, `--namespace=${ns}`])

  const lifecycle = (await packageRevision()).spec.lifecycle as string

  // A new package: init, a resource and a pipeline step added by hand, push (porch-server renders: set-labels
  // through the runner), propose, approve.
  await ctl('porchctl rpkg init', ['rpkg', 'init', INIT_PACKAGE, '--repository=deployments', '--workspace=v1', '--description=made by porchctl rpkg init', `--namespace=${ns}`])
  const initName = (await packageRevision(INIT_PACKAGE)).metadata.name as string
  const initDir = path.join(work, `init-${label}`)
  await ctl('porchctl rpkg pull (init)', ['rpkg', 'pull', initName, initDir, `--namespace=${ns}`])
  const kptfilePath = path.join(initDir, 'Kptfile')
  const kptfile = parseDocument(await readFile(kptfilePath, 'utf8'))
  // With the pod runtime on, a second step that fnr runs in a function pod (Porch's runner: exec).
  const podStep = bed.podImage ? [{image: bed.podImage, configMap: {owner: 'swap-proof'}}] : []
  kptfile.set('pipeline', {mutators: [{image: SET_LABELS, configMap: {team: 'swap-proof'}}, ...podStep]})
  await writeFile(kptfilePath, kptfile.toString())
  await writeFile(path.join(initDir, 'settings.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  region: europe-west1\n')
  await ctl('porchctl rpkg push (init, render)', ['rpkg', 'push', initName, initDir, `--namespace=${ns}`])
  await ctl('porchctl rpkg propose (init)', ['rpkg', 'propose', initName, `--namespace=${ns}`])
  await ctl('porchctl rpkg approve (init)', ['rpkg', 'approve', initName, `--namespace=${ns}`])
  const initLifecycle = (await packageRevision(INIT_PACKAGE)).spec.lifecycle as string
  if (initLifecycle !== 'Published') throw new Error(`${INIT_PACKAGE}: ${initLifecycle} after approval, not Published`)

  // What porch-server committed: the package folders on main, and their tags.
  const bare = path.join(work, 'git', repoName)
  const paths = (await git(['--git-dir', bare, 'ls-tree', '-r', '--name-only', 'main', '--', PACKAGE, INIT_PACKAGE])).split('\n').filter(Boolean)
  const published = new Map<string, Buffer>()
  for (const p of paths) {
    const r = await execa('git', ['--git-dir', bare, 'show', `main:${p}`], {encoding: 'buffer'})
    published.set(p, Buffer.from(r.stdout))
  }
  const tags = (await git(['--git-dir', bare, 'tag', '--list'])).split('\n').filter(Boolean)
  return {published, tags, lifecycle, renderStatus, steps}
}

/**
 * Unregisters the run's Repository (porch-server, still running, lets it go) and waits until it is gone. A
 * porch-server syncs every Repository it finds when it starts: without this, each run of the bench started a
 * porch-server with one more repository to sync beside the package's clone (the clone of the eighth run took
 * 2.4x the first's, on both runners).
 */
export async function removeRepository(bed: PorchBed, label: string): Promise<void> {
  const repo = `/apis/config.porch.kpt.dev/v1alpha1/namespaces/porch-e2e-${label}/repositories/deployments`
  await bed.client.delete(repo)
  await until(`Repository deployments of ${label} gone`, 60_000, async () => (await bed.client.raw('GET', repo)).code === 404)
}
