/**
 * The catalog's own examples (../shared/compat/catalog-examples, unmodified: kpt's e2e layout,
 * render cases by default, eval cases where `.expected/config.yaml` says so) with their
 * `gcr.io/kpt-fn/<name>:unstable` images mapped by an exec config to the ten real catalog
 * functions Porch ships, built as Go peers (scripts/catalog-peers.mjs: three from the module
 * proxy, seven from the catalog's source). Through `fnr test` (fnr test works on scratch copies),
 * locally and through a running `fnr serve` (--runner, as Porch would run them), and through
 * `fnr render` itself, compared with `kpt fn render` running the same binaries as `exec:`
 * functions. (`fnr eval` on every one of them, against `kpt fn eval --exec`: catalog.test.ts.)
 *
 * The other examples need functions that Porch does not ship; nothing is asserted about their
 * outcome, they are only listed (BLOCKED) so a new example is noticed.
 */
import {expect} from 'chai'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {execa} from 'execa'
import {parse} from 'yaml'

import {CATALOG} from '../../scripts/catalog-peers.mjs'
import {runCli} from '../support/cli.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {requireShared} from '../support/shared.js'
import {TempDirs} from '../support/tmp.js'
import {BUILD_TIMEOUT_MS, catalogBed, EXAMPLES, KPT, readConfig, tree, type CatalogBed} from './support.js'

/** The examples of the ten built functions: every image of their pipelines (or their eval case) is one of them. */
const RUNNABLE = [
  'apply-setters-simple',
  'ensure-name-substring-prefix',
  'ensure-name-substring-suffix',
  'search-replace-simple',
  'set-annotations-simple',
  'set-image-simple',
  'set-labels-simple',
  'set-namespace-simple',
  'set-project-id-simple',
  'starlark-inject-sidecar',
  'starlark-set-namespace',
  'upsert-resource-simple',
]

/** Example -> the function it needs that is not built here. */
const BLOCKED: Record<string, string> = {
  'apply-replacements-simple': 'apply-replacements (not shipped by Porch)',
  'remove-local-config-resources-imperative': 'remove-local-config-resources (not shipped by Porch)',
}


/**
 * kpt fn render (not eval) adds its attribution annotation, `cnrm.cloud.google.com/blueprint:
 * 'kpt-fn'` (kpt 1.0.0-beta.56; `krm-fn` in beta.61, which Porch v1.5.8 renders with), to every
 * Config Connector resource (an apiVersion with `.cnrm.`) unless KPT_DISABLE_ATTRIBUTION
 * (beta.61: KRM_DISABLE_ATTRIBUTION) is set; fnr render does not add it. The comparisons opt kpt
 * out; the difference itself is pinned on set-project-id-simple (its resources are Config
 * Connector's) until it is decided.
 */
const NO_ATTRIBUTION = {KPT_DISABLE_ATTRIBUTION: '1', KRM_DISABLE_ATTRIBUTION: '1'}

/** Examples without a Kptfile: an eval case only, nothing for `kpt fn render` or `fnr render` to run. */
const NO_KPTFILE = ['upsert-resource-simple']

describe('catalog examples through fnr test (render cases, images mapped to the catalog peers)', function () {
  before(() => requireShared('compat/catalog-examples'))
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let bed: CatalogBed
  let serve: ServeProcess | undefined

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    bed = await catalogBed(await temp.make('fnr-catalog-examples-'))
  })
  after(async () => {
    if (serve) {
      serve.child.kill('SIGTERM')
      await serve.exited
    }
    await temp.cleanup()
  })

  const cases = (): string[] => RUNNABLE.map((n) => path.join(EXAMPLES, n))

  it('lists every example: runnable with the built functions, or blocked (with the function it needs)', async () => {
    const all = (await readdir(EXAMPLES, {withFileTypes: true})).filter((e) => e.isDirectory()).map((e) => e.name).sort()
    expect([...RUNNABLE, ...Object.keys(BLOCKED)].sort()).to.deep.equal(all)
    expect([...bed.built].sort()).to.deep.equal(CATALOG.map((f) => f.name).sort())
    expect(bed.built).to.have.length(10)
    // Which source answered, per function (docs/catalog-functions.md).
    console.log(`      built: ${CATALOG.map((f) => `${f.name} ${f.version} (${f.source}${f.sdkRewrite ? ', SDK path rewritten' : ''})`).join(', ')}`)
  })

  it('the twelve examples pass unmodified against their expected diff (ensure-name-substring\'s rename the Kptfile with a rename-only git section), with the exec config mapping gcr.io/kpt-fn/<name>:unstable', async function () {
    this.timeout(10 * 60_000)
    const r = await runCli(['test', ...cases(), '--config', bed.configPath, '--functions', bed.functionsDir, '--json'], {timeout: 240_000})
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    const summary = JSON.parse(r.stdout) as {passed: number; failed: number; cases: Array<{dir: string; function: string; status: string}>}
    expect(summary, r.stdout).to.include({passed: RUNNABLE.length, failed: 0})
    expect(summary.cases.map((c) => [path.basename(c.dir), c.status])).to.deep.equal(RUNNABLE.map((n) => [n, 'passed']))
    console.log(`      fnr test: ${summary.cases.map((c) => `${path.basename(c.dir)} (${c.function})`).join(', ')}`)
    // The mapping is what runs them: the functions fnr ships know no gcr.io/kpt-fn image.
    const unmapped = await runCli(['test', cases()[0]!], {timeout: 120_000})
    expect(unmapped.exitCode).to.equal(1)
    expect(unmapped.stdout + unmapped.stderr).to.contain('gcr.io/kpt-fn/apply-setters:unstable')
  })

  it('and through a running fnr serve (--runner), as Porch would render them', async function () {
    this.timeout(10 * 60_000)
    serve = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
    const r = await runCli(['test', ...cases(), '--runner', `127.0.0.1:${serve.port}`], {timeout: 240_000})
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain(`${RUNNABLE.length} passed, 0 failed`)
  })

  it('fnr render gives every example with a Kptfile the package kpt fn render gives with the same binaries as exec: functions, and the render cases their expected diff', async function () {
    this.timeout(10 * 60_000)
    const work = await temp.make('fnr-catalog-render-')
    const rendered: string[] = []
    const config = await readConfig(bed.configPath)
    for (const name of RUNNABLE.filter((n) => !NO_KPTFILE.includes(n))) {
      const src = path.join(EXAMPLES, name)
      const [kptPkg, fnrPkg, expected] = ['kpt', 'fnr', 'expected'].map((d) => path.join(work, name, d))
      for (const d of [kptPkg, fnrPkg, expected]) await cp(src, d, {recursive: true})
      // kpt runs the same binaries: each `image:` of the pipeline becomes `exec: <binary>`, and back after.
      const kptfile = path.join(kptPkg, 'Kptfile')
      const original = await readFile(kptfile, 'utf8')
      const images = new Map<string, string>()
      const pipeline = (parse(original) as {pipeline: {mutators?: Array<{image: string}>; validators?: Array<{image: string}>}}).pipeline
      for (const fn of [...(pipeline.mutators ?? []), ...(pipeline.validators ?? [])]) {
        const match = config.find((e) => e.images.includes(fn.image))
        expect(match, `${name}: ${fn.image} is mapped`).to.not.equal(undefined)
        images.set(fn.image, bed.binary[match!.function]!)
      }
      let execKptfile = original
      for (const [image, binary] of images) execKptfile = execKptfile.replaceAll(`image: ${image}`, `exec: ${binary}`)
      await writeFile(kptfile, execKptfile)
      await cp(kptPkg, path.join(work, name, 'kpt-source'), {recursive: true})
      const k = await execa(KPT, ['fn', 'render', kptPkg, '--allow-exec'], {reject: false, timeout: 120_000, env: NO_ATTRIBUTION})
      expect(k.exitCode, `${name}: kpt fn render\n${k.stderr}`).to.equal(0)
      // Back to the images, wherever the Kptfile is now (ensure-name-substring renames it, as the example expects).
      for (const [rel, text] of Object.entries(await tree(kptPkg))) {
        let back = text
        for (const [image, binary] of images) back = back.replaceAll(`exec: ${binary}`, `image: ${image}`)
        if (back !== text) await writeFile(path.join(kptPkg, rel), back)
      }

      const r = await runCli(['render', fnrPkg, '--config', bed.configPath, '--functions', bed.functionsDir], {timeout: 120_000})
      expect(r.exitCode, `${name}: fnr render\n${r.stdout}${r.stderr}`).to.equal(0)
      expect(await tree(fnrPkg), `${name}: fnr render vs kpt fn render`).to.deep.equal(await tree(kptPkg))

      // A render case (no testType: eval): the example's own diff.patch is what render must change.
      let testType: string | undefined
      try {
        testType = (parse(await readFile(path.join(src, '.expected', 'config.yaml'), 'utf8')) as {testType?: string} | null)?.testType
      } catch {
        testType = undefined
      }
      if (testType !== 'eval') {
        const patch = await readFile(path.join(src, '.expected', 'diff.patch'), 'utf8')
        await execa('git', ['apply', '--unsafe-paths', `--directory=${path.relative(process.cwd(), expected)}`, '-'], {input: patch})
        const want = await tree(expected)
        const got = await tree(fnrPkg)
        for (const t of [want, got]) delete t['.expected/diff.patch']
        expect(got, `${name}: fnr render vs the example's diff.patch`).to.deep.equal(want)
      }
      rendered.push(`${name}${testType === 'eval' ? ' (eval case: compared with kpt only)' : ''}`)
    }
    console.log(`      fnr render: ${rendered.join(', ')}`)

    // The attribution difference: kpt's render without the opt-out vs fnr render's package above.
    const attributed = path.join(work, 'attribution')
    await cp(path.join(work, 'set-project-id-simple', 'kpt-source'), attributed, {recursive: true})
    const a = await execa(KPT, ['fn', 'render', attributed, '--allow-exec'], {reject: false, timeout: 120_000, env: {KPT_DISABLE_ATTRIBUTION: '', KRM_DISABLE_ATTRIBUTION: ''}})
    expect(a.exitCode, a.stderr).to.equal(0)
    const kptResources = await readFile(path.join(attributed, 'resources.yaml'), 'utf8')
    const fnrResources = await readFile(path.join(work, 'set-project-id-simple', 'fnr', 'resources.yaml'), 'utf8')
    expect(kptResources.match(/cnrm\.cloud\.google\.com\/blueprint: 'kpt-fn'/g)).to.have.length(3)
    expect(fnrResources).to.not.contain('cnrm.cloud.google.com/blueprint')
    expect(kptResources.replaceAll("\n    cnrm.cloud.google.com/blueprint: 'kpt-fn'", '').replace(/\n {2}annotations:(?=\nspec:)/, '')).to.equal(fnrResources)
    expect(rendered).to.have.length(RUNNABLE.length - NO_KPTFILE.length)
  })
})
