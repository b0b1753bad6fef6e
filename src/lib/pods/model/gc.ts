/**
 * Garbage collection of function pods: the rules as a pure function (planGc) and the loop that
 * applies them every --scan-interval (PodGarbageCollector). `fnr pods gc` applies planGc with an
 * empty cache (admin/admin.ts, admin/gc.ts).
 *
 * The rules:
 *   - a cached pod is expired when it has no calls in flight and was last used more than its TTL
 *     ago (the TTL runs from the end of the last call), or when its pod failed, ended or vanished;
 *     a pod with calls in flight is never touched;
 *   - a pod that is not fnr's (no app.kubernetes.io/managed-by=fnr + fn.kpt.dev/image labels) is
 *     never touched;
 *   - an fnr pod that no cache entry owns is deleted when it failed or ended, when it is this
 *     runner's own (an orphan, e.g. left by a crash mid-creation), or, for another runner's pod,
 *     only when its last-used annotation says it expired more than `foreignGraceMs` ago;
 *   - an fnr Service whose pod is neither cached nor present is deleted once it is older than
 *     `orphanMinAgeMs` (a pod and its Service are created one after the other).
 *
 * With several replicas (lease.ts), `ownerState` says what became of another pod's owner:
 *   - live (its Lease is renewed): its pods and Services are never touched, whatever their state;
 *   - expired or released: its pods are listed in `reclaim` (the caller takes the usable ones
 *     over and deletes the rest, with resourceVersion preconditions so that exactly one replica
 *     does it), its failed or ended pods are deleted, its Services follow the orphan rule;
 *   - none (no Lease: a lone runner, or an fnr without leases): the rules above.
 *
 * Pods made by `fnr pods warm` (owner WARM_OWNER, which no runner has and which holds no Lease)
 * are listed in `adopt` unless they failed or are past TTL + grace: the caller takes the usable
 * ones over (ready, current template version, within the image's pod limit) with the same
 * resourceVersion-precondition claim as `reclaim`, so with several replicas exactly one adopts
 * each; the others are left to the rules above.
 */
import type {V1Pod, V1Service} from '@kubernetes/client-node'

import {ANNOTATION_IMAGE, ANNOTATION_LAST_USED, ANNOTATION_TTL, LABEL_FN_IMAGE, LABEL_MANAGED_BY, LABEL_OWNER, LABEL_POD, MANAGED_BY_FNR, WARM_OWNER} from './naming.js'

export interface CachedPodState {
  name: string
  image: string
  /** Calls in flight or waiting for this pod. */
  load: number
  /** ms since the epoch */
  lastUsed: number
  ttlMs: number
  /** Still being created (never collected here: creation has its own timeout). */
  starting: boolean
  /** When the cache first held it (ms since the epoch). */
  since: number
}

export interface ObservedPod {
  name: string
  managed: boolean
  deleting: boolean
  phase?: string
  owner?: string
  image?: string
  lastUsed?: number
  ttlMs?: number
  created?: number
}

export interface ObservedService {
  name: string
  managed: boolean
  deleting: boolean
  owner?: string
  /** The pod it fronts (label fnr.dev/pod). */
  pod?: string
  created?: number
}

export interface GcInput {
  now: number
  /** This runner's owner label value. */
  self: string
  cached: readonly CachedPodState[]
  pods: readonly ObservedPod[]
  services: readonly ObservedService[]
  /** When the pod and Service lists were requested (ms since the epoch). */
  observedAt: number
  /** Default 60 s. */
  orphanMinAgeMs?: number
  /** Default 10 min. */
  foreignGraceMs?: number
  /** What became of another pod's owner (lease.ts); default: 'none' for every other owner. */
  ownerState?: (owner: string | undefined) => OwnerState
}

/**
 * What became of a pod's owner, as this runner sees it: itself, another replica whose Lease is
 * live, expired or released (cluster/lease.ts reads the Leases), or none (no Lease).
 */
export type OwnerState = 'self' | 'live' | 'expired' | 'released' | 'none'

/** Why GC acts, as a code (the metric label) beside the text (logs, `fnr pods gc` output). */
export type GcCode = 'ttl' | 'gone' | 'ended' | 'foreign-expired' | 'orphan' | 'pod-gone' | 'replica-gone' | 'startup' | 'warmed'

export interface GcAction {
  name: string
  code: GcCode
  reason: string
}

export interface GcPlan {
  /** Cached pods to drop from the cache and delete (with their Services). */
  expire: Array<GcAction & {image: string}>
  /** Uncached pods to delete (with their Services). */
  deletePods: GcAction[]
  /** Services without a pod. */
  deleteServices: GcAction[]
  /** Uncached pods of replicas that are gone (lease expired or released): take over or delete. */
  reclaim: Array<GcAction & {owner: string; ownerState: 'expired' | 'released'}>
  /** Uncached pods made by `fnr pods warm`: take the usable ones over (leave the rest). */
  adopt: GcAction[]
}

function parseTime(text: string | undefined): number | undefined {
  if (!text) return undefined
  const ms = Date.parse(text)
  return Number.isFinite(ms) ? ms : undefined
}

export function observePod(pod: V1Pod): ObservedPod {
  const labels = pod.metadata?.labels ?? {}
  const annotations = pod.metadata?.annotations ?? {}
  const ttlSeconds = Number(annotations[ANNOTATION_TTL])
  return {
    name: pod.metadata?.name ?? '',
    managed: labels[LABEL_MANAGED_BY] === MANAGED_BY_FNR && LABEL_FN_IMAGE in labels,
    deleting: !!pod.metadata?.deletionTimestamp,
    phase: pod.status?.phase,
    owner: labels[LABEL_OWNER],
    image: annotations[ANNOTATION_IMAGE],
    lastUsed: parseTime(annotations[ANNOTATION_LAST_USED]),
    ttlMs: Number.isFinite(ttlSeconds) && ttlSeconds > 0 ? ttlSeconds * 1000 : undefined,
    created: parseTime(pod.metadata?.creationTimestamp as unknown as string | undefined) ?? toMs(pod.metadata?.creationTimestamp),
  }
}

export function observeService(svc: V1Service): ObservedService {
  const labels = svc.metadata?.labels ?? {}
  return {
    name: svc.metadata?.name ?? '',
    managed: labels[LABEL_MANAGED_BY] === MANAGED_BY_FNR && LABEL_POD in labels,
    deleting: !!svc.metadata?.deletionTimestamp,
    owner: labels[LABEL_OWNER],
    pod: labels[LABEL_POD],
    created: parseTime(svc.metadata?.creationTimestamp as unknown as string | undefined) ?? toMs(svc.metadata?.creationTimestamp),
  }
}

function toMs(value: unknown): number | undefined {
  return value instanceof Date ? value.getTime() : undefined
}

export function planGc(input: GcInput): GcPlan {
  const plan: GcPlan = {expire: [], deletePods: [], deleteServices: [], reclaim: [], adopt: []}
  const stateOf = (owner: string | undefined): OwnerState => (owner === input.self ? 'self' : input.ownerState?.(owner) ?? 'none')
  const orphanMinAge = input.orphanMinAgeMs ?? 60_000
  const foreignGrace = input.foreignGraceMs ?? 600_000
  const podsByName = new Map(input.pods.map((p) => [p.name, p]))
  const cachedNames = new Set(input.cached.map((c) => c.name))

  for (const c of input.cached) {
    if (c.starting || c.load > 0) continue
    const observed = podsByName.get(c.name)
    if (input.now - c.lastUsed >= c.ttlMs) plan.expire.push({name: c.name, image: c.image, code: 'ttl', reason: 'idle for longer than its TTL'})
    else if (!observed && c.since < input.observedAt) plan.expire.push({name: c.name, image: c.image, code: 'gone', reason: 'the pod no longer exists'})
    else if (observed?.phase === 'Failed' || observed?.phase === 'Succeeded') plan.expire.push({name: c.name, image: c.image, code: 'ended', reason: `the pod is ${observed.phase}`})
  }

  for (const p of input.pods) {
    if (!p.managed || p.deleting || cachedNames.has(p.name)) continue
    const owner = stateOf(p.owner)
    if (owner === 'live') continue // another live replica's: never touched
    if (p.phase === 'Failed' || p.phase === 'Succeeded') plan.deletePods.push({name: p.name, code: 'ended', reason: `the pod is ${p.phase}`})
    else if (owner === 'expired' || owner === 'released') {
      plan.reclaim.push({name: p.name, owner: p.owner ?? '', ownerState: owner, code: 'replica-gone', reason: `its runner ${p.owner ?? '(unknown)'} is gone (lease ${owner})`})
    } else if (p.owner === input.self) plan.deletePods.push({name: p.name, code: 'orphan', reason: 'orphan: no cache entry owns it'})
    else {
      const lastUsed = p.lastUsed ?? p.created
      if (lastUsed !== undefined && p.ttlMs !== undefined && input.now - lastUsed >= p.ttlMs + foreignGrace) {
        plan.deletePods.push({name: p.name, code: 'foreign-expired', reason: `expired pod of runner ${p.owner ?? '(unknown)'}`})
      } else if (p.owner === WARM_OWNER) plan.adopt.push({name: p.name, code: 'warmed', reason: 'warmed by fnr pods warm'})
    }
  }

  const deletedPods = new Set(plan.deletePods.map((d) => d.name))
  for (const s of input.services) {
    if (!s.managed || s.deleting || !s.pod) continue
    if (cachedNames.has(s.pod)) continue
    if (stateOf(s.owner) === 'live') continue // another live replica's: never touched
    const pod = podsByName.get(s.pod)
    if (pod && !deletedPods.has(s.pod)) continue
    if (deletedPods.has(s.pod)) continue // deleted together with its pod
    if (s.created !== undefined && input.now - s.created < orphanMinAge) continue
    plan.deleteServices.push({name: s.name, code: 'pod-gone', reason: 'orphan: its pod is gone'})
  }
  return plan
}
