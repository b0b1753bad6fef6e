/**
 * The pod runtime's typed events: what happened to a function pod, emitted by the runtime
 * (PodCache, adoption, the GC pass) as it happens. Logs and metrics subscribe (event-sinks.ts);
 * tests assert events instead of log text. Listeners run synchronously, in the order they
 * subscribed; one that throws is isolated (the others and the runtime go on).
 */
import type {PodCacheResult} from '../../telemetry/metrics.js'
import type {GcCode, OwnerState} from './gc.js'
import type {SlotTimings} from './slot.js'

export type PodEvent =
  /** A call was placed on a pod: an existing ready one (hit), one still starting, or a new one (miss: none, or scale-up). */
  | {type: 'placed'; image: string; pod: string; result: PodCacheResult; why?: 'no-pod' | 'scale-up'; live: number; load?: number}
  /** The pod object exists in the API. */
  | {type: 'created'; image: string; pod: string}
  /** A new pod is ready and connected. */
  | {type: 'ready'; image: string; pod: string; address: string; timings: SlotTimings}
  /** A new pod did not become ready (the error the call gets). */
  | {type: 'failed'; image: string; pod: string; error: string}
  /** An existing pod became one of this runner's (startup, `fnr pods warm`, a gone replica's). */
  | {type: 'adopted'; image: string; pod: string; owner?: string; ownerState: OwnerState; why: string}
  /** A pod takes no new calls and goes once idle: its image now resolves to another digest, or the template changed. */
  | {type: 'retired'; image: string; pod: string; reason: string; cause: {kind: 'digest'; from: string; to: string} | {kind: 'template'}}
  /** The templates new pods are made from changed. */
  | {type: 'templates-changed'; from: string; to: string; origin: string}
  /** A pod was taken out of service (its deletion follows unless another replica owns it now). */
  | {type: 'evicted'; image: string; pod: string; reason: string; load: number}
  /** Garbage collection (or a takeover) deleted a pod or Service, for this reason code. */
  | {type: 'collected'; kind: 'pod' | 'service'; name: string; code: GcCode}

export type PodEventListener = (event: PodEvent) => void

/** The runtime's event stream: emit() calls every listener; on() returns the unsubscribe. */
export class PodEvents {
  private readonly listeners = new Set<PodEventListener>()

  on(listener: PodEventListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  emit(event: PodEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event)
      } catch {
        // A subscriber's failure (a log sink, a metric) never changes what the runtime does.
      }
    }
  }
}
