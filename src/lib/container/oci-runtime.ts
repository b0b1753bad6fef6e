/**
 * Running an image function with runc or crun directly, from fnr's image cache
 * (docs/container-runtime.md, "fnr's own runtime"): one OCI bundle per call (a temporary directory
 * holding config.json; the root filesystem is the cached one, mounted read-only), `<runtime> run`
 * in the foreground with the function's stdin, stdout and stderr passed straight through, through
 * the same process runner as every exec function (process/run.ts: deadline, interrupt, output
 * cap), then the bundle removed, and the container deleted (`<runtime> delete --force`) unless
 * the runtime ended by itself and so removed it.
 *
 * The container: new pid, ipc, uts and mount namespaces; a new network namespace with only
 * loopback unless the network is allowed (then the host's, with its /etc/resolv.conf and
 * /etc/hosts); the read-only root with a tmpfs /tmp; user nobody (the image's passwd entry, else
 * 65534:65534) or fnr's own uid:gid; no new privileges; a non-root user has no capabilities;
 * memory, CPU and process limits when FNR_FN_MEMORY, FNR_FN_CPUS, FNR_FN_PIDS ask for them.
 * When fnr is not root, rootless: a user namespace maps the container's root to fnr's user.
 */
import {execFile} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {FnrError, firstLine} from '../errors.js'
import {functionCommand} from '../registry/image-config.js'
import type {ProcessLauncher} from '../process/launcher.js'
import {minimalEnvironment, runFunctionProcess, type FunctionProcessResult} from '../process/run.js'
import type {CachedImage} from './image-cache.js'
import {parseSize} from './image-cache.js'
import type {OciRuntimeName} from './runtime-select.js'

export interface BindMount {
  source: string
  target: string
  readOnly: boolean
}

export interface ResourceLimits {
  memoryBytes?: number
  /** CPUs (1.5 = one and a half). */
  cpus?: number
  pids?: number
}

export interface OciRunOptions {
  runtime: {name: OciRuntimeName; path: string}
  /** The runtime's state directory (--root). */
  stateRoot: string
  image: CachedImage
  label: string
  input: Buffer
  network: boolean
  /** uid and gid, or undefined for nobody. */
  user?: {uid: number; gid: number}
  mounts: readonly BindMount[]
  /** KEY=VALUE over the image's environment. */
  env: readonly string[]
  limits: ResourceLimits
  deadline?: number
  signal?: AbortSignal
  maxOutputBytes: number
  /** Starts the runtime's process and keeps its call. */
  launcher: ProcessLauncher
}

const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const NOBODY = {uid: 65534, gid: 65534}
/** The capabilities a root process gets (none for any other user). */
const ROOT_CAPABILITIES = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_KILL']

/**
 * The runtime's state directory: FNR_RUNC_ROOT, else /run/fnr-<runtime> as root, else
 * $XDG_RUNTIME_DIR/fnr-<runtime>, else fnr-<runtime>-<uid> in the temporary directory.
 */
export function defaultStateRoot(runtime: OciRuntimeName, env: NodeJS.ProcessEnv = process.env): string {
  if (env.FNR_RUNC_ROOT) return path.resolve(env.FNR_RUNC_ROOT)
  const uid = process.getuid?.() ?? 0
  if (uid === 0) return path.join('/run', `fnr-${runtime}`)
  if (env.XDG_RUNTIME_DIR && path.isAbsolute(env.XDG_RUNTIME_DIR)) return path.join(env.XDG_RUNTIME_DIR, `fnr-${runtime}`)
  return path.join(os.tmpdir(), `fnr-${runtime}-${uid}`)
}

/** FNR_FN_MEMORY (a size), FNR_FN_CPUS (a number) and FNR_FN_PIDS (a count), checked. */
export function limitsFromEnv(env: NodeJS.ProcessEnv = process.env): ResourceLimits {
  const limits: ResourceLimits = {}
  if (env.FNR_FN_MEMORY) limits.memoryBytes = parseSize(env.FNR_FN_MEMORY, 'FNR_FN_MEMORY')
  if (env.FNR_FN_CPUS) {
    const cpus = Number(env.FNR_FN_CPUS)
    if (!Number.isFinite(cpus) || cpus <= 0) throw new FnrError('Config', `FNR_FN_CPUS=${JSON.stringify(env.FNR_FN_CPUS)}: expected a number of CPUs above 0, e.g. 1.5`)
    limits.cpus = cpus
  }
  if (env.FNR_FN_PIDS) {
    const pids = Number(env.FNR_FN_PIDS)
    if (!Number.isInteger(pids) || pids <= 0) throw new FnrError('Config', `FNR_FN_PIDS=${JSON.stringify(env.FNR_FN_PIDS)}: expected a whole number above 0`)
    limits.pids = pids
  }
  return limits
}

/** The uid and gid of `nobody` in the image's /etc/passwd, else 65534:65534. */
export function nobodyOf(rootfs: string): {uid: number; gid: number} {
  let text: string
  try {
    text = readFileSync(path.join(rootfs, 'etc', 'passwd'), 'utf8')
  } catch {
    return NOBODY
  }
  for (const line of text.split('\n')) {
    const f = line.split(':')
    if (f[0] === 'nobody' && /^\d+$/.test(f[2] ?? '') && /^\d+$/.test(f[3] ?? '')) return {uid: Number(f[2]), gid: Number(f[3])}
  }
  return NOBODY
}

/** The image's environment with `extra` over it (a later KEY wins), PATH and HOME set when the image has none. */
export function containerEnv(imageEnv: readonly string[], extra: readonly string[]): string[] {
  const env = new Map<string, string>()
  for (const e of [...imageEnv, ...extra]) {
    const eq = e.indexOf('=')
    if (eq > 0) env.set(e.slice(0, eq), e.slice(eq + 1))
  }
  if (!env.has('PATH')) env.set('PATH', DEFAULT_PATH.slice('PATH='.length))
  if (!env.has('HOME')) env.set('HOME', '/')
  return [...env].map(([k, v]) => `${k}=${v}`)
}

type BundleInput = Pick<OciRunOptions, 'image' | 'network' | 'user' | 'mounts' | 'env' | 'limits'> & {rootless?: {uid: number; gid: number}}

/** The container's mounts: its own /proc, /dev, /sys and /tmp, the host's name resolution with the network, --mount's binds. */
function bundleMounts(options: BundleInput): Array<Record<string, unknown>> {
  const mounts: Array<Record<string, unknown>> = [
    {destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev']},
    {destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k']},
    {destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620']},
    {destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k']},
    {destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev']},
    // sysfs needs a network namespace the container owns; without one (rootless on the host's network) the host's, bound read-only.
    options.rootless && options.network
      ? {destination: '/sys', type: 'none', source: '/sys', options: ['rbind', 'nosuid', 'noexec', 'nodev', 'ro']}
      : {destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro']},
    {destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777', 'size=262144k']},
  ]
  if (options.network) {
    for (const file of ['/etc/resolv.conf', '/etc/hosts']) mounts.push({destination: file, type: 'bind', source: file, options: ['rbind', 'rprivate', 'ro']})
  }
  for (const m of options.mounts) mounts.push({destination: m.target, type: 'bind', source: m.source, options: ['rbind', 'rprivate', m.readOnly ? 'ro' : 'rw']})
  return mounts
}

function bundleResources(limits: ResourceLimits): Record<string, unknown> {
  const resources: Record<string, unknown> = {}
  if (limits.memoryBytes !== undefined) resources.memory = {limit: limits.memoryBytes, swap: limits.memoryBytes}
  if (limits.cpus !== undefined) resources.cpu = {quota: Math.max(1000, Math.round(limits.cpus * 100_000)), period: 100_000}
  if (limits.pids !== undefined) resources.pids = {limit: limits.pids}
  return resources
}

/**
 * config.json of the bundle (OCI runtime spec 1.0). Rootless (fnr not root; `rootless` is the
 * host uid and gid): a user namespace maps the container's root to that user, the only id it has,
 * so the function runs as root in the container and as that user outside, with no capabilities.
 */
export function bundleConfig(options: BundleInput): Record<string, unknown> {
  const {image, rootless} = options
  const user = rootless ? {uid: 0, gid: 0} : (options.user ?? nobodyOf(image.rootfs))
  const caps = user.uid === 0 && !rootless ? ROOT_CAPABILITIES : []
  const namespaces: Array<{type: string}> = [{type: 'pid'}, {type: 'ipc'}, {type: 'uts'}, {type: 'mount'}]
  // A network namespace of its own has only loopback (the runtime brings it up).
  if (!options.network) namespaces.push({type: 'network'})
  if (rootless) namespaces.push({type: 'user'})
  const idMaps = rootless
    ? {uidMappings: [{containerID: 0, hostID: rootless.uid, size: 1}], gidMappings: [{containerID: 0, hostID: rootless.gid, size: 1}]}
    : {}
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: {uid: user.uid, gid: user.gid},
      args: functionCommand(image.config.entrypoint, image.config.cmd),
      env: containerEnv(image.config.env, options.env),
      cwd: image.config.workingDir || '/',
      capabilities: {bounding: caps, effective: caps, permitted: caps},
      noNewPrivileges: true,
    },
    root: {path: image.rootfs, readonly: true},
    hostname: 'krm-function',
    mounts: bundleMounts(options),
    linux: {
      ...idMaps,
      resources: bundleResources(options.limits),
      namespaces,
      maskedPaths: ['/proc/acpi', '/proc/asound', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', '/proc/scsi', '/sys/firmware'],
      readonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
    },
  }
}

/** The runtime's own error from its JSON log (level error or fatal), or undefined. */
export function runtimeLogError(log: string): string | undefined {
  const errors: string[] = []
  for (const line of log.split('\n')) {
    if (line.trim() === '') continue
    try {
      const entry = JSON.parse(line) as {level?: string; msg?: string}
      if ((entry.level === 'error' || entry.level === 'fatal') && entry.msg) errors.push(entry.msg)
    } catch {
      errors.push(line)
    }
  }
  return errors.length > 0 ? errors[errors.length - 1] : undefined
}

function runtimeCommand(options: OciRunOptions, args: string[]): Promise<{code: number; stderr: string}> {
  return new Promise((resolve) => {
    execFile(options.runtime.path, ['--root', options.stateRoot, ...args], {timeout: 30_000, encoding: 'utf8'}, (err, _stdout, stderr) => {
      resolve({code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stderr})
    })
  })
}

export async function runWithOciRuntime(options: OciRunOptions): Promise<FunctionProcessResult> {
  const id = `fnr-${process.pid}-${randomBytes(5).toString('hex')}`
  const bundle = await mkdtemp(path.join(os.tmpdir(), 'fnr-bundle-'))
  const log = path.join(bundle, 'runtime.log')
  let deleting: Promise<unknown> | undefined
  const deleteContainer = (): Promise<unknown> => (deleting ??= runtimeCommand(options, ['delete', '--force', id]))
  // Killed at once on an interrupt or the deadline: the runtime's process group is killed by the
  // process runner, but the container's processes are in namespaces of their own.
  const onAbort = (): void => void deleteContainer()
  options.signal?.addEventListener('abort', onAbort, {once: true})
  const deadlineTimer = options.deadline !== undefined && Number.isFinite(options.deadline) ? setTimeout(onAbort, Math.max(0, Math.min(options.deadline - Date.now(), 2_147_483_647))) : undefined
  // Set when the runtime ended by itself with the container's exit status: `run` has removed the container then.
  let removedByRuntime = false
  try {
    const uid = process.getuid?.() ?? 0
    const rootless = uid === 0 ? undefined : {uid, gid: process.getgid?.() ?? uid}
    await writeFile(path.join(bundle, 'config.json'), JSON.stringify(bundleConfig({...options, rootless})))
    const result = await runFunctionProcess({
      command: options.runtime.path,
      args: ['--root', options.stateRoot, '--log', log, '--log-format', 'json', 'run', '--bundle', bundle, id],
      input: options.input,
      env: minimalEnvironment(),
      deadline: options.deadline,
      signal: options.signal,
      maxStdoutBytes: options.maxOutputBytes,
      maxStderrBytes: options.maxOutputBytes,
      label: options.label,
      launcher: options.launcher,
    })
    if (result.exitCode !== 0) {
      const why = runtimeLogError(await readFile(log, 'utf8').catch(() => ''))
      if (why !== undefined) {
        throw new FnrError('FailedPrecondition', `${options.runtime.name} could not run image function ${JSON.stringify(options.label)}: ${firstLine(why, 1000)}`, {details: {startFailed: true}})
      }
    }
    removedByRuntime = result.exitCode !== null
    return result
  } finally {
    clearTimeout(deadlineTimer)
    options.signal?.removeEventListener('abort', onAbort)
    // Killed, failed or cut off: the container may still be there (a delete of none costs a runtime start).
    if (!removedByRuntime || deleting !== undefined) await deleteContainer()
    await rm(bundle, {recursive: true, force: true})
  }
}
