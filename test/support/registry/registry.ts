/**
 * A real registry for tests: Debian's docker-registry (CNCF distribution 2.8) on 127.0.0.1 and a
 * free port, in one of four configurations:
 *   - none:     plain HTTP, anonymous;
 *   - htpasswd: plain HTTP, Basic auth (bcrypt htpasswd made with `htpasswd -Bbn`);
 *   - tls:      HTTPS with a certificate from a CA made by openssl at test time, plus Basic auth;
 *   - token:    plain HTTP, Bearer token auth against TokenServer (token-server.ts).
 * stop() kills the process by PID and removes its directory.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import http from 'node:http'
import https from 'node:https'
import os from 'node:os'
import path from 'node:path'

import {execa} from 'execa'

import {makeCa, makeServerCert, makeSigner, type CertificateAuthority, type KeyPair} from './certs.js'
import {TokenServer} from './token-server.js'
import {freePort, requireTool, requireTools} from './tools.js'

export type RegistryMode = 'none' | 'htpasswd' | 'tls' | 'token'

export interface RegistryOptions {
  mode: RegistryMode
  /** username → password, for htpasswd, tls and token modes (default {testuser: 'testpass'}). */
  users?: Record<string, string>
  /** refresh token → username, for token mode. */
  refreshTokens?: Record<string, string>
}

/** Registries still running; killed synchronously if the test process exits without after() hooks. */
const running = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

export const TOKEN_SERVICE = 'fnr-test-registry'
export const TOKEN_ISSUER = 'fnr-test-issuer'

export class TestRegistry {
  private child?: ChildProcess
  private stderr = ''
  /** Set in tls mode: the CA that signed the server certificate. */
  ca?: CertificateAuthority
  /** Set in tls mode: a directory holding ca.crt, for skopeo --dest-cert-dir. */
  certDir?: string
  /** Set in token mode. */
  tokenServer?: TokenServer
  port = 0

  private constructor(
    readonly options: Required<Pick<RegistryOptions, 'mode' | 'users'>> & RegistryOptions,
    readonly dir: string,
  ) {}

  get host(): string {
    return `127.0.0.1:${this.port}`
  }

  get secure(): boolean {
    return this.options.mode === 'tls'
  }

  get hasAuth(): boolean {
    return this.options.mode !== 'none'
  }

  static async start(options: RegistryOptions): Promise<TestRegistry> {
    requireTools('docker-registry', 'skopeo', 'openssl', ...(options.mode === 'htpasswd' || options.mode === 'tls' ? (['htpasswd'] as const) : []))
    const dir = await mkdtemp(path.join(os.tmpdir(), `fnr-registry-${options.mode}-`))
    const registry = new TestRegistry({users: {testuser: 'testpass'}, ...options}, dir)
    try {
      await registry.prepare()
      await registry.launch()
    } catch (err) {
      await registry.stop()
      throw err
    }
    return registry
  }

  /** A docker config JSON for user/password on this registry, written to a file in the registry's dir. */
  async writeAuthFile(user: string, password: string, name = `auth-${user}.json`, style: 'auth' | 'fields' = 'auth'): Promise<string> {
    const file = path.join(this.dir, name)
    await writeFile(file, dockerConfigJson(this.host, user, password, style))
    return file
  }

  /** Restarts the registry on the same port (token mode: optionally trusting another signer). */
  async restart(signer?: KeyPair): Promise<void> {
    await this.kill()
    if (signer !== undefined) await writeFile(path.join(this.dir, 'token', 'bundle.crt'), signer.certPem)
    await this.launch(this.port)
  }

  /** Stops the process (the directory stays, so start() of a new registry is needed to come back). */
  async kill(): Promise<void> {
    const child = this.child
    this.child = undefined
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 3000)
      child.once('exit', () => {
        clearTimeout(force)
        resolve()
      })
      child.kill('SIGTERM')
    })
  }

  async stop(): Promise<void> {
    await this.kill()
    await this.tokenServer?.stop()
    this.tokenServer = undefined
    await rm(this.dir, {recursive: true, force: true})
  }

  private async prepare(): Promise<void> {
    const {mode, users} = this.options
    await mkdir(path.join(this.dir, 'data'), {recursive: true})
    if (mode === 'htpasswd' || mode === 'tls') {
      const lines: string[] = []
      for (const [user, password] of Object.entries(users)) {
        const {stdout} = await execa(requireTool('htpasswd'), ['-Bbn', user, password])
        lines.push(stdout.trim())
      }
      await writeFile(path.join(this.dir, 'htpasswd'), `${lines.join('\n')}\n`)
    }
    if (mode === 'tls') {
      const tlsDir = path.join(this.dir, 'tls')
      await mkdir(tlsDir)
      this.ca = await makeCa(tlsDir)
      await makeServerCert(tlsDir, this.ca)
      this.certDir = path.join(this.dir, 'certs.d')
      await mkdir(this.certDir)
      await writeFile(path.join(this.certDir, 'ca.crt'), this.ca.certPem)
    }
    if (mode === 'token') {
      const tokenDir = path.join(this.dir, 'token')
      await mkdir(tokenDir)
      const signer = await makeSigner(tokenDir)
      await writeFile(path.join(tokenDir, 'bundle.crt'), signer.certPem)
      this.tokenServer = await TokenServer.start({issuer: TOKEN_ISSUER, service: TOKEN_SERVICE, users, refreshTokens: this.options.refreshTokens, signer})
    }
  }

  private configYaml(port: number): string {
    const {mode} = this.options
    const lines = [
      'version: 0.1',
      'log: {level: error, accesslog: {disabled: true}}',
      `storage: {filesystem: {rootdirectory: ${JSON.stringify(path.join(this.dir, 'data'))}}, delete: {enabled: true}}`,
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '  secret: fnr-test-secret',
    ]
    if (mode === 'tls') {
      lines.push(`  tls: {certificate: ${JSON.stringify(path.join(this.dir, 'tls', 'server.crt'))}, key: ${JSON.stringify(path.join(this.dir, 'tls', 'server.key'))}}`)
    }
    if (mode === 'htpasswd' || mode === 'tls') {
      lines.push(`auth: {htpasswd: {realm: fnr-test-realm, path: ${JSON.stringify(path.join(this.dir, 'htpasswd'))}}}`)
    }
    if (mode === 'token') {
      lines.push(
        `auth: {token: {realm: ${JSON.stringify(this.tokenServer!.realm)}, service: ${TOKEN_SERVICE}, issuer: ${TOKEN_ISSUER}, rootcertbundle: ${JSON.stringify(path.join(this.dir, 'token', 'bundle.crt'))}}}`,
      )
    }
    return `${lines.join('\n')}\n`
  }

  private async launch(fixedPort?: number): Promise<void> {
    let lastError: unknown
    for (let attempt = 0; attempt < 3; attempt++) {
      const port = fixedPort ?? (await freePort())
      const configFile = path.join(this.dir, 'config.yml')
      await writeFile(configFile, this.configYaml(port))
      this.stderr = ''
      const child = spawn(requireTool('docker-registry'), ['serve', configFile], {stdio: ['ignore', 'ignore', 'pipe']})
      this.child = child
      running.add(child)
      child.once('exit', () => running.delete(child))
      child.stderr!.on('data', (d: Buffer) => {
        if (this.stderr.length < 20_000) this.stderr += d.toString('utf8')
      })
      this.port = port
      try {
        await this.waitUntilUp(child)
        return
      } catch (err) {
        lastError = err
        await this.kill()
        if (fixedPort !== undefined && attempt === 2) break
      }
    }
    throw lastError
  }

  private async waitUntilUp(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + 15_000
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`docker-registry exited (${child.exitCode ?? child.signalCode}) on port ${this.port}: ${this.stderr.trim()}`)
      }
      const status = await this.probe().catch(() => 0)
      if (status === 200 || status === 401) return
      if (Date.now() > deadline) throw new Error(`docker-registry did not come up on port ${this.port}: ${this.stderr.trim()}`)
      await new Promise((r) => setTimeout(r, 25))
    }
  }

  private probe(): Promise<number> {
    return new Promise((resolve, reject) => {
      const options = {host: '127.0.0.1', port: this.port, path: '/v2/', agent: false as const, ...(this.secure ? {ca: this.ca!.certPem} : {})}
      const req = (this.secure ? https : http).get(options, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.setTimeout(1000, () => req.destroy(new Error('probe timeout')))
      req.on('error', reject)
    })
  }
}

/** A docker config JSON with credentials for one registry key. */
export function dockerConfigJson(registryKey: string, user: string, password: string, style: 'auth' | 'fields' = 'auth'): string {
  const entry = style === 'auth' ? {auth: Buffer.from(`${user}:${password}`).toString('base64')} : {username: user, password}
  return `${JSON.stringify({auths: {[registryKey]: entry}}, null, 2)}\n`
}
