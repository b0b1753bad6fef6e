/**
 * What the pod-runtime suites share: the test images' names and paths, the pod runtime settings of a
 * test, and small helpers. The bed itself (the real control plane, its node running function pods
 * as host processes with the REAL wrapper server, the fault-injecting proxy) is ./cluster-bed.ts.
 *
 * Images (all `example.com/fn/<name>:v1`, entrypoint /usr/local/bin/function):
 *   cat       echoes its input
 *   stderr    writes "working on it" to stderr, then echoes
 *   fail      exits 3 with error results (the exec tests' failWithResults)
 *   gate      records that it started (a file in `startedDir`), waits until `gateFile` exists,
 *             then echoes: calls in flight stay in flight as long as a test wants
 *   crash     the wrapper itself exits 3 at start (a crash-looping image)
 * The wrapper-server image (WRAPPER_IMAGE = fnr.test/wrapper-server:v1) is 'skip' on the node for
 * the init container, as the wrapper is mapped directly.
 */
import {existsSync} from 'node:fs'
import path from 'node:path'

import {PodCacheConfig} from '../../../src/lib/config/pod-cache-config.js'
import type {PodEvaluator} from '../../../src/lib/evaluators/pod.js'
import type {PodRuntime, PodRuntimeOptions} from '../../../src/lib/pods/runtime/runtime.js'
import {BIN_RUN, REPO_ROOT} from '../serve.js'

export const WRAPPER_IMAGE = 'fnr.test/wrapper-server:v1'
export const FUNCTION_PATH = '/usr/local/bin/function'
export const WRAPPER_PATH = '/wrapper-server-tools/wrapper-server'

export const image = (name: string): string => `example.com/fn/${name}:v1`

/** The command the node runs for /wrapper-server-tools/wrapper-server: the built CLI. */
export function wrapperCommand(): string[] {
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'commands', 'wrapper-server.js'))) {
    throw new Error('dist/ is not built: run `npx tsc -p tsconfig.build.json && npx oclif manifest` before the pod tests')
  }
  return [process.execPath, BIN_RUN, 'wrapper-server']
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

export interface RuntimeHandle {
  runtime: PodRuntime
  evaluator: PodEvaluator
  close(): Promise<void>
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

/** Closes the runtimes a test started (and empties the list). */
export async function closeAll(handles: RuntimeHandle[]): Promise<void> {
  for (const h of handles.splice(0)) await h.close()
}
