/**
 * `fnr test`: running the cases. Each case is one `fnr eval` (runEval, the same code as the
 * command: reading the package, building the input, running the function, reconciling and
 * writing the output, results.yaml) on a scratch copy of the case, with stdout and stderr
 * captured; then the copy, the results and the exit code are compared with `.expected/`.
 *
 * - package case: `fnr eval -i COPY -o COPY --results-dir RES [fn] [config]` (in place, as kpt's
 *   e2e harness runs `kpt fn eval DIR`); compared: the package files, results.yaml, exit code,
 *   stderr.
 * - ResourceList case: `fnr eval --results-dir RES [fn] [config] < resourcelist.yaml`; compared:
 *   stdout, results.yaml, exit code, stderr.
 *
 * Cases run in parallel (a fixed number at a time) and are reported in name order. `--update`
 * rewrites the expectations that can be derived from the run (diff.patch, resourcelist.yaml,
 * results.yaml, config.yaml's exitCode); stdErr/stdErrRegEx and timeouts cannot be updated.
 */
import {constants, existsSync} from 'node:fs'
import {access, cp, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {Readable, Writable} from 'node:stream'

import {quote} from 'shell-quote'
import {isMap, parseDocument} from 'yaml'

import {loadExecConfig} from '../config/exec-config.js'
import {normaliseImage} from '../config/image-ref.js'
import {ConfigFileError} from '../config/read-file.js'
import type {ExecPaths} from '../config/embedded.js'
import {errorLine, FnrError, toFnrError} from '../errors.js'
import {runEval, splitExec, type EvalOptions} from '../eval.js'
import {runRender} from '../render.js'
import type {EvaluatorClient} from '../grpc/client.js'
import {applyTreePatch, diffText, diffTrees, makeTreePatch, PatchError, readTree, type Tree} from './compare.js'
import {discoverCases, EXPECTED_DIR, readCaseFile, RESOURCELIST_FILE, type TestCase} from './discover.js'

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
}

export type CaseStatus = 'passed' | 'failed' | 'updated'

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
 * (neither on the command line nor in config.yaml) and the package has a Kptfile.
 */
export function isRenderCase(c: TestCase, options: Pick<FnTestOptions, 'exec' | 'image'>): boolean {
  if (c.config.testType !== undefined) return c.config.testType === 'render'
  if (options.exec !== undefined || options.image !== undefined || c.config.image !== undefined || c.config.execPath !== undefined) return false
  return c.mode === 'package' && existsSync(path.join(c.dir, 'Kptfile'))
}

function functionFor(c: TestCase, options: FnTestOptions): CaseFunction {
  if (options.exec !== undefined) return {exec: options.exec}
  if (options.image !== undefined) return {image: options.image}
  if (c.config.image !== undefined) return {image: c.config.image}
  if (c.config.execPath !== undefined) return {exec: quote([path.resolve(c.expectedDir, c.config.execPath)])}
  throw new FnrError('Usage', `test case ${c.name} names no function: give --exec or --image, or image/execPath in its ${EXPECTED_DIR}/config.yaml`)
}

/** Checks the functions before anything runs: exec strings parse and exist, images are mapped. */
async function preflight(cases: TestCase[], options: FnTestOptions): Promise<void> {
  const images = new Map<string, string>()
  for (const c of cases) {
    if (isRenderCase(c, options)) continue
    const fn = functionFor(c, options)
    if (fn.exec !== undefined && options.runner) {
      throw new FnrError('Usage', `test case ${c.name} runs an executable (--exec or execPath), but --runner evaluates images: give --image, or an image in its ${EXPECTED_DIR}/config.yaml`)
    }
    if (fn.exec !== undefined) {
      const [command] = splitExec(fn.exec)
      if (command!.includes('/')) {
        try {
          await access(command!, constants.X_OK)
        } catch {
          throw new FnrError('NotFound', `--exec ${JSON.stringify(fn.exec)}: ${command} is not an executable file`)
        }
      }
    } else if (!images.has(fn.image!)) {
      if (fn.image!.trim() === '') throw new FnrError('Usage', '--image is empty')
      images.set(fn.image!, c.name)
    }
  }
  // A runner knows its own images (a wrong one fails its cases with the runner's message).
  if (images.size === 0 || options.runner) return
  const config = await loadExecConfig({
    configPath: options.execPaths.configPath,
    functionsDir: options.execPaths.functionsDir,
    defaultImagePrefix: options.execPaths.defaultImagePrefix,
  })
  for (const [image, caseName] of images) {
    if (!config.lookup(image)) {
      throw new FnrError(
        'NotFound',
        `function ${JSON.stringify(image)} (test case ${caseName}) is not in the exec config ${options.execPaths.configPath}; use --exec, or --config/--functions to map it`,
      )
    }
  }
}

/** Finds the cases, checks them, runs them; onResult is called in case order. */
export async function runFnTest(options: FnTestOptions, onResult: (r: CaseResult, index: number, total: number) => void = () => {}): Promise<FnTestRun> {
  if (options.exec !== undefined && options.image !== undefined) throw new FnrError('Usage', 'give --exec or --image, not both')
  if (options.exec !== undefined) splitExec(options.exec)
  const cases = await discoverCases(options.roots, options.filter)
  await preflight(cases, options)
  const client = options.runner ? await (await import('./remote.js')).connectRunner(options.runner, options.maxOutputBytes) : undefined
  try {
    const run = await runCases(cases, options, onResult, client)
    if (options.signal?.aborted) throw options.signal.reason
    return run
  } finally {
    client?.close()
  }
}

async function runCases(cases: TestCase[], options: FnTestOptions, onResult: (r: CaseResult, index: number, total: number) => void, client: EvaluatorClient | undefined): Promise<FnTestRun> {
  const started = performance.now()
  const results: CaseResult[] = new Array(cases.length)
  let next = 0
  let emitted = 0
  const worker = async (): Promise<void> => {
    while (next < cases.length && !options.signal?.aborted) {
      const i = next++
      results[i] = await runCase(cases[i]!, options, client)
      while (emitted < cases.length && results[emitted]) {
        onResult(results[emitted]!, emitted, cases.length)
        emitted++
      }
    }
  }
  await Promise.all(Array.from({length: Math.max(1, Math.min(options.concurrency, cases.length))}, worker))
  return {cases, results, durationMs: performance.now() - started}
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

/** Runs one case on a scratch copy and compares (and with --update, rewrites) its expectations. */
export async function runCase(c: TestCase, options: FnTestOptions, client?: EvaluatorClient): Promise<CaseResult> {
  const started = performance.now()
  const render = isRenderCase(c, options)
  const fn = render ? {} : functionFor(c, options)
  const label = render ? 'render' : (fn.image ?? fn.exec!)
  const problems: CaseProblem[] = []
  const updated: string[] = []
  const timeoutMs = c.config.timeoutMs ?? options.timeoutMs
  const work = await mkdtemp(path.join(os.tmpdir(), 'fnr-test-case-'))
  let exitCode = 0
  let timedOut = false
  try {
    const pkg = path.join(work, 'pkg')
    const resultsDir = path.join(work, 'results')
    const expectedAbs = path.resolve(c.expectedDir)
    let before: Tree = new Map()
    let stdin: NodeJS.ReadableStream = Readable.from([])
    if (c.mode === 'package') {
      await cp(c.dir, pkg, {recursive: true, verbatimSymlinks: true, filter: (src) => path.resolve(src) !== expectedAbs})
      before = await readTree(pkg)
    } else {
      stdin = Readable.from([await readCaseFile(path.join(c.dir, RESOURCELIST_FILE))])
    }
    const evalOptions: EvalOptions = {
      inputs: c.mode === 'package' ? [pkg] : [],
      ...fn,
      fnConfigPath: c.fnConfigPath,
      fnConfigArgs: c.config.args ?? [],
      output: c.mode === 'package' ? pkg : 'stdout',
      resultsDir,
      timeoutMs,
      maxOutputBytes: options.maxOutputBytes,
      failOnErrorResults: false,
      truncateOutput: !c.config.disableOutputTruncate,
      execPaths: options.execPaths,
      signal: options.signal,
    }
    const stdout = new Collector()
    const stderr = new Collector()
    try {
      if (render) {
        const remote = client ? await import('./remote.js') : undefined
        await runRender(
          {
            dir: pkg,
            allowExec: c.config.allowExec ?? false,
            output: '',
            resultsDir,
            timeoutMs,
            maxOutputBytes: options.maxOutputBytes,
            truncateOutput: !c.config.disableOutputTruncate,
            execPaths: options.execPaths,
            ...(client && remote ? {imageRunner: (image: string, input: Buffer) => remote.callRunner(client, image, input, timeoutMs, options.signal)} : {}),
            signal: options.signal,
          },
          {stdin, stdout, stderr},
        )
      } else if (client) await (await import('./remote.js')).runEvalRemote(evalOptions, {stdin, stdout, stderr}, client)
      else await runEval(evalOptions, {stdin, stdout, stderr})
    } catch (err) {
      const e = toFnrError(err)
      stderr.write(errorLine(e))
      exitCode = e.exitCode
      timedOut = e.kind === 'DeadlineExceeded'
    }
    const consoleText = sanitizeConsole(stderr.text())
    if (timedOut) {
      problems.push({message: `timed out after ${timeoutMs / 1000}s: the function was killed`, detail: tail(consoleText)})
      return finish()
    }

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
    if (c.config.stdErrRegEx !== undefined && !new RegExp(c.config.stdErrRegEx, 'm').test(consoleText)) {
      problems.push({message: `stderr does not match stdErrRegEx ${JSON.stringify(c.config.stdErrRegEx)}`, detail: tail(consoleText)})
    }

    // results.yaml.
    const expectedResultsFile = path.join(c.expectedDir, 'results.yaml')
    const expectedResults = await readOptional(expectedResultsFile)
    const actualResults = (await readOptional(path.join(resultsDir, 'results.yaml'))) ?? ''
    const hasResults = /^\s+results:$/m.test(actualResults)
    // Compared without leading and trailing white space, as kpt's harness does.
    // ... and independent of how the function was spelled (image refs, exec paths).
    const resultsDiffer =
      expectedResults !== undefined &&
      normaliseFunctionNames(expectedResults, options.execPaths.defaultImagePrefix).trim() !== normaliseFunctionNames(actualResults, options.execPaths.defaultImagePrefix).trim()
    if (resultsDiffer || (expectedResults === undefined && options.update && hasResults)) {
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
      const after = await readTree(pkg)
      const patchFile = path.join(c.expectedDir, 'diff.patch')
      const patchText = (await readOptional(patchFile)) ?? ''
      let expectedTree: Tree | undefined
      let patchProblem: string | undefined
      try {
        expectedTree = applyTreePatch(before, patchText)
      } catch (err) {
        if (!(err instanceof PatchError)) throw err
        patchProblem = err.message
      }
      const diff = expectedTree ? diffTrees(expectedTree, after) : undefined
      if (patchProblem !== undefined || diff !== '') {
        const actualPatch = makeTreePatch(before, after)
        if (options.update) {
          if (actualPatch === '') await rm(patchFile, {force: true})
          else await writeFile(patchFile, actualPatch)
          updated.push(`${EXPECTED_DIR}/diff.patch`)
        } else if (patchProblem !== undefined) {
          problems.push({message: `${EXPECTED_DIR}/diff.patch does not apply to the input: ${patchProblem}; the actual change is:`, detail: actualPatch || '(no change)'})
        } else {
          problems.push({message: `the package after the function differs from the input + ${EXPECTED_DIR}/diff.patch`, detail: diff})
        }
      }
    } else {
      const file = path.join(c.expectedDir, RESOURCELIST_FILE)
      const expected = (await readOptional(file)) ?? ''
      const actual = stdout.text()
      if (expected !== actual) {
        if (options.update) {
          if (actual === '') await rm(file, {force: true})
          else await writeFile(file, actual)
          updated.push(`${EXPECTED_DIR}/${RESOURCELIST_FILE}`)
        } else {
          problems.push({message: `the output ResourceList differs from ${EXPECTED_DIR}/${RESOURCELIST_FILE}`, detail: diffText(`expected/${RESOURCELIST_FILE}`, `actual/${RESOURCELIST_FILE}`, expected, actual)})
        }
      }
    }
    return finish()
  } finally {
    await rm(work, {recursive: true, force: true})
  }

  function finish(): CaseResult {
    const status: CaseStatus = problems.length > 0 ? 'failed' : updated.length > 0 ? 'updated' : 'passed'
    return {name: c.name, dir: c.dir, function: label, status, durationMs: performance.now() - started, exitCode, timedOut, problems, updated, warnings: c.config.warnings}
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
