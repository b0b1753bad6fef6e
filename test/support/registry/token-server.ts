/**
 * A small token service for distribution's `auth.token` mode (the Docker registry token spec):
 * GET <realm>?service=…&scope=repository:<name>:<actions> with optional Basic credentials returns
 * {token, access_token, expires_in, issued_at}; the token is an RS256 JWT whose x5c header holds
 * the signer's certificate, which the registry trusts through its rootcertbundle. POST with
 * grant_type=refresh_token (OAuth2, what "identitytoken" in a docker config means) works too.
 *
 * Authenticated users get the actions they ask for; anonymous callers get a token with no access
 * (the registry then answers 401 insufficient_scope), like a private repository on a public
 * registry. Tests can make the next tokens arrive already expired, and can swap the signer.
 */
import {createSign, randomUUID, X509Certificate} from 'node:crypto'
import http from 'node:http'
import type {AddressInfo} from 'node:net'

import type {KeyPair} from './certs.js'

export interface TokenServerOptions {
  issuer: string
  service: string
  /** username → password */
  users: Record<string, string>
  /** refresh token → username */
  refreshTokens?: Record<string, string>
  signer: KeyPair
  /** expires_in reported to clients (seconds). */
  expiresIn?: number
}

export interface TokenRequestRecord {
  method: string
  user?: string
  scopes: string[]
  service?: string
  outcome: 'issued' | 'rejected'
  expired: boolean
}

export class TokenServer {
  readonly requests: TokenRequestRecord[] = []
  /** The next N tokens are issued already expired (but claim a normal expires_in). */
  expiredTokensToIssue = 0
  signer: KeyPair

  private constructor(
    private readonly server: http.Server,
    readonly realm: string,
    private readonly options: TokenServerOptions,
  ) {
    this.signer = options.signer
  }

  static async start(options: TokenServerOptions): Promise<TokenServer> {
    let self: TokenServer | undefined
    const server = http.createServer((req, res) => {
      self!.handle(req, res).catch((err: unknown) => {
        res.statusCode = 500
        res.end(String(err))
      })
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve())
    })
    const {port} = server.address() as AddressInfo
    self = new TokenServer(server, `http://127.0.0.1:${port}/token`, options)
    return self
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x')
    if (url.pathname !== '/token') {
      res.statusCode = 404
      res.end()
      return
    }
    let user: string | undefined
    let scopes: string[]
    let service: string | undefined
    let authenticated = true
    if (req.method === 'POST') {
      const body = new URLSearchParams(await readBody(req))
      scopes = (body.get('scope') ?? '').split(' ').filter((s) => s !== '')
      service = body.get('service') ?? undefined
      const refresh = body.get('refresh_token')
      user = refresh === null ? undefined : this.options.refreshTokens?.[refresh]
      authenticated = body.get('grant_type') === 'refresh_token' && user !== undefined
    } else {
      scopes = url.searchParams.getAll('scope').flatMap((s) => s.split(' ')).filter((s) => s !== '')
      service = url.searchParams.get('service') ?? undefined
      const header = req.headers.authorization
      if (header !== undefined) {
        const m = /^Basic\s+(.+)$/i.exec(header)
        const decoded = m ? Buffer.from(m[1]!, 'base64').toString('utf8') : ''
        const colon = decoded.indexOf(':')
        const name = decoded.slice(0, colon)
        const password = decoded.slice(colon + 1)
        if (colon < 0 || this.options.users[name] === undefined || this.options.users[name] !== password) {
          authenticated = false
        } else {
          user = name
        }
      }
    }
    if (!authenticated) {
      this.requests.push({method: req.method ?? 'GET', user, scopes, service, outcome: 'rejected', expired: false})
      res.statusCode = 401
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({errors: [{code: 'UNAUTHORIZED', message: 'invalid username or password'}]}))
      return
    }
    const expired = this.expiredTokensToIssue > 0
    if (expired) this.expiredTokensToIssue--
    const access = user === undefined ? [] : scopes.map(parseScope).filter((a) => a !== undefined)
    const token = this.sign(user ?? '', access, expired)
    this.requests.push({method: req.method ?? 'GET', user, scopes, service, outcome: 'issued', expired})
    const expiresIn = this.options.expiresIn ?? 300
    res.setHeader('content-type', 'application/json')
    const payload: Record<string, unknown> = {token, expires_in: expiresIn, issued_at: new Date().toISOString()}
    if (req.method === 'POST') payload.access_token = token
    res.end(JSON.stringify(payload))
  }

  private sign(subject: string, access: Array<{type: string; name: string; actions: string[]}>, expired: boolean): string {
    const der = new X509Certificate(this.signer.certPem).raw.toString('base64')
    const now = Math.floor(Date.now() / 1000)
    const header = {typ: 'JWT', alg: 'RS256', x5c: [der]}
    const claims = {
      iss: this.options.issuer,
      sub: subject,
      aud: this.options.service,
      iat: expired ? now - 7200 : now - 5,
      nbf: expired ? now - 7200 : now - 5,
      exp: expired ? now - 3600 : now + (this.options.expiresIn ?? 300),
      jti: randomUUID(),
      access,
    }
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`
    const signature = createSign('RSA-SHA256').update(input).sign(this.signer.keyPem)
    return `${input}.${b64url(signature)}`
  }
}

function parseScope(scope: string): {type: string; name: string; actions: string[]} | undefined {
  const parts = scope.split(':')
  if (parts.length < 3) return undefined
  const type = parts[0]!
  const actions = parts[parts.length - 1]!.split(',')
  const name = parts.slice(1, -1).join(':')
  return {type, name, actions}
}

function b64url(data: string | Buffer): string {
  return Buffer.from(data).toString('base64url')
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}
