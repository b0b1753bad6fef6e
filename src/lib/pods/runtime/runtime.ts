/**
 * The pod runtime, assembled: Kubernetes clients (loaded lazily), the template source, the
 * PodManager, the PodCache, startup adoption, the GC loop and warm-up. `fnr serve` builds one
 * through the pod evaluator; the pods commands can build the parts they need.
 */
import type {V1Pod} from '@kubernetes/client-node'

import {PodCacheConfig, type ImagePodSettings, type ResourceRequirements} from '../../config/pod-cache-config.js'
import {parseDnsServer} from '../../grpc/dns-server.js'
import {FnrError} from '../../errors.js'
import {connectKube, runnerNamespace, type KubeClients, type KubeConnectOptions} from '../../k8s/client.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {Telemetry} from '../../telemetry/telemetry.js'
import {PodCache, type PodAddressMode} from './cache.js'
import {observePodEvents} from './event-sinks.js'
import {pullSecretPreparer, type PreparePod, type PullSecret} from '../cluster/launcher.js'
import {PodGarbageCollector} from './gc-scheduler.js'
import {DEFAULT_LEASE_DURATION_MS, LeaseObserver, ReplicaLease, noLeaseView, type ReplicaView} from '../cluster/lease.js'
import {PodManager} from '../cluster/manager.js'
import type {ImageMetadataSource} from '../cluster/image-metadata.js'
import {defaultRunnerIdentity, labelValueFor} from '../model/naming.js'
import type {InlineTemplateOptions} from '../model/template.js'
import {TemplateSource} from '../cluster/template-source.js'
import {warmUpPods, type WarmUpResult} from './warmup.js'

export interface PodRuntimeOptions {
  /** --pod-namespace: pods, Services and the pull Secret. */
  namespace: string
  ttlMs: number
  scanIntervalMs: number
  cacheConfig: PodCacheConfig
  warmUp: boolean
  /** --function-pod-template: a ConfigMap name in the runner's namespace, or '' for the inline template. */
  templateConfigMap: string
  maxWaitlistLength: number
  maxParallelPods: number
  /** $WRAPPER_SERVER_IMAGE (needed by the inline template). */
  wrapperServerImage?: string
  maxRequestBodySize: number
  podReadyTimeoutMs: number
  addressMode: PodAddressMode
  clusterDomain: string
  /** DNS server for Service names (FNR_DNS_SERVER); default the system resolver. */
  dnsServer?: string
  metadata: ImageMetadataSource
  kube?: KubeConnectOptions
  /** With private registries on: the pull Secret to create and attach. */
  pullSecret?: PullSecret
  /** Replica id (owner label, Lease holder); default $POD_NAME, else the host name plus a random suffix. */
  owner?: string
  /**
   * --replica-lease-duration: this replica's Lease in the pod namespace, renewed every third of
   * it (default 30 s); 0 holds no Lease (other replicas then treat this one's pods as a lone
   * runner's).
   */
  leaseDurationMs?: number
  /** Where the template ConfigMap is; default the runner's own namespace. */
  runnerNamespace?: string
  /** Requests/limits of the inline template's function container. */
  inlineResources?: ResourceRequirements
  orphanMinAgeMs?: number
  foreignGraceMs?: number
  pollMs?: number
  watchRetryMs?: number
  warmUpConcurrency?: number
  logger?: Logger
  /** A live source of per-image settings, warm-up images and pod changes (the FunctionConfig source). */
  extension?: PodRuntimeExtension
  /** Run function containers as `repo@digest` when the registry gives a digest (--pin-image-digests). */
  pinImageDigests?: boolean
  /** --harden-pod-templates: fnr's security defaults on a user's template (ConfigMap or Porch's PodTemplate). */
  hardenTemplates?: boolean
  /** --collect-porch-pods: delete the function pods Porch's runner left in the namespace (porch-leftovers.ts). */
  collectPorchPods?: boolean
  /** The wrapper server's --verbosity in new pods (undefined: none passed, the wrapper's default 2). */
  wrapperVerbosity?: number
  /** Where the runtime's events and GC passes are counted (the server's); default none. */
  telemetry?: Telemetry
}

/** What a live configuration source (function-config-crd.ts) adds to the pod runtime. */
export interface PodRuntimeExtension {
  /** Per-image settings; `fallback` is what cacheConfig and the flags give. */
  settingsFor(image: string, fallback: ImagePodSettings): ImagePodSettings
  /** More images to warm up. */
  warmUpImages(): string[]
  /** Changes a new pod before it is created (after the template and per-image resources). */
  preparePod(pod: V1Pod, image: string): void
  /** The base templates when there is no --function-pod-template (Porch's PodTemplate and ServiceTemplate). */
  baseTemplates?(clients: KubeClients, inline: Partial<InlineTemplateOptions>, extra: Record<string, unknown>, user?: {harden?: boolean}): Promise<TemplateSource>
  /** The version of those changes ('' for none), and a way to hear when it changes. */
  overlayVersion(): string
  onChange(listener: () => void): () => void
}

/** The parts of a started pod runtime. */
export interface PodRuntimeParts {
  clients: KubeClients
  manager: PodManager
  templates: TemplateSource
  cache: PodCache
  gc: PodGarbageCollector
  lease: ReplicaLease | undefined
  /** Resolves when startup adoption is done. */
  started: Promise<void>
  /** Resolves when warm-up has finished (at once without warm-up). */
  warmedUp: Promise<WarmUpResult | undefined>
  /** Run at close, before the parts stop (watch subscriptions, timers). */
  cleanups: Array<() => void>
}

export class PodRuntime {
  readonly clients: KubeClients
  readonly manager: PodManager
  readonly templates: TemplateSource
  readonly cache: PodCache
  readonly gc: PodGarbageCollector
  readonly lease: ReplicaLease | undefined
  /** Resolves when startup adoption is done. */
  readonly started: Promise<void>
  /** Resolves when warm-up has finished (at once without warm-up). */
  readonly warmedUp: Promise<WarmUpResult | undefined>
  private readonly cleanups: Array<() => void>
  private closed = false

  constructor(parts: PodRuntimeParts) {
    this.clients = parts.clients
    this.manager = parts.manager
    this.templates = parts.templates
    this.cache = parts.cache
    this.gc = parts.gc
    this.lease = parts.lease
    this.started = parts.started
    this.warmedUp = parts.warmedUp
    this.cleanups = parts.cleanups
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const c of this.cleanups) c()
    await this.gc.stop()
    this.cache.close()
    // After the cache: no pod is created any more, so the others may take this one's pods over.
    await this.lease?.release()
    this.templates.close()
    this.manager.close()
  }
}

function checkRuntimeOptions(options: PodRuntimeOptions): void {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(options.namespace) || options.namespace.length > 63) {
    throw new FnrError('Config', `--pod-namespace ${JSON.stringify(options.namespace)} is not a valid namespace name (lowercase letters, digits and "-", at most 63)`)
  }
  if (options.dnsServer === undefined) return
  try {
    parseDnsServer(options.dnsServer)
  } catch (err) {
    throw new FnrError('Config', `FNR_DNS_SERVER: ${(err as Error).message}`)
  }
}

/** The templates new pods are made from: --function-pod-template's ConfigMap, Porch's PodTemplate (FunctionConfigs), or the inline one. */
async function openTemplates(options: PodRuntimeOptions, clients: KubeClients, logger: Logger): Promise<TemplateSource> {
  // The wrapper's --verbosity is left out of the template version on purpose: a pod logging more
  // or less is as good, and `fnr pods warm|gc` (which do not know the runner's log level) must
  // compute the same version as the runner.
  const extra = {maxRequestBodySize: options.maxRequestBodySize}
  const harden = options.hardenTemplates === true
  if (options.templateConfigMap) {
    const namespace = options.runnerNamespace ?? runnerNamespace(clients)
    return TemplateSource.fromConfigMap({...clients, namespace, name: options.templateConfigMap, extra, logger, watchRetryMs: options.watchRetryMs, harden})
  }
  const inline = {wrapperServerImage: options.wrapperServerImage, resources: options.inlineResources}
  if (options.extension?.baseTemplates) return options.extension.baseTemplates(clients, inline, extra, {harden})
  if (!options.wrapperServerImage) {
    throw new FnrError('Config', 'environment variable WRAPPER_SERVER_IMAGE must be set to use the pod runtime with the inline template (or pass --function-pod-template, or --disable-runtimes=pod)')
  }
  return TemplateSource.inline({...inline, wrapperServerImage: options.wrapperServerImage}, extra)
}

/** Per-image settings: --pod-cache-config over the flags, and a live source (FunctionConfigs) over both. */
function settingsSource(options: PodRuntimeOptions): (image: string) => ImagePodSettings {
  const defaults = {ttlMs: options.ttlMs, maxWaitlistLength: options.maxWaitlistLength, maxParallelPods: options.maxParallelPods}
  const extension = options.extension
  return extension ? (image) => extension.settingsFor(image, options.cacheConfig.settingsFor(image, defaults)) : (image) => options.cacheConfig.settingsFor(image, defaults)
}

/** What a new pod gets before it is created: the extension's changes, then the pull Secret. */
function podPreparer(options: PodRuntimeOptions, clients: KubeClients, logger: Logger): PreparePod | undefined {
  const base = options.pullSecret ? pullSecretPreparer(clients.core, options.namespace, options.pullSecret, 'ensure', logger) : undefined
  const extension = options.extension
  if (!extension) return base
  return async (pod: V1Pod, image: string, signal: AbortSignal) => {
    extension.preparePod(pod, image)
    await base?.(pod, image, signal)
  }
}

/** After a swap from Porch's runner: its leftover pods are collected (--collect-porch-pods) or only counted. */
function handlePorchLeftovers(started: Promise<void>, options: PodRuntimeOptions, clients: KubeClients, logger: Logger): void {
  const done = started.then(async () => {
    const {collectPorchLeftovers, findPorchLeftovers} = await import('../cluster/porch-leftovers.js')
    if (options.collectPorchPods) {
      await collectPorchLeftovers({core: clients.core, namespace: options.namespace, logger})
      return
    }
    const {pods} = await findPorchLeftovers(clients.core, options.namespace, {services: false})
    if (pods.length > 0) logger.info("function pods left by Porch's runner; --collect-porch-pods (or `fnr pods gc --porch-leftovers`) deletes them", {namespace: options.namespace, pods: pods.length})
  })
  done.catch((err: unknown) => logger.warn("cannot look for the function pods left by Porch's runner", {error: (err as Error).message}))
}

/**
 * Warm-up of the --pod-cache-config and FunctionConfig images, after adoption but not waiting
 * forever: a runner whose API server stays away still reports SERVING after the pod-ready timeout
 * (its exec runtime works), with a warning. FunctionConfigs created or changed later (a new image
 * or podExecutor.tags[0]) are warmed when the watch sees them, not only at the next start.
 */
function startWarmUp(options: PodRuntimeOptions, {cache, started, cleanups}: Pick<PodRuntimeParts, 'cache' | 'started' | 'cleanups'>, logger: Logger): Promise<WarmUpResult | undefined> {
  if (!options.warmUp) return Promise.resolve(undefined)
  let syncTimer: NodeJS.Timeout | undefined
  const startedInTime = Promise.race([
    started.then(() => true),
    new Promise<boolean>((resolve) => {
      syncTimer = setTimeout(() => resolve(false), options.podReadyTimeoutMs)
      syncTimer.unref()
    }),
  ]).finally(() => clearTimeout(syncTimer))
  cleanups.push(() => clearTimeout(syncTimer))
  const extension = options.extension
  const warmedImages = new Set<string>()
  const warmedUp = startedInTime.then((inTime) => {
    if (!inTime) {
      logger.warn('the pod runtime could not list its pods in time; skipping warm-up', {timeoutMs: options.podReadyTimeoutMs})
      return undefined
    }
    const fromExtension = extension?.warmUpImages() ?? []
    for (const image of fromExtension) warmedImages.add(image)
    const images = [...new Set([...options.cacheConfig.images(), ...fromExtension])]
    return warmUpPods(cache, images, {concurrency: options.warmUpConcurrency, logger})
  })
  if (!extension) return warmedUp
  let ready = false
  const warmNew = (): void => {
    if (!ready) return
    const fresh = extension.warmUpImages().filter((image) => !warmedImages.has(image))
    if (fresh.length === 0) return
    for (const image of fresh) warmedImages.add(image)
    logger.info('warming up the images of new or changed FunctionConfigs', {images: fresh})
    void warmUpPods(cache, fresh, {concurrency: options.warmUpConcurrency, logger})
  }
  cleanups.push(extension.onChange(warmNew))
  void warmedUp.then(() => {
    ready = true
    warmNew()
  })
  return warmedUp
}

export async function startPodRuntime(options: PodRuntimeOptions): Promise<PodRuntime> {
  const logger = options.logger ?? silentLogger
  checkRuntimeOptions(options)
  const clients = await connectKube(options.kube)
  const owner = options.owner ?? defaultRunnerIdentity()
  const templates = await openTemplates(options, clients, logger)
  const ownerLabel = labelValueFor(owner)
  const leaseDurationMs = options.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS
  const lease = leaseDurationMs > 0 ? new ReplicaLease({...clients, namespace: options.namespace, identity: owner, ownerLabel, durationMs: leaseDurationMs, logger}) : undefined
  const observer = leaseDurationMs > 0 ? new LeaseObserver({...clients, namespace: options.namespace, self: ownerLabel}) : undefined
  const manager = new PodManager({...clients, namespace: options.namespace, logger, pollMs: options.pollMs, watchRetryMs: options.watchRetryMs})

  const extension = options.extension
  const cleanups: Array<() => void> = []
  if (extension) {
    const syncOverlay = (): void => templates.setOverlayVersion(extension.overlayVersion())
    syncOverlay()
    cleanups.push(extension.onChange(syncOverlay))
  }
  const cache = new PodCache({
    manager,
    metadata: options.metadata,
    templates: templates.current(),
    settingsFor: settingsSource(options),
    owner,
    podReadyTimeoutMs: options.podReadyTimeoutMs,
    addressMode: options.addressMode,
    clusterDomain: options.clusterDomain,
    dnsServer: options.dnsServer,
    maxMessageSize: options.maxRequestBodySize,
    preparePod: podPreparer(options, clients, logger),
    logger,
    orphanMinAgeMs: options.orphanMinAgeMs,
    foreignGraceMs: options.foreignGraceMs,
    replicas: observer,
    pinDigests: options.pinImageDigests,
    wrapperVerbosity: options.wrapperVerbosity,
  })
  // The runtime's log lines and metrics follow its events (event-sinks.ts), to the end (a pod
  // evicted after close, when its last call ends, is still logged).
  observePodEvents(cache.events, logger, options.telemetry)
  cleanups.push(templates.onChange((t) => cache.setTemplates(t)))
  cleanups.push(manager.onPodChange((type, pod) => cache.onPodEvent(type, pod)))

  await manager.start()
  // The Lease first (before any pod of this replica exists), then the pods, then the Leases of
  // the others (so every pod seen has its owner's Lease in that list).
  const leaseStarted = lease ? lease.start() : Promise.resolve()
  const started = Promise.all([manager.whenSynced(), leaseStarted]).then(async () => {
    const pods = manager.observedPods()
    let view: ReplicaView = noLeaseView(ownerLabel)
    if (observer) {
      view = await observer.observe().catch((err: unknown) => {
        logger.warn('cannot list replica leases; adopting only this replica\'s own pods', {error: (err as Error).message})
        return {stateOf: (o: string | undefined) => (o === ownerLabel ? 'self' : 'live'), leases: []} satisfies ReplicaView
      })
    }
    const {adopted, deleted} = await cache.adopt(pods, view)
    logger.info('pod runtime started', {namespace: options.namespace, owner, lease: lease?.name, leaseDurationSeconds: lease?.durationSeconds, template: templates.current().origin, templateVersion: templates.current().version, adopted: adopted.length, deleted: deleted.length})
  })
  cache.setStartup(started)
  handlePorchLeftovers(started, options, clients, logger)
  const gc = new PodGarbageCollector(cache.collector, options.scanIntervalMs, logger, options.telemetry)
  void started.then(() => gc.start())
  const warmedUp = startWarmUp(options, {cache, started, cleanups}, logger)
  return new PodRuntime({clients, manager, templates, cache, gc, lease, started, warmedUp, cleanups})
}
