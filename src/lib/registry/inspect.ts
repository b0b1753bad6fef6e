/**
 * `fnr image inspect`: what the pod runtime would run for an image (digest, platform, entrypoint,
 * the wrapper command), as data (--json prints it as is) and as the command's text.
 */
import {access} from 'node:fs/promises'

import {DockerConfig, defaultAuthFile} from './auth.js'
import {RegistryClient, type ImageMetadata} from './client.js'
import {formatPlatform, parsePlatform, shellQuote, WRAPPER_SERVER_PATH, wrapperServerArgs} from './image-config.js'
import {loadCaFile} from './tls.js'

export interface InspectImageOptions {
  image: string
  /** --auth-file; undefined: $REGISTRY_AUTH_FILE, $DOCKER_CONFIG/config.json or ~/.docker/config.json when it exists. */
  authFile?: string
  caFiles: string[]
  insecureRegistries: string[]
  /** os/arch[/variant]. */
  platform: string
  timeoutMs: number
}

/** The image's metadata and the wrapper server's command for it (fnr image inspect --json). */
export type ImageInspection = ImageMetadata & {wrapper: {command: string[]; args: string[]}}

export async function inspectImage(options: InspectImageOptions, env: NodeJS.ProcessEnv = process.env): Promise<ImageInspection> {
  let dockerConfig = DockerConfig.empty()
  const authFile = options.authFile ?? defaultAuthFile(env)
  if (options.authFile !== undefined) dockerConfig = await DockerConfig.load(options.authFile)
  else if (authFile !== undefined && (await fileExists(authFile))) dockerConfig = await DockerConfig.load(authFile)
  const caCertificates = await Promise.all(options.caFiles.map((f) => loadCaFile(f)))
  const client = new RegistryClient({
    dockerConfig,
    caCertificates,
    insecureRegistries: options.insecureRegistries,
    platform: parsePlatform(options.platform),
    requestTimeoutMs: options.timeoutMs,
  })
  try {
    const meta = await client.inspect(options.image, {signal: AbortSignal.timeout(options.timeoutMs)})
    return {...meta, wrapper: {command: [WRAPPER_SERVER_PATH], args: wrapperServerArgs(meta.command)}}
  } finally {
    client.close()
  }
}

async function fileExists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  )
}

/** The command's text: one "Key: value" row per fact, aligned. */
export function formatImageInspection(meta: ImageInspection): string {
  const rows: Array<[string, string]> = [
    ['Image', meta.image],
    ['Reference', meta.reference],
    ['Digest', meta.digest],
    ['Media type', meta.mediaType],
  ]
  if (meta.index !== undefined) rows.push(['Index', `${meta.index.digest} (${meta.index.mediaType}; ${meta.index.platforms.join(', ')})`])
  rows.push(
    ['Pinned', meta.pinnedReference],
    ['Platform', formatPlatform(meta.platform)],
    ['Entrypoint', meta.entrypoint.length > 0 ? JSON.stringify(meta.entrypoint) : '(none)'],
    ['Cmd', meta.cmd.length > 0 ? JSON.stringify(meta.cmd) : '(none)'],
    ['Size', `${formatBytes(meta.size)} (config and ${meta.layers} compressed ${meta.layers === 1 ? 'layer' : 'layers'})`],
  )
  if (meta.created !== undefined) rows.push(['Created', meta.created])
  rows.push(['Command', shellQuote(meta.command)], ['Wrapper', shellQuote([...meta.wrapper.command, ...meta.wrapper.args])])
  const width = Math.max(...rows.map(([k]) => k.length)) + 2
  return rows.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}\n`).join('')
}

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB']
  let v = n
  let u = -1
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return `${v.toFixed(1)} ${units[u]} (${n} bytes)`
}
