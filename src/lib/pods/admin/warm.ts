/**
 * `fnr pods warm`: one ready function pod per image, made from outside the runner with the same
 * code the runner's pod cache uses (buildPod/buildService from template.ts, the labels and
 * annotations of naming.ts, PodManager's create/ensureService/waitForPodReady, the pull Secret
 * of registry/pull-secret.ts), so a runner adopts the pods and its GC treats them like its own.
 *
 * Owner: the pods carry the owner label WARM_OWNER ("fnr-pods-warm"), which no runner has (a
 * runner's identity is its pod name). That is what makes them safe and usable:
 *   - a runner that starts (or restarts) afterwards adopts every fnr pod that is ready and made
 *     from its current template version, whatever its owner, and takes ownership (cache.ts
 *     adopt), so it uses a warmed pod instead of creating one;
 *   - a runner already running adopts them too (cache.ts onPodEvent when its pod watch sees one
 *     ready, else its next GC pass: gc.ts `adopt`), with a resourceVersion-precondition claim, so
 *     with several replicas exactly one takes each; one it cannot use (pod limit reached, other
 *     template version) is never deleted as its own orphan, only once idle past its TTL
 *     (fnr.dev/ttl-seconds, from --pod-cache-config or --pod-ttl) plus the runner's grace;
 *   - `fnr pods gc` applies the TTL to them, as to every owner that holds no Lease.
 *
 * Idempotent: an image that already has a ready fnr pod of the current template version counts
 * as warm and gets nothing new; one whose pod is still starting is waited for. A pod this command
 * created that does not become ready is deleted with its Service (as the runner does).
 */
import type {CoreV1Api, V1Pod} from '@kubernetes/client-node'

import {PodCacheConfig, type ImagePodSettings} from '../../config/pod-cache-config.js'
import {FnrError, toFnrError} from '../../errors.js'
import {connectKube, type KubeConnectOptions} from '../../k8s/client.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {RunnerRegistrySettings} from '../../registry/index.js'
import {observePod} from '../model/gc.js'
import {launchPod, LaunchError, podRegistry, pullSecretPreparer, secondsText, type LaunchContext, type PullSecret} from '../cluster/launcher.js'
import {OPERATOR_CONFIG_HINT} from './admin.js'
import {podReadiness, type PodManager} from '../cluster/manager.js'
import type {ImageMetadataSource} from '../cluster/image-metadata.js'
import {ANNOTATION_TEMPLATE_VERSION, WARM_OWNER} from '../model/naming.js'
import type {Templates} from '../model/template.js'
import {runnerTemplates, type RunnerTemplateOptions} from './templates.js'

/** The owner label (and annotation) of pods made by `fnr pods warm` (defined in naming.ts). */
export {WARM_OWNER}

export interface WarmerOptions {
  manager: PodManager
  core: CoreV1Api
  templates: Templates
  metadata: ImageMetadataSource
  /** Per-image settings (TTL, resources), as the runner computes them from --pod-cache-config. */
  settingsFor: (image: string) => ImagePodSettings
  podReadyTimeoutMs: number
  maxRequestBodySize: number
  /** With private registries on: the pull Secret to create and attach (as `fnr serve` does). */
  pullSecret?: PullSecret
  /** Run the function container as `repo@digest` (as the runner with --pin-image-digests); the digest annotation is written either way. */
  pinDigest?: boolean
  now?: () => number
}

/** One image's outcome (the --json schema of `images[]`). */
export interface WarmResult {
  image: string
  ok: boolean
  /** The ready pod (or the pod that failed, when one was created). */
  pod: string | null
  /** created: this run made the pod; existing: a ready pod was already there; waited: one was starting and became ready; none: no pod. */
  action: 'created' | 'existing' | 'waited' | 'none'
  error: string | null
  ms: number
}

export class PodWarmer {
  private readonly now: () => number
  private existing: V1Pod[] = []
  private readonly launch: LaunchContext

  constructor(private readonly options: WarmerOptions) {
    this.now = options.now ?? Date.now
    this.launch = {
      manager: options.manager,
      metadata: options.metadata,
      owner: WARM_OWNER,
      ownerLabel: WARM_OWNER,
      maxRequestBodySize: options.maxRequestBodySize,
      pinDigest: options.pinDigest,
      // Unlike the runner, an existing Secret is never changed: it is the runner's (made from its
      // --registry-auth-secret-path), and an operator's credentials must not replace it.
      preparePod: options.pullSecret ? pullSecretPreparer(options.core, options.manager.namespace, options.pullSecret, 'create-if-missing') : undefined,
      now: this.now,
    }
  }

  /**
   * Lists fnr's pods once (an API server that cannot be reached fails here, in one line), then
   * starts watching them (readiness waits use the watch, with a GET fallback).
   */
  async prepare(): Promise<void> {
    this.existing = await this.options.manager.listPods()
    await this.options.manager.start()
  }

  /** fnr pods of this image and of the current template version, not being deleted. */
  private candidates(image: string): V1Pod[] {
    const version = this.options.templates.version
    return this.existing.filter((pod) => {
      const o = observePod(pod)
      return o.managed && !o.deleting && o.image === image && pod.metadata?.annotations?.[ANNOTATION_TEMPLATE_VERSION] === version
    })
  }

  /** Makes sure the image has a ready pod; never throws (the failure is in the result). */
  async warm(image: string, options: {deadline?: number; onProgress?: (detail: string) => void} = {}): Promise<WarmResult> {
    const started = this.now()
    const deadline = Math.min(started + this.options.podReadyTimeoutMs, options.deadline ?? Infinity)
    const deadlineName = options.deadline !== undefined && options.deadline < started + this.options.podReadyTimeoutMs ? 'the --timeout' : `the pod-ready timeout (${secondsText(this.options.podReadyTimeoutMs)})`
    const progress = options.onProgress ?? (() => {})
    const result = (ok: boolean, pod: string | null, action: WarmResult['action'], error?: unknown): WarmResult => ({
      image,
      ok,
      pod,
      action,
      error: error === undefined ? null : toFnrError(error).message.split('\n', 1)[0]!,
      ms: this.now() - started,
    })

    const candidates = this.candidates(image).map((pod) => ({pod, r: podReadiness(pod, image)}))
    const ready = candidates.find((c) => c.r.state === 'ready')
    if (ready) return result(true, ready.pod.metadata!.name!, 'existing')
    const starting = candidates.find((c) => c.r.state === 'pending')
    if (starting) {
      const name = starting.pod.metadata!.name!
      progress(`waiting for ${name}, already starting`)
      try {
        await this.options.manager.waitForPodReady(name, image, {deadline, deadlineName, onProgress: progress})
        return result(true, name, 'waited')
      } catch (err) {
        return result(false, name, 'none', err)
      }
    }

    try {
      const launched = await launchPod(this.launch, image, {templates: this.options.templates, settings: this.options.settingsFor(image), deadline, deadlineName, onProgress: progress})
      return result(true, launched.name, 'created')
    } catch (err) {
      if (!(err instanceof LaunchError) || !err.created) return result(false, null, 'none', err)
      await this.options.manager.deletePodAndService(err.podName, `did not become ready: ${err.message}`)
      return result(false, err.podName, 'created', err)
    }
  }
}

export interface WarmPodsOptions {
  /** The pod namespace (serve's --pod-namespace). */
  namespace: string
  kube?: KubeConnectOptions
  /** --image, in order. */
  images: readonly string[]
  /** --pod-cache-config: its images are warmed too, with its per-image TTL and resources. */
  cacheConfigPath?: string
  template: RunnerTemplateOptions
  /** --pod-ttl: the TTL of images without one in the pod cache config. */
  ttlMs: number
  podReadyTimeoutMs: number
  /** --timeout: everything must be ready by then (ms from now). */
  timeoutMs?: number
  registry: RunnerRegistrySettings & {authSecretName: string}
  concurrency?: number
  /** Progress per image; the default prints nothing. */
  run?: <R>(tasks: Array<{title: string; run: (update: (detail: string) => void) => Promise<R>; done: (r: R) => {ok: boolean; line: string}}>) => Promise<R[]>
  /** Run function containers as `repo@digest` (default true: a runner with --pin-image-digests uses the pods as its own). */
  pinImageDigests?: boolean
  /** Tests: image entrypoints without a registry. */
  metadata?: ImageMetadataSource
  logger?: Logger
}

/** The --json output of `fnr pods warm`. */
export interface WarmSummary {
  namespace: string
  templateVersion: string
  template: string
  images: WarmResult[]
  ready: number
  failed: number
  created: number
}

/**
 * The error a run with failed images ends with (exit 1), naming the first, and carrying the
 * summary for --json; undefined when every image got a ready pod.
 */
export function warmFailure(summary: WarmSummary): FnrError | undefined {
  if (summary.failed === 0) return undefined
  const first = summary.images.find((r) => !r.ok)!
  return new FnrError('Internal', `${summary.failed} of ${summary.images.length} images did not get a ready pod (first: ${warmLine(first)})`, {details: {report: summary}})
}

/** The images to warm: the pod cache config's, then --image, without duplicates. Usage/Config errors before any cluster call. */
export async function warmList(images: readonly string[], cacheConfigPath: string | undefined): Promise<{images: string[]; config: PodCacheConfig}> {
  let config = PodCacheConfig.empty()
  // --pod-cache-config= (empty) means no file, as for fnr serve.
  if (cacheConfigPath !== undefined && cacheConfigPath !== '') {
    const loaded = await PodCacheConfig.load(cacheConfigPath)
    if (loaded.missing) throw new FnrError('Config', `pod cache config ${cacheConfigPath} does not exist`)
    config = loaded.config
    if (config.images().length === 0 && images.length === 0) throw new FnrError('Config', `pod cache config ${cacheConfigPath} lists no images`)
  }
  for (const image of images) if (image.trim() === '') throw new FnrError('Usage', '--image must not be empty')
  const list = [...new Set([...config.images(), ...images])]
  if (list.length === 0) throw new FnrError('Usage', 'nothing to warm: pass --pod-cache-config FILE and/or --image IMAGE')
  return {images: list, config}
}

function defaultRun<R>(tasks: Array<{run: (update: (detail: string) => void) => Promise<R>}>): Promise<R[]> {
  return Promise.all(tasks.map((t) => t.run(() => {})))
}

/** Warms every image; one image's failure never stops the others. */
export async function warmPods(options: WarmPodsOptions): Promise<WarmSummary> {
  const logger = options.logger ?? silentLogger
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(options.namespace) || options.namespace.length > 63) {
    throw new FnrError('Usage', `--namespace ${JSON.stringify(options.namespace)} is not a valid namespace name`)
  }
  const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs
  const {images, config} = await warmList(options.images, options.cacheConfigPath)
  for (const warning of config.warnings) logger.warn(warning)
  const clients = await connectKube({missingConfigHint: OPERATOR_CONFIG_HINT, ...options.kube})
  const templates = await runnerTemplates(clients, options.template)

  const registry = await podRegistry(options.registry, {metadata: options.metadata, logger})
  const {PodManager} = await import('../cluster/manager.js')
  const manager = new PodManager({...clients, namespace: options.namespace, logger})
  const defaults = {ttlMs: options.ttlMs, maxWaitlistLength: 2, maxParallelPods: 1}
  const warmer = new PodWarmer({
    manager,
    core: clients.core,
    templates,
    metadata: registry.metadata,
    settingsFor: (image) => config.settingsFor(image, defaults),
    podReadyTimeoutMs: options.podReadyTimeoutMs,
    maxRequestBodySize: options.template.maxRequestBodySize,
    ...(registry.pullSecret ? {pullSecret: registry.pullSecret} : {}),
    pinDigest: options.pinImageDigests ?? true,
  })
  try {
    await warmer.prepare()
    const run = options.run ?? defaultRun
    const results = await run(
      images.map((image) => ({
        title: `warming ${image}`,
        run: (update: (detail: string) => void) => warmer.warm(image, {deadline, onProgress: update}),
        done: (r: WarmResult) => ({ok: r.ok, line: warmLine(r)}),
      })),
    )
    return {
      namespace: options.namespace,
      templateVersion: templates.version,
      template: templates.origin,
      images: results,
      ready: results.filter((r) => r.ok).length,
      failed: results.filter((r) => !r.ok).length,
      created: results.filter((r) => r.ok && r.action === 'created').length,
    }
  } finally {
    manager.close()
    registry.close()
  }
}

/** One line per image, for progress and the text output. */
export function warmLine(r: WarmResult): string {
  if (!r.ok) return `${r.image}: failed: ${r.error}`
  const how = r.action === 'created' ? 'created' : r.action === 'existing' ? 'already ready' : 'was starting'
  return `${r.image}: ready, pod ${r.pod} (${how})`
}
