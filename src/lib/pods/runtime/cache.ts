/**
 * PodCache: the single owner of the pod runtime's per-image state: which pods (slots) an image
 * has, which one takes a call, when to start another, and when one goes.
 *
 * Node runs JavaScript on one thread, so every decision here is made in one synchronous step that
 * no other code can interleave with; the slow work (registry, API server, readiness, gRPC connect)
 * runs outside and comes back into the same synchronous methods. Upstream needs an event loop
 * goroutine and channels for that.
 *
 * Per image there is a list of pod slots. A call takes the live slot with the least load
 * (calls in flight or waiting), round-robin among ties. A new pod is started when the image has
 * none, or when the best slot's load has reached maxWaitlistLength and fewer than
 * maxParallelPods live slots exist (per-image overrides from --pod-cache-config); otherwise the
 * call queues on the best slot (as upstream: the waitlist length is a scale-up threshold, never
 * a rejection).
 *
 * Load accounting: a claim is taken synchronously with the load increment and released exactly
 * once, whatever happens (timeout while waiting for the pod, cancellation, failure, success), so
 * load never leaks (upstream leaks it on a timeout).
 *
 * Around it: starting a slot's pod (bring-up.ts, launcher.ts, connect.ts), retiring on digest and
 * template changes (retire.ts), the pod watch's reactions (pod-watch.ts), adoption and claims
 * (adoption.ts, claim.ts), the GC pass (collector.ts). What happens is emitted as typed events
 * (events.ts) that logs and metrics subscribe to (event-sinks.ts).
 */
import type {V1Pod} from '@kubernetes/client-node'

import type {ImagePodSettings} from '../../config/pod-cache-config.js'
import {FnrError, toFnrError} from '../../errors.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {WatchEventType} from '../../k8s/watch.js'
import type {CachedPodState, GcCode, OwnerState} from '../model/gc.js'
import {noLeaseView, type ObservedLease, type ReplicaView} from '../cluster/lease.js'
import type {PodManager} from '../cluster/manager.js'
import type {ImageMetadataSource} from '../cluster/image-metadata.js'
import {PodAdoption, type TakeOverResult} from './adoption.js'
import {PodClaim} from './claim.js'
import {PodConnector, type PodAddressMode} from './connect.js'
import {PodEvents} from '../model/events.js'
import {PodSlot, pickLeastLoaded, type SlotSnapshot} from '../model/slot.js'
import {PodCollector} from './collector.js'
import {bringUp, type BringUpHost} from './bring-up.js'
import {functionService, raceDeadline, type LaunchContext, type PreparePod} from '../cluster/launcher.js'
import {ANNOTATION_LAST_USED, ANNOTATION_TTL, labelValueFor, podNameFor} from '../model/naming.js'
import {reactToPodEvent} from './pod-watch.js'
import {retireOtherDigests, retireOtherTemplates} from './retire.js'
import type {Templates} from '../model/template.js'

export type {PodAddressMode} from './connect.js'

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
  /** Where the cache's events go (events.ts); default a stream of its own, which logs and metrics may subscribe to. */
  events?: PodEvents
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

export {PodSlot, pickLeastLoaded, type SlotSnapshot, type SlotTimings} from '../model/slot.js'

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
  private readonly bringUpHost: BringUpHost
  private readonly adoption: PodAdoption
  private readonly connector: PodConnector
  /** This cache's GC pass (collector.ts), run by PodGarbageCollector every --scan-interval. */
  readonly collector: PodCollector
  /** What happens to the pods (events.ts): logs and metrics subscribe. */
  readonly events: PodEvents

  constructor(private readonly options: PodCacheOptions) {
    this.logger = options.logger ?? silentLogger
    this.now = options.now ?? Date.now
    this.templates = options.templates
    this.ownerLabel = labelValueFor(options.owner)
    this.owner = options.owner
    this.manager = options.manager
    this.events = options.events ?? new PodEvents()
    this.connector = new PodConnector({addressMode: options.addressMode, namespace: options.manager.namespace, clusterDomain: options.clusterDomain, dnsServer: options.dnsServer, maxMessageSize: options.maxMessageSize})
    this.adoption = new PodAdoption(this)
    this.collector = new PodCollector(this, {manager: options.manager, logger: this.logger, orphanMinAgeMs: options.orphanMinAgeMs, foreignGraceMs: options.foreignGraceMs, replicas: options.replicas})
    const launch: LaunchContext = {
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
    this.bringUpHost = {
      launch,
      connector: this.connector,
      events: this.events,
      podReadyTimeoutMs: options.podReadyTimeoutMs,
      now: this.now,
      noteDigest: (image, digest, except) => this.noteDigest(image, digest, except),
      evict: (slot, reason) => this.evict(slot, reason),
    }
  }

  get currentTemplates(): Templates {
    return this.templates
  }

  /** Startup adoption is done. */
  get started(): boolean {
    return this.startupDone
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
      const why = best ? 'scale-up' : 'no-pod'
      const load = best?.load
      best = this.startSlot(entry, settings)
      this.events.emit({type: 'placed', image, pod: best.name, result: 'miss', why, live: live.length, ...(load !== undefined ? {load} : {})})
    } else this.events.emit({type: 'placed', image, pod: best.name, result: best.state === 'ready' ? 'hit' : 'starting', live: live.length, load: best.load})
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

  /** The image now resolves to `digest`: its pods made for another digest are retired (retire.ts). */
  noteDigest(image: string, digest: string, except?: PodSlot): void {
    retireOtherDigests(this, image, digest, except)
  }

  /** A copy of the slots of one image, or of every image. */
  slots(image?: string): PodSlot[] {
    if (image !== undefined) return [...(this.entries.get(image)?.slots ?? [])]
    return [...this.entries.values()].flatMap((e) => e.slots)
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
    slot.ready = bringUp(this.bringUpHost, slot, templates, settings)
    slot.ready.catch(() => {})
    return slot
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
    this.events.emit({type: 'evicted', image: slot.image, pod: slot.name, reason, load: slot.load})
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
      if (deleted && gcCode !== undefined) this.events.emit({type: 'collected', kind: 'pod', name: slot.name, code: gcCode})
    })
  }

  /** A call to the pod failed with Unavailable: the pod is treated as dead. */
  noteUnavailable(slot: PodSlot, reason: string): void {
    this.evict(slot, `call failed: ${reason}`)
  }

  /** Pod watch events (pod-watch.ts): evictions, pods another replica took, pods of `fnr pods warm`. */
  onPodEvent(type: WatchEventType, pod: V1Pod): void {
    reactToPodEvent(this, type, pod)
  }

  /** The slot of a pod, if the cache holds it (tests, `fnr pods ls`). */
  slotFor(name: string): PodSlot | undefined {
    for (const entry of this.entries.values()) for (const s of entry.slots) if (s.name === name) return s
    return undefined
  }

  /** New templates: pods made from other versions are replaced as they go idle (retire.ts). */
  setTemplates(templates: Templates): void {
    if (templates.version === this.templates.version) return
    this.events.emit({type: 'templates-changed', from: this.templates.version, to: templates.version, origin: templates.origin})
    this.templates = templates
    retireOtherTemplates(this, templates.version)
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
    this.connector.attach(slot, ip)
    slot.ready = Promise.resolve()
    entry.slots.push(slot)
    const service = functionService(this.templates, name, this.options.manager.namespace, this.ownerLabel)
    this.options.manager.ensureService(service, {deadline: now + this.options.podReadyTimeoutMs}).catch((err: unknown) => {
      this.logger.warn('adopted pod has no usable Service', {pod: name, error: (err as Error).message})
      if (this.connector.addressMode === 'service') this.evict(slot, 'its Service cannot be created')
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
    const slot = this.slotFor(name)
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
