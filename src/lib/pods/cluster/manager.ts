/**
 * PodManager: the Kubernetes side of the pod runtime, for one namespace. It creates pods and
 * Services (with bounded retries of 5xx/429, and telling its own retried create from a name
 * collision on 409), watches fnr's pods (one list+watch for the namespace, resumed when dropped),
 * waits for a pod to become ready (watch events plus a slow GET fallback, failing fast on a
 * container that cannot start), deletes, patches, and lists.
 *
 * It holds no per-image state: that is PodCache's.
 */
import type {CoreV1Api, KubeConfig, V1ContainerStatus, V1Pod, V1Service} from '@kubernetes/client-node'

import {FnrError} from '../../errors.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {ClientNode} from '../../k8s/client.js'
import {apiStatusCode, apiStatusReason, kubeError} from '../../k8s/errors.js'
import {podResourceProblems} from '../../k8s/quantity.js'
import {sleep, withApiRetries} from '../../k8s/retry.js'
import {ResourceWatcher, type WatchEventType} from '../../k8s/watch.js'
import {ANNOTATION_CREATION_ID, LABEL_FN_IMAGE, POD_SELECTOR, SERVICE_SELECTOR} from '../model/naming.js'
import {FUNCTION_CONTAINER} from '../model/template.js'

export interface PodManagerOptions {
  k8s: ClientNode
  kubeConfig: KubeConfig
  core: CoreV1Api
  namespace: string
  logger?: Logger
  /** GET fallback while waiting for a pod, in case watch events are late (default 2 s). */
  pollMs?: number
  /** Relist delay after a watch error (default 1 s). */
  watchRetryMs?: number
}

export interface WaitOptions {
  /** Absolute deadline (ms since the epoch). */
  deadline: number
  signal?: AbortSignal
  /** Called with a one-line description of the pod's state whenever it changes. */
  onProgress?: (detail: string) => void
  /** Says what the deadline was, for the timeout message (e.g. "the pod-ready timeout (60s)"). */
  deadlineName?: string
}

export type PodReadiness =
  | {state: 'ready'; ip: string; detail: string}
  | {state: 'pending'; detail: string}
  | {state: 'failed'; error: FnrError; detail: string}

/** Container states that will not fix themselves soon: report them instead of waiting. */
const FATAL_WAITING = new Set(['CrashLoopBackOff', 'ImagePullBackOff', 'ErrImagePull', 'InvalidImageName', 'ErrImageNeverPull', 'CreateContainerError', 'RunContainerError', 'StartError'])

function terminatedText(t: {exitCode?: number; reason?: string; message?: string; signal?: number}): string {
  const parts = [`exit code ${t.exitCode ?? '?'}`]
  if (t.reason) parts.push(`(${t.reason})`)
  let text = parts.join(' ')
  if (t.message) text += `: ${t.message.trim().split('\n').slice(-3).join(' | ').slice(0, 300)}`
  return text
}

/**
 * Exits of a wrapper the node stopped rather than one that crashed: a clean exit on SIGTERM (fnr's wrapper), or
 * death by SIGTERM or SIGKILL (128+15, 128+9). A failed liveness probe ends that way; under load a probe can miss
 * its 1 s timeout although the wrapper serves. The kubelet restarts the container, and a pod whose container
 * restarted is not a crashed pod (Porch's runner keeps using it too).
 */
const STOPPED_BY_NODE = new Set([0, 137, 143])
/** Restarts of a container the node stopped that are waited out; at this many, the pod is reported as failed. */
export const NODE_RESTARTS_WAITED = 3

function stoppedByNode(t: {exitCode?: number; reason?: string}): boolean {
  return t.reason !== 'OOMKilled' && t.exitCode !== undefined && STOPPED_BY_NODE.has(t.exitCode)
}

/** What is wrong with a container that will not serve; `exited` when it ran and ended (its log says why). */
function containerFailure(status: V1ContainerStatus, init: boolean): {text: string; exited: boolean} | undefined {
  const what = `${init ? 'init container' : 'container'} "${status.name}"`
  const term = status.state?.terminated
  const exit = term ?? status.lastState?.terminated
  const restarts = status.restartCount ?? 0
  if (!init && exit && stoppedByNode(exit) && (status.state?.running || restarts < NODE_RESTARTS_WAITED)) return undefined
  if (term && (!init || term.exitCode !== 0)) return {text: `${what} terminated: ${terminatedText(term)}`, exited: true}
  const last = status.lastState?.terminated
  if (last && !init && stoppedByNode(last)) return {text: `${what} keeps being stopped by the node (${restarts} restarts; a failing liveness probe?), last exit: ${terminatedText(last)}`, exited: true}
  if (last && (!init || last.exitCode !== 0)) return {text: `${what} is crash-looping (${restarts} restarts), last exit: ${terminatedText(last)}`, exited: true}
  const waiting = status.state?.waiting
  if (waiting?.reason && FATAL_WAITING.has(waiting.reason)) return {text: `${what} is waiting: ${waiting.reason}${waiting.message ? `: ${waiting.message.slice(0, 300)}` : ''}`, exited: waiting.reason === 'CrashLoopBackOff'}
  return undefined
}

function cannotStart(prefix: string, problem: {text: string; exited: boolean}): PodReadiness {
  return {state: 'failed', detail: problem.text, error: new FnrError('FailedPrecondition', `${prefix} cannot start: ${problem.text}`, {details: {containerExited: problem.exited}})}
}

/** Where a pod is on its way to serving, and what is wrong if it will not get there. */
export function podReadiness(pod: V1Pod, image: string): PodReadiness {
  const name = pod.metadata?.name ?? '?'
  const prefix = `function pod ${name} for image "${image}"`
  if (pod.metadata?.deletionTimestamp) {
    return {state: 'failed', detail: 'being deleted', error: new FnrError('Unavailable', `${prefix} is being deleted`)}
  }
  const status = pod.status ?? {}
  for (const s of status.initContainerStatuses ?? []) {
    const problem = containerFailure(s, true)
    if (problem) return cannotStart(prefix, problem)
  }
  const statuses = status.containerStatuses ?? []
  const main = statuses.find((s) => s.name === FUNCTION_CONTAINER) ?? statuses[0]
  if (main) {
    const problem = containerFailure(main, false)
    if (problem) return cannotStart(prefix, problem)
  }
  if (status.phase === 'Failed' || status.phase === 'Succeeded') {
    const why = [status.reason, status.message].filter(Boolean).join(': ') || `phase ${status.phase}`
    return {state: 'failed', detail: why, error: new FnrError('FailedPrecondition', `${prefix} ended (${why})`)}
  }
  const ready = status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
  if (ready && status.podIP) return {state: 'ready', ip: status.podIP, detail: 'ready'}
  const waiting = main?.state?.waiting
  const scheduled = status.conditions?.find((c) => c.type === 'PodScheduled')
  let detail = `phase ${status.phase ?? 'Pending'}`
  if (scheduled?.status === 'False') detail += `, not scheduled${scheduled.reason ? ` (${scheduled.reason}${scheduled.message ? `: ${scheduled.message.slice(0, 200)}` : ''})` : ''}`
  const initWaiting = (status.initContainerStatuses ?? []).find((s) => s.state?.waiting || s.state?.running)
  if (initWaiting) detail += `, init container "${initWaiting.name}" ${initWaiting.state?.running ? 'running' : `waiting (${initWaiting.state?.waiting?.reason ?? '?'})`}`
  if (waiting) detail += `, container "${main?.name}" waiting (${waiting.reason ?? '?'}${waiting.message ? `: ${waiting.message.slice(0, 200)}` : ''})`
  else if (main?.state?.running) detail += `, container "${main.name}" running, not ready yet`
  const last = main?.lastState?.terminated
  if (main && last) detail += `, restarted by the node ${main.restartCount ?? 0}× (last exit: ${terminatedText(last)})`
  return {state: 'pending', detail}
}

export class PodManager {
  readonly namespace: string
  private readonly core: CoreV1Api
  private readonly logger: Logger
  private readonly pods: ResourceWatcher<V1Pod>
  private readonly pollMs: number
  private readonly mergePatch: ReturnType<ClientNode['setHeaderOptions']>
  private closed = false

  constructor(private readonly options: PodManagerOptions) {
    this.namespace = options.namespace
    this.core = options.core
    this.logger = options.logger ?? silentLogger
    this.pollMs = options.pollMs ?? 2000
    this.mergePatch = options.k8s.setHeaderOptions('Content-Type', options.k8s.PatchStrategy.MergePatch)
    this.pods = new ResourceWatcher<V1Pod>({
      k8s: options.k8s,
      kubeConfig: options.kubeConfig,
      path: `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/pods`,
      labelSelector: POD_SELECTOR,
      list: () => this.core.listNamespacedPod({namespace: this.namespace, labelSelector: POD_SELECTOR}),
      logger: this.logger,
      description: `function pods in ${this.namespace}`,
      retryMs: options.watchRetryMs,
    })
  }

  /**
   * Starts watching fnr's pods. A failing first list is logged and retried in the background
   * (see whenSynced), so a runner whose API server is briefly away still starts.
   */
  async start(): Promise<void> {
    try {
      await this.pods.start()
    } catch (err) {
      this.logger.warn('cannot list function pods yet; retrying', {namespace: this.namespace, error: (err as Error).message})
      void this.retryStart()
    }
  }

  private async retryStart(): Promise<void> {
    let delay = this.options.watchRetryMs ?? 1000
    while (!this.closed && !this.pods.synced) {
      await sleep(delay)
      if (this.closed) return
      try {
        await this.pods.start()
      } catch (err) {
        delay = Math.min(delay * 2, 15_000)
        this.logger.debug('still cannot list function pods', {error: (err as Error).message})
      }
    }
  }

  whenSynced(): Promise<void> {
    return this.pods.whenSynced()
  }

  get synced(): boolean {
    return this.pods.synced
  }

  /** fnr's pods as last seen by the watch. */
  observedPods(): V1Pod[] {
    return this.pods.list()
  }

  observedPod(name: string): V1Pod | undefined {
    return this.pods.get(name)
  }

  onPodChange(listener: (type: WatchEventType, pod: V1Pod) => void): () => void {
    return this.pods.on((type, pod) => listener(type, pod))
  }

  /** How many times the pod watch was started (tests). */
  get watchStarts(): number {
    return this.pods.restarts
  }

  /**
   * Creates a pod. 5xx/429 are retried (same name, same creation id). A 409 is our own earlier
   * attempt when the existing pod carries our creation id (returned as created); otherwise the
   * name is taken, which is FnrError('FailedPrecondition') with details.nameTaken.
   */
  async createPod(pod: V1Pod, options: {deadline: number; signal?: AbortSignal}): Promise<V1Pod> {
    const name = pod.metadata!.name!
    const creationId = pod.metadata?.annotations?.[ANNOTATION_CREATION_ID]
    const what = `cannot create pod ${this.namespace}/${name}`
    // What the API server would reject (a request above its limit, a malformed quantity), said before asking it.
    const problems = podResourceProblems(pod.spec)
    if (problems.length > 0) {
      const image = pod.spec?.containers?.find((c) => c?.name === FUNCTION_CONTAINER)?.image
      throw new FnrError('FailedPrecondition', `${what}${image ? ` for image ${image}` : ''}: the API server would reject its resources: ${problems.join('; ')}`, {details: {invalidResources: problems}})
    }
    try {
      return await withApiRetries(() => this.core.createNamespacedPod({namespace: this.namespace, body: pod}), {what, deadline: options.deadline, signal: options.signal})
    } catch (err) {
      if (apiStatusCode(err) !== 409) throw kubeError(err, what)
      let existing: V1Pod | undefined
      try {
        existing = await this.core.readNamespacedPod({name, namespace: this.namespace})
      } catch (readErr) {
        if (apiStatusCode(readErr) !== 404) throw kubeError(readErr, what)
      }
      if (existing && creationId && existing.metadata?.annotations?.[ANNOTATION_CREATION_ID] === creationId && !existing.metadata?.deletionTimestamp) return existing
      throw new FnrError('FailedPrecondition', `${what}: the name is taken (${apiStatusReason(err) ?? 'AlreadyExists'})`, {cause: err, details: {status: 409, nameTaken: true}})
    }
  }

  /**
   * Creates the Service of a pod, or reuses an existing one that selects the same pod (our own
   * earlier attempt, or the "already exists" race upstream fails on). A Service of that name
   * selecting something else is an error.
   */
  async ensureService(service: V1Service, options: {deadline: number; signal?: AbortSignal}): Promise<V1Service> {
    const name = service.metadata!.name!
    const what = `cannot create Service ${this.namespace}/${name}`
    for (let attempt = 0; ; attempt++) {
      try {
        return await withApiRetries(() => this.core.createNamespacedService({namespace: this.namespace, body: service}), {what, deadline: options.deadline, signal: options.signal})
      } catch (err) {
        if (apiStatusCode(err) !== 409) throw kubeError(err, what)
        let existing: V1Service | undefined
        try {
          existing = await withApiRetries(() => this.core.readNamespacedService({name, namespace: this.namespace}), {what, deadline: options.deadline, signal: options.signal})
        } catch (readErr) {
          // Gone again between the 409 and the read: create once more.
          if (apiStatusCode(readErr) === 404 && attempt < 2) continue
          throw kubeError(readErr, what)
        }
        const want = service.spec?.selector?.[LABEL_FN_IMAGE]
        if (existing.spec?.selector?.[LABEL_FN_IMAGE] === want && !existing.metadata?.deletionTimestamp) return existing
        throw new FnrError('FailedPrecondition', `${what}: a Service of that name exists and selects ${JSON.stringify(existing.spec?.selector ?? {})}`, {details: {status: 409}})
      }
    }
  }

  /**
   * Waits until the pod is ready (condition Ready and a pod IP). Fails fast with the container's
   * state when it crashed, cannot pull its image or was deleted; DeadlineExceeded at the deadline
   * with the last state seen; Cancelled when the signal aborts.
   */
  waitForPodReady(name: string, image: string, options: WaitOptions): Promise<{pod: V1Pod; ip: string}> {
    return new Promise((resolve, reject) => {
      let detail = 'waiting for the pod to appear'
      let seen = false
      let settled = false
      const cleanup: Array<() => void> = []
      const finish = (err: FnrError | undefined, result?: {pod: V1Pod; ip: string}): void => {
        if (settled) return
        settled = true
        for (const c of cleanup) c()
        if (err) reject(err)
        else resolve(result!)
      }
      const consider = (pod: V1Pod | undefined, deleted = false): void => {
        if (settled) return
        if (!pod || deleted) {
          if (seen || deleted) finish(new FnrError('Unavailable', `function pod ${name} for image "${image}" was deleted before it became ready`))
          return
        }
        seen = true
        const r = podReadiness(pod, image)
        if (r.detail !== detail) {
          detail = r.detail
          options.onProgress?.(detail)
        }
        if (r.state === 'ready') finish(undefined, {pod, ip: r.ip})
        else if (r.state === 'failed') finish(r.error)
      }
      cleanup.push(this.onPodChange((type, pod) => pod.metadata?.name === name && consider(pod, type === 'DELETED')))
      const poll = setInterval(() => {
        this.core.readNamespacedPod({name, namespace: this.namespace}).then(
          (pod) => consider(pod),
          (err) => {
            if (apiStatusCode(err) === 404 && seen) consider(undefined)
          },
        )
      }, this.pollMs)
      cleanup.push(() => clearInterval(poll))
      const left = options.deadline - Date.now()
      const timer = setTimeout(() => {
        finish(new FnrError('DeadlineExceeded', `function pod ${name} for image "${image}" was not ready within ${options.deadlineName ?? 'the deadline'} (${detail})`, {details: {detail}}))
      }, Math.max(0, left))
      cleanup.push(() => clearTimeout(timer))
      if (options.signal) {
        const onAbort = (): void => finish(new FnrError('Cancelled', `stopped waiting for function pod ${name}`))
        if (options.signal.aborted) return onAbort()
        options.signal.addEventListener('abort', onAbort, {once: true})
        cleanup.push(() => options.signal?.removeEventListener('abort', onAbort))
      }
      consider(this.pods.get(name))
    })
  }

  /** The last lines a container wrote (best effort, for error messages); '' when unavailable. */
  async logTail(name: string, container = FUNCTION_CONTAINER, lines = 5, timeoutMs = 1500): Promise<string> {
    const read = this.core.readNamespacedPodLog({name, namespace: this.namespace, container, tailLines: lines}).then(
      (text) => String(text ?? '').trim(),
      () => '',
    )
    const timeout = sleep(timeoutMs).then(() => '')
    return Promise.race([read, timeout])
  }

  /** Deletes a pod: true when this call deleted it, false when it was already gone (fine too). */
  async deletePod(name: string, gracePeriodSeconds?: number): Promise<boolean> {
    try {
      await withApiRetries(() => this.core.deleteNamespacedPod({name, namespace: this.namespace, gracePeriodSeconds}), {what: `cannot delete pod ${this.namespace}/${name}`, attempts: 3})
      return true
    } catch (err) {
      if (apiStatusCode(err) !== 404 && !(err instanceof FnrError && err.details.status === 404)) throw err
      return false
    }
  }

  /** Deletes a Service: true when this call deleted it, false when it was already gone. */
  async deleteService(name: string): Promise<boolean> {
    try {
      await withApiRetries(() => this.core.deleteNamespacedService({name, namespace: this.namespace}), {what: `cannot delete Service ${this.namespace}/${name}`, attempts: 3})
      return true
    } catch (err) {
      if (apiStatusCode(err) !== 404 && !(err instanceof FnrError && err.details.status === 404)) throw err
      return false
    }
  }

  /**
   * Deletes a pod and its Service (same name); failures are logged, never thrown. Resolves to
   * whether this call deleted the pod (false: it failed, or the pod was already gone).
   */
  async deletePodAndService(name: string, reason: string): Promise<boolean> {
    const [pod, svc] = await Promise.allSettled([this.deletePod(name), this.deleteService(name)])
    if (pod.status === 'rejected' || svc.status === 'rejected') {
      const error = [pod, svc].filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => (r.reason as Error).message).join('; ')
      this.logger.warn('cannot delete function pod', {pod: name, reason, error})
    } else {
      this.logger.info('deleted function pod', {pod: name, reason})
    }
    return pod.status === 'fulfilled' && pod.value
  }

  /**
   * Merge-patches a pod's labels and/or annotations. With `resourceVersion`, the patch only
   * applies to that version of the pod (409 Conflict otherwise): how replicas take a pod over
   * without two of them ever both taking it.
   */
  async patchPodMetadata(name: string, metadata: {labels?: Record<string, string>; annotations?: Record<string, string>}, options: {resourceVersion?: string} = {}): Promise<V1Pod> {
    const body = {metadata: options.resourceVersion ? {...metadata, resourceVersion: options.resourceVersion} : metadata}
    return withApiRetries(() => this.core.patchNamespacedPod({name, namespace: this.namespace, body}, this.mergePatch), {what: `cannot patch pod ${this.namespace}/${name}`, attempts: 2})
  }

  /** Reads a pod from the API server (not the watch cache); undefined when it does not exist. */
  async readPod(name: string): Promise<V1Pod | undefined> {
    try {
      return await withApiRetries(() => this.core.readNamespacedPod({name, namespace: this.namespace}), {what: `cannot read pod ${this.namespace}/${name}`, attempts: 2})
    } catch (err) {
      if (apiStatusCode(err) === 404) return undefined
      throw err
    }
  }

  /**
   * Deletes a pod only if it is still at `resourceVersion` (a delete precondition): false when it
   * changed (e.g. another replica took it over) or is gone already.
   */
  async deletePodIfUnchanged(name: string, resourceVersion: string): Promise<boolean> {
    try {
      await withApiRetries(() => this.core.deleteNamespacedPod({name, namespace: this.namespace, body: {preconditions: {resourceVersion}}}), {what: `cannot delete pod ${this.namespace}/${name}`, attempts: 3})
      return true
    } catch (err) {
      const code = apiStatusCode(err)
      if (code === 409 || code === 404) return false
      throw err
    }
  }

  async listPods(): Promise<V1Pod[]> {
    const list = await withApiRetries(() => this.core.listNamespacedPod({namespace: this.namespace, labelSelector: POD_SELECTOR}), {what: `cannot list pods in ${this.namespace}`})
    return list.items
  }

  async listServices(): Promise<V1Service[]> {
    const list = await withApiRetries(() => this.core.listNamespacedService({namespace: this.namespace, labelSelector: SERVICE_SELECTOR}), {what: `cannot list Services in ${this.namespace}`})
    return list.items
  }

  close(): void {
    this.closed = true
    this.pods.stop()
  }
}
