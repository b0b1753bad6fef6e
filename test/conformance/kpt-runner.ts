/**
 * kpt's e2e runner (pkg/test/runner of kptdev/kpt), step for step, with the `kpt` under test as a
 * parameter: the real kpt, or fnr behind fnr test's `kpt` shim (src/lib/fntest/scripts.ts). Both
 * tools are judged by this one judge, so a difference in outcome is a difference of the tools.
 *
 * A case: the case folder is copied to a temp dir (with `.expected/`, which the cases' `.krmignore`
 * keeps out of the package), added to a fresh git repo; then twice (kpt's RunCount): setup.sh,
 * then exec.sh or `kpt fn eval|render PKG` with the flags the case's config asks for; the exit code,
 * stderr (contains `stdErr`, matches `stdErrRegEx`, after `stdErrStripLines`), stdout (contains
 * `stdOut`) and results (`--results-dir`, the one file, trimmed, `actualStripLines` removed) are
 * checked on the first run, the package's `git diff` against the first commit on each; a failing
 * command ends the runs; teardown.sh runs as kpt's runner runs it.
 */
import {execa} from 'execa'
import {existsSync} from 'node:fs'
import {cp, mkdtemp, readdir, readFile, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {goRegExp} from '../../src/lib/fntest/discover.js'
import {EXPECTED, type KptCase} from './cases.js'

/** kpt's runner runs every case twice in the same copy (idempotency). */
export const RUN_COUNT = 2
const COMMAND_TIMEOUT_MS = 120_000
/** git's path, for the diff that runs with an environment of GIT_DIFF_OPTS= alone (no PATH). */
const GIT = ((process.env.PATH ?? '').split(path.delimiter).map((d) => path.join(d, 'git')).find((f) => existsSync(f))) ?? '/usr/bin/git'

/** What went wrong, as kpt's runner checks in this order. */
export type Mismatch = 'setup' | 'exit code' | 'stderr' | 'stdout' | 'results' | 'diff' | 'teardown' | 'harness'

export interface Outcome {
  passed: boolean
  mismatch?: Mismatch
  /** kpt's runner's message for the failure. */
  message?: string
  exitCode?: number
  stderr?: string
  /**
   * Every failed check is one of exit code and message form only: both exit codes non-zero, and
   * stderr right once `fnr: MSG (see --help)` reads `Error: MSG` (kptMessageForm).
   */
  formOnly?: boolean
  /** What the tool did on the first run. */
  observed?: Observed
}

export interface Observed {
  exitCode: number
  /** The results file, trimmed, `actualStripLines` removed. */
  results: string
  /** The package's `git diff` against its first state, trimmed. */
  diff: string
}

export interface Tool {
  name: string
  /** The `kpt` the runner runs (kpt's runner uses `which kpt`). */
  kptBin: string
  /** PATH for the commands and scripts. */
  path: string
  env?: Record<string, string>
}

interface Ran {
  exitCode: number
  stdout: string
  stderr: string
}

async function run(file: string, args: readonly string[], cwd: string | undefined, tool: Tool): Promise<Ran> {
  const r = await execa(file, args, {
    cwd,
    env: {...tool.env, PATH: tool.path},
    reject: false,
    stdin: 'ignore',
    timeout: COMMAND_TIMEOUT_MS,
    killSignal: 'SIGKILL',
    stripFinalNewline: false,
    maxBuffer: 64 * 1024 * 1024,
  })
  return {exitCode: r.exitCode ?? (r.timedOut ? -1 : 128), stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '')}
}

async function git(dir: string, args: readonly string[], tool: Tool): Promise<string> {
  const r = await run('git', args, dir, tool)
  if (r.exitCode !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`)
  return r.stdout
}

/** kpt's sanitizeTimestamps: `[PASS] "img" in 2.1s` -> `in 0s`. */
export function sanitizeTimestamps(stderr: string): string {
  return stderr
    .split('\n')
    .map((line) => {
      if (!line.startsWith('[PASS]') && !line.startsWith('[FAIL]')) return line
      const tokens = line.split(/\s+/).filter(Boolean)
      return tokens.length === 4 && tokens[2] === 'in' ? [...tokens.slice(0, 3), '0s'].join(' ') : line
    })
    .join('\n')
}

const stripLines = (text: string, lines: readonly string[]): string => lines.reduce((t, l) => t.replaceAll(`${l}\n`, ''), text)

function commandArgs(c: KptCase, pkg: string, resultsDir: string | undefined, destDir: string | undefined): string[] {
  const cfg = c.config
  const args = ['fn', cfg.testType, pkg]
  if (resultsDir) args.push('--results-dir', resultsDir)
  if (destDir) args.push('-o', destDir)
  if (cfg.testType === 'eval') {
    if (cfg.allowWasm) args.push('--allow-alpha-wasm')
    if (cfg.imagePullPolicy) args.push('--image-pull-policy', cfg.imagePullPolicy)
    if (cfg.network) args.push('--network')
    if (cfg.image) args.push('--image', cfg.image)
    else if (cfg.execPath) args.push('--exec', path.resolve(c.dir, EXPECTED, cfg.execPath))
    if (cfg.fnConfig) args.push('--fn-config', path.resolve(c.dir, EXPECTED, cfg.fnConfig))
    if (cfg.includeMetaResources) args.push('--include-meta-resources')
    const kv = Object.entries(cfg.args)
    if (kv.length > 0) args.push('--', ...kv.map(([k, v]) => `${k}=${v}`))
  } else {
    if (cfg.imagePullPolicy) args.push('--image-pull-policy', cfg.imagePullPolicy)
    if (cfg.allowExec) args.push('--allow-exec')
    if (cfg.allowWasm) args.push('--allow-alpha-wasm')
    if (cfg.disableOutputTruncate) args.push('--truncate-output=false')
  }
  return args
}

async function readActualResults(resultsDir: string | undefined): Promise<string> {
  if (!resultsDir || !existsSync(resultsDir)) {
    if (resultsDir) throw new Error('failed to get files in results dir')
    return ''
  }
  const files = await readdir(resultsDir)
  if (files.length > 1) throw new Error(`unexpected results files number ${files.length}, should be 0 or 1`)
  if (files.length === 0) return ''
  return (await readFile(path.join(resultsDir, files[0]), 'utf8')).trim()
}

const readTrimmed = async (file: string): Promise<string> => (existsSync(file) ? (await readFile(file, 'utf8')).trim() : '')

/** Runs one case with `tool`, judged as kpt's runner judges it. */
export async function runKptCase(c: KptCase, tool: Tool): Promise<Outcome> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'fnr-conformance-'))
  try {
    return await runIn(tmp, c, tool)
  } catch (err) {
    return {passed: false, mismatch: 'harness', message: (err as Error).message}
  } finally {
    await rm(tmp, {recursive: true, force: true})
  }
}

async function runIn(tmp: string, c: KptCase, tool: Tool): Promise<Outcome> {
  const cfg = c.config
  const pkg = path.join(tmp, path.basename(c.dir))
  const expectedDir = path.join(c.dir, EXPECTED)
  const resultsDir = existsSync(path.join(expectedDir, 'results.yaml')) ? path.join(tmp, 'results') : undefined
  const destDir = existsSync(path.join(c.dir, 'out')) ? path.join(pkg, 'out') : undefined
  await cp(c.dir, pkg, {recursive: true, verbatimSymlinks: true})
  // kpt's runner commits the copy and later diffs a second commit against it; the index against
  // the first tree gives the same patch with fewer processes (git diff's output names blobs, not commits).
  await git(pkg, ['init', '-q'], tool)
  await git(pkg, ['add', '--all'], tool)
  const initial = (await git(pkg, ['write-tree'], tool)).trim()
  const expectedResults = await readTrimmed(path.join(expectedDir, 'results.yaml'))
  const expectedDiff = await readTrimmed(path.join(expectedDir, 'diff.patch'))
  const script = (name: string): string | undefined => (existsSync(path.join(expectedDir, name)) ? path.join(expectedDir, name) : undefined)

  const problems: Outcome[] = []
  let observed: Observed | undefined
  /** True when teardown.sh passed (or there is none). */
  const teardown = async (): Promise<boolean> => {
    const t = script('teardown.sh')
    if (!t) return true
    const r = await run('bash', [t], pkg, tool)
    if (r.exitCode !== 0) problems.push({passed: false, mismatch: 'teardown', message: `failed to run teardown script: ${r.stdout}${r.stderr}`})
    return r.exitCode === 0
  }

  for (let i = 0; i < RUN_COUNT; i++) {
    const setup = script('setup.sh')
    if (setup) {
      const r = await run('bash', [setup], pkg, tool)
      if (r.exitCode !== 0) {
        problems.push({passed: false, mismatch: 'setup', message: `failed to run setup script: ${r.stdout}${r.stderr}`})
        break
      }
    }
    const exec = script('exec.sh')
    const r = exec ? await run('bash', [exec], pkg, tool) : await run(tool.kptBin, commandArgs(c, pkg, resultsDir, destDir), undefined, tool)
    const failed = r.exitCode !== 0
    const stderr = stripLines(sanitizeTimestamps(r.stderr), cfg.stdErrStripLines)
    // kpt's runner stops at the first failed check. This one goes on past a failure that is only
    // exit-code-and-message form (both codes non-zero; stderr right once fnr's `fnr: …` lines read
    // `Error: …`), to tell such cases apart (Outcome.formOnly); the first failure is the outcome.
    const fail = (mismatch: Mismatch, message: string, formOnly = false): boolean => {
      problems.push({passed: false, mismatch, message, exitCode: r.exitCode, stderr: r.stderr, formOnly})
      return formOnly
    }
    const stderrOk = (text: string): boolean => text.includes(cfg.stdErr) && (!cfg.stdErrRegEx || goRegExp(cfg.stdErrRegEx).test(text))
    const formOk = (text: string): boolean => stderrOk(kptMessageForm(text, 'Error')) || stderrOk(kptMessageForm(text, 'error'))

    // What the tool did on the first run (exit code, results, package diff), to set the two tools
    // side by side where kpt itself fails the case (read here, before the checks, so a failed
    // check does not hide it; reading changes nothing the checks look at).
    const diffNow = async (): Promise<string> => {
      await git(pkg, ['add', '--all'], tool)
      // As kpt's runner: git diff with an environment of GIT_DIFF_OPTS= alone.
      const d = await execa(GIT, ['diff', '--cached', initial], {cwd: pkg, env: {GIT_DIFF_OPTS: ''}, extendEnv: false, reject: false, stripFinalNewline: false})
      return String(d.stdout).trim()
    }
    const actualResults = await readActualResults(resultsDir).then((text) => stripLines(text, cfg.actualStripLines), (err: unknown) => err as Error)
    const actualDiff = await diffNow()
    if (i === 0) observed = {exitCode: r.exitCode, results: typeof actualResults === 'string' ? actualResults : `(${actualResults.message})`, diff: actualDiff}

    if (r.exitCode !== cfg.exitCode && !fail('exit code', `actual exit code ${r.exitCode} doesn't match expected ${cfg.exitCode}`, r.exitCode !== 0 && cfg.exitCode !== 0)) break
    if (i === 0) {
      if (!stderr.includes(cfg.stdErr)) {
        if (!fail('stderr', `wanted stderr ${JSON.stringify(cfg.stdErr)}, got ${JSON.stringify(stderr)}`, formOk(stderr))) break
      } else if (cfg.stdErrRegEx && !goRegExp(cfg.stdErrRegEx).test(stderr)) {
        if (!fail('stderr', `unable to match regular expression ${JSON.stringify(cfg.stdErrRegEx)}, got ${stderr}`, formOk(stderr))) break
      }
      if (!r.stdout.includes(cfg.stdOut) && !fail('stdout', `wanted stdout ${JSON.stringify(cfg.stdOut)}, got ${JSON.stringify(r.stdout)}`)) break
      if (typeof actualResults !== 'string') {
        fail('results', `failed to read actual results: ${actualResults.message}`)
        break
      }
      if (actualResults !== expectedResults && !fail('results', `actual results doesn't match expected\nActual\n===\n${actualResults}\nExpected\n===\n${expectedResults}`)) break
    }
    if (actualDiff !== expectedDiff && !fail('diff', `actual diff doesn't match expected\nActual\n===\n${actualDiff}\nExpected\n===\n${expectedDiff}`)) break

    if (cfg.testType === 'eval') {
      if (failed) break
      if (!(await teardown())) break
    } else {
      if (!(await teardown())) break
      if (failed) break
    }
  }
  if (problems.length === 0) return {passed: true, observed}
  return {...problems[0], formOnly: problems.every((p) => p.formOnly), observed}
}

/** fnr's message form read as kpt's: `fnr: MSG (see --help)` lines as `Error: MSG` (or kpt's other form, `error: MSG`). */
export function kptMessageForm(stderr: string, prefix: 'Error' | 'error' = 'Error'): string {
  return stderr.replace(/^fnr: (.*?)(?: \(see --help\))?$/gm, `${prefix}: $1`)
}
