/**
 * PodCache: the single owner of the pod runtime's per-image state.
 *
 * Node runs JavaScript on one thread, so every decision here (which pod takes a call, whether to
 * start another, eviction, expiry, adoption) is made in one synchronous step that no other code
 * can interleave with; the slow work (registry, API server, readiness, gRPC connect) runs
 * outside and comes back into the same synchronous methods. That is what upstream needs an event
 * loop goroutine and channels for, without the goroutine's hazards (spec §4.3-§4.5, §4.17).
 *
 * Per image there is a list of pod slots. A call takes the live slot with the least load
 * (calls in flight or waiting), round-robin among ties. A new pod is started when the image has
 * none, or when the best slot's load has reached maxWaitlistLength and fewer than
 * maxParallelPods live slots exist (per-image overrides from --pod-cache-config); otherwise the
 * call queues on the best slot (upstream semantics: the waitlist length is a scale-up threshold,
 * never a rejection, spec §10.6).
 *
 * Load accounting: a lease is taken synchronously with the load increment and released exactly
 * once, whatever happens (timeout while waiting for the pod, cancellation, failure, success), so
 * load never leaks (upstream leaks it on timeout, §10.21).
 */
import type {V1Pod} from '@kubernetes/client-node'

import type {ImagePodSettings} from '../config/pod-cache-config.js'
import {FnrError, toFnrError} from '../errors.js'
import {EvaluatorClient} from '../grpc/client.js'
import {dnsServerTarget} from '../grpc/dns-server.js'
import {silentLogger, type Logger} from '../log.js'
import {metrics} from '../metrics.js'
import type {WatchEventType} from '../k8s/watch.js'
import {WRAPPER_SERVER_PORT} from '../registry/image-config.js'
import type {CachedPodState, GcCode} from './gc.js'
import {noLeaseView, type ObservedLease, type OwnerState, type ReplicaView} from './lease.js'
import type {PodManager} from './manager.js'
import {podReadiness} from './manager.js'
import type {ImageMetadataSource} from './metadata.js'
import {PodAdoption, type TakeOverResult} from './adoption.js'
import {PodClaim} from './claim.js'
import {PodSlot, pickLeastLoaded, type SlotSnapshot} from './slot.js'
import {PodCollector} from './collector.js'
import {functionService, launchPod, raceDeadline, secondsText, type LaunchContext, type PreparePod} from './launcher.js'
import {
  ANNOTATION_IMAGE,
  ANNOTATION_LAST_USED,
  ANNOTATION_TTL,
  LABEL_OWNER,
  WARM_OWNER,
  labelValueFor,
  podNameFor,
} from './naming.js'
import type {Templates} from './template.js'

export type PodAddressMode = 'service' | 'pod-ip'

export interface PodCacheOptions {
  manager: PodManager
  metadata: ImageMetadataSource
  /** The templates new pods are made from (they may change: see setTemplates). */
  templates: Templates
  settingsFor: (image: string) => ImagePodSettings
  /** This runner's identity (owner label, annotation). */
  owner: string
  /** How long a pod may take from the decision to start it to a connected channel. */
  podReadyTimeoutMs: number
  /** How fnr dials pods: the Service's DNS name (default) or the pod IP. */
  addressMode: PodAddressMode
  clusterDomain: string
  /** Resolve Service names through this DNS server (`ip[:port]`) instead of the system resolver (FNR_DNS_SERVER). */
  dnsServer?: string
  maxMessageSize: number
  /** Adds the image pull Secret to a pod spec when the image needs it; may be async (ensuring the Secret). */
  preparePod?: PreparePod
  logger?: Logger
  now?: () => number
  /** Fewest ms between two last-used annotation patches of one pod (default: TTL/10, 5 s to 5 min). */
  lastUsedPatchIntervalMs?: (ttlMs: number) => number
  /** GC: minimum age of an orphan Service before it is deleted (default 60 s). */
  orphanMinAgeMs?: number
  /** GC: how long past its TTL another runner's pod is left alone (default 10 min). */
  foreignGraceMs?: number
  /** Several replicas: what the others' Leases say (lease.ts); without it, every other owner is 'none'. */
  replicas?: {observe(): Promise<ReplicaView>; deleteLease(lease: ObservedLease): Promise<boolean>}
  /**
   * Run the function container as `repo@digest` when the registry gave a digest (default false:
   * the image as requested, as Porch). The digest is recorded on the pod either way.
   */
  pinDigests?: boolean
  /** `--verbosity N` for the wrapper server of new pods (the runner's --log-level when 3 or more). */
  wrapperVerbosity?: number
}

interface ImageEntry {
  image: string
  slots: PodSlot[]
  rr: number
}

export interface AcquireOptions {
  deadline?: number
  signal?: AbortSignal
}

export {PodSlot, pickLeastLoaded, type SlotSnapshot, type SlotTimings} from './slot.js'

export class PodCache {
  private readonly entries = new Map<string, ImageEntry>()
  readonly logger: Logger
  readonly now: () => number
  readonly owner: string
  readonly ownerLabel: string
  readonly manager: PodManager
  private templates: Templates
  closed = false
  private startup: Promise<void> = Promise.resolve()
  private startupDone = true
  private readonly launch: LaunchContext
  private readonly adoption: PodAdoption
  /** This cache's GC pass (collector.ts), run by PodGarbageCollector every --scan-interval. */
  readonly collector: PodCollector

  constructor(private readonly options: PodCacheOptions) {
    this.logger = options.logger ?? silentLogger
    this.now = options.now ?? Date.now
    this.templates = options.templates
    this.ownerLabel = labelValueFor(options.owner)
    this.owner = options.owner
    this.manager = options.manager
    this.adoption = new PodAdoption(this)
    this.collector = new PodCollector(this, {manager: options.manager, logger: this.logger, orphanMinAgeMs: options.orphanMinAgeMs, foreignGraceMs: options.foreignGraceMs, replicas: options.replicas})
    this.launch = {
      manager: options.manager,
      metadata: options.metadata,
      owner: options.owner,
      ownerLabel: this.ownerLabel,
      maxRequestBodySize: options.maxMessageSize,
      pinDigest: options.pinDigests,
      preparePod: options.preparePod,
      wrapperVerbosity: options.wrapperVerbosity,
      logger: this.logger,
      now: this.now,
    }
  }

  get currentTemplates(): Templates {
    return this.templates
  }

  /** Calls wait for this (bounded by their deadline) before the first decision, e.g. adoption. */
  setStartup(startup: Promise<void>): void {
    this.startupDone = false
    this.startup = startup.finally(() => {
      this.startupDone = true
    })
  }

  /**
   * Takes a slot for a call on `image`, starting a pod if the rules say so, and waits (bounded by
   * the caller's deadline and signal) until that pod is ready. The lease must be released.
   */
  async acquire(image: string, options: AcquireOptions = {}): Promise<PodClaim> {
    if (!this.startupDone) {
      await raceDeadline(
        this.startup,
        options,
        () => new FnrError('DeadlineExceeded', `the pod runtime was still starting (listing existing function pods) at the call's deadline`),
        () => new FnrError('Cancelled', 'the call was cancelled while the pod runtime was starting'),
      )
    }
    let allowScaleUp = true
    for (let attempt = 0; ; attempt++) {
      const lease = this.take(image, allowScaleUp)
      const slot = lease.slot
      if (slot.state === 'ready' || slot.state === 'retiring') return lease
      try {
        await raceDeadline(
          slot.ready,
          options,
          () =>
            new FnrError('DeadlineExceeded', `function pod ${slot.name} for image "${image}" was not ready by the call's deadline (${slot.detail}); it keeps starting for later calls`, {details: {caller: true}}),
          () => new FnrError('Cancelled', `the call was cancelled while waiting for function pod ${slot.name}`, {details: {caller: true}}),
        )
      } catch (err) {
        lease.release()
        // The pod this call waited for failed to start; when the image has other pods, use them.
        const e = toFnrError(err)
        if (e.details.caller !== true && attempt === 0 && this.liveSlots(image).length > 0) {
          allowScaleUp = false
          continue
        }
        throw e
      }
      if (slot.state === 'gone') {
        lease.release()
        if (attempt === 0) continue
        throw new FnrError('Unavailable', `function pod ${slot.name} for image "${image}" went away right after it became ready (${slot.goneReason ?? 'evicted'})`)
      }
      return lease
    }
  }

  private entryFor(image: string): ImageEntry {
    let entry = this.entries.get(image)
    if (!entry) this.entries.set(image, (entry = {image, slots: [], rr: 0}))
    return entry
  }

  /** Slots that take new calls: starting or ready, made from the current template version. */
  private liveSlots(image: string): PodSlot[] {
    const version = this.templates.version
    return (this.entries.get(image)?.slots ?? []).filter((s) => (s.state === 'starting' || s.state === 'ready') && s.templateVersion === version)
  }

  /** The synchronous decision: pick (or start) a slot and count the call on it. */
  private take(image: string, allowScaleUp: boolean): PodClaim {
    if (this.closed) throw new FnrError('Unavailable', 'the pod runtime is shutting down')
    const entry = this.entryFor(image)
    const settings = this.options.settingsFor(image)
    const version = this.templates.version
    const live = entry.slots.filter((s) => (s.state === 'starting' || s.state === 'ready') && s.templateVersion === version)
    let best = pickLeastLoaded(entry, live)
    if (!best || (allowScaleUp && best.load >= settings.maxWaitlistLength && live.length < settings.maxParallelPods)) {
      this.logger.debug(best ? 'scaling up: every pod of the image is at the waitlist length' : 'no pod for the image; starting one', {image, pods: live.length, load: best?.load})
      best = this.startSlot(entry, settings)
      metrics().podCacheLookup(image, 'miss')
    } else metrics().podCacheLookup(image, best.state === 'ready' ? 'hit' : 'starting')
    best.load++
    best.lastUsed = this.now()
    if (best.state === 'ready') this.maybeAnnotateLastUse(best, settings)
    return new PodClaim(this, best)
  }

  /** Called by PodClaim.release. */
  releaseSlot(slot: PodSlot): void {
    slot.load = Math.max(0, slot.load - 1)
    slot.lastUsed = this.now()
    if (slot.load > 0) return
    if (slot.state === 'retiring') this.evict(slot, slot.retireReason ?? 'replaced by a new template version')
    else if (slot.state === 'gone') this.finish(slot)
  }

  /**
   * The image's metadata through the cache: a lookup that shows the image's tag resolving to
   * another digest than its pods' retires those pods (see noteDigest).
   */
  async describe(image: string, options: {signal?: AbortSignal} = {}): Promise<Awaited<ReturnType<ImageMetadataSource['describe']>>> {
    const info = await this.options.metadata.describe(image, options)
    if (info.digest) this.noteDigest(image, info.digest)
    return info
  }

  /**
   * The image now resolves to `digest`: its pods made for another digest take no new calls and
   * are deleted once idle (a pod still starting is retired when ready), so new calls start pods
   * of the new content. Pods whose digest is unknown (made by an older fnr or `fnr pods warm`)
   * are left alone; the response cache never stores their responses.
   */
  noteDigest(image: string, digest: string, except?: PodSlot): void {
    const entry = this.entries.get(image)
    if (!entry) return
    for (const slot of [...entry.slots]) {
      if (slot === except || slot.digest === undefined || slot.digest === digest) continue
      if (slot.state === 'ready') this.logger.info('function image changed; retiring its pod', {image, pod: slot.name, from: slot.digest, to: digest})
      this.retire(slot, `the image now resolves to ${digest}, not ${slot.digest}`)
    }
  }

  /**
   * Starts a pod for an image when it has none (warm-up). Resolves when the pod is ready (or at
   * once when there already is one); rejects when it fails to start.
   */
  async warm(image: string): Promise<void> {
    if (this.closed) return
    const live = this.liveSlots(image)
    if (live.length > 0) return live[0]!.ready
    const slot = this.startSlot(this.entryFor(image), this.options.settingsFor(image))
    return slot.ready
  }

  private startSlot(entry: ImageEntry, settings: ImagePodSettings): PodSlot {
    const templates = this.templates
    const slot = new PodSlot(entry.image, podNameFor(entry.image), templates.version, this.now())
    entry.slots.push(slot)
    slot.ready = this.bringUp(slot, templates, settings)
    slot.ready.catch(() => {})
    return slot
  }

  /** Launches the pod (launcher.ts), then connects; the slot is ready after. */
  private async bringUp(slot: PodSlot, templates: Templates, settings: ImagePodSettings): Promise<void> {
    const started = this.now()
    const deadline = started + this.options.podReadyTimeoutMs
    const deadlineName = `the pod-ready timeout (${secondsText(this.options.podReadyTimeoutMs)})`
    const signal = slot.abort.signal
    try {
      const launched = await launchPod(this.launch, slot.image, {
        templates,
        settings,
        deadline,
        deadlineName,
        signal,
        name: slot.name,
        abandonedReason: () => slot.goneReason,
        onProgress: (detail) => (slot.detail = detail),
        // This lookup saw the image's current digest: pods of an older one are replaced.
        onDigest: (digest) => {
          slot.digest = digest
          this.noteDigest(slot.image, digest, slot)
        },
        onCreated: (name) => {
          slot.name = name
          slot.created = true
          slot.annotatedAt = this.now()
        },
      })
      slot.timings = {...launched.timings}
      const t = this.now()
      slot.detail = 'connecting'
      slot.address = this.addressOf(slot.name, launched.ip)
      slot.client = this.connect(slot.address)
      await raceDeadline(
        slot.client.waitForReady(deadline),
        {deadline, signal},
        () => new FnrError('DeadlineExceeded', `function pod ${slot.name} for image "${slot.image}" was not ready within ${deadlineName} (connecting to ${slot.address})`),
        () => new FnrError('Unavailable', `function pod ${slot.name} for image "${slot.image}" was abandoned (${slot.goneReason ?? 'the runner is shutting down'})`),
      )
      slot.timings.connectMs = this.now() - t
      slot.timings.totalMs = this.now() - started
      if (isGone(slot)) throw new FnrError('Unavailable', `function pod ${slot.name} for image "${slot.image}" was evicted while starting (${slot.goneReason})`)
      if (slot.state === 'starting') slot.state = 'ready'
      slot.detail = 'ready'
      this.logger.info('function pod ready', {image: slot.image, pod: slot.name, address: slot.address, ...slot.timings})
    } catch (err) {
      let e = toFnrError(err)
      // "Not found" from the registry or the API means something else here: the evaluator chain
      // must never see NotFound from the pod runtime (it means "not an exec function").
      if (e.kind === 'NotFound') e = new FnrError('FailedPrecondition', e.message, {cause: e, details: e.details})
      this.logger.warn('function pod failed to start', {image: slot.image, pod: slot.name, error: e.message})
      this.evict(slot, `failed to start: ${e.message}`)
      throw e
    }
  }

  /** A gRPC channel to a pod (no retries: a failed call is retried by the evaluator on another pod). */
  private connect(address: string): EvaluatorClient {
    return new EvaluatorClient(address, {
      maxMessageSize: this.options.maxMessageSize,
      channelOptions: {'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 2000, 'grpc.enable_retries': 0},
    })
  }

  private addressOf(podName: string, ip: string): string {
    if (this.options.addressMode === 'pod-ip') return ip.includes(':') ? `[${ip}]:${WRAPPER_SERVER_PORT}` : `${ip}:${WRAPPER_SERVER_PORT}`
    const name = `${podName}.${this.options.manager.namespace}.svc.${this.options.clusterDomain}:${WRAPPER_SERVER_PORT}`
    return this.options.dnsServer ? dnsServerTarget(this.options.dnsServer, name) : name
  }

  private maybeAnnotateLastUse(slot: PodSlot, settings: ImagePodSettings): void {
    const interval = this.options.lastUsedPatchIntervalMs?.(settings.ttlMs) ?? Math.min(300_000, Math.max(5_000, settings.ttlMs / 10))
    const now = this.now()
    if (now - slot.annotatedAt < interval) return
    slot.annotatedAt = now
    this.options.manager
      .patchPodMetadata(slot.name, {annotations: {[ANNOTATION_LAST_USED]: new Date(now).toISOString(), [ANNOTATION_TTL]: String(Math.round(settings.ttlMs / 1000))}})
      .catch((err: unknown) => this.logger.debug('cannot record the last use of a pod', {pod: slot.name, error: (err as Error).message}))
  }

  /**
   * Takes a slot out of service: no new calls go to it; once no call is in flight its channel is
   * closed and the pod and Service are deleted.
   */
  evict(slot: PodSlot, reason: string): void {
    if (slot.state === 'gone') return
    const wasStarting = slot.state === 'starting'
    slot.state = 'gone'
    slot.goneReason = reason
    const entry = this.entries.get(slot.image)
    if (entry) {
      entry.slots = entry.slots.filter((s) => s !== slot)
      if (entry.slots.length === 0) this.entries.delete(slot.image)
    }
    if (wasStarting) slot.abort.abort()
    this.logger.info('function pod evicted', {image: slot.image, pod: slot.name, reason, load: slot.load})
    if (slot.load === 0 || wasStarting) this.finish(slot)
  }

  /** Closes the channel and deletes the pod and Service (once). */
  private finished = new WeakSet<PodSlot>()
  private finish(slot: PodSlot): void {
    if (this.finished.has(slot)) return
    this.finished.add(slot)
    slot.client?.close()
    if (this.closed && !slot.created) return
    if (slot.disowned) return
    const gcCode = slot.gcCode
    void this.options.manager.deletePodAndService(slot.name, slot.goneReason ?? 'evicted').then((deleted) => {
      if (deleted && gcCode !== undefined) metrics().podGcDeletion('pod', gcCode)
    })
  }

  /** A call to the pod failed with Unavailable: the pod is treated as dead. */
  noteUnavailable(slot: PodSlot, reason: string): void {
    this.evict(slot, `call failed: ${reason}`)
  }

  /** Pod watch events: evict a slot whose pod failed, ended, crashed or was deleted. */
  onPodEvent(type: WatchEventType, pod: V1Pod): void {
    const name = pod.metadata?.name
    if (!name) return
    const slot = this.findSlot(name)
    if (!slot) {
      // A pod `fnr pods warm` made while this runner runs: adopt it once ready (after startup,
      // which adopts the ones already there), without waiting for the next GC scan.
      if (type !== 'DELETED' && this.startupDone && !this.closed && pod.metadata?.labels?.[LABEL_OWNER] === WARM_OWNER && !pod.metadata?.deletionTimestamp) {
        const image = pod.metadata?.annotations?.[ANNOTATION_IMAGE]
        if (image && podReadiness(pod, image).state === 'ready') void this.takeOver(pod, 'none', 'warmed by fnr pods warm')
      }
      return
    }
    if (slot.state === 'starting' || slot.state === 'gone') return
    if (type === 'DELETED') {
      this.evict(slot, 'the pod was deleted')
      return
    }
    const owner = pod.metadata?.labels?.[LABEL_OWNER]
    if (owner !== undefined && owner !== this.ownerLabel && owner !== slot.adoptedFrom && slot.created) {
      // Another replica took it over (this one's lease had expired): let it go, never delete it.
      slot.disowned = true
      this.evict(slot, `taken over by replica ${owner}`)
      return
    }
    const r = podReadiness(pod, slot.image)
    if (r.state === 'failed') this.evict(slot, r.detail)
  }

  /** The slot of a pod, if the cache holds it (tests, `fnr pods ls`). */
  slotFor(name: string): PodSlot | undefined {
    return this.findSlot(name)
  }

  private findSlot(name: string): PodSlot | undefined {
    for (const entry of this.entries.values()) for (const s of entry.slots) if (s.name === name) return s
    return undefined
  }

  /**
   * New templates: pods made from other versions get no new calls and are replaced as they go
   * idle (new pods are started on demand).
   */
  setTemplates(templates: Templates): void {
    if (templates.version === this.templates.version) return
    this.logger.info('function pod template changed; replacing pods as they go idle', {from: this.templates.version, to: templates.version, origin: templates.origin})
    this.templates = templates
    for (const entry of [...this.entries.values()]) {
      for (const slot of [...entry.slots]) {
        if (slot.templateVersion !== templates.version) this.retire(slot, slot.retireReason ?? 'replaced by a new template version')
      }
    }
  }

  /**
   * No new calls for the slot: evicted now when idle, else once its last call ends (state
   * 'retiring'); a slot still starting is retired once ready.
   */
  private retire(slot: PodSlot, reason: string): void {
    if (slot.state === 'starting') {
      slot.retireReason = reason
      slot.ready.then(() => slot.state === 'ready' && this.retire(slot, reason), () => {})
      return
    }
    if (slot.state !== 'ready') return
    slot.retireReason = reason
    if (slot.load === 0) this.evict(slot, reason)
    else slot.state = 'retiring'
  }

  /** Startup: takes over fnr's pods (adoption.ts). */
  adopt(pods: readonly V1Pod[], view: ReplicaView = noLeaseView(this.ownerLabel)): Promise<{adopted: string[]; deleted: string[]}> {
    return this.adoption.adopt(pods, view)
  }

  /** Takes one uncached pod over (adoption.ts); never throws. */
  takeOver(pod: V1Pod, state: OwnerState, why: string): Promise<TakeOverResult> {
    return this.adoption.takeOver(pod, state, why)
  }

  liveCount(image: string): number {
    return this.liveSlots(image).length
  }

  settingsFor(image: string): ImagePodSettings {
    return this.options.settingsFor(image)
  }

  addAdoptedSlot(name: string, image: string, ip: string, lastUsed: number | undefined): PodSlot {
    const now = this.now()
    const entry = this.entryFor(image)
    const slot = new PodSlot(image, name, this.templates.version, Math.min(now, lastUsed ?? now))
    slot.created = true
    slot.state = 'ready'
    slot.annotatedAt = lastUsed ?? 0
    slot.address = this.addressOf(name, ip)
    slot.client = this.connect(slot.address)
    slot.ready = Promise.resolve()
    entry.slots.push(slot)
    const service = functionService(this.templates, name, this.options.manager.namespace, this.ownerLabel)
    this.options.manager.ensureService(service, {deadline: now + this.options.podReadyTimeoutMs}).catch((err: unknown) => {
      this.logger.warn('adopted pod has no usable Service', {pod: name, error: (err as Error).message})
      if (this.options.addressMode === 'service') this.evict(slot, 'its Service cannot be created')
    })
    return slot
  }

  /** The cached pods as the GC planner sees them; busy pods get their last-used annotation refreshed. */
  gcState(): CachedPodState[] {
    const slots = [...this.entries.values()].flatMap((e) => e.slots)
    // A busy pod is in use now: keep its fnr.dev/last-used fresh during long calls too (other
    // replicas and `fnr pods gc` read it), with the same interval as when a call takes it.
    for (const s of slots) if ((s.state === 'ready' || s.state === 'retiring') && s.load > 0) this.maybeAnnotateLastUse(s, this.options.settingsFor(s.image))
    return slots.map((s) => ({name: s.name, image: s.image, load: s.load, lastUsed: s.lastUsed, ttlMs: this.options.settingsFor(s.image).ttlMs, starting: s.state === 'starting', since: s.since}))
  }

  /** GC expired a cached pod: evicted when still idle and not starting (its deletion is counted under `code`). */
  expire(name: string, reason: string, code: GcCode): void {
    const slot = this.findSlot(name)
    if (!slot || slot.load > 0 || slot.state === 'starting') return
    slot.gcCode = code
    this.evict(slot, reason)
  }

  /** The cache's state, for tests, logs and `fnr pods ls`. */
  snapshot(): SlotSnapshot[] {
    return [...this.entries.values()].flatMap((e) =>
      e.slots.map((s) => ({name: s.name, image: s.image, state: s.state, load: s.load, lastUsed: s.lastUsed, templateVersion: s.templateVersion, address: s.address, ...(s.digest ? {digest: s.digest} : {}), timings: {...s.timings}})),
    )
  }

  /** Stops: pods starting are abandoned, channels closed; pods are kept for the next start to adopt. */
  close(): void {
    this.closed = true
    for (const entry of this.entries.values()) {
      for (const slot of entry.slots) {
        if (slot.state === 'starting') {
          slot.goneReason = 'the runner is shutting down'
          slot.abort.abort()
        }
        slot.client?.close()
      }
    }
    this.entries.clear()
  }
}

/** Reads the state afresh (TypeScript narrows it across awaits otherwise). */
function isGone(slot: PodSlot): boolean {
  return slot.state === 'gone'
}
