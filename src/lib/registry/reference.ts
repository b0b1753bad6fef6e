/**
 * Image references: parsing and normalising what users write ("alpine", "ghcr.io/org/fn:v1",
 * "127.0.0.1:5000/fn/x@sha256:…") into registry, repository, tag and digest.
 *
 * The grammar is the distribution reference grammar (the one Docker, containerd and
 * go-containerregistry follow):
 *   - the first "/"-separated component is a registry host when it contains "." or ":", is
 *     "localhost", or has upper-case letters; otherwise the whole name is a Docker Hub name;
 *   - Docker Hub names with a single component get "library/" ("alpine" → docker.io/library/alpine);
 *   - repository components are lower-case [a-z0-9] runs joined by ".", "_", "__" or dashes;
 *   - a tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; a digest is "<algorithm>:<hex>";
 *   - with neither tag nor digest the tag is "latest"; with both, the digest decides what is pulled.
 *
 * Docker Hub is spelled "docker.io" here whatever alias was written (index.docker.io,
 * registry-1.docker.io, registry.hub.docker.com); its API lives at registry-1.docker.io.
 */
import {FnrError} from '../errors.js'

export const DEFAULT_TAG = 'latest'
export const DOCKER_HUB = 'docker.io'
export const DOCKER_HUB_API_HOST = 'registry-1.docker.io'

const DOCKER_HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com'])

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/
const DOMAIN_LABEL = '(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)'
const HOST = new RegExp(`^(?:${DOMAIN_LABEL}(?:\\.${DOMAIN_LABEL})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]{1,5})?$`)
const TAG = /^[\w][\w.-]{0,127}$/
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/
const SHA256_HEX = /^[a-f0-9]{64}$/
const SHA512_HEX = /^[a-f0-9]{128}$/
const MAX_NAME_LENGTH = 255

export class ImageReference {
  /** Registry host, lower-cased, with port if one was given; Docker Hub is "docker.io". */
  readonly registry: string
  /** Repository path inside the registry, e.g. "library/alpine" or "kptdev/krm-functions-catalog/set-labels". */
  readonly repository: string
  /** The tag written (or "latest" when neither tag nor digest was written); undefined for digest-only references. */
  readonly tag: string | undefined
  /** "sha256:<hex>" when the reference pins a digest. */
  readonly digest: string | undefined
  /** Exactly what the user wrote. */
  readonly input: string

  constructor(parts: {registry: string; repository: string; tag?: string; digest?: string; input?: string}) {
    this.registry = parts.registry
    this.repository = parts.repository
    this.tag = parts.tag
    this.digest = parts.digest
    this.input = parts.input ?? ''
  }

  /** registry/repository, e.g. "docker.io/library/alpine". */
  get name(): string {
    return `${this.registry}/${this.repository}`
  }

  /** What the manifest endpoint is asked for: the digest when there is one, else the tag. */
  get identifier(): string {
    return this.digest ?? this.tag ?? DEFAULT_TAG
  }

  /** True when the reference names content that cannot change (a digest). */
  get isDigest(): boolean {
    return this.digest !== undefined
  }

  /** The host (and port) the registry API is served from. */
  get apiHost(): string {
    return registryApiHost(this.registry)
  }

  /** The same repository pinned to a digest (the tag is kept for display). */
  withDigest(digest: string): ImageReference {
    return new ImageReference({registry: this.registry, repository: this.repository, tag: this.tag, digest, input: this.input})
  }

  /** The normalised, fully qualified form: "docker.io/library/alpine:latest", "r:5000/x@sha256:…". */
  toString(): string {
    const tag = this.tag !== undefined ? `:${this.tag}` : ''
    const digest = this.digest !== undefined ? `@${this.digest}` : ''
    return `${this.name}${tag}${digest}`
  }
}

function invalid(input: string, reason: string): FnrError {
  return new FnrError('InvalidArgument', `invalid image reference ${JSON.stringify(input)}: ${reason}`)
}

/** Parses an image reference; throws FnrError('InvalidArgument') with the reason when it is malformed. */
export function parseImageReference(input: string): ImageReference {
  if (typeof input !== 'string' || input.trim() === '') throw invalid(String(input), 'it is empty')
  const text = input.trim()
  if (/\s/.test(text)) throw invalid(input, 'it contains whitespace')
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) throw invalid(input, 'a reference has no scheme (drop the "http://" or "https://")')

  let rest = text
  let digest: string | undefined
  const at = rest.indexOf('@')
  if (at >= 0) {
    digest = rest.slice(at + 1)
    rest = rest.slice(0, at)
    validateDigest(input, digest)
  }

  let tag: string | undefined
  const lastSlash = rest.lastIndexOf('/')
  const colon = rest.lastIndexOf(':')
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1)
    rest = rest.slice(0, colon)
    if (!TAG.test(tag)) throw invalid(input, `tag ${JSON.stringify(tag)} is not valid (letters, digits, "_", "." and "-", at most 128, not starting with "." or "-")`)
  }
  if (rest === '') throw invalid(input, 'the repository name is missing')

  const components = rest.split('/')
  let registry = DOCKER_HUB
  const first = components[0]!
  if (components.length > 1 && looksLikeHost(first)) {
    if (!HOST.test(first)) throw invalid(input, `registry host ${JSON.stringify(first)} is not valid`)
    const port = first.match(/:([0-9]+)$/)?.[1]
    if (port !== undefined && Number(port) > 65535) throw invalid(input, `port ${port} is out of range`)
    registry = normaliseRegistryHost(first)
    components.shift()
  }
  for (const component of components) {
    if (component === '') throw invalid(input, 'it has an empty path component ("//" or a trailing "/")')
    if (!PATH_COMPONENT.test(component)) {
      const hint = /[A-Z]/.test(component) ? ' (repository names must be lower case)' : ''
      throw invalid(input, `path component ${JSON.stringify(component)} is not valid${hint}`)
    }
  }
  if (registry === DOCKER_HUB && components.length === 1) components.unshift('library')
  const repository = components.join('/')
  if (`${registry}/${repository}`.length > MAX_NAME_LENGTH) throw invalid(input, `the name is longer than ${MAX_NAME_LENGTH} characters`)

  if (tag === undefined && digest === undefined) tag = DEFAULT_TAG
  return new ImageReference({registry, repository, tag, digest, input})
}

function looksLikeHost(component: string): boolean {
  return component.includes('.') || component.includes(':') || component === 'localhost' || component !== component.toLowerCase()
}

function validateDigest(input: string, digest: string): void {
  if (!DIGEST.test(digest)) throw invalid(input, `digest ${JSON.stringify(digest)} is not "<algorithm>:<hex>"`)
  const [algorithm, hex] = digest.split(':') as [string, string]
  if (algorithm === 'sha256' && !SHA256_HEX.test(hex)) throw invalid(input, 'a sha256 digest has 64 lower-case hex digits')
  if (algorithm === 'sha512' && !SHA512_HEX.test(hex)) throw invalid(input, 'a sha512 digest has 128 lower-case hex digits')
  if (algorithm !== 'sha256' && algorithm !== 'sha512') throw invalid(input, `digest algorithm ${JSON.stringify(algorithm)} is not supported (sha256 or sha512)`)
}

/**
 * Normalises a registry key as written in a docker config or on the command line:
 * "https://index.docker.io/v1/" → "docker.io", "HTTPS://Ghcr.IO/" → "ghcr.io", "r:5000/v2" → "r:5000".
 */
export function normaliseRegistryHost(value: string): string {
  let host = value.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, '')
  const slash = host.indexOf('/')
  if (slash >= 0) host = host.slice(0, slash)
  host = host.toLowerCase()
  if (DOCKER_HUB_ALIASES.has(host)) return DOCKER_HUB
  return host
}

/** The host the registry API is served from ("docker.io" is served by registry-1.docker.io). */
export function registryApiHost(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_API_HOST : registry
}

/** True for Docker Hub under any of its names. */
export function isDockerHub(registry: string): boolean {
  return normaliseRegistryHost(registry) === DOCKER_HUB
}
