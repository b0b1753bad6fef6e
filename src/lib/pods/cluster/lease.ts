/**
 * Replica leases: what lets several `fnr serve` replicas share one pod namespace (Porch must run
 * its runner with one replica because replicas delete each other's pods, nephio#1069).
 *
 * Every replica holds a coordination.k8s.io/v1 Lease in the pod namespace, named after its owner
 * label (`fnr-replica-<owner>`), labelled like its pods (managed-by fnr, component replica-lease,
 * fnr.dev/owner), with `holderIdentity` = the replica id. It renews the Lease every third of
 * `leaseDurationSeconds` and, on a graceful stop, releases it (holderIdentity "" as client-go's
 * ReleaseOnCancel does), so that the others may take its pods over at once.
 *
 * Another replica is judged from what this process observes, never from its clock against the
 * holder's (clock skew, as client-go's leader election does it):
 *   - live: held, and its resourceVersion changed less than leaseDurationSeconds ago as seen here
 *     (a Lease seen for the first time counts as just renewed);
 *   - expired: held, but unchanged for at least leaseDurationSeconds;
 *   - released: holderIdentity is empty;
 *   - none: no Lease for that owner (a replica without lease RBAC, or an older fnr).
 * The GC rules (gc.ts) never touch a live replica's pods; pods of expired or released replicas are
 * taken over or deleted by exactly one other replica (cache.ts, with resourceVersion
 * preconditions); pods of owners without a Lease keep the lone-runner rule (TTL + grace).
 */
import type {CoordinationV1Api, V1Lease} from '@kubernetes/client-node'

import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {ClientNode} from '../../k8s/client.js'
import {apiStatusCode, kubeError} from '../../k8s/errors.js'
import {withApiRetries} from '../../k8s/retry.js'
import type {OwnerState} from '../model/gc.js'
import {ANNOTATION_OWNER, COMPONENT_LEASE, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_OWNER, MANAGED_BY_FNR, sha256Hex} from '../model/naming.js'

export const LEASE_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY_FNR},${LABEL_COMPONENT}=${COMPONENT_LEASE}`
export const DEFAULT_LEASE_DURATION_MS = 30_000

/** The Lease name of an owner label value: `fnr-replica-<owner>`, a valid DNS-1123 subdomain. */
export function leaseNameFor(ownerLabel: string): string {
  const slug = ownerLabel
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, '-')
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '')
  // Lowercasing or replacing characters could make two owners share a name: add a hash then.
  return slug === ownerLabel && slug ? `fnr-replica-${slug}` : `fnr-replica-${slug ? `${slug.slice(0, 200)}-` : ''}${sha256Hex(ownerLabel).slice(0, 10)}`
}

/**
 * A metav1.MicroTime as the API server parses it: RFC 3339 with exactly six fractional digits
 * (kube-apiserver rejects "…00.000Z", which Date.toISOString gives).
 */
export function microTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, -1)}000Z`
}

/** Lease durations are whole seconds, at least one. */
export function leaseSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000))
}

function coordinationApi(k8s: ClientNode, kubeConfig: import('@kubernetes/client-node').KubeConfig): CoordinationV1Api {
  return kubeConfig.makeApiClient(k8s.CoordinationV1Api)
}

export interface ReplicaLeaseOptions {
  k8s: ClientNode
  kubeConfig: import('@kubernetes/client-node').KubeConfig
  namespace: string
  /** The replica id (holderIdentity, owner annotation). */
  identity: string
  /** Its owner label value (labelValueFor(identity)). */
  ownerLabel: string
  durationMs: number
  logger?: Logger
  now?: () => number
}

/** This replica's own Lease: acquired at start, renewed every duration/3, released on stop. */
export class ReplicaLease {
  readonly name: string
  private readonly api: CoordinationV1Api
  private readonly logger: Logger
  private readonly now: () => number
  private lease: V1Lease | undefined
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  private abandoned = false
  private renewing: Promise<void> | undefined
  /** When the Lease was last written successfully (ms since the epoch, this clock). */
  lastRenewed = 0
  renewals = 0
  conflicts = 0
  private warnedExpired = false
  private lastError: string | undefined

  constructor(private readonly options: ReplicaLeaseOptions) {
    this.name = leaseNameFor(options.ownerLabel)
    this.api = coordinationApi(options.k8s, options.kubeConfig)
    this.logger = options.logger ?? silentLogger
    this.now = options.now ?? Date.now
  }

  get durationSeconds(): number {
    return leaseSeconds(this.options.durationMs)
  }

  /** True while the last successful renewal is younger than the lease duration. */
  get held(): boolean {
    return this.lease !== undefined && this.now() - this.lastRenewed < this.durationSeconds * 1000
  }

  /**
   * Creates or takes over this replica's Lease (a Lease of the same id is this replica's own from
   * an earlier process, e.g. a restarted container with the same POD_NAME), then renews it
   * periodically. Never throws: a failure is logged and retried at every renewal.
   */
  async start(): Promise<void> {
    await this.renew().catch((err: unknown) => {
      this.lastError = (err as Error).message
      this.logger.warn('cannot acquire the replica lease yet; other replicas treat this runner\'s pods as a lone runner\'s until it can', {lease: `${this.options.namespace}/${this.name}`, error: (err as Error).message})
    })
    this.schedule()
  }

  private schedule(): void {
    if (this.stopped) return
    const every = Math.max(100, Math.floor((this.durationSeconds * 1000) / 3))
    this.timer = setTimeout(() => {
      this.renewing = this.renew()
        .catch((err: unknown) => {
          // The same failure again (e.g. a Role without leases) is not repeated at warn level.
          const error = (err as Error).message
          if (error === this.lastError) this.logger.debug('cannot renew the replica lease', {lease: `${this.options.namespace}/${this.name}`, error})
          else this.logger.warn('cannot renew the replica lease', {lease: `${this.options.namespace}/${this.name}`, error})
          this.lastError = error
          if (!this.held && !this.warnedExpired && this.lease) {
            this.warnedExpired = true
            this.logger.error('the replica lease has expired: other replicas may take this runner\'s pods over', {lease: `${this.options.namespace}/${this.name}`})
          }
        })
        .finally(() => {
          this.renewing = undefined
          this.schedule()
        })
    }, every)
    this.timer.unref()
  }

  private desired(base: V1Lease | undefined, holder: string): V1Lease {
    const now = this.now()
    const prev = base?.spec
    const takingOver = !prev || prev.holderIdentity !== holder
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        ...(base?.metadata ?? {}),
        name: this.name,
        namespace: this.options.namespace,
        labels: {...(base?.metadata?.labels ?? {}), [LABEL_MANAGED_BY]: MANAGED_BY_FNR, [LABEL_COMPONENT]: COMPONENT_LEASE, [LABEL_OWNER]: this.options.ownerLabel},
        annotations: {...(base?.metadata?.annotations ?? {}), [ANNOTATION_OWNER]: this.options.identity},
      },
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: this.durationSeconds,
        // client-node types MicroTime as Date but sends whatever it is given: the exact string.
        acquireTime: (takingOver ? microTime(now) : prev?.acquireTime) as unknown as Date,
        renewTime: microTime(now) as unknown as Date,
        leaseTransitions: (prev?.leaseTransitions ?? 0) + (prev?.holderIdentity && holder && takingOver ? 1 : 0),
      },
    }
  }

  /** One renewal: PUT with the last resourceVersion; 409 → read and retry; 404 → create. */
  async renew(holder = this.options.identity): Promise<void> {
    const what = `cannot write lease ${this.options.namespace}/${this.name}`
    for (let attempt = 0; ; attempt++) {
      try {
        if (!this.lease) {
          try {
            this.lease = await withApiRetries(() => this.api.readNamespacedLease({name: this.name, namespace: this.options.namespace}), {what, attempts: 2})
          } catch (err) {
            if (apiStatusCode(err) !== 404) throw err
            this.lease = undefined
          }
          const existing = this.lease?.spec?.holderIdentity
          if (existing && holder && existing !== holder) {
            this.logger.warn('the replica lease is held by another identity; taking it over', {lease: this.name, holder: existing})
          }
        }
        const body = this.desired(this.lease, holder)
        this.lease = this.lease
          ? await this.api.replaceNamespacedLease({name: this.name, namespace: this.options.namespace, body})
          : await this.api.createNamespacedLease({namespace: this.options.namespace, body})
        this.lastRenewed = this.now()
        this.renewals++
        this.lastError = undefined
        this.warnedExpired = false
        return
      } catch (err) {
        const code = apiStatusCode(err)
        if ((code === 409 || code === 404) && attempt < 3) {
          // 409: someone wrote it (a conflict, or a replica that deleted it as expired and a
          // create racing ours); 404: it was deleted. Read it afresh and write again.
          if (code === 409) this.conflicts++
          this.lease = undefined
          continue
        }
        throw kubeError(err, what)
      }
    }
  }

  /**
   * Graceful stop: no more renewals, and the Lease is released (holderIdentity ""), so other
   * replicas may take this replica's pods over at once. Bounded by `timeoutMs`; never throws.
   */
  async release(timeoutMs = 3000): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.renewing
    if (!this.lease || this.abandoned) return
    const released = this.renew('').then(
      () => this.logger.info('released the replica lease', {lease: `${this.options.namespace}/${this.name}`}),
      (err: unknown) => this.logger.warn('cannot release the replica lease; other replicas take this runner\'s pods over once it expires', {error: (err as Error).message}),
    )
    let timer: NodeJS.Timeout | undefined
    await Promise.race([released, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))])
    clearTimeout(timer)
  }

  /** Stops renewing and never releases (tests: a replica that dies without a word). */
  abandon(): void {
    this.stopped = true
    this.abandoned = true
    clearTimeout(this.timer)
  }
}

export interface ObservedLease {
  name: string
  owner: string
  holder: string
  durationMs: number
  resourceVersion: string
  state: Exclude<OwnerState, 'self' | 'none'>
}

/** What a replica knows about the others at one moment. */
export interface ReplicaView {
  /** The state of the replica with this owner label value. */
  stateOf(owner: string | undefined): OwnerState
  leases: readonly ObservedLease[]
}

/** A view without leases: every other owner is 'none' (the lone-runner rules). */
export function noLeaseView(self: string): ReplicaView {
  return {stateOf: (owner) => (owner === self ? 'self' : 'none'), leases: []}
}

/** Lists the replica Leases and judges each one live, expired or released (see the top of the file). */
export class LeaseObserver {
  private readonly api: CoordinationV1Api
  private readonly now: () => number
  private readonly seen = new Map<string, {rv: string; since: number}>()

  constructor(
    private readonly options: {k8s: ClientNode; kubeConfig: import('@kubernetes/client-node').KubeConfig; namespace: string; self: string; now?: () => number},
  ) {
    this.api = coordinationApi(options.k8s, options.kubeConfig)
    this.now = options.now ?? Date.now
  }

  async observe(): Promise<ReplicaView> {
    const list = await withApiRetries(() => this.api.listNamespacedLease({namespace: this.options.namespace, labelSelector: LEASE_SELECTOR}), {
      what: `cannot list replica leases in ${this.options.namespace}`,
    })
    return this.judge(list.items)
  }

  /** Judges Leases (pure apart from the observation times it keeps). */
  judge(items: readonly V1Lease[]): ReplicaView {
    const now = this.now()
    const leases: ObservedLease[] = []
    const present = new Set<string>()
    for (const l of items) {
      const name = l.metadata?.name
      const owner = l.metadata?.labels?.[LABEL_OWNER]
      if (!name || !owner) continue
      present.add(name)
      const rv = l.metadata?.resourceVersion ?? ''
      let seen = this.seen.get(name)
      if (!seen || seen.rv !== rv) {
        seen = {rv, since: now}
        this.seen.set(name, seen)
      }
      const holder = l.spec?.holderIdentity ?? ''
      const durationMs = (l.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_DURATION_MS / 1000) * 1000
      const state = !holder ? 'released' : now - seen.since >= durationMs ? 'expired' : 'live'
      leases.push({name, owner, holder, durationMs, resourceVersion: rv, state})
    }
    for (const name of [...this.seen.keys()]) if (!present.has(name)) this.seen.delete(name)
    const byOwner = new Map(leases.map((l) => [l.owner, l.state]))
    const self = this.options.self
    return {stateOf: (owner) => (owner === self ? 'self' : owner === undefined ? 'none' : byOwner.get(owner) ?? 'none'), leases}
  }

  /** Deletes a gone replica's Lease, unless it changed since it was observed (resourceVersion precondition). */
  async deleteLease(lease: ObservedLease): Promise<boolean> {
    try {
      await this.api.deleteNamespacedLease({name: lease.name, namespace: this.options.namespace, body: {preconditions: {resourceVersion: lease.resourceVersion}}})
      this.seen.delete(lease.name)
      return true
    } catch (err) {
      const code = apiStatusCode(err)
      if (code === 404) return true
      if (code === 409) return false
      throw kubeError(err, `cannot delete lease ${this.options.namespace}/${lease.name}`)
    }
  }
}

/** A Lease's renewTime in ms since the epoch (client-node gives a Date, or the raw string). */
function renewTimeMs(lease: V1Lease): number | undefined {
  const t = lease.spec?.renewTime as unknown
  if (t instanceof Date) return t.getTime()
  if (typeof t === 'string') {
    const ms = Date.parse(t)
    return Number.isFinite(ms) ? ms : undefined
  }
  return undefined
}

/**
 * One look from outside the runners (`fnr pods gc|ls`), which cannot watch a Lease for a whole
 * duration as LeaseObserver does: judged from renewTime against this clock, with the lease
 * duration once more as allowance for clock skew (a live replica renews every third of it), so
 * a replica is "expired" only when its Lease was not renewed for two durations by this clock.
 * Errs towards "live" (whose pods are then kept): released when holderIdentity is empty; a Lease
 * without renewTime is live.
 */
export function judgeLeasesAt(items: readonly V1Lease[], now: number): Map<string, Exclude<OwnerState, 'self' | 'none'>> {
  const states = new Map<string, Exclude<OwnerState, 'self' | 'none'>>()
  for (const l of items) {
    const owner = l.metadata?.labels?.[LABEL_OWNER]
    if (!owner) continue
    const holder = l.spec?.holderIdentity ?? ''
    const durationMs = (l.spec?.leaseDurationSeconds ?? DEFAULT_LEASE_DURATION_MS / 1000) * 1000
    const renewed = renewTimeMs(l)
    const state = !holder ? 'released' : renewed !== undefined && now - renewed >= 2 * durationMs ? 'expired' : 'live'
    // Two Leases of one owner label (should not happen): live wins.
    if (states.get(owner) !== 'live') states.set(owner, state)
  }
  return states
}

/** Lists the replica Leases of a namespace for judgeLeasesAt. */
export async function listReplicaLeases(k8s: ClientNode, kubeConfig: import('@kubernetes/client-node').KubeConfig, namespace: string): Promise<V1Lease[]> {
  const list = await withApiRetries(() => coordinationApi(k8s, kubeConfig).listNamespacedLease({namespace, labelSelector: LEASE_SELECTOR}), {what: `cannot list replica leases in ${namespace}`})
  return list.items
}
