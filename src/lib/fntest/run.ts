/**
 * `fnr test`: running the cases. Each case runs on a scratch copy of its directory (without
 * `.expected/`), with stdout and stderr captured; then the copy, the results and the exit code are
 * compared with `.expected/`, as kpt's e2e runner compares them.
 *
 * - package case: `fnr eval COPY --results-dir RES [fn] [config]` in place (as kpt's runner runs
 *   `kpt fn eval DIR`), or `fnr render COPY` (testType render); with an `out/` directory in the case,
 *   `-o COPY/out` (kpt's out-of-place cases). Compared: the package files (the change is
 *   `.expected/diff.patch`), results.yaml, exit code, stderr, stdout.
 * - ResourceList case: `fnr eval --results-dir RES [fn] [config] < resourcelist.yaml`; compared:
 *   stdout, results.yaml, exit code, stderr.
 * - kpt's scripts (scripts.ts): `setup.sh` runs in the copy first (its changes count in the diff,
 *   as kpt commits the copy before it), `exec.sh` replaces the evaluation, `teardown.sh` runs
 *   after the comparison.
 *
 * A case that cannot run (invalid config, function not found, setup.sh failing) is reported as an
 * error and the others still run; `skip` and `runtimes` skip a case. `sequential` cases run one at
 * a time before the others; the rest run in parallel (a fixed number at a time); all are reported
 * in name order. Aborting (SIGINT/SIGTERM) kills what runs, marks those cases interrupted (no
 * comparison), and starts no more. `--update` rewrites the expectations that can be derived from
 * the run (diff.patch, resourcelist.yaml, results.yaml, config.yaml's exitCode); stdErr/stdErrRegEx
 * and timeouts cannot be updated.
 */
import {constants} from 'node:fs'
import {access, cp, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {Readable, Writable} from 'node:stream'

import {quote} from 'shell-quote'
import {isMap, parseDocument} from 'yaml'

import {loadExecConfig} from '../config/exec-config.js'
import {normaliseImage} from '../config/image-ref.js'
import {ConfigFileError} from '../read-file.js'
import type {ExecPaths} from '../config/embedded.js'
import {errorLine, FnrError, toFnrError} from '../errors.js'
import {runEval, splitExec, type EvalIO, type EvalOptions} from '../eval.js'
import {runRender} from '../render.js'
import type {EvaluatorClient} from '../grpc/client.js'
import {applyTreePatch, diffText, diffTrees, makeTreePatch, PatchError, readTree, type Tree} from './compare.js'
import {pathExists} from '../resourcelist/source.js'
import {discoverCases, EXPECTED_DIR, goRegExp, PULL_POLICIES, readCaseFile, RESOURCELIST_FILE, type TestCase} from './discover.js'
import {createKptShim, defaultFnrCommand, runCaseScript, type KptShim} from './scripts.js'

export interface FnTestOptions {
  /** Folders of cases (or case directories). */
  roots: string[]
  exec?: string
  image?: string
  execPaths: ExecPaths & {defaultImagePrefix: string}
  update: boolean
  filter: string[]
  concurrency: number
  /** Per-case timeout of the function (a case's config.yaml `timeout` wins). */
  timeoutMs: number
  maxOutputBytes: number
  /** --runner: evaluate every case's image through this function runner over gRPC (remote.ts). */
  runner?: import('./remote.js').RunnerTarget
  /** Aborting (SIGINT/SIGTERM) kills the running functions, starts no more cases, removes the scratch folders. */
  signal?: AbortSignal
  /**
   * kpt's --image-pull-policy (always, ifNotPresent, never; any case): accepted and checked. fnr's
   * local runtime pulls no images (the exec config maps them to binaries), so every policy runs
   * the same; a case's imagePullPolicy wins, as in kpt's runner.
   */
  imagePullPolicy?: string
  /** How exec.sh's `kpt` starts fnr: node and bin/run.js (default: this installation's). */
  fnrCommand?: string[]
}

/**
 * passed, failed (a mismatch), updated (--update rewrote expectations), skipped (kpt's skip or
 * runtimes), error (the case could not run: invalid layout or config, function not found,
 * setup.sh failed), interrupted (SIGINT/SIGTERM came while it ran).
 */
export type CaseStatus = 'passed' | 'failed' | 'updated' | 'skipped' | 'error' | 'interrupted'

export interface CaseProblem {
  message: string
  /** A unified diff, or the captured output that explains the message. */
  detail?: string
}

export interface CaseResult {
  name: string
  dir: string
  /** The function as run: the image, or the exec string. */
  function: string
  status: CaseStatus
  durationMs: number
  /** Exit code of the evaluation (what `fnr eval` would have exited with). */
  exitCode: number
  timedOut: boolean
  problems: CaseProblem[]
  /** Expectation files --update wrote or deleted (relative to the case). */
  updated: string[]
  /** Things in the case fnr ignored (kpt harness keys it does not use). */
  warnings?: string[]
}

export interface FnTestRun {
  cases: TestCase[]
  /** Results in case order; onResult sees each as soon as it and all before it are done. */
  results: CaseResult[]
  durationMs: number
  /** The signal (SIGINT, SIGTERM) that stopped the run; the cases not started have no result. */
  interrupted?: string
  /** Cases found but not started because the run was interrupted. */
  notRun: number
}

class Collector extends Writable {
  private chunks: Buffer[] = []

  override _write(chunk: Buffer | string, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
    cb()
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8')
  }
}

interface CaseFunction {
  exec?: string
  image?: string
}

/**
 * Whether a case renders its package (kpt's `testType: render`, kpt's default) rather than
 * evaluating one function: when config.yaml says so, or says nothing and no function is named
 * (neither on the command line nor in config.yaml) for a package case.
 */
export function isRenderCase(c: TestCase, options: Pick<FnTestOptions, 'exec' | 'image'>): boolean {
  if (c.config.testType !== undefined) return c.config.testType === 'render'
  if (options.exec !== undefined || options.image !== undefined || c.config.image !== undefined || c.config.execPath !== undefined) return false
  return c.mode === 'package'
}

function functionFor(c: TestCase, options: FnTestOptions): CaseFunction {
  if (options.exec !== undefined) return {exec: options.exec}
  if (options.image !== undefined) return {image: options.image}
  if (c.config.image !== undefined) return {image: c.config.image}
  if (c.config.execPath !== undefined) return {exec: quote([path.resolve(c.expectedDir, c.config.execPath)])}
  throw new FnrError('Usage', `test case ${c.name} names no function: give --exec or --image, or image/execPath in its ${EXPECTED_DIR}/config.yaml`)
}

/** What a case runs: kpt's exec.sh, a render, or one function. */
function caseKind(c: TestCase, options: FnTestOptions): 'script' | 'render' | 'eval' {
  return c.scripts.exec ? 'script' : isRenderCase(c, options) ? 'render' : 'eval'
}

/** Why a case is skipped (kpt's skip, or runtimes not naming KPT_FN_RUNTIME, as kpt's e2e tests do), if it is. */
function skipReason(c: TestCase): string | undefined {
  if (c.config.skip) return `skip: true in ${EXPECTED_DIR}/config.yaml`
  const runtimes = c.config.runtimes
  if (runtimes && runtimes.length > 0) {
    const current = (process.env.KPT_FN_RUNTIME ?? '').toLowerCase()
    if (!runtimes.some((r) => r.toLowerCase() === current)) return `runtimes ${runtimes.join(', ')} in ${EXPECTED_DIR}/config.yaml does not include KPT_FN_RUNTIME (${current || 'unset'})`
  }
  return undefined
}

/**
 * Checks, before a case runs, that its function can: an exec string parses and names an
 * executable, an image is in the exec config. The problem is this case's error; the others run.
 */
class FunctionCheck {
  private config: Promise<import('../config/exec-config.js').ExecConfig> | undefined

  constructor(private readonly options: FnTestOptions) {}

  async problem(c: TestCase): Promise<string | undefined> {
    if (caseKind(c, this.options) !== 'eval') return undefined
    try {
      const fn = functionFor(c, this.options)
      if (fn.exec !== undefined && this.options.runner) {
        return `it runs an executable (--exec or execPath), but --runner evaluates images: give --image, or an image in its ${EXPECTED_DIR}/config.yaml`
      }
      if (fn.exec !== undefined) {
        const [command] = splitExec(fn.exec)
        if (command!.includes('/')) {
          try {
            await access(command!, constants.X_OK)
          } catch {
            return `--exec ${JSON.stringify(fn.exec)}: ${command} is not an executable file`
          }
        }
        return undefined
      }
      if (fn.image!.trim() === '') return 'the image is empty'
      // A runner knows its own images (a wrong one fails the case with the runner's message).
      if (this.options.runner) return undefined
      this.config ??= loadExecConfig({
        configPath: this.options.execPaths.configPath,
        functionsDir: this.options.execPaths.functionsDir,
        defaultImagePrefix: this.options.execPaths.defaultImagePrefix,
      })
      if (!(await this.config).lookup(fn.image!)) {
        return `function ${JSON.stringify(fn.image)} is not in the exec config ${this.options.execPaths.configPath}; map it with --config/--functions, or give --exec`
      }
      return undefined
    } catch (err) {
      if (err instanceof FnrError) return err.message
      throw err
    }
  }
}

/** The signal name an abort carries (src/cli/interrupt.ts puts it in the error's details). */
function signalName(signal: AbortSignal | undefined): string | undefined {
  if (!signal?.aborted) return undefined
  const reason: unknown = signal.reason
  const named = reason instanceof FnrError ? reason.details.interrupted : undefined
  return typeof named === 'string' ? named : 'abort'
}

/** Finds the cases and runs them; onResult is called in case order. */
export async function runFnTest(options: FnTestOptions, onResult: (r: CaseResult, index: number, total: number) => void = () => {}): Promise<FnTestRun> {
  if (options.exec !== undefined && options.image !== undefined) throw new FnrError('Usage', 'give --exec or --image, not both')
  if (options.exec !== undefined) splitExec(options.exec)
  if (options.imagePullPolicy !== undefined && !(PULL_POLICIES as readonly string[]).includes(options.imagePullPolicy.toLowerCase())) {
    throw new FnrError('Usage', `--image-pull-policy must be one of Always, IfNotPresent, Never, got ${JSON.stringify(options.imagePullPolicy)}`)
  }
  const cases = await discoverCases(options.roots, options.filter)
  const client = options.runner ? await (await import('./remote.js')).connectRunner(options.runner, options.maxOutputBytes) : undefined
  const shim = cases.some((c) => c.scripts.setup || c.scripts.exec || c.scripts.teardown)
    ? await createKptShim(options.fnrCommand ?? defaultFnrCommand(), options.execPaths)
    : undefined
  try {
    return await runCases(cases, options, onResult, {client, shim, check: new FunctionCheck(options)})
  } finally {
    client?.close()
    await shim?.remove()
  }
}

interface RunContext {
  client: EvaluatorClient | undefined
  shim: KptShim | undefined
  check: FunctionCheck
}

async function runCases(cases: TestCase[], options: FnTestOptions, onResult: (r: CaseResult, index: number, total: number) => void, ctx: RunContext): Promise<FnTestRun> {
  const started = performance.now()
  const results: Array<CaseResult | undefined> = new Array(cases.length)
  let emitted = 0
  const emit = (): void => {
    while (emitted < cases.length && results[emitted]) {
      onResult(results[emitted]!, emitted, cases.length)
      emitted++
    }
  }
  const one = async (i: number): Promise<void> => {
    results[i] = await runCase(cases[i]!, options, ctx.client, ctx)
    emit()
  }
  // kpt's sequential cases: one at a time, before the others.
  const sequential = cases.map((c, i) => (c.config.sequential ? i : -1)).filter((i) => i >= 0)
  for (const i of sequential) {
    if (options.signal?.aborted) break
    await one(i)
  }
  const parallel = cases.map((c, i) => (c.config.sequential ? -1 : i)).filter((i) => i >= 0)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < parallel.length && !options.signal?.aborted) await one(parallel[next++]!)
  }
  await Promise.all(Array.from({length: Math.max(1, Math.min(options.concurrency, parallel.length))}, worker))
  const done = results.filter((r): r is CaseResult => r !== undefined)
  // Interrupted: report what ran, in name order, even past a case that never started.
  if (done.length < cases.length) for (let i = emitted; i < cases.length; i++) if (results[i]) onResult(results[i]!, i, cases.length)
  const interrupted = signalName(options.signal)
  return {cases, results: done, durationMs: performance.now() - started, notRun: cases.length - done.length, ...(interrupted ? {interrupted} : {})}
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return (await readCaseFile(file)).toString('utf8')
  } catch (err) {
    if (err instanceof ConfigFileError && err.code === 'ENOENT') return undefined
    throw err
  }
}

/**
 * results.yaml with the function names made comparable: `image:` values as full references
 * (`set-namespace:v0.4.1` is `ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1`), `exec:`
 * commands by their file name (`./fn`, `fn` and `/abs/path/fn` are the same function), so an
 * expectation written on a laptop holds in CI.
 */
export function normaliseFunctionNames(resultsYaml: string, defaultImagePrefix: string): string {
  const unquote = (v: string): string => (/^(['"]).*\1$/.test(v) ? v.slice(1, -1) : v)
  return resultsYaml
    .replace(/^(\s*(?:- )?image: )(.+)$/gm, (_m, head: string, value: string) => `${head}${normaliseImage(unquote(value.trim()), defaultImagePrefix)}`)
    .replace(/^(\s*(?:- )?exec: )(.+)$/gm, (_m, head: string, value: string) => {
      const words = unquote(value.trim()).split(/\s+/)
      return `${head}${[path.basename(words[0]!), ...words.slice(1)].join(' ')}`
    })
}

/** The function names of `[RUNNING] "…"`, `[PASS] "…"`, `[FAIL] "…"` lines, spelled as in normaliseFunctionNames. */
export function normaliseConsoleNames(text: string, defaultImagePrefix: string): string {
  return text.replace(/^(\[(?:RUNNING|PASS|FAIL)\] )"([^"]+)"/gm, (_m, head: string, name: string) => {
    const first = name.split(/\s+/)[0]!
    const isPath = first.startsWith('.') || first.startsWith('/')
    return `${head}"${isPath ? [path.basename(first), ...name.split(/\s+/).slice(1)].join(' ') : normaliseImage(name, defaultImagePrefix)}"`
  })
}

/** kpt's e2e harness sanitises durations: "[PASS] "fn" in 1.2s" reads "in 0s". */
export function sanitizeConsole(stderr: string): string {
  return stderr.replace(/^(\[(?:PASS|FAIL)\] .*) in \S+$/gm, '$1 in 0s')
}

function tail(text: string, lines = 30): string {
  const all = text.replace(/\n$/, '').split('\n')
  return (all.length > lines ? [`…(${all.length - lines} line(s) before)`, ...all.slice(-lines)] : all).join('\n')
}

/** kpt's stripLines: each line (with its newline) removed wherever it occurs. */
function stripLines(text: string, lines: readonly string[] | undefined): string {
  let out = text
  for (const line of lines ?? []) out = out.split(`${line}\n`).join('')
  return out
}

/** A patch as kpt's diffStripRegEx compares it: matching lines dropped, index lines and hunk positions ignored. */
function normalisePatch(patch: string, strip: RegExp): string {
  return patch
    .trim()
    .split('\n')
    .filter((line) => !strip.test(line) && !/^index [0-9a-f]+\.\.[0-9a-f]+/.test(line))
    .map((line) => line.replace(/^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@.*$/, '@@ @@'))
    .join('\n')
}

interface EvaluateArgs {
  kind: 'render' | 'eval'
  c: TestCase
  options: FnTestOptions
  client: EvaluatorClient | undefined
  pkg: string
  resultsDir: string
  deadline: number
  timeoutMs: number
}

/** The case's `fnr render` or `fnr eval` (locally, or through --runner). */
async function evaluate({kind, c, options, client, pkg, resultsDir, deadline, timeoutMs}: EvaluateArgs, io: EvalIO): Promise<void> {
  const output = c.outOfPlace ? path.join(pkg, 'out') : c.mode === 'package' ? pkg : 'stdout'
  const remote = client ? await import('./remote.js') : undefined
  if (kind === 'render') {
    await runRender(
      {
        dir: pkg,
        allowExec: c.config.allowExec ?? false,
        output: c.outOfPlace ? output : '',
        resultsDir,
        timeoutMs: Math.max(1, deadline - Date.now()),
        maxOutputBytes: options.maxOutputBytes,
        truncateOutput: !c.config.disableOutputTruncate,
        execPaths: options.execPaths,
        ...(client && remote ? {imageRunner: (image: string, input: Buffer) => remote.callRunner(client, image, input, timeoutMs, options.signal)} : {}),
        signal: options.signal,
      },
      io,
    )
    return
  }
  const evalOptions: EvalOptions = {
    inputs: c.mode === 'package' ? [pkg] : [],
    ...functionFor(c, options),
    fnConfigPath: c.fnConfigPath,
    fnConfigArgs: c.config.args ?? [],
    output,
    resultsDir,
    timeoutMs: Math.max(1, deadline - Date.now()),
    maxOutputBytes: options.maxOutputBytes,
    failOnErrorResults: false,
    truncateOutput: !c.config.disableOutputTruncate,
    execPaths: options.execPaths,
    signal: options.signal,
  }
  if (client && remote) await remote.runEvalRemote(evalOptions, io, client)
  else await runEval(evalOptions, io)
}

/**
 * The package after the run against the input + `.expected/diff.patch` (applied, then compared
 * file by file); with kpt's diffStripRegEx, the two patches as text without the matching lines.
 * --update rewrites diff.patch instead of reporting.
 */
async function comparePackage(c: TestCase, options: FnTestOptions, trees: {before: Tree; after: Tree}, found: {problems: CaseProblem[]; updated: string[]}): Promise<void> {
  const {before, after} = trees
  const {problems, updated} = found
  const patchFile = path.join(c.expectedDir, 'diff.patch')
  const patchText = (await readOptional(patchFile)) ?? ''
  const actualPatch = makeTreePatch(before, after)
  let mismatch: CaseProblem | undefined
  if (c.config.diffStripRegEx === undefined) {
    try {
      const diff = diffTrees(applyTreePatch(before, patchText), after)
      if (diff !== '') mismatch = {message: `the package after the function differs from the input + ${EXPECTED_DIR}/diff.patch`, detail: diff}
    } catch (err) {
      if (!(err instanceof PatchError)) throw err
      mismatch = {message: `${EXPECTED_DIR}/diff.patch does not apply to the input: ${err.message}; the actual change is:`, detail: actualPatch || '(no change)'}
    }
  } else {
    const strip = goRegExp(c.config.diffStripRegEx)
    const expected = normalisePatch(patchText, strip)
    const actual = normalisePatch(actualPatch, strip)
    if (expected !== actual) {
      mismatch = {message: `the change differs from ${EXPECTED_DIR}/diff.patch (lines matching diffStripRegEx left out)`, detail: diffText('expected/diff.patch', 'actual/diff.patch', `${expected}\n`, `${actual}\n`)}
    }
  }
  if (!mismatch) return
  if (!options.update) {
    problems.push(mismatch)
    return
  }
  if (actualPatch === '') await rm(patchFile, {force: true})
  else await writeFile(patchFile, actualPatch)
  updated.push(`${EXPECTED_DIR}/diff.patch`)
}

/** Runs one case on a scratch copy and compares (and with --update, rewrites) its expectations. */
export async function runCase(c: TestCase, options: FnTestOptions, client?: EvaluatorClient, ctx?: Omit<RunContext, 'client'>): Promise<CaseResult> {
  const started = performance.now()
  const kind = caseKind(c, options)
  const problems: CaseProblem[] = []
  const updated: string[] = []
  const warnings = [...c.config.warnings]
  const timeoutMs = c.config.timeoutMs ?? options.timeoutMs
  let label = kind === 'script' ? 'exec.sh' : kind === 'render' ? 'render' : ''
  let exitCode = 0
  let timedOut = false
  let status: CaseStatus | undefined

  const finish = (): CaseResult => {
    const final: CaseStatus = status ?? (problems.length > 0 ? 'failed' : updated.length > 0 ? 'updated' : 'passed')
    return {name: c.name, dir: c.dir, function: label, status: final, durationMs: performance.now() - started, exitCode, timedOut, problems, updated, warnings}
  }
  const stop = (s: CaseStatus, message: string, detail?: string): CaseResult => {
    status = s
    problems.push({message, ...(detail ? {detail} : {})})
    return finish()
  }

  if (c.error !== undefined) return stop('error', c.error)
  if (kind === 'render' && c.config.testType === undefined && !(await pathExists(path.join(c.dir, 'Kptfile')))) {
    warnings.push('no testType, no function and no Kptfile: rendered, as kpt does by default; give --exec or --image to evaluate a function')
  }
  const skip = skipReason(c)
  if (skip) {
    status = 'skipped'
    warnings.push(skip)
    return finish()
  }
  if (kind === 'eval') {
    try {
      const fn = functionFor(c, options)
      label = fn.image ?? fn.exec!
    } catch (err) {
      if (err instanceof FnrError) return stop('error', err.message)
      throw err
    }
    const problem = await (ctx?.check ?? new FunctionCheck(options)).problem(c)
    if (problem !== undefined) return stop('error', `cannot run: ${problem}`)
  }
  if (options.signal?.aborted) return stop('interrupted', `interrupted by ${signalName(options.signal)} before it started`)
  const shim = ctx?.shim ?? (c.scripts.setup || c.scripts.exec || c.scripts.teardown ? await createKptShim(options.fnrCommand ?? defaultFnrCommand(), options.execPaths) : undefined)

  const work = await mkdtemp(path.join(os.tmpdir(), 'fnr-test-case-'))
  let keep = false
  try {
    // Named like the case directory, as kpt's runner names its copy (messages name the package).
    const base = path.basename(path.resolve(c.dir))
    const pkg = path.join(work, base === '' || base === '.' || base === 'results' ? 'pkg' : base)
    const resultsDir = path.join(work, 'results')
    const expectedAbs = path.resolve(c.expectedDir)
    const deadline = Date.now() + timeoutMs
    let before: Tree = new Map()
    let stdin: NodeJS.ReadableStream = Readable.from([])
    if (c.mode === 'package') {
      await cp(c.dir, pkg, {recursive: true, verbatimSymlinks: true, filter: (src) => path.resolve(src) !== expectedAbs})
      before = await readTree(pkg)
    } else {
      stdin = Readable.from([await readCaseFile(path.join(c.dir, RESOURCELIST_FILE))])
    }
    const scriptOptions = {cwd: pkg, shim: shim!, deadline, signal: options.signal, maxOutputBytes: options.maxOutputBytes}
    const interrupted = (): CaseResult => stop('interrupted', `interrupted by ${signalName(options.signal)}: what ran was killed, nothing was compared`)

    const stdout = new Collector()
    const stderr = new Collector()
    try {
      if (c.scripts.setup) {
        const r = await runCaseScript(c.scripts.setup, scriptOptions)
        if (r.exitCode !== 0) return stop('error', `${EXPECTED_DIR}/setup.sh failed (exit code ${r.exitCode})`, tail(`${r.stdout}${r.stderr}`))
      }
      if (kind === 'script') {
        const r = await runCaseScript(c.scripts.exec!, scriptOptions)
        stdout.write(r.stdout)
        stderr.write(r.stderr)
        exitCode = r.exitCode
      } else {
        await evaluate({kind, c, options, client, pkg, resultsDir, deadline, timeoutMs}, {stdin, stdout, stderr})
      }
    } catch (err) {
      if (options.signal?.aborted) return interrupted()
      const e = toFnrError(err)
      if (e.kind === 'DeadlineExceeded') {
        timedOut = true
        return stop('failed', `timed out after ${timeoutMs / 1000}s: ${kind === 'script' ? 'the script' : 'the function'} was killed`, tail(sanitizeConsole(stderr.text())))
      }
      stderr.write(errorLine(e))
      exitCode = e.exitCode
    }
    if (options.signal?.aborted) return interrupted()
    const consoleText = stripLines(sanitizeConsole(stderr.text()), c.config.stdErrStripLines).split(`${work}/`).join('')
    const stdoutText = stdout.text()

    // Exit code.
    if (exitCode !== c.config.exitCode) {
      if (options.update) {
        await updateExitCode(c, exitCode)
        updated.push(`${EXPECTED_DIR}/config.yaml`)
      } else {
        problems.push({message: `exit code ${exitCode}, expected ${c.config.exitCode}`, detail: tail(consoleText)})
      }
    }
    // Console output (never updated: the substrings are written by hand).
    const prefix = options.execPaths.defaultImagePrefix
    if (c.config.stdErr !== undefined && !consoleText.includes(c.config.stdErr) && !normaliseConsoleNames(consoleText, prefix).includes(normaliseConsoleNames(c.config.stdErr, prefix))) {
      problems.push({message: `stderr does not contain stdErr ${JSON.stringify(c.config.stdErr)}`, detail: tail(consoleText)})
    }
    if (c.config.stdErrRegEx !== undefined && !goRegExp(c.config.stdErrRegEx).test(consoleText)) {
      problems.push({message: `stderr does not match stdErrRegEx ${JSON.stringify(c.config.stdErrRegEx)}`, detail: tail(consoleText)})
    }
    if (c.config.stdOut !== undefined && !stdoutText.includes(c.config.stdOut)) {
      problems.push({message: `stdout does not contain stdOut ${JSON.stringify(c.config.stdOut)}`, detail: tail(stdoutText)})
    }

    // results.yaml (exec.sh writes none where fnr test could read it, as in kpt's runner).
    const expectedResultsFile = path.join(c.expectedDir, 'results.yaml')
    const expectedResults = await readOptional(expectedResultsFile)
    const rawResults = kind === 'script' ? '' : ((await readOptional(path.join(resultsDir, 'results.yaml'))) ?? '')
    const actualResults = stripLines(rawResults, c.config.actualStripLines)
    const hasResults = /^\s+results:$/m.test(actualResults)
    // Compared without leading and trailing white space, as kpt's harness does.
    // ... and independent of how the function was spelled (image refs, exec paths).
    const resultsDiffer =
      expectedResults !== undefined &&
      normaliseFunctionNames(expectedResults, options.execPaths.defaultImagePrefix).trim() !== normaliseFunctionNames(actualResults, options.execPaths.defaultImagePrefix).trim()
    if (resultsDiffer || (expectedResults === undefined && options.update && hasResults && kind !== 'script')) {
      if (options.update) {
        await writeFile(expectedResultsFile, actualResults)
        updated.push(`${EXPECTED_DIR}/results.yaml`)
      } else {
        problems.push({
          message: `results differ from ${EXPECTED_DIR}/results.yaml`,
          detail: diffText(`expected/results.yaml`, `actual/results.yaml`, expectedResults!, actualResults),
        })
      }
    }

    // Output.
    if (c.mode === 'package') {
      await comparePackage(c, options, {before, after: await readTree(pkg)}, {problems, updated})
    } else {
      const file = path.join(c.expectedDir, RESOURCELIST_FILE)
      const expected = (await readOptional(file)) ?? ''
      if (expected !== stdoutText) {
        if (options.update) {
          if (stdoutText === '') await rm(file, {force: true})
          else await writeFile(file, stdoutText)
          updated.push(`${EXPECTED_DIR}/${RESOURCELIST_FILE}`)
        } else {
          problems.push({message: `the output ResourceList differs from ${EXPECTED_DIR}/${RESOURCELIST_FILE}`, detail: diffText(`expected/${RESOURCELIST_FILE}`, `actual/${RESOURCELIST_FILE}`, expected, stdoutText)})
        }
      }
    }

    if (c.scripts.teardown) {
      try {
        const r = await runCaseScript(c.scripts.teardown, scriptOptions)
        if (r.exitCode !== 0) problems.push({message: `${EXPECTED_DIR}/teardown.sh failed (exit code ${r.exitCode})`, detail: tail(`${r.stdout}${r.stderr}`)})
      } catch (err) {
        if (options.signal?.aborted) return interrupted()
        problems.push({message: `${EXPECTED_DIR}/teardown.sh: ${toFnrError(err).message}`})
      }
    }
    if (c.config.debug) {
      keep = true
      warnings.push(`debug: true in ${EXPECTED_DIR}/config.yaml: the scratch copy is kept in ${work}`)
    }
    return finish()
  } catch (err) {
    if (options.signal?.aborted) return stop('interrupted', `interrupted by ${signalName(options.signal)}: what ran was killed, nothing was compared`)
    if (err instanceof FnrError) return stop('error', `cannot run: ${err.message}`)
    throw err
  } finally {
    if (!keep) await rm(work, {recursive: true, force: true})
    if (!ctx?.shim) await shim?.remove()
  }
}

/** Sets (or, for 0, removes) exitCode in the case's config.yaml, keeping its comments. */
async function updateExitCode(c: TestCase, exitCode: number): Promise<void> {
  const file = c.configPath ?? path.join(c.expectedDir, 'config.yaml')
  const doc = parseDocument((await readOptional(file)) ?? '')
  if (!isMap(doc.contents)) {
    if (exitCode === 0) return
    await writeFile(file, `exitCode: ${exitCode}\n`)
    return
  }
  if (exitCode === 0) doc.delete('exitCode')
  else doc.set('exitCode', exitCode)
  await writeFile(file, doc.toString())
}
