/**
 * The FunctionConfig source (Porch at HEAD, spec §11): `config.porch.kpt.dev/v1alpha1` `FunctionConfig` objects
 * in place of config.yaml (exec mappings), the pod-cache ConfigMap (per-image pod settings, warm-up) and per-image
 * pod template changes. This module validates the objects and keeps them in a store the evaluators read on every
 * call, so changes apply live; function-config-watch.ts feeds it from the API server (list + watch).
 *
 *   apiVersion: config.porch.kpt.dev/v1alpha1
 *   kind: FunctionConfig
 *   metadata: {name: set-namespace, namespace: porch-fn-system}
 *   spec:
 *     image: set-namespace                 # the short name: last path component, no tag
 *     prefixes: ["", "gcr.io/kpt-fn"]      # repositories it applies to; "" = --default-image-prefix; none = any
 *     binaryExecutor: {tags: [v0.4.1], path: set-namespace}   # path inside --functions
 *     podExecutor:
 *       tags: [v0.4.1]                     # the tags the settings apply to (none: every tag); tags[0] is warmed up
 *       timeToLive: 30m
 *       maxParallelExecutions: 2           # → max pods per image
 *       preferredMaxQueueLength: 2         # → calls per pod before another pod starts
 *       templateOverrides: {serviceAccountName, securityContext, initContainer: {resources, env, envFrom}, container: {...}}
 *
 * Matching a request image: it is normalised as everywhere in fnr (default prefix for names without "/", Docker
 * Hub spellings, no tag = latest); its last path component must equal `spec.image`, its repository must be one
 * of `prefixes` (or below one, on a "/" boundary), and its tag (or digest) must be in the executor's tags.
 *
 * Differences from Porch, on purpose:
 *   - Objects are keyed by `spec.image`, not `metadata.name` (upstream stores by name but looks up by image, so a
 *     FunctionConfig whose name differs from its image never applies to pods). Two objects for one image: the
 *     oldest wins (then namespace/name), deterministically; the other is reported.
 *   - podExecutor.tags limit the pod settings to those tags, as the API documents (upstream ignores them).
 *   - The binary must be an executable file inside --functions (an absolute path too), like config.yaml entries;
 *     upstream runs any path.
 *   - templateOverrides.container applies to the container named "function" (upstream: containers[0]).
 *   - templateOverrides.securityContext is merged over the template's securityContext (inline: hardened; a user's: as written) (upstream replaces
 *     it, so {runAsUser: 1000} silently dropped runAsNonRoot and seccomp); weaker values are kept and warned.
 *   - An invalid object never stops anything: it is logged (and written to its status.error) and skipped; an
 *     object edited into an invalid one keeps its last good version. A binaryExecutor whose binary is not in
 *     --functions does not make the object invalid: the rest applies (pod settings, warm-up), the problem is
 *     logged and written to status.error, and those tags go to the pod runtime.
 *   - goExecutor (porch-server's built-in Go functions, which Porch's runner ignores) is served by the exec
 *     runtime when --functions has a binary named goExecutor.id (else spec.image): the catalog binary of the
 *     same function.
 */
import {createHash} from 'node:crypto'
import path from 'node:path'

import {FnrError} from '../errors.js'
import {silentLogger, type Logger} from '../telemetry/log.js'
import {isQuantity, resourceRequirementsProblems} from '../k8s/quantity.js'
import {canonicalJson} from './canonical-json.js'
import {ExecConfig, resolveBinary, type ExecFunction} from './exec-config.js'
import {parseGoDuration} from './go-flags.js'
import {DEFAULT_IMAGE_PREFIX, normaliseImage, withPrefix} from './image-ref.js'
import type {ImagePodSettings, PodSettingsDefaults, ResourceRequirements} from './pod-cache-config.js'

export const FUNCTION_CONFIG_GROUP = 'config.porch.kpt.dev'
export const FUNCTION_CONFIG_VERSION = 'v1alpha1'
export const FUNCTION_CONFIG_PLURAL = 'functionconfigs'
export const FUNCTION_CONFIG_KIND = 'FunctionConfig'
export const FUNCTION_CONFIG_API_VERSION = `${FUNCTION_CONFIG_GROUP}/${FUNCTION_CONFIG_VERSION}`

export {FUNCTION_CONFIG_SOURCES, parseFunctionConfigSource, type FunctionConfigSourceKind} from './serve-config.js'

/** A FunctionConfig as read from the API (only what fnr looks at is typed). */
export interface FunctionConfigObject {
  apiVersion?: string
  kind?: string
  metadata?: {
    name?: string
    namespace?: string
    uid?: string
    resourceVersion?: string
    generation?: number
    creationTimestamp?: string | Date
    deletionTimestamp?: string | Date
  }
  spec?: unknown
  status?: {functionRunnerObservedGeneration?: number; error?: string; [key: string]: unknown}
}

export interface ContainerOverrides {
  resources?: ResourceRequirements
  env?: Array<Record<string, unknown>>
  envFrom?: Array<Record<string, unknown>>
}

export interface TemplateOverrides {
  serviceAccountName?: string
  securityContext?: Record<string, unknown>
  initContainer?: ContainerOverrides
  container?: ContainerOverrides
}

/** A validated FunctionConfig. */
export interface FunctionConfigEntry {
  /** namespace/name */
  key: string
  generation?: number
  /** creationTimestamp in ms, for "oldest wins". */
  createdMs: number
  /** spec.image: the short name. */
  image: string
  /** Normalised repositories (no trailing "/"); empty: any repository. */
  repositories: string[]
  /** The first prefix as written ("" = the default prefix), for the warm-up image. */
  firstPrefix: string | undefined
  binary?: {tags: string[]; path: string; resolved: string}
  /**
   * goExecutor (porch-server's built-in Go runtime): served by the exec runtime too, with the binary named by
   * goExecutor.id (else spec.image) in --functions, when there is one.
   */
  go?: {tags: string[]; id: string; resolved: string}
  /**
   * What could not be used, the rest of the object staying in effect (a binary that is not in --functions, say):
   * an object is never rejected as a whole for it, so its pod settings and warm-up still apply.
   */
  problems?: string[]
  pod?: {tags: string[]; ttlMs?: number; maxParallelPods?: number; maxWaitlistLength?: number; overrides?: TemplateOverrides}
}

export function objectKey(obj: FunctionConfigObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`
}

// ------------------------------------------------------------------------------------------ parsing

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function stringList(v: unknown, where: string, options: {min?: number; nonEmpty?: boolean} = {}): string[] {
  if (v === undefined || v === null) {
    if (options.min) throw new FnrError('Config', `${where} is required (a list of at least ${options.min})`)
    return []
  }
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw new FnrError('Config', `${where} must be a list of strings`)
  if (options.min && v.length < options.min) throw new FnrError('Config', `${where} must have at least ${options.min} item${options.min > 1 ? 's' : ''}`)
  if (options.nonEmpty && v.some((s) => (s as string).trim() === '')) throw new FnrError('Config', `${where} must not contain empty strings`)
  return v as string[]
}

function optionalCount(v: unknown, where: string): number | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new FnrError('Config', `${where} must be a whole number ≥ 0, got ${JSON.stringify(v)}`)
  return v === 0 ? undefined : v
}

function quantities(v: unknown, where: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined
  if (!isMap(v)) throw new FnrError('Config', `${where} must be a map of resource names to quantities`)
  const out: Record<string, string> = {}
  for (const [k, q] of Object.entries(v)) {
    if ((typeof q !== 'string' && typeof q !== 'number') || !isQuantity(q)) {
      throw new FnrError('Config', `${where}.${k} must be a quantity like 100m or 128Mi, got ${JSON.stringify(q)}`)
    }
    out[k] = String(q)
  }
  return out
}

function objectList(v: unknown, where: string, needName: boolean): Array<Record<string, unknown>> | undefined {
  if (v === undefined || v === null) return undefined
  if (!Array.isArray(v) || v.some((e) => !isMap(e))) throw new FnrError('Config', `${where} must be a list of objects`)
  if (needName) {
    v.forEach((e, i) => {
      if (typeof (e as Record<string, unknown>).name !== 'string' || (e as Record<string, string>).name === '') throw new FnrError('Config', `${where}[${i}].name is required`)
    })
  }
  return v as Array<Record<string, unknown>>
}

function containerOverrides(v: unknown, where: string): ContainerOverrides | undefined {
  if (v === undefined || v === null) return undefined
  if (!isMap(v)) throw new FnrError('Config', `${where} must be an object with resources, env and/or envFrom`)
  const out: ContainerOverrides = {}
  if (v.resources !== undefined && v.resources !== null) {
    if (!isMap(v.resources)) throw new FnrError('Config', `${where}.resources must be an object with requests and/or limits`)
    const requests = quantities(v.resources.requests, `${where}.resources.requests`)
    const limits = quantities(v.resources.limits, `${where}.resources.limits`)
    out.resources = {...(requests ? {requests} : {}), ...(limits ? {limits} : {})}
    // What the API server would reject in these alone (a request above its limit); the pod's own check runs at creation.
    const problems = resourceRequirementsProblems(out.resources, `${where}.resources`)
    if (problems.length > 0) throw new FnrError('Config', `${problems.join('; ')} (the API server would reject the pod)`)
  }
  const env = objectList(v.env, `${where}.env`, true)
  if (env) out.env = env
  const envFrom = objectList(v.envFrom, `${where}.envFrom`, false)
  if (envFrom) out.envFrom = envFrom
  return out
}

function templateOverrides(v: unknown, where: string): TemplateOverrides | undefined {
  if (v === undefined || v === null) return undefined
  if (!isMap(v)) throw new FnrError('Config', `${where} must be an object`)
  const out: TemplateOverrides = {}
  if (v.serviceAccountName !== undefined && v.serviceAccountName !== null && v.serviceAccountName !== '') {
    if (typeof v.serviceAccountName !== 'string' || !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(v.serviceAccountName)) {
      throw new FnrError('Config', `${where}.serviceAccountName must be a valid name, got ${JSON.stringify(v.serviceAccountName)}`)
    }
    out.serviceAccountName = v.serviceAccountName
  }
  if (v.securityContext !== undefined && v.securityContext !== null) {
    if (!isMap(v.securityContext)) throw new FnrError('Config', `${where}.securityContext must be a PodSecurityContext object`)
    out.securityContext = v.securityContext
  }
  const init = containerOverrides(v.initContainer, `${where}.initContainer`)
  if (init) out.initContainer = init
  const container = containerOverrides(v.container, `${where}.container`)
  if (container) out.container = container
  return Object.keys(out).length > 0 ? out : undefined
}

/** The repository (no trailing "/") a prefix stands for, normalised like request images. */
export function normaliseRepository(prefix: string, defaultPrefix: string): string {
  const p = prefix.trim() === '' ? defaultPrefix : prefix.trim()
  const full = normaliseImage(withPrefix(p.replace(/\/+$/, ''), 'x'), defaultPrefix)
  return full.slice(0, full.lastIndexOf('/'))
}

export interface ParseOptions {
  /** --functions, for binaryExecutor.path. */
  functionsDir: string
  defaultImagePrefix?: string
}

/** Validates one object; FnrError('Config') whose message starts with "FunctionConfig <ns>/<name>:". */
export async function parseFunctionConfig(obj: FunctionConfigObject, options: ParseOptions): Promise<FunctionConfigEntry> {
  const key = objectKey(obj)
  const at = `FunctionConfig ${key}`
  const fail = (text: string): never => {
    throw new FnrError('Config', `${at}: ${text}`, {details: {functionConfig: key}})
  }
  try {
    if (!obj.metadata?.name) fail('metadata.name is missing')
    if (obj.kind !== undefined && obj.kind !== FUNCTION_CONFIG_KIND) fail(`kind must be ${FUNCTION_CONFIG_KIND}, got ${JSON.stringify(obj.kind)}`)
    const spec = obj.spec
    if (!isMap(spec)) return fail('spec is missing')
    if (typeof spec.image !== 'string' || spec.image.trim() === '') fail('spec.image is required (the function\'s short image name, e.g. set-namespace)')
    const image = (spec.image as string).trim()
    if (/[/:@\s]/.test(image)) fail(`spec.image must be a short name without registry, path, tag or digest (e.g. "set-namespace"), got ${JSON.stringify(image)}`)
    const defaultPrefix = options.defaultImagePrefix ?? DEFAULT_IMAGE_PREFIX
    const prefixes = stringList(spec.prefixes, 'spec.prefixes')
    const entry: FunctionConfigEntry = {
      key,
      ...(typeof obj.metadata?.generation === 'number' ? {generation: obj.metadata.generation} : {}),
      createdMs: obj.metadata?.creationTimestamp ? new Date(obj.metadata.creationTimestamp).getTime() || 0 : 0,
      image,
      repositories: [...new Set(prefixes.map((p) => normaliseRepository(p, defaultPrefix)))],
      firstPrefix: prefixes[0],
    }
    if (spec.podExecutor === undefined && spec.binaryExecutor === undefined && spec.goExecutor === undefined) {
      fail('at least one of spec.podExecutor, spec.binaryExecutor or spec.goExecutor must be set')
    }
    if (spec.binaryExecutor !== undefined && spec.binaryExecutor !== null) {
      const b = spec.binaryExecutor
      if (!isMap(b)) return fail('spec.binaryExecutor must be an object with tags and path')
      const tags = stringList(b.tags, 'spec.binaryExecutor.tags', {min: 1, nonEmpty: true})
      if (typeof b.path !== 'string' || b.path.trim() === '') fail('spec.binaryExecutor.path is required (a file in the functions directory)')
      const given = b.path as string
      let dirReal: string
      try {
        const {realpath} = await import('node:fs/promises')
        dirReal = await realpath(options.functionsDir)
      } catch {
        ;(entry.problems ??= []).push(`spec.binaryExecutor: the functions directory ${JSON.stringify(options.functionsDir)} does not exist; its tags ${JSON.stringify(tags)} go to the pod runtime`)
        dirReal = ''
      }
      let relative = given
      if (path.isAbsolute(given)) {
        const fromDir = path.relative(path.resolve(options.functionsDir), given)
        const fromReal = path.relative(dirReal, given)
        relative = [fromDir, fromReal].find((r) => r !== '' && !r.startsWith('..') && !path.isAbsolute(r)) ?? ''
        if (relative === '' && dirReal !== '') fail(`spec.binaryExecutor.path ${JSON.stringify(given)} is outside the functions directory ${options.functionsDir}`)
      }
      // A binary that is missing or not runnable loses only the binaryExecutor (the request goes to the pod
      // runtime, as for an unknown image); the object's other settings stay.
      // (A path leaving the directory stays an error that rejects the object.)
      try {
        if (dirReal !== '') entry.binary = {tags, path: given, resolved: await resolveBinary(dirReal, relative, 'spec.binaryExecutor.path')}
      } catch (err) {
        if (!(err instanceof FnrError) || err.details.missingBinary !== true) throw err
        ;(entry.problems ??= []).push(`${err.message}; its tags ${JSON.stringify(tags)} go to the pod runtime`)
      }
    }
    if (spec.podExecutor !== undefined && spec.podExecutor !== null) {
      const p = spec.podExecutor
      if (!isMap(p)) return fail('spec.podExecutor must be an object')
      const pod: NonNullable<FunctionConfigEntry['pod']> = {tags: stringList(p.tags, 'spec.podExecutor.tags', {nonEmpty: true})}
      if (p.timeToLive !== undefined && p.timeToLive !== null && p.timeToLive !== '') {
        const ms = typeof p.timeToLive === 'string' ? parseGoDuration(p.timeToLive) : undefined
        if (ms === undefined || ms < 0) fail(`spec.podExecutor.timeToLive must be a duration like 30m, got ${JSON.stringify(p.timeToLive)}`)
        if (ms! > 0) pod.ttlMs = ms
      }
      const maxPods = optionalCount(p.maxParallelExecutions, 'spec.podExecutor.maxParallelExecutions')
      if (maxPods !== undefined) pod.maxParallelPods = maxPods
      const queue = optionalCount(p.preferredMaxQueueLength, 'spec.podExecutor.preferredMaxQueueLength')
      if (queue !== undefined) pod.maxWaitlistLength = queue
      const overrides = templateOverrides(p.templateOverrides, 'spec.podExecutor.templateOverrides')
      if (overrides) pod.overrides = overrides
      entry.pod = pod
    }
    if (spec.goExecutor !== undefined && spec.goExecutor !== null) {
      if (!isMap(spec.goExecutor)) fail('spec.goExecutor must be an object with tags')
      const g = spec.goExecutor as Record<string, unknown>
      const tags = stringList(g.tags, 'spec.goExecutor.tags', {min: 1})
      if (g.id !== undefined && g.id !== null && (typeof g.id !== 'string' || g.id.trim() === '')) fail(`spec.goExecutor.id must be a function name, got ${JSON.stringify(g.id)}`)
      const id = typeof g.id === 'string' ? g.id.trim() : image
      // porch-server runs these in-process (its built-in Go functions); fnr runs the catalog binary of that id.
      try {
        const {realpath} = await import('node:fs/promises')
        const resolved = await resolveBinary(await realpath(options.functionsDir), id, 'spec.goExecutor.id')
        entry.go = {tags, id, resolved}
      } catch (err) {
        if (err instanceof FnrError ? err.details.missingBinary !== true : (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
        ;(entry.problems ??= []).push(`spec.goExecutor: no binary ${JSON.stringify(id)} in the functions directory ${options.functionsDir} (porch-server runs goExecutor functions itself); its tags ${JSON.stringify(tags)} go to the pod runtime`)
      }
    }
    return entry
  } catch (err) {
    if (err instanceof FnrError && err.details.functionConfig === key) throw err
    throw new FnrError('Config', `${at}: ${(err as Error).message}`, {cause: err, details: {functionConfig: key}})
  }
}

// ------------------------------------------------------------------------------------------ matching

interface RequestParts {
  repository: string
  name: string
  tag: string
  digest: string
}

export function splitRequestImage(image: string, defaultPrefix: string): RequestParts {
  let ref = normaliseImage(image, defaultPrefix)
  let digest = ''
  const at = ref.indexOf('@')
  if (at >= 0) {
    digest = ref.slice(at + 1)
    ref = ref.slice(0, at)
  }
  let tag = ''
  const slash = ref.lastIndexOf('/')
  const colon = ref.lastIndexOf(':')
  if (colon > slash) {
    tag = ref.slice(colon + 1)
    ref = ref.slice(0, colon)
  }
  const lastSlash = ref.lastIndexOf('/')
  return {repository: ref.slice(0, lastSlash), name: ref.slice(lastSlash + 1), tag, digest}
}

function repositoryMatches(entry: FunctionConfigEntry, repository: string): boolean {
  return entry.repositories.length === 0 || entry.repositories.some((r) => repository === r || repository.startsWith(`${r}/`))
}

function tagMatches(tags: readonly string[], parts: RequestParts): boolean {
  return (parts.tag !== '' && tags.includes(parts.tag)) || (parts.digest !== '' && tags.includes(parts.digest))
}

// ------------------------------------------------------------------------------------------ the store

export type FunctionConfigOutcome = {key: string; generation?: number; error?: string}

export interface FunctionConfigStoreOptions extends ParseOptions {
  logger?: Logger
  /** Told the outcome of every object applied (to write its status). */
  onOutcome?: (obj: FunctionConfigObject, outcome: FunctionConfigOutcome) => void
}

/**
 * The validated FunctionConfigs, keyed by object; per image, the oldest object wins. Reads are synchronous and
 * cheap (the request path); writes come from the watch.
 */
export class FunctionConfigStore {
  private readonly entries = new Map<string, FunctionConfigEntry>()
  /** The object each entry was made from (for status reports when its standing changes). */
  private readonly objects = new Map<string, FunctionConfigObject>()
  /** Valid objects another object of the same image overrules. */
  private readonly losing = new Set<string>()
  private byImage = new Map<string, FunctionConfigEntry>()
  /** Per object, bumped by every event, so a slow validation never overwrites a newer event's result. */
  private readonly sequence = new Map<string, number>()
  private readonly lastSpec = new Map<string, string>()
  private readonly pending = new Set<Promise<void>>()
  private readonly listeners = new Set<() => void>()
  private readonly logger: Logger
  readonly defaultImagePrefix: string
  /** Hash of every winning object's templateOverrides ('' when none): part of the template version. */
  overridesVersion = ''

  constructor(private readonly options: FunctionConfigStoreOptions) {
    this.logger = options.logger ?? silentLogger
    this.defaultImagePrefix = options.defaultImagePrefix ?? DEFAULT_IMAGE_PREFIX
  }

  /** Validates and stores an added or changed object (an invalid one is reported and skipped). */
  apply(obj: FunctionConfigObject): Promise<void> {
    const key = objectKey(obj)
    if (obj.metadata?.deletionTimestamp) {
      this.remove(obj)
      return Promise.resolve()
    }
    const spec = canonicalJson(obj.spec)
    if (this.lastSpec.get(key) === spec && (this.entries.get(key)?.generation ?? obj.metadata?.generation) === obj.metadata?.generation) return Promise.resolve()
    const seq = (this.sequence.get(key) ?? 0) + 1
    this.sequence.set(key, seq)
    const work = parseFunctionConfig(obj, this.options).then(
      (entry) => {
        if (this.sequence.get(key) !== seq) return
        this.lastSpec.set(key, spec)
        this.entries.set(key, entry)
        this.objects.set(key, obj)
        this.rebuild(key)
        if (this.losing.has(key)) return
        this.logger.info('FunctionConfig applied', {functionConfig: key, image: entry.image, binary: entry.binary?.path, binaryTags: entry.binary?.tags, goTags: entry.go?.tags, podTags: entry.pod?.tags})
        if (entry.problems?.length) this.logger.warn('FunctionConfig applied without some of its settings', {functionConfig: key, problems: entry.problems})
        this.options.onOutcome?.(obj, {key, generation: obj.metadata?.generation, ...(entry.problems?.length ? {error: entry.problems.join('; ')} : {})})
      },
      (err: unknown) => {
        if (this.sequence.get(key) !== seq) return
        this.lastSpec.set(key, spec)
        const message = (err as Error).message
        const kept = this.entries.has(key)
        this.logger.error(kept ? 'invalid FunctionConfig skipped; its last good version stays in use' : 'invalid FunctionConfig skipped', {functionConfig: key, error: message})
        this.options.onOutcome?.(obj, {key, generation: obj.metadata?.generation, error: message})
      },
    )
    const tracked = work.finally(() => this.pending.delete(tracked))
    this.pending.add(tracked)
    return tracked
  }

  /** Forgets a deleted object. */
  remove(obj: FunctionConfigObject): void {
    const key = objectKey(obj)
    this.sequence.set(key, (this.sequence.get(key) ?? 0) + 1)
    this.lastSpec.delete(key)
    this.objects.delete(key)
    if (this.entries.delete(key)) {
      this.logger.info('FunctionConfig removed', {functionConfig: key})
      this.rebuild()
    }
  }

  /** Resolves when every validation started so far has finished. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending])
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Recomputes the winner per image; reports objects whose standing changed (and `applied`, if it lost). */
  private rebuild(applied?: string): void {
    const byImage = new Map<string, FunctionConfigEntry>()
    const ordered = [...this.entries.values()].sort((a, b) => a.createdMs - b.createdMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    for (const e of ordered) if (!byImage.has(e.image)) byImage.set(e.image, e)
    this.byImage = byImage
    for (const key of [...this.losing]) if (!this.entries.has(key)) this.losing.delete(key)
    for (const [key, e] of this.entries) {
      const owner = byImage.get(e.image)!
      const losing = owner.key !== key
      const was = this.losing.has(key)
      if (losing) this.losing.add(key)
      else this.losing.delete(key)
      if (losing === was && !(losing && key === applied)) continue
      const obj = this.objects.get(key)
      if (losing) {
        const error = `FunctionConfig ${key}: ignored, image ${JSON.stringify(e.image)} is already configured by FunctionConfig ${owner.key} (the oldest wins)`
        this.logger.warn(error)
        if (obj) this.options.onOutcome?.(obj, {key, generation: e.generation, error})
      } else if (key !== applied) {
        this.logger.info('FunctionConfig now in effect', {functionConfig: key, image: e.image})
        if (obj) this.options.onOutcome?.(obj, {key, generation: e.generation})
      }
    }
    const withOverrides = [...byImage.values()].filter((e) => e.pod?.overrides).map((e) => ({image: e.image, repositories: e.repositories, tags: e.pod!.tags, overrides: e.pod!.overrides}))
    withOverrides.sort((a, b) => (a.image < b.image ? -1 : 1))
    this.overridesVersion = withOverrides.length === 0 ? '' : hash12(canonicalJson(withOverrides))
    for (const l of this.listeners) {
      try {
        l()
      } catch (err) {
        this.logger.error('FunctionConfig listener failed', {error: String(err)})
      }
    }
  }

  /** The valid objects that are in effect (one per image). */
  list(): FunctionConfigEntry[] {
    return [...this.byImage.values()]
  }

  private match(image: string, executor: 'binary' | 'pod'): FunctionConfigEntry | undefined {
    if (this.byImage.size === 0 || image.trim() === '') return undefined
    const parts = splitRequestImage(image, this.defaultImagePrefix)
    const entry = this.byImage.get(parts.name)
    if (!entry || !repositoryMatches(entry, parts.repository)) return undefined
    if (executor === 'binary') return (entry.binary && tagMatches(entry.binary.tags, parts)) || (entry.go && tagMatches(entry.go.tags, parts)) ? entry : undefined
    if (!entry.pod) return undefined
    return entry.pod.tags.length === 0 || tagMatches(entry.pod.tags, parts) ? entry : undefined
  }

  /** The exec mapping for an image, in config.yaml's shape. */
  lookupBinary(image: string): ExecFunction | undefined {
    const entry = this.match(image, 'binary')
    if (!entry) return undefined
    const parts = splitRequestImage(image, this.defaultImagePrefix)
    // binaryExecutor first; goExecutor's tags by the binary of its id
    if (entry.binary && tagMatches(entry.binary.tags, parts)) return {name: `${entry.binary.path} (FunctionConfig ${entry.key})`, binary: entry.binary.resolved, images: []}
    return {name: `${entry.go!.id} (FunctionConfig ${entry.key} goExecutor)`, binary: entry.go!.resolved, images: []}
  }

  get binaryImageCount(): number {
    return [...this.byImage.values()].reduce((n, e) => n + (e.binary?.tags.length ?? 0) + (e.go?.tags.length ?? 0), 0)
  }

  /** Per-image pod settings: the object's values where set, `defaults` (the files' or the flags') otherwise. */
  settingsFor(image: string, defaults: ImagePodSettings | PodSettingsDefaults): ImagePodSettings {
    const pod = this.match(image, 'pod')?.pod
    if (!pod) return {...defaults}
    return {
      ...defaults,
      ttlMs: pod.ttlMs ?? defaults.ttlMs,
      maxParallelPods: pod.maxParallelPods ?? defaults.maxParallelPods,
      maxWaitlistLength: pod.maxWaitlistLength ?? defaults.maxWaitlistLength,
    }
  }

  /** The warm-up list, as Porch builds it: (prefixes[0] or the default prefix) + "/" + image + ":" + podExecutor.tags[0]. */
  warmUpImages(): string[] {
    const out: string[] = []
    for (const e of this.byImage.values()) {
      const tag = e.pod?.tags[0]
      if (!tag) continue
      const prefix = e.firstPrefix ? e.firstPrefix : this.defaultImagePrefix
      out.push(withPrefix(prefix.replace(/\/+$/, ''), `${e.image}:${tag}`))
    }
    return out
  }

  /** The image's podExecutor.templateOverrides, when a FunctionConfig gives some (pods/runtime/function-configs.ts applies them). */
  templateOverridesFor(image: string): TemplateOverrides | undefined {
    return this.match(image, 'pod')?.pod?.overrides
  }
}

function hash12(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12)
}

/**
 * The exec runtime's view when FunctionConfigs are a source: the FunctionConfig mapping first (it is the live
 * source), then config.yaml (with --function-config-source=both). An ExecConfig, so the exec evaluator is the
 * same.
 */
export class FunctionConfigExecConfig extends ExecConfig {
  constructor(
    private readonly store: FunctionConfigStore,
    private readonly files: ExecConfig | undefined,
    functionsDir: string,
    defaultImagePrefix: string,
  ) {
    super([], functionsDir, defaultImagePrefix, files ? [...files.warnings] : [])
  }

  override lookup(image: string): ExecFunction | undefined {
    return this.store.lookupBinary(image) ?? this.files?.lookup(image)
  }

  override get imageCount(): number {
    return this.store.binaryImageCount + (this.files?.imageCount ?? 0)
  }
}
