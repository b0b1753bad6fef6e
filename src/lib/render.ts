/**
 * `fnr render [DIR]`: runs a package's Kptfile pipeline like `kpt fn render` (1.0.0-beta.56).
 *
 * - Packages are the directories holding a Kptfile. Rendering is depth-first: a package's
 *   subpackages (in name order) are rendered first; the package's pipeline then sees the
 *   subpackages' rendered resources followed by its own. Each resource's path annotations are
 *   relative to its own package, and `internal.config.kubernetes.io/package-path` holds that
 *   package's absolute path (as kpt sends them).
 * - A pipeline runs its mutators in order (each one's output is the next one's input), then its
 *   validators (their output is discarded; a failure fails the render).
 * - Every Kptfile is decoded and validated as kpt does (kptfile.ts) before any function runs;
 *   a refused package gets kpt's text (an InvalidPackage error) and is left as it was.
 * - functionConfig: `configMap` (a ConfigMap named function-input, data in flow style, as kpt
 *   builds it; none for an empty one) or `configPath` (for a mutator, the package's resource at
 *   exactly that path, which stays in the items; for a validator, or when no resource has
 *   exactly that path, the file as it is on disk, as kpt sends it).
 * - `selectors` / `exclude`: only the selected resources are sent; the output replaces them
 *   (matched by `internal.config.k8s.io/kpt-resource-id`), new resources are appended.
 * - `exec:` functions need --allow-exec and run in the current directory; `image:` functions run
 *   through the exec config (fnr's shipped functions), through --runner (a function runner over
 *   gRPC, e.g. fnr serve), or else in a container runtime (lib/container: docker, podman,
 *   nerdctl, or fnr's own with runc or crun).
 * - Console output, results.yaml and the files written are kpt's; nothing is written when any
 *   function fails, and the package is written atomically (resourcelist/sink.ts).
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'

import type {YAMLMap} from 'yaml'

import type {ExecPaths} from './config/embedded.js'
import {displayImage} from './config/image-ref.js'
import {FnrError} from './errors.js'
import type {ContainerOptions} from './container/index.js'
import {imageContainers, isBlank, runFunction, splitExec, type EvalIO, type ImageContainers, type RunOutcome} from './eval.js'
import {ProcessLauncher} from './process/launcher.js'
import {missingKptfileError, readKptfile, validateError, type Kptfile} from './kptfile.js'
import * as rl from './resourcelist/index.js'
import {A} from './resourcelist/constants.js'
import {selectResources, type Selector} from './resourcelist/select.js'

export interface RenderOptions {
  /** The package directory (default "."). */
  dir: string
  allowExec: boolean
  /** "" (in place), "stdout", "unwrap" or a new directory. */
  output: string
  resultsDir?: string
  timeoutMs: number
  maxOutputBytes: number
  truncateOutput: boolean
  execPaths: ExecPaths & {defaultImagePrefix: string}
  /** Runs image functions through this runner (fnr test --runner, fnr render --runner). */
  imageRunner?: (image: string, input: Buffer) => Promise<RunOutcome>
  signal?: AbortSignal
  /**
   * Keep the nodes of the items a mutator gives back byte for byte instead of parsing them again
   * (resourcelist/reuse.ts; default true). The result is the same either way: false is for the
   * specs that check that.
   */
  reuseUnchanged?: boolean
  /**
   * kpt's container flags (--image-pull-policy, --allow-network), for `image:` functions the exec
   * config does not map, run in a container runtime (lib/container) when there is no imageRunner.
   */
  container?: Pick<ContainerOptions, 'pullPolicy' | 'network'>
}

/** The options of one render, with the container runtime its image functions share. */
type RenderRun = RenderOptions & {containers?: ImageContainers; launcher: ProcessLauncher}

interface PipelineFunction {
  image?: string
  exec?: string
  /** As the Kptfile writes it. */
  configPath?: string
  /** The configPath file as it is on disk. */
  configFile?: YAMLMap
  /** Absent when the Kptfile has none or an empty one (kpt then sends no functionConfig). */
  configMap?: Array<[string, string]>
  selectors: Selector[]
  exclude: Selector[]
}

interface Package {
  /** Relative to the root ('' for the root). */
  rel: string
  abs: string
  display: string
  kptfile: Kptfile
  children: Package[]
  mutators: PipelineFunction[]
  validators: PipelineFunction[]
}

export async function runRender(options: RenderOptions, io: EvalIO): Promise<void> {
  const containers = options.imageRunner ? undefined : imageContainers(options.container ?? {}, io.stderr)
  // The command's own launcher: every function of the pipeline starts through it.
  const launcher = ProcessLauncher.forCommand()
  try {
    await render({...options, containers, launcher}, io)
  } catch (err) {
    if (options.signal?.aborted && options.signal.reason instanceof FnrError) throw options.signal.reason
    throw err
  } finally {
    await containers?.close()
    await launcher.close()
  }
}

async function render(options: RenderRun, io: EvalIO): Promise<void> {
  await rl.checkPackageArgument(options.dir)
  const rootAbs = path.resolve(options.dir)
  if (options.output !== '' && !['stdout', 'unwrap'].includes(options.output)) await rl.checkSinkTarget(options.output)
  // Every Kptfile is decoded and validated as kpt does before any function runs
  // (src/lib/kptfile.ts): the root's first, as kpt reads it first.
  const decoded = new Map<string, Kptfile>()
  const rootText = await readRootKptfile(rootAbs)
  if (rootText !== undefined) decoded.set('', readKptfile(rootText, rootAbs))
  const list = await rl.readPackage([options.dir], {
    signal: options.signal,
    onKptfile: (rel, text) => {
      const dir = dirOf(rel)
      if (dir !== '' && !decoded.has(dir)) decoded.set(dir, readKptfile(text, path.join(rootAbs, dir)))
    },
  })
  const previousPaths = rl.sourcePathsOf(list.items)

  // Packages: the directories holding a Kptfile.
  const kptfiles = new Map<string, YAMLMap>()
  for (const item of list.items) {
    const p = rl.getAnnotation(item, A.path)!
    if (path.posix.basename(p) === 'Kptfile' && rl.getAnnotation(item, A.index) === '0') kptfiles.set(dirOf(p), item)
  }
  if (!kptfiles.has('') || !decoded.has('')) throw missingKptfileError(rootAbs)
  const rootName = path.basename(rootAbs)
  const packages = new Map<string, Package>()
  for (const rel of [...kptfiles.keys()].sort()) {
    const kptfile = decoded.get(rel)
    // A Kptfile readPackage found is one the hook decoded; the guard keeps the types honest.
    if (kptfile === undefined) throw missingKptfileError(path.join(rootAbs, rel))
    packages.set(rel, {rel, abs: rel === '' ? rootAbs : path.join(rootAbs, rel), display: rel === '' ? rootName : `${rootName}/${rel}`, kptfile, children: [], mutators: [], validators: []})
  }
  for (const pkg of packages.values()) {
    if (pkg.rel === '') continue
    packages.get(ownerOf(path.posix.dirname(pkg.rel) === '.' ? '' : path.posix.dirname(pkg.rel), packages))!.children.push(pkg)
  }
  // Each resource: relative to its package, package-path set (kyaml's sorted annotation order).
  const own = new Map<string, YAMLMap[]>()
  for (const item of list.items) {
    const p = rl.getAnnotation(item, A.path)!
    const owner = ownerOf(dirOf(p), packages)
    const local = owner === '' ? p : p.slice(owner.length + 1)
    const seq = rl.getAnnotation(item, A.seqIndent)
    rl.deleteAnnotation(item, A.path)
    rl.deleteAnnotation(item, A.seqIndent)
    rl.setAnnotation(item, A.legacyPath, local)
    rl.setAnnotation(item, A.packagePath, packages.get(owner)!.abs)
    rl.setAnnotation(item, A.path, local)
    if (seq !== undefined) rl.setAnnotation(item, A.seqIndent, seq)
    const bucket = own.get(owner) ?? []
    bucket.push(item)
    own.set(owner, bucket)
  }

  // kpt's run-time check: a configPath names a resource of the package itself.
  for (const pkg of packages.values()) resolvePipeline(pkg, own.get(pkg.rel) ?? [])

  const records: rl.FunctionRunRecord[] = []
  const state = {functions: 0}
  let items: YAMLMap[]
  try {
    items = await hydrate(packages.get('')!, own, options, io, records, state)
  } catch (err) {
    if (err instanceof FnrError && err.details.renderFailed) {
      await writeResults(options, io, records, 1)
    }
    throw err
  }
  if (options.signal?.aborted) throw options.signal.reason

  io.stderr.write(`Successfully executed ${state.functions} function(s) in ${packages.size} package(s).\n`)
  await writeResults(options, io, records, 0)
  // Back to paths relative to the root.
  for (const item of items) {
    const pkgPath = rl.getAnnotation(item, A.packagePath)
    const rel = pkgPath === undefined ? '' : path.relative(rootAbs, pkgPath).split(path.sep).join('/')
    if (rel.startsWith('..')) throw new FnrError('FunctionFailed', `function must not modify resources outside of package: package-path ${pkgPath}`)
    const p = rl.getAnnotation(item, A.path)
    if (rel !== '' && p !== undefined) {
      rl.setAnnotation(item, A.path, `${rel}/${p}`, 'FunctionFailed')
      rl.setAnnotation(item, A.legacyPath, `${rel}/${p}`, 'FunctionFailed')
    }
    rl.deleteAnnotation(item, A.packagePath)
  }
  if (options.output === 'stdout') io.stdout.write(rl.wrapForStdout({items}))
  else if (options.output === 'unwrap') io.stdout.write(rl.unwrapToYaml({items}))
  else if (options.output === '') await rl.writePackage(items, options.dir, {previousPaths, signal: options.signal})
  else await rl.sinkToDirectory({...rl.emptyResourceList(), items}, options.output, options.signal)
}

function dirOf(p: string): string {
  const d = path.posix.dirname(p)
  return d === '.' ? '' : d
}

/** The package a directory belongs to: the deepest package directory containing it. */
function ownerOf(dir: string, packages: Map<string, Package>): string {
  for (let d = dir; ; d = dirOf(d)) {
    if (packages.has(d)) return d
    if (d === '') return ''
  }
}

async function hydrate(pkg: Package, own: Map<string, YAMLMap[]>, options: RenderRun, io: EvalIO, records: rl.FunctionRunRecord[], state: {functions: number}): Promise<YAMLMap[]> {
  let items: YAMLMap[] = []
  for (const child of pkg.children.sort((a, b) => (a.rel < b.rel ? -1 : 1))) items.push(...(await hydrate(child, own, options, io, records, state)))
  items.push(...(own.get(pkg.rel) ?? []))
  const {mutators, validators} = pkg
  io.stderr.write(`Package ${JSON.stringify(pkg.display)}: \n`)
  for (const fn of mutators) {
    items = await runStep(fn, pkg, items, options, io, records, false)
    state.functions++
  }
  for (const fn of validators) {
    await runStep(fn, pkg, items.map((i) => i.clone() as YAMLMap), options, io, records, true)
    state.functions++
  }
  if (mutators.length + validators.length > 0) io.stderr.write('\n')
  return items
}

/** The package's functions, once kpt's run-time check of their configPath has passed. */
function resolvePipeline(pkg: Package, ownItems: YAMLMap[]): void {
  const resolve = (key: 'mutators' | 'validators'): PipelineFunction[] =>
    pkg.kptfile.pipeline[key].map((f, i) => {
      if (f.configPath !== '') {
        const clean = path.posix.normalize(f.configPath)
        if (!ownItems.some((it) => rl.getAnnotation(it, A.path) === clean)) {
          throw validateError(`pipeline.${key}[${i}].configPath`, 'functionConfig must exist in the current package', f.configPath)
        }
      }
      return {
        ...(f.image !== '' ? {image: f.image} : {exec: f.exec}),
        ...(f.configPath !== '' ? {configPath: f.configPath, configFile: f.configFile} : {}),
        ...(f.configMap.length > 0 ? {configMap: f.configMap} : {}),
        selectors: f.selectors,
        exclude: f.exclude,
      }
    })
  pkg.mutators = resolve('mutators')
  pkg.validators = resolve('validators')
}

/** The root package's Kptfile text, or undefined when there is none. */
async function readRootKptfile(rootAbs: string): Promise<string | undefined> {
  try {
    return await readFile(path.join(rootAbs, 'Kptfile'), 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined
    throw new FnrError('InvalidArgument', `cannot read ${path.join(rootAbs, 'Kptfile')}: ${(err as Error).message}`)
  }
}

async function runStep(fn: PipelineFunction, pkg: Package, items: YAMLMap[], options: RenderRun, io: EvalIO, records: rl.FunctionRunRecord[], validator: boolean): Promise<YAMLMap[]> {
  // An image is named as kpt names it (a bare name with the default prefix); the exec config is asked with it as given.
  const label = fn.image !== undefined ? displayImage(fn.image, options.execPaths.defaultImagePrefix) : fn.exec!
  if (fn.exec !== undefined && !options.allowExec) {
    throw new FnrError('Usage', 'must run with `--allow-exec` option to allow running function binaries')
  }
  if (fn.exec !== undefined) splitExec(fn.exec)
  // The selected resources (all when there are no selectors), tagged to merge the output back.
  const selection = selectResources(items, fn.selectors, fn.exclude)
  const {filtered, selected} = selection
  // kpt gives a validator the configPath file as it is on disk, and a mutator the package's
  // resource at exactly that path (as earlier mutators left it), else the file on disk too.
  let functionConfig: YAMLMap | null
  if (fn.configPath !== undefined) {
    const current = validator ? undefined : items.find((it) => rl.getAnnotation(it, A.packagePath) === pkg.abs && rl.getAnnotation(it, A.path) === fn.configPath)
    functionConfig = current ?? ((fn.configFile?.clone() as YAMLMap | undefined) ?? null)
  } else if (fn.configMap !== undefined) {
    functionConfig = rl.kptfileConfigMap(fn.configMap)
  } else functionConfig = null
  // kpt runs a validator directly, not in a kio pipeline: no resource or migration ids.
  if (validator) for (const item of selected) rl.deleteAnnotation(item, A.kptResourceId)
  // A mutator's unchanged items are kept rather than parsed again (resourcelist/reuse.ts).
  const reuse = !validator && options.reuseUnchanged !== false
  const input = await rl.buildFunctionInputInterruptible(selected, {functionConfig, migrationIds: !validator, keepItemTexts: reuse}, options.signal)
  io.stderr.write(`[RUNNING] ${JSON.stringify(label)}${filtered ? ` on ${selected.length} resource(s)` : ''}\n`)
  const run = fn.image !== undefined && options.imageRunner
    ? await options.imageRunner(fn.image, Buffer.from(input.text))
    : await runFunction({image: fn.image, exec: fn.exec, timeoutMs: options.timeoutMs, maxOutputBytes: options.maxOutputBytes, execPaths: options.execPaths, signal: options.signal, containers: options.containers, launcher: options.launcher}, label, Buffer.from(input.text))
  const stderrText = fn.image !== undefined ? rl.containerStderr(run.stderr.toString('utf8')) : run.stderr.toString('utf8')
  const record: rl.FunctionRunRecord = {...(fn.image ? {image: label} : {exec: fn.exec}), exitCode: run.exitCode, ...(stderrText ? {stderr: stderrText} : {})}
  const block = {truncate: options.truncateOutput}
  const failed = (err: FnrError): FnrError => new FnrError(err.kind, err.message, {cause: err.cause, details: {...err.details, renderFailed: true}})

  if (run.exitCode !== 0) {
    let results = run.results
    if (!results) {
      try {
        results = rl.readFunctionOutput(run.stdout).results
      } catch {
        results = []
      }
    }
    io.stderr.write(`[FAIL] ${JSON.stringify(label)} in ${rl.formatKptDuration(run.durationMs)}\n`)
    io.stderr.write(rl.formatResultsBlock(results, block))
    io.stderr.write(rl.formatStderrBlock(stderrText, block))
    io.stderr.write(`  Exit code: ${run.exitCode}\n\n`)
    records.push({...record, results})
    throw failed(new FnrError('FunctionFailed', `function ${JSON.stringify(label)} in package ${JSON.stringify(pkg.display)} exited with code ${run.exitCode}; nothing was written`, {details: {consoleShown: true}}))
  }
  let output: rl.FunctionOutput
  try {
    if (isBlank(run.stdout)) {
      throw new FnrError('FunctionFailed', `function ${JSON.stringify(label)} exited 0 but wrote nothing to stdout (a function must write a ResourceList; \`items: []\` deletes everything); nothing was written`)
    }
    output = await rl.readFunctionOutputInterruptible(run.stdout, input, options.signal, {packageRelativePaths: true, reuseUnchanged: reuse})
  } catch (err) {
    if (options.signal?.aborted) throw err
    io.stderr.write(`[FAIL] ${JSON.stringify(label)} in ${rl.formatKptDuration(run.durationMs)}\n`)
    io.stderr.write(rl.formatStderrBlock(stderrText, block))
    io.stderr.write('\n')
    records.push({...record, exitCode: 1, results: []})
    throw failed(err instanceof FnrError ? err : new FnrError('FunctionFailed', String(err)))
  }
  io.stderr.write(`[PASS] ${JSON.stringify(label)} in ${rl.formatKptDuration(run.durationMs)}\n`)
  io.stderr.write(rl.formatResultsBlock(output.results, block))
  io.stderr.write(rl.formatStderrBlock(stderrText, block))
  records.push({...record, results: output.results})

  // New resources belong to the package whose pipeline made them.
  for (const item of output.list.items) {
    if (rl.getAnnotation(item, A.packagePath) === undefined) rl.setAnnotation(item, A.packagePath, pkg.abs, 'FunctionFailed')
  }
  return selection.merge(output.list.items)
}

async function writeResults(options: RenderOptions, io: EvalIO, records: rl.FunctionRunRecord[], exitCode: number): Promise<void> {
  if (!options.resultsDir) return
  await rl.writeResultsFile(options.resultsDir, rl.buildFunctionResultList(records, exitCode))
  io.stderr.write(`For complete results, see ${path.join(options.resultsDir, 'results.yaml')}\n`)
}
