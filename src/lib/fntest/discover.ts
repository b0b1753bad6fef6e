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

import {parseDocument, isScalar, type Scalar, type YAMLMap, type YAMLSeq} from 'yaml'

import {parseGoDuration} from '../config/go-flags.js'
import {readConfigFile} from '../read-file.js'
import {FnrError} from '../errors.js'
import {pathExists} from '../resourcelist/source.js'

export const EXPECTED_DIR = '.expected'
export const RESOURCELIST_FILE = 'resourcelist.yaml'

export type CaseMode = 'package' | 'resourcelist'

/** What `.expected/config.yaml` may say (all optional; kpt's TestCaseConfig, read as kpt reads it). */
export interface CaseConfig {
  /** Expected exit code of the evaluation (or of exec.sh), as `fnr eval` (and `kpt fn eval`) would exit. */
  exitCode: number
  /** A substring the console output (stderr) must contain; durations read "in 0s". */
  stdErr?: string
  /** A regular expression (Go syntax as far as JavaScript shares it) the console output must match. */
  stdErrRegEx?: string
  /** A substring stdout must contain. */
  stdOut?: string
  /** Lines removed from stderr before it is compared (kpt's stdErrStripLines). */
  stdErrStripLines?: string[]
  /** Lines removed from the actual results.yaml before it is compared (kpt's actualStripLines). */
  actualStripLines?: string[]
  /** Lines matching this are left out of both the expected and the actual change (kpt's diffStripRegEx). */
  diffStripRegEx?: string
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
  /** kpt's testType: render runs the package's Kptfile pipeline; unset: see isRenderCase. */
  testType?: 'eval' | 'render'
  /** kpt's allowExec: render cases may run `exec:` functions. */
  allowExec?: boolean
  /** kpt's skip: the case is reported as skipped. */
  skip: boolean
  /** kpt's runtimes: the case runs only when KPT_FN_RUNTIME names one of them (as kpt's e2e tests). */
  runtimes?: string[]
  /** kpt's sequential: the case runs alone, before the others. */
  sequential: boolean
  /** kpt's imagePullPolicy (always, ifNotPresent, never), lower-cased as given; wins over --image-pull-policy. */
  imagePullPolicy?: string
  /** kpt's debug: keep the case's scratch folder and name it. */
  debug: boolean
  /** kpt keys fnr reads but cannot honour (reported as warnings; the case runs). */
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
  /** kpt's scripts in `.expected/` (absolute paths), run with bash in the case's scratch copy. */
  scripts: {setup?: string; exec?: string; teardown?: string}
  /** The case has an `out/` directory: kpt's out-of-place cases, run with `-o out`. */
  outOfPlace: boolean
  /** Why the case cannot run (its layout or config.yaml is invalid): it is reported as an error, the others run. */
  error?: string
}

/** Fields of kpt's TestCaseConfig (and fnr's `timeout`); any other key is ignored, as kpt's YAML decoder does. */
const KPT_UNUSED_WARNINGS: Record<string, string> = {
  network: 'fnr runs no containers: the function has the network access its runtime gives',
  allowNetwork: 'fnr runs no containers: the function has the network access its runtime gives',
  allowWasm: 'fnr does not run wasm functions',
  tag: 'a tag constraint is resolved against a registry by kpt; fnr matches the image name as given',
}
const SCRIPT_FILES = {setup: 'setup.sh', exec: 'exec.sh', teardown: 'teardown.sh'} as const
const SKIPPED_DIRS = new Set(['node_modules'])
export const PULL_POLICIES = ['always', 'ifnotpresent', 'never'] as const

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
  return Promise.all(selected.map((c) => readCase(c.dir, c.name).catch((err: unknown) => brokenCase(c.dir, c.name, err))))
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

/** A case that cannot run: it is still reported (as an error) while the others run. */
function brokenCase(dir: string, name: string, err: unknown): TestCase {
  if (!(err instanceof FnrError)) throw err
  return {
    name,
    dir,
    expectedDir: path.join(dir, EXPECTED_DIR),
    mode: 'package',
    config: defaultConfig(),
    scripts: {},
    outOfPlace: false,
    error: err.message,
  }
}

function defaultConfig(): CaseConfig {
  return {exitCode: 0, disableOutputTruncate: false, skip: false, sequential: false, debug: false, warnings: []}
}

/** Reads and checks one case directory; a problem is FnrError('Config') naming the case. */
export async function readCase(dir: string, name = caseName(dir)): Promise<TestCase> {
  const expectedDir = path.join(dir, EXPECTED_DIR)
  if (!(await isDir(expectedDir))) throw layoutError(name, `${EXPECTED_DIR}/ is missing or not a directory`)
  const expectedFiles = new Set(await readdir(expectedDir))
  const scripts: TestCase['scripts'] = {}
  for (const [role, file] of Object.entries(SCRIPT_FILES) as Array<[keyof typeof SCRIPT_FILES, string]>) {
    if (expectedFiles.has(file)) scripts[role] = path.join(expectedDir, file)
  }
  const caseEntries = (await readdir(dir)).filter((e) => e !== EXPECTED_DIR)
  const mode: CaseMode = caseEntries.includes(RESOURCELIST_FILE) && caseEntries.every((e) => e === RESOURCELIST_FILE) && !scripts.exec ? 'resourcelist' : 'package'
  const outOfPlace = mode === 'package' && caseEntries.includes('out') && (await isDir(path.join(dir, 'out')))
  if (mode === 'resourcelist') {
    if (expectedFiles.has('diff.patch')) throw layoutError(name, `${EXPECTED_DIR}/diff.patch is for package cases; a ${RESOURCELIST_FILE} case expects ${EXPECTED_DIR}/${RESOURCELIST_FILE}`)
  } else if (expectedFiles.has(RESOURCELIST_FILE)) {
    throw layoutError(name, `${EXPECTED_DIR}/${RESOURCELIST_FILE} is for cases whose input is ${RESOURCELIST_FILE} alone; a package case expects ${EXPECTED_DIR}/diff.patch`)
  }

  const configPath = expectedFiles.has('config.yaml') ? path.join(expectedDir, 'config.yaml') : undefined
  const config: CaseConfig = configPath ? await readCaseConfig(configPath, name) : defaultConfig()
  let fnConfigPath: string | undefined
  // exec.sh replaces the command: the keys that shape it are not used (kpt's README says so).
  if (!scripts.exec) {
    if (config.fnConfig !== undefined) {
      fnConfigPath = path.resolve(expectedDir, config.fnConfig)
      if (!(await pathExists(fnConfigPath))) throw layoutError(name, `fnConfig ${JSON.stringify(config.fnConfig)} does not exist (paths are relative to ${EXPECTED_DIR}/)`)
    } else if (config.args === undefined && expectedFiles.has('fn-config.yaml')) {
      fnConfigPath = path.join(expectedDir, 'fn-config.yaml')
    }
    if (config.execPath !== undefined && !(await pathExists(path.resolve(expectedDir, config.execPath)))) {
      throw layoutError(name, `execPath ${JSON.stringify(config.execPath)} does not exist (paths are relative to ${EXPECTED_DIR}/)`)
    }
  }
  return {name, dir, expectedDir, mode, config, scripts, outOfPlace, ...(configPath ? {configPath} : {}), ...(fnConfigPath ? {fnConfigPath} : {})}
}

/**
 * Reads `.expected/config.yaml` as kpt's runner does (a YAML decode into its TestCaseConfig), checked against
 * its schema (src/lib/schema/test-case-config.ts): keys are matched exactly, unknown keys (`apiVersion`,
 * `kind`, `runCount`, a mis-cased `StdErrRegEx`, …) are ignored, a known key with a value of the wrong type
 * makes the case invalid, every such field named as kubectl names it. fnr adds `timeout`. Beyond the schema:
 * `image` and `execPath` together are refused.
 */
export async function readCaseConfig(file: string, name: string): Promise<CaseConfig> {
  const where = `${EXPECTED_DIR}/config.yaml`
  const doc = parseDocument((await readCaseFile(file)).toString('utf8'))
  if (doc.errors.length > 0) throw layoutError(name, `${where}: ${doc.errors[0]!.message.split('\n')[0]}`)
  const config = defaultConfig()
  if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) return config
  const [{schemaProblems}, {TEST_CASE_CONFIG}] = await Promise.all([import('../schema/validate.js'), import('../schema/test-case-config.js')])
  const problems = schemaProblems(TEST_CASE_CONFIG, doc.toJS()).map((line) => line.replace(/^<root>: /, ''))
  if (problems.length > 0) throw new FnrError('Config', `test case ${name}: ${where}: ${problems.join('; ')}`, {details: {fieldErrors: problems}})
  for (const pair of (doc.contents as YAMLMap).items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : ''
    if (Object.hasOwn(CASE_FIELDS, key) && !isNull(pair.value)) CASE_FIELDS[key]!(config, pair.value, where)
  }
  if (config.image !== undefined && config.execPath !== undefined) throw layoutError(name, `${where}: give image or execPath, not both`)
  return config
}

/** A Go string field's value: a scalar's source text (the schema has checked it is a scalar). */
function text(node: unknown): string {
  return scalarText(node as Scalar)
}

/** A list of Go strings. */
function texts(node: unknown): string[] {
  return (node as YAMLSeq).items.map((item) => (isNull(item) ? '' : text(item)))
}

/** How each field of kpt's TestCaseConfig (and fnr's timeout) lands in CaseConfig, once the schema has passed it; a null value is left at its zero value. */
const CASE_FIELDS: Record<string, (config: CaseConfig, node: unknown, where: string) => void> = {
  testType: (c, n) => {
    if (text(n) !== '') c.testType = text(n) as 'eval' | 'render'
  },
  exitCode: (c, n) => (c.exitCode = (n as Scalar<number>).value),
  allowExec: (c, n) => (c.allowExec = (n as Scalar<boolean>).value),
  skip: (c, n) => (c.skip = (n as Scalar<boolean>).value),
  sequential: (c, n) => (c.sequential = (n as Scalar<boolean>).value),
  debug: (c, n) => (c.debug = (n as Scalar<boolean>).value),
  disableOutputTruncate: (c, n) => (c.disableOutputTruncate = (n as Scalar<boolean>).value),
  ...Object.fromEntries(
    (['network', 'allowNetwork', 'allowWasm'] as const).map((key) => [
      key,
      (c: CaseConfig, n: unknown, where: string) => {
        if ((n as Scalar<boolean>).value) c.warnings.push(`${where}: ${key} is not used (${KPT_UNUSED_WARNINGS[key]})`)
      },
    ]),
  ),
  tag: (c, n, where) => {
    if (text(n) !== '') c.warnings.push(`${where}: tag ${JSON.stringify(text(n))} is not used (${KPT_UNUSED_WARNINGS.tag})`)
  },
  stdErr: (c, n) => (c.stdErr = text(n)),
  stdOut: (c, n) => (c.stdOut = text(n)),
  ...Object.fromEntries(
    (['stdErrRegEx', 'diffStripRegEx', 'image', 'execPath', 'fnConfig'] as const).map((key) => [
      key,
      (c: CaseConfig, n: unknown) => {
        if (text(n) !== '') c[key] = text(n)
      },
    ]),
  ),
  ...Object.fromEntries((['stdErrStripLines', 'actualStripLines', 'runtimes'] as const).map((key) => [key, (c: CaseConfig, n: unknown) => (c[key] = texts(n))])),
  imagePullPolicy: (c, n) => {
    if (text(n) !== '') c.imagePullPolicy = text(n).toLowerCase()
  },
  timeout: (c, n) => (c.timeoutMs = parseGoDuration(text(n))),
  args: (c, n) => (c.args = (n as YAMLMap).items.map((p) => `${isScalar(p.key) ? scalarText(p.key) : String(p.key)}=${isNull(p.value) ? '' : text(p.value)}`)),
}

function isNull(node: unknown): boolean {
  return node === null || node === undefined || (isScalar(node) && node.value === null)
}

/** A scalar as Go's decoder reads it into a string: its source text (`1.20` stays `1.20`). */
function scalarText(node: Scalar): string {
  if (node.value === null) return ''
  if (typeof node.value === 'string') return node.value
  if (typeof node.source === 'string') return node.source
  return String(node.value)
}

/**
 * A regular expression written for Go (kpt's stdErrRegEx, diffStripRegEx): a leading flag group
 * such as `(?s)` or `(?m)` becomes JavaScript flags; without one, `^` and `$` match at the ends of
 * the text only, as in Go. Syntax JavaScript does not share throws.
 */
export function goRegExp(source: string): RegExp {
  const flags = /^\(\?([imsU]+)\)/.exec(source)
  if (!flags) return new RegExp(source)
  if (flags[1]!.includes('U')) throw new Error('the (?U) flag is not supported')
  return new RegExp(source.slice(flags[0].length), flags[1]!)
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
