/**
 * What an image means once its manifest and config are in hand: media types, platform matching
 * for indexes, and the command fnr runs for a function image.
 *
 * The command rule (fnr differs from Porch on purpose; docs/image-inspect.md):
 *   - Entrypoint and Cmd both set → Entrypoint followed by Cmd, as a container runtime runs them
 *     (Porch ignores Cmd in this case);
 *   - only Entrypoint → Entrypoint;
 *   - only Cmd → Cmd;
 *   - neither → an error (Porch starts the pod anyway and the wrapper crashes on the first call).
 */
import {FnrError} from '../errors.js'

export const MediaType = {
  OciManifest: 'application/vnd.oci.image.manifest.v1+json',
  OciIndex: 'application/vnd.oci.image.index.v1+json',
  DockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  DockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  OciConfig: 'application/vnd.oci.image.config.v1+json',
  DockerConfig: 'application/vnd.docker.container.image.v1+json',
  OciLayer: 'application/vnd.oci.image.layer.v1.tar',
  OciLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  OciLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  DockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  DockerSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  DockerSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
} as const

/** All four manifest types, always sent together (a registry answers 404 for an OCI image otherwise). */
export const MANIFEST_ACCEPT = [MediaType.OciIndex, MediaType.DockerManifestList, MediaType.OciManifest, MediaType.DockerManifest].join(', ')

export function isIndexMediaType(mediaType: string): boolean {
  return mediaType === MediaType.OciIndex || mediaType === MediaType.DockerManifestList
}

export function isImageManifestMediaType(mediaType: string): boolean {
  return mediaType === MediaType.OciManifest || mediaType === MediaType.DockerManifest
}

export interface Platform {
  os: string
  architecture: string
  variant?: string
}

export const DEFAULT_PLATFORM: Platform = {os: 'linux', architecture: 'amd64'}

/** The variant a runtime assumes when none is asked for (containerd's defaults). */
const DEFAULT_VARIANTS: Record<string, string> = {arm: 'v7'}

const ARCH_ALIASES: Record<string, string> = {x86_64: 'amd64', 'x86-64': 'amd64', aarch64: 'arm64', armhf: 'arm', armel: 'arm', i386: '386'}

/** Parses "os/arch[/variant]" (e.g. linux/amd64, linux/arm64/v8, linux/arm/v7); FnrError('InvalidArgument') otherwise. */
export function parsePlatform(text: string): Platform {
  const parts = text.trim().toLowerCase().split('/')
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => !/^[a-z0-9._-]+$/.test(p))) {
    throw new FnrError('InvalidArgument', `invalid platform ${JSON.stringify(text)}: expected os/architecture[/variant], e.g. linux/amd64 or linux/arm64/v8`)
  }
  return normalisePlatform({os: parts[0]!, architecture: parts[1]!, variant: parts[2]})
}

export function normalisePlatform(p: Platform): Platform {
  const architecture = ARCH_ALIASES[p.architecture] ?? p.architecture
  let variant = p.variant || undefined
  if (architecture === 'arm64' && variant === 'v8') variant = undefined
  return variant === undefined ? {os: p.os, architecture} : {os: p.os, architecture, variant}
}

export function formatPlatform(p: Platform): string {
  return [p.os, p.architecture, p.variant].filter((s) => s !== undefined && s !== '').join('/')
}

export interface IndexEntry {
  mediaType?: string
  digest: string
  size?: number
  platform?: {os?: string; architecture?: string; variant?: string}
  annotations?: Record<string, string>
}

/**
 * Picks the entry of an index for a platform. OS and architecture must match; a requested variant
 * must match too; without one, an entry without a variant is preferred, then the architecture's
 * default variant (arm → v7). Attestation entries
 * (platform unknown/unknown) never match.
 */
export function selectPlatformEntry(entries: readonly IndexEntry[], wanted: Platform): IndexEntry | undefined {
  const want = normalisePlatform(wanted)
  const candidates = entries.filter((e) => {
    if (e.platform?.os === undefined || e.platform.architecture === undefined) return false
    const p = normalisePlatform({os: e.platform.os, architecture: e.platform.architecture, variant: e.platform.variant})
    if (p.os !== want.os || p.architecture !== want.architecture) return false
    return want.variant === undefined || p.variant === want.variant
  })
  if (candidates.length <= 1 || want.variant !== undefined) return candidates[0]
  const variantOf = (e: IndexEntry): string | undefined => normalisePlatform(e.platform as Platform).variant
  return (
    candidates.find((e) => variantOf(e) === undefined) ??
    candidates.find((e) => variantOf(e) === DEFAULT_VARIANTS[want.architecture]) ??
    candidates[0]
  )
}

/** The platforms an index offers, for messages ("linux/amd64, linux/arm64"). */
export function listPlatforms(entries: readonly IndexEntry[]): string[] {
  return entries
    .filter((e) => e.platform?.os !== undefined && e.platform.architecture !== undefined && e.platform.os !== 'unknown')
    .map((e) => formatPlatform({os: e.platform!.os!, architecture: e.platform!.architecture!, variant: e.platform!.variant}))
}

/** The command the function runner runs for an image (see the rule at the top); [] when there is none. */
export function functionCommand(entrypoint: readonly string[], cmd: readonly string[]): string[] {
  if (entrypoint.length > 0) return [...entrypoint, ...cmd]
  return [...cmd]
}

/** Like functionCommand, but an image with neither Entrypoint nor Cmd is FnrError('FailedPrecondition'). */
export function requireFunctionCommand(image: string, entrypoint: readonly string[], cmd: readonly string[]): string[] {
  const command = functionCommand(entrypoint, cmd)
  if (command.length === 0) {
    throw new FnrError('FailedPrecondition', `image "${image}" has neither Entrypoint nor Cmd in its config, so there is no function to run`)
  }
  return command
}

export const WRAPPER_SERVER_PATH = '/wrapper-server-tools/wrapper-server'
export const WRAPPER_SERVER_PORT = 9446
export const DEFAULT_MAX_REQUEST_BODY_SIZE = 6 * 1024 * 1024

/** The args of the function container: wrapper-server flags, "--", then the function command. */
export function wrapperServerArgs(command: readonly string[], options: {port?: number; maxRequestBodySize?: number} = {}): string[] {
  return [
    '--port',
    String(options.port ?? WRAPPER_SERVER_PORT),
    '--max-request-body-size',
    String(options.maxRequestBodySize ?? DEFAULT_MAX_REQUEST_BODY_SIZE),
    '--',
    ...command,
  ]
}

/** A POSIX-shell rendering of an argv, for display only. */
export function shellQuote(argv: readonly string[]): string {
  return argv.map((a) => (a !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ')
}
