/**
 * `fnr test`: finding test cases and reading their configuration.
 *
 * A case is a directory that holds a `.expected/` directory (kpt's e2e rule). It is either
 *
 * - a package case: the case directory is the input package (every file in it except
 *   `.expected/`, read like `kpt fn source`), run in place like `kpt fn eval DIR`; or
 * - a ResourceList case: the case directory holds only `resourcelist.yaml` (a ResourceList, the
 *   function's stdin) besides `.expected/`; the output is the ResourceList `fnr eval` prints.
 *
 * `.expected/` may hold `config.yaml` (kpt's TestCaseConfig subset, see CaseConfig),
 * `diff.patch` (package cases), `resourcelist.yaml` (ResourceList cases), `results.yaml`, and
 * `fn-config.yaml` (the functionConfig when config.yaml gives neither `fnConfig` nor `args`).
 * kpt's `exec.sh`, `setup.sh` and `teardown.sh` are refused: fnr test runs the function itself.
 *
 * Every problem is FnrError('Config') with a one-line message naming the case, found before any
 * case runs.
 */
import {lstat, readdir} from 'node:fs/promises'
import path from 'node:path'

import {parseDocument, isMap, isScalar, isSeq} from 'yaml'

import {parseGoDuration} from '../config/go-flags.js'
import {readConfigFile} from '../config/read-file.js'
import {FnrError} from '../errors.js'
import {pathExists} from '../resourcelist/source.js'

export const EXPECTED_DIR = '.expected'
export const RESOURCELIST_FILE = 'resourcelist.yaml'

export type CaseMode = 'package' | 'resourcelist'

/** What `.expected/config.yaml` may say (all optional). */
export interface CaseConfig {
  /** Expected exit code of the evaluation, as `fnr eval` (and `kpt fn eval`) would exit. */
  exitCode: number
  /** A substring the console output (stderr) must contain; durations read "in 0s". */
  stdErr?: string
  /** A regular expression the console output must match (multi-line mode). */
  stdErrRegEx?: string
  /** The function, when the command line gives none. */
  image?: string
  /** An executable relative to `.expected/`, when the command line gives no function. */
  execPath?: string
  /** kpt's `args` map, turned into `-- key=value` (the function-input ConfigMap). */
  args?: string[]
  /** A functionConfig file relative to `.expected/`. */
  fnConfig?: string
  /** Show results and stderr untruncated on the console (what stdErr is matched against). */
  disableOutputTruncate: boolean
  /** fnr's addition: this case's timeout (a Go duration), instead of --timeout. */
  timeoutMs?: number
  /** kpt's testType: render runs the package's Kptfile pipeline; unset: see TestCase.testType. */
  testType?: 'eval' | 'render'
  /** kpt's allowExec: render cases may run `exec:` functions. */
  allowExec?: boolean
  /** kpt harness keys fnr does not use (reported as warnings). */
  warnings: string[]
}

export interface TestCase {
  /** Stable name: the case directory relative to the working directory (slashes). */
  name: string
  dir: string
  expectedDir: string
  mode: CaseMode
  config: CaseConfig
  /** `.expected/config.yaml` when it exists. */
  configPath?: string
  /** Absolute functionConfig file, if any (from fnConfig or fn-config.yaml). */
  fnConfigPath?: string
}

const CONFIG_KEYS = new Set(['testType', 'exitCode', 'stdErr', 'stdErrRegEx', 'image', 'execPath', 'args', 'fnConfig', 'disableOutputTruncate', 'timeout', 'allowExec'])
/** kpt harness keys that would change a case's outcome: an error, with what to do instead. */
const KPT_ONLY_KEYS: Record<string, string> = {
  skip: 'fnr test runs every case it finds; move the case out of the folder or narrow the run with --filter',
  stdOut: 'compare the output with .expected/resourcelist.yaml (a ResourceList case) instead',
}
/** kpt harness keys that do not change what fnr checks: a warning, and the case runs. */
const KPT_IGNORED_KEYS: Record<string, string> = {
  runCount: 'fnr runs each case once',
  network: 'fnr does not run containers',
  allowNetwork: 'fnr does not run containers',
  allowWasm: 'fnr does not run wasm functions',
  imagePullPolicy: 'fnr pulls no images for exec functions',
  runtimes: 'fnr chooses its own runtime',
  sequential: 'cases never share state; --concurrency 1 runs them one at a time',
  includeMetaResources: 'fnr eval passes the package as it reads it',
  debug: 'not used',
  env: 'not used by fnr test',
  actualStripLines: 'not used',
  stdErrStripLines: 'not used',
}
const SCRIPT_FILES = ['exec.sh', 'setup.sh', 'teardown.sh']
const SKIPPED_DIRS = new Set(['node_modules'])

function layoutError(name: string, message: string): FnrError {
  return new FnrError('Config', `test case ${name}: ${message}`)
}

async function isDir(p: string): Promise<boolean> {
  try {
    return (await lstat(p)).isDirectory()
  } catch {
    return false
  }
}

export function caseName(dir: string, cwd = process.cwd()): string {
  const rel = path.relative(cwd, dir)
  const name = rel === '' ? '.' : rel.startsWith('..') || path.isAbsolute(rel) ? dir : rel
  return name.split(path.sep).join('/')
}

/**
 * The cases under the given roots (a root may itself be a case), sorted by name, each read and
 * checked. `filter` keeps the cases whose name matches one of the patterns (a `*` matches any
 * run of characters, otherwise a pattern matches as a substring).
 */
export async function discoverCases(roots: readonly string[], filter: readonly string[] = []): Promise<TestCase[]> {
  if (roots.length === 0) throw new FnrError('Usage', 'no test folder given')
  const dirs = new Set<string>()
  for (const root of roots) {
    const abs = path.resolve(root)
    if (!(await isDir(abs))) throw new FnrError('Config', `${root}: not a directory of test cases`)
    const before = dirs.size
    await walk(abs, dirs)
    if (dirs.size === before) throw new FnrError('Config', `${root}: no test cases (directories holding ${EXPECTED_DIR}/) found`)
  }
  const matchers = filter.map(patternToRegExp)
  const selected = [...dirs]
    .map((dir) => ({dir, name: caseName(dir)}))
    .filter((c) => matchers.length === 0 || matchers.some((m) => m.test(c.name)))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  if (selected.length === 0) throw new FnrError('Config', `no test case matches --filter ${filter.map((f) => JSON.stringify(f)).join(', ')}`)
  return Promise.all(selected.map((c) => readCase(c.dir, c.name)))
}

function patternToRegExp(pattern: string): RegExp {
  if (!pattern.includes('*')) return {test: (s: string) => s.includes(pattern)} as RegExp
  const body = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')
  return new RegExp(`^${body}$`)
}

async function walk(dir: string, out: Set<string>): Promise<void> {
  if (await isDir(path.join(dir, EXPECTED_DIR))) {
    out.add(dir)
    return
  }
  const entries = await readdir(dir, {withFileTypes: true})
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  for (const e of entries) {
    if (!e.isDirectory() || e.name.startsWith('.') || SKIPPED_DIRS.has(e.name)) continue
    await walk(path.join(dir, e.name), out)
  }
}

/** Reads and checks one case directory. */
export async function readCase(dir: string, name = caseName(dir)): Promise<TestCase> {
  const expectedDir = path.join(dir, EXPECTED_DIR)
  if (!(await isDir(expectedDir))) throw layoutError(name, `${EXPECTED_DIR}/ is missing or not a directory`)
  const expectedFiles = new Set(await readdir(expectedDir))
  for (const script of SCRIPT_FILES) {
    if (expectedFiles.has(script)) {
      throw layoutError(name, `${EXPECTED_DIR}/${script} is not supported (fnr test runs the function itself, without shell scripts)`)
    }
  }
  const caseEntries = (await readdir(dir)).filter((e) => e !== EXPECTED_DIR)
  const mode: CaseMode = caseEntries.includes(RESOURCELIST_FILE) ? 'resourcelist' : 'package'
  if (mode === 'resourcelist') {
    const others = caseEntries.filter((e) => e !== RESOURCELIST_FILE)
    if (others.length > 0) throw layoutError(name, `a ${RESOURCELIST_FILE} case holds nothing else, but found ${JSON.stringify(others[0])}`)
    if (expectedFiles.has('diff.patch')) throw layoutError(name, `${EXPECTED_DIR}/diff.patch is for package cases; a ${RESOURCELIST_FILE} case expects ${EXPECTED_DIR}/${RESOURCELIST_FILE}`)
  } else if (caseEntries.includes('out') && (await isDir(path.join(dir, 'out')))) {
    throw layoutError(name, 'an out/ directory (kpt\'s out-of-place cases) is not supported: fnr test updates the package in place')
  } else if (expectedFiles.has(RESOURCELIST_FILE)) {
    throw layoutError(name, `${EXPECTED_DIR}/${RESOURCELIST_FILE} is for cases whose input is ${RESOURCELIST_FILE}; a package case expects ${EXPECTED_DIR}/diff.patch`)
  }

  const configPath = expectedFiles.has('config.yaml') ? path.join(expectedDir, 'config.yaml') : undefined
  const config: CaseConfig = configPath ? await readCaseConfig(configPath, name) : {exitCode: 0, disableOutputTruncate: false, warnings: []}
  let fnConfigPath: string | undefined
  if (config.fnConfig !== undefined) {
    fnConfigPath = path.resolve(expectedDir, config.fnConfig)
    if (!(await pathExists(fnConfigPath))) throw layoutError(name, `fnConfig ${JSON.stringify(config.fnConfig)} does not exist (paths are relative to ${EXPECTED_DIR}/)`)
  } else if (config.args === undefined && expectedFiles.has('fn-config.yaml')) {
    fnConfigPath = path.join(expectedDir, 'fn-config.yaml')
  }
  if (config.execPath !== undefined && !(await pathExists(path.resolve(expectedDir, config.execPath)))) {
    throw layoutError(name, `execPath ${JSON.stringify(config.execPath)} does not exist (paths are relative to ${EXPECTED_DIR}/)`)
  }
  return {name, dir, expectedDir, mode, config, ...(configPath ? {configPath} : {}), ...(fnConfigPath ? {fnConfigPath} : {})}
}

/** Reads `.expected/config.yaml`: kpt's keys that make sense for one function, plus `timeout`. */
export async function readCaseConfig(file: string, name: string): Promise<CaseConfig> {
  const where = `${EXPECTED_DIR}/config.yaml`
  const doc = parseDocument((await readCaseFile(file)).toString('utf8'))
  if (doc.errors.length > 0) throw layoutError(name, `${where}: ${doc.errors[0]!.message.split('\n')[0]}`)
  const config: CaseConfig = {exitCode: 0, disableOutputTruncate: false, warnings: []}
  if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) return config
  if (!isMap(doc.contents)) throw layoutError(name, `${where} must be a mapping`)
  const str = (key: string, v: unknown): string => {
    if (typeof v === 'string') return v
    throw layoutError(name, `${where}: ${key} must be a string`)
  }
  for (const pair of doc.contents.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : ''
    const node = pair.value
    const value: unknown = isScalar(node) ? node.value : node === null ? null : (node as {toJSON(): unknown}).toJSON()
    if (!CONFIG_KEYS.has(key) && KPT_IGNORED_KEYS[key] !== undefined) {
      config.warnings.push(`${where}: ${JSON.stringify(key)} is ignored (${KPT_IGNORED_KEYS[key]})`)
      continue
    }
    if (!CONFIG_KEYS.has(key)) {
      const hint = KPT_ONLY_KEYS[key]
      throw layoutError(name, `${where}: ${JSON.stringify(key)} is not supported${hint ? ` (${hint})` : ''}`)
    }
    switch (key) {
      case 'testType':
        if (value !== 'eval' && value !== 'render') throw layoutError(name, `${where}: testType must be eval or render, got ${JSON.stringify(value)}`)
        config.testType = value
        break
      case 'allowExec':
        if (typeof value !== 'boolean') throw layoutError(name, `${where}: allowExec must be true or false`)
        config.allowExec = value
        break
      case 'exitCode':
        if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 255) throw layoutError(name, `${where}: exitCode must be an integer from 0 to 255`)
        config.exitCode = value
        break
      case 'stdErr':
        config.stdErr = str(key, value)
        break
      case 'stdErrRegEx':
        config.stdErrRegEx = str(key, value)
        try {
          new RegExp(config.stdErrRegEx, 'm')
        } catch (err) {
          throw layoutError(name, `${where}: stdErrRegEx: ${(err as Error).message}`)
        }
        break
      case 'image':
        config.image = str(key, value)
        break
      case 'execPath':
        config.execPath = str(key, value)
        break
      case 'fnConfig':
        config.fnConfig = str(key, value)
        break
      case 'disableOutputTruncate':
        if (typeof value !== 'boolean') throw layoutError(name, `${where}: disableOutputTruncate must be true or false`)
        config.disableOutputTruncate = value
        break
      case 'timeout': {
        const ms = typeof value === 'string' ? parseGoDuration(value) : undefined
        if (ms === undefined || ms <= 0) throw layoutError(name, `${where}: timeout must be a duration like 30s or 2m`)
        config.timeoutMs = ms
        break
      }
      case 'args': {
        if (!isMap(node)) throw layoutError(name, `${where}: args must be a mapping of key: value`)
        config.args = node.items.map((p) => {
          if (!isScalar(p.key) || !(isScalar(p.value) || p.value === null) || isSeq(p.value)) throw layoutError(name, `${where}: args values must be scalars`)
          const v = isScalar(p.value) ? p.value.value : ''
          return `${String(p.key.value)}=${v === null ? '' : String(v)}`
        })
        break
      }
    }
  }
  if (config.image !== undefined && config.execPath !== undefined) throw layoutError(name, `${where}: give image or execPath, not both`)
  if (config.args !== undefined && config.fnConfig !== undefined) throw layoutError(name, `${where}: give args or fnConfig, not both`)
  return config
}

/** The largest file of a test case fnr reads (expected outputs of a 6 MiB ResourceList fit). */
export const MAX_CASE_FILE_BYTES = 64 * 1024 * 1024

/**
 * Reads a file of a test case: a regular file (symlinks followed) of at most MAX_CASE_FILE_BYTES,
 * so a FIFO or a device among the case files is a clear error instead of a hang.
 */
export function readCaseFile(file: string): Promise<Buffer> {
  return readConfigFile(file, {label: `test case file ${file} cannot be read`, maxBytes: MAX_CASE_FILE_BYTES})
}
