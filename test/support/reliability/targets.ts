/**
 * The servers the bad-input corpus is sent to, and the health check run after every input:
 *
 *   serve     one in-process `fnr serve` (exec runtime) over the reliability functions
 *   wrapper   one in-process wrapper server whose entrypoint is the dispatcher (functions.ts)
 *
 * After each input a target must still be healthy: grpc.health.v1 says SERVING, a good call
 * succeeds, no call is left in flight and no function process is left running.
 */
import {expect} from 'chai'

import {EvaluatorClient} from '../../../src/lib/grpc/client.js'
import {silentLogger} from '../../../src/lib/telemetry/log.js'
import type {RunningServer} from '../../../src/lib/serve.js'
import {startWrapperServer, type RunningWrapper} from '../../../src/lib/wrapper.js'
import {checkHealth, healthClient} from '../health.js'
import {serveOptions, startInProcess} from '../serve.js'
import {SAMPLE_RL, TempDirs} from '../tmp.js'
import {makeReliabilityFunctions, type FunctionsDir} from './functions.js'
import {describeProcesses, describeUnreaped, leftoversAfter, unreapedChildren} from './processes.js'
import {onTeardown} from '../teardown.js'
import {eventually, tally, withinHangLimit} from './tally.js'
import {RawEvaluatorClient} from './wire.js'

/** The server's max message size in the corpus runs (small, so size limits are cheap to hit). */
export const MAX_MESSAGE = 1024 * 1024

export interface Target {
  readonly name: 'serve' | 'wrapper'
  readonly port: number
  readonly address: string
  /** Accepts much more than the server, so the server's limits are what is tested. */
  readonly client: EvaluatorClient
  readonly raw: RawEvaluatorClient
  readonly fns: FunctionsDir
  activeCalls(): number
  /** Throws (and counts a crash) unless the server is healthy after `label`. */
  assertHealthy(label: string): Promise<void>
  stop(): Promise<void>
}

abstract class BaseTarget implements Target {
  abstract readonly name: 'serve' | 'wrapper'
  readonly address: string
  readonly client: EvaluatorClient
  readonly raw: RawEvaluatorClient
  private readonly health: ReturnType<typeof healthClient>

  constructor(
    readonly port: number,
    readonly fns: FunctionsDir,
  ) {
    this.address = `127.0.0.1:${port}`
    this.client = new EvaluatorClient(this.address, {maxMessageSize: 64 * 1024 * 1024})
    this.raw = new RawEvaluatorClient(this.address)
    this.health = healthClient(this.address)
  }

  abstract activeCalls(): number
  protected abstract goodCall(): Promise<void>
  protected abstract shutdown(): Promise<void>

  async assertHealthy(label: string): Promise<void> {
    const where = `${this.name}: after ${label}`
    let status: string
    try {
      status = await withinHangLimit(`${where}: health check`, checkHealth(this.health))
    } catch (err) {
      tally.crash(where, `health check failed: ${(err as Error).message}`)
      throw err
    }
    if (status !== 'SERVING') {
      tally.crash(where, `health is ${status}`)
      expect.fail(`${where}: health is ${status}, not SERVING`)
    }
    try {
      await withinHangLimit(`${where}: good call`, this.goodCall())
    } catch (err) {
      tally.crash(where, `a good call failed: ${(err as Error).message}`)
      throw err
    }
    const idle = await eventually(() => this.activeCalls() === 0)
    expect(idle, `${where}: ${this.activeCalls()} call(s) still in flight`).to.equal(true)
    const left = await leftoversAfter([this.fns.dir])
    expect(left, `${where}: processes left running: ${describeProcesses(left)}`).to.deep.equal([])
    // A function that just exited is a zombie until Node reaps it; one that stays one is a leak.
    // Reaping waits for the event loop, which a loaded machine (CI, parallel suites) can delay by
    // seconds, so the wait is generous: a real leak stays a zombie for ever.
    const reaped = await eventually(() => unreapedChildren().length === 0, 20_000)
    expect(reaped, `${where}: unreaped children ${describeUnreaped(unreapedChildren())}`).to.equal(true)
  }

  async stop(): Promise<void> {
    this.client.close()
    this.raw.close()
    this.health.close()
    await this.shutdown()
  }
}

export class ServeTarget extends BaseTarget {
  readonly name = 'serve' as const

  private constructor(
    private readonly running: RunningServer,
    fns: FunctionsDir,
  ) {
    super(running.port, fns)
  }

  static async start(temp: TempDirs, maxMessage = MAX_MESSAGE): Promise<ServeTarget> {
    const fns = await makeReliabilityFunctions(await temp.make('fnr-rel-serve-'))
    const running = await startInProcess(serveOptions({configPath: fns.configPath, functionsDir: fns.functionsDir, maxRequestBodySize: maxMessage, gracePeriodMs: 2000}))
    return new ServeTarget(running, fns)
  }

  get server(): RunningServer['server'] {
    return this.running.server
  }

  activeCalls(): number {
    return this.running.server.activeCalls
  }

  protected async goodCall(): Promise<void> {
    const res = await this.client.evaluateRaw(this.fns.image.catBinary!, SAMPLE_RL, {deadline: Date.now() + 30_000})
    expect(res.resourceList.equals(SAMPLE_RL), 'the good call echoes its input').to.equal(true)
  }

  protected async shutdown(): Promise<void> {
    await this.running.stop()
  }
}

export class WrapperTarget extends BaseTarget {
  readonly name = 'wrapper' as const

  private constructor(
    private readonly running: RunningWrapper,
    fns: FunctionsDir,
  ) {
    super(running.port, fns)
  }

  static async start(temp: TempDirs, maxMessage = MAX_MESSAGE): Promise<WrapperTarget> {
    const fns = await makeReliabilityFunctions(await temp.make('fnr-rel-wrapper-'))
    const running = await startWrapperServer(
      {port: 0, host: '127.0.0.1', maxRequestBodySize: maxMessage, entrypoint: [`${fns.functionsDir}/dispatcher`], gracePeriodMs: 2000},
      silentLogger,
      false,
    )
    return new WrapperTarget(running, fns)
  }

  activeCalls(): number {
    return this.running.server.activeCalls
  }

  protected async goodCall(): Promise<void> {
    const res = await this.client.evaluateRaw('example.com/any:v1', SAMPLE_RL, {deadline: Date.now() + 30_000})
    expect(res.resourceList.equals(SAMPLE_RL), 'the good call echoes its input').to.equal(true)
  }

  protected async shutdown(): Promise<void> {
    await this.running.stop()
  }
}

type Shared = {serve: ServeTarget; wrapper: WrapperTarget}
// On globalThis, like the tally: one pair for the run even if this module is loaded twice.
const STATE = Symbol.for('fnr.reliability.targets')
const state = ((globalThis as typeof globalThis & {[key: symbol]: unknown})[STATE] ??= {shared: undefined, temp: new TempDirs(), hook: false}) as {
  shared: Promise<Shared> | undefined
  temp: TempDirs
  hook: boolean
}

/**
 * The one `fnr serve` and the one wrapper server of the reliability suites, started on first use
 * and shared by every reliability test file of the run; a root-level hook stops them at the end.
 */
export function sharedTargets(): Promise<Shared> {
  state.shared ??= (async () => ({serve: await ServeTarget.start(state.temp), wrapper: await WrapperTarget.start(state.temp)}))()
  return state.shared
}

/** Stops the shared targets (if they were started) and removes their files. */
export async function stopSharedTargets(): Promise<void> {
  const targets = await state.shared?.catch(() => undefined)
  state.shared = undefined
  await targets?.serve.stop()
  await targets?.wrapper.stop()
  await state.temp.cleanup()
}

// Imported while mocha loads the test files, this registers a root-level hook: it runs once, after
// every test of the run. (Outside mocha, e.g. in scripts, call stopSharedTargets yourself.)
if (typeof after === 'function' && !state.hook) {
  state.hook = true
  after(stopSharedTargets)
  // and in mocha's global teardown, should a failed root hook make mocha skip this one (teardown.ts)
  onTeardown('reliability targets', stopSharedTargets)
}
