/**
 * Starting the pod of a new slot: the one launch path (launcher.ts: metadata, pod, Service,
 * readiness), then the connect step (connect.ts), within the pod-ready timeout and the slot's
 * abort signal. The outcome is an event (ready or failed); a pod that fails to start is evicted.
 */
import type {ImagePodSettings} from '../../config/pod-cache-config.js'
import {FnrError, toFnrError} from '../../errors.js'
import type {PodConnector} from './connect.js'
import type {PodEvents} from '../model/events.js'
import {launchPod, secondsText, type LaunchContext} from '../cluster/launcher.js'
import type {PodSlot} from '../model/slot.js'
import type {Templates} from '../model/template.js'

/** What starting a slot's pod needs from the pod cache. */
export interface BringUpHost {
  launch: LaunchContext
  connector: PodConnector
  events: PodEvents
  podReadyTimeoutMs: number
  now(): number
  /** The launch saw the image's current digest: pods of another one are retired. */
  noteDigest(image: string, digest: string, except: PodSlot): void
  evict(slot: PodSlot, reason: string): void
}

/** Launches the slot's pod (launcher.ts), then connects to it (connect.ts); the slot is ready after. */
export async function bringUp(host: BringUpHost, slot: PodSlot, templates: Templates, settings: ImagePodSettings): Promise<void> {
  const started = host.now()
  const deadline = started + host.podReadyTimeoutMs
  const deadlineName = `the pod-ready timeout (${secondsText(host.podReadyTimeoutMs)})`
  const signal = slot.abort.signal
  try {
    const launched = await launchPod(host.launch, slot.image, {
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
        host.noteDigest(slot.image, digest, slot)
      },
      onCreated: (name) => {
        slot.name = name
        slot.created = true
        slot.annotatedAt = host.now()
        host.events.emit({type: 'created', image: slot.image, pod: name})
      },
    })
    slot.timings = {...launched.timings}
    const t = host.now()
    slot.detail = 'connecting'
    await host.connector.connectLaunched(slot, launched.ip, {deadline, deadlineName, signal})
    slot.timings.connectMs = host.now() - t
    slot.timings.totalMs = host.now() - started
    if (isGone(slot)) throw new FnrError('Unavailable', `function pod ${slot.name} for image "${slot.image}" was evicted while starting (${slot.goneReason})`)
    if (slot.state === 'starting') slot.state = 'ready'
    slot.detail = 'ready'
    host.events.emit({type: 'ready', image: slot.image, pod: slot.name, address: slot.address!, timings: {...slot.timings}})
  } catch (err) {
    let e = toFnrError(err)
    // "Not found" from the registry or the API means something else here: the evaluator chain
    // must never see NotFound from the pod runtime (it means "not an exec function").
    if (e.kind === 'NotFound') e = new FnrError('FailedPrecondition', e.message, {cause: e, details: e.details})
    host.events.emit({type: 'failed', image: slot.image, pod: slot.name, error: e.message})
    host.evict(slot, `failed to start: ${e.message}`)
    throw e
  }
}

/** Reads the state afresh (TypeScript narrows it across awaits otherwise). */
function isGone(slot: PodSlot): boolean {
  return slot.state === 'gone'
}
