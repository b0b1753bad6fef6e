/**
 * --pod-cache-config: per-image pod settings and the warm-up list, in Porch's format (docs/runtimes.md, "The pod runtime"):
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
 * Porch v1.5.7's older format, a map `image: ttl` (`ghcr.io/.../set-labels:v0.1.5: 30m`), is read as
 * the same list (each image with its timeToLive); numbers may be quoted ("2").
 *
 * Duplicates: the last entry wins (as upstream). A file that is missing is "no settings" (the
 * caller logs it). Field problems upstream silently ignores (a bad timeToLive) fall back to the
 * default and are reported as warnings.
 *
 * Tolerance (`lenient`, what `fnr serve` does unless --strict-config): Porch only logs a warning
 * when it cannot read or parse the file and then serves with the defaults, so fnr does the same:
 * a file it cannot read or that is not a list or map gives no settings and a warning; a bad entry
 * (no name) is skipped and a bad field (a count that is not a number, malformed resources) is
 * left out, each with a warning naming the file and the entry. Strict (the default of parse/load,
 * and --strict-config): each of these is a Config error naming the file and the entry.
 */
import {parse as parseYaml} from 'yaml'

import {FnrError} from '../errors.js'
import {checkPodResources, parseQuantity, resourceRequirementsProblems} from '../k8s/quantity.js'
import {POD_CACHE_CONFIG_ENTRY} from '../schema/pod-cache-config.js'
import {schemaProblems} from '../schema/validate.js'
import {parseGoDuration} from './go-flags.js'
import {readConfigFile, type ConfigFileError} from '../read-file.js'

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

export interface PodCacheConfigParseOptions {
  /** Warn and go on (Porch's behaviour) instead of failing; see the header. Default false (strict). */
  lenient?: boolean
}

/** Porch v1.5.7's map format, `image: ttl`, as list entries (a value that is not a scalar is kept, to be reported). */
function mapFormatEntries(doc: Record<string, unknown>): unknown[] {
  return Object.entries(doc).map(([name, ttl]) => {
    if (ttl !== null && typeof ttl === 'object') return {[MAP_FORMAT_BAD]: `the old map format is image: timeToLive, but the value of ${JSON.stringify(name)} is ${Array.isArray(ttl) ? 'a list' : 'a map'}`}
    return {name, ...(ttl === null || ttl === undefined ? {} : {timeToLive: ttl})}
  })
}
const MAP_FORMAT_BAD = Symbol('map format value')

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

  /**
   * Parses the file's text (Porch's list, or v1.5.7's map `image: ttl`). Strict (the default): FnrError('Config')
   * naming the source and entry on a bad shape. Lenient: the same problems are warnings (see the header).
   */
  static parse(text: string, source: string, options: PodCacheConfigParseOptions = {}): PodCacheConfig {
    const lenient = options.lenient === true
    const warnings: string[] = []
    const ignoredFile = (err: FnrError): PodCacheConfig => {
      if (!lenient) throw err
      return new PodCacheConfig([], source, [`${err.message}; serving with the flag defaults for every image`])
    }
    let doc: unknown
    try {
      doc = parseYaml(text)
    } catch (err) {
      return ignoredFile(new FnrError('Config', `pod cache config ${source} is not valid YAML: ${(err as Error).message.split('\n', 1)[0]}`, {cause: err}))
    }
    if (doc === null || doc === undefined) return new PodCacheConfig([], source, [])
    if (doc && typeof doc === 'object' && !Array.isArray(doc)) doc = mapFormatEntries(doc as Record<string, unknown>)
    if (!Array.isArray(doc)) {
      return ignoredFile(new FnrError('Config', `pod cache config ${source} must be a YAML list of {name, timeToLive, maxWaitlistLength, maxParallelPodsPerFunction} entries (or a map of image: timeToLive)`))
    }
    const problems: string[] = []
    const entries: PodCacheConfigEntry[] = []
    doc.forEach((raw: unknown, i) => {
      const {entry, errors, notes} = readEntry(raw, `pod cache config ${source} entry ${i + 1}`, lenient)
      if (entry) entries.push(entry)
      problems.push(...errors)
      warnings.push(...notes)
    })
    if (problems.length > 0) throw new FnrError('Config', problems.join('; '), {details: {fieldErrors: problems}})
    return new PodCacheConfig(entries, source, warnings)
  }

  /**
   * Loads a file. Missing (ENOENT) gives an empty config with `missing: true`, so the caller can
   * say so. Other read errors and bad content: Config errors (strict), or an empty config with a
   * warning (lenient: Porch v1.5.8 only warns about a file it cannot read, and serves).
   */
  static async load(path: string, options: PodCacheConfigParseOptions = {}): Promise<{config: PodCacheConfig; missing: boolean}> {
    if (path === '') return {config: PodCacheConfig.empty(), missing: false}
    let text: string
    try {
      // A regular file of at most 4 MiB: a FIFO used to hang the start, /dev/zero to be read until memory ran out.
      text = (await readConfigFile(path, {label: `pod cache config ${path} (--pod-cache-config) cannot be read`})).toString('utf8')
    } catch (err) {
      // (FnrError's instanceof holds across module copies; the code is ConfigFileError's)
      if (err instanceof FnrError && (err as ConfigFileError).code === 'ENOENT') return {config: PodCacheConfig.empty(path), missing: true}
      if (options.lenient && err instanceof FnrError) {
        return {config: new PodCacheConfig([], path, [`${err.message}; serving with the flag defaults for every image (--strict-config makes this an error)`]), missing: false}
      }
      throw err
    }
    return {config: PodCacheConfig.parse(text, path, options), missing: false}
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

/**
 * One entry against its schema (src/lib/schema/pod-cache-config.ts) and what the schema cannot say (a
 * timeToLive Porch would ignore, the resources as the API server checks a pod's). Strict: every problem is an
 * error, kubectl's way (`maxWaitlistLength: Invalid value: "two": must be an integer`). Lenient: an entry
 * without a usable name is skipped, a bad field is left out, each with a warning.
 */
function readEntry(raw: unknown, where: string, lenient: boolean): {entry?: PodCacheConfigEntry; errors: string[]; notes: string[]} {
  const r = raw as Record<string | symbol, unknown>
  if (r && typeof r === 'object' && typeof r[MAP_FORMAT_BAD] === 'string') return outcome(undefined, [`${where}: ${r[MAP_FORMAT_BAD] as string}`], lenient, '; skipping the entry')
  const problems = schemaProblems(POD_CACHE_CONFIG_ENTRY, raw)
  // The entry itself or its name: nothing to keep.
  const whole = problems.filter((line) => line.startsWith('<root>:') || line.startsWith('name:'))
  if (whole.length > 0) return outcome(undefined, whole.map((line) => `${where}: ${line.replace(/^<root>: /, '')}`), lenient, '; skipping the entry')
  const w = `${where} (${r.name as string})`
  const notes: string[] = []
  const bad = new Set(problems.map((line) => line.split(/[.:[]/, 1)[0]!))
  const resources = bad.has('resources') ? [] : resourceRequirementsProblems(r.resources as ResourceRequirements | undefined, 'resources').map((l) => `${l} (the API server would reject the pod)`)
  if (resources.length > 0) bad.add('resources')
  const ttl = r.timeToLive === undefined || r.timeToLive === null ? undefined : String(r.timeToLive)
  if (ttl !== undefined && (parseGoDuration(ttl) ?? -1) < 0) notes.push(`${w}: timeToLive ${JSON.stringify(ttl)} is not a duration; using --pod-ttl`)
  const entry = entryFields(r, bad, ttl)
  const {errors, notes: fieldNotes} = outcome(entry, [...problems, ...resources].map((line) => `${w}: ${line}`), lenient, '; ignoring it')
  return {...(errors.length === 0 ? {entry} : {}), errors, notes: [...notes, ...fieldNotes]}
}

/** The checked fields of an entry, those with problems (`bad`) left out; null is unset. */
function entryFields(r: Record<string | symbol, unknown>, bad: Set<string>, ttl: string | undefined): PodCacheConfigEntry {
  const entry: PodCacheConfigEntry = {name: r.name as string}
  const value = (key: string): unknown => (bad.has(key) || r[key] === null ? undefined : r[key])
  if (ttl !== undefined) entry.timeToLive = ttl
  const counts = {maxWaitlistLength: value('maxWaitlistLength'), maxParallelPodsPerFunction: value('maxParallelPodsPerFunction')}
  for (const [k, v] of Object.entries(counts)) if (v !== undefined) entry[k as keyof typeof counts] = Number(v)
  const res = value('resources') as {requests?: Record<string, unknown>; limits?: Record<string, unknown>} | undefined
  if (res) entry.resources = resourceStrings(res)
  const cache = value('responseCache')
  if (cache !== undefined && cache !== '') entry.responseCache = typeof cache === 'boolean' ? cache : parseGoDuration(cache as string)!
  return entry
}

/** Strict: the problems are errors; lenient: warnings (what is skipped or ignored said). */
function outcome(entry: PodCacheConfigEntry | undefined, problems: string[], lenient: boolean, leniently: string): {entry?: PodCacheConfigEntry; errors: string[]; notes: string[]} {
  if (!lenient) return {...(entry ? {entry} : {}), errors: problems, notes: []}
  return {...(entry ? {entry} : {}), errors: [], notes: problems.map((p) => `${p}${leniently}`)}
}

/** Requests and limits with their quantities as strings (YAML may give numbers). */
function resourceStrings(res: {requests?: Record<string, unknown> | null; limits?: Record<string, unknown> | null}): ResourceRequirements {
  const strings = (m: Record<string, unknown> | null | undefined): Record<string, string> | undefined => (m ? Object.fromEntries(Object.entries(m).map(([k, q]) => [k, String(q)])) : undefined)
  const requests = strings(res.requests)
  const limits = strings(res.limits)
  return {...(requests ? {requests} : {}), ...(limits ? {limits} : {})}
}

/** Parses "cpu=100m,memory=128Mi" (the --pod-requests / --pod-limits format); '' is none. Quantities as Kubernetes parses them. */
export function parseResourceList(flag: string, text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {}
  for (const part of text.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const m = /^([^=\s]+)=(\S+)$/.exec(part)
    if (!m) throw new FnrError('Usage', `--${flag}: expected name=quantity pairs like cpu=100m,memory=128Mi, got ${JSON.stringify(part)}`)
    try {
      parseQuantity(m[2]!)
    } catch (err) {
      throw new FnrError('Usage', `--${flag}: ${m[1]}: ${(err as Error).message}`)
    }
    out[m[1]!] = m[2]!
  }
  return Object.keys(out).length > 0 ? out : undefined
}

/**
 * --pod-requests and --pod-limits together, checked as the API server checks a container's resources (names,
 * quantities, each request at most its limit): FnrError('Usage') before any pod is made.
 */
export function parseResourceFlags(requestsText: string, limitsText: string): ResourceRequirements {
  const requests = parseResourceList('pod-requests', requestsText)
  const limits = parseResourceList('pod-limits', limitsText)
  checkPodResources({requests, limits})
  return {requests, limits}
}
