/**
 * A pod-runtime test bed: the Kubernetes test bed (test API server + local kubelet) set up so that
 * function pods run the REAL wrapper server (the built CLI, `node bin/run.js wrapper-server`) with
 * small shell-script functions, plus helpers to start a PodRuntime / PodEvaluator against it.
 *
 * Images (all `example.com/fn/<name>:v1`, entrypoint /usr/local/bin/function):
 *   cat       echoes its input
 *   stderr    writes "working on it" to stderr, then echoes
 *   fail      exits 3 with error results (the exec tests' failWithResults)
 *   gate      records that it started (a file in `startedDir`), waits until `gateFile` exists,
 *             then echoes: calls in flight stay in flight as long as a test wants
 *   crash     the wrapper itself exits 3 at start (a crash-looping image)
 * The wrapper-server image (WRAPPER_SERVER_IMAGE = fnr.test/wrapper-server:v1) is 'skip' for the
 * init container, as the wrapper is mapped directly.
 */
import {existsSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {V1Pod, V1Service} from '@kubernetes/client-node'

import {PodCacheConfig} from '../../../src/lib/config/pod-cache-config.js'
import {PodEvaluator} from '../../../src/lib/evaluators/pod.js'
import {StaticMetadataSource} from '../../../src/lib/pods/cluster/image-metadata.js'
import {startPodRuntime, type PodRuntime, type PodRuntimeOptions} from '../../../src/lib/pods/runtime/runtime.js'
import {startTestBed, type TestBed} from '../k8s/index.js'
import type {LocalKubelet, LocalKubeletOptions} from '../k8s/kubelet.js'
import {BIN_RUN, REPO_ROOT} from '../serve.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../tmp.js'

export const POD_NS = 'fn-pods'
export const RUNNER_NS = 'fnr-system'
export const WRAPPER_IMAGE = 'fnr.test/wrapper-server:v1'
export const FUNCTION_PATH = '/usr/local/bin/function'
export const WRAPPER_PATH = '/wrapper-server-tools/wrapper-server'

export const image = (name: string): string => `example.com/fn/${name}:v1`

/** The command the kubelet runs for /wrapper-server-tools/wrapper-server: the built CLI. */
export function wrapperCommand(): string[] {
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'commands', 'wrapper-server.js'))) {
    throw new Error('dist/ is not built: run `npx tsc -p tsconfig.build.json && npx oclif manifest` before the pod tests')
  }
  return [process.execPath, BIN_RUN, 'wrapper-server']
}

export interface PodBed {
  bed: TestBed & {kubelet: LocalKubelet}
  /** Creates a fresh namespace (each test gets its own, so runtimes never see each other's pods). */
  namespace(): string
  dir: string
  gateFile: string
  startedDir: string
  metadata: StaticMetadataSource
  /** Adds an image whose function is `script` (a shell script). */
  addFunction(name: string, script: string): Promise<string>
  /** Opens the gate of the `gate` function. */
  openGate(): Promise<void>
  stop(): Promise<void>
}

export async function startPodBed(options: {kubelet?: Partial<Omit<LocalKubeletOptions, 'api'>>} = {}): Promise<PodBed> {
  const temp = new TempDirs()
  const dir = await temp.make('fnr-pods-')
  const fnDir = path.join(dir, 'functions')
  const startedDir = path.join(dir, 'started')
  await mkdir(fnDir, {recursive: true})
  await mkdir(startedDir, {recursive: true})
  const gateFile = path.join(dir, 'gate')
  const commands: Record<string, string[]> = {}
  const imageMap: NonNullable<LocalKubeletOptions['imageMap']> = {
    [WRAPPER_IMAGE]: 'skip',
    [image('crash')]: {commandMap: {[WRAPPER_PATH]: [process.execPath, '-e', "console.error('wrapper exploded at start'); process.exit(3)", '--']}},
  }
  commands[image('crash')] = [FUNCTION_PATH]
  const bed = (await startTestBed({
    server: {requestLogLimit: 1_000_000},
    namespaces: [POD_NS, RUNNER_NS],
    kubelet: {
      imageMap,
      commandMap: {[WRAPPER_PATH]: wrapperCommand()},
      probeIntervalMs: 50,
      maxGracePeriodSeconds: 2,
      ...options.kubelet,
    },
  })) as PodBed['bed']
  const addFunction = async (name: string, script: string): Promise<string> => {
    const file = await writeExecutable(path.join(fnDir, name), script)
    const img = image(name)
    bed.kubelet.setImage(img, {commandMap: {[FUNCTION_PATH]: file}})
    commands[img] = [FUNCTION_PATH]
    return img
  }
  await addFunction('cat', SCRIPTS.cat)
  await addFunction('stderr', SCRIPTS.stderr)
  await addFunction('fail', SCRIPTS.failWithResults)
  await addFunction(
    'gate',
    `#!/bin/sh\ntouch "${startedDir}/$$"\nwhile [ ! -f "${gateFile}" ]; do sleep 0.05; done\nexec cat\n`,
  )
  let nsCounter = 0
  return {
    bed,
    namespace: () => {
      const ns = `fn-${++nsCounter}`
      bed.api.registry.create('namespaces', undefined, {metadata: {name: ns}})
      return ns
    },
    dir,
    gateFile,
    startedDir,
    metadata: new StaticMetadataSource((img) => commands[img]),
    addFunction,
    openGate: () => writeFile(gateFile, ''),
    stop: async () => {
      await bed.stop()
      await temp.cleanup()
    },
  }
}

/** Where a test's pod runtime runs and what it runs; testRuntimeOptions fills in the rest. */
export type RuntimePlace = Pick<PodRuntimeOptions, 'namespace' | 'runnerNamespace' | 'wrapperServerImage' | 'metadata' | 'kube' | 'owner'>

/** The pod runtime settings the tests share (no GC loop, one pod per image, pod-IP dialling, fast polls). */
export function testRuntimeOptions(place: RuntimePlace, overrides: Partial<PodRuntimeOptions> = {}): PodRuntimeOptions {
  return {
    ttlMs: 30 * 60_000,
    scanIntervalMs: 0,
    cacheConfig: PodCacheConfig.empty(),
    warmUp: false,
    templateConfigMap: '',
    maxWaitlistLength: 2,
    maxParallelPods: 1,
    maxRequestBodySize: 6 * 1024 * 1024,
    podReadyTimeoutMs: 60_000,
    addressMode: 'pod-ip',
    clusterDomain: 'cluster.local',
    pollMs: 500,
    watchRetryMs: 200,
    ...place,
    ...overrides,
  }
}

export function runtimeOptions(pb: PodBed, overrides: Partial<PodRuntimeOptions> = {}): PodRuntimeOptions {
  const place = {namespace: POD_NS, runnerNamespace: RUNNER_NS, wrapperServerImage: WRAPPER_IMAGE, metadata: pb.metadata, kube: {kubeConfig: pb.bed.kubeConfig}, owner: 'runner-a'}
  return testRuntimeOptions(place, {orphanMinAgeMs: 0, ...overrides})
}

export interface RuntimeHandle {
  runtime: PodRuntime
  evaluator: PodEvaluator
  close(): Promise<void>
}

export async function startRuntime(pb: PodBed, overrides: Partial<PodRuntimeOptions> & {callRetries?: number} = {}): Promise<RuntimeHandle> {
  const {callRetries, ...rest} = overrides
  const runtime = await startPodRuntime(runtimeOptions(pb, rest))
  const evaluator = new PodEvaluator({cache: runtime.cache, callRetries, ready: runtime.warmedUp, close: () => runtime.close()})
  await runtime.started
  return {runtime, evaluator, close: () => evaluator.close()}
}

/** The pods of a namespace, straight from the API server's store (no HTTP); deleting ones left out unless asked. */
export function storedPods(pb: PodBed, namespace: string, opts: {includeDeleting?: boolean} = {}): V1Pod[] {
  const pods = pb.bed.api.registry.list('pods', namespace).items as V1Pod[]
  return pods.filter((p) => opts.includeDeleting || !p.metadata?.deletionTimestamp)
}

export function storedServices(pb: PodBed, namespace: string): V1Service[] {
  return pb.bed.api.registry.list('services', namespace).items as V1Service[]
}

export function podNames(pb: PodBed, namespace: string): string[] {
  return storedPods(pb, namespace).map((p) => p.metadata!.name!).sort()
}

/** How many pods / Services were created through the API (POST requests that succeeded). */
export function createdCount(pb: PodBed, namespace: string, resource: 'pods' | 'services'): number {
  return pb.bed.api.requestsFor({verb: 'create', resource, namespace}).filter((r) => r.code !== undefined && r.code < 300).length
}

/** The pid (process group) of a pod's wrapper process on the local kubelet. */
export function podPid(pb: PodBed, namespace: string, name: string): number | undefined {
  return pb.bed.kubelet.podInfos().find((p) => p.namespace === namespace && p.name === name)?.pid
}

/** Files the gate function created when it started (one per call). */
export async function startedCalls(pb: PodBed): Promise<number> {
  const {readdir} = await import('node:fs/promises')
  return (await readdir(pb.startedDir)).length
}

/** Closes the gate and forgets started calls. */
export async function resetGate(pb: PodBed): Promise<void> {
  const {rm, readdir} = await import('node:fs/promises')
  await rm(pb.gateFile, {force: true})
  for (const f of await readdir(pb.startedDir)) await rm(path.join(pb.startedDir, f), {force: true})
}

export async function until<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 60_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

export const RL = Buffer.from(`apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cfg
  data:
    k: v
`)

export interface PodBedHooks {
  /** Receives the bed once it is up (the suite keeps it in its own variable). */
  bed: (pb: PodBed) => void
  /** Runs once after the bed is up: extra images, kubelet settings, ConfigMaps. */
  setup?: (pb: PodBed) => unknown
  /** Receives each test's fresh namespace. */
  namespace?: (ns: string) => void
  /** After each test, once the gate is open (so no call waits on it): close what the test started. */
  cleanup?: () => unknown
}

/**
 * The shared mocha hooks of a pod-bed suite: one bed for the suite (stopped after it), before each
 * test a fresh namespace and a closed gate, after each test the gate opened and then `cleanup`.
 * Call it inside a describe().
 */
export function usePodBed(hooks: PodBedHooks): void {
  let pb: PodBed | undefined
  before(async () => {
    pb = await startPodBed()
    hooks.bed(pb)
    await hooks.setup?.(pb)
  })
  after(async () => {
    await pb?.stop()
  })
  beforeEach(async () => {
    hooks.namespace?.(pb!.namespace())
    await resetGate(pb!)
  })
  afterEach(async () => {
    await pb?.openGate()
    await hooks.cleanup?.()
  })
}

/** Closes the runtimes a test started (and empties the list). */
export async function closeAll(handles: RuntimeHandle[]): Promise<void> {
  for (const h of handles.splice(0)) await h.close()
}
