/**
 * The exec evaluator: runs a local binary mapped from the image name by the exec config.
 * Unknown images are NotFound (so the multi evaluator can try the pod runtime).
 *
 * Each call re-checks the binary before it runs (docs/process.md, "The exec runtime re-checks each binary before it runs"): the functions directory
 * still resolves to the directory it resolved to at start-up, the binary's path still resolves
 * to itself inside that directory (no symlink put in its place or in its path), and it is still
 * the same file (device and inode as first seen). A failed check refuses the call with
 * FailedPrecondition, naming the check. What is left is the moment between the check and the
 * exec (docs/process.md).
 */
import {realpathSync, statSync, watch, type FSWatcher} from 'node:fs'
import path from 'node:path'

import {FnrError} from '../errors.js'
import type {ExecConfig, ExecFunction} from '../config/exec-config.js'
// Type only: `fnr eval` bundles this module, and log.ts would bring pino into it.
import type {Logger} from '../telemetry/log.js'
import {emptyOutputError, functionFailedError} from '../process/failure.js'
import {PrestartPool, type PrestartSpec} from '../process/prestart.js'
import {execEnvironment, notStartable, runFunctionProcess, type StartedFunction} from '../process/run.js'
import type {ProcessLauncher} from '../process/launcher.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator, ImageIdentity} from '../evaluator.js'

export interface ExecEvaluatorOptions {
  config: ExecConfig
  /** stdout above this is cut off and the call ends ResourceExhausted. */
  maxOutputBytes: number
  logger?: Logger
  /** Runner environment variables passed on to functions besides the proxy variables (--exec-env). */
  passEnv?: readonly string[]
  /** Variables set for every function, over passEnv's (`fnr eval --image … --env KEY=VALUE`). */
  setEnv?: Readonly<Record<string, string>>
  /** Starts the function processes and keeps their calls (process/launcher.ts): the server's, or the command's. */
  launcher: ProcessLauncher
  /**
   * Pre-started functions (process/prestart.ts, docs/process.md "Pre-started functions"): how many
   * processes to keep waiting per image called recently and for how long; absent or perImage 0: off.
   */
  prestart?: {perImage: number; idleTtlMs: number}
}

/*
 * The checks use the synchronous calls on purpose: realpath(3) and stat(2) on a local file take
 * microseconds, less than a trip through libuv's thread pool, and a call must not wait behind
 * other work queued there (the /proc sweeps of process/sweep.ts use it).
 */
function realReal(file: string): string | undefined {
  try {
    return realpathSync.native(file)
  } catch {
    return undefined
  }
}

function fileIdentity(file: string): string | undefined {
  try {
    const info = statSync(file, {bigint: true})
    return `${info.dev}:${info.ino}`
  } catch {
    return undefined
  }
}

export class ExecEvaluator implements Evaluator {
  readonly name = 'exec'
  private readonly config: ExecConfig
  private readonly maxOutputBytes: number
  private readonly logger: Logger | undefined
  private readonly env: NodeJS.ProcessEnv
  private readonly launcher: ProcessLauncher
  /** Device and inode of each binary, as at start-up (or when first seen, for functions added later). */
  private readonly identities = new Map<string, string | undefined>()
  /** The functions directory's real path at start-up. */
  private readonly dirReal: string | undefined
  /** Processes started ahead of their call (undefined: off). */
  readonly prestart: PrestartPool | undefined
  /** A watch on each binary a process was pre-started from: its change kills what waits (binaryChanged). */
  private readonly binaryWatches = new Map<string, FSWatcher>()

  constructor(options: ExecEvaluatorOptions) {
    this.config = options.config
    this.maxOutputBytes = options.maxOutputBytes
    this.logger = options.logger
    this.launcher = options.launcher
    this.env = {...execEnvironment(options.passEnv), ...options.setEnv}
    const dir = this.config.functionsDir
    this.dirReal = dir ? realReal(dir) : undefined
    for (const fn of this.config.functions) this.identityAtStart(fn.binary)
    if (options.prestart && options.prestart.perImage > 0) this.prestart = new PrestartPool({...options.prestart, launcher: options.launcher})
  }

  private identityAtStart(binary: string): string | undefined {
    if (!this.identities.has(binary)) this.identities.set(binary, fileIdentity(binary))
    return this.identities.get(binary)
  }

  /**
   * Throws FailedPrecondition when the binary is no longer the one checked at start-up, saying which
   * check failed. The path that still leads to the very file checked at start-up (its device and
   * inode, through whatever symlinks) runs that file: one stat(2) says so, and only a path that does
   * not goes through the checks below, which say what changed (two realpath(3) calls and a stat,
   * 4 % of the runner's CPU at 16 calls in flight when every call made them).
   */
  private recheck(image: string, fn: ExecFunction): void {
    const atStartIdentity = this.identities.get(fn.binary)
    if (atStartIdentity !== undefined && fileIdentity(fn.binary) === atStartIdentity) return
    const refuse = (why: string): never => {
      throw new FnrError('FailedPrecondition', `exec function ${JSON.stringify(image)} refused: ${why}`, {details: {runtime: this.name}})
    }
    const dir = this.config.functionsDir
    const dirAtStart = this.dirReal
    let dirNow: string | undefined
    if (dir && dirAtStart) {
      dirNow = realReal(dir)
      if (dirNow === undefined) refuse(`the functions directory ${dir} no longer exists`)
      if (dirNow !== dirAtStart) refuse(`the functions directory ${dir} now resolves to ${dirNow}, not ${dirAtStart} as at start-up`)
    }
    const real = realReal(fn.binary)
    if (real === undefined) refuse(`the binary ${fn.binary} no longer exists`)
    if (real !== fn.binary) refuse(`the binary ${fn.binary} now resolves to ${real} (a symlink was put in its place or in its path)`)
    if (dirNow && real !== dirNow && !real!.startsWith(dirNow + path.sep)) refuse(`the binary ${real} is outside the functions directory ${dirNow}`)
    const atStart = this.identityAtStart(fn.binary)
    const now = fileIdentity(real!)
    if (atStart !== undefined && now !== atStart) refuse(`the binary ${fn.binary} is not the file it was at start-up (device:inode ${atStart}, now ${now ?? 'none'})`)
  }

  /** True when the exec config maps the image to a binary (else evaluate() is NotFound). */
  knows(image: string): boolean {
    return this.config.lookup(image) !== undefined
  }

  /** The binary that would run for an image, if any. */
  binaryFor(image: string): string | undefined {
    return this.config.lookup(image)?.binary
  }

  /** The binary the image maps to, by path and a stat of it; undefined for an image not mapped. */
  async identify(image: string): Promise<ImageIdentity | undefined> {
    const binary = this.binaryFor(image)
    return binary === undefined ? undefined : binaryIdentity(binary)
  }

  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    const fn = this.config.lookup(request.image)
    if (!fn) throw new FnrError('NotFound', `function ${JSON.stringify(request.image)} not found`)
    const early = notStartable(request.image, request.deadline, request.signal)
    if (early) throw early
    this.recheck(request.image, fn)
    const cwd = this.config.functionsDir || undefined
    const pool = this.prestart
    const spec = pool ? this.prestartSpec(fn) : undefined
    const prestarted: StartedFunction | undefined = spec ? pool!.take(request.image, spec) : undefined
    let result
    try {
      result = await runFunctionProcess({
        command: fn.binary,
        input: request.resourceList,
        env: this.env,
        cwd,
        prestarted,
        deadline: request.deadline,
        signal: request.signal,
        maxStdoutBytes: this.maxOutputBytes,
        // the log keeps as much stderr as a response can carry (the server cuts it to what fits)
        maxStderrBytes: this.maxOutputBytes,
        label: request.image,
        launcher: this.launcher,
        stdoutHeadroom: request.outputHeadroom,
      })
    } finally {
      // The next call's process starts once this call's answer is on its way (after this turn).
      if (pool && spec) {
        const image = request.image
        const next = spec
        setImmediate(() => {
          pool.refill(image, next)
          this.watchBinary(next.command)
        })
      }
    }
    if (result.exitCode !== 0) throw await functionFailedError(request.image, result)
    const empty = emptyOutputError(request.image, result)
    if (empty) throw empty
    if (this.logger?.enabled(4)) {
      this.logger.debug('function finished', {
        image: request.image,
        binary: fn.name,
        stdoutBytes: result.stdout.length,
        stderrBytes: result.stderr.length,
        ms: Math.round(result.durationMs * 10) / 10,
      })
    }
    return {resourceList: result.stdout, log: result.stderr, logDropped: result.stderrDropped, evaluator: this.name}
  }

  /**
   * The config changed (a FunctionConfig was added, edited or deleted): pre-started processes of an
   * image now mapped to another binary, or to none, or whose binary is not the file they were
   * started from, are killed now rather than at their next call or idle TTL.
   */
  configChanged(): void {
    this.prestart?.prune((image) => this.prestartSpec(this.config.lookup(image)))
  }

  /** What a call of the function would start now, as the pool compares it; undefined for no function, or a binary that cannot be read. */
  private prestartSpec(fn: ExecFunction | undefined): PrestartSpec | undefined {
    const identity = fn === undefined ? undefined : statIdentity(fn.binary)
    return fn === undefined || identity === undefined ? undefined : {command: fn.binary, env: this.env, cwd: this.config.functionsDir || undefined, identity}
  }

  /**
   * Watches a binary a process is pre-started from (inotify, one per binary, kept until close): a
   * write, a chmod or a rename over it kills the processes started from the old file at once. A
   * rename leaves the watch on the old file, so it is renewed on the path after each event.
   */
  private watchBinary(binary: string): void {
    if (this.binaryWatches.has(binary)) return
    let watcher: FSWatcher
    try {
      watcher = watch(binary, {persistent: false}, () => {
        watcher.close()
        this.binaryWatches.delete(binary)
        this.configChanged()
        this.watchBinary(binary)
      })
    } catch {
      return // gone: the call-time re-check refuses it
    }
    watcher.on('error', () => {
      watcher.close()
      this.binaryWatches.delete(binary)
    })
    this.binaryWatches.set(binary, watcher)
  }

  async close(): Promise<void> {
    for (const w of this.binaryWatches.values()) w.close()
    this.binaryWatches.clear()
    await this.prestart?.close()
  }
}

/** binaryIdentity's stat, or undefined when the file cannot be read (the call then fails to start as it would). */
function statIdentity(binary: string): string | undefined {
  try {
    return binaryStat(binary)
  } catch {
    return undefined
  }
}

/**
 * The identity of an exec function: its binary's path, device, inode, size, and modification and
 * change times (ns), read with one stat per call, so a binary replaced or rewritten in place is a
 * new identity at once, without hashing it. The stat is synchronous: a few microseconds on a
 * local file, where the thread pool round trip of an async stat costs more under load.
 */
export function binaryIdentity(binary: string): ImageIdentity {
  return {runtime: 'exec', binary, stat: binaryStat(binary)}
}

function binaryStat(binary: string): string {
  const s = statSync(binary, {bigint: true})
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`
}
