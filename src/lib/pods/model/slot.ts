/**
 * One pod of an image in the pod cache, from the decision to start it until it is gone, and the
 * placement rule that picks the slot for a call (least load, round-robin among ties).
 */
import type {EvaluatorClient} from '../../grpc/client.js'
import type {GcCode} from './gc.js'

export type SlotState = 'starting' | 'ready' | 'retiring' | 'gone'

export interface SlotTimings {
  /** Registry metadata (entrypoint). */
  metadataMs?: number
  /** Pod create call(s). */
  createMs?: number
  /** From created to Ready (the kubelet's part). */
  readyMs?: number
  /** gRPC channel connect. */
  connectMs?: number
  totalMs?: number
}

/** One pod of an image, from the decision to start it until it is gone. */
export class PodSlot {
  state: SlotState = 'starting'
  load = 0
  lastUsed: number
  readonly since: number
  client?: EvaluatorClient
  address?: string
  /** Resolves when ready; rejects with the reason it never became ready. */
  ready!: Promise<void>
  /** The pod's state while starting, for messages. */
  detail = 'starting'
  /** Set once the pod object exists in the API. */
  created = false
  timings: SlotTimings = {}
  annotatedAt = 0
  abort = new AbortController()
  /** Why it was evicted (for logs and retried calls). */
  goneReason?: string
  /** Another replica took the pod over: when the slot goes, the pod stays. */
  disowned = false
  /** The owner this replica adopted the pod from (watch events still showing it are older than the claim). */
  adoptedFrom?: string
  /** Set when the garbage collector evicted the slot: its deletion counts as a GC deletion with this code. */
  gcCode?: GcCode
  /** The image digest the pod was made for (fnr.dev/image-digest); undefined when unknown. */
  digest?: string
  /** Why the slot takes no new calls and is evicted once idle (state 'retiring'). */
  retireReason?: string

  constructor(
    readonly image: string,
    public name: string,
    readonly templateVersion: string,
    now: number,
  ) {
    this.lastUsed = now
    this.since = now
  }
}

export interface SlotSnapshot {
  name: string
  image: string
  state: SlotState
  load: number
  lastUsed: number
  templateVersion: string
  address?: string
  digest?: string
  timings: SlotTimings
}

/** Least load wins; among equals, the first at or after the round-robin index (upstream's findBestPod). */
export function pickLeastLoaded(entry: {rr: number}, live: readonly PodSlot[]): PodSlot | undefined {
  if (live.length === 0) return undefined
  let min = Infinity
  for (const s of live) min = Math.min(min, s.load)
  const n = live.length
  for (let i = 0; i < n; i++) {
    const idx = (entry.rr + i) % n
    if (live[idx]!.load === min) {
      entry.rr = (idx + 1) % n
      return live[idx]
    }
  }
  return undefined
}
