/**
 * ResourceWatcher: a list-then-watch cache of one kind of object (a namespace's pods with a label
 * selector, one ConfigMap, …) that survives dropped watches: a closed stream resumes from the last
 * resourceVersion, an expired one (410) or an error relists, and a relist reports what changed
 * while no watch was open. Listeners see ADDED, MODIFIED and DELETED with the object.
 */
import type {KubeConfig} from '@kubernetes/client-node'

import {silentLogger, type Logger} from '../telemetry/log.js'
import type {ClientNode} from './client.js'
import {kubeError} from './errors.js'

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED'

/**
 * How long a watch may go without a byte before it counts as dead. client-node's Watch ends one after 30 s of
 * silence (its `requestTimeoutMs`), but a quiet watch hears from kube-apiserver only when it sends a BOOKMARK,
 * about once a minute: every idle watch then failed every 30 s ("watch failed; relisting" and a LIST each
 * time). Past this, the connection is taken for dead and relisted as before.
 */
export const WATCH_INACTIVITY_MS = 150_000

/**
 * A client-node Watch whose silence limit is `inactivityMs`. The limit is a private field of client-node's Watch
 * (`requestTimeoutMs`, a number set in its constructor); a client-node without it keeps its own limit, and
 * test/lib/k8s-watch.test.ts fails on such an upgrade.
 */
export function newWatch(k8s: Pick<ClientNode, 'Watch'>, kubeConfig: KubeConfig, inactivityMs = WATCH_INACTIVITY_MS): InstanceType<ClientNode['Watch']> {
  const watch = new k8s.Watch(kubeConfig)
  const fields = watch as unknown as {requestTimeoutMs?: unknown}
  if (typeof fields.requestTimeoutMs === 'number') fields.requestTimeoutMs = inactivityMs
  return watch
}

export interface KubeObjectLike {
  metadata?: {name?: string; namespace?: string; resourceVersion?: string; uid?: string}
}

export interface ObjectList<T> {
  items: T[]
  metadata?: {resourceVersion?: string}
}

export interface ResourceWatcherOptions<T> {
  k8s: ClientNode
  kubeConfig: KubeConfig
  /** e.g. /api/v1/namespaces/porch-fn-system/pods */
  path: string
  labelSelector?: string
  fieldSelector?: string
  /** The LIST call with the same selectors. */
  list: () => Promise<ObjectList<T>>
  logger?: Logger
  /** What is watched, for logs. */
  description: string
  /** Delay before relisting after an error (default 1 s, doubling to 15 s). */
  retryMs?: number
  /** Server-side timeout of each watch request (default 300 s). */
  watchTimeoutSeconds?: number
}

type Listener<T> = (type: WatchEventType, object: T, previous: T | undefined) => void

export class ResourceWatcher<T extends KubeObjectLike> {
  private readonly objects = new Map<string, T>()
  private readonly listeners = new Set<Listener<T>>()
  private readonly logger: Logger
  private resourceVersion: string | undefined
  private abort: AbortController | undefined
  private stopped = false
  private retryTimer: NodeJS.Timeout | undefined
  private failures = 0
  private syncedOnce = false
  private syncWaiters: Array<() => void> = []
  /** How many times the watch was (re)started; tests and logs. */
  restarts = 0

  constructor(private readonly options: ResourceWatcherOptions<T>) {
    this.logger = options.logger ?? silentLogger
  }

  /** Starts listing and watching; resolves after the first successful list (or rejects with its error). */
  async start(): Promise<void> {
    await this.relist(true)
  }

  get synced(): boolean {
    return this.syncedOnce
  }

  /** Resolves once the first list has succeeded (at once if it has). */
  whenSynced(): Promise<void> {
    return this.syncedOnce ? Promise.resolve() : new Promise((resolve) => this.syncWaiters.push(resolve))
  }

  get(name: string): T | undefined {
    return this.objects.get(name)
  }

  list(): T[] {
    return [...this.objects.values()]
  }

  on(listener: Listener<T>): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  stop(): void {
    this.stopped = true
    clearTimeout(this.retryTimer)
    const abort = this.abort
    this.abort = undefined
    if (abort) setImmediate(() => abort.abort())
    for (const wake of this.syncWaiters.splice(0)) wake()
  }

  private emit(type: WatchEventType, object: T, previous: T | undefined): void {
    for (const listener of this.listeners) {
      try {
        listener(type, object, previous)
      } catch (err) {
        this.logger.error('watch listener failed', {watch: this.options.description, error: String(err)})
      }
    }
  }

  /** Replaces the cache with a fresh list, emitting the differences, then watches from its version. */
  private async relist(first = false): Promise<void> {
    if (this.stopped) return
    let list: ObjectList<T>
    try {
      list = await this.options.list()
    } catch (err) {
      if (first) throw kubeError(err, `cannot list ${this.options.description}`)
      this.scheduleRetry(err)
      return
    }
    if (this.stopped) return
    this.failures = 0
    const seen = new Set<string>()
    for (const item of list.items) {
      const name = item.metadata?.name
      if (!name) continue
      seen.add(name)
      const previous = this.objects.get(name)
      this.objects.set(name, item)
      if (!previous) this.emit('ADDED', item, undefined)
      else if (previous.metadata?.resourceVersion !== item.metadata?.resourceVersion) this.emit('MODIFIED', item, previous)
    }
    for (const [name, previous] of [...this.objects]) {
      if (!seen.has(name)) {
        this.objects.delete(name)
        this.emit('DELETED', previous, previous)
      }
    }
    this.resourceVersion = list.metadata?.resourceVersion
    if (!this.syncedOnce) {
      this.syncedOnce = true
      for (const wake of this.syncWaiters.splice(0)) wake()
    }
    void this.watch()
  }

  private scheduleRetry(err: unknown): void {
    if (this.stopped) return
    this.failures++
    const base = this.options.retryMs ?? 1000
    const delay = Math.min(base * 2 ** Math.min(this.failures - 1, 4), 15_000)
    this.logger.warn('watch failed; relisting', {watch: this.options.description, error: kubeError(err, 'watch').message, retryInMs: delay})
    this.retryTimer = setTimeout(() => void this.relist(), delay)
    this.retryTimer.unref()
  }

  private async watch(): Promise<void> {
    if (this.stopped) return
    this.restarts++
    const startedAt = Date.now()
    const {k8s, kubeConfig} = this.options
    const watch = newWatch(k8s, kubeConfig)
    let expired = false
    let errored: unknown
    const query: Record<string, string | number | boolean> = {
      allowWatchBookmarks: true,
      timeoutSeconds: this.options.watchTimeoutSeconds ?? 300,
    }
    if (this.resourceVersion) query.resourceVersion = this.resourceVersion
    if (this.options.labelSelector) query.labelSelector = this.options.labelSelector
    if (this.options.fieldSelector) query.fieldSelector = this.options.fieldSelector
    const onEvent = (type: string, object: T & {code?: number; reason?: string; message?: string}): void => {
      if (this.stopped) return
      if (type === 'ERROR') {
        if (object.code === 410) expired = true
        else errored = new Error(object.message ?? 'watch error')
        const abort = this.abort
        if (abort) setImmediate(() => abort.abort())
        return
      }
      const rv = object.metadata?.resourceVersion
      if (rv) this.resourceVersion = rv
      if (type === 'BOOKMARK') return
      const name = object.metadata?.name
      if (!name) return
      const previous = this.objects.get(name)
      if (type === 'DELETED') {
        this.objects.delete(name)
        this.emit('DELETED', object, previous)
      } else if (type === 'ADDED' || type === 'MODIFIED') {
        this.objects.set(name, object)
        this.emit(previous ? 'MODIFIED' : 'ADDED', object, previous)
      }
    }
    const onDone = (err: unknown): void => {
      this.abort = undefined
      if (this.stopped) return
      if (expired) {
        this.logger.debug('watch expired; relisting', {watch: this.options.description})
        void this.relist()
      } else if (err || errored) {
        this.scheduleRetry(err ?? errored)
      } else {
        // The server closed the stream (timeout or restart): resume where it ended, without
        // spinning when a server keeps closing streams at once.
        const lasted = Date.now() - startedAt
        this.retryTimer = setTimeout(() => void this.watch(), lasted < 1000 ? 250 : 0)
        this.retryTimer.unref()
      }
    }
    try {
      this.abort = await watch.watch(this.options.path, query, onEvent as (type: string, object: unknown) => void, onDone)
      if (this.stopped) {
        const abort = this.abort
        this.abort = undefined
        setImmediate(() => abort?.abort())
      }
    } catch (err) {
      this.scheduleRetry(err)
    }
  }
}
