/**
 * Builds OCI image layouts by hand (a tiny tar writer, gzip, JSON and sha256) and pushes them to a
 * TestRegistry with skopeo, so the tests need no Docker.
 */
import {createHash} from 'node:crypto'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {gzipSync} from 'node:zlib'

import {execa} from 'execa'

import type {TestRegistry} from './registry.js'
import {requireTool} from './tools.js'

export interface ImageSpec {
  os?: string
  architecture?: string
  variant?: string
  entrypoint?: string[]
  cmd?: string[]
  /** Files of the first layer: path → content. */
  files?: Record<string, string | Buffer>
  /** More layers on top of the first (a file named `.wh.<name>` is a whiteout), or ready-made tar archives. */
  layers?: Array<Record<string, string | Buffer> | Buffer>
  /** Image config Env (default PATH only), WorkingDir and User. */
  env?: string[]
  workingDir?: string
  user?: string
  /** gzip level of the layers (default 9; big layers build much faster at 1). */
  gzipLevel?: number
  labels?: Record<string, string>
}

export interface Descriptor {
  mediaType: string
  digest: string
  size: number
  platform?: {os: string; architecture: string; variant?: string}
  annotations?: Record<string, string>
}

export interface BuiltImage {
  manifest: Descriptor
  config: Descriptor
  layers: Descriptor[]
}

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json'
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json'
const OCI_CONFIG = 'application/vnd.oci.image.config.v1+json'
const OCI_LAYER_GZIP = 'application/vnd.oci.image.layer.v1.tar+gzip'
const CREATED = '2026-01-01T00:00:00Z'

export function sha256(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`
}

/** A deterministic ustar archive of regular files (mode 0755, uid/gid 0, fixed mtime). */
export function tar(files: Record<string, string | Buffer>): Buffer {
  const blocks: Buffer[] = []
  for (const name of Object.keys(files).sort()) {
    const content = Buffer.isBuffer(files[name]) ? (files[name] as Buffer) : Buffer.from(files[name] as string, 'utf8')
    const header = Buffer.alloc(512)
    const field = (value: string, offset: number, length: number): void => {
      header.write(value, offset, Math.min(Buffer.byteLength(value), length), 'utf8')
    }
    const octal = (value: number, offset: number, length: number): void => field(`${value.toString(8).padStart(length - 1, '0')}\0`, offset, length)
    if (Buffer.byteLength(name) > 100) throw new Error(`tar: name too long: ${name}`)
    field(name, 0, 100)
    octal(0o755, 100, 8)
    octal(0, 108, 8)
    octal(0, 116, 8)
    octal(content.length, 124, 12)
    octal(Math.floor(Date.parse(CREATED) / 1000), 136, 12)
    header.fill(' ', 148, 156)
    field('0', 156, 1)
    field('ustar\0', 257, 6)
    field('00', 263, 2)
    field('root', 265, 32)
    field('root', 297, 32)
    let sum = 0
    for (const byte of header) sum += byte
    field(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8)
    blocks.push(header, content)
    const pad = (512 - (content.length % 512)) % 512
    if (pad > 0) blocks.push(Buffer.alloc(pad))
  }
  blocks.push(Buffer.alloc(1024))
  return Buffer.concat(blocks)
}

/** An OCI image layout directory being filled; write() finishes it. */
export class OciLayout {
  private readonly blobs = new Map<string, Buffer>()
  private readonly refs: Descriptor[] = []

  constructor(readonly dir: string) {}

  private addBlob(data: Buffer): string {
    const digest = sha256(data)
    this.blobs.set(digest, data)
    return digest
  }

  /** Builds an image (one layer) and returns its descriptors; `tag` names it in index.json when given. */
  addImage(spec: ImageSpec, tag?: string): BuiltImage {
    const tars = [spec.files ?? {'hello.txt': `hello from ${spec.architecture ?? 'amd64'}\n`}, ...(spec.layers ?? [])].map((files) => (Buffer.isBuffer(files) ? files : tar(files)))
    const layers: Descriptor[] = tars.map((layerTar) => {
      const layerGz = gzipSync(layerTar, {level: spec.gzipLevel ?? 9})
      return {mediaType: OCI_LAYER_GZIP, digest: this.addBlob(layerGz), size: layerGz.length}
    })
    const imageConfig: Record<string, unknown> = {}
    if (spec.entrypoint !== undefined) imageConfig.Entrypoint = spec.entrypoint
    if (spec.cmd !== undefined) imageConfig.Cmd = spec.cmd
    if (spec.labels !== undefined) imageConfig.Labels = spec.labels
    imageConfig.Env = spec.env ?? ['PATH=/usr/local/bin:/usr/bin:/bin']
    if (spec.workingDir !== undefined) imageConfig.WorkingDir = spec.workingDir
    if (spec.user !== undefined) imageConfig.User = spec.user
    const configDoc: Record<string, unknown> = {
      created: CREATED,
      architecture: spec.architecture ?? 'amd64',
      os: spec.os ?? 'linux',
      config: imageConfig,
      rootfs: {type: 'layers', diff_ids: tars.map((t) => sha256(t))},
    }
    if (spec.variant !== undefined) configDoc.variant = spec.variant
    const configBytes = Buffer.from(JSON.stringify(configDoc))
    const config: Descriptor = {mediaType: OCI_CONFIG, digest: this.addBlob(configBytes), size: configBytes.length}
    const manifestBytes = Buffer.from(JSON.stringify({schemaVersion: 2, mediaType: OCI_MANIFEST, config, layers}))
    const manifest: Descriptor = {mediaType: OCI_MANIFEST, digest: this.addBlob(manifestBytes), size: manifestBytes.length}
    if (tag !== undefined) this.refs.push({...manifest, annotations: {'org.opencontainers.image.ref.name': tag}})
    return {manifest, config, layers}
  }

  /** Builds one image per spec and an OCI index over them, named `tag`. */
  addIndex(specs: ImageSpec[], tag: string, extraEntries: Descriptor[] = []): {index: Descriptor; images: BuiltImage[]} {
    const images = specs.map((s) => this.addImage(s))
    const manifests = images.map((img, i) => {
      const s = specs[i]!
      const platform: Descriptor['platform'] = {os: s.os ?? 'linux', architecture: s.architecture ?? 'amd64'}
      if (s.variant !== undefined) platform.variant = s.variant
      return {...img.manifest, platform}
    })
    const indexBytes = Buffer.from(JSON.stringify({schemaVersion: 2, mediaType: OCI_INDEX, manifests: [...manifests, ...extraEntries]}))
    const index: Descriptor = {mediaType: OCI_INDEX, digest: this.addBlob(indexBytes), size: indexBytes.length}
    this.refs.push({...index, annotations: {'org.opencontainers.image.ref.name': tag}})
    return {index, images}
  }

  async write(): Promise<string> {
    const blobDir = path.join(this.dir, 'blobs', 'sha256')
    await mkdir(blobDir, {recursive: true})
    for (const [digest, data] of this.blobs) await writeFile(path.join(blobDir, digest.slice('sha256:'.length)), data)
    await writeFile(path.join(this.dir, 'oci-layout'), JSON.stringify({imageLayoutVersion: '1.0.0'}))
    await writeFile(path.join(this.dir, 'index.json'), JSON.stringify({schemaVersion: 2, mediaType: OCI_INDEX, manifests: this.refs}))
    return this.dir
  }
}

export interface PushOptions {
  /** docker config JSON for the registry (needed unless the registry has no auth). */
  authFile?: string
  /** Copy every image of an index (skopeo --all). */
  all?: boolean
  /** Convert to Docker schema 2 (skopeo --format v2s2). */
  dockerFormat?: boolean
}

/** skopeo copy oci:<layout>:<tag> docker://<registry>/<repository> */
export async function pushWithSkopeo(layoutDir: string, tag: string, registry: TestRegistry, repository: string, options: PushOptions = {}): Promise<void> {
  const args = ['copy', '--insecure-policy', '--quiet', '--retry-times', '0']
  if (registry.secure) args.push('--dest-cert-dir', registry.certDir!)
  else args.push('--dest-tls-verify=false')
  if (options.authFile !== undefined) args.push('--dest-authfile', options.authFile)
  if (options.all) args.push('--all')
  if (options.dockerFormat) args.push('--format', 'v2s2')
  args.push(`oci:${layoutDir}:${tag}`, `docker://${registry.host}/${repository}`)
  const result = await execa(requireTool('skopeo'), args, {reject: false, stdin: 'ignore'})
  if (result.exitCode !== 0) {
    throw new Error(`skopeo ${args.join(' ')} failed (${result.exitCode}): ${String(result.stderr).trim()}`)
  }
}

/** skopeo inspect --raw: the manifest exactly as the registry stores it (an independent oracle). */
export async function skopeoRawManifest(registry: TestRegistry, reference: string, authFile?: string): Promise<Buffer> {
  const args = ['inspect', '--raw', '--retry-times', '0']
  if (registry.secure) args.push('--cert-dir', registry.certDir!)
  else args.push('--tls-verify=false')
  if (authFile !== undefined) args.push('--authfile', authFile)
  args.push(`docker://${registry.host}/${reference}`)
  const result = await execa(requireTool('skopeo'), args, {encoding: 'buffer', reject: false, stdin: 'ignore'})
  if (result.exitCode !== 0) throw new Error(`skopeo ${args.join(' ')} failed: ${Buffer.from(result.stderr).toString().trim()}`)
  return Buffer.from(result.stdout)
}
