/**
 * What the pod cache does with the pod watch's events (PodManager.onPodChange): a slot whose pod
 * was deleted, failed, ended or crashed is evicted; a pod another replica took over is let go
 * without being deleted; a ready pod `fnr pods warm` made while this runner runs is adopted.
 */
import type {V1Pod} from '@kubernetes/client-node'

import type {WatchEventType} from '../../k8s/watch.js'
import type {TakeOverResult} from './adoption.js'
import type {OwnerState} from '../model/gc.js'
import {podReadiness} from '../cluster/manager.js'
import {ANNOTATION_IMAGE, LABEL_OWNER, WARM_OWNER} from '../model/naming.js'
import type {PodSlot} from '../model/slot.js'

/** What the reaction needs from the pod cache. */
export interface PodWatchHost {
  readonly ownerLabel: string
  readonly closed: boolean
  /** Startup adoption is done (it adopts the pods already there). */
  readonly started: boolean
  slotFor(name: string): PodSlot | undefined
  evict(slot: PodSlot, reason: string): void
  takeOver(pod: V1Pod, state: OwnerState, why: string): Promise<TakeOverResult>
}

export function reactToPodEvent(host: PodWatchHost, type: WatchEventType, pod: V1Pod): void {
  const name = pod.metadata?.name
  if (!name) return
  const slot = host.slotFor(name)
  if (!slot) {
    adoptWarmed(host, type, pod)
    return
  }
  if (slot.state === 'starting' || slot.state === 'gone') return
  if (type === 'DELETED') {
    host.evict(slot, 'the pod was deleted')
    return
  }
  const owner = pod.metadata?.labels?.[LABEL_OWNER]
  if (owner !== undefined && owner !== host.ownerLabel && owner !== slot.adoptedFrom && slot.created) {
    // Another replica took it over (this one's lease had expired): let it go, never delete it.
    slot.disowned = true
    host.evict(slot, `taken over by replica ${owner}`)
    return
  }
  const r = podReadiness(pod, slot.image)
  if (r.state === 'failed') host.evict(slot, r.detail)
}

/**
 * A pod `fnr pods warm` made while this runner runs: adopted once ready (after startup, which
 * adopts the ones already there), without waiting for the next GC scan.
 */
function adoptWarmed(host: PodWatchHost, type: WatchEventType, pod: V1Pod): void {
  if (type === 'DELETED' || !host.started || host.closed) return
  if (pod.metadata?.labels?.[LABEL_OWNER] !== WARM_OWNER || pod.metadata?.deletionTimestamp) return
  const image = pod.metadata?.annotations?.[ANNOTATION_IMAGE]
  if (image && podReadiness(pod, image).state === 'ready') void host.takeOver(pod, 'none', 'warmed by fnr pods warm')
}
