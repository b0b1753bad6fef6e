/**
 * What the operator commands (`fnr pods ls|gc`) do, on the same code as `fnr serve`'s pod
 * runtime: PodManager for the API calls, observePod/observeService for "is this fnr's and what
 * state is it in", planGc for the GC rules. The whole `fnr pods gc` flow (templates, listing,
 * Leases, plan, deletions, summary) is in admin/gc.ts; `fnr pods warm` is in admin/warm.ts.
 *
 * GC from outside the runner: there is no pod cache and no view of the calls in flight, so every
 * fnr pod is judged by its labels and annotations the way the runner judges another runner's
 * pods (gc.ts), except that the operator asked for it, so there is no extra grace: a pod is
 * collected when it failed or ended, or when its last use (fnr.dev/last-used) is older than its
 * TTL (fnr.dev/ttl-seconds) or than --older-than. The runner writes fnr.dev/last-used when a call
 * takes a pod and, while calls are in flight on it, again at its GC passes (every
 * --scan-interval), each time at most once per TTL/10 (5 s to 5 min; cache.ts): a busy pod's
 * annotation is at most that interval plus --scan-interval old.
 *
 * Every pod is deleted with a resourceVersion precondition (the pod as listed): a pod that
 * changed since it was listed (its runner refreshed its last use because a call took it, a
 * replica took it over, its state changed) is left alone and reported as such.
 *
 * Stale templates: given the runner's current template version (admin/templates.ts), a pod
 * made from another version is collected too (the runner replaces such pods as they go idle and
 * deletes them at startup), but only once its last use is older than a grace period (default
 * 10 min, gc.ts's grace for another runner's pods), since from outside "idle" can only be read
 * from that annotation.
 *
 * Replicas (lease.ts): the replica Leases of the namespace are read once, after the pods (a
 * replica creates its Lease before its first pod, so every pod listed has its owner's Lease in
 * the list that follows), and judged from outside (judgeLeasesAt). Pods of a live replica are
 * deleted only when they failed or ended: idle ones are left to that replica, whose own GC sees
 * its calls in flight (their TTL, --older-than, the stale-template rule and --all do not apply
 * to them; stop the replica first, which releases its Lease, or add --include-live-replicas to
 * --all). Pods of a replica whose Lease expired or was released are deleted like orphans,
 * whatever their state. Owners without a Lease (a runner with --replica-lease-duration=0,
 * `fnr pods warm`) keep the rules above. When the Leases cannot be read, every owner counts as
 * live.
 */
import type {V1Pod, V1Service} from '@kubernetes/client-node'

import {FnrError} from '../../errors.js'
import {connectKube, type KubeClients, type KubeConnectOptions} from '../../k8s/client.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import {observePod, observeService, planGc, type OwnerState} from '../model/gc.js'
import {judgeLeasesAt, listReplicaLeases} from '../cluster/lease.js'
import {PodManager, podReadiness} from '../cluster/manager.js'
import {ANNOTATION_TEMPLATE_VERSION} from '../model/naming.js'
import type {Templates} from '../model/template.js'
import {runnerTemplates, type RunnerTemplateOptions} from './templates.js'

export interface AdminOptions {
  namespace: string
  kube?: KubeConnectOptions
  logger?: Logger
}

/** One function pod as `fnr pods ls` shows it (the --json schema). */
export interface FunctionPodInfo {
  pod: string
  /** The Service fronting it, when there is one. */
  service: string | null
  image: string | null
  phase: string
  ready: boolean
  /** ready, starting, failed or deleting, with the detail the runner would report. */
  state: 'ready' | 'starting' | 'failed' | 'deleting'
  detail: string
  created: string | null
  ageSeconds: number | null
  lastUsed: string | null
  ttlSeconds: number | null
  /** Seconds until the TTL runs out (negative: expired), from the last use. */
  ttlLeftSeconds: number | null
  templateVersion: string | null
  owner: string | null
  /** What the owner's replica Lease says: live, expired, released, none (no Lease); null when the Leases cannot be read. */
  ownerLease: 'live' | 'expired' | 'released' | 'none' | null
  podIP: string | null
}

export interface GcOptions {
  /** Delete every fnr pod and Service, whatever its state (a live replica's only when failed or ended, unless includeLive). */
  all?: boolean
  /** With all: also the pods and Services of live replicas (their calls in flight fail; they make new pods on demand). */
  includeLive?: boolean
  /** Treat pods idle (or, without a last use, existing) longer than this as expired, whatever their TTL. */
  olderThanMs?: number
  /** An fnr Service without a pod is deleted once older than this (default 60 s; 0 with --all). */
  orphanMinAgeMs?: number
  /**
   * The runner's current template version (admin/templates.ts). When set, a pod made from
   * another version is collected once idle for staleGraceMs (the stale-template rule).
   */
  currentTemplateVersion?: string
  /** How long a pod of another template version must have been idle (default 10 min, gc.ts's grace for another runner's pods). */
  staleGraceMs?: number
  now?: number
  /** What became of each owner (replica Leases); default 'none' for every owner. */
  ownerState?: (owner: string | undefined) => OwnerState
}

/** The owners' Lease states as the CLI sees them, or why they cannot be read. */
export interface LeaseStates {
  stateOf: (owner: string | undefined) => OwnerState
  /** Set when the Leases could not be read (then every owner counts as live). */
  error?: string
}

/** Template versions that only a runner reading FunctionConfigs can compute (template-porch.ts, runtime.ts overlays). */
const FUNCTION_CONFIG_VERSION = /^porch-|-fc[0-9a-f]+$/

/** Default of --stale-grace: the grace gc.ts gives another runner's pods. */
export const DEFAULT_STALE_GRACE_MS = 600_000

export interface GcItem {
  kind: 'pod' | 'service'
  name: string
  reason: string
  /** For pods: their image, if known. */
  image?: string
}

export interface GcItemResult extends GcItem {
  deleted: boolean
  /** Left alone: the pod changed since it was listed, or is gone (see CHANGED_SINCE_LISTED). */
  skipped: boolean
  /** Why the deletion failed. */
  error?: string
}

/** Why a planned pod was left alone (its deletion precondition failed). */
export const CHANGED_SINCE_LISTED = 'it changed since it was listed (a call took it, a replica took it over, or it went away)'

/** The pods and Services as listed for one GC plan. */
export interface GcListing {
  pods: V1Pod[]
  services: V1Service[]
  /** When the lists were requested (ms since the epoch). */
  observedAt: number
}

/** What to do when no Kubernetes configuration is found (client.ts). */
export const OPERATOR_CONFIG_HINT = 'pass --kubeconfig FILE or set KUBECONFIG (inside a cluster, the pod\'s service account is used)'

/** An owner value no runner has (label values cannot contain spaces). */
const NOBODY = 'fnr pods gc'

function iso(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString()
}

export class PodAdmin {
  /** The pods planned for deletion: their resourceVersion when listed (the deletion precondition). */
  private readonly listedVersions = new Map<string, string>()

  private constructor(
    readonly clients: KubeClients,
    readonly manager: PodManager,
    readonly namespace: string,
  ) {}

  static async connect(options: AdminOptions): Promise<PodAdmin> {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(options.namespace) || options.namespace.length > 63) {
      throw new FnrError('Usage', `--namespace ${JSON.stringify(options.namespace)} is not a valid namespace name`)
    }
    const clients = await connectKube({missingConfigHint: OPERATOR_CONFIG_HINT, ...options.kube})
    const manager = new PodManager({...clients, namespace: options.namespace, logger: options.logger ?? silentLogger})
    return new PodAdmin(clients, manager, options.namespace)
  }

  /** Reads the replica Leases of the namespace (after the pods: a replica creates its Lease before its first pod). */
  async leaseStates(now = Date.now()): Promise<LeaseStates> {
    try {
      const states = judgeLeasesAt(await listReplicaLeases(this.clients.k8s, this.clients.kubeConfig, this.namespace), now)
      return {stateOf: (owner) => (owner === undefined ? 'none' : states.get(owner) ?? 'none')}
    } catch (err) {
      return {stateOf: () => 'live', error: (err as Error).message.split('\n', 1)[0]}
    }
  }

  /** Every pod fnr manages in the namespace (optionally of one image), oldest first. */
  async list(filter: {image?: string; now?: number} = {}): Promise<FunctionPodInfo[]> {
    const now = filter.now ?? Date.now()
    const {pods, services} = await this.listForGc()
    const leases = await this.leaseStates(now)
    const serviceOf = new Map<string, string>()
    for (const s of services.map(observeService)) if (s.managed && s.pod && !s.deleting) serviceOf.set(s.pod, s.name)
    const infos: FunctionPodInfo[] = []
    for (const pod of pods) {
      const o = observePod(pod)
      if (!o.managed) continue
      if (filter.image !== undefined && o.image !== filter.image) continue
      infos.push(describePod(pod, serviceOf.get(o.name) ?? null, now, leases.error ? null : (leases.stateOf(o.owner) as FunctionPodInfo['ownerLease'])))
    }
    infos.sort((a, b) => (a.created ?? '').localeCompare(b.created ?? '') || a.pod.localeCompare(b.pod))
    return infos
  }

  /** Lists fnr's pods and Services (an API server that cannot be reached fails here, in one line). */
  async listForGc(): Promise<GcListing> {
    const observedAt = Date.now()
    const [pods, services] = await Promise.all([this.manager.listPods(), this.manager.listServices()])
    return {pods, services, observedAt}
  }

  /**
   * What a GC pass would delete (nothing is deleted), from a listing and the Leases read after
   * it. Remembers each planned pod's resourceVersion for deleteItem's precondition.
   */
  plan(listing: GcListing, options: GcOptions, leases: LeaseStates): GcItem[] {
    const items = planAdminGc(listing.pods, listing.services, {...options, ownerState: options.ownerState ?? leases.stateOf, now: options.now ?? Date.now()}, listing.observedAt)
    const planned = new Set(items.filter((i) => i.kind === 'pod').map((i) => i.name))
    for (const pod of listing.pods) {
      const name = pod.metadata?.name ?? ''
      if (planned.has(name)) this.listedVersions.set(name, pod.metadata?.resourceVersion ?? '')
    }
    return items
  }

  /**
   * Deletes one planned item; never throws (a failure is in the result). A pod goes only if it
   * is unchanged since it was listed (resourceVersion precondition), and then its Service; a pod
   * that changed (or is gone) is left alone, and so is its Service: the next pass judges it afresh.
   */
  async deleteItem(item: GcItem): Promise<GcItemResult> {
    try {
      if (item.kind === 'pod') {
        const resourceVersion = this.listedVersions.get(item.name)
        if (!resourceVersion) throw new FnrError('Internal', `pod ${item.name} was not planned from a listing`)
        if (!(await this.manager.deletePodIfUnchanged(item.name, resourceVersion))) return {...item, deleted: false, skipped: true}
      }
      await this.manager.deleteService(item.name)
      return {...item, deleted: true, skipped: false}
    } catch (err) {
      return {...item, deleted: false, skipped: false, error: (err as Error).message.split('\n', 1)[0]}
    }
  }

  /** The runner's current templates (see admin/templates.ts). */
  async currentTemplates(options: RunnerTemplateOptions): Promise<Templates> {
    return runnerTemplates(this.clients, options)
  }

  close(): void {
    this.manager.close()
  }
}

export function describePod(pod: V1Pod, service: string | null, now: number, ownerLease: FunctionPodInfo['ownerLease'] = null): FunctionPodInfo {
  const o = observePod(pod)
  const r = podReadiness(pod, o.image ?? '?')
  const state: FunctionPodInfo['state'] = o.deleting ? 'deleting' : r.state === 'pending' ? 'starting' : r.state
  const lastUse = o.lastUsed ?? o.created
  return {
    pod: o.name,
    service,
    image: o.image ?? null,
    phase: o.phase ?? 'Pending',
    ready: r.state === 'ready' && !o.deleting,
    state,
    detail: o.deleting ? 'being deleted' : r.detail,
    created: iso(o.created),
    ageSeconds: o.created === undefined ? null : Math.max(0, Math.floor((now - o.created) / 1000)),
    lastUsed: iso(o.lastUsed),
    ttlSeconds: o.ttlMs === undefined ? null : Math.round(o.ttlMs / 1000),
    ttlLeftSeconds: o.ttlMs === undefined || lastUse === undefined ? null : Math.floor((lastUse + o.ttlMs - now) / 1000),
    templateVersion: pod.metadata?.annotations?.[ANNOTATION_TEMPLATE_VERSION] ?? null,
    owner: o.owner ?? null,
    ownerLease,
    podIP: pod.status?.podIP ?? null,
  }
}

/** The GC rules applied from outside a runner (see the top of this file); pure. */
export function planAdminGc(pods: readonly V1Pod[], services: readonly V1Service[], options: GcOptions & {now: number}, observedAt = options.now): GcItem[] {
  const observedPods = pods.map(observePod)
  const observedServices = services.map(observeService)
  const stateOf = (owner: string | undefined): OwnerState => options.ownerState?.(owner) ?? 'none'
  const live = (owner: string | undefined): boolean => stateOf(owner) === 'live'
  const items: GcItem[] = []
  const ttlOverride = options.all ? undefined : options.olderThanMs
  // A live replica's pods only when they failed or ended (planGc's 'none' rule without a TTL):
  // the replica's own GC sees its calls in flight, the CLI does not. Gone replicas' pods come
  // back in `reclaim`; owners without a Lease get the TTL rule with no grace.
  const plan = planGc({
    now: options.now,
    self: NOBODY,
    cached: [],
    pods: observedPods.map((p) => (live(p.owner) ? {...p, ttlMs: undefined} : ttlOverride !== undefined ? {...p, ttlMs: ttlOverride} : p)),
    services: observedServices,
    observedAt,
    orphanMinAgeMs: options.orphanMinAgeMs ?? 60_000,
    foreignGraceMs: 0,
    ownerState: (owner) => (live(owner) ? 'none' : stateOf(owner)),
  })
  const byName = new Map(observedPods.map((p) => [p.name, p]))
  const withImage = (p: {image?: string} | undefined): {image?: string} => (p?.image ? {image: p.image} : {})
  if (options.all) {
    const planned = new Map(plan.deletePods.map((d) => [d.name, d.reason]))
    const kept = new Set<string>()
    for (const p of observedPods) {
      if (!p.managed || p.deleting) continue
      if (!live(p.owner)) items.push({kind: 'pod', name: p.name, reason: '--all', ...withImage(p)})
      else if (options.includeLive) items.push({kind: 'pod', name: p.name, reason: `--all --include-live-replicas (replica ${p.owner ?? '(unknown)'} is live)`, ...withImage(p)})
      else if (planned.has(p.name)) items.push({kind: 'pod', name: p.name, reason: `--all (replica ${p.owner ?? '(unknown)'} is live: ${planned.get(p.name)})`, ...withImage(p)})
      else kept.add(p.name)
    }
    const podNames = new Set(items.map((i) => i.name))
    for (const s of observedServices) if (s.managed && !s.deleting && !podNames.has(s.name) && !(s.pod && kept.has(s.pod))) items.push({kind: 'service', name: s.name, reason: '--all'})
    return items
  }
  for (const d of plan.deletePods) {
    const p = byName.get(d.name)
    const reason = d.code === 'foreign-expired' ? (ttlOverride !== undefined ? 'idle for longer than --older-than' : 'idle for longer than its TTL') : d.reason
    items.push({kind: 'pod', name: d.name, reason, ...withImage(p)})
  }
  for (const r of plan.reclaim) {
    const image = byName.get(r.name)?.image
    items.push({kind: 'pod', name: r.name, reason: r.reason, ...(image ? {image} : {})})
  }
  // The stale-template rule. The runner replaces pods of another template version as they go
  // idle (and deletes them when it finds them at startup); from outside, "idle" can only be read
  // from fnr.dev/last-used, which the runner refreshes when a call takes the pod and at its GC
  // passes while calls are in flight (at most once per TTL/10, 5 s to 5 min). So a pod qualifies
  // only when its last use (or creation) is older than the grace; the deletion's resourceVersion
  // precondition covers a refresh between listing and deleting. A live replica replaces its own
  // stale pods: they are left to it.
  if (options.currentTemplateVersion !== undefined) {
    const grace = options.staleGraceMs ?? DEFAULT_STALE_GRACE_MS
    const planned = new Set(items.filter((i) => i.kind === 'pod').map((i) => i.name))
    for (const pod of pods) {
      const p = observePod(pod)
      if (!p.managed || p.deleting || planned.has(p.name) || live(p.owner)) continue
      const version = pod.metadata?.annotations?.[ANNOTATION_TEMPLATE_VERSION]
      if (version === options.currentTemplateVersion) continue
      // Made by a runner whose templates come from FunctionConfigs (--function-config-source:
      // Porch's PodTemplate base "porch-…", FunctionConfig overrides "…-fc…"), which the CLI does
      // not read: it cannot tell whether they are current, so it leaves them to that runner.
      if (version !== undefined && FUNCTION_CONFIG_VERSION.test(version)) continue
      const lastUse = p.lastUsed ?? p.created
      if (lastUse === undefined || options.now - lastUse < grace) continue
      items.push({kind: 'pod', name: p.name, reason: `stale template: version ${version ?? '(none)'} is not the current ${options.currentTemplateVersion}`, ...(p.image ? {image: p.image} : {})})
    }
  }
  for (const s of plan.deleteServices) items.push({kind: 'service', name: s.name, reason: s.reason})
  return items
}
