/**
 * In-process wrapper servers on loopback, for test/wrapper/evaluate.test.ts and
 * test/wrapper/evaluate-refusals.test.ts.
 */
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {startWrapperServer, type RunningWrapper} from '../../src/lib/wrapper.js'
import {SAMPLE_RL} from './tmp.js'

/** The wrappers' default max request body size. */
export const MAX = 1024 * 1024

/** One in-process wrapper per entrypoint, on 127.0.0.1 and a free port. */
export class Wrappers {
  private running: RunningWrapper[] = []
  private clients: EvaluatorClient[] = []

  async start(entrypoint: string[], maxRequestBodySize = MAX): Promise<{wrapper: RunningWrapper; client: EvaluatorClient}> {
    const wrapper = await startWrapperServer({port: 0, host: '127.0.0.1', maxRequestBodySize, entrypoint, gracePeriodMs: 2000}, silentLogger, false)
    this.running.push(wrapper)
    // The client allows more than the server, so the server's limits are what is tested.
    const client = new EvaluatorClient(`127.0.0.1:${wrapper.port}`, {maxMessageSize: 16 * 1024 * 1024})
    this.clients.push(client)
    return {wrapper, client}
  }

  /** Starts a wrapper for `executable` (no arguments) and evaluates `input` through it once. */
  async call(executable: string, input: Buffer = SAMPLE_RL, options: {deadline?: number; image?: string} = {}): ReturnType<EvaluatorClient['evaluateRaw']> {
    const {client} = await this.start([executable])
    return client.evaluateRaw(options.image ?? 'example.com/fn:v1', input, {deadline: options.deadline})
  }

  async stopAll(): Promise<void> {
    for (const c of this.clients.splice(0)) c.close()
    await Promise.all(this.running.splice(0).map((w) => w.stop()))
  }
}
