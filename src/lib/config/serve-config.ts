/**
 * What `fnr serve` reads from its flags and environment that carries Porch's meaning, in one place
 * (the command only turns flags into options):
 *
 * - --max-waitlist-length and --max-parallel-pods-per-function: 0 or less means the default
 *   (2 and 1), as Porch's runner reads them;
 * - --pin-image-digests: true, false or auto (pinned when the response cache is on);
 * - the environment: WRAPPER_SERVER_IMAGE (the inline template's wrapper image), FNR_DNS_SERVER
 *   (a resolver for Service names); empty means unset;
 * - --pod-cache-config, read once for both of its readers (the pod runtime and the response
 *   cache), with Porch's tolerance unless --strict-config.
 */
import {FnrError} from '../errors.js'
import type {Logger} from '../telemetry/log.js'
import {PodCacheConfig} from './pod-cache-config.js'

/** Porch's defaults for the two scale-up flags, used when a flag is 0 or less. */
export const DEFAULT_MAX_WAITLIST_LENGTH = 2
export const DEFAULT_MAX_PARALLEL_PODS = 1

/** Porch reads a count of 0 or less as "the default". */
export function positiveOr(value: number, fallback: number): number {
  return value > 0 ? value : fallback
}

export type PinImageDigests = boolean | 'auto'

/** --pin-image-digests: 'auto' stays auto, 'true' is true, anything else (the flag allows only false) false. */
export function parsePinImageDigests(value: string): PinImageDigests {
  return value === 'auto' ? 'auto' : value === 'true'
}

/** Whether function containers run as repo@digest: always, never, or (auto) when the response cache is on. */
export function pinsImageDigests(flag: PinImageDigests | undefined, responseCacheOn: boolean): boolean {
  return flag === true || ((flag ?? 'auto') === 'auto' && responseCacheOn)
}

export type PodAddressMode = 'service' | 'pod-ip'

/** --pod-address (the flag's options are these two; anything else is the default). */
export function parsePodAddress(value: string): PodAddressMode {
  return value === 'pod-ip' ? 'pod-ip' : 'service'
}

/**
 * Where `fnr serve` takes exec mappings, per-image pod settings and template changes from; `auto`
 * (the default) is decided at startup (lib/serve.ts resolveFunctionConfigSource).
 */
export type FunctionConfigSourceKind = 'files' | 'crd' | 'both' | 'auto'
export const FUNCTION_CONFIG_SOURCES: readonly FunctionConfigSourceKind[] = ['auto', 'files', 'crd', 'both']

export function parseFunctionConfigSource(value: string): FunctionConfigSourceKind {
  const v = value.trim().toLowerCase()
  if (!FUNCTION_CONFIG_SOURCES.includes(v as FunctionConfigSourceKind)) {
    throw new FnrError('Usage', `--function-config-source must be auto, files, crd or both, got ${JSON.stringify(value)}`)
  }
  return v as FunctionConfigSourceKind
}

/** The environment variables `fnr serve` reads for the pod runtime; an empty value is unset. */
export interface PodRuntimeEnv {
  wrapperServerImage?: string
  dnsServer?: string
}

export function podRuntimeEnv(env: NodeJS.ProcessEnv = process.env): PodRuntimeEnv {
  return {
    ...(env.WRAPPER_SERVER_IMAGE ? {wrapperServerImage: env.WRAPPER_SERVER_IMAGE} : {}),
    ...(env.FNR_DNS_SERVER ? {dnsServer: env.FNR_DNS_SERVER} : {}),
  }
}

export interface ServePodCacheConfigOptions {
  /** --pod-cache-config ('' for none). */
  path: string
  /** The pod runtime is on: it needs the file and reports a broken one (an error with --strict-config). */
  podRuntime: boolean
  /** The response cache may use the file's per-image switches. */
  responseCache: boolean
  /** --function-config-source=crd: FunctionConfigs replace the file, which is not read at all. */
  crdOnly: boolean
  /** --strict-config: a bad file stops the start; otherwise warnings and the flag defaults, as Porch. */
  strict: boolean
}

/**
 * --pod-cache-config, read once: the pod runtime gets its per-image settings and warm-up list from
 * it and the response cache its per-image switches. Without the pod runtime a file that cannot be
 * used only loses the response cache's switches (a warning); with it, a strict error stops the start.
 */
export async function loadServePodCacheConfig(o: ServePodCacheConfigOptions, logger: Logger): Promise<PodCacheConfig> {
  if (o.crdOnly || (!o.podRuntime && !o.responseCache)) return PodCacheConfig.empty()
  let loaded: {config: PodCacheConfig; missing: boolean}
  try {
    loaded = await PodCacheConfig.load(o.path, {lenient: !o.strict})
  } catch (err) {
    if (o.podRuntime) throw err
    logger.warn('response cache: ignoring the per-image switches of an unreadable pod cache config', {error: (err as Error).message})
    return PodCacheConfig.empty()
  }
  if (o.podRuntime) {
    if (loaded.missing) logger.info('no pod cache config; using the flag defaults for every image', {path: o.path})
    for (const warning of loaded.config.warnings) logger.warn(warning)
  }
  return loaded.config
}
