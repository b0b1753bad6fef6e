/**
 * `fnr eval`: one evaluation of a function on a ResourceList, like `kpt fn eval`.
 *
 *   input     stdin (a ResourceList, or plain KRM YAML documents) or --input files/directories
 *             (read like `kpt fn source`: path and index annotations)
 *   function  --exec "PATH ARGS" (no shell) or --image (resolved through the exec config)
 *   config    --fn-config FILE, or `-- key=value…` (kpt's function-input ConfigMap); a
 *             ResourceList on stdin keeps its own functionConfig when neither is given
 *   output    stdout: the wrapped ResourceList (what `kpt fn sink` reads); "unwrap": plain YAML
 *             documents; a directory: files written like `kpt fn sink` (the directory must not
 *             exist), or, when it is the one --input directory, written back in place
 *
 * Progress and results go to stderr in kpt's format; stdout carries only data. A function that
 * exits non-zero writes nothing and fails the command (exit 1). Error-severity results with
 * exit 0 pass, as in kpt, unless failOnErrorResults is set.
 *
 * runEval returns an EvalReport (kpt's FunctionResultList, what --results-dir writes, and where
 * the files went): `fnr eval --json` prints it. A failed function's FunctionResultList travels
 * with its error (details.report). --json needs the resources to go to a directory: with stdout
 * or unwrap, stdout is the resources and nothing else.
 */
import {realpath} from 'node:fs/promises'
import path from 'node:path'

import {parse as shellParse} from 'shell-quote'
import type {YAMLMap} from 'yaml'

import {loadExecConfig} from './config/exec-config.js'
import type {ContainerCall, ContainerOptions} from './container/index.js'
import type {ExecPaths} from './config/embedded.js'
import {displayImage} from './config/image-ref.js'
import {FnrError} from './errors.js'
import {ExecEvaluator} from './evaluators/exec.js'
import {functionFailedError} from './process/failure.js'
import {ProcessLauncher} from './process/launcher.js'
import {runFunctionProcess, type FunctionProcessResult} from './process/run.js'
import * as rl from './resourcelist/index.js'
import {selectResources, type Selector} from './resourcelist/select.js'
import {readStdin} from './stdin.js'
import {checkSavedConfigPath, saveFunctionToKptfile, type SaveType} from './save-function.js'

export interface EvalOptions {
  /** Files or directories; empty (or ["-"]) means stdin. */
  inputs: string[]
  image?: string
  exec?: string
  fnConfigPath?: string
  fnConfigArgs: string[]
  /** "stdout", "unwrap" or a directory. */
  output: string
  resultsDir?: string
  timeoutMs: number
  maxOutputBytes: number
  failOnErrorResults: boolean
  truncateOutput: boolean
  execPaths: ExecPaths & {defaultImagePrefix: string}
  /** Aborting (SIGINT/SIGTERM, src/cli/interrupt.ts) kills the function's process group; nothing is written. */
  signal?: AbortSignal
  /** --runner HOST:PORT: run --image through a function runner over gRPC. */
  runnerAddress?: string
  /**
   * --env KEY=VALUE (or KEY: fnr's own value), added to the function's environment: fnr's whole
   * environment for --exec (as kpt), the exec runtime's minimal one for --image. Not with --runner.
   */
  env?: string[]
  /** --match-* / --exclude-*: send only the selected resources (merged back like kpt). */
  selector?: Selector
  exclude?: Selector
  /**
   * --json: the command prints the EvalReport on stdout, so the resources must go to a directory
   * (in place or -o DIR); with output stdout or unwrap it is a usage error.
   */
  json?: boolean
  /**
   * --save with --type: after the function ran and its output was written, add it to DIR's
   * Kptfile pipeline (save-function.ts; dir "" when the input was not a DIR).
   */
  save?: {type: SaveType; dir: string}
  /**
   * kpt's container flags (--image-pull-policy, --network, --as-current-user, --mount; --env is
   * `env`), for an --image the exec config does not map, run in a container runtime (lib/container).
   */
  container?: Omit<ContainerOptions, 'env'>
}

/**
 * Runs the images the exec config does not map in a container runtime (lib/container, loaded on
 * first use): one per command run, so the runtime is chosen and each tag resolved once.
 */
export interface ImageContainers {
  run(image: string, label: string, input: Buffer, call: ContainerCall): Promise<FunctionProcessResult>
  close(): Promise<void>
}

/** ImageContainers for one command run; lib/container is loaded when the first image needs it. */
export function imageContainers(options: ContainerOptions, stderr: NodeJS.WritableStream): ImageContainers {
  let session: Promise<{run: ImageContainers['run']; close(): Promise<void>}> | undefined
  return {
    run: async (image, label, input, call) => {
      session ??= import('./container/index.js').then((m) => new m.ContainerSession(options, stderr))
      return (await session).run(image, label, input, call)
    },
    close: async () => {
      await session?.then(
        (s) => s.close(),
        () => {},
      )
    },
  }
}

/** Where the resources went. */
export interface EvalOutputReport {
  /** "stdout", "unwrap", or the directory written. */
  to: string
  /** The package was written back in place (DIR, or -o naming the one --input directory). */
  inPlace: boolean
  /** Files created or changed, left as they were, deleted (relative to `to`; empty for stdout and unwrap). */
  written: string[]
  unchanged: string[]
  deleted: string[]
}

/**
 * What one `fnr eval` did (`fnr eval --json`): the FunctionResultList kpt writes as results.yaml
 * (apiVersion, kind, metadata, exitCode, items: [{image | exec, exitCode, stderr?, results}]) and
 * fnr's `output`.
 */
export type EvalReport = rl.FunctionResultList & {output: EvalOutputReport}

export interface EvalIO {
  stdin: NodeJS.ReadableStream
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

/** What one run of the function gave: its output, log and exit code. */
export interface RunOutcome {
  stdout: Buffer
  stderr: Buffer
  exitCode: number
  durationMs: number
  /** Results of a failed run when they came separately (a runner's failure trailer), else read from stdout. */
  results?: rl.FunctionResult[]
}

/**
 * Runs the function on the wrapped input. Default: the local exec function or exec-config image
 * (runFunction); `fnr test --runner` passes one that calls a function runner over gRPC.
 */
export type FunctionRunner = (label: string, input: Buffer) => Promise<RunOutcome>

/** Splits an --exec string like kpt does (shell words, quotes) but never runs a shell. */
export function splitExec(exec: string): string[] {
  const words = shellParse(exec, (name) => `$${name}`)
  const out: string[] = []
  for (const w of words) {
    if (typeof w !== 'string') {
      throw new FnrError('Usage', `--exec ${JSON.stringify(exec)}: shell operators are not supported (fnr runs the command without a shell)`)
    }
    out.push(w)
  }
  if (out.length === 0) throw new FnrError('Usage', '--exec is empty')
  return out
}

async function readInput(options: EvalOptions, io: EvalIO): Promise<{list: rl.ResourceList; fromStdin: boolean; inPlaceDir?: string}> {
  const fromStdin = options.inputs.length === 0 || (options.inputs.length === 1 && options.inputs[0] === '-')
  if (fromStdin) {
    const bytes = await readStdin(io.stdin, options.signal)
    if (bytes.length === 0) throw new FnrError('InvalidArgument', 'stdin is empty: pipe a ResourceList (e.g. kpt fn source DIR) or use --input')
    return {list: await rl.parseResourceListInterruptible(bytes, {origin: 'stdin', signal: options.signal}), fromStdin}
  }
  if (options.inputs.includes('-')) throw new FnrError('Usage', '"-" (stdin) cannot be combined with other --input paths')
  // Not-KRM documents are refused once the function is named, as kpt does (evaluate).
  const list = await rl.readPackage(options.inputs, {signal: options.signal, requireKrm: false})
  return {list, fromStdin}
}

async function functionConfigFor(options: EvalOptions, list: rl.ResourceList): Promise<YAMLMap | null> {
  if (options.fnConfigPath && options.fnConfigArgs.length > 0) {
    throw new FnrError('Usage', 'function arguments can only be specified without function config file (--fn-config and "-- key=value" cannot be used together)')
  }
  if (options.fnConfigPath) return rl.readFunctionConfig(options.fnConfigPath)
  if (options.fnConfigArgs.length > 0) return rl.functionConfigFromArgs(options.fnConfigArgs, {evalOrder: true})
  const own = list.functionConfig
  if (own && typeof own === 'object' && 'items' in own) return own as YAMLMap
  return rl.functionConfigFromArgs([], {evalOrder: true})
}

/**
 * Runs the function of options locally: --exec, or --image through the exec config, else (given
 * `containers`) in a container runtime.
 */
export async function runFunction(
  options: Pick<EvalOptions, 'exec' | 'image' | 'timeoutMs' | 'maxOutputBytes' | 'execPaths' | 'signal' | 'env' | 'container'> & {containers?: ImageContainers; launcher: ProcessLauncher},
  label: string,
  input: Buffer,
): Promise<RunOutcome> {
  // --timeout 0 means no timeout.
  const deadline = options.timeoutMs > 0 ? Date.now() + options.timeoutMs : Number.POSITIVE_INFINITY
  if (options.exec !== undefined) {
    const [command, ...args] = splitExec(options.exec)
    // Like kpt: the exec function inherits the environment and runs in the current directory.
    const r = await runFunctionProcess({command: command!, args, input, env: execEnvironment(options.env), deadline, maxStdoutBytes: options.maxOutputBytes, label, signal: options.signal, launcher: options.launcher})
    if (r.exitCode === null) throw await functionFailedError(label, r)
    return {stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, durationMs: r.durationMs}
  }
  const config = await loadExecConfig({
    configPath: options.execPaths.configPath,
    functionsDir: options.execPaths.functionsDir,
    defaultImagePrefix: options.execPaths.defaultImagePrefix,
  })
  if (!config.lookup(options.image!)) {
    const notMapped = `function ${JSON.stringify(options.image)} is not in the exec config ${options.execPaths.configPath}`
    if (options.containers === undefined) throw new FnrError('NotFound', `${notMapped}; use --exec, or --config/--functions to map it`)
    return runInContainer({...options, containers: options.containers, deadline}, notMapped, label, input)
  }
  if ((options.container?.mounts ?? []).length > 0) {
    throw new FnrError('Usage', `--mount: the exec runtime runs ${JSON.stringify(options.image)} as the local binary the exec config maps it to, with no container to mount into; read the files from the function's own path instead`, {details: {commandLine: true}})
  }
  const {names, values} = splitEnv(options.env)
  const evaluator = new ExecEvaluator({config, maxOutputBytes: options.maxOutputBytes, passEnv: names, setEnv: values, launcher: options.launcher})
  const started = performance.now()
  try {
    const res = await evaluator.evaluate({image: options.image!, resourceList: input, deadline, signal: options.signal})
    return {stdout: res.resourceList, stderr: res.log, exitCode: 0, durationMs: performance.now() - started}
  } catch (err) {
    if (!(err instanceof FnrError)) throw err
    const failure = err.details.failure
    if (typeof failure?.exitCode !== 'number') throw err
    return {
      stdout: err.details.stdout ?? Buffer.alloc(0),
      stderr: err.details.stderr ?? Buffer.alloc(0),
      exitCode: failure.exitCode,
      durationMs: performance.now() - started,
    }
  }
}

/** An image the exec config does not map, run in a container runtime; `label` is its full name, as kpt resolves it. */
async function runInContainer(
  options: Pick<EvalOptions, 'maxOutputBytes' | 'signal'> & {containers: ImageContainers; deadline: number; launcher: ProcessLauncher},
  notMapped: string,
  label: string,
  input: Buffer,
): Promise<RunOutcome> {
  const started = performance.now()
  let r: FunctionProcessResult
  try {
    r = await options.containers.run(label, label, input, {deadline: options.deadline, signal: options.signal, maxOutputBytes: options.maxOutputBytes, launcher: options.launcher})
  } catch (err) {
    if (err instanceof FnrError && err.details.noRuntime) {
      // FNR_CONTAINER_RUNTIME=none, or no runtime works here: the exec config was the only way.
      const why = err.kind === 'NotFound' ? 'FNR_CONTAINER_RUNTIME is none' : err.message
      throw new FnrError(err.kind, `${notMapped}, and ${why}; use --exec, or --config/--functions to map it`, {cause: err, details: err.details})
    }
    throw err
  }
  if (r.exitCode === null) throw await functionFailedError(label, r)
  return {stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, durationMs: performance.now() - started}
}

async function sameDirectory(a: string, b: string): Promise<boolean> {
  try {
    return (await realpath(a)) === (await realpath(b))
  } catch {
    return false
  }
}

/** fnr's environment plus --env KEY=VALUE (KEY alone: fnr's own value, as docker -e KEY). */
function execEnvironment(extra: string[] | undefined): NodeJS.ProcessEnv {
  if (!extra || extra.length === 0) return process.env
  return {...process.env, ...splitEnv(extra).values}
}

/** --env entries: KEY alone (pass fnr's own value) and KEY=VALUE. */
function splitEnv(entries: readonly string[] | undefined): {names: string[]; values: Record<string, string>} {
  const names: string[] = []
  const values: Record<string, string> = {}
  for (const kv of entries ?? []) {
    const eq = kv.indexOf('=')
    if (eq === 0 || kv === '') throw new FnrError('Usage', `--env takes KEY=VALUE or KEY, got ${JSON.stringify(kv)}`)
    if (eq < 0) names.push(kv)
    else values[kv.slice(0, eq)] = kv.slice(eq + 1)
  }
  return {names, values}
}

export function isBlank(bytes: Buffer): boolean {
  for (const b of bytes) if (b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) return false
  return true
}

/** Results of a failed function: parsed when possible, never an error of their own. */
function resultsOfFailedRun(stdout: Buffer): rl.FunctionResult[] {
  try {
    return rl.readFunctionOutput(stdout).results
  } catch {
    return []
  }
}

/** runFunction for one eval: an --image the exec config does not map runs in a container runtime. */
function localRunner(options: EvalOptions, io: EvalIO): FunctionRunner {
  return async (label, input) => {
    const containers = options.image !== undefined ? imageContainers({...options.container, env: options.env}, io.stderr) : undefined
    // The command's own launcher (through the native helper when it is built, else directly); the
    // function is swept before eval reports.
    const launcher = ProcessLauncher.forCommand()
    try {
      return await runFunction({...options, containers, launcher}, label, input)
    } finally {
      await containers?.close()
      await launcher.close()
    }
  }
}

export async function runEval(options: EvalOptions, io: EvalIO, runner?: FunctionRunner): Promise<EvalReport> {
  try {
    // --runner is served by commands/eval.ts (bin/run.js sends it there), so this module and the
    // fast path's bundle never load gRPC.
    if (!runner && options.runnerAddress !== undefined) throw new FnrError('Internal', '--runner needs the function runner client (run without FNR fast path)')
    return await evaluate(options, io, runner)
  } catch (err) {
    // An interrupt is reported as such, whatever it broke off.
    if (options.signal?.aborted && options.signal.reason instanceof FnrError) throw options.signal.reason
    throw err
  }
}

function checkUsage(options: EvalOptions): void {
  // kpt's words when neither is given.
  if (options.image === undefined && options.exec === undefined) throw new FnrError('Usage', 'must specify --image or --exec')
  if (options.image !== undefined && options.exec !== undefined) throw new FnrError('Usage', 'give exactly one of --image or --exec')
  if (options.save && options.save.dir !== '') checkSavedConfigPath(options.save.dir, options.fnConfigPath)
  if (options.json && ['stdout', 'unwrap'].includes(options.output)) {
    throw new FnrError(
      'Usage',
      `--json prints a report on stdout, where --output ${options.output} writes the resources: give the package as DIR (written in place) or --output DIR, or keep the ResourceList on stdout and read the results from --results-dir`,
    )
  }
}

async function evaluate(options: EvalOptions, io: EvalIO, runner?: FunctionRunner): Promise<EvalReport> {
  checkUsage(options)
  // Checked before any work, so a bad value is a usage error and nothing is printed first.
  if (options.image !== undefined && options.image.trim() === '') throw new FnrError('Usage', '--image is empty')
  if (options.exec !== undefined) splitExec(options.exec)
  // An image is named as kpt names it (a bare name with the default prefix); the exec config is asked with it as given.
  const label = options.image !== undefined ? displayImage(options.image, options.execPaths.defaultImagePrefix) : options.exec!
  // DIR (kpt's argument, the one input written in place) is checked as kpt checks it.
  if (options.inputs.length === 1 && options.inputs[0] === options.output) await rl.checkPackageArgument(options.inputs[0])
  const {list, fromStdin} = await readInput(options, io)
  const inPlace = !['stdout', 'unwrap'].includes(options.output) && !fromStdin && options.inputs.length === 1 && (await sameDirectory(options.inputs[0]!, options.output))
  // The output is checked before the function runs (kpt checks -o DIR only afterwards).
  if (!['stdout', 'unwrap'].includes(options.output) && !inPlace) await rl.checkSinkTarget(options.output)
  const functionConfig = await functionConfigFor(options, list)
  const previousPaths = rl.sourcePathsOf(list.items)
  const selection = selectResources(list.items, options.selector ? [options.selector] : [], options.exclude ? [options.exclude] : [])
  io.stderr.write(`[RUNNING] ${JSON.stringify(label)}${selection.filtered ? ` on ${selection.selected.length} resource(s)` : ''}\n`)
  let input: rl.FunctionInput
  try {
    // Items the function gives back unchanged are kept rather than parsed again, the changed ones
    // are parsed one at a time (resourcelist/reuse.ts), as render reads its steps.
    input = await rl.buildFunctionInputInterruptible(selection.selected, {functionConfig, keepItemTexts: true}, options.signal)
  } catch (err) {
    // A resource that is not KRM fails the function's run, as in kpt: [FAIL] in 0s, then the reason.
    if (!options.signal?.aborted) io.stderr.write(`[FAIL] ${JSON.stringify(label)} in ${rl.formatKptDuration(0)}\n`)
    throw err
  }
  const run = await (runner ?? localRunner(options, io))(label, Buffer.from(input.text))
  const stderrText = options.image !== undefined ? rl.containerStderr(run.stderr.toString('utf8')) : run.stderr.toString('utf8')
  const record: rl.FunctionRunRecord = {
    ...(options.image ? {image: label} : {exec: options.exec}),
    exitCode: run.exitCode,
    ...(stderrText ? {stderr: stderrText} : {}),
  }
  const blockOptions = {truncate: options.truncateOutput}

  if (run.exitCode !== 0) {
    const results = run.results ?? resultsOfFailedRun(run.stdout)
    io.stderr.write(`[FAIL] ${JSON.stringify(label)} in ${rl.formatKptDuration(run.durationMs)}\n`)
    io.stderr.write(rl.formatResultsBlock(results, blockOptions))
    io.stderr.write(rl.formatStderrBlock(stderrText, blockOptions))
    io.stderr.write(`  Exit code: ${run.exitCode}\n\n`)
    const report = await writeResults(options, io, {...record, results}, 1)
    throw new FnrError('FunctionFailed', `function ${JSON.stringify(label)} exited with code ${run.exitCode}; nothing was written`, {details: {report, consoleShown: true}})
  }

  // Never empty: exit 0 with nothing on stdout would otherwise delete every resource (kpt does).
  // Invalid output fails like kpt: [FAIL], results.yaml, then the reason.
  let output: rl.FunctionOutput
  try {
    if (isBlank(run.stdout)) {
      throw new FnrError(
        'FunctionFailed',
        `function ${JSON.stringify(label)} exited 0 but wrote ${run.stdout.length === 0 ? 'nothing' : 'only white space'} to stdout (a function must write a ResourceList; \`items: []\` deletes everything); nothing was written`,
      )
    }
    output = await rl.readFunctionOutputInterruptible(run.stdout, input, options.signal, {reuseUnchanged: true})
    if (selection.filtered) output.list.items = selection.merge(output.list.items)
  } catch (err) {
    if (options.signal?.aborted) throw err
    io.stderr.write(`[FAIL] ${JSON.stringify(label)} in ${rl.formatKptDuration(run.durationMs)}\n`)
    io.stderr.write(rl.formatStderrBlock(stderrText, blockOptions))
    // One blank line, writeResults's when there is a results dir.
    if (!options.resultsDir) io.stderr.write('\n')
    // kpt records exitCode 1 for the function whose output it could not use.
    const report = await writeResults(options, io, {...record, exitCode: 1, results: []}, 1)
    if (err instanceof FnrError && err.details.report === undefined) err.details.report = report
    throw err
  }
  io.stderr.write(`[PASS] ${JSON.stringify(label)} in ${rl.formatKptDuration(run.durationMs)}\n`)
  io.stderr.write(rl.formatResultsBlock(output.results, blockOptions))
  io.stderr.write(rl.formatStderrBlock(stderrText, blockOptions))
  const errorCount = rl.countErrorResults(output.results)
  const failing = options.failOnErrorResults && errorCount > 0
  const results = await writeResults(options, io, {...record, results: output.results}, failing ? 1 : 0)
  if (failing) {
    throw new FnrError('FunctionFailed', `function ${JSON.stringify(label)} reported ${errorCount} error result(s) (--fail-on-error-results); nothing was written`, {
      details: {report: results},
    })
  }

  if (options.signal?.aborted) throw options.signal.reason
  const written = await writeOutput(options, io, {list: output.list, inPlace, previousPaths})
  if (options.save) {
    const fn = {image: options.image, exec: options.exec, fnConfigPath: options.fnConfigPath, fnConfigArgs: options.fnConfigArgs, selector: options.selector, exclude: options.exclude}
    io.stderr.write(await saveFunctionToKptfile(options.save.dir, fn, options.save.type, options.signal))
  }
  return {...results, output: written}
}

/** The function's resources to stdout (wrapped or unwrapped), back into the package, or into a new directory. */
async function writeOutput(options: EvalOptions, io: EvalIO, out: {list: rl.ResourceList; inPlace: boolean; previousPaths: Iterable<string>}): Promise<EvalOutputReport> {
  const {list, inPlace, previousPaths} = out
  const none = {written: [], unchanged: [], deleted: []}
  if (options.output === 'stdout') {
    io.stdout.write(rl.wrapForStdout(list))
    return {to: options.output, inPlace, ...none}
  }
  if (options.output === 'unwrap') {
    io.stdout.write(rl.unwrapToYaml(list))
    return {to: options.output, inPlace, ...none}
  }
  if (inPlace) {
    const report = await rl.writePackage(list.items, options.output, {previousPaths, signal: options.signal})
    io.stderr.write(`wrote ${report.written.length} file(s), deleted ${report.deleted.length}, unchanged ${report.unchanged.length} in ${options.output}\n`)
    return {to: options.output, inPlace, written: report.written, unchanged: report.unchanged, deleted: report.deleted}
  }
  const report = await rl.sinkToDirectory(list, options.output, options.signal)
  io.stderr.write(`wrote ${report.written.length} file(s) to ${options.output}\n`)
  return {to: options.output, inPlace, written: report.written, unchanged: report.unchanged, deleted: report.deleted}
}

/**
 * The run's FunctionResultList, written as results.yaml to --results-dir when given (kpt prints a
 * blank line before "For complete results").
 */
async function writeResults(options: EvalOptions, io: EvalIO, record: rl.FunctionRunRecord, exitCode: number): Promise<rl.FunctionResultList> {
  const list = rl.buildFunctionResultList([record], exitCode)
  if (!options.resultsDir) return list
  io.stderr.write('\n')
  await rl.writeResultsFile(options.resultsDir, list)
  io.stderr.write(`For complete results, see ${path.join(options.resultsDir, 'results.yaml')}\n`)
  return list
}
