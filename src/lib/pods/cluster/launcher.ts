/**
 * The one way a function pod is launched, used by the runner's pod cache (cache.ts) and by
 * `fnr pods warm` (admin/warm.ts): read the image's entrypoint and digest, build the pod from
 * the templates (owner label and annotations, the image-digest annotation, `repo@digest` when
 * pinned), attach the pull Secret, create it (another name when the name is taken), then create
 * its Service and wait for the pod to be Ready. A pod that crashed has its last log lines in the
 * error. The caller decides what happens to a pod that failed (the cache evicts it, `fnr pods
 * warm` deletes it) and what happens after Ready (the cache connects to it).
 *
 * Also here, written once for both: the pull-Secret preparer and the registry/metadata setup.
 */
import {randomUUID} from 'node:crypto'

import type {CoreV1Api, V1Pod} from '@kubernetes/client-node'

import type {ImagePodSettings} from '../../config/pod-cache-config.js'
import {FnrError, toFnrError} from '../../errors.js'
import {apiStatusCode, kubeError} from '../../k8s/errors.js'
import type {Logger} from '../../telemetry/log.js'
import type {Telemetry} from '../../telemetry/telemetry.js'
import type {DockerConfig} from '../../registry/auth.js'
import type {RunnerRegistrySettings} from '../../registry/index.js'
import {attachPullSecret, buildPullSecret, ensurePullSecret} from '../../registry/pull-secret.js'
import type {PodManager} from './manager.js'
import type {FunctionImageInfo, ImageMetadataSource} from './image-metadata.js'
import {LABEL_FN_IMAGE, functionPodAnnotations, functionPodLabels, functionServiceLabels, podNameFor} from '../model/naming.js'
import {ANNOTATION_IMAGE_DIGEST, buildPod, buildService, pinnedImage, type Templates} from '../model/template.js'

/** Changes a pod spec before it is created (pull Secret, FunctionConfig overlays); may be async. */
export type PreparePod = (pod: V1Pod, image: string, signal: AbortSignal) => Promise<void> | void

/** What a launch needs that does not change from one launch to the next. */
export interface LaunchContext {
  manager: PodManager
  metadata: ImageMetadataSource
  /** The owner annotation (the runner's identity, or WARM_OWNER). */
  owner: string
  /** The owner label value (labelValueFor(owner), or WARM_OWNER). */
  ownerLabel: string
  maxRequestBodySize: number
  /** Run the function container as `repo@digest` when the registry gave a digest. */
  pinDigest?: boolean
  preparePod?: PreparePod
  /** `--verbosity N` for the wrapper server. */
  wrapperVerbosity?: number
  logger?: Logger
  now?: () => number
}

export interface LaunchOptions {
  templates: Templates
  settings: ImagePodSettings
  /** Absolute deadline (ms since the epoch) for the whole launch. */
  deadline: number
  /** Says what the deadline was, for messages ("the pod-ready timeout (60s)", "the --timeout"). */
  deadlineName: string
  /** Aborting abandons the launch (the error says `abandonedReason()`). */
  signal?: AbortSignal
  abandonedReason?: () => string | undefined
  /** The first pod name to try (default: a new one). */
  name?: string
  onProgress?: (detail: string) => void
  /** The registry gave the image's digest (before the pod is created). */
  onDigest?: (digest: string) => void
  /** The pod object exists under this name (from here on, a failed launch leaves a pod to delete). */
  onCreated?: (name: string) => void
}

export interface LaunchTimings {
  metadataMs: number
  createMs: number
  readyMs: number
}

export interface LaunchResult {
  name: string
  ip: string
  digest?: string
  timings: LaunchTimings
}

/** A launch that failed; `created` says whether the pod object exists (the caller deletes it). */
export class LaunchError extends FnrError {
  constructor(
    cause: FnrError,
    readonly podName: string,
    readonly created: boolean,
  ) {
    super(cause.kind, cause.message, {cause: cause.cause, details: cause.details})
  }
}

export function secondsText(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${(ms / 1000).toFixed(1)}s`
}

/** Races a promise against a deadline and an abort signal. */
export function raceDeadline<T>(
  promise: Promise<T>,
  options: {deadline?: number; signal?: AbortSignal},
  onTimeout: () => FnrError,
  onCancel: () => FnrError,
): Promise<T> {
  if (options.deadline === undefined && !options.signal) return promise
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    const done = (): void => {
      clearTimeout(timer)
      options.signal?.removeEventListener('abort', onAbort)
    }
    const onAbort = (): void => {
      done()
      reject(onCancel())
    }
    if (options.signal?.aborted) return onAbort()
    options.signal?.addEventListener('abort', onAbort, {once: true})
    if (options.deadline !== undefined) {
      timer = setTimeout(() => {
        done()
        reject(onTimeout())
      }, Math.max(0, options.deadline - Date.now()))
    }
    promise.then(
      (v) => {
        done()
        resolve(v)
      },
      (e: unknown) => {
        done()
        reject(e)
      },
    )
  })
}

/** Launches one pod of `image` and waits until it is Ready. */
export async function launchPod(context: LaunchContext, image: string, options: LaunchOptions): Promise<LaunchResult> {
  const {manager} = context
  const {templates} = options
  const now = context.now ?? Date.now
  const {deadline, deadlineName} = options
  const signal = options.signal ?? new AbortController().signal
  const progress = options.onProgress ?? (() => {})
  let name = options.name ?? podNameFor(image)
  let created = false
  const abandoned = (): FnrError => new FnrError('Unavailable', `function pod ${name} for image "${image}" was abandoned (${options.abandonedReason?.() ?? 'the runner is shutting down'})`)
  const step = <T>(what: string, promise: Promise<T>, timeout?: () => FnrError): Promise<T> =>
    raceDeadline(promise, {deadline, signal}, timeout ?? (() => new FnrError('DeadlineExceeded', `function pod ${name} for image "${image}" was not ready within ${deadlineName} (${what})`)), abandoned)
  try {
    let t = now()
    progress('reading the image metadata')
    const notRead = (): FnrError => new FnrError('DeadlineExceeded', `the entrypoint of image "${image}" was not read from its registry within ${deadlineName}`)
    // The lookup itself stops at the deadline too (a registry that never answers keeps no socket).
    const lookupDeadline = AbortSignal.timeout(Math.max(1, deadline - now()))
    const lookup = context.metadata.describe(image, {signal: AbortSignal.any([signal, lookupDeadline])}).catch((err: unknown) => {
      throw lookupDeadline.aborted && !signal.aborted ? notRead() : err
    })
    const info: FunctionImageInfo = await step('reading the image metadata', lookup, notRead)
    const metadataMs = now() - t
    if (info.digest) options.onDigest?.(info.digest)
    const containerImage = context.pinDigest && info.digest ? pinnedImage(image, info.digest) : undefined
    t = now()
    progress('creating the pod')
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw abandoned()
      const pod = buildPod({
        templates,
        image,
        ...(containerImage ? {containerImage} : {}),
        command: info.command,
        name,
        namespace: manager.namespace,
        labels: functionPodLabels(name, image, context.ownerLabel),
        annotations: {
          ...functionPodAnnotations({templateVersion: templates.version, image, owner: context.owner, now: now(), ttlMs: options.settings.ttlMs, creationId: randomUUID()}),
          ...(info.digest ? {[ANNOTATION_IMAGE_DIGEST]: info.digest} : {}),
        },
        resources: options.settings.resources,
        maxRequestBodySize: context.maxRequestBodySize,
        wrapperVerbosity: context.wrapperVerbosity,
      })
      if (context.preparePod) await step('preparing the pod (image pull Secret)', Promise.resolve(context.preparePod(pod, image, signal)))
      try {
        await step('creating the pod', manager.createPod(pod, {deadline, signal}))
        created = true
        options.onCreated?.(name)
        break
      } catch (err) {
        if (err instanceof FnrError && err.details.nameTaken === true && attempt < 3) {
          const taken = name
          name = podNameFor(image)
          context.logger?.warn('pod name taken; trying another', {image, taken, next: name})
          continue
        }
        throw err
      }
    }
    const createMs = now() - t
    t = now()
    progress('pod created')
    const service = functionService(templates, name, manager.namespace, context.ownerLabel)
    const creatingService = manager.ensureService(service, {deadline, signal})
    const ready = manager.waitForPodReady(name, image, {deadline, signal, deadlineName, onProgress: progress})
    const [{ip}] = await failAfter(Promise.all([ready, step('creating the Service', creatingService)]), creatingService)
    return {name, ip, ...(info.digest ? {digest: info.digest} : {}), timings: {metadataMs, createMs, readyMs: now() - t}}
  } catch (err) {
    let e = toFnrError(err)
    if (created && e.details.containerExited === true) {
      const tail = await manager.logTail(name)
      if (tail) e = new FnrError(e.kind, `${e.message}; last log lines: ${tail.split('\n').slice(-5).join(' | ').slice(0, 600)}`, {cause: e.cause, details: e.details})
    }
    throw new LaunchError(e, name, created)
  }
}

/**
 * `promise`, failing only once `settling` has settled too. A pod that fails fast (an image the
 * kubelet cannot pull) failed its launch while its Service was still being created: the caller's
 * cleanup found no Service to delete, and the one created a moment later was left behind (`fnr
 * pods warm` exits with no GC to collect it). The Service request stops at the deadline or the
 * signal itself.
 */
async function failAfter<T>(promise: Promise<T>, settling: Promise<unknown>): Promise<T> {
  try {
    return await promise
  } catch (err) {
    await settling.catch(() => {})
    throw err
  }
}

/** The Service in front of a function pod (its selector is the pod's own label). */
export function functionService(templates: Templates, name: string, namespace: string, ownerLabel: string): ReturnType<typeof buildService> {
  return buildService(templates, name, namespace, functionServiceLabels(name, ownerLabel), {[LABEL_FN_IMAGE]: name})
}

export interface PullSecret {
  name: string
  dockerConfig: DockerConfig
  dockerConfigJson: Buffer
}

/** Creates the pull Secret unless one of that name exists (never changes an existing one). */
export async function createPullSecretIfMissing(core: CoreV1Api, namespace: string, name: string, dockerConfigJson: Buffer): Promise<'created' | 'exists'> {
  const where = `Secret ${namespace}/${name}`
  try {
    await core.readNamespacedSecret({name, namespace})
    return 'exists'
  } catch (err) {
    if (apiStatusCode(err) !== 404) throw kubeError(err, `cannot read ${where}`)
  }
  try {
    await core.createNamespacedSecret({namespace, body: buildPullSecret(name, namespace, dockerConfigJson)})
    return 'created'
  } catch (err) {
    if (apiStatusCode(err) === 409) return 'exists'
    throw kubeError(err, `cannot create ${where}`)
  }
}

/**
 * The pull-Secret part of a launch: attaches the Secret to a pod whose image's registry it has
 * credentials for, and makes sure the Secret exists (once; retried after a failure). The runner
 * owns the Secret ('ensure': created or brought up to date); `fnr pods warm` only creates a
 * missing one ('create-if-missing': an operator's credentials never replace the runner's).
 */
export function pullSecretPreparer(core: CoreV1Api, namespace: string, secret: PullSecret, mode: 'ensure' | 'create-if-missing', logger?: Logger): PreparePod {
  let ready: Promise<void> | undefined
  const ensure = (): Promise<void> => {
    const make = (): Promise<string> =>
      mode === 'ensure' ? ensurePullSecret(core, namespace, secret.name, secret.dockerConfigJson) : createPullSecretIfMissing(core, namespace, secret.name, secret.dockerConfigJson)
    ready ??= make().then(
      (result) => logger?.info('image pull secret', {secret: `${namespace}/${secret.name}`, result}),
      (err: unknown) => {
        ready = undefined
        throw err
      },
    )
    return ready
  }
  return async (pod, image) => {
    if (attachPullSecret(pod.spec!, secret.name, secret.dockerConfig, image)) await ensure()
  }
}

/**
 * Where launches read image metadata, and the pull Secret with --enable-private-registries: the
 * given metadata source (tests), else the registry client of the runner's registry settings
 * (counting its requests in `telemetry`, the server's).
 */
export async function podRegistry(
  settings: RunnerRegistrySettings & {authSecretName: string},
  options: {metadata?: ImageMetadataSource; logger?: Logger; telemetry?: Telemetry},
): Promise<{metadata: ImageMetadataSource; pullSecret?: PullSecret; close(): void}> {
  if (options.metadata && !settings.enablePrivateRegistries) return {metadata: options.metadata, close: () => {}}
  const [{createRunnerRegistry}, {RegistryMetadataSource}] = await Promise.all([import('../../registry/index.js'), import('./image-metadata.js')])
  const registry = await createRunnerRegistry(settings, {logger: options.logger, telemetry: options.telemetry})
  const pullSecret =
    settings.enablePrivateRegistries && registry.dockerConfigJson ? {name: settings.authSecretName, dockerConfig: registry.dockerConfig, dockerConfigJson: registry.dockerConfigJson} : undefined
  return {metadata: options.metadata ?? new RegistryMetadataSource(registry.client), ...(pullSecret ? {pullSecret} : {}), close: () => registry.client.close()}
}
