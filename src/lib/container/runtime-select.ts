/**
 * Which container runtime runs `image:` functions the exec config does not map
 * (docs/container-runtime.md, "Choosing a runtime"):
 *
 *   FNR_CONTAINER_RUNTIME  auto (default) | docker | podman | nerdctl | runc | crun | none
 *   KPT_FN_RUNTIME         kpt's choice of container CLI (docker, podman or nerdctl; default
 *                          docker); KRM_FN_RUNTIME, its name in later kpt, too
 *
 * auto takes the container CLI kpt's variable names (docker when unset) when it is installed and
 * answers (docker and nerdctl: their daemon answers `version`; podman: `info`), then fnr's own
 * runtime with runc, then crun. Any other value takes that runtime only; `none` runs no image the
 * exec config does not map (as fnr did before it had container runtimes). A runtime that is
 * installed but does not work is reported with what it said, and nothing is chosen silently.
 */
import {execFile} from 'node:child_process'
import {accessSync, constants, readFileSync} from 'node:fs'
import path from 'node:path'

import {FnrError, firstLine} from '../errors.js'

export type CliRuntimeName = 'docker' | 'podman' | 'nerdctl'
export type OciRuntimeName = 'runc' | 'crun'

/** The runtime chosen; `passedOver` names the ones installed but not usable that auto tried first, and why. */
export type ContainerRuntime = ({kind: 'cli'; name: CliRuntimeName; path: string} | {kind: 'oci'; name: OciRuntimeName; path: string}) & {passedOver?: string[]}

const CLI_RUNTIMES: readonly CliRuntimeName[] = ['docker', 'podman', 'nerdctl']
const OCI_RUNTIMES: readonly OciRuntimeName[] = ['runc', 'crun']
const CHOICES = ['auto', ...CLI_RUNTIMES, ...OCI_RUNTIMES, 'none'] as const

/** How long a container CLI may take to answer its probe (kpt allows `docker version` 5 s). */
const PROBE_TIMEOUT_MS = 5000

/** Where an OCI runtime is looked for besides $PATH (sbin is often not on a user's PATH). */
const SBIN_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/local/bin', '/usr/bin', '/bin']

/** FNR_CONTAINER_RUNTIME, checked; 'auto' when unset. */
export function runtimeChoice(env: NodeJS.ProcessEnv = process.env): (typeof CHOICES)[number] {
  const raw = (env.FNR_CONTAINER_RUNTIME ?? '').trim().toLowerCase()
  if (raw === '') return 'auto'
  const found = CHOICES.find((c) => c === raw)
  if (found === undefined) throw new FnrError('Config', `FNR_CONTAINER_RUNTIME=${JSON.stringify(env.FNR_CONTAINER_RUNTIME)}: expected one of ${CHOICES.join(', ')}`)
  return found
}

/**
 * kpt's choice of container CLI, checked as kpt checks it: KPT_FN_RUNTIME (kpt 1.0.0-beta.56, the
 * kpt fnr follows) or KRM_FN_RUNTIME (its name in later kpt), the first one set; docker when neither is.
 */
export function kptRuntime(env: NodeJS.ProcessEnv = process.env): CliRuntimeName {
  const name = ['KPT_FN_RUNTIME', 'KRM_FN_RUNTIME'].find((n) => (env[n] ?? '') !== '')
  if (name === undefined) return 'docker'
  const found = CLI_RUNTIMES.find((c) => c === env[name]!.toLowerCase())
  if (found === undefined) throw new FnrError('Config', `${name}=${JSON.stringify(env[name])}: unsupported runtime, expected docker, podman or nerdctl`)
  return found
}

/** An executable named `name` on $PATH (and, for OCI runtimes, in the sbin directories), or undefined. */
export function findExecutable(name: string, env: NodeJS.ProcessEnv = process.env, extraDirs: readonly string[] = []): string | undefined {
  const dirs = [...(env.PATH ?? '').split(path.delimiter).filter((d) => d !== ''), ...extraDirs]
  for (const dir of dirs) {
    const candidate = path.join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/** Why a container CLI does not work, or undefined when it answered. */
export function probeCli(name: CliRuntimeName, bin: string, env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  // docker and nerdctl are clients of a daemon: the server's version proves it answers. podman has
  // no daemon; `info` proves its storage and runtime are set up.
  const args = name === 'podman' ? ['info', '--format', '{{.Host.OCIRuntime.Name}}'] : ['version', '--format', '{{.Server.Version}}']
  return new Promise((resolve) => {
    execFile(bin, args, {timeout: PROBE_TIMEOUT_MS, env, encoding: 'utf8', maxBuffer: 1024 * 1024}, (err, stdout, stderr) => {
      if (err === null && stdout.trim() !== '') return resolve(undefined)
      const timedOut = (err as {killed?: boolean} | null)?.killed
      const said = firstLine(stderr.trim().split('\n').filter((l) => l.trim() !== '').pop() ?? err?.message ?? 'no answer', 300)
      resolve(timedOut ? `\`${name} ${args[0]}\` did not answer within ${PROBE_TIMEOUT_MS / 1000}s` : `\`${name} ${args[0]}\` failed: ${said}`)
    })
  })
}

/**
 * Why fnr cannot run an OCI runtime here, or undefined when it can: Linux, and as root, or as
 * another user when the kernel lets users make user namespaces (rootless: oci-runtime.ts).
 */
export function ociUnusableReason(name: OciRuntimeName): string | undefined {
  if (process.platform !== 'linux') return `${name} runs on Linux only (this is ${process.platform})`
  if (process.getuid?.() === 0) return undefined
  let max = 0
  try {
    max = Number(readFileSync('/proc/sys/user/max_user_namespaces', 'utf8').trim())
  } catch {
    // No such file: a kernel without user namespaces.
  }
  if (!(max > 0)) return `fnr runs ${name} without root in a user namespace of its own, and this kernel allows none (user.max_user_namespaces is 0 or absent): run fnr as root, or use rootless podman`
  return undefined
}

/**
 * The runtime for image functions, or undefined for `none`. Throws FnrError('FailedPrecondition')
 * naming every runtime tried and why it could not be used.
 */
export async function selectRuntime(env: NodeJS.ProcessEnv = process.env): Promise<ContainerRuntime | undefined> {
  const choice = runtimeChoice(env)
  if (choice === 'none') return undefined
  const tried: string[] = []
  const tryCli = async (name: CliRuntimeName): Promise<ContainerRuntime | undefined> => {
    const bin = findExecutable(name, env)
    if (bin === undefined) {
      tried.push(`${name}: not installed (not on PATH)`)
      return undefined
    }
    const why = await probeCli(name, bin, env)
    if (why !== undefined) {
      tried.push(`${name} (${bin}) is installed but not usable: ${why}`)
      return undefined
    }
    return {kind: 'cli', name, path: bin}
  }
  const tryOci = (name: OciRuntimeName): ContainerRuntime | undefined => {
    const bin = findExecutable(name, env, SBIN_DIRS)
    if (bin === undefined) {
      tried.push(`${name}: not installed`)
      return undefined
    }
    const why = ociUnusableReason(name)
    if (why !== undefined) {
      tried.push(`${name} (${bin}): ${why}`)
      return undefined
    }
    return {kind: 'oci', name, path: bin}
  }
  let found: ContainerRuntime | undefined
  if (choice === 'auto') {
    found = (await tryCli(kptRuntime(env))) ?? tryOci('runc') ?? tryOci('crun')
  } else if ((CLI_RUNTIMES as readonly string[]).includes(choice)) {
    found = await tryCli(choice as CliRuntimeName)
  } else {
    found = tryOci(choice as OciRuntimeName)
  }
  const passedOver = tried.filter((t) => t.includes(' is installed but not usable'))
  if (found !== undefined) return passedOver.length > 0 ? {...found, passedOver} : found
  const how = choice === 'auto' ? 'no container runtime is usable' : `FNR_CONTAINER_RUNTIME=${choice} is not usable`
  throw new FnrError('FailedPrecondition', `${how} to run image functions: ${tried.join('; ')}`, {details: {noRuntime: true}})
}
