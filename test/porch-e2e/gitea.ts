/**
 * A stand-in for the Gitea that Porch's e2e API suite expects on localhost:3000 (docs/porch-swap.md, "Porch's own e2e
 * API suite"): git smart HTTP through `git http-backend` (./git-http.ts) for the repositories under `root/<owner>/`,
 * and the three calls of Gitea's REST API the suite and Porch's setup scripts make, under HTTP basic auth:
 * - GET /api/v1/repos/<owner>/<name>: 200 with the repository, or 404;
 * - DELETE /api/v1/repos/<owner>/<name>: 204, the bare repository removed;
 * - POST /api/v1/user/repos {"name", "auto_init"}: 201, a bare repository created for the user (with `auto_init`,
 *   one commit on main holding README.md, as Gitea makes it); 409 when it exists.
 * Pushes (git-receive-pack) need the same credentials, as on Gitea; reads are anonymous (public repositories).
 * Binds 127.0.0.1 only.
 */
import {existsSync} from 'node:fs'
import {mkdir, rm} from 'node:fs/promises'
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'
import path from 'node:path'

import {execa} from 'execa'

import {serveGit} from './git-http.js'

export interface GiteaStandIn {
  /** http://localhost:PORT */
  url: string
  /** Requests served so far: method and path (with the query). */
  requests: string[]
  /** The bare repository folder of `owner/name`. */
  repoDir(name: string): string
  stop(): Promise<void>
}

export interface GiteaOptions {
  /** The folder holding `<owner>/<name>.git`. */
  root: string
  owner: string
  user: string
  password: string
  port: number
}

const GIT_ENV = {GIT_AUTHOR_NAME: 'gitea', GIT_AUTHOR_EMAIL: 'gitea@localhost', GIT_COMMITTER_NAME: 'gitea', GIT_COMMITTER_EMAIL: 'gitea@localhost'}

async function gitIn(dir: string, args: string[], input?: string): Promise<string> {
  const r = await execa('git', ['--git-dir', dir, ...args], {env: GIT_ENV, input})
  return String(r.stdout).trim()
}

/** An empty bare repository whose HEAD is main; with `readme`, one commit on main holding README.md. */
export async function createBareRepo(dir: string, readme?: string): Promise<void> {
  await mkdir(path.dirname(dir), {recursive: true})
  await execa('git', ['init', '-q', '--bare', '-b', 'main', dir])
  if (readme === undefined) return
  const blob = await gitIn(dir, ['hash-object', '-w', '--stdin'], readme)
  const tree = await gitIn(dir, ['mktree'], ['100644 blob', `${blob}\t${'README.md'}`].join(' ') + '\n')
  const commit = await gitIn(dir, ['commit-tree', tree, '-m', 'Initial commit'])
  await gitIn(dir, ['update-ref', 'refs/heads/main', commit])
}

function authorized(req: IncomingMessage, user: string, password: string): boolean {
  const header = req.headers.authorization ?? ''
  if (!header.startsWith('Basic ')) return false
  return Buffer.from(header.slice(6), 'base64').toString() === `${user}:${password}`
}

function json(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status)
    res.end()
    return
  }
  res.writeHead(status, {'content-type': 'application/json'})
  res.end(JSON.stringify(body))
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString()
}

/** Starts the stand-in on 127.0.0.1:`port`; fails with one line when that port is taken. */
export async function startGiteaStandIn(options: GiteaOptions): Promise<GiteaStandIn> {
  const {root, owner, user, password, port} = options
  const repoDir = (name: string): string => path.join(root, owner, `${name}.git`)
  const url = `http://localhost:${port}`
  const repoJson = (name: string): unknown => ({name, full_name: `${owner}/${name}`, owner: {login: owner}, clone_url: `${url}/${owner}/${name}.git`, default_branch: 'main', private: false})

  const api = async (req: IncomingMessage, res: ServerResponse, pathname: string): Promise<void> => {
    if (pathname === '/api/healthz') return json(res, 200, {status: 'pass'})
    if (!authorized(req, user, password)) {
      res.setHeader('www-authenticate', 'Basic realm="gitea"')
      return json(res, 401, {message: 'unauthorized'})
    }
    const one = /^\/api\/v1\/repos\/([^/]+)\/([^/]+)$/.exec(pathname)
    if (one && one[1] === owner) {
      const dir = repoDir(one[2]!)
      if (!existsSync(dir)) return json(res, 404, {message: 'The target couldn\'t be found.'})
      if (req.method === 'GET') return json(res, 200, repoJson(one[2]!))
      if (req.method === 'DELETE') {
        await rm(dir, {recursive: true, force: true})
        return json(res, 204)
      }
      return json(res, 405, {message: 'method not allowed'})
    }
    if (pathname === '/api/v1/user/repos' && req.method === 'POST') {
      const body = JSON.parse((await readBody(req)) || '{}') as {name?: string; auto_init?: boolean}
      if (!body.name || !/^[\w.-]+$/.test(body.name)) return json(res, 422, {message: 'invalid name'})
      if (existsSync(repoDir(body.name))) return json(res, 409, {message: 'The repository with the same name already exists.'})
      await createBareRepo(repoDir(body.name), body.auto_init ? `# ${body.name}\n\n` : undefined)
      return json(res, 201, repoJson(body.name))
    }
    return json(res, 404, {message: 'not found'})
  }

  const requests: string[] = []
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`)
    const {pathname, searchParams} = new URL(req.url ?? '/', 'http://gitea')
    if (pathname.startsWith('/api/')) {
      api(req, res, pathname).catch((err: unknown) => {
        if (!res.headersSent) json(res, 500, {message: String(err)})
        else res.end()
      })
      return
    }
    const push = pathname.endsWith('/git-receive-pack') || searchParams.get('service') === 'git-receive-pack'
    if (push && !authorized(req, user, password)) {
      res.writeHead(401, {'www-authenticate': 'Basic realm="gitea"'})
      res.end()
      return
    }
    serveGit(root, req, res)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(err.code === 'EADDRINUSE' ? `127.0.0.1:${port} is in use: Porch's e2e API suite expects its Gitea there` : String(err))),
    )
    server.listen(port, '127.0.0.1', () => resolve())
  })
  return {
    url,
    requests,
    repoDir,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
