/**
 * Adoption: taking function pods over into the pod cache (PodCache) as ready slots, at startup
 * (this replica's own pods, those of replicas that are gone, and of a lone runner before this
 * one), from the pod watch and GC (pods of `fnr pods warm`) and from GC (pods of replicas whose
 * Lease expired). A pod is claimed with a resourceVersion precondition, so with several replicas
 * exactly one takes each; pods it cannot use are deleted (another owner's only if unchanged).
 */
import type {V1Pod} from '@kubernetes/client-node'

import type {ImagePodSettings} from '../../config/pod-cache-config.js'
import {apiStatusCode} from '../../k8s/errors.js'
import type {Logger} from '../../telemetry/log.js'
import type {PodSlot} from '../model/slot.js'
import type {PodEvents} from '../model/events.js'
import {observePod, type OwnerState} from '../model/gc.js'
import {noLeaseView, type ReplicaView} from '../cluster/lease.js'
import {podReadiness, type PodManager} from '../cluster/manager.js'
import {ANNOTATION_CLAIMED_AT, ANNOTATION_IMAGE, ANNOTATION_OWNER, ANNOTATION_TEMPLATE_VERSION, LABEL_OWNER} from '../model/naming.js'
import {ANNOTATION_IMAGE_DIGEST, type Templates} from '../model/template.js'

/** What adoption needs from the pod cache. */
export interface AdoptionHost {
  readonly manager: PodManager
  readonly owner: string
  readonly ownerLabel: string
  readonly logger: Logger
  readonly events: PodEvents
  readonly closed: boolean
  readonly currentTemplates: Templates
  now(): number
  settingsFor(image: string): ImagePodSettings
  slotFor(name: string): PodSlot | undefined
  /** Slots of the image that take new calls. */
  liveCount(image: string): number
  /** A ready slot for a pod taken over (and its Service made sure of). */
  addAdoptedSlot(name: string, image: string, ip: string, lastUsed: number | undefined): PodSlot
}

export type TakeOverResult = 'adopted' | 'deleted' | 'lost' | 'skipped'

export class PodAdoption {
  /** Claims of pods in flight per image (counted against the image's pod limit). */
  private readonly claiming = new Map<string, number>()
  /**
   * Pods a takeOver is working on (one at a time per pod), with its outcome: a second takeOver of
   * the same pod waits for it. Startup adoption skipping a pod the pod watch was claiming resolved
   * `started` before the slot existed, and a call just after could start a second pod.
   */
  private readonly takingOver = new Map<string, Promise<TakeOverResult>>()

  constructor(private readonly host: AdoptionHost) {}

  /**
   * Startup: takes over fnr's pods that are ready and made from the current template version
   * (up to each image's pod limit) among this replica's own pods and those of owners that are
   * gone (lease released) or hold no lease (a lone runner before this one), and deletes the
   * others of this replica and of gone owners. Pods of live replicas are left alone. One pod's
   * problem never stops the rest.
   */
  async adopt(pods: readonly V1Pod[], view: ReplicaView = noLeaseView(this.host.ownerLabel)): Promise<{adopted: string[]; deleted: string[]}> {
    const adopted: string[] = []
    const deleted: string[] = []
    await Promise.all(
      pods.map(async (pod) => {
        const observed = observePod(pod)
        if (!observed.managed || observed.deleting) return
        const state = view.stateOf(observed.owner)
        if (state === 'live') return
        const result = await this.takeOver(pod, state, 'found at startup')
        if (result === 'adopted') adopted.push(observed.name)
        else if (result === 'deleted') deleted.push(observed.name)
      }),
    )
    return {adopted: adopted.sort(), deleted: deleted.sort()}
  }

  /** Why a pod cannot serve as one of this cache's slots, or undefined when it can. */
  private unusable(pod: V1Pod): {reason?: string; image?: string; ip?: string} {
    const observed = observePod(pod)
    const image = observed.image
    const version = pod.metadata?.annotations?.[ANNOTATION_TEMPLATE_VERSION]
    if (!image) return {reason: `it has no ${ANNOTATION_IMAGE} annotation`}
    if (version !== this.host.currentTemplates.version) return {reason: `its template version ${version ?? '(none)'} is not the current ${this.host.currentTemplates.version}`}
    const r = podReadiness(pod, image)
    if (r.state !== 'ready') return {reason: `it is not ready (${r.detail})`}
    if (this.host.liveCount(image) + (this.claiming.get(image) ?? 0) >= this.host.settingsFor(image).maxParallelPods) return {reason: 'the image already has its maximum number of pods'}
    return {image, ip: r.ip}
  }

  /**
   * Takes one uncached pod over (own, or of an owner that is gone): a usable pod becomes a slot
   * after a claim patch with the pod's resourceVersion as precondition (a 409 means another
   * replica got it first); an unusable one is deleted (another owner's only if unchanged since
   * it was observed). Never throws.
   */
  async takeOver(pod: V1Pod, state: OwnerState, why: string): Promise<TakeOverResult> {
    const name = pod.metadata?.name
    if (!name || this.host.closed || this.host.slotFor(name)) return 'skipped'
    const inFlight = this.takingOver.get(name)
    if (inFlight) return inFlight
    const outcome = this.takeOverOnce(pod, name, state, why).finally(() => this.takingOver.delete(name))
    this.takingOver.set(name, outcome)
    return outcome
  }

  private async takeOverOnce(pod: V1Pod, name: string, state: OwnerState, why: string): Promise<TakeOverResult> {
    const observed = observePod(pod)
    try {
      const {reason, image, ip} = this.unusable(pod)
      if (reason !== undefined || !image || !ip) return await this.dropUnusable(pod, state, why, reason ?? 'unusable')
      if (!(await this.claimCounted(pod, name, image, observed.owner))) return 'lost'
      // Now this replica's (even if a call started another pod of the image meanwhile: the pod
      // may still have calls in flight from its previous owner, so it is never deleted here).
      if (this.host.closed || this.host.slotFor(name)) return 'skipped'
      const slot = this.host.addAdoptedSlot(name, image, ip, observed.lastUsed)
      slot.digest = pod.metadata?.annotations?.[ANNOTATION_IMAGE_DIGEST] || undefined
      if (observed.owner !== this.host.ownerLabel) slot.adoptedFrom = observed.owner
      this.host.events.emit({type: 'adopted', image, pod: name, ...(observed.owner !== undefined ? {owner: observed.owner} : {}), ownerState: state, why})
      return 'adopted'
    } catch (err) {
      this.host.logger.warn('cannot adopt a function pod', {pod: name, error: (err as Error).message})
      return 'skipped'
    }
  }

  /**
   * A pod this replica cannot use: its own is deleted, a gone owner's only if unchanged since it
   * was observed; a lone runner's (no Lease: it may be alive) is left to the lone-runner GC rule
   * (well past its TTL).
   */
  private async dropUnusable(pod: V1Pod, state: OwnerState, why: string, reason: string): Promise<TakeOverResult> {
    const {manager} = this.host
    const {name, owner} = observePod(pod)
    if (state === 'none') return 'skipped'
    this.host.logger.info(`deleting a function pod ${why}`, {pod: name, owner, reason})
    if (state === 'self') {
      void manager.deletePodAndService(name, `${why}: ${reason}`).then((deleted) => deleted && this.host.events.emit({type: 'collected', kind: 'pod', name, code: 'startup'}))
      return 'deleted'
    }
    if (!(await manager.deletePodIfUnchanged(name, pod.metadata?.resourceVersion ?? ''))) {
      this.host.logger.info('another replica took the function pod first', {pod: name, owner})
      return 'lost'
    }
    this.host.events.emit({type: 'collected', kind: 'pod', name, code: 'replica-gone'})
    await manager.deleteService(name).catch(() => {})
    this.host.logger.info('deleted a function pod of a replica that is gone', {pod: name, owner, ownerState: state, reason})
    return 'deleted'
  }

  /**
   * claim(), counted against the image's pod limit while in flight, so that claims made in
   * parallel never take more pods than the limit.
   */
  private async claimCounted(pod: V1Pod, name: string, image: string, owner: string | undefined): Promise<boolean> {
    this.claiming.set(image, (this.claiming.get(image) ?? 0) + 1)
    try {
      return await this.claim(pod, name, owner)
    } finally {
      const left = (this.claiming.get(image) ?? 1) - 1
      if (left > 0) this.claiming.set(image, left)
      else this.claiming.delete(image)
    }
  }

  /**
   * Makes the pod this replica's with a patch under a resourceVersion precondition. False when
   * another replica was first; true when claimed, or when the API failed and the outcome is
   * unknown (the pod is used: a replica that did take it is seen through the pod watch, which
   * lets it go then).
   */
  private async claim(pod: V1Pod, name: string, owner: string | undefined): Promise<boolean> {
    const {manager} = this.host
    const claimedAt = new Date(this.host.now()).toISOString()
    let resourceVersion = pod.metadata?.resourceVersion
    for (let attempt = 0; ; attempt++) {
      try {
        await manager.patchPodMetadata(name, {labels: {[LABEL_OWNER]: this.host.ownerLabel}, annotations: {[ANNOTATION_OWNER]: this.host.owner, [ANNOTATION_CLAIMED_AT]: claimedAt}}, {resourceVersion})
        return true
      } catch (err) {
        const code = apiStatusCode(err)
        // The pod changed since it was listed (e.g. a status update): claim it again if it still
        // has the owner it had and is not being deleted; else another replica was first.
        const fresh = code === 409 && attempt < 2 ? await manager.readPod(name) : undefined
        if (fresh && !fresh.metadata?.deletionTimestamp && fresh.metadata?.labels?.[LABEL_OWNER] === owner) {
          resourceVersion = fresh.metadata?.resourceVersion
          continue
        }
        if (code === 409 || code === 404) {
          this.host.logger.info('another replica took the function pod first', {pod: name, owner})
          return false
        }
        this.host.logger.warn('cannot take ownership of a function pod; using it anyway', {pod: name, error: (err as Error).message})
        return true
      }
    }
  }
}
