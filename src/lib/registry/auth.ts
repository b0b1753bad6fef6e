/**
 * Registry credentials and authentication challenges.
 *
 * - DockerConfig reads a docker config JSON (the format of ~/.docker/config.json and of a
 *   kubernetes.io/dockerconfigjson Secret): {"auths": {"<registry>": {"auth": base64("user:pass")}}}
 *   or {"username", "password"}, plus "identitytoken" (an OAuth2 refresh token) and
 *   "registrytoken" (a bearer token used as is). The legacy .dockercfg form (the registry map at
 *   the top level) is accepted too. Keys are matched by normalised host: scheme and path are
 *   dropped, case is ignored, and every Docker Hub alias ("https://index.docker.io/v1/",
 *   "index.docker.io", "registry-1.docker.io", "docker.io") means Docker Hub. Credential helpers
 *   (`credHelpers` per registry, else `credsStore`) are run as docker runs them:
 *   `docker-credential-<name> get` with the server on stdin, JSON {Username, Secret} on stdout
 *   (Username "<token>" means Secret is an identity token), for registries without inline auth.
 * - parseWwwAuthenticate reads the challenges of a 401 (RFC 7235), e.g.
 *   Bearer realm="https://auth/token",service="registry",scope="repository:fn/x:pull".
 * - TokenCache keeps bearer tokens per registry and scope until they expire.
 */
import {spawnSync} from 'node:child_process'
import os from 'node:os'
import path from 'node:path'

import {readConfigFile} from '../read-file.js'
import {FnrError} from '../errors.js'
import {normaliseRegistryHost} from './reference.js'

export interface RegistryCredentials {
  username?: string
  password?: string
  /** OAuth2 refresh token ("identitytoken"), exchanged at the token endpoint. */
  identityToken?: string
  /** A bearer token sent as is ("registrytoken"). */
  registryToken?: string
}

interface RawAuthEntry {
  auth?: unknown
  username?: unknown
  password?: unknown
  identitytoken?: unknown
  registrytoken?: unknown
}

export class DockerConfig {
  private readonly entries = new Map<string, RegistryCredentials>()
  private credsStore: string | undefined
  private readonly credHelpers = new Map<string, string>()
  private readonly fromHelpers = new Map<string, RegistryCredentials | undefined>()

  /** @param source where the config came from, for messages (a path or "<inline>"). */
  private constructor(readonly source: string) {}

  /** A config without credentials (anonymous access everywhere). */
  static empty(source = '<none>'): DockerConfig {
    return new DockerConfig(source)
  }

  /** Parses docker config JSON; throws FnrError('Config') naming the source when it is malformed. */
  static parse(text: string | Buffer, source = '<inline>'): DockerConfig {
    const config = new DockerConfig(source)
    let doc: unknown
    try {
      doc = JSON.parse(typeof text === 'string' ? text : text.toString('utf8'))
    } catch (err) {
      throw new FnrError('Config', `registry auth file ${source} is not valid JSON: ${(err as Error).message}`, {cause: err})
    }
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
      throw new FnrError('Config', `registry auth file ${source} must hold a JSON object with "auths"`)
    }
    const obj = doc as Record<string, unknown>
    if (typeof obj.credsStore === 'string' && obj.credsStore !== '') config.credsStore = obj.credsStore
    if (obj.credHelpers !== null && typeof obj.credHelpers === 'object' && !Array.isArray(obj.credHelpers)) {
      for (const [host, helper] of Object.entries(obj.credHelpers as Record<string, unknown>)) {
        if (typeof helper === 'string' && helper !== '') config.credHelpers.set(normaliseRegistryHost(host), helper)
      }
    }
    let auths: unknown = obj.auths
    if (auths === undefined) {
      // Legacy .dockercfg: registries at the top level. Anything else without "auths" (for
      // example a config with only credsStore) simply has no credentials.
      const legacy = Object.entries(obj).filter(([, v]) => v !== null && typeof v === 'object' && ('auth' in v || 'username' in v))
      auths = Object.fromEntries(legacy)
    }
    if (auths === null || typeof auths !== 'object' || Array.isArray(auths)) {
      throw new FnrError('Config', `registry auth file ${source}: "auths" must be an object keyed by registry`)
    }
    for (const [key, value] of Object.entries(auths as Record<string, unknown>)) {
      if (value === null || typeof value !== 'object') {
        throw new FnrError('Config', `registry auth file ${source}: the entry for ${JSON.stringify(key)} must be an object`)
      }
      const creds = decodeEntry(value as RawAuthEntry, key, source)
      const host = normaliseRegistryHost(key)
      if (host === '') continue
      // The first entry for a host wins, except that an entry with credentials beats an empty one.
      const existing = config.entries.get(host)
      if (existing === undefined || !hasAnyCredential(existing)) config.entries.set(host, creds)
    }
    return config
  }

  /** Reads and parses a docker config file; a missing or unreadable file is FnrError('Config'). */
  static async load(file: string): Promise<DockerConfig> {
    // A regular file of a sane size only: a FIFO would block, a device never end (read-file.ts).
    const text = await readConfigFile(file, {
      label: `registry auth file ${file} cannot be read`,
      message: (p) => `registry auth file ${file} ${p.code === 'ENOENT' ? 'does not exist' : p.code === 'EACCES' ? 'is not readable' : `cannot be read: ${p.reason}`}`,
    })
    return DockerConfig.parse(text, file)
  }

  /** Credentials for a registry host (any spelling), or undefined when the config has none. */
  credentialsFor(registry: string): RegistryCredentials | undefined {
    const host = normaliseRegistryHost(registry)
    const creds = this.entries.get(host)
    if (creds !== undefined && hasAnyCredential(creds)) return creds
    const helper = this.credHelpers.get(host) ?? this.credsStore
    if (helper === undefined) return undefined
    if (!this.fromHelpers.has(host)) this.fromHelpers.set(host, runCredentialHelper(helper, host, this.source))
    return this.fromHelpers.get(host)
  }

  hasCredentialsFor(registry: string): boolean {
    return this.credentialsFor(registry) !== undefined
  }

  /** The normalised registry hosts that have credentials. */
  registries(): string[] {
    return [...this.entries].filter(([, c]) => hasAnyCredential(c)).map(([h]) => h)
  }
}

function hasAnyCredential(c: RegistryCredentials): boolean {
  return Boolean(c.username || c.password || c.identityToken || c.registryToken)
}

function optionalString(value: unknown, field: string, key: string, source: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined
  if (typeof value !== 'string') throw new FnrError('Config', `registry auth file ${source}: "${field}" for ${JSON.stringify(key)} must be a string`)
  return value
}

function decodeEntry(entry: RawAuthEntry, key: string, source: string): RegistryCredentials {
  const creds: RegistryCredentials = {}
  const auth = optionalString(entry.auth, 'auth', key, source)
  if (auth !== undefined) {
    const decoded = Buffer.from(auth, 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon < 0 || !/^[A-Za-z0-9+/=_-]+$/.test(auth.trim())) {
      throw new FnrError('Config', `registry auth file ${source}: "auth" for ${JSON.stringify(key)} is not base64 of "username:password"`)
    }
    creds.username = decoded.slice(0, colon)
    creds.password = decoded.slice(colon + 1)
  }
  const username = optionalString(entry.username, 'username', key, source)
  const password = optionalString(entry.password, 'password', key, source)
  if (username !== undefined) creds.username = username
  if (password !== undefined) creds.password = password
  const identityToken = optionalString(entry.identitytoken, 'identitytoken', key, source)
  const registryToken = optionalString(entry.registrytoken, 'registrytoken', key, source)
  if (identityToken !== undefined) creds.identityToken = identityToken
  if (registryToken !== undefined) creds.registryToken = registryToken
  return creds
}

/**
 * Where `fnr image inspect` looks for credentials when --auth-file is not given:
 * $REGISTRY_AUTH_FILE, then $DOCKER_CONFIG/config.json, then ~/.docker/config.json (where
 * `docker login` writes). The caller treats a missing file as anonymous access.
 */
export function defaultAuthFile(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.REGISTRY_AUTH_FILE) return env.REGISTRY_AUTH_FILE
  if (env.DOCKER_CONFIG) return path.join(env.DOCKER_CONFIG, 'config.json')
  const home = env.HOME ?? os.homedir()
  return home ? path.join(home, '.docker', 'config.json') : undefined
}

/** Docker Hub's server name as docker passes it to credential helpers. */
const DOCKER_HUB_SERVER = 'https://index.docker.io/v1/'

/** Runs `docker-credential-<helper> get` for a registry; undefined when it has no credentials. */
function runCredentialHelper(helper: string, host: string, source: string): RegistryCredentials | undefined {
  const program = `docker-credential-${helper}`
  const server = host === 'docker.io' || host === 'index.docker.io' || host === 'registry-1.docker.io' ? DOCKER_HUB_SERVER : host
  const r = spawnSync(program, ['get'], {input: server, encoding: 'utf8', timeout: 30_000})
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code
    throw new FnrError(
      'Config',
      code === 'ENOENT'
        ? `${source} names the credential helper "${helper}" for ${host}, but ${program} is not on PATH: install it, or log in again without it (docker logout/login), or give --auth-file with inline "auths"`
        : `credential helper ${program} failed for ${host}: ${r.error.message}`,
    )
  }
  if (r.status !== 0) {
    // "credentials not found in native keychain": no credentials for this registry.
    if (/not found/i.test(`${r.stdout}${r.stderr}`)) return undefined
    throw new FnrError('Unauthenticated', `credential helper ${program} failed for ${host} (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n')[0]}`)
  }
  let out: {Username?: unknown; Secret?: unknown}
  try {
    out = JSON.parse(r.stdout) as typeof out
  } catch {
    throw new FnrError('Unauthenticated', `credential helper ${program} for ${host} did not answer JSON {"Username", "Secret"}`)
  }
  const username = typeof out.Username === 'string' ? out.Username : ''
  const secret = typeof out.Secret === 'string' ? out.Secret : ''
  if (secret === '') return undefined
  return username === '<token>' ? {identityToken: secret} : {username, password: secret}
}

/** The value of an Authorization header for HTTP Basic. */
export function basicAuthorization(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`
}

export interface AuthChallenge {
  /** Lower-cased scheme: "basic", "bearer", … */
  scheme: string
  /** Parameters with lower-cased names. */
  params: Record<string, string>
}

/**
 * Parses WWW-Authenticate values (several challenges may share one header, separated by commas,
 * and a header may be given several times). Unknown or malformed parts are skipped.
 */
export function parseWwwAuthenticate(header: string | string[] | undefined): AuthChallenge[] {
  if (header === undefined) return []
  const values = Array.isArray(header) ? header : [header]
  const challenges: AuthChallenge[] = []
  for (const value of values) parseChallengeList(value, challenges)
  return challenges
}

const TOKEN_CHARS = /[!#$%&'*+.^_`|~0-9A-Za-z-]/

function parseChallengeList(text: string, out: AuthChallenge[]): void {
  let i = 0
  const n = text.length
  const skipSpace = (): void => {
    while (i < n && (text[i] === ' ' || text[i] === '\t')) i++
  }
  const readToken = (): string => {
    const start = i
    while (i < n && TOKEN_CHARS.test(text[i]!)) i++
    return text.slice(start, i)
  }
  let current: AuthChallenge | undefined
  while (i < n) {
    skipSpace()
    if (text[i] === ',') {
      i++
      continue
    }
    const token = readToken()
    if (token === '') {
      i++ // skip junk
      continue
    }
    skipSpace()
    if (text[i] === '=' && current !== undefined) {
      // name=value parameter of the current challenge
      i++
      skipSpace()
      let value = ''
      if (text[i] === '"') {
        i++
        while (i < n && text[i] !== '"') {
          if (text[i] === '\\' && i + 1 < n) i++
          value += text[i]
          i++
        }
        i++ // closing quote
      } else {
        const vStart = i
        while (i < n && text[i] !== ',' && text[i] !== ' ' && text[i] !== '\t') i++
        value = text.slice(vStart, i)
      }
      current.params[token.toLowerCase()] = value
      continue
    }
    if (text[i] === '=' && current === undefined) {
      // a parameter before any scheme: skip it
      while (i < n && text[i] !== ',') i++
      continue
    }
    // a new challenge: scheme, optionally followed by token68 (not used by registries)
    current = {scheme: token.toLowerCase(), params: {}}
    out.push(current)
  }
}

/** The challenge for a scheme, if the server offered it. */
export function findChallenge(challenges: AuthChallenge[], scheme: 'basic' | 'bearer'): AuthChallenge | undefined {
  return challenges.find((c) => c.scheme === scheme)
}

interface CachedToken {
  token: string
  expiresAt: number
}

/**
 * Bearer tokens per key (registry, realm, service and scope), held until shortly before they
 * expire and bounded in number (oldest dropped first).
 */
export class TokenCache {
  private readonly tokens = new Map<string, CachedToken>()

  constructor(
    private readonly maxEntries = 256,
    private readonly now: () => number = Date.now,
  ) {}

  static key(registry: string, realm: string, service: string, scope: string): string {
    return `${registry}\n${realm}\n${service}\n${scope}`
  }

  get(key: string): string | undefined {
    const entry = this.tokens.get(key)
    if (entry === undefined) return undefined
    if (entry.expiresAt <= this.now()) {
      this.tokens.delete(key)
      return undefined
    }
    return entry.token
  }

  /** Stores a token valid for `expiresInSeconds` (registries default to 60 s); 10% is kept as margin. */
  set(key: string, token: string, expiresInSeconds: number): void {
    const lifetimeMs = Math.max(1, expiresInSeconds) * 1000
    this.tokens.delete(key)
    this.tokens.set(key, {token, expiresAt: this.now() + Math.max(lifetimeMs - Math.min(lifetimeMs * 0.1, 30_000), 500)})
    while (this.tokens.size > this.maxEntries) {
      const oldest = this.tokens.keys().next().value
      if (oldest === undefined) break
      this.tokens.delete(oldest)
    }
  }

  delete(key: string): void {
    this.tokens.delete(key)
  }

  clear(): void {
    this.tokens.clear()
  }
}
