/**
 * Running the packaged wrapper in a real container with runc (docs/node.md): a root
 * filesystem made in a temp dir (only static busybox, or only a static function binary: no Node,
 * no libc), the packaged folder mounted read-only at /wrapper-server-tools, and a config.json
 * derived from `runc spec` with the network namespace dropped, so the wrapper's port is reachable
 * on 127.0.0.1. State lives in a per-suite --root, so nothing is shared with other runs.
 */
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {mkdir, readFile, rm, symlink, writeFile, copyFile, chmod} from 'node:fs/promises'
import path from 'node:path'

import {READY} from './process.js'

import {BUSYBOX_CANDIDATES, findRunc, findStaticBusybox, runcUnavailableReason} from '../../support/node/runc.js'

export {BUSYBOX_CANDIDATES, findRunc, findStaticBusybox, runcUnavailableReason}
export const MOUNT_POINT = '/wrapper-server-tools'

/** Populates a rootfs. `busybox: 'only'` puts just /busybox; 'applets' gives /bin/busybox plus applet symlinks. */
export async function makeRootfs(rootfs: string, options: {busybox: 'only' | 'applets'; files?: Record<string, {content: string | Buffer; mode?: number}>}): Promise<void> {
  const busybox = findStaticBusybox()!
  await mkdir(rootfs, {recursive: true})
  if (options.busybox === 'only') {
    await copyFile(busybox, path.join(rootfs, 'busybox'))
    await chmod(path.join(rootfs, 'busybox'), 0o755)
  } else {
    await mkdir(path.join(rootfs, 'bin'), {recursive: true})
    await copyFile(busybox, path.join(rootfs, 'bin', 'busybox'))
    await chmod(path.join(rootfs, 'bin', 'busybox'), 0o755)
    const list = spawnSync(busybox, ['--list'], {encoding: 'utf8'}).stdout.split('\n').filter((a) => a !== '' && a !== 'busybox')
    for (const applet of list) await symlink('busybox', path.join(rootfs, 'bin', applet))
  }
  for (const [file, spec] of Object.entries(options.files ?? {})) {
    const target = path.join(rootfs, file)
    await mkdir(path.dirname(target), {recursive: true})
    await writeFile(target, spec.content)
    await chmod(target, spec.mode ?? 0o644)
  }
}

export interface ContainerSpec {
  /** Directory holding rootfs/ (made with makeRootfs); config.json is written next to it. */
  bundle: string
  /** The packaged folder to mount read-only at /wrapper-server-tools. */
  tools: string
  args: string[]
  env?: string[]
  user?: {uid: number; gid: number}
  /** tmpfs mounts (the rootfs itself is read-only). */
  tmpfs?: string[]
}

let counter = 0

export class RuncContainer {
  private runcChild?: ChildProcess
  private err = ''
  private exitedPromise?: Promise<{code: number | null; signal: NodeJS.Signals | null}>
  port = 0

  private constructor(
    readonly id: string,
    readonly stateRoot: string,
    readonly spec: ContainerSpec,
    private readonly runc: string,
  ) {}

  /** Creates and starts the container; resolves once the wrapper logged that it is ready. */
  static async start(spec: ContainerSpec, stateRoot: string, options: {waitForReady?: boolean; timeoutMs?: number} = {}): Promise<RuncContainer> {
    const runc = findRunc()!
    const id = `fnr-wrapper-test-${process.pid}-${++counter}`
    const c = new RuncContainer(id, stateRoot, spec, runc)
    await c.writeConfig()
    c.launch()
    if (options.waitForReady !== false) await c.waitForReady(options.timeoutMs ?? 60_000)
    return c
  }

  get address(): string {
    return `127.0.0.1:${this.port}`
  }

  stderr(): string {
    return this.err
  }

  get exited(): Promise<{code: number | null; signal: NodeJS.Signals | null}> {
    return this.exitedPromise!
  }

  private async writeConfig(): Promise<void> {
    const config = path.join(this.spec.bundle, 'config.json')
    await rm(config, {force: true})
    const r = spawnSync(this.runc, ['spec', '--bundle', this.spec.bundle], {encoding: 'utf8'})
    if (r.status !== 0) throw new Error(`runc spec failed: ${r.stderr}`)
    const c = JSON.parse(await readFile(config, 'utf8')) as {
      process: {terminal: boolean; args: string[]; env: string[]; cwd: string; user: {uid: number; gid: number}}
      root: {path: string; readonly: boolean}
      hostname?: string
      mounts: Array<{destination: string; type: string; source: string; options: string[]}>
      linux: {namespaces: Array<{type: string}>}
    }
    c.process.terminal = false
    c.process.args = this.spec.args
    c.process.env = this.spec.env ?? ['PATH=/usr/local/bin:/usr/bin:/bin']
    c.process.cwd = '/'
    if (this.spec.user) c.process.user = {uid: this.spec.user.uid, gid: this.spec.user.gid}
    c.root = {path: 'rootfs', readonly: true}
    c.hostname = 'fn'
    // Share the host's network namespace: the wrapper's port is then on the host's loopback.
    c.linux.namespaces = c.linux.namespaces.filter((n) => n.type !== 'network')
    c.mounts.push({destination: MOUNT_POINT, type: 'bind', source: this.spec.tools, options: ['rbind', 'ro']})
    for (const dir of this.spec.tmpfs ?? []) c.mounts.push({destination: dir, type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', 'size=16m']})
    await writeFile(config, JSON.stringify(c, null, 2))
  }

  private launch(): void {
    const child = spawn(this.runc, ['--root', this.stateRoot, 'run', '--bundle', this.spec.bundle, this.id], {stdio: ['ignore', 'pipe', 'pipe']})
    this.runcChild = child
    child.stderr!.on('data', (c: Buffer) => (this.err += c.toString()))
    child.stdout!.on('data', (c: Buffer) => (this.err += c.toString()))
    this.exitedPromise = once(child, 'exit').then(([code, signal]) => ({code: code as number | null, signal: signal as NodeJS.Signals | null}))
  }

  private async waitForReady(timeoutMs: number): Promise<void> {
    const end = Date.now() + timeoutMs
    let done = false
    void this.exitedPromise!.then(() => (done = true))
    for (;;) {
      const m = READY.exec(this.err)
      if (m) {
        this.port = Number(m[1])
        return
      }
      if (done) throw new Error(`container ${this.id} exited before the wrapper was ready:\n${this.err}`)
      if (Date.now() > end) throw new Error(`container ${this.id}: the wrapper did not become ready:\n${this.err}`)
      await new Promise((r) => setTimeout(r, 25))
    }
  }

  /** `runc exec` a command in the running container. */
  exec(args: string[], options: {env?: string[]; user?: {uid: number; gid: number}} = {}): {code: number | null; stdout: string; stderr: string} {
    const extra = (options.env ?? []).flatMap((e) => ['--env', e])
    if (options.user) extra.push('--user', `${options.user.uid}:${options.user.gid}`)
    const r = spawnSync(this.runc, ['--root', this.stateRoot, 'exec', ...extra, this.id, ...args], {encoding: 'utf8', timeout: 60_000})
    return {code: r.status, stdout: r.stdout, stderr: r.stderr}
  }

  /** Host pids of the processes in the container. */
  pids(): number[] {
    const r = spawnSync(this.runc, ['--root', this.stateRoot, 'ps', '--format', 'json', this.id], {encoding: 'utf8'})
    if (r.status !== 0) return []
    return (JSON.parse(r.stdout || '[]') as number[] | null) ?? []
  }

  signal(signal: string): void {
    spawnSync(this.runc, ['--root', this.stateRoot, 'kill', this.id, signal], {encoding: 'utf8'})
  }

  /** Kills and deletes the container; safe to call twice. */
  async destroy(): Promise<void> {
    spawnSync(this.runc, ['--root', this.stateRoot, 'kill', this.id, 'KILL'], {encoding: 'utf8'})
    const child = this.runcChild
    if (child && child.exitCode === null && child.signalCode === null) {
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await this.exitedPromise
      clearTimeout(timer)
    }
    spawnSync(this.runc, ['--root', this.stateRoot, 'delete', '--force', this.id], {encoding: 'utf8'})
  }
}

/**
 * Checks that runc can really run a container here (cgroups, namespaces, mounts); resolves with
 * the reason when it cannot.
 */
export async function probeRunc(workDir: string, stateRoot: string): Promise<string | undefined> {
  const reason = runcUnavailableReason()
  if (reason) return reason
  const bundle = path.join(workDir, 'probe')
  await makeRootfs(path.join(bundle, 'rootfs'), {busybox: 'only'})
  const runc = findRunc()!
  const r0 = spawnSync(runc, ['spec', '--bundle', bundle], {encoding: 'utf8'})
  if (r0.status !== 0) return `runc spec failed: ${r0.stderr.trim()}`
  const config = JSON.parse(await readFile(path.join(bundle, 'config.json'), 'utf8')) as {process: {terminal: boolean; args: string[]}; linux: {namespaces: Array<{type: string}>}}
  config.process.terminal = false
  config.process.args = ['/busybox', 'true']
  config.linux.namespaces = config.linux.namespaces.filter((n) => n.type !== 'network')
  await writeFile(path.join(bundle, 'config.json'), JSON.stringify(config))
  const id = `fnr-wrapper-probe-${process.pid}`
  const r = spawnSync(runc, ['--root', stateRoot, 'run', '--bundle', bundle, id], {encoding: 'utf8', timeout: 60_000})
  spawnSync(runc, ['--root', stateRoot, 'delete', '--force', id], {encoding: 'utf8'})
  await rm(bundle, {recursive: true, force: true})
  if (r.status !== 0) return `runc cannot run a container here: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`
  return undefined
}
