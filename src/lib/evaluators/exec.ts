/**
 * The exec evaluator: runs a local binary mapped from the image name by the exec config.
 * Unknown images are NotFound (so the multi evaluator can try the pod runtime).
 */
import {FnrError} from '../errors.js'
import type {ExecConfig} from '../config/exec-config.js'
// Type only: `fnr eval` bundles this module, and log.ts would bring pino into it.
import type {Logger} from '../log.js'
import {emptyOutputError, functionFailedError} from '../process/failure.js'
import {execEnvironment, runFunctionProcess} from '../process/run.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from './evaluator.js'
import type {KnowsImages} from './multi.js'

export interface ExecEvaluatorOptions {
  config: ExecConfig
  /** stdout above this is cut off and the call ends ResourceExhausted. */
  maxOutputBytes: number
  logger?: Logger
  /** Runner environment variables passed on to functions besides the proxy variables (--exec-env). */
  passEnv?: readonly string[]
}

export class ExecEvaluator implements Evaluator, KnowsImages {
  readonly name = 'exec'
  private readonly config: ExecConfig
  private readonly maxOutputBytes: number
  private readonly logger: Logger | undefined
  private readonly env: NodeJS.ProcessEnv

  constructor(options: ExecEvaluatorOptions) {
    this.config = options.config
    this.maxOutputBytes = options.maxOutputBytes
    this.logger = options.logger
    this.env = execEnvironment(options.passEnv)
  }

  /** True when the exec config maps the image to a binary (else evaluate() is NotFound). */
  knows(image: string): boolean {
    return this.config.lookup(image) !== undefined
  }

  /** The binary that would run for an image, if any. */
  binaryFor(image: string): string | undefined {
    return this.config.lookup(image)?.binary
  }

  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    const fn = this.config.lookup(request.image)
    if (!fn) throw new FnrError('NotFound', `function ${JSON.stringify(request.image)} not found`)
    const result = await runFunctionProcess({
      command: fn.binary,
      input: request.resourceList,
      env: this.env,
      cwd: this.config.functionsDir || undefined,
      deadline: request.deadline,
      signal: request.signal,
      maxStdoutBytes: this.maxOutputBytes,
      label: request.image,
    })
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
    return {resourceList: result.stdout, log: result.stderr, evaluator: this.name}
  }

  async close(): Promise<void> {}
}
