/**
 * `fnr test --runner HOST:PORT`: one case's evaluation through a running function runner (`fnr
 * serve`, or Porch's) over gRPC, so CI can test the image it ships through the runtime that will
 * run it (e.g. fnr serve's pod runtime). The case goes through runEval (eval.ts), so it is read,
 * wrapped and written back exactly as `fnr eval` does; only the function call differs:
 *
 * - success: resource_list is the function's stdout, log its stderr, exit code 0;
 * - a function failure (gRPC INTERNAL): fnr's runner sends the exit code, results and stderr tail
 *   (its last 1 KiB, trailing white space cut; a newline is put back) in its fnr-failure-bin
 *   trailer; Porch's runner sends only a message, which is then the stderr, and the exit code is 1
 *   (the wrapper does not say which it was);
 * - anything else (unknown image, runner unreachable, deadline) is an error of the case's run, as
 *   for `fnr eval`.
 */
import * as grpc from '@grpc/grpc-js'

import {readConfigFile} from '../read-file.js'
import {FnrError} from '../errors.js'
import {runEval, type EvalIO, type EvalOptions, type RunOutcome} from '../eval.js'
import {EvaluatorClient} from '../grpc/client.js'

export interface RunnerTarget {
  /** HOST:PORT of the runner. */
  address: string
  /** PEM CA bundle: dial with TLS, trusting it (default plaintext, as porch-server dials). */
  caFile?: string
}

/** One client per run, shared by its cases (one HTTP/2 connection). */
export async function connectRunner(target: RunnerTarget, maxMessageSize: number): Promise<EvaluatorClient> {
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:/\s]+):\d{1,5}$/.test(target.address)) throw new FnrError('Usage', `--runner must be HOST:PORT, got ${JSON.stringify(target.address)}`)
  let credentials: grpc.ChannelCredentials | undefined
  if (target.caFile) {
    const ca = await readConfigFile(target.caFile, {label: `--runner-ca-file ${target.caFile} cannot be read`})
    credentials = grpc.credentials.createSsl(ca)
  }
  return new EvaluatorClient(target.address, {maxMessageSize, ...(credentials ? {credentials} : {})})
}

/**
 * One call through the runner as a FunctionRunner outcome. A function failure (INTERNAL with fnr's
 * failure trailer, or Porch's bare message) is an outcome with its exit code, results and stderr;
 * anything else is an error of the case's run.
 */
export async function callRunner(client: EvaluatorClient, image: string, input: Buffer, timeoutMs: number, signal?: AbortSignal): Promise<RunOutcome> {
  const started = performance.now()
  try {
    const res = await client.evaluate(image, input, {...(timeoutMs > 0 ? {deadline: Date.now() + timeoutMs} : {}), signal})
    return {stdout: res.resourceList, stderr: res.log, exitCode: 0, durationMs: performance.now() - started}
  } catch (err) {
    if (!(err instanceof FnrError) || err.kind !== 'FunctionFailed') {
      if (err instanceof FnrError && err.kind === 'Unavailable') throw new FnrError('Unavailable', `function runner ${client.address}: ${err.message}`, {cause: err})
      throw err
    }
    const failure = err.details.failure
    return {
      stdout: Buffer.alloc(0),
      // The trailer's tail has its trailing white space cut: one newline is put back, as stderr lines end.
      stderr: Buffer.from(failure ? (failure.stderrTail ? `${failure.stderrTail}\n` : '') : `${err.message}\n`),
      exitCode: typeof failure?.exitCode === 'number' ? failure.exitCode : 1,
      durationMs: performance.now() - started,
      results: failure?.results ?? [],
    }
  }
}

/** `fnr eval` of an image (options.image) through the runner: runEval with the call made over gRPC. */
export async function runEvalRemote(options: EvalOptions, io: EvalIO, client: EvaluatorClient): Promise<void> {
  const image = options.image
  if (image === undefined || image.trim() === '') throw new FnrError('Usage', '--runner evaluates images: give --image, or an image in the case\'s .expected/config.yaml')
  await runEval(options, io, (_label, input) => callRunner(client, image, input, options.timeoutMs, options.signal))
}
