/**
 * lib/container: running `image:` functions the exec config does not map in a container runtime,
 * for `fnr eval --image` and `fnr render` (docs/container-runtime.md). One ContainerSession serves
 * one command run: the runtime is chosen once, each image is resolved once (so a tag means one
 * digest for the whole run, written on stderr), and the registry client is shared.
 */
import {access} from 'node:fs/promises'
import path from 'node:path'

import {FnrError} from '../errors.js'
import type {FunctionProcessResult} from '../process/run.js'
import {DockerConfig, defaultAuthFile} from '../registry/auth.js'
import {RegistryClient} from '../registry/client.js'
import {formatPlatform, type Platform} from '../registry/image-config.js'
import type {ProcessLauncher} from '../process/launcher.js'
import {runWithCli} from './cli-runtime.js'
import {ImageCache, cacheLimit, defaultCacheDir} from './image-cache.js'
import {defaultStateRoot, limitsFromEnv, runWithOciRuntime, type BindMount} from './oci-runtime.js'
import {ensureImage, normalisePullPolicy, type EnsuredImage} from './pull.js'
import {selectRuntime, type ContainerRuntime} from './runtime-select.js'

/** What kpt's container flags asked for (fnr eval: --image-pull-policy, --network, --as-current-user, --mount, --env; fnr render: --image-pull-policy, --allow-network). */
export interface ContainerOptions {
  /** Always, IfNotPresent (the default) or Never, in any case. */
  pullPolicy?: string
  network?: boolean
  asCurrentUser?: boolean
  /** docker --mount values. */
  mounts?: readonly string[]
  /** KEY=VALUE, or KEY to pass fnr's own value (as docker -e). */
  env?: readonly string[]
}

export interface ContainerCall {
  deadline?: number
  signal?: AbortSignal
  maxOutputBytes: number
  /** Starts the runtime's process and keeps its call (the command's launcher). */
  launcher: ProcessLauncher
}

/** The host's platform, as image indexes name it. */
export function hostPlatform(): Platform {
  const arch: Record<string, Platform> = {
    x64: {os: 'linux', architecture: 'amd64'},
    arm64: {os: 'linux', architecture: 'arm64'},
    arm: {os: 'linux', architecture: 'arm', variant: 'v7'},
    ppc64: {os: 'linux', architecture: 'ppc64le'},
    s390x: {os: 'linux', architecture: 's390x'},
    riscv64: {os: 'linux', architecture: 'riscv64'},
  }
  const found = arch[process.arch]
  if (found === undefined || process.platform !== 'linux') {
    throw new FnrError('FailedPrecondition', `fnr runs container images on Linux only, for amd64, arm64, arm, ppc64le, s390x and riscv64 (this is ${process.platform}/${process.arch})`)
  }
  return found
}

/** The fields of a docker --mount value: key=value pairs, and the read-only switch (readonly, ro, rw=…). */
function mountFields(value: string): {fields: Map<string, string>; readOnly?: boolean} {
  const fields = new Map<string, string>()
  let readOnly: boolean | undefined
  const yes = (v: string | undefined): boolean => v === undefined || v === 'true' || v === '1'
  for (const part of value.split(',')) {
    const eq = part.indexOf('=')
    const key = (eq < 0 ? part : part.slice(0, eq)).trim().toLowerCase()
    const v = eq < 0 ? undefined : part.slice(eq + 1)
    if (key === 'readonly' || key === 'ro') readOnly = yes(v)
    else if (key === 'rw') readOnly = !yes(v)
    else if (v !== undefined) fields.set(key, v)
  }
  return {fields, readOnly}
}

/** A docker --mount value (type=bind,source=…,target=…[,readonly|,rw=true]) as a bind mount. */
export function parseMount(value: string): BindMount {
  const {fields, readOnly} = mountFields(value)
  const type = fields.get('type') ?? 'volume'
  const source = fields.get('source') ?? fields.get('src')
  const target = fields.get('target') ?? fields.get('dst') ?? fields.get('destination')
  if (type !== 'bind') throw new FnrError('Usage', `--mount ${JSON.stringify(value)}: fnr's own runtime mounts type=bind only (use docker or podman for ${type} mounts)`)
  if (!source || !target) throw new FnrError('Usage', `--mount ${JSON.stringify(value)}: give source= and target=`)
  if (!path.isAbsolute(target)) throw new FnrError('Usage', `--mount ${JSON.stringify(value)}: the target must be an absolute path`)
  // kpt mounts read-only unless rw=true is given.
  return {source: path.resolve(source), target, readOnly: readOnly ?? true}
}

/** --env entries for the container: KEY=VALUE as given, KEY with fnr's own value when it has one. */
export function containerEnvEntries(entries: readonly string[], env: NodeJS.ProcessEnv = process.env): string[] {
  const out: string[] = []
  for (const e of entries) {
    if (e.includes('=')) out.push(e)
    else if (env[e] !== undefined) out.push(`${e}=${env[e]}`)
  }
  return out
}

export class ContainerSession {
  private runtime?: Promise<ContainerRuntime | undefined>
  private client?: RegistryClient
  private cache?: ImageCache
  /** Each image once per run: the digest a tag means stays the same for the whole run. */
  private readonly images = new Map<string, Promise<EnsuredImage>>()

  constructor(
    private readonly options: ContainerOptions,
    private readonly stderr: NodeJS.WritableStream,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    normalisePullPolicy(options.pullPolicy)
  }

  /**
   * The runtime chosen for this run; undefined when FNR_CONTAINER_RUNTIME is none. A container CLI
   * passed over because it does not work is said once, on stderr.
   */
  selectedRuntime(): Promise<ContainerRuntime | undefined> {
    return (this.runtime ??= selectRuntime(this.env).then((runtime) => {
      if (runtime?.passedOver) this.stderr.write(`[IMAGE] running image functions with ${runtime.name}: ${runtime.passedOver.join('; ')}\n`)
      return runtime
    }))
  }

  /**
   * Runs `image` (the full name, as kpt resolves it) on `input`. The result is the function's, as
   * the exec runtime gives it; a runtime that cannot run it, a failed pull or an image without a
   * command is an FnrError. NotFound with details.noRuntime when FNR_CONTAINER_RUNTIME is none.
   */
  async run(image: string, label: string, input: Buffer, call: ContainerCall): Promise<FunctionProcessResult> {
    const runtime = await this.selectedRuntime()
    if (runtime === undefined) throw new FnrError('NotFound', 'FNR_CONTAINER_RUNTIME is none', {details: {noRuntime: true}})
    const policy = normalisePullPolicy(this.options.pullPolicy) ?? 'IfNotPresent'
    const network = this.options.network === true
    const user = this.options.asCurrentUser ? {uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0} : undefined
    if (runtime.kind === 'cli') {
      // docker -e KEY takes the value from the CLI's own environment, which is fnr's.
      const cli = {runtime, image, label, input, policy, network, mounts: this.options.mounts ?? [], env: this.options.env ?? []}
      return runWithCli({...cli, user: user && `${user.uid}:${user.gid}`, ...call})
    }
    const mounts = (this.options.mounts ?? []).map(parseMount)
    const ensured = await this.ensure(image, label, policy, pullSignal(call))
    const env = containerEnvEntries(this.options.env ?? [], this.env)
    const stateRoot = defaultStateRoot(runtime.name, this.env)
    return runWithOciRuntime({runtime, stateRoot, image: ensured.image, label, input, network, user, mounts, env, limits: limitsFromEnv(this.env), ...call})
  }

  private ensure(image: string, label: string, policy: 'Always' | 'IfNotPresent' | 'Never', signal: AbortSignal | undefined): Promise<EnsuredImage> {
    let pending = this.images.get(image)
    if (pending === undefined) {
      pending = (async () => {
        const ensured = await ensureImage(await this.registry(), this.imageCache(), image, {policy, platform: hostPlatform(), signal})
        const {digest} = ensured.image
        const how = ensured.pulled
          ? `pulled ${ensured.pulled.layers} ${ensured.pulled.layers === 1 ? 'layer' : 'layers'}, ${formatMb(ensured.pulled.bytes)} in ${(ensured.pulled.ms / 1000).toFixed(2)}s`
          : 'cached'
        this.stderr.write(`[IMAGE] ${JSON.stringify(label)} ${digest} (${formatPlatform(hostPlatform())}, ${how})\n`)
        return ensured
      })()
      // A failed pull is not remembered: a later function of the run tries again.
      pending.catch(() => this.images.delete(image))
      this.images.set(image, pending)
    }
    return pending
  }

  private imageCache(): ImageCache {
    return (this.cache ??= new ImageCache(defaultCacheDir(this.env), cacheLimit(this.env)))
  }

  private async registry(): Promise<RegistryClient> {
    if (this.client !== undefined) return this.client
    // Credentials as kpt's docker would find them: $REGISTRY_AUTH_FILE, $DOCKER_CONFIG/config.json or ~/.docker/config.json.
    const file = defaultAuthFile(this.env)
    let dockerConfig = DockerConfig.empty()
    if (file !== undefined && (await access(file).then(() => true, () => false))) dockerConfig = await DockerConfig.load(file)
    const insecure = (this.env.FNR_INSECURE_REGISTRIES ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
    this.client = new RegistryClient({dockerConfig, platform: hostPlatform(), insecureRegistries: insecure, insecureLoopback: true})
    return this.client
  }

  async close(): Promise<void> {
    this.client?.close()
    await this.cache?.release()
  }
}

/** The call's signal, also aborted (TimeoutError) at its deadline: a pull counts against --timeout, as kpt's docker run does. */
function pullSignal(call: ContainerCall): AbortSignal | undefined {
  if (call.deadline === undefined || !Number.isFinite(call.deadline)) return call.signal
  const timeout = AbortSignal.timeout(Math.max(0, Math.min(call.deadline - Date.now(), 2_147_483_647)))
  return call.signal ? AbortSignal.any([call.signal, timeout]) : timeout
}

function formatMb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`
}
