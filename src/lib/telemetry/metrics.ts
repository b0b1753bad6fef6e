/**
 * Prometheus metrics of `fnr serve` (--metrics-port).
 *
 * The rest of the code reports events through the `Metrics` object it was handed (telemetry.ts):
 * the no-op NO_METRICS unless `fnr serve` turned metrics on, so the hot path costs one empty call
 * when they are off, and prom-client is only imported (lazily) when they are on. Gauges that describe state (pods by
 * state, waitlist depth, calls in flight, response-cache size) are read from their owners at
 * scrape time through sources set here, never copied on the hot path.
 *
 * Label cardinality is bounded, and callers do not choose it: an image is labelled by its name only
 * once a runtime has served it (the exec config maps it, or a pod of it became ready: pulled and
 * started, or a call on its pod succeeded), for the first MAX_IMAGE_LABELS such images, then as
 * "other"; every other image (a made-up name, one whose pod never started) is "unknown". Names are
 * sanitized (imageLabelText). GC reasons, registry statuses and cache reasons come from small
 * fixed sets.
 */
import http from 'node:http'
import type {AddressInfo} from 'node:net'

import {FnrError} from '../errors.js'
import {escapedProcesses} from '../process/sweep.js'
import {PRESTART_DISCARD_REASONS, prestartStats} from '../process/prestart-stats.js'

export type PodCacheResult = 'hit' | 'starting' | 'miss'
export type RegistryCacheResult = 'hit' | 'revalidated' | 'miss'
export type ResponseCacheMissReason = 'absent' | 'expired' | 'evicted' | 'input-changed' | 'image-changed'
export type ResponseCacheSkipReason = 'no-identity' | 'identity-error' | 'failed' | 'too-large' | 'digest-mismatch'

export interface PodSlotState {
  image: string
  state: string
  load: number
}

export interface BudgetStats {
  running: number
  queued: number
  heldBytes: number
  /** Running calls whose function sleeps (budget.ts: they lend their slot). */
  idle?: number
  /** Clients with calls waiting (fair-queue.ts). */
  queuedClients?: number
  /** Calls waiting of the client that has the most. */
  largestClientQueue?: number
}

export interface ResponseCacheStats {
  entries: number
  bytes: number
}

/** What the code reports. Every method is cheap; the no-op implementation does nothing. */
export interface Metrics {
  readonly enabled: boolean
  /** One EvaluateFunction call ended: runtime (exec, pod, cache, none), image, gRPC code name, seconds. */
  evaluation(runtime: string, image: string, code: string, seconds: number): void
  /** The pod cache placed a call: on a ready pod (hit), on a pod still starting, or on a new pod (miss). */
  podCacheLookup(image: string, result: PodCacheResult): void
  /** A pod of the image became ready (true: the image was pulled and started, it may be a label) or failed to start (false). */
  podStarted(image: string, ready: boolean): void
  /** One garbage-collection pass completed (its deletions are counted by podGcDeletion as they succeed). */
  podGc(plan: unknown): void
  /** The garbage collector (or a takeover of a gone replica's pods) deleted a pod or Service; the reason's code (gc.ts GcCode). */
  podGcDeletion(kind: 'pod' | 'service', code: string): void
  /** One HTTP exchange with a registry (after redirects): method and status. */
  registryRequest(method: string, status: number): void
  /** A metadata lookup of the registry client: from its cache, re-checked with a HEAD (revalidated), or fetched (miss). */
  registryMetadataCache(result: RegistryCacheResult): void
  responseCacheHit(): void
  responseCacheMiss(reason: ResponseCacheMissReason): void
  /** A call the response cache let through without looking or storing. */
  responseCacheSkip(reason: ResponseCacheSkipReason): void
  /** Entries the response cache dropped: evict (size or count bound) or expire (TTL). */
  responseCacheEviction(reason: string): void
  setInFlightSource(source: () => number): void
  /** The call budget (budget.ts): a call queued, or refused (rejected-queue-full, rejected-memory). */
  admission(outcome: string): void
  /** A queued call got its turn, or left the queue (cancelled, past its deadline), after `seconds`. */
  queueWait(seconds: number): void
  /** A call without a deadline of its own ran past --default-deadline: failed DEADLINE_EXCEEDED, its function killed. */
  hungCallKilled(): void
  /** The HTTP/2 guard (grpc/hygiene.ts) reset a stream or closed a connection: receive-budget, receive-timeout, idle, accept-error. */
  connectionGuard(action: string): void
  setBudgetSource(source: () => BudgetStats): void
  setPodSource(source: () => readonly PodSlotState[]): void
  setResponseCacheSource(source: () => ResponseCacheStats): void
}

class NoMetrics implements Metrics {
  readonly enabled = false
  evaluation(): void {}
  podCacheLookup(): void {}
  podStarted(): void {}
  podGc(): void {}
  podGcDeletion(): void {}
  registryRequest(): void {}
  registryMetadataCache(): void {}
  responseCacheHit(): void {}
  responseCacheMiss(): void {}
  responseCacheSkip(): void {}
  responseCacheEviction(): void {}
  setInFlightSource(): void {}
  admission(): void {}
  queueWait(): void {}
  hungCallKilled(): void {}
  connectionGuard(): void {}
  setBudgetSource(): void {}
  setPodSource(): void {}
  setResponseCacheSource(): void {}
}

export const NO_METRICS: Metrics = new NoMetrics()

/** Distinct served images labelled as themselves; later ones are "other". */
export const MAX_IMAGE_LABELS = 100
/** Image labels are cut to this many characters (with "…"). */
export const MAX_IMAGE_LABEL_LENGTH = 256
/** The label of an image no runtime has served (made-up names, images whose pod never started). */
export const UNKNOWN_IMAGE = 'unknown'
/** Pod cache lookups of images not served yet, held until their pod starts or fails (images). */
const MAX_PENDING_LOOKUPS = 1000

/**
 * Control characters (C0, DEL, C1), bidirectional controls (U+061C, U+200E-U+200F, U+202A-U+202E,
 * U+2066-U+2069) and other invisible format characters (U+200B-U+200D, U+2060, U+FEFF): they
 * would make a label read as something else in a dashboard or a terminal.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE_LABEL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g

/** An image name as a label value: unsafe characters replaced with "?", cut to MAX_IMAGE_LABEL_LENGTH. */
export function imageLabelText(image: string): string {
  const safe = image.replace(UNSAFE_LABEL_CHARACTERS, '?')
  return safe.length > MAX_IMAGE_LABEL_LENGTH ? `${safe.slice(0, MAX_IMAGE_LABEL_LENGTH - 1)}…` : safe
}

/** Latency buckets (seconds): a cache hit (sub-millisecond) to a cold pod (tens of seconds). */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]

type PromClient = typeof import('prom-client')

/** The prom-client implementation (built by createMetrics). */
/** The metrics of exec function processes (the sweep's escapes, the pre-started pool: process/), read from their counts at each scrape. */
function registerProcessMetrics(prom: PromClient, registers: import('prom-client').Registry[]): void {
  new prom.Counter({name: 'fnr_function_escaped_processes_total', help: 'Processes of exec functions that left their call\'s process group (setsid, setpgid) and that the end-of-call sweep killed (docs/process.md).', registers, collect() { this.reset(); this.inc(escapedProcesses()) }})
  new prom.Counter({name: 'fnr_prestart_hits_total', help: 'Exec calls that took a pre-started function process (docs/process.md "Pre-started functions").', registers, collect() { this.reset(); this.inc(prestartStats().hits) }})
  new prom.Counter({name: 'fnr_prestart_misses_total', help: 'Exec calls that found no pre-started function process and started one as usual.', registers, collect() { this.reset(); this.inc(prestartStats().misses) }})
  new prom.Counter({
    name: 'fnr_prestart_discarded_total',
    help: 'Pre-started function processes killed or dropped without serving a call, by reason: exited or died while waiting, binary-changed, config-changed, idle (--prestart-idle-ttl), evicted (the pool was full and another image was called), shutdown, start-failed.',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset()
      const discarded = prestartStats().discarded
      for (const reason of PRESTART_DISCARD_REASONS) this.inc({reason}, discarded[reason])
    },
  })
  new prom.Gauge({name: 'fnr_prestart_processes', help: 'Pre-started exec function processes waiting for a call now.', registers, collect() { this.set(prestartStats().size) }})
}

export class PrometheusMetrics implements Metrics {
  readonly enabled = true
  readonly registry: import('prom-client').Registry
  /** Served images (at most MAX_IMAGE_LABELS) and their label values. */
  private readonly images = new Map<string, string>()
  /** Pod cache lookups (by result) of images whose pod has not started yet: counted once it has, or failed. */
  private readonly pendingLookups = new Map<string, Map<PodCacheResult, number>>()
  private inFlight: () => number = () => 0
  private budget: () => BudgetStats = () => ({running: 0, queued: 0, heldBytes: 0})
  private readonly admissions: import('prom-client').Counter<'outcome'>
  private readonly queueWaits: import('prom-client').Histogram
  private readonly hungCalls: import('prom-client').Counter
  private readonly guards: import('prom-client').Counter<'action'>
  private pods: () => readonly PodSlotState[] = () => []
  private responseCache: () => ResponseCacheStats = () => ({entries: 0, bytes: 0})
  private readonly evaluations: import('prom-client').Counter<'runtime' | 'image' | 'code'>
  private readonly durations: import('prom-client').Histogram<'runtime' | 'image'>
  private readonly podLookups: import('prom-client').Counter<'image' | 'result'>
  private readonly gcDeletions: import('prom-client').Counter<'kind' | 'reason'>
  private readonly gcRuns: import('prom-client').Counter
  private readonly registryRequests: import('prom-client').Counter<'method' | 'status'>
  private readonly registryCache: import('prom-client').Counter<'result'>
  private readonly cacheLookups: import('prom-client').Counter<'result' | 'reason'>
  private readonly cacheSkips: import('prom-client').Counter<'reason'>
  private readonly cacheEvictions: import('prom-client').Counter<'reason'>

  constructor(prom: PromClient, options: {defaultMetrics?: boolean} = {}) {
    const registry = new prom.Registry()
    this.registry = registry
    if (options.defaultMetrics ?? true) prom.collectDefaultMetrics({register: registry, prefix: 'fnr_'})
    const registers = [registry]
    this.evaluations = new prom.Counter({name: 'fnr_evaluations_total', help: 'EvaluateFunction calls by runtime (exec, pod, cache for response-cache hits, none when no runtime answered), image and gRPC code.', labelNames: ['runtime', 'image', 'code'], registers})
    this.durations = new prom.Histogram({name: 'fnr_evaluation_duration_seconds', help: 'EvaluateFunction latency in seconds, by runtime and image.', labelNames: ['runtime', 'image'], buckets: DURATION_BUCKETS, registers})
    const self = this
    new prom.Gauge({
      name: 'fnr_evaluations_in_flight',
      help: 'EvaluateFunction calls in flight.',
      registers,
      collect() {
        this.set(self.inFlight())
      },
    })
    this.admissions = new prom.Counter({name: 'fnr_admission_total', help: 'Calls the budget queued (queued) or refused with RESOURCE_EXHAUSTED (rejected-queue-full, rejected-memory); see docs/limits.md.', labelNames: ['outcome'], registers})
    registerProcessMetrics(prom, registers)
    this.guards = new prom.Counter({name: 'fnr_connection_guard_total', help: 'Streams reset and connections closed by the HTTP/2 guard: receive-budget (a message over the held-bytes budget), receive-timeout (a message not completed in time), idle (a connection without calls), accept-error (EMFILE/ENFILE on accept).', labelNames: ['action'], registers})
    new prom.Gauge({
      name: 'fnr_calls_queued',
      help: 'EvaluateFunction calls waiting for a turn in the budget queue.',
      registers,
      collect() {
        this.set(self.budget().queued)
      },
    })
    this.queueWaits = new prom.Histogram({name: 'fnr_queue_wait_seconds', help: 'How long calls waited in the budget queue for a turn (calls that ran at once are not observed); see docs/limits.md.', buckets: DURATION_BUCKETS, registers})
    this.hungCalls = new prom.Counter({name: 'fnr_hung_calls_killed_total', help: 'Calls that came without a deadline and ran past --default-deadline: they failed DEADLINE_EXCEEDED and their function processes were killed.', registers})
    new prom.Gauge({
      name: 'fnr_calls_idle',
      help: 'Running calls whose function process group sleeps (no CPU): each holds only a share of a slot (docs/limits.md).',
      registers,
      collect() {
        this.set(self.budget().idle ?? 0)
      },
    })
    new prom.Gauge({
      name: 'fnr_queue_clients',
      help: 'Clients (peer addresses, not labelled) with calls waiting in the budget queue; turns go round-robin between them.',
      registers,
      collect() {
        this.set(self.budget().queuedClients ?? 0)
      },
    })
    new prom.Gauge({
      name: 'fnr_queue_client_max_calls',
      help: 'Calls waiting in the budget queue of the client that has the most (with fnr_calls_queued: how much of the queue one client holds).',
      registers,
      collect() {
        this.set(self.budget().largestClientQueue ?? 0)
      },
    })
    new prom.Gauge({
      name: 'fnr_budget_held_bytes',
      help: 'Request bytes held by calls being received, queued or running (the budget\'s --max-inflight-bytes counts these).',
      registers,
      collect() {
        this.set(self.budget().heldBytes)
      },
    })
    this.podLookups = new prom.Counter({name: 'fnr_pod_cache_lookups_total', help: 'Calls placed by the pod cache: on a ready pod (hit), on a pod still starting (starting), or on a newly started pod (miss).', labelNames: ['image', 'result'], registers})
    new prom.Gauge({
      name: 'fnr_pods',
      help: 'Function pods held by the pod cache, by state (starting, ready, retiring).',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset()
        const counts: Record<string, number> = {starting: 0, ready: 0, retiring: 0}
        for (const s of self.pods()) counts[s.state] = (counts[s.state] ?? 0) + 1
        for (const [state, n] of Object.entries(counts)) this.set({state}, n)
      },
    })
    new prom.Gauge({
      name: 'fnr_pod_waitlist_depth',
      help: 'Calls in flight or waiting on the pods of an image (the waitlist of Porch\'s pod cache).',
      labelNames: ['image'],
      registers,
      collect() {
        this.reset()
        const byImage = new Map<string, number>()
        for (const s of self.pods()) {
          const image = self.imageLabel(s.image)
          byImage.set(image, (byImage.get(image) ?? 0) + s.load)
        }
        for (const [image, n] of byImage) this.set({image}, n)
      },
    })
    this.gcDeletions = new prom.Counter({name: 'fnr_pod_gc_deletions_total', help: 'Pods and Services the garbage collector deleted (successful deletions only), by kind (pod, service) and reason (ttl, gone, ended, orphan, foreign-expired, pod-gone, replica-gone: a gone replica\'s pod taken over and unusable, startup: this runner\'s own unusable pod found at startup, other).', labelNames: ['kind', 'reason'], registers})
    this.gcRuns = new prom.Counter({name: 'fnr_pod_gc_runs_total', help: 'Completed garbage-collection passes.', registers})
    this.registryRequests = new prom.Counter({name: 'fnr_registry_requests_total', help: 'HTTP exchanges with image registries, by method and status.', labelNames: ['method', 'status'], registers})
    this.registryCache = new prom.Counter({name: 'fnr_registry_metadata_lookups_total', help: 'Image metadata lookups of the registry client: hit (cached), revalidated (cached, tag re-checked with HEAD), miss (fetched).', labelNames: ['result'], registers})
    this.cacheLookups = new prom.Counter({name: 'fnr_response_cache_lookups_total', help: 'Response-cache lookups: hit, or miss with the reason (absent, expired, evicted, input-changed, image-changed).', labelNames: ['result', 'reason'], registers})
    this.cacheSkips = new prom.Counter({name: 'fnr_response_cache_skipped_total', help: 'Calls the response cache could not serve or store: no-identity (no digest known), identity-error, failed (not a success), too-large, digest-mismatch (the serving pod was made for another or an unknown image digest).', labelNames: ['reason'], registers})
    this.cacheEvictions = new prom.Counter({name: 'fnr_response_cache_evictions_total', help: 'Response-cache entries dropped: evict (size or entry bound), expire (TTL).', labelNames: ['reason'], registers})
    new prom.Gauge({
      name: 'fnr_response_cache_entries',
      help: 'Responses held by the response cache.',
      registers,
      collect() {
        this.set(self.responseCache().entries)
      },
    })
    new prom.Gauge({
      name: 'fnr_response_cache_bytes',
      help: 'Bytes held by the response cache (resource_list plus log of every entry).',
      registers,
      collect() {
        this.set(self.responseCache().bytes)
      },
    })
  }

  /**
   * The image label: its (sanitized) name when a runtime served it, among the first
   * MAX_IMAGE_LABELS such images; "other" for a served image after those; "unknown" for any other.
   * `served`: this event says that a runtime serves it now.
   */
  imageLabel(image: string, served = false): string {
    const known = this.images.get(image)
    if (known !== undefined) return known
    if (!served) return UNKNOWN_IMAGE
    if (this.images.size >= MAX_IMAGE_LABELS) return 'other'
    const label = imageLabelText(image)
    this.images.set(image, label)
    return label
  }

  evaluation(runtime: string, image: string, code: string, seconds: number): void {
    // The exec runtime takes only images its config maps; a pod answered OK only from a pulled image.
    const label = this.imageLabel(image, runtime === 'exec' || (runtime === 'pod' && code === 'OK'))
    this.evaluations.inc({runtime, image: label, code})
    this.durations.observe({runtime, image: label}, seconds)
  }

  podCacheLookup(image: string, result: PodCacheResult): void {
    // a hit is a ready pod: the image was pulled and started
    const label = this.imageLabel(image, result === 'hit')
    if (label === UNKNOWN_IMAGE && (this.pendingLookups.has(image) || this.pendingLookups.size < MAX_PENDING_LOOKUPS)) {
      // Not known yet (its first pod is starting): counted under its name once a pod of it is ready.
      const counts = this.pendingLookups.get(image) ?? new Map<PodCacheResult, number>()
      counts.set(result, (counts.get(result) ?? 0) + 1)
      this.pendingLookups.set(image, counts)
      return
    }
    this.podLookups.inc({image: label, result})
    this.countPendingLookups(image, label)
  }

  podStarted(image: string, ready: boolean): void {
    this.countPendingLookups(image, this.imageLabel(image, ready))
  }

  private countPendingLookups(image: string, label: string): void {
    const counts = this.pendingLookups.get(image)
    if (!counts) return
    this.pendingLookups.delete(image)
    for (const [result, n] of counts) this.podLookups.inc({image: label, result}, n)
  }

  podGc(): void {
    this.gcRuns.inc()
  }

  podGcDeletion(kind: 'pod' | 'service', code: string): void {
    this.gcDeletions.inc({kind, reason: code})
  }

  registryRequest(method: string, status: number): void {
    this.registryRequests.inc({method, status: String(status)})
  }

  registryMetadataCache(result: RegistryCacheResult): void {
    this.registryCache.inc({result})
  }

  responseCacheHit(): void {
    this.cacheLookups.inc({result: 'hit', reason: ''})
  }

  responseCacheMiss(reason: ResponseCacheMissReason): void {
    this.cacheLookups.inc({result: 'miss', reason})
  }

  responseCacheSkip(reason: ResponseCacheSkipReason): void {
    this.cacheSkips.inc({reason})
  }

  responseCacheEviction(reason: string): void {
    this.cacheEvictions.inc({reason})
  }

  setInFlightSource(source: () => number): void {
    this.inFlight = source
  }

  admission(outcome: string): void {
    this.admissions.inc({outcome})
  }

  queueWait(seconds: number): void {
    this.queueWaits.observe(seconds)
  }

  hungCallKilled(): void {
    this.hungCalls.inc()
  }

  connectionGuard(action: string): void {
    this.guards.inc({action})
  }

  setBudgetSource(source: () => BudgetStats): void {
    this.budget = source
  }

  setPodSource(source: () => readonly PodSlotState[]): void {
    this.pods = source
  }

  setResponseCacheSource(source: () => ResponseCacheStats): void {
    this.responseCache = source
  }

  /** The text exposition (Prometheus format 0.0.4). */
  async exposition(): Promise<{contentType: string; body: string}> {
    return {contentType: this.registry.contentType, body: await this.registry.metrics()}
  }
}

/** Builds the prom-client metrics (importing prom-client now). */
export async function createMetrics(options: {defaultMetrics?: boolean} = {}): Promise<PrometheusMetrics> {
  const prom = await import('prom-client')
  return new PrometheusMetrics(prom, options)
}

export interface MetricsServer {
  port: number
  close(): Promise<void>
}

/**
 * Serves GET /metrics (Prometheus text format) and GET /healthz ("ok") on host:port. Anything
 * else is 404; methods other than GET and HEAD are 405.
 */
export async function startMetricsServer(m: PrometheusMetrics, host: string, port: number): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?', 1)[0]
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, {allow: 'GET, HEAD'}).end()
      return
    }
    if (url === '/healthz') {
      res.writeHead(200, {'content-type': 'text/plain; charset=utf-8'}).end('ok\n')
      return
    }
    if (url !== '/metrics') {
      res.writeHead(404, {'content-type': 'text/plain; charset=utf-8'}).end('not found: try /metrics\n')
      return
    }
    m.exposition().then(
      ({contentType, body}) => res.writeHead(200, {'content-type': contentType}).end(req.method === 'HEAD' ? undefined : body),
      (err: unknown) => res.writeHead(500, {'content-type': 'text/plain; charset=utf-8'}).end(`${(err as Error).message}\n`),
    )
  })
  server.keepAliveTimeout = 5000
  const listen = (h: string): Promise<void> => {
    const address = h.includes(':') && !h.startsWith('[') ? `[${h}]:${port}` : `${h}:${port}`
    return new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void =>
        reject(new FnrError('Unavailable', `cannot listen on ${address} for metrics: ${err.code === 'EADDRINUSE' ? 'the address is already in use' : err.message}`, {cause: err}))
      server.once('error', onError)
      server.listen(port, h, () => {
        server.removeListener('error', onError)
        resolve()
      })
    })
  }
  try {
    await listen(host)
  } catch (err) {
    // "::" (every address family) on a machine without IPv6.
    if (host !== '::' || !/EAFNOSUPPORT|EADDRNOTAVAIL/.test(String((err as FnrError).cause))) throw err
    await listen('0.0.0.0')
  }
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/**
 * Porch's Deployment turns its runner's metrics on with OpenTelemetry's variables:
 * OTEL_METRICS_EXPORTER=prometheus, OTEL_EXPORTER_PROMETHEUS_HOST (0.0.0.0 there) and
 * OTEL_EXPORTER_PROMETHEUS_PORT (9464). Where they ask for a Prometheus exporter, fnr serves its
 * own metrics there (the OpenTelemetry defaults are localhost and 9464). A wildcard host (0.0.0.0,
 * "::" or empty) means every address family, as Go's listener does for 0.0.0.0.
 * OTEL_SDK_DISABLED=true turns it off. Undefined: not asked for.
 */
export function prometheusFromOtelEnv(env: NodeJS.ProcessEnv, logger?: import('./log.js').Logger): {host: string; port: number} | undefined {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return undefined
  const exporters = (env.OTEL_METRICS_EXPORTER ?? '').split(',').map((s) => s.trim().toLowerCase()).filter((s) => s !== '')
  if (!exporters.includes('prometheus')) {
    const others = exporters.filter((e) => e !== 'none')
    if (others.length) logger?.warn(`OTEL_METRICS_EXPORTER ${others.join(',')} is not supported (only prometheus); metrics stay off unless --metrics-port is given`)
    return undefined
  }
  const rawPort = (env.OTEL_EXPORTER_PROMETHEUS_PORT ?? '').trim()
  const port = rawPort === '' ? 9464 : Number(rawPort)
  if (!/^\d+$/.test(rawPort || '9464') || port < 1 || port > 65535) {
    throw new FnrError('Config', `OTEL_EXPORTER_PROMETHEUS_PORT must be a port number (1-65535), got ${JSON.stringify(rawPort)}`)
  }
  const rawHost = (env.OTEL_EXPORTER_PROMETHEUS_HOST ?? 'localhost').trim()
  const host = rawHost === '' || rawHost === '0.0.0.0' || rawHost === '::' || rawHost === '[::]' ? '::' : rawHost.replace(/^\[(.*)\]$/, '$1')
  return {host, port}
}

/**
 * `fnr serve --metrics-port`: builds the metrics (the server hands them to what it builds,
 * telemetry.ts) and serves them. stop() closes the endpoint.
 */
export async function startServeMetrics(port: number, host: string, logger: import('./log.js').Logger): Promise<{port: number; metrics: PrometheusMetrics; stop(): Promise<void>}> {
  const m = await createMetrics()
  const server = await startMetricsServer(m, host, port)
  logger.info('metrics endpoint listening', {host, port: server.port, path: '/metrics'})
  return {
    port: server.port,
    metrics: m,
    stop: () => server.close(),
  }
}
