/**
 * `fnr test --runner HOST:PORT`: one case's evaluation through a running function runner (`fnr
 * serve`, or Porch's) over gRPC, so CI can test the image it ships through the runtime that will
 * run it (e.g. fnr serve's pod runtime). The case is read, wrapped and written back exactly as
 * `fnr eval` does (the same resourcelist helpers, the same kpt console lines and results.yaml);
 * only the function call differs:
 *
 * - success: resource_list is the function's stdout, log its stderr, exit code 0;
 * - a function failure (gRPC INTERNAL): fnr's runner sends the exit code, results and stderr tail
 *   (its last 1 KiB, trailing white space cut; a newline is put back) in its fnr-failure-bin
 *   trailer; Porch's runner sends only a message, which is then the stderr, and the exit code is 1
 *   (the wrapper does not say which it was);
 * - anything else (unknown image, runner unreachable, deadline) is an error of the case's run, as
 *   for `fnr eval`.
 */
import path from 'node:path'
import {buffer} from 'node:stream/consumers'

import * as grpc from '@grpc/grpc-js'
import type {YAMLMap} from 'yaml'

import {readConfigFile} from '../config/read-file.js'
import {FnrError} from '../errors.js'
import type {EvalIO, EvalOptions} from '../eval.js'
import {EvaluatorClient} from '../grpc/client.js'
import * as rl from '../resourcelist/index.js'

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

interface RemoteOutcome {
  stdout: Buffer
  stderr: string
  exitCode: number
  durationMs: number
  /** Results of a failed run, from the failure trailer. */
  results?: rl.FunctionResult[]
}

async function call(client: EvaluatorClient, image: string, input: Buffer, timeoutMs: number): Promise<RemoteOutcome> {
  const started = performance.now()
  try {
    const res = await client.evaluate(image, input, {deadline: Date.now() + timeoutMs})
    return {stdout: res.resourceList, stderr: res.log.toString('utf8'), exitCode: 0, durationMs: performance.now() - started}
  } catch (err) {
    if (!(err instanceof FnrError) || err.kind !== 'FunctionFailed') {
      if (err instanceof FnrError && err.kind === 'Unavailable') throw new FnrError('Unavailable', `function runner ${client.address}: ${err.message}`, {cause: err})
      throw err
    }
    const failure = err.details.failure as {exitCode?: number | null; results?: rl.FunctionResult[]; stderrTail?: string} | undefined
    return {
      stdout: Buffer.alloc(0),
      // The trailer's tail has its trailing white space cut: one newline is put back, as stderr lines end.
      stderr: failure ? (failure.stderrTail ? `${failure.stderrTail}\n` : '') : `${err.message}\n`,
      exitCode: typeof failure?.exitCode === 'number' ? failure.exitCode : 1,
      durationMs: performance.now() - started,
      results: failure?.results ?? [],
    }
  }
}

async function functionConfigFor(options: EvalOptions, list: rl.ResourceList): Promise<YAMLMap | null> {
  if (options.fnConfigPath && options.fnConfigArgs.length > 0) throw new FnrError('Usage', '--fn-config and "-- key=value" arguments cannot be used together')
  if (options.fnConfigPath) return rl.readFunctionConfig(options.fnConfigPath)
  if (options.fnConfigArgs.length > 0) return rl.functionConfigFromArgs(options.fnConfigArgs)
  const own = list.functionConfig
  if (own && typeof own === 'object' && 'items' in own) return own as YAMLMap
  return rl.functionConfigFromArgs([])
}

/** `fnr eval` of an image (options.image) through the runner; same output, console and results as runEval. */
export async function runEvalRemote(options: EvalOptions, io: EvalIO, client: EvaluatorClient): Promise<void> {
  const image = options.image
  if (image === undefined || image.trim() === '') throw new FnrError('Usage', '--runner evaluates images: give --image, or an image in the case\'s .expected/config.yaml')
  const fromStdin = options.inputs.length === 0
  let list: rl.ResourceList
  if (fromStdin) {
    const bytes = await buffer(io.stdin)
    if (bytes.length === 0) throw new FnrError('InvalidArgument', 'the ResourceList is empty')
    list = rl.parseResourceList(bytes, {origin: 'stdin'})
  } else {
    list = await rl.readPackage(options.inputs)
  }
  const functionConfig = await functionConfigFor(options, list)
  const previousPaths = rl.sourcePathsOf(list.items)
  const input = rl.buildFunctionInput(list.items, {functionConfig})

  io.stderr.write(`[RUNNING] ${JSON.stringify(image)}\n`)
  const run = await call(client, image, Buffer.from(input.text), options.timeoutMs)
  const record: rl.FunctionRunRecord = {image, exitCode: run.exitCode, ...(run.stderr ? {stderr: run.stderr} : {})}
  const blockOptions = {truncate: options.truncateOutput}
  if (run.exitCode !== 0) {
    const results = run.results ?? []
    io.stderr.write(`[FAIL] ${JSON.stringify(image)} in ${rl.formatKptDuration(run.durationMs)}\n`)
    io.stderr.write(rl.formatResultsBlock(results, blockOptions))
    io.stderr.write(rl.formatStderrBlock(run.stderr, blockOptions))
    io.stderr.write(`  Exit code: ${run.exitCode}\n\n`)
    await writeResults(options, io, {...record, results}, 1)
    throw new FnrError('FunctionFailed', `function ${JSON.stringify(image)} exited with code ${run.exitCode}; nothing was written`)
  }
  const output = rl.readFunctionOutput(run.stdout, input)
  io.stderr.write(`[PASS] ${JSON.stringify(image)} in ${rl.formatKptDuration(run.durationMs)}\n`)
  io.stderr.write(rl.formatResultsBlock(output.results, blockOptions))
  io.stderr.write(rl.formatStderrBlock(run.stderr, blockOptions))
  await writeResults(options, io, {...record, results: output.results}, 0)
  if (options.output === 'stdout') io.stdout.write(rl.wrapForStdout(output.list))
  else {
    const report = await rl.writePackage(output.list.items, options.output, {previousPaths})
    io.stderr.write(`wrote ${report.written.length} file(s), deleted ${report.deleted.length}, unchanged ${report.unchanged.length} in ${options.output}\n`)
  }
}

async function writeResults(options: EvalOptions, io: EvalIO, record: rl.FunctionRunRecord, exitCode: number): Promise<void> {
  if (!options.resultsDir) return
  await rl.writeResultsFile(options.resultsDir, rl.buildFunctionResultList([record], exitCode))
  io.stderr.write(`For complete results, see ${path.join(options.resultsDir, 'results.yaml')}\n`)
}
