/**
 * An HTTP proxy in front of a plain-HTTP TestRegistry, for what distribution's filesystem driver
 * cannot do: answer 5xx a few times, hang, or redirect blob downloads to another origin (as
 * S3-backed registries do). It records every request it sees.
 */
import http from 'node:http'
import type {AddressInfo} from 'node:net'

export interface ProxyRecord {
  method: string
  path: string
  authorization?: string
  /** Which listener got it: the proxy itself or the "blob storage" origin that redirects point to. */
  origin: 'proxy' | 'blob'
}

export class RegistryProxy {
  readonly records: ProxyRecord[] = []
  /** The next N requests get this status (default 503) without reaching the registry. */
  failNext = 0
  failStatus = 503
  /** Requests are accepted and never answered. */
  hang = false
  /** Blob GETs are answered with 307 to http://127.0.0.1:<blobPort>/_redirected/…, another origin. */
  redirectBlobs = false
  /** Authorization the proxy adds itself when it serves a redirected blob. */
  upstreamAuthorization?: string
  private readonly hanging = new Set<http.ServerResponse>()

  private constructor(
    private readonly server: http.Server,
    private readonly blobServer: http.Server,
    readonly port: number,
    readonly blobPort: number,
    private readonly upstreamPort: number,
  ) {}

  get host(): string {
    return `127.0.0.1:${this.port}`
  }

  static async start(upstreamPort: number): Promise<RegistryProxy> {
    let self: RegistryProxy | undefined
    const server = http.createServer((req, res) => self!.handle(req, res, 'proxy'))
    const blobServer = http.createServer((req, res) => self!.handle(req, res, 'blob'))
    for (const s of [server, blobServer]) {
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject)
        s.listen(0, '127.0.0.1', () => resolve())
      })
    }
    self = new RegistryProxy(server, blobServer, (server.address() as AddressInfo).port, (blobServer.address() as AddressInfo).port, upstreamPort)
    return self
  }

  clear(): void {
    this.records.length = 0
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy()
    for (const s of [this.server, this.blobServer]) {
      s.closeAllConnections()
      await new Promise<void>((resolve) => s.close(() => resolve()))
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse, origin: 'proxy' | 'blob'): void {
    const path = req.url ?? '/'
    this.records.push({method: req.method ?? 'GET', path, authorization: req.headers.authorization, origin})
    if (this.hang) {
      this.hanging.add(res)
      res.on('close', () => this.hanging.delete(res))
      return
    }
    if (this.failNext > 0) {
      this.failNext--
      res.statusCode = this.failStatus
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({errors: [{code: 'UNAVAILABLE', message: 'injected failure'}]}))
      return
    }
    let upstreamPath = path
    const headers = {...req.headers, host: `127.0.0.1:${this.upstreamPort}`}
    if (origin === 'blob' && path.startsWith('/_redirected/')) {
      upstreamPath = path.slice('/_redirected'.length)
      delete headers.authorization
      if (this.upstreamAuthorization !== undefined) headers.authorization = this.upstreamAuthorization
    } else if (this.redirectBlobs && req.method === 'GET' && /\/blobs\/sha256:/.test(path)) {
      res.statusCode = 307
      res.setHeader('location', `http://127.0.0.1:${this.blobPort}/_redirected${path}`)
      res.end()
      return
    }
    const upstream = http.request({host: '127.0.0.1', port: this.upstreamPort, path: upstreamPath, method: req.method, headers, agent: false}, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers)
      up.pipe(res)
    })
    upstream.on('error', () => {
      res.statusCode = 502
      res.end()
    })
    req.pipe(upstream)
  }
}
