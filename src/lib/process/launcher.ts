/**
 * A ProcessLauncher starts a server's (or a command's) function processes and owns everything that
 * comes with them: the spawner it starts them through (spawner.ts, native-spawner.ts), the calls
 * running now and the processes started ahead of their call (pid -> call marker), and the sweeper
 * that kills what an ended call left behind (sweep.ts). A server makes one at its start and hands
 * it to its evaluators, its budget and its drain; `fnr eval`, `render` and `test` make one for the
 * command. Two servers in one process share none of it: one server's forced stop kills its own
 * functions only, and a spawner given up by one is not the other's.
 *
 * The one thing all launchers of a process share is that pids are the process's: a sweep spares a
 * process any launcher holds (sweep.ts addFunctionHolder).
 */
import {EventEmitter} from 'node:events'
import type {Readable} from 'node:stream'

import {nativeHelperCandidates, NATIVE_HELPER_ENV, nativeHelperPath, nativeRequest, nativeSpawnerCommand} from './native-spawner.js'
import {launchDirect, ProcessSpawner, SPAWNER_SWITCH_ENV, type FunctionChild, type LaunchMode, type LaunchSpec} from './spawner.js'
import {addFunctionHolder, removeFunctionHolder, Sweeper, sweepSync, type FunctionHolder, type SweepTarget} from './sweep.js'

/**
 * How long a call made in the native helper's first milliseconds waits for it (ProcessLauncher.
 * launch) before it starts otherwise. The helper answers in about a millisecond; one that cannot
 * start at all is given up at once (its start fails), and the call goes on without it.
 */
export const HELPER_START_WAIT_MS = 2000

/**
 * A function whose start waits for the native helper to be ready: stands for the process started
 * then (attach), whose events it passes on. Until then it has no pid and its stdio are pending, as a
 * function the helper is starting has (run.ts waits for 'spawn'); its input is kept.
 */
class DeferredFunction extends EventEmitter implements FunctionChild {
  private real: FunctionChild | undefined
  private input: Uint8Array | undefined
  private written: (() => void) | undefined

  get pid(): number | undefined {
    return this.real?.pid
  }

  get stdout(): Readable | null | undefined {
    return this.real?.stdout
  }

  get stderr(): Readable | null | undefined {
    return this.real?.stderr
  }

  get stdioPending(): boolean {
    return this.real === undefined || this.real.stdioPending === true
  }

  get leftNothing(): boolean | undefined {
    return this.real?.leftNothing
  }

  /** The started process's stdin where it has one in view (a direct start's), for abandonFunctionProcess. */
  get stdin(): {destroy(): void} | null | undefined {
    return (this.real as {stdin?: {destroy(): void} | null} | undefined)?.stdin
  }

  writeInput(input: Uint8Array, written?: () => void): void {
    if (this.real) this.real.writeInput(input, written)
    else {
      this.input = input
      this.written = written
    }
  }

  attach(real: FunctionChild): void {
    this.real = real
    for (const event of ['spawn', 'error', 'exit', 'close']) real.on(event, (...args: unknown[]) => this.emit(event, ...args))
    if (this.input) {
      real.writeInput(this.input, this.written)
      this.input = undefined
      this.written = undefined
    }
  }

  /** It could not be started (what the start threw): 'error', as a start that fails later. */
  fail(err: Error): void {
    this.emit('error', err)
  }
}

export class ProcessLauncher implements FunctionHolder {
  /** Function processes running a call: pid -> the call's marker (run.ts keeps it; the budget reads it as running calls). */
  readonly liveCalls = new Map<number, string>()
  /**
   * Those of liveCalls whose input the runner is still writing (run.ts): their function waits for
   * the runner, not for the world: the call budget never judges them asleep (sleepCandidates), so
   * a runner too busy to feed its functions does not lend their slots to more calls.
   */
  readonly feeding = new Set<number>()

  /** The running calls' process groups the call budget may judge asleep (idle-calls.ts): those whose input is all written. */
  sleepCandidates(): number[] {
    const out: number[] = []
    for (const pid of this.liveCalls.keys()) if (!this.feeding.has(pid)) out.push(pid)
    return out
  }

  /**
   * Function processes started ahead of their call and waiting for it (prestart.ts): pid -> marker.
   * Kept apart from liveCalls, which the budget reads as running calls (idle-calls.ts); a sweep
   * spares them as it spares running calls, and killAll kills them too.
   */
  readonly idleFunctions = new Map<number, string>()
  readonly sweeper = new Sweeper()
  private nodeSpawner: ProcessSpawner | undefined
  private nativeSpawner: ProcessSpawner | undefined
  private closed = false
  /** Once the native helper is given up: false, functions start directly (a one-shot command's launcher). */
  private nodeFallback = true

  /** `mode`: how functions start (serverLaunchMode for a server; forCommand for one-shot commands). */
  constructor(readonly mode: LaunchMode = 'direct') {
    addFunctionHolder(this)
  }

  /**
   * The launcher of a one-shot command (`fnr eval`, `render`, `test`): through the native helper
   * when it is built (its first function waits for it, as a server's first calls do: launch), so
   * that every function of the command gets pipes as its stdin, stdout and stderr, as kpt's do
   * (Node's own spawn gives socketpairs, on which `/dev/stdin`, `> /dev/stderr` and `[ -p
   * /dev/stdin ]` fail). Directly when there is no helper, or FNR_SPAWNER=off|node.
   */
  static forCommand(env: NodeJS.ProcessEnv = process.env): ProcessLauncher {
    const chosen = env[SPAWNER_SWITCH_ENV]
    if (chosen === 'off' || chosen === 'node' || !nativeHelperPath(env)) return new ProcessLauncher()
    const launcher = new ProcessLauncher('native')
    launcher.nodeFallback = false
    launcher.native().warm()
    return launcher
  }

  /** Whether a function start forks the runner itself (no spawner): the call budget paces such starts. */
  get startsInRunner(): boolean {
    return this.mode === 'direct'
  }

  holds(pid: number): boolean {
    return this.liveCalls.has(pid) || this.idleFunctions.has(pid)
  }

  private node(): ProcessSpawner {
    return (this.nodeSpawner ??= new ProcessSpawner())
  }

  private native(): ProcessSpawner {
    return (this.nativeSpawner ??= new ProcessSpawner(nativeSpawnerCommand, {encode: nativeRequest, fallback: 'through the Node process spawner', pipes: true}))
  }

  /** Starts a function process the way the mode says; throws what the start throws (a NUL byte, EMFILE when started directly). */
  launch(spec: LaunchSpec): FunctionChild {
    if (this.mode === 'native' && !this.closed) {
      const native = this.native()
      const child = native.launch(spec)
      if (child) return child
      if (!native.usable()) return this.afterHelper(spec)
      // The helper's first milliseconds: the call waits for it (at most HELPER_START_WAIT_MS), so
      // that every function of a server gets the helper's pipes, the first ones too. A request it
      // could not take (a NUL byte) throws now, as it would once the helper is there.
      nativeRequest(0, spec)
      const deferred = new DeferredFunction()
      void native.whenReady(HELPER_START_WAIT_MS).then(() => {
        try {
          deferred.attach(this.closed ? launchDirect(spec) : (native.launch(spec) ?? this.afterHelper(spec)))
        } catch (err) {
          deferred.fail(err as Error)
        }
      })
      return deferred
    }
    // Until the Node spawner is ready (its first ~100 ms, or never when it cannot start), calls
    // start directly.
    return (this.mode === 'spawner' && !this.closed ? this.node().launch(spec) : undefined) ?? launchDirect(spec)
  }

  /** How a function starts when the native helper is given up (or not ready in time): the Node spawner for a server, else directly. */
  private afterHelper(spec: LaunchSpec): FunctionChild {
    return (this.nodeFallback && !this.closed ? this.node().launch(spec) : undefined) ?? launchDirect(spec)
  }

  /**
   * For a server: starts its spawner now, so the first calls do not start directly, and reports
   * through `warn`, once, that the native helper is not there (when nothing asked for another
   * mode) or that a spawner was given up. Returns the launcher.
   */
  start(warn: (message: string) => void, env: NodeJS.ProcessEnv = process.env): this {
    if (this.mode === 'native') {
      const node = this.node()
      this.native().onDisabled = (why) => {
        warn(why)
        node.onDisabled = warn
        node.warm()
      }
      this.native().warm()
      return this
    }
    const chosen = env[SPAWNER_SWITCH_ENV] === 'off' || env[SPAWNER_SWITCH_ENV] === 'node' || env[NATIVE_HELPER_ENV] === 'none'
    if (!chosen) {
      const how = this.mode === 'spawner' ? 'through the Node process spawner' : 'directly by the runner'
      warn(`the native spawn helper is not there (${nativeHelperCandidates(env).join(', ')}; \`npm run build\` builds it where a C compiler is installed): functions are started ${how}`)
    }
    if (this.mode === 'spawner') {
      this.node().onDisabled = warn
      this.node().warm()
    }
    return this
  }

  /** The pid of its Node spawner or native helper, once one runs (tests, diagnostics). */
  spawnerPid(which: 'node' | 'native'): number | undefined {
    return (which === 'node' ? this.nodeSpawner : this.nativeSpawner)?.pid()
  }

  /** Whether that spawner still takes calls (not given up). */
  spawnerUsable(which: 'node' | 'native'): boolean {
    return (which === 'node' ? this.node() : this.native()).usable()
  }

  /**
   * Kills every function this launcher runs now: each process group, then one synchronous sweep
   * for their markers and for the calls that ended but were not swept yet. For the second
   * SIGTERM/SIGINT, just before the process exits (drain.ts). Returns the number of calls killed.
   */
  killAll(): number {
    const targets: SweepTarget[] = [...this.liveCalls, ...this.idleFunctions].map(([pid, marker]) => ({pid, marker}))
    for (const {pid} of targets) {
      try {
        process.kill(-pid!, 'SIGKILL')
      } catch {
        // gone
      }
    }
    this.liveCalls.clear()
    this.feeding.clear()
    this.idleFunctions.clear()
    sweepSync([...targets, ...this.sweeper.takePending()])
    return targets.length
  }

  /**
   * Closes the launcher once its server has stopped: the sweeps asked for are done, its spawners
   * end, and sweeps no longer spare its pids. Functions started after this start directly.
   */
  async close(): Promise<void> {
    this.closed = true
    await this.sweeper.whenIdle()
    this.nodeSpawner?.close()
    this.nativeSpawner?.close()
    if (this.liveCalls.size === 0 && this.idleFunctions.size === 0) removeFunctionHolder(this)
  }
}
