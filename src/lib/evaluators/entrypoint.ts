/**
 * The evaluator inside a function pod: whatever image the call names, it runs the one
 * entrypoint the wrapper server was started with (the image's own ENTRYPOINT/CMD).
 *
 * Differences from Porch's wrapper, on purpose:
 *   - a non-zero exit reports the exit code, the error results and the stderr tail, in the
 *     message and in the fnr-failure-bin trailer (upstream gives only text);
 *   - exit 0 with error-severity results succeeds (as upstream) and the results are also sent
 *     in the fnr-failure-bin trailer, so the caller can see them without parsing;
 *   - the output is checked cheaply (no YAML parse on the success path unless it has results);
 *   - exit 0 with empty or whitespace-only stdout is an error (FunctionFailed, gRPC INTERNAL as
 *     upstream's other output errors): a client that writes an empty ResourceList back deletes
 *     the whole package.
 */
import {FnrError} from '../errors.js'
import {silentLogger, type Logger} from '../telemetry/log.js'
import {emptyOutputError, functionFailedError} from '../process/failure.js'
import {errorResults, readResults} from '../process/results.js'
import {runFunctionProcess} from '../process/run.js'
import type {ProcessLauncher} from '../process/launcher.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from '../evaluator.js'

export interface EntrypointEvaluatorOptions {
  entrypoint: readonly string[]
  maxOutputBytes: number
  logger?: Logger
  /** Environment for the function; default: the wrapper's own (the container's ENV). */
  env?: NodeJS.ProcessEnv
  cwd?: string
  /** Starts the entrypoint and keeps its calls (process/launcher.ts): the wrapper server's. */
  launcher: ProcessLauncher
}

/**
 * `kind: ResourceList` (key and value optionally quoted) after only whitespace since the start
 * of the text, a line, `{` or `,`. Found by a literal search for each `kind` and a look back
 * over the whitespace in front of it, so the time is linear in the output: the former single
 * regex, `(^|[\n{,])\s*…kind…`, retried `\s*` from every line break of a blank run and took
 * 9.5 s on 100 KB of output with a long run of blank lines.
 */
export function looksLikeResourceList(output: Buffer): boolean {
  return findResourceListKind(output.toString('utf8'))
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0b || c === 0x0c
}

function findResourceListKind(text: string): boolean {
  for (let at = text.indexOf('kind'); at >= 0; at = text.indexOf('kind', at + 4)) {
    let before = at - 1
    if (before >= 0 && (text[before] === '"' || text[before] === "'")) before--
    // The whitespace run in front of this `kind` ends at the previous `kind` at the latest, so
    // all look-backs together read each character at most once.
    while (before >= 0 && text[before] !== '\n' && isSpace(text.charCodeAt(before))) before--
    if (before >= 0 && text[before] !== '\n' && text[before] !== '{' && text[before] !== ',') continue
    // Forward: the whitespace read here ends before the next `kind`, so this is linear too.
    let after = at + 4
    if (text[after] === '"' || text[after] === "'") after++
    while (after < text.length && isSpace(text.charCodeAt(after))) after++
    if (text[after] !== ':') continue
    after++
    while (after < text.length && isSpace(text.charCodeAt(after))) after++
    if (text[after] === '"' || text[after] === "'") after++
    if (text.startsWith('ResourceList', after) && !/\w/.test(text[after + 12] ?? '')) return true
  }
  return false
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
      // the log keeps as much stderr as a response can carry (the server cuts it to what fits)
      maxStderrBytes: this.options.maxOutputBytes,
      label: request.image,
      launcher: this.options.launcher,
      stdoutHeadroom: request.outputHeadroom,
    })
    if (result.exitCode !== 0) throw await functionFailedError(request.image, result)
    const empty = emptyOutputError(request.image, result)
    if (empty) throw empty
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
    return {resourceList: result.stdout, log: result.stderr, logDropped: result.stderrDropped, evaluator: this.name, errorResults: errors}
  }

  async close(): Promise<void> {}
}
