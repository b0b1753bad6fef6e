/**
 * A git smart-HTTP server on 127.0.0.1 standing in for Gitea: every request runs `git http-backend` (git's own CGI
 * program) over the bare repositories in one folder, with a fixed REMOTE_USER so pushes are allowed. Porch clones,
 * fetches and pushes through it as through any git host.
 */
import {spawn} from 'node:child_process'
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'

export interface GitHttpServer {
  /** http://127.0.0.1:PORT (a repository `x.git` in `root` is at `${url}/x.git`). */
  url: string
  /** Requests served so far: method and path (with the query). */
  requests: string[]
  /** Requests served so far per client address. */
  clients: Map<string, number>
  /**
   * Serves the same repositories on `host` too (a free port), for clients that cannot reach this host's loopback:
   * a pod on the runc node reaches the node at its `status.hostIP` (docs/node.md). Returns the port.
   */
  alsoListen(host: string): Promise<number>
  stop(): Promise<void>
}

/**
 * Runs one request through `git http-backend` over the bare repositories under `root` (a repository at `root/a/x.git`
 * answers `/a/x.git/…`): the CGI headers become the response's, the rest its body.
 */
export function serveGit(root: string, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://git')
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    REMOTE_USER: 'porch',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    REQUEST_METHOD: req.method ?? 'GET',
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.slice(1),
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    ...(req.headers['content-length'] ? {CONTENT_LENGTH: req.headers['content-length']} : {}),
    ...(req.headers['content-encoding'] ? {HTTP_CONTENT_ENCODING: req.headers['content-encoding']} : {}),
    ...(req.headers['git-protocol'] ? {GIT_PROTOCOL: req.headers['git-protocol'] as string} : {}),
  }
  const cgi = spawn('git', ['http-backend'], {env, stdio: ['pipe', 'pipe', 'pipe']})
  let head = Buffer.alloc(0)
  let headersDone = false
  let stderr = ''
  cgi.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk)
      return
    }
    head = Buffer.concat([head, chunk])
    let end = head.indexOf('\r\n\r\n')
    let sep = 4
    if (end < 0) {
      end = head.indexOf('\n\n')
      sep = 2
    }
    if (end < 0) return
    headersDone = true
    let status = 200
    for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
      const i = line.indexOf(':')
      if (i < 0) continue
      const name = line.slice(0, i).trim()
      const value = line.slice(i + 1).trim()
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10)
      else res.setHeader(name, value)
    }
    res.writeHead(status)
    res.write(head.subarray(end + sep))
  })
  cgi.on('close', (code) => {
    if (!headersDone) {
      res.writeHead(500, {'content-type': 'text/plain'})
      res.end(`git http-backend exited with ${code}: ${stderr}`)
      return
    }
    res.end()
  })
  cgi.on('error', (err) => {
    if (!res.headersSent) res.writeHead(500, {'content-type': 'text/plain'})
    res.end(String(err))
  })
  req.pipe(cgi.stdin)
  cgi.stdin.on('error', () => undefined)
}

/** Serves the bare repositories under `root` on a free port of 127.0.0.1. */
export async function startGitHttpServer(root: string): Promise<GitHttpServer> {
  const requests: string[] = []
  const clients = new Map<string, number>()
  const servers: Server[] = []
  const listen = async (host: string): Promise<number> => {
    const server: Server = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`)
      const from = req.socket.remoteAddress ?? ''
      clients.set(from, (clients.get(from) ?? 0) + 1)
      serveGit(root, req, res)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, host, () => resolve())
    })
    servers.push(server)
    return (server.address() as {port: number}).port
  }
  const port = await listen('127.0.0.1')
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    clients,
    alsoListen: listen,
    stop: async () => {
      await Promise.all(servers.map((server) => new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })))
    },
  }
}
