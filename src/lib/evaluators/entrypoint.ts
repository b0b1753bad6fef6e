/**
 * The evaluator inside a function pod: whatever image the call names, it runs the one
 * entrypoint the wrapper server was started with (the image's own ENTRYPOINT/CMD).
 *
 * Differences from Porch's wrapper, on purpose:
 *   - a non-zero exit reports the exit code, the error results and the stderr tail, in the
 *     message and in the fnr-failure-bin trailer (upstream gives only text);
 *   - exit 0 with error-severity results succeeds (as upstream) and the results are also sent
 *     in the fnr-failure-bin trailer, so the caller can see them without parsing;
 *   - the output is checked cheaply (no YAML parse on the success path unless it has results).
 */
import {FnrError} from '../errors.js'
import {silentLogger, type Logger} from '../log.js'
import {functionFailedError} from '../process/failure.js'
import {errorResults, readResults} from '../process/results.js'
import {runFunctionProcess} from '../process/run.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from './evaluator.js'

export interface EntrypointEvaluatorOptions {
  entrypoint: readonly string[]
  maxOutputBytes: number
  logger?: Logger
  /** Environment for the function; default: the wrapper's own (the container's ENV). */
  env?: NodeJS.ProcessEnv
  cwd?: string
}

const RESOURCE_LIST_KIND = /(^|[\n{,])\s*["']?kind["']?\s*:\s*["']?ResourceList\b/

export function looksLikeResourceList(output: Buffer): boolean {
  const text = output.toString('utf8')
  return text.trim() === '' || RESOURCE_LIST_KIND.test(text)
}

export class EntrypointEvaluator implements Evaluator {
  readonly name = 'wrapper'
  private readonly logger: Logger

  constructor(private readonly options: EntrypointEvaluatorOptions) {
    if (options.entrypoint.length === 0 || options.entrypoint[0]!.trim() === '') {
      throw new FnrError('Config', 'no function entrypoint: pass the function\'s command after "--" (e.g. wrapper-server -- /usr/local/bin/function)')
    }
    this.logger = options.logger ?? silentLogger
  }

  async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
    const [command, ...args] = this.options.entrypoint
    const result = await runFunctionProcess({
      command: command!,
      args,
      input: request.resourceList,
      env: this.options.env ?? process.env,
      cwd: this.options.cwd,
      deadline: request.deadline,
      signal: request.signal,
      maxStdoutBytes: this.options.maxOutputBytes,
      label: request.image,
    })
    if (result.exitCode !== 0) throw await functionFailedError(request.image, result)
    if (!looksLikeResourceList(result.stdout)) {
      const stderr = result.stderr.toString('utf8').trim()
      throw new FnrError(
        'FunctionFailed',
        `the output of function ${JSON.stringify(request.image)} is not a ResourceList${stderr ? `; stderr: ${stderr.slice(-1024)}` : ''}`,
      )
    }
    const errors = errorResults(await readResults(result.stdout))
    if (errors.length > 0) this.logger.warn('function succeeded with error results', {image: request.image, errorResults: errors.length})
    this.logger.debug('function finished', {image: request.image, stdoutBytes: result.stdout.length, ms: Math.round(result.durationMs)})
    return {resourceList: result.stdout, log: result.stderr, evaluator: this.name, errorResults: errors}
  }

  async close(): Promise<void> {}
}
