/**
 * RegistryClient: resolves an image reference to its manifest, platform, config and the command
 * fnr runs for it, speaking the OCI distribution API directly.
 *
 * - Manifests are always requested with all four manifest media types in Accept (OCI and Docker,
 *   manifest and index/list); an index is resolved to the configured platform (linux/amd64 by
 *   default) here, never by the server. Every manifest and config blob is checked against its
 *   digest.
 * - Auth: anonymous first; on 401 the WWW-Authenticate challenge decides. Basic sends the docker
 *   config credentials for that registry; Bearer fetches a token from the realm (with the
 *   credentials when there are any) and caches it per scope until it expires. A 401 with a cached
 *   or just-issued token that has gone stale fetches one fresh token and retries once.
 *   Credentials are only ever sent over TLS, or to registries listed as insecure.
 * - TLS: system roots plus any custom CAs, per request (own https agent). There is no fallback to
 *   plain HTTP; a registry listed as insecure is tried over HTTPS without verification first, then
 *   over HTTP when it does not speak TLS.
 * - Failures: network errors, 429 and 5xx are retried a bounded number of times with backoff; the
 *   rest becomes an FnrError naming the image and the registry (401 Unauthenticated,
 *   403 PermissionDenied, 404 NotFound, down or 5xx Unavailable, timeout DeadlineExceeded,
 *   certificate problems FailedPrecondition).
 * - Cache: metadata is cached per resolved reference and platform, bounded (LRU). Digest
 *   references never change; a tag is re-checked with a HEAD request once `revalidateAfterMs` has
 *   passed, and the digest the registry reports decides whether the cached entry still holds.
 */
import {createHash, type Hash} from 'node:crypto'
import {closeSync, ftruncateSync, openSync, writeSync} from 'node:fs'
import http from 'node:http'
import https from 'node:https'

import {FnrError, firstLine, type ErrorKind} from '../errors.js'
import type {Logger} from '../telemetry/log.js'
import type {Metrics} from '../telemetry/metrics.js'
import {metricsOf, type Telemetry} from '../telemetry/telemetry.js'
import {DockerConfig, TokenCache, basicAuthorization, findChallenge, parseWwwAuthenticate, type RegistryCredentials} from './auth.js'
import {BodyTooLargeError, RequestTimeoutError, formatMs, httpRequest, type BodySink, type HttpResponse} from './http.js'
import {
  DEFAULT_PLATFORM,
  MANIFEST_ACCEPT,
  MediaType,
  formatPlatform,
  isImageManifestMediaType,
  isIndexMediaType,
  listPlatforms,
  normalisePlatform,
  parsePlatform,
  requireFunctionCommand,
  functionCommand,
  selectPlatformEntry,
  type IndexEntry,
  type Platform,
} from './image-config.js'
import {ImageReference, normaliseRegistryHost, parseImageReference, registryApiHost} from './reference.js'
import {isCertificateError, isTlsProtocolError, trustedCertificates} from './tls.js'

export interface RegistryClientOptions {
  /** Credentials; anonymous everywhere when absent. */
  dockerConfig?: DockerConfig
  /** PEM CA certificates trusted in addition to the system roots. */
  caCertificates?: readonly string[]
  /** Registries ("host[:port]") that may be reached without TLS verification or over plain HTTP. */
  insecureRegistries?: readonly string[]
  /** Registries on loopback (localhost, 127.0.0.0/8, [::1]) count as insecure too, as the Docker daemon treats them. */
  insecureLoopback?: boolean
  /** Platform picked from an index: "linux/amd64" (default) or a Platform. */
  platform?: string | Platform
  /** Deadline of each HTTP exchange (default 30 s). */
  requestTimeoutMs?: number
  /** Extra attempts after a network error, 429 or 5xx (default 2). */
  retries?: number
  /** First backoff delay; doubled each retry, capped at 5 s (default 250 ms). */
  retryDelayMs?: number
  /** Cached image metadata entries (default 500). */
  cacheSize?: number
  /** How long a tag's metadata is trusted before the tag is re-checked (default 60 s; Infinity never re-checks). */
  revalidateAfterMs?: number
  logger?: Logger
  /** Where registry requests and metadata lookups are counted (the server's); default none. */
  telemetry?: Telemetry
  userAgent?: string
  /** Clock, for tests. */
  now?: () => number
}

export interface InspectOptions {
  /** Overrides the client's platform for this call. */
  platform?: string | Platform
  signal?: AbortSignal
  /** When true (default), an image with neither Entrypoint nor Cmd is an error. */
  requireCommand?: boolean
}

export interface ImageMetadata {
  /** The reference as given. */
  image: string
  /** Normalised reference, e.g. "docker.io/library/alpine:latest". */
  reference: string
  registry: string
  repository: string
  tag?: string
  /** Digest of the platform's image manifest (Porch's "image digest"). */
  digest: string
  /** Media type of that manifest. */
  mediaType: string
  /** Set when the reference named an index or manifest list. */
  index?: {digest: string; mediaType: string; platforms: string[]}
  /** registry/repository@<digest of what the reference names> (the index digest for a multi-platform image). */
  pinnedReference: string
  platform: Platform
  configDigest: string
  entrypoint: string[]
  cmd: string[]
  /** What the function runner runs (image-config.ts: Entrypoint + Cmd, else either); [] when neither. */
  command: string[]
  /** Config plus compressed layers, in bytes. */
  size: number
  layers: number
  created?: string
}

/** A layer of an image manifest, as the manifest lists it. */
export interface LayerDescriptor {
  mediaType: string
  digest: string
  /** Compressed size in bytes, when the manifest says. */
  size?: number
}

/** The fields of an image config's `config` object a container runtime uses. */
export interface ImageRunConfig {
  entrypoint: string[]
  cmd: string[]
  /** KEY=VALUE, in the image's order. */
  env: string[]
  /** "" when the image sets none. */
  workingDir: string
  /** The image's USER ("" when none). */
  user: string
}

/** What pulling an image needs: its metadata (digest, platform), its run config and its layers, bottom first. */
export interface PullPlan {
  meta: ImageMetadata
  config: ImageRunConfig
  layers: LayerDescriptor[]
}

export interface FetchedManifest {
  digest: string
  mediaType: string
  body: Buffer
  json: ManifestJson
}

interface ManifestJson {
  schemaVersion?: number
  mediaType?: string
  config?: {mediaType?: string; digest?: string; size?: number}
  layers?: Array<{mediaType?: string; digest?: string; size?: number}>
  manifests?: IndexEntry[]
}

interface ImageConfigJson {
  architecture?: string
  os?: string
  variant?: string
  created?: string
  config?: {Entrypoint?: string[] | null; Cmd?: string[] | null; Env?: string[] | null; WorkingDir?: string | null; User?: string | null}
}

interface RegistryState {
  /** Decided scheme; undefined until an insecure registry has been probed. */
  scheme?: 'https:' | 'http:'
  /** The registry asked for Basic before, so send it up front. */
  basic?: boolean
}

interface CacheEntry {
  meta: ImageMetadata
  /** Digest of what the reference names (index or manifest). */
  topDigest: string
  checkedAt: number
}

interface RequestContext {
  image: string
  registry: string
  signal?: AbortSignal
}

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
const MAX_CONFIG_BYTES = 16 * 1024 * 1024
/** The largest layer downloadBlob takes when the manifest gives no size (16 GiB). */
const MAX_LAYER_BYTES = 16 * 1024 * 1024 * 1024
const MAX_TOKEN_BYTES = 1024 * 1024
const MAX_REDIRECTS = 5
const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504])
const RETRYABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'ECONNABORTED', 'UND_ERR_SOCKET', 'FNR_REQUEST_TIMEOUT'])

export class RegistryClient {
  private readonly dockerConfig: DockerConfig
  private readonly platform: Platform
  private readonly insecure: Set<string>
  private readonly insecureLoopback: boolean
  private readonly requestTimeoutMs: number
  private readonly retries: number
  private readonly retryDelayMs: number
  private readonly cacheSize: number
  private readonly revalidateAfterMs: number
  private readonly logger?: Logger
  private readonly metrics: Metrics
  private readonly userAgent: string
  private readonly now: () => number
  private readonly httpsAgent: https.Agent
  private readonly insecureHttpsAgent: https.Agent
  private readonly httpAgent: http.Agent
  private readonly tokens: TokenCache
  private readonly states = new Map<string, RegistryState>()
  private readonly cache = new Map<string, CacheEntry>()
  private readonly inFlight = new Map<string, Promise<ImageMetadata>>()
  /** Token cache keys by registry and our scope, so later requests send the cached token up front. */
  private readonly remembered = new Map<string, string>()

  constructor(options: RegistryClientOptions = {}) {
    this.dockerConfig = options.dockerConfig ?? DockerConfig.empty()
    this.platform = toPlatform(options.platform ?? DEFAULT_PLATFORM)
    this.insecure = new Set((options.insecureRegistries ?? []).map(normaliseRegistryHost).filter((h) => h !== ''))
    this.insecureLoopback = options.insecureLoopback ?? false
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000
    this.retries = Math.max(0, options.retries ?? 2)
    this.retryDelayMs = Math.max(0, options.retryDelayMs ?? 250)
    this.cacheSize = Math.max(1, options.cacheSize ?? 500)
    this.revalidateAfterMs = options.revalidateAfterMs ?? 60_000
    this.logger = options.logger
    this.metrics = metricsOf(options.telemetry)
    this.userAgent = options.userAgent ?? 'fnr'
    this.now = options.now ?? Date.now
    this.tokens = new TokenCache(256, this.now)
    const ca = trustedCertificates(options.caCertificates ?? [])
    this.httpsAgent = new https.Agent({keepAlive: true, minVersion: 'TLSv1.2', ...(ca === undefined ? {} : {ca})})
    this.insecureHttpsAgent = new https.Agent({keepAlive: true, rejectUnauthorized: false})
    this.httpAgent = new http.Agent({keepAlive: true})
  }

  /** The platform picked from indexes when a call does not say. */
  get defaultPlatform(): Platform {
    return this.platform
  }

  /**
   * Resolves an image to its platform manifest and config. Results are cached (see the file
   * comment); concurrent calls for the same image and platform share one resolution (and so the
   * first caller's signal). When re-checking a cached tag fails because the registry is down or
   * slow, the cached metadata is returned and the tag is re-checked on the next call.
   */
  async inspect(image: string | ImageReference, options: InspectOptions = {}): Promise<ImageMetadata> {
    const ref = typeof image === 'string' ? parseImageReference(image) : image
    const platform = options.platform === undefined ? this.platform : toPlatform(options.platform)
    const key = `${ref.toString()}|${formatPlatform(platform)}`
    let pending = this.inFlight.get(key)
    if (pending === undefined) {
      pending = this.inspectUncoalesced(ref, platform, key, options.signal).finally(() => this.inFlight.delete(key))
      this.inFlight.set(key, pending)
    }
    const meta = await pending
    // A copy, so callers cannot change what the cache holds.
    const result: ImageMetadata = {...structuredClone(meta), image: ref.input || ref.toString()}
    if (options.requireCommand ?? true) requireFunctionCommand(result.image, result.entrypoint, result.cmd)
    return result
  }

  /** Fetches a manifest (with all four Accept types) and verifies its digest. */
  async fetchManifest(ref: ImageReference, identifier: string = ref.identifier, signal?: AbortSignal): Promise<FetchedManifest> {
    const ctx = this.context(ref, signal)
    const res = await this.registryRequest(ref, `/v2/${ref.repository}/manifests/${identifier}`, ctx, {accept: MANIFEST_ACCEPT, maxBytes: MAX_MANIFEST_BYTES})
    this.expectOk(res, ctx, identifier.includes(':') ? `manifest ${identifier}` : undefined)
    const algorithm = identifier.includes(':') ? identifier.split(':')[0]! : 'sha256'
    const digest = `${algorithm}:${createHash(algorithm).update(res.body).digest('hex')}`
    if (identifier.includes(':') && digest !== identifier) {
      throw new FnrError('Internal', `registry ${ref.registry} returned a manifest with digest ${digest} for ${identifier} of image "${ctx.image}"`)
    }
    const json = parseJson<ManifestJson>(res.body, `manifest of image "${ctx.image}"`)
    const contentType = headerValue(res.headers['content-type'])?.split(';')[0]?.trim()
    const mediaType = json.mediaType ?? (contentType && contentType !== 'application/json' ? contentType : undefined) ?? (json.manifests ? MediaType.OciIndex : MediaType.OciManifest)
    return {digest, mediaType, body: res.body, json}
  }

  /** Fetches a blob (following redirects) and verifies its digest. */
  async fetchBlob(ref: ImageReference, digest: string, signal?: AbortSignal, maxBytes = MAX_CONFIG_BYTES): Promise<Buffer> {
    const ctx = this.context(ref, signal)
    const res = await this.registryRequest(ref, `/v2/${ref.repository}/blobs/${digest}`, ctx, {maxBytes, followRedirects: true})
    this.expectOk(res, ctx, `blob ${digest}`)
    const algorithm = digest.split(':')[0]!
    const actual = `${algorithm}:${createHash(algorithm).update(res.body).digest('hex')}`
    if (actual !== digest) throw new FnrError('Internal', `registry ${ref.registry} returned blob ${actual} instead of ${digest} for image "${ctx.image}"`)
    return res.body
  }
  /**
   * Downloads a blob into `file` (created or truncated, mode 0600) without holding it in memory,
   * and verifies its digest; a retried transfer starts the file again. Returns its size. A
   * mismatch is FnrError('Internal') and the file is left for the caller to remove.
   */
  async downloadBlob(ref: ImageReference, digest: string, file: string, options: {signal?: AbortSignal; size?: number} = {}): Promise<number> {
    const ctx = this.context(ref, options.signal)
    const algorithm = digest.split(':')[0]!
    if (algorithm !== 'sha256' && algorithm !== 'sha512') throw new FnrError('FailedPrecondition', `image "${ctx.image}": blob digest ${digest} uses an unsupported algorithm`)
    const fd = openSync(file, 'w', 0o600)
    let hash: Hash = createHash(algorithm)
    let size = 0
    const sink: BodySink = {
      begin() {
        ftruncateSync(fd, 0)
        hash = createHash(algorithm)
        size = 0
      },
      write(chunk) {
        writeSync(fd, chunk, 0, chunk.length, size)
        size += chunk.length
        hash.update(chunk)
      },
    }
    try {
      const maxBytes = options.size !== undefined && options.size >= 0 ? options.size : MAX_LAYER_BYTES
      const res = await this.registryRequest(ref, `/v2/${ref.repository}/blobs/${digest}`, ctx, {maxBytes, followRedirects: true, sink})
      this.expectOk(res, ctx, `blob ${digest}`)
    } finally {
      closeSync(fd)
    }
    const actual = `${algorithm}:${hash.digest('hex')}`
    if (actual !== digest) throw new FnrError('Internal', `registry ${ref.registry} returned blob ${actual} instead of ${digest} for image "${ctx.image}"`)
    if (options.size !== undefined && size !== options.size) throw new FnrError('Internal', `registry ${ref.registry} returned ${size} bytes for blob ${digest} of image "${ctx.image}", the manifest says ${options.size}`)
    return size
  }

  /**
   * Resolves an image for a pull: the manifest of the platform asked for (the client's by
   * default), its config and its layers. Not cached: a caller that pulls keeps what it pulled.
   */
  async planPull(image: string | ImageReference, options: {platform?: string | Platform; signal?: AbortSignal} = {}): Promise<PullPlan> {
    const ref = typeof image === 'string' ? parseImageReference(image) : image
    const platform = options.platform === undefined ? this.platform : toPlatform(options.platform)
    const {meta, config, layers} = await this.resolve(ref, platform, options.signal)
    return {meta: {...meta, image: ref.input || ref.toString()}, config, layers}
  }


  /** Forgets cached metadata and tokens. */
  clearCache(): void {
    this.cache.clear()
    this.tokens.clear()
  }

  /** Closes idle connections. The client can still be used afterwards (new connections are made). */
  close(): void {
    this.httpsAgent.destroy()
    this.insecureHttpsAgent.destroy()
    this.httpAgent.destroy()
  }

  private context(ref: ImageReference, signal?: AbortSignal): RequestContext {
    return {image: ref.input || ref.toString(), registry: ref.registry, signal}
  }

  private async inspectUncoalesced(ref: ImageReference, platform: Platform, key: string, signal?: AbortSignal): Promise<ImageMetadata> {
    const cached = this.cacheGet(key)
    this.metrics.registryMetadataCache(cached === undefined ? 'miss' : ref.isDigest || this.now() - cached.checkedAt < this.revalidateAfterMs ? 'hit' : 'revalidated')
    if (cached !== undefined) {
      if (ref.isDigest || this.now() - cached.checkedAt < this.revalidateAfterMs) return cached.meta
      let current: string | undefined
      try {
        current = await this.headDigest(ref, signal)
      } catch (err) {
        // A registry that is down or slow does not make known metadata wrong: serve it, re-check next time.
        if (err instanceof FnrError && (err.kind === 'Unavailable' || err.kind === 'DeadlineExceeded') && !signal?.aborted) {
          this.logger?.warn('registry: could not re-check a tag, using cached metadata', {image: ref.toString(), error: err.message})
          return cached.meta
        }
        throw err
      }
      if (current === cached.topDigest) {
        cached.checkedAt = this.now()
        return cached.meta
      }
      this.logger?.debug('registry: tag moved', {image: ref.toString(), from: cached.topDigest, to: current ?? 'unknown'})
      if (current !== undefined) {
        const byDigest = this.cacheGet(digestKey(ref, current, platform))
        if (byDigest !== undefined) return this.remember(key, ref, byDigest.meta, current)
      }
    }
    const {meta, topDigest} = await this.resolve(ref, platform, signal)
    const pinned = new ImageReference({registry: ref.registry, repository: ref.repository, digest: topDigest})
    const pinnedKey = `${pinned.toString()}|${formatPlatform(platform)}`
    if (pinnedKey !== key) this.remember(pinnedKey, pinned, meta, topDigest)
    return this.remember(key, ref, meta, topDigest)
  }

  private remember(key: string, ref: ImageReference, meta: ImageMetadata, topDigest: string): ImageMetadata {
    const stored: ImageMetadata = {...meta, reference: ref.toString(), tag: ref.tag}
    if (ref.tag === undefined) delete stored.tag
    this.cache.delete(key)
    this.cache.set(key, {meta: stored, topDigest, checkedAt: this.now()})
    while (this.cache.size > this.cacheSize) {
      const oldest = this.cache.keys().next().value
      if (oldest === undefined) break
      this.cache.delete(oldest)
    }
    return stored
  }

  private cacheGet(key: string): CacheEntry | undefined {
    const entry = this.cache.get(key)
    if (entry !== undefined) {
      this.cache.delete(key)
      this.cache.set(key, entry)
    }
    return entry
  }

  /** The digest a tag points at now (HEAD), or undefined when the registry does not say. */
  private async headDigest(ref: ImageReference, signal?: AbortSignal): Promise<string | undefined> {
    const ctx = this.context(ref, signal)
    const res = await this.registryRequest(ref, `/v2/${ref.repository}/manifests/${ref.identifier}`, ctx, {method: 'HEAD', accept: MANIFEST_ACCEPT, maxBytes: 0})
    // 401/403/404 mean what they say; any other refusal of HEAD (405, 400…) just forces a full GET.
    if ([401, 403, 404].includes(res.status)) this.expectOk(res, ctx)
    if (res.status < 200 || res.status >= 300) return undefined
    const digest = headerValue(res.headers['docker-content-digest'])
    return digest !== undefined && /^sha(256|512):[a-f0-9]+$/.test(digest) ? digest : undefined
  }

  private async resolve(ref: ImageReference, platform: Platform, signal?: AbortSignal): Promise<{meta: ImageMetadata; topDigest: string; config: ImageRunConfig; layers: LayerDescriptor[]}> {
    const ctx = this.context(ref, signal)
    const top = await this.fetchManifest(ref, ref.identifier, signal)
    let manifest = top
    let index: ImageMetadata['index']
    if (isIndexMediaType(top.mediaType) || (top.json.manifests !== undefined && top.json.layers === undefined)) {
      const entries = top.json.manifests ?? []
      const entry = selectPlatformEntry(entries, platform)
      const platforms = listPlatforms(entries)
      if (entry === undefined) {
        throw new FnrError('NotFound', `image "${ctx.image}" has no ${formatPlatform(platform)} variant in registry ${ref.registry} (it has: ${platforms.join(', ') || 'none'})`)
      }
      index = {digest: top.digest, mediaType: top.mediaType, platforms}
      manifest = await this.fetchManifest(ref, entry.digest, signal)
      if (isIndexMediaType(manifest.mediaType)) {
        throw new FnrError('Internal', `image "${ctx.image}": the ${formatPlatform(platform)} entry of the index is itself an index, which fnr does not follow`)
      }
    }
    if (manifest.mediaType === MediaType.DockerSchema1 || manifest.mediaType === MediaType.DockerSchema1Signed) {
      throw new FnrError('FailedPrecondition', `image "${ctx.image}" uses the Docker schema 1 manifest format, which fnr does not support; push it again with a current tool`)
    }
    if (!isImageManifestMediaType(manifest.mediaType) && manifest.json.config === undefined) {
      throw new FnrError('FailedPrecondition', `image "${ctx.image}" has manifest type ${manifest.mediaType}, not a container image`)
    }
    const configDescriptor = manifest.json.config
    if (configDescriptor?.digest === undefined) throw new FnrError('Internal', `manifest ${manifest.digest} of image "${ctx.image}" has no config`)
    if (configDescriptor.mediaType !== undefined && configDescriptor.mediaType !== MediaType.OciConfig && configDescriptor.mediaType !== MediaType.DockerConfig) {
      throw new FnrError('FailedPrecondition', `image "${ctx.image}" is not a container image (its config is ${configDescriptor.mediaType})`)
    }
    const configBody = await this.fetchBlob(ref, configDescriptor.digest, signal)
    const config = parseJson<ImageConfigJson>(configBody, `config of image "${ctx.image}"`)
    const imagePlatform = normalisePlatform({os: config.os ?? platform.os, architecture: config.architecture ?? platform.architecture, variant: config.variant})
    if (index === undefined && config.os !== undefined && config.architecture !== undefined) {
      const want = normalisePlatform(platform)
      if (imagePlatform.os !== want.os || imagePlatform.architecture !== want.architecture) {
        throw new FnrError('NotFound', `image "${ctx.image}" is ${formatPlatform(imagePlatform)} only, not ${formatPlatform(want)} (registry ${ref.registry})`)
      }
    }
    const entrypoint = stringArray(config.config?.Entrypoint)
    const cmd = stringArray(config.config?.Cmd)
    const layers = manifest.json.layers ?? []
    const size = (configDescriptor.size ?? configBody.length) + layers.reduce((sum, l) => sum + (typeof l.size === 'number' ? l.size : 0), 0)
    const meta: ImageMetadata = {
      image: ctx.image,
      reference: ref.toString(),
      registry: ref.registry,
      repository: ref.repository,
      tag: ref.tag,
      digest: manifest.digest,
      mediaType: manifest.mediaType,
      pinnedReference: `${ref.name}@${top.digest}`,
      platform: imagePlatform,
      configDigest: configDescriptor.digest,
      entrypoint,
      cmd,
      command: functionCommand(entrypoint, cmd),
      size,
      layers: layers.length,
    }
    if (index !== undefined) meta.index = index
    if (typeof config.created === 'string') meta.created = config.created
    const runConfig: ImageRunConfig = {
      entrypoint,
      cmd,
      env: stringArray(config.config?.Env),
      workingDir: typeof config.config?.WorkingDir === 'string' ? config.config.WorkingDir : '',
      user: typeof config.config?.User === 'string' ? config.config.User : '',
    }
    const layerList: LayerDescriptor[] = layers.map((l, i) => {
      if (typeof l.digest !== 'string') throw new FnrError('Internal', `manifest ${manifest.digest} of image "${ctx.image}": layer ${i} has no digest`)
      return {mediaType: l.mediaType ?? MediaType.OciLayerGzip, digest: l.digest, ...(typeof l.size === 'number' ? {size: l.size} : {})}
    })
    return {meta, topDigest: top.digest, config: runConfig, layers: layerList}
  }

  // ---- HTTP with auth, retries and redirects ----------------------------------------------------

  private state(registry: string): RegistryState {
    let s = this.states.get(registry)
    if (s === undefined) {
      s = {}
      this.states.set(registry, s)
    }
    return s
  }

  private isInsecure(host: string): boolean {
    const normal = normaliseRegistryHost(host)
    return this.insecure.has(normal) || (this.insecureLoopback && isLoopbackHost(normal))
  }

  /**
   * A request to the registry API with authentication: anonymous (or with what worked before),
   * then whatever the 401 challenge asks for. Returns the final response, whatever its status.
   */
  private async registryRequest(
    ref: ImageReference,
    pathname: string,
    ctx: RequestContext,
    opts: {method?: 'GET' | 'HEAD'; accept?: string; maxBytes: number; followRedirects?: boolean; sink?: BodySink},
  ): Promise<HttpResponse> {
    const registry = ref.registry
    const state = this.state(registry)
    const creds = this.dockerConfig.credentialsFor(registry)
    const scope = `repository:${ref.repository}:pull`
    let authorization: string | undefined
    let tokenKey: string | undefined
    if (creds?.registryToken !== undefined) authorization = `Bearer ${creds.registryToken}`
    else if (state.basic && creds?.username !== undefined) authorization = basicAuthorization(creds.username, creds.password ?? '')
    else {
      const bearer = this.bearerFor(registry, scope)
      if (bearer !== undefined) ({authorization, tokenKey} = bearer)
    }

    let freshTokens = 0
    let basicTried = authorization?.startsWith('Basic ') ?? false
    for (;;) {
      const res = await this.send(registry, pathname, ctx, {...opts, authorization})
      this.metrics.registryRequest(opts.method ?? 'GET', res.status)
      if (res.status !== 401) return res
      const challenges = parseWwwAuthenticate(res.headers['www-authenticate'])
      const bearer = findChallenge(challenges, 'bearer')
      const basic = findChallenge(challenges, 'basic')
      if (bearer !== undefined && creds?.registryToken === undefined) {
        const realm = bearer.params.realm
        if (!realm) return res
        const service = bearer.params.service ?? ''
        const wantScope = bearer.params.scope ?? scope
        const key = TokenCache.key(registry, realm, service, wantScope)
        if (tokenKey !== undefined) this.tokens.delete(tokenKey)
        // A just-issued token refused for lack of permission will not do better the second time.
        const usedToken = authorization?.startsWith('Bearer ') ?? false
        if (usedToken && bearer.params.error === 'insufficient_scope') return res
        if (freshTokens >= 2) return res
        freshTokens++
        const token = await this.fetchToken(registry, {realm, service, scope: wantScope}, creds, ctx)
        this.remembered.delete(`${registry}\n${scope}`)
        this.remembered.set(`${registry}\n${scope}`, key)
        if (this.remembered.size > 1024) this.remembered.delete(this.remembered.keys().next().value!)
        authorization = `Bearer ${token}`
        tokenKey = key
        continue
      }
      if (basic !== undefined && !basicTried && creds?.username !== undefined) {
        this.assertCredentialsMaySend(registry, ctx)
        state.basic = true
        basicTried = true
        authorization = basicAuthorization(creds.username, creds.password ?? '')
        continue
      }
      return res
    }
  }

  private bearerFor(registry: string, scope: string): {authorization: string; tokenKey: string} | undefined {
    const key = this.remembered.get(`${registry}\n${scope}`)
    if (key === undefined) return undefined
    const token = this.tokens.get(key)
    return token === undefined ? undefined : {authorization: `Bearer ${token}`, tokenKey: key}
  }

  private assertCredentialsMaySend(registry: string, ctx: RequestContext): void {
    const scheme = this.state(registry).scheme ?? 'https:'
    if (scheme === 'http:' && !this.isInsecure(registry)) {
      throw new FnrError('FailedPrecondition', `refusing to send credentials for registry ${registry} over plain HTTP (image "${ctx.image}")`)
    }
  }

  /** Gets a bearer token from the realm of a challenge (distribution token spec, or OAuth2 with a refresh token). */
  private async fetchToken(
    registry: string,
    challenge: {realm: string; service: string; scope: string},
    creds: RegistryCredentials | undefined,
    ctx: RequestContext,
  ): Promise<string> {
    let realm: URL
    try {
      realm = new URL(challenge.realm)
    } catch {
      throw new FnrError('Internal', `registry ${registry} sent an invalid token realm ${JSON.stringify(challenge.realm)}`)
    }
    const hasSecret = creds?.identityToken !== undefined || creds?.username !== undefined
    if (hasSecret && realm.protocol === 'http:' && !this.isInsecure(registry) && !this.isInsecure(realm.host)) {
      throw new FnrError('FailedPrecondition', `refusing to send credentials for registry ${registry} to the plain-HTTP token service ${realm.origin} (image "${ctx.image}"); list it with --insecure-registry if that is intended`)
    }
    const scopes = challenge.scope.split(' ').filter((s) => s !== '')
    let res: HttpResponse
    const headers: Record<string, string> = {accept: 'application/json'}
    if (creds?.identityToken !== undefined) {
      const form = new URLSearchParams({grant_type: 'refresh_token', refresh_token: creds.identityToken, service: challenge.service, client_id: this.userAgent, scope: scopes.join(' ')})
      headers['content-type'] = 'application/x-www-form-urlencoded'
      res = await this.sendUrl(realm, ctx, {method: 'POST', headers, body: form.toString(), maxBytes: MAX_TOKEN_BYTES, what: `token service ${realm.origin}`})
    } else {
      const url = new URL(realm.href)
      if (challenge.service) url.searchParams.set('service', challenge.service)
      for (const s of scopes) url.searchParams.append('scope', s)
      if (creds?.username !== undefined) headers.authorization = basicAuthorization(creds.username, creds.password ?? '')
      res = await this.sendUrl(url, ctx, {method: 'GET', headers, maxBytes: MAX_TOKEN_BYTES, what: `token service ${realm.origin}`})
    }
    if (res.status === 401 || res.status === 403) {
      throw new FnrError(
        res.status === 401 ? 'Unauthenticated' : 'PermissionDenied',
        creds?.username !== undefined || creds?.identityToken !== undefined
          ? `registry ${registry} rejected the credentials from ${this.dockerConfig.source} for image "${ctx.image}" (token service answered ${res.status}${errorSuffix(res)})`
          : `registry ${registry} refused an anonymous token for image "${ctx.image}" (token service answered ${res.status}${errorSuffix(res)})`,
      )
    }
    if (res.status < 200 || res.status >= 300) {
      throw new FnrError(res.status >= 500 ? 'Unavailable' : 'Internal', `token service ${realm.origin} of registry ${registry} answered ${res.status}${errorSuffix(res)} for image "${ctx.image}"`)
    }
    const body = parseJson<{token?: unknown; access_token?: unknown; expires_in?: unknown}>(res.body, `token response of ${realm.origin}`)
    const token = typeof body.token === 'string' && body.token !== '' ? body.token : typeof body.access_token === 'string' ? body.access_token : ''
    if (token === '') throw new FnrError('Internal', `token service ${realm.origin} of registry ${registry} returned no token`)
    const expiresIn = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 60
    this.tokens.set(TokenCache.key(registry, challenge.realm, challenge.service, challenge.scope), token, expiresIn)
    return token
  }

  /** A registry API request: scheme choice (and insecure probing), redirects, retries. */
  private async send(
    registry: string,
    pathname: string,
    ctx: RequestContext,
    opts: {method?: 'GET' | 'HEAD'; accept?: string; maxBytes: number; followRedirects?: boolean; authorization?: string; sink?: BodySink},
  ): Promise<HttpResponse> {
    const state = this.state(registry)
    const host = registryApiHost(registry)
    const headers: Record<string, string> = {}
    if (opts.accept !== undefined) headers.accept = opts.accept
    if (opts.authorization !== undefined) headers.authorization = opts.authorization
    const what = `registry ${registry}`
    let scheme = state.scheme ?? 'https:'
    let url = new URL(`${scheme}//${host}${pathname}`)
    if (state.scheme === undefined && this.isInsecure(registry)) {
      try {
        const res = await this.sendUrl(url, ctx, {method: opts.method, headers, maxBytes: opts.maxBytes, what, insecureProbe: true, sink: opts.sink})
        state.scheme = 'https:'
        return await this.followRedirects(res, ctx, opts, headers, what)
      } catch (err) {
        if (!isTlsProtocolError(err) && (err as {code?: unknown}).code !== 'ECONNRESET') throw err
        this.logger?.debug('registry: insecure registry does not speak TLS, using plain HTTP', {registry})
        state.scheme = 'http:'
        scheme = 'http:'
        url = new URL(`${scheme}//${host}${pathname}`)
        if (opts.authorization !== undefined) this.assertCredentialsMaySend(registry, ctx)
      }
    } else if (state.scheme === undefined) {
      state.scheme = 'https:'
    }
    const res = await this.sendUrl(url, ctx, {method: opts.method, headers, maxBytes: opts.maxBytes, what, sink: opts.sink})
    return this.followRedirects(res, ctx, opts, headers, what)
  }

  private async followRedirects(
    first: HttpResponse,
    ctx: RequestContext,
    opts: {method?: 'GET' | 'HEAD'; maxBytes: number; followRedirects?: boolean; sink?: BodySink},
    headers: Record<string, string>,
    what: string,
  ): Promise<HttpResponse> {
    let res = first
    const origin = first.url.origin
    for (let hops = 0; opts.followRedirects && [301, 302, 303, 307, 308].includes(res.status); hops++) {
      const location = headerValue(res.headers.location)
      if (location === undefined) return res
      if (hops >= MAX_REDIRECTS) throw new FnrError('Unavailable', `${what}: too many redirects for image "${ctx.image}"`)
      const next = new URL(location, res.url)
      if (next.protocol === 'http:' && res.url.protocol === 'https:' && !this.isInsecure(next.host)) {
        throw new FnrError('FailedPrecondition', `${what} redirected image "${ctx.image}" from HTTPS to plain HTTP (${next.origin}); refusing`)
      }
      const nextHeaders = {...headers}
      // Credentials belong to the registry: never forward them to another host (S3, a CDN).
      if (next.origin !== origin) delete nextHeaders.authorization
      res = await this.sendUrl(next, ctx, {method: opts.method, headers: nextHeaders, maxBytes: opts.maxBytes, what, sink: opts.sink})
    }
    return res
  }

  /** One URL, with timeouts and bounded retries on network errors, 429 and 5xx. */
  private async sendUrl(
    url: URL,
    ctx: RequestContext,
    opts: {method?: 'GET' | 'HEAD' | 'POST'; headers: Record<string, string>; body?: string; maxBytes: number; what: string; insecureProbe?: boolean; sink?: BodySink},
  ): Promise<HttpResponse> {
    const agent = url.protocol === 'http:' ? this.httpAgent : this.isInsecure(url.host) ? this.insecureHttpsAgent : this.httpsAgent
    const headers = {'user-agent': this.userAgent, ...opts.headers}
    let lastError: unknown
    for (let attempt = 0; ; attempt++) {
      const started = this.now()
      try {
        const res = await httpRequest(url, {method: opts.method, headers, body: opts.body, agent, timeoutMs: this.requestTimeoutMs, signal: ctx.signal, maxBytes: opts.maxBytes, sink: opts.sink})
        this.logger?.debug('registry request', {method: opts.method ?? 'GET', url: url.href, status: res.status, ms: this.now() - started})
        if (RETRYABLE_STATUS.has(res.status) && attempt < this.retries) {
          await this.backoff(attempt, ctx, res)
          continue
        }
        if (RETRYABLE_STATUS.has(res.status)) {
          const why = res.status === 429 ? 'rate limited the request' : `answered ${res.status}`
          throw new FnrError('Unavailable', `${opts.what} ${why}${errorSuffix(res)} for image "${ctx.image}" (${attempt + 1} attempts)`)
        }
        return res
      } catch (err) {
        if (err instanceof FnrError) throw err
        if (ctx.signal?.aborted) throw abortError(ctx, opts.what)
        if (err instanceof BodyTooLargeError) throw new FnrError('ResourceExhausted', `${opts.what}: ${err.message} (image "${ctx.image}")`, {cause: err})
        if (isCertificateError(err)) {
          throw new FnrError(
            'FailedPrecondition',
            `TLS certificate of ${opts.what} is not trusted for image "${ctx.image}": ${firstLine((err as Error).message)} (give its CA with --ca-file / --tls-secret-path, or list it as insecure)`,
            {cause: err},
          )
        }
        if (opts.insecureProbe && (isTlsProtocolError(err) || (err as {code?: unknown}).code === 'ECONNRESET')) throw err
        if (isTlsProtocolError(err)) {
          throw new FnrError(
            'FailedPrecondition',
            `TLS handshake with ${opts.what} failed for image "${ctx.image}": ${describeTlsFailure(err)} (if it serves plain HTTP, list it as an insecure registry)`,
            {cause: err},
          )
        }
        lastError = err
        const code = (err as {code?: unknown}).code
        if (typeof code === 'string' && RETRYABLE_CODES.has(code) && attempt < this.retries) {
          await this.backoff(attempt, ctx)
          continue
        }
        if (err instanceof RequestTimeoutError) {
          throw new FnrError('DeadlineExceeded', `${opts.what} did not answer within ${formatMs(this.requestTimeoutMs)} for image "${ctx.image}" (${attempt + 1} attempts)`, {cause: err})
        }
        const message = firstLine((lastError as Error)?.message ?? String(lastError))
        throw new FnrError('Unavailable', `${opts.what} is unreachable for image "${ctx.image}": ${message} (${attempt + 1} attempts)`, {cause: err})
      }
    }
  }

  private async backoff(attempt: number, ctx: RequestContext, res?: HttpResponse): Promise<void> {
    let delay = Math.min(this.retryDelayMs * 2 ** attempt, 5000)
    const retryAfter = res === undefined ? undefined : Number(headerValue(res.headers['retry-after']))
    if (retryAfter !== undefined && Number.isFinite(retryAfter) && retryAfter >= 0) delay = Math.min(Math.max(delay, retryAfter * 1000), 5000)
    if (delay === 0) return
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        ctx.signal?.removeEventListener('abort', onAbort)
        resolve()
      }, delay)
      const onAbort = (): void => {
        clearTimeout(timer)
        reject(abortError(ctx, `registry ${ctx.registry}`))
      }
      ctx.signal?.addEventListener('abort', onAbort, {once: true})
    })
  }

  /** Maps a final non-2xx registry response to an FnrError naming the image and registry. */
  private expectOk(res: HttpResponse, ctx: RequestContext, what?: string): void {
    if (res.status >= 200 && res.status < 300) return
    const reg = `registry ${ctx.registry}`
    const detail = errorSuffix(res)
    let kind: ErrorKind
    let message: string
    switch (res.status) {
      case 401: {
        kind = 'Unauthenticated'
        message = this.dockerConfig.hasCredentialsFor(ctx.registry)
          ? `${reg} rejected the credentials from ${this.dockerConfig.source} for image "${ctx.image}"${detail}`
          : `${reg} requires authentication for image "${ctx.image}" and ${this.dockerConfig.source === '<none>' ? 'no credentials were given' : `${this.dockerConfig.source} has no credentials for it`}${detail}`
        break
      }
      case 403:
        kind = 'PermissionDenied'
        message = `${reg} denied access to image "${ctx.image}"${detail}`
        break
      case 404:
        kind = 'NotFound'
        message = what === undefined || what.startsWith('manifest') ? `image "${ctx.image}" not found in ${reg}${detail}` : `${what} of image "${ctx.image}" not found in ${reg}${detail}`
        break
      case 400:
        kind = 'InvalidArgument'
        message = `${reg} rejected the request for image "${ctx.image}"${detail}`
        break
      default:
        kind = res.status >= 500 ? 'Unavailable' : 'Internal'
        message = `${reg} answered ${res.status} for image "${ctx.image}"${detail}`
    }
    throw new FnrError(kind, message, {details: {status: res.status, registry: ctx.registry, image: ctx.image}})
  }
}

/** The cache key of the content a digest names in the repository of `ref`. */
function digestKey(ref: ImageReference, digest: string, platform: Platform): string {
  // The same form as the pinned entry inspectUncoalesced stores.
  return `${new ImageReference({registry: ref.registry, repository: ref.repository, digest}).toString()}|${formatPlatform(platform)}`
}

/** localhost, 127.0.0.0/8 or [::1], with or without a port. */
export function isLoopbackHost(host: string): boolean {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '')
  return name === 'localhost' || name === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)
}

function toPlatform(p: string | Platform): Platform {
  return typeof p === 'string' ? parsePlatform(p) : normalisePlatform(p)
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

function stringArray(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
}

function parseJson<T>(body: Buffer, what: string): T {
  try {
    const value = JSON.parse(body.toString('utf8')) as unknown
    if (value === null || typeof value !== 'object') throw new Error('not a JSON object')
    return value as T
  } catch (err) {
    throw new FnrError('Internal', `${what} is not valid JSON: ${(err as Error).message}`, {cause: err})
  }
}

/** " (CODE: message)" from a registry error body, or "" when there is nothing useful. */
function errorSuffix(res: HttpResponse): string {
  if (res.body.length === 0) return ''
  try {
    const doc = JSON.parse(res.body.toString('utf8')) as {errors?: Array<{code?: string; message?: string}>; error?: string; details?: string}
    const first = doc.errors?.[0]
    if (first !== undefined) return ` (${[first.code, first.message].filter(Boolean).join(': ')})`
    if (typeof doc.error === 'string') return ` (${doc.error}${typeof doc.details === 'string' ? `: ${doc.details}` : ''})`
  } catch {
    const text = res.body.toString('utf8').trim().split('\n', 1)[0] ?? ''
    if (text !== '' && text.length < 200 && !text.startsWith('<')) return ` (${text})`
  }
  return ''
}

/** A short reason for a failed handshake; OpenSSL's own text runs over several lines. */
function describeTlsFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err)
  if (/wrong version number|packet length too long|http request/i.test(message)) return 'the server does not speak TLS'
  return firstLine(message.replace(/\s+/g, ' '))
}

function abortError(ctx: RequestContext, what: string): FnrError {
  const reason = ctx.signal?.reason as {name?: string} | undefined
  if (reason?.name === 'TimeoutError') return new FnrError('DeadlineExceeded', `timed out talking to ${what} for image "${ctx.image}"`, {cause: reason})
  return new FnrError('Cancelled', `cancelled while talking to ${what} for image "${ctx.image}"`, {cause: reason})
}
