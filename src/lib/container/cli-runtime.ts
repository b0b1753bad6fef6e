/**
 * Running an image function with a container CLI (docker, podman or nerdctl), with the command
 * line kpt uses (docs/container-runtime.md, "docker, podman, nerdctl"):
 *
 *   <cli> run --rm -i --network none|host --user nobody|UID:GID --security-opt=no-new-privileges
 *         --pull missing|always|never [--mount …] [-e KEY=VALUE …] [-e KEY …] --name fnr-… IMAGE
 *
 * fnr adds only --name, so that a function killed at --timeout or an interrupt is removed with
 * `<cli> rm -f` rather than left running. The CLI's own pull progress is dropped from the
 * function's stderr (kpt does the same); its exit code is the function's (125: the CLI itself
 * failed, e.g. no such image, with its words on stderr).
 */
import {execFile} from 'node:child_process'
import {randomBytes} from 'node:crypto'

import type {ProcessLauncher} from '../process/launcher.js'
import {runFunctionProcess, type FunctionProcessResult} from '../process/run.js'
import type {PullPolicy} from './pull.js'
import type {CliRuntimeName} from './runtime-select.js'

export interface CliRunOptions {
  runtime: {name: CliRuntimeName; path: string}
  image: string
  label: string
  input: Buffer
  policy: PullPolicy
  network: boolean
  /** "UID:GID", or undefined for nobody. */
  user?: string
  /** docker --mount values, as given. */
  mounts: readonly string[]
  /** KEY=VALUE (set) and KEY (passed from fnr's environment), as kpt passes them. */
  env: readonly string[]
  deadline?: number
  signal?: AbortSignal
  maxOutputBytes: number
  /** Starts the runtime's process and keeps its call. */
  launcher: ProcessLauncher
}

const PULL_FLAG: Record<PullPolicy, string> = {Always: 'always', IfNotPresent: 'missing', Never: 'never'}

/** The `run` arguments kpt gives the CLI, plus fnr's --name. */
export function cliRunArgs(options: Omit<CliRunOptions, 'runtime' | 'label' | 'input' | 'deadline' | 'signal' | 'maxOutputBytes' | 'launcher'>, name: string): string[] {
  const args = ['run', '--rm', '-i', '--network', options.network ? 'host' : 'none', '--user', options.user ?? 'nobody', '--security-opt=no-new-privileges', '--pull', PULL_FLAG[options.policy]]
  for (const m of options.mounts) args.push('--mount', m)
  // kpt: the KEY=VALUE variables sorted by name, then the KEY ones in their order.
  const set = new Map<string, string>()
  const pass: string[] = []
  for (const e of options.env) {
    const eq = e.indexOf('=')
    if (eq < 0) pass.push(e)
    else set.set(e.slice(0, eq), e.slice(eq + 1))
  }
  for (const key of [...set.keys()].sort()) args.push('-e', `${key}=${set.get(key)}`)
  for (const key of pass) args.push('-e', key)
  args.push('--name', name, options.image)
  return args
}

/** Lines the container CLIs write about pulling an image (not the function's). */
const PULL_PROGRESS = [
  /^Unable to find image '.*' locally$/,
  /^[^\s:]+: Pulling from /,
  /^[0-9a-f]{12}: (Pulling fs layer|Waiting|Verifying Checksum|Download complete|Pull complete|Already exists|Downloading|Extracting)/,
  /^Digest: sha256:[0-9a-f]{64}$/,
  /^Status: (Downloaded newer image|Image is up to date) for /,
  /^Trying to pull /,
  /^Getting image source signatures$/,
  /^Copying (blob|config) sha256:/,
  /^Writing manifest to image destination$/,
  /^Storing signatures$/,
  /^[0-9a-f]{64}$/,
  /^(index|manifest|config|layer)-sha256:[0-9a-f]+:/,
  /^elapsed: /,
  /\|[+-]{20,}\|/,
]

/** stderr without the CLI's pull progress lines. */
export function withoutPullProgress(stderr: Buffer): Buffer {
  const text = stderr.toString('utf8')
  if (text === '') return stderr
  const kept = text.split('\n').filter((line) => !PULL_PROGRESS.some((re) => re.test(line.replace(/\r$/, ''))))
  return Buffer.from(kept.join('\n'), 'utf8')
}

export async function runWithCli(options: CliRunOptions): Promise<FunctionProcessResult> {
  const name = `fnr-${process.pid}-${randomBytes(5).toString('hex')}`
  const args = cliRunArgs(options, name)
  let ended = false
  const remove = (): void => {
    if (ended) return
    ended = true
    execFile(options.runtime.path, ['rm', '-f', name], {timeout: 30_000}, () => {})
  }
  options.signal?.addEventListener('abort', remove, {once: true})
  try {
    const result = await runFunctionProcess({
      command: options.runtime.path,
      args,
      input: options.input,
      // The CLI needs its own settings (DOCKER_HOST, CONTAINER_HOST, XDG_RUNTIME_DIR…): fnr's environment.
      env: process.env,
      deadline: options.deadline,
      signal: options.signal,
      maxStdoutBytes: options.maxOutputBytes,
      maxStderrBytes: options.maxOutputBytes,
      label: options.label,
      launcher: options.launcher,
    })
    ended = true
    return {...result, stderr: withoutPullProgress(result.stderr)}
  } catch (err) {
    // Killed (deadline, interrupt, output cap): the container may outlive its CLI.
    remove()
    throw err
  } finally {
    options.signal?.removeEventListener('abort', remove)
  }
}
