/**
 * One GC pass of a runner: lists fnr's pods and Services (and the replicas' Leases), plans with
 * gc.ts planGc (the one planner, also used by `fnr pods gc`) and applies the plan: expired cached
 * pods are evicted by the cache, uncached pods and orphan Services deleted, pods of `fnr pods
 * warm` and of replicas that are gone taken over (adoption.ts), and a gone replica's Lease deleted
 * once none of its pods is left. Deletions are counted under the plan's reason codes.
 */
import type {V1Pod, V1Service} from '@kubernetes/client-node'

import type {Logger} from '../../telemetry/log.js'
import type {TakeOverResult} from './adoption.js'
import type {PodEvents} from '../model/events.js'
import {observePod, observeService, planGc, type CachedPodState, type GcCode, type GcPlan, type OwnerState} from '../model/gc.js'
import type {ObservedLease, ReplicaView} from '../cluster/lease.js'
import type {PodManager} from '../cluster/manager.js'
import {LABEL_OWNER} from '../model/naming.js'

/** What a GC pass needs from the pod cache. */
export interface CollectorHost {
  readonly ownerLabel: string
  readonly events: PodEvents
  now(): number
  gcState(): CachedPodState[]
  slotFor(name: string): unknown
  expire(name: string, reason: string, code: GcCode): void
  takeOver(pod: V1Pod, state: OwnerState, why: string): Promise<TakeOverResult>
}

export interface CollectorOptions {
  manager: PodManager
  logger: Logger
  /** Minimum age of an orphan Service before it is deleted (default 60 s). */
  orphanMinAgeMs?: number
  /** How long past its TTL another runner's pod is left alone (default 10 min). */
  foreignGraceMs?: number
  /** Several replicas: what the others' Leases say (lease.ts); without it, every other owner is 'none'. */
  replicas?: {observe(): Promise<ReplicaView>; deleteLease(lease: ObservedLease): Promise<boolean>}
}

export class PodCollector {
  constructor(
    private readonly cache: CollectorHost,
    private readonly options: CollectorOptions,
  ) {}

  /** Plans over the given cluster state and applies the plan's deletions and expiries; returns it. */
  applyGc(pods: readonly V1Pod[], services: readonly V1Service[], observedAt: number, view?: ReplicaView): GcPlan {
    const {manager, logger} = this.options
    const plan = planGc({
      now: this.cache.now(),
      self: this.cache.ownerLabel,
      cached: this.cache.gcState(),
      pods: pods.map(observePod),
      services: services.map(observeService),
      observedAt,
      orphanMinAgeMs: this.options.orphanMinAgeMs,
      foreignGraceMs: this.options.foreignGraceMs,
      ownerState: view ? (owner) => view.stateOf(owner) : undefined,
    })
    for (const e of plan.expire) this.cache.expire(e.name, e.reason, e.code)
    for (const d of plan.deletePods) {
      if (this.cache.slotFor(d.name)) continue
      void manager.deletePodAndService(d.name, d.reason).then((deleted) => deleted && this.cache.events.emit({type: 'collected', kind: 'pod', name: d.name, code: d.code}))
    }
    for (const s of plan.deleteServices) {
      manager.deleteService(s.name).then(
        (deleted) => deleted && this.cache.events.emit({type: 'collected', kind: 'service', name: s.name, code: s.code}),
        (err: unknown) => logger.warn('cannot delete orphan Service', {service: s.name, error: (err as Error).message}),
      )
    }
    if (plan.expire.length + plan.deletePods.length + plan.deleteServices.length + plan.reclaim.length > 0) {
      logger.info('pod garbage collection', {expired: plan.expire.map((e) => e.name), deletedPods: plan.deletePods.map((d) => d.name), deletedServices: plan.deleteServices.map((s) => s.name), reclaim: plan.reclaim.map((r) => r.name)})
    }
    return plan
  }

  /**
   * Lists the cluster and applies one GC pass; then takes over the pods of `fnr pods warm` and of
   * replicas that are gone, and deletes those replicas' Leases once they have no pods left.
   */
  async collectGarbage(): Promise<GcPlan> {
    const {manager, logger, replicas} = this.options
    const self = this.cache.ownerLabel
    const observedAt = this.cache.now()
    const [pods, services] = await Promise.all([manager.listPods(), manager.listServices()])
    // Leases after pods: a replica creates its Lease before its first pod, so every pod listed
    // here has its owner's Lease in the list that follows.
    let view: ReplicaView | undefined
    if (replicas) {
      try {
        view = await replicas.observe()
      } catch (err) {
        logger.warn('cannot list replica leases; leaving other replicas\' pods alone in this pass', {error: (err as Error).message})
        view = {stateOf: (owner) => (owner === self ? 'self' : 'live'), leases: []}
      }
    }
    const plan = this.applyGc(pods, services, observedAt, view)
    const byName = new Map(pods.map((p) => [p.metadata?.name ?? '', p]))
    // Pods of `fnr pods warm`: the usable ones become this replica's (a claim with a
    // resourceVersion precondition: with several replicas exactly one gets each); the others stay.
    await Promise.all(plan.adopt.map((a) => this.cache.takeOver(byName.get(a.name)!, 'none', a.reason)))
    if (!view || !replicas) return plan
    const results = await Promise.all(plan.reclaim.map(async (r) => ({r, result: await this.cache.takeOver(byName.get(r.name)!, r.ownerState, r.reason)})))
    const reclaimed = new Set(results.filter((x) => x.result === 'adopted' || x.result === 'deleted').map((x) => x.r.name))
    // A gone replica's Lease goes once none of its pods is left (precondition: unchanged since listed).
    for (const lease of view.leases) {
      if (lease.owner === self || lease.state === 'live') continue
      const left = pods.some((p) => p.metadata?.labels?.[LABEL_OWNER] === lease.owner && !p.metadata?.deletionTimestamp && !reclaimed.has(p.metadata?.name ?? ''))
      if (left) continue
      await replicas.deleteLease(lease).then(
        (deleted) => deleted && logger.info('deleted the lease of a replica that is gone', {lease: lease.name, owner: lease.owner, state: lease.state}),
        (err: unknown) => logger.warn('cannot delete the lease of a replica that is gone', {lease: lease.name, error: (err as Error).message}),
      )
    }
    return plan
  }
}
