/**
 * A call's claim on a pod slot (PodCache.acquire): the call counts as load on the slot until it
 * releases the claim, exactly once, whatever happens. (Not a Kubernetes Lease: those are the
 * replicas' Leases, lease.ts.)
 */
import {FnrError} from '../../errors.js'
import type {EvaluatorClient} from '../../grpc/client.js'
import type {PodSlot} from '../model/slot.js'

/** What a claim needs from the pod cache (PodCache). */
export interface SlotReleaser {
  releaseSlot(slot: PodSlot): void
}

/** A call's claim on a slot; release() exactly once (extra calls are no-ops). */
export class PodClaim {
  private released = false

  constructor(
    private readonly cache: SlotReleaser,
    readonly slot: PodSlot,
  ) {}

  get client(): EvaluatorClient {
    if (!this.slot.client) throw new FnrError('Unavailable', `function pod ${this.slot.name} has no connection`)
    return this.slot.client
  }

  /** False when the pod was evicted after the lease was taken. */
  get usable(): boolean {
    return (this.slot.state === 'ready' || this.slot.state === 'retiring') && this.slot.client !== undefined
  }

  release(): void {
    if (this.released) return
    this.released = true
    this.cache.releaseSlot(this.slot)
  }
}
