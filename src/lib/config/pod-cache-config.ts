/**
 * --pod-cache-config: per-image pod settings and the warm-up list, in Porch's format (spec §4.13):
 * a YAML list of
 *
 *   - name: ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1.5   # matched exactly against the request image
 *     timeToLive: 30m                    # Go duration; missing, invalid or 0 → --pod-ttl
 *     maxWaitlistLength: 2               # missing or ≤ 0 → --max-waitlist-length
 *     maxParallelPodsPerFunction: 2      # missing or ≤ 0 → --max-parallel-pods-per-function
 *     resources: {requests: {...}, limits: {...}}   # optional, for the function container
 *     responseCache: true                # fnr only, optional: the response cache for this image:
 *                                        # false never, true with --cache-ttl, or a Go duration (its TTL)
 *
 * Duplicates: the last entry wins (as upstream). A file that is missing is "no settings" (the
 * caller logs it); a file that is not such a list is a Config error naming the file and entry.
 * Field problems upstream silently ignores (a bad timeToLive) fall back to the default and are
 * reported as warnings.
 */
import {parse as parseYaml} from 'yaml'

import {FnrError} from '../errors.js'
import {parseGoDuration} from './go-flags.js'
import {readConfigFile, type ConfigFileError} from './read-file.js'

export interface ResourceRequirements {
  requests?: Record<string, string>
  limits?: Record<string, string>
}

export interface PodCacheConfigEntry {
  name: string
  timeToLive?: string
  maxWaitlistLength?: number
  maxParallelPodsPerFunction?: number
  resources?: ResourceRequirements
  /** fnr's response cache for this image: false off, true on (--cache-ttl), or its TTL in ms (0 off). Porch ignores the field. */
  responseCache?: boolean | number
}

/** The flag values every image falls back to. */
export interface PodSettingsDefaults {
  ttlMs: number
  maxWaitlistLength: number
  maxParallelPods: number
}

export interface ImagePodSettings extends PodSettingsDefaults {
  resources?: ResourceRequirements
}

function quantityMap(value: unknown, where: string): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'object' || Array.isArray(value)) throw new FnrError('Config', `${where} must be a map of resource names to quantities`)
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v !== 'string' && typeof v !== 'number') throw new FnrError('Config', `${where}.${k} must be a quantity like 100m or 128Mi`)
    out[k] = String(v)
  }
  return out
}

function integerField(value: unknown, where: string): number | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new FnrError('Config', `${where} must be an integer, got ${JSON.stringify(value)}`)
  return value
}

export class PodCacheConfig {
  private readonly byImage = new Map<string, PodCacheConfigEntry>()

  private constructor(
    readonly entries: readonly PodCacheConfigEntry[],
    readonly source: string,
    readonly warnings: readonly string[],
  ) {
    for (const e of entries) this.byImage.set(e.name, e)
  }

  static empty(source = ''): PodCacheConfig {
    return new PodCacheConfig([], source, [])
  }

  /** Parses the file's text; FnrError('Config') naming the source and entry on a bad shape. */
  static parse(text: string, source: string): PodCacheConfig {
    let doc: unknown
    try {
      doc = parseYaml(text)
    } catch (err) {
      throw new FnrError('Config', `pod cache config ${source} is not valid YAML: ${(err as Error).message.split('\n', 1)[0]}`, {cause: err})
    }
    if (doc === null || doc === undefined) return new PodCacheConfig([], source, [])
    if (!Array.isArray(doc)) {
      throw new FnrError('Config', `pod cache config ${source} must be a YAML list of {name, timeToLive, maxWaitlistLength, maxParallelPodsPerFunction} entries`)
    }
    const entries: PodCacheConfigEntry[] = []
    const warnings: string[] = []
    doc.forEach((raw: unknown, i) => {
      const where = `pod cache config ${source} entry ${i + 1}`
      if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new FnrError('Config', `${where} must be a map with a name`)
      const r = raw as Record<string, unknown>
      if (typeof r.name !== 'string' || r.name.trim() === '') throw new FnrError('Config', `${where} has no name (the function image)`)
      const entry: PodCacheConfigEntry = {name: r.name}
      const w = `${where} (${r.name})`
      if (r.timeToLive !== undefined && r.timeToLive !== null) {
        const ttl = String(r.timeToLive)
        const ms = parseGoDuration(ttl)
        if (ms === undefined || ms < 0) warnings.push(`${w}: timeToLive ${JSON.stringify(ttl)} is not a duration; using --pod-ttl`)
        entry.timeToLive = ttl
      }
      const waitlist = integerField(r.maxWaitlistLength, `${w}: maxWaitlistLength`)
      if (waitlist !== undefined) entry.maxWaitlistLength = waitlist
      const pods = integerField(r.maxParallelPodsPerFunction, `${w}: maxParallelPodsPerFunction`)
      if (pods !== undefined) entry.maxParallelPodsPerFunction = pods
      if (r.resources !== undefined && r.resources !== null) {
        if (typeof r.resources !== 'object' || Array.isArray(r.resources)) throw new FnrError('Config', `${w}: resources must be a map with requests and/or limits`)
        const res = r.resources as Record<string, unknown>
        const requests = quantityMap(res.requests, `${w}: resources.requests`)
        const limits = quantityMap(res.limits, `${w}: resources.limits`)
        entry.resources = {...(requests ? {requests} : {}), ...(limits ? {limits} : {})}
      }
      const cache = responseCacheField(r.responseCache, `${w}: responseCache`)
      if (cache !== undefined) entry.responseCache = cache
      entries.push(entry)
    })
    return new PodCacheConfig(entries, source, warnings)
  }

  /**
   * Loads a file. Missing (ENOENT) gives an empty config with `missing: true`, so the caller can
   * say so; other read errors and bad content are Config errors.
   */
  static async load(path: string): Promise<{config: PodCacheConfig; missing: boolean}> {
    if (path === '') return {config: PodCacheConfig.empty(), missing: false}
    let text: string
    try {
      // A regular file of at most 4 MiB: a FIFO used to hang the start, /dev/zero to be read until memory ran out.
      text = (await readConfigFile(path, {label: `pod cache config ${path} (--pod-cache-config) cannot be read`})).toString('utf8')
    } catch (err) {
      // (FnrError's instanceof holds across module copies; the code is ConfigFileError's)
      if (err instanceof FnrError && (err as ConfigFileError).code === 'ENOENT') return {config: PodCacheConfig.empty(path), missing: true}
      throw err
    }
    return {config: PodCacheConfig.parse(text, path), missing: false}
  }

  /** The images listed, in order, without duplicates (the warm-up list). */
  images(): string[] {
    return [...this.byImage.keys()]
  }

  entryFor(image: string): PodCacheConfigEntry | undefined {
    return this.byImage.get(image)
  }

  /** The response-cache switch of an image (see PodCacheConfigEntry.responseCache); undefined when not set. */
  responseCacheFor(image: string): boolean | number | undefined {
    return this.byImage.get(image)?.responseCache
  }

  /** True when some entry switches the response cache on. */
  enablesResponseCache(): boolean {
    return this.entries.some((e) => e.responseCache === true || (typeof e.responseCache === 'number' && e.responseCache > 0))
  }

  /** The settings for an image: its entry where set and positive, the defaults otherwise. */
  settingsFor(image: string, defaults: PodSettingsDefaults): ImagePodSettings {
    const entry = this.byImage.get(image)
    if (!entry) return {...defaults}
    const ttl = entry.timeToLive === undefined ? undefined : parseGoDuration(entry.timeToLive)
    return {
      ttlMs: ttl !== undefined && ttl > 0 ? ttl : defaults.ttlMs,
      maxWaitlistLength: entry.maxWaitlistLength && entry.maxWaitlistLength > 0 ? entry.maxWaitlistLength : defaults.maxWaitlistLength,
      maxParallelPods: entry.maxParallelPodsPerFunction && entry.maxParallelPodsPerFunction > 0 ? entry.maxParallelPodsPerFunction : defaults.maxParallelPods,
      ...(entry.resources ? {resources: entry.resources} : {}),
    }
  }
}

function responseCacheField(value: unknown, where: string): boolean | number | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value === 'boolean') return value
  const ms = typeof value === 'string' ? parseGoDuration(value) : undefined
  if (ms === undefined || ms < 0) throw new FnrError('Config', `${where} must be true, false or a duration like 10m, got ${JSON.stringify(value)}`)
  return ms
}

/** Parses "cpu=100m,memory=128Mi" (the --pod-requests / --pod-limits format); '' is none. */
export function parseResourceList(flag: string, text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {}
  for (const part of text.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const m = /^([A-Za-z0-9./_-]+)=([0-9.]+[A-Za-z]*)$/.exec(part)
    if (!m) throw new FnrError('Usage', `--${flag}: expected name=quantity pairs like cpu=100m,memory=128Mi, got ${JSON.stringify(part)}`)
    out[m[1]!] = m[2]!
  }
  return Object.keys(out).length > 0 ? out : undefined
}
