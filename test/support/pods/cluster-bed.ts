/**
 * The pod-runtime test bed on the real control plane (test/support/cluster/shared.ts): kube-apiserver,
 * etcd, the controllers and the scheduler, and the node. fnr's pod runtime talks to kube-apiserver through
 * the fault-injecting proxy (test/support/cluster/fault-proxy.ts) with the admin's token, so a
 * suite can inject API faults and count the runtime's requests; its pods run on the control
 * plane's node (the LocalKubelet) as host processes: every image below is mapped, and the
 * function container runs the REAL wrapper server (the built CLI, `node bin/run.js
 * wrapper-server`) with small shell-script functions.
 *
 * Images (all `example.com/fn/<name>:v1`, entrypoint /usr/local/bin/function; ./index.ts):
 *   cat, stderr, fail, gate (waits on a file the test creates), crash (the wrapper exits 3).
 *
 * Each bed has namespaces of its own (`podNs`, `runnerNs`, and a fresh one per `namespace()`
 * call), removed by stop(), so suites sharing the control plane never see each other's objects.
 */
import {mkdir, readdir, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {KubeConfig, V1Pod, V1Service} from '@kubernetes/client-node'

import {PodEvaluator} from '../../../src/lib/evaluators/pod.js'
import {StaticMetadataSource} from '../../../src/lib/pods/cluster/image-metadata.js'
import {LABEL_MANAGED_BY} from '../../../src/lib/pods/model/naming.js'
import {startPodRuntime, type PodRuntimeOptions} from '../../../src/lib/pods/runtime/runtime.js'
import type {ControlPlane} from '../cluster/controlplane.js'
import {FaultProxy} from '../cluster/fault-proxy.js'
import {adminClient, namespace, sharedControlPlane} from '../cluster/shared.js'
import {KubeRequestError, type KubeRestClient} from '../k8s/client.js'
import type {LocalKubelet} from '../k8s/kubelet.js'
import type {KubeObject} from '../k8s/status.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../tmp.js'
import {FUNCTION_PATH, WRAPPER_IMAGE, WRAPPER_PATH, image, testRuntimeOptions, until, wrapperCommand, type RuntimeHandle} from './index.js'

export interface ClusterPodBed {
  cp: ControlPlane
  /** The control plane's node. */
  kubelet: LocalKubelet
  /** Between the runtimes this bed starts and kube-apiserver: faults, request log, live watches. */
  proxy: FaultProxy
  /** An admin client straight to kube-apiserver (not through the proxy). */
  admin: KubeRestClient
  /** The function pods' namespace and the runner's (its template ConfigMaps, Secrets, leases). */
  podNs: string
  runnerNs: string
  /** Admin kubeconfig through the proxy (a file), and client-node's view of it. */
  kubeconfigPath: string
  kubeConfig(): Promise<KubeConfig>
  /** A fresh namespace (removed by stop()). */
  namespace(prefix?: string): Promise<string>
  dir: string
  gateFile: string
  startedDir: string
  metadata: StaticMetadataSource
  /** Adds an image whose function is `script` (a shell script). */
  addFunction(name: string, script: string): Promise<string>
  openGate(): Promise<void>
  stop(): Promise<void>
}

/**
 * A host-process image mapping for the node (`pb.kubelet.setImage(image, wrapped(...))`): the paths
 * in `commandMap` (the function's) and /wrapper-server-tools/wrapper-server, which runs `wrapper`
 * (the real wrapper server by default). The node has no command map of its own: it is shared by
 * every suite of the process.
 */
export function wrapped(commandMap: Record<string, string>, wrapper: string[] = wrapperCommand()): {commandMap: Record<string, string | string[]>} {
  return {commandMap: {...commandMap, [WRAPPER_PATH]: wrapper}}
}

export async function startClusterPodBed(): Promise<ClusterPodBed> {
  const cp = await sharedControlPlane()
  const kubelet = cp.kubelet
  if (!kubelet) throw new Error('the shared control plane has no node')
  const temp = new TempDirs()
  const dir = await temp.make('fnr-cluster-pods-')
  const fnDir = path.join(dir, 'functions')
  const startedDir = path.join(dir, 'started')
  await mkdir(fnDir, {recursive: true})
  await mkdir(startedDir, {recursive: true})
  const gateFile = path.join(dir, 'gate')
  const admin = adminClient(cp)
  const namespaces = [await namespace(cp, 'fn-pods'), await namespace(cp, 'fnr-system')]
  const [podNs, runnerNs] = namespaces.map((n) => n.name) as [string, string]
  const proxy = await FaultProxy.start(cp.url, cp.caPem)
  const kubeconfigPath = path.join(dir, 'kubeconfig')
  await writeFile(kubeconfigPath, proxy.kubeconfigFor(cp.adminToken, podNs))
  const commands: Record<string, string[]> = {}
  kubelet.setImage(WRAPPER_IMAGE, 'skip')
  kubelet.setImage(image('crash'), wrapped({[FUNCTION_PATH]: '/bin/false'}, [process.execPath, '-e', "console.error('wrapper exploded at start'); process.exit(3)", '--']))
  commands[image('crash')] = [FUNCTION_PATH]
  const addFunction = async (name: string, script: string): Promise<string> => {
    const file = await writeExecutable(path.join(fnDir, name), script)
    const img = image(name)
    kubelet.setImage(img, wrapped({[FUNCTION_PATH]: file}))
    commands[img] = [FUNCTION_PATH]
    return img
  }
  await addFunction('cat', SCRIPTS.cat)
  await addFunction('stderr', SCRIPTS.stderr)
  await addFunction('fail', SCRIPTS.failWithResults)
  // The wait also ends when the bed's folder is gone: a gate call whose wrapper was killed before
  // its spawner took over (the function then outlives the fake pod, which has no PID namespace to
  // end it) would otherwise poll for a file that can no longer appear, for ever.
  await addFunction('gate', `#!/bin/sh\ntouch "${startedDir}/$$"\nwhile [ ! -f "${gateFile}" ] && [ -d "${startedDir}" ]; do sleep 0.05; done\nexec cat\n`)
  let kubeConfig: KubeConfig | undefined
  return {
    cp,
    kubelet,
    proxy,
    admin,
    podNs,
    runnerNs,
    kubeconfigPath,
    kubeConfig: async () => {
      if (!kubeConfig) {
        const {KubeConfig: Ctor} = await import('@kubernetes/client-node')
        kubeConfig = new Ctor()
        kubeConfig.loadFromFile(kubeconfigPath)
      }
      return kubeConfig
    },
    namespace: async (prefix = 'fn') => {
      const ns = await namespace(cp, prefix)
      namespaces.push(ns)
      return ns.name
    },
    dir,
    gateFile,
    startedDir,
    metadata: new StaticMetadataSource((img) => commands[img]),
    addFunction,
    openGate: () => writeFile(gateFile, ''),
    stop: async () => {
      await writeFile(gateFile, '').catch(() => undefined)
      await proxy.stop()
      // Removing a namespace deletes its pods (the node stops their processes within its 2 s grace).
      for (const ns of namespaces.splice(0)) await ns.remove()
      admin.close()
      await temp.cleanup()
    },
  }
}

/** The pod runtime settings of a test on this bed (./index.ts testRuntimeOptions, the bed's namespaces, through the proxy). */
export function clusterRuntimeOptions(pb: ClusterPodBed, overrides: Partial<PodRuntimeOptions> = {}): PodRuntimeOptions {
  const place = {namespace: pb.podNs, runnerNamespace: pb.runnerNs, wrapperServerImage: WRAPPER_IMAGE, metadata: pb.metadata, kube: {kubeconfig: pb.kubeconfigPath}, owner: 'runner-a'}
  return testRuntimeOptions(place, {orphanMinAgeMs: 0, ...overrides})
}

export async function startClusterRuntime(pb: ClusterPodBed, overrides: Partial<PodRuntimeOptions> & {callRetries?: number} = {}): Promise<RuntimeHandle> {
  const {callRetries, ...rest} = overrides
  const runtime = await startPodRuntime(clusterRuntimeOptions(pb, rest))
  const evaluator = new PodEvaluator({cache: runtime.cache, callRetries, ready: runtime.warmedUp, close: () => runtime.close()})
  await runtime.started
  return {runtime, evaluator, close: () => evaluator.close()}
}

/** The pods of a namespace, read from kube-apiserver; deleting ones left out unless asked. */
export async function listPods(pb: ClusterPodBed, namespace: string, opts: {includeDeleting?: boolean} = {}): Promise<V1Pod[]> {
  const items = (await pb.admin.get(`/api/v1/namespaces/${namespace}/pods`)).items as V1Pod[]
  return items.filter((p) => opts.includeDeleting || !p.metadata?.deletionTimestamp)
}

export async function listServices(pb: ClusterPodBed, namespace: string): Promise<V1Service[]> {
  return (await pb.admin.get(`/api/v1/namespaces/${namespace}/services`)).items as V1Service[]
}

/** Names of the live pods fnr manages in a namespace, sorted. */
export async function managedPodNames(pb: ClusterPodBed, namespace: string): Promise<string[]> {
  return (await listPods(pb, namespace)).filter((p) => p.metadata?.labels?.[LABEL_MANAGED_BY] !== undefined).map((p) => p.metadata!.name!).sort()
}

/** How many pods / Services the runtimes created through the proxy (POST requests that succeeded). */
export function createdThroughProxy(pb: ClusterPodBed, namespace: string, resource: 'pods' | 'services'): number {
  return pb.proxy.requestsFor({verb: 'create', resource, namespace}).filter((r) => r.code !== undefined && r.code < 300).length
}

/** The pid (process group) of a pod's wrapper process on the node. */
export function nodePodPid(pb: ClusterPodBed, namespace: string, name: string): number | undefined {
  return pb.kubelet.podInfos().find((p) => p.namespace === namespace && p.name === name)?.pid
}

/** Files the gate function created when it started (one per call). */
export async function gateStarts(pb: ClusterPodBed): Promise<number> {
  return (await readdir(pb.startedDir)).length
}

/** Closes the gate and forgets started calls. */
export async function closeGate(pb: ClusterPodBed): Promise<void> {
  await rm(pb.gateFile, {force: true})
  for (const f of await readdir(pb.startedDir)) await rm(path.join(pb.startedDir, f), {force: true})
}

/** Names of the live pods of a namespace (fnr's or not), sorted. */
export async function podNames(pb: ClusterPodBed, namespace: string): Promise<string[]> {
  return (await listPods(pb, namespace)).map((p) => p.metadata!.name!).sort()
}

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'

/**
 * Creates a CustomResourceDefinition unless the control plane has it already (a CRD is cluster-wide and shared by
 * every suite of the process: never deleted), then waits until it is Established, listed by discovery, and its
 * resources are served in the bed's namespaces.
 */
export async function ensureCrd(pb: ClusterPodBed, crd: KubeObject): Promise<void> {
  const name = crd.metadata.name as string
  if ((await pb.admin.raw('GET', `${CRDS}/${name}`)).code === 404) {
    await pb.admin.create(CRDS, crd).catch((err: unknown) => {
      if (!(err instanceof KubeRequestError && err.code === 409)) throw err
    })
  }
  await until(async () => ((await pb.admin.get(`${CRDS}/${name}`)).status?.conditions ?? []).some((c: {type: string; status: string}) => c.type === 'Established' && c.status === 'True'), `CRD ${name} Established`)
  const {group, names} = crd.spec as {group: string; names: {plural: string}}
  const version = (crd.spec.versions as Array<{name: string; served: boolean}>).find((v) => v.served)!.name
  // the group is a 404 until discovery has it (a CRD just made, as when the first suite of a process makes it)
  await until(async () => {
    const r = await pb.admin.raw('GET', `/apis/${group}/${version}`)
    return r.code === 200 && ((r.body?.resources ?? []) as Array<{name: string}>).some((res) => res.name === names.plural)
  }, `${name} in discovery`)
  for (const ns of [pb.podNs, pb.runnerNs]) {
    await until(async () => (await pb.admin.raw('GET', `/apis/${group}/${version}/namespaces/${ns}/${names.plural}`)).code === 200, `${name} served in ${ns}`)
  }
}

export interface ClusterPodBedHooks {
  bed: (pb: ClusterPodBed) => void
  setup?: (pb: ClusterPodBed) => unknown
  /** Receives each test's fresh namespace. */
  namespace?: (ns: string) => void
  cleanup?: () => unknown
}

/**
 * The shared mocha hooks of a suite on this bed: one bed for the suite,
 * before each test a fresh namespace and a closed gate, after each the gate opened, `cleanup`, and
 * the proxy's faults cleared. Call it inside a describe().
 */
export function useClusterPodBed(hooks: ClusterPodBedHooks): void {
  let pb: ClusterPodBed | undefined
  before(async function () {
    this.timeout(120_000)
    pb = await startClusterPodBed()
    hooks.bed(pb)
    await hooks.setup?.(pb)
  })
  after(async function () {
    this.timeout(120_000)
    await pb?.stop()
  })
  beforeEach(async () => {
    if (hooks.namespace) hooks.namespace(await pb!.namespace())
    await closeGate(pb!)
  })
  afterEach(async () => {
    await pb?.openGate()
    await hooks.cleanup?.()
    pb?.proxy.faults.clear()
  })
}
