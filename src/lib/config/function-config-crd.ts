/**
 * The FunctionConfig source (Porch at HEAD; docs/function-config.md): `config.porch.kpt.dev/v1alpha1` `FunctionConfig` objects
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
import {resourceRequirementsProblems} from '../k8s/quantity.js'
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

/** The spec as the CRD's schema has checked it (nulls pruned, as the API server prunes them). */
interface CheckedSpec {
  image: string
  prefixes?: string[]
  binaryExecutor?: {tags: string[]; path: string}
  goExecutor?: {tags: string[]; id?: string}
  podExecutor?: {tags?: string[]; timeToLive?: string; maxParallelExecutions?: number; preferredMaxQueueLength?: number; templateOverrides?: TemplateOverrides}
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

/**
 * What the CRD's schema cannot say: the object's kind and name (the API server's), spec.image's syntax (a short
 * image name), and the container resources as the API server checks a pod's (quantities, resource names, each
 * request at most its limit). Field errors in kubectl's form, like the schema's.
 */
function beyondSchema(obj: FunctionConfigObject, spec: CheckedSpec | undefined): string[] {
  const problems: string[] = []
  if (!obj.metadata?.name) problems.push('metadata.name: Required value')
  if (obj.kind !== undefined && obj.kind !== FUNCTION_CONFIG_KIND) problems.push(`kind: Unsupported value: ${JSON.stringify(obj.kind)}: supported values: "${FUNCTION_CONFIG_KIND}"`)
  // (each check only where the schema has passed the field's type)
  if (typeof spec?.image === 'string' && spec.image !== '' && /[/:@\s]/.test(spec.image.trim() || ' ')) {
    problems.push(`spec.image: Invalid value: ${JSON.stringify(spec.image)}: must be a short name without registry, path, tag or digest (e.g. "set-namespace")`)
  }
  const overrides = spec?.podExecutor?.templateOverrides
  for (const c of ['initContainer', 'container'] as const) {
    const lines = resourceRequirementsProblems(overrides?.[c]?.resources, `spec.podExecutor.templateOverrides.${c}.resources`)
    problems.push(...lines.map((l) => `${l} (the API server would reject the pod)`))
  }
  return problems
}

/** The pod settings of a checked podExecutor: 0 and "" mean unset. */
function podSettings(p: NonNullable<CheckedSpec['podExecutor']>): NonNullable<FunctionConfigEntry['pod']> {
  const ttl = p.timeToLive ? parseGoDuration(p.timeToLive) : undefined
  const overrides = p.templateOverrides ? templateOverrides(p.templateOverrides) : undefined
  return {
    tags: p.tags ?? [],
    ...(ttl ? {ttlMs: ttl} : {}),
    ...(p.maxParallelExecutions ? {maxParallelPods: p.maxParallelExecutions} : {}),
    ...(p.preferredMaxQueueLength ? {maxWaitlistLength: p.preferredMaxQueueLength} : {}),
    ...(overrides ? {overrides} : {}),
  }
}

/** templateOverrides as applied: an empty serviceAccountName is none; quantities as strings; nothing empty kept. */
function templateOverrides(v: TemplateOverrides): TemplateOverrides | undefined {
  const container = (c: ContainerOverrides | undefined): ContainerOverrides | undefined => {
    if (!c) return undefined
    const quantities = (m: Record<string, string | number> | undefined): Record<string, string> | undefined => (m ? Object.fromEntries(Object.entries(m).map(([k, q]) => [k, String(q)])) : undefined)
    const requests = quantities(c.resources?.requests)
    const limits = quantities(c.resources?.limits)
    return {...(c.resources ? {resources: {...(requests ? {requests} : {}), ...(limits ? {limits} : {})}} : {}), ...(c.env ? {env: c.env} : {}), ...(c.envFrom ? {envFrom: c.envFrom} : {})}
  }
  const init = container(v.initContainer)
  const main = container(v.container)
  const out: TemplateOverrides = {
    ...(v.serviceAccountName ? {serviceAccountName: v.serviceAccountName} : {}),
    ...(v.securityContext ? {securityContext: v.securityContext} : {}),
    ...(init ? {initContainer: init} : {}),
    ...(main ? {container: main} : {}),
  }
  return Object.keys(out).length > 0 ? out : undefined
}

/**
 * binaryExecutor.path resolved inside --functions. A path leaving the directory rejects the object (thrown); a
 * binary that is missing or not runnable, or a functions directory that does not exist, loses only the
 * binaryExecutor (its tags go to the pod runtime) and is returned as a problem.
 */
async function binaryExecutor(b: NonNullable<CheckedSpec['binaryExecutor']>, functionsDir: string): Promise<{binary?: FunctionConfigEntry['binary']; problem?: string}> {
  const {realpath} = await import('node:fs/promises')
  const dirReal = await realpath(functionsDir).catch(() => '')
  if (dirReal === '') return {problem: `spec.binaryExecutor: the functions directory ${JSON.stringify(functionsDir)} does not exist; its tags ${JSON.stringify(b.tags)} go to the pod runtime`}
  let relative = b.path
  if (path.isAbsolute(b.path)) {
    relative = [path.relative(path.resolve(functionsDir), b.path), path.relative(dirReal, b.path)].find((r) => r !== '' && !r.startsWith('..') && !path.isAbsolute(r)) ?? ''
    if (relative === '') throw new FnrError('Config', `spec.binaryExecutor.path: Invalid value: ${JSON.stringify(b.path)}: is outside the functions directory ${functionsDir}`)
  }
  try {
    return {binary: {tags: b.tags, path: b.path, resolved: await resolveBinary(dirReal, relative, 'spec.binaryExecutor.path')}}
  } catch (err) {
    if (!(err instanceof FnrError) || err.details.missingBinary !== true) throw err
    return {problem: `${err.message}; its tags ${JSON.stringify(b.tags)} go to the pod runtime`}
  }
}

/** goExecutor (porch-server runs these in-process): fnr runs the catalog binary of that id, when --functions has one. */
async function goExecutor(g: NonNullable<CheckedSpec['goExecutor']>, image: string, functionsDir: string): Promise<{go?: FunctionConfigEntry['go']; problem?: string}> {
  const id = g.id?.trim() || image
  try {
    const {realpath} = await import('node:fs/promises')
    return {go: {tags: g.tags, id, resolved: await resolveBinary(await realpath(functionsDir), id, 'spec.goExecutor.id')}}
  } catch (err) {
    if (err instanceof FnrError ? err.details.missingBinary !== true : (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    return {problem: `spec.goExecutor: no binary ${JSON.stringify(id)} in the functions directory ${functionsDir} (porch-server runs goExecutor functions itself); its tags ${JSON.stringify(g.tags)} go to the pod runtime`}
  }
}

/**
 * Validates one object against the CRD's schema (src/lib/schema/function-config.ts) and what it cannot say
 * (beyondSchema, the binaries in --functions). FnrError('Config') whose message starts with
 * "FunctionConfig <ns>/<name>: " and lists every field error, kubectl's way ("; " between them; each one also in
 * details.fieldErrors).
 */
export async function parseFunctionConfig(obj: FunctionConfigObject, options: ParseOptions): Promise<FunctionConfigEntry> {
  const key = objectKey(obj)
  const invalid = (fieldErrors: string[], cause?: unknown): FnrError =>
    new FnrError('Config', `FunctionConfig ${key}: ${fieldErrors.join('; ')}`, {...(cause ? {cause} : {}), details: {functionConfig: key, fieldErrors}})
  const {spec, problems} = await checkedSpec(obj)
  if (!spec) throw invalid(problems)
  const entry = baseEntry(obj, spec, options)
  const found: Array<{binary?: FunctionConfigEntry['binary']; go?: FunctionConfigEntry['go']; problem?: string}> = []
  try {
    if (spec.binaryExecutor) found.push(await binaryExecutor(spec.binaryExecutor, options.functionsDir))
    if (spec.podExecutor) entry.pod = podSettings(spec.podExecutor)
    if (spec.goExecutor) found.push(await goExecutor(spec.goExecutor, entry.image, options.functionsDir))
  } catch (err) {
    throw invalid([(err as Error).message], err)
  }
  for (const f of found) {
    if (f.binary) entry.binary = f.binary
    if (f.go) entry.go = f.go
    if (f.problem) (entry.problems ??= []).push(f.problem)
  }
  return entry
}

/** The spec when the object passes the CRD's schema and beyondSchema, else every problem (a field the schema refused is not checked again). */
async function checkedSpec(obj: FunctionConfigObject): Promise<{spec?: CheckedSpec; problems: string[]}> {
  const [{functionConfigSchema}, {schemaProblems, withoutNulls}] = await Promise.all([import('../schema/function-config.js'), import('../schema/validate.js')])
  const checked = withoutNulls({apiVersion: obj.apiVersion, kind: obj.kind, spec: obj.spec ?? null}) as {spec?: CheckedSpec}
  const schema = [...(checked.spec ? [] : ['spec: Required value']), ...schemaProblems(await functionConfigSchema(), checked)]
  const fieldOf = (line: string): string => line.slice(0, line.indexOf(':'))
  const problems = [...schema, ...beyondSchema(obj, checked.spec).filter((l) => !schema.some((p) => fieldOf(p) === fieldOf(l)))]
  return problems.length > 0 ? {problems} : {spec: checked.spec!, problems}
}

/** The entry's identity and matching fields. */
function baseEntry(obj: FunctionConfigObject, spec: CheckedSpec, options: ParseOptions): FunctionConfigEntry {
  const prefixes = spec.prefixes ?? []
  const created = obj.metadata?.creationTimestamp
  return {
    key: objectKey(obj),
    ...(typeof obj.metadata?.generation === 'number' ? {generation: obj.metadata.generation} : {}),
    createdMs: created ? new Date(created).getTime() || 0 : 0,
    image: spec.image.trim(),
    repositories: [...new Set(prefixes.map((p) => normaliseRepository(p, options.defaultImagePrefix ?? DEFAULT_IMAGE_PREFIX)))],
    firstPrefix: prefixes[0],
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
