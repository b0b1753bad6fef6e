/**
 * Retiring pods whose content is no longer what a new pod would run: the image's tag now resolves
 * to another digest, or the templates changed. A retired pod takes no new calls and is evicted
 * once idle (at once when idle now; a pod still starting is retired once ready).
 */
import type {PodEvents} from '../model/events.js'
import type {PodSlot} from '../model/slot.js'

export type RetireCause = {kind: 'digest'; from: string; to: string} | {kind: 'template'}

/** What retiring needs from the pod cache. */
export interface RetireHost {
  readonly events: PodEvents
  /** The slots of one image, or of every image. */
  slots(image?: string): PodSlot[]
  evict(slot: PodSlot, reason: string): void
}

export function retire(host: RetireHost, slot: PodSlot, reason: string, cause: RetireCause): void {
  if (slot.state === 'starting') {
    slot.retireReason = reason
    slot.ready.then(() => slot.state === 'ready' && retire(host, slot, reason, cause), () => {})
    return
  }
  if (slot.state !== 'ready') return
  slot.retireReason = reason
  host.events.emit({type: 'retired', image: slot.image, pod: slot.name, reason, cause})
  if (slot.load === 0) host.evict(slot, reason)
  else slot.state = 'retiring'
}

/**
 * The image now resolves to `digest`: its pods made for another digest are retired, so new calls
 * start pods of the new content. Pods whose digest is unknown (made by an older fnr) are left
 * alone; the response cache never stores their responses.
 */
export function retireOtherDigests(host: RetireHost, image: string, digest: string, except?: PodSlot): void {
  for (const slot of host.slots(image)) {
    if (slot === except || slot.digest === undefined || slot.digest === digest) continue
    retire(host, slot, `the image now resolves to ${digest}, not ${slot.digest}`, {kind: 'digest', from: slot.digest, to: digest})
  }
}

/** New templates: pods made from other versions are replaced as they go idle (new pods start on demand). */
export function retireOtherTemplates(host: RetireHost, version: string): void {
  for (const slot of host.slots()) {
    if (slot.templateVersion !== version) retire(host, slot, slot.retireReason ?? 'replaced by a new template version', {kind: 'template'})
  }
}
