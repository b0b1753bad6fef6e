/**
 * The catalog's own examples (../shared/compat/catalog-examples, unmodified: kpt's e2e layout,
 * render cases by default) through `fnr test`, with their `gcr.io/kpt-fn/<name>:unstable` images
 * mapped by an exec config to the real catalog functions built as Go peers (apply-setters,
 * set-namespace, starlark). Run where they are (fnr test works on scratch copies), locally and
 * through a running `fnr serve` (--runner, as Porch would run them).
 *
 * The other examples need functions whose modules the module proxy refuses
 * (scripts/catalog-peers.mjs MISSING) or that Porch does not ship; nothing is asserted about
 * their outcome, they are only listed (BLOCKED) so a new example is noticed.
 */
import {expect} from 'chai'
import {readdir} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {BUILD_TIMEOUT_MS, catalogBed, EXAMPLES, type CatalogBed} from './support.js'

/** The examples of the three built functions: every image of their pipelines is one of them. */
const RUNNABLE = ['apply-setters-simple', 'set-namespace-simple', 'starlark-inject-sidecar', 'starlark-set-namespace']

/** Example -> the function it needs that is not built here. */
const BLOCKED: Record<string, string> = {
  'apply-replacements-simple': 'apply-replacements (not shipped by Porch)',
  'ensure-name-substring-prefix': 'ensure-name-substring (module refused by the proxy)',
  'ensure-name-substring-suffix': 'ensure-name-substring (module refused by the proxy)',
  'remove-local-config-resources-imperative': 'remove-local-config-resources (not shipped by Porch)',
  'search-replace-simple': 'search-replace (module refused by the proxy)',
  'set-annotations-simple': 'set-annotations (module refused by the proxy)',
  'set-image-simple': 'set-image (module refused by the proxy)',
  'set-labels-simple': 'set-labels (module refused by the proxy)',
  'set-project-id-simple': 'set-project-id (module refused by the proxy)',
  'upsert-resource-simple': 'upsert-resource (module refused by the proxy)',
}

describe('catalog examples through fnr test (render cases, images mapped to the catalog peers)', function () {
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
    expect(bed.built.sort()).to.deep.equal(['apply-setters', 'set-namespace', 'starlark'])
  })

  it('the four examples pass unmodified against their expected diff, with the exec config mapping gcr.io/kpt-fn/<name>:unstable', async function () {
    this.timeout(5 * 60_000)
    const r = await runCli(['test', ...cases(), '--config', bed.configPath, '--functions', bed.functionsDir, '--json'], {timeout: 240_000})
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    const summary = JSON.parse(r.stdout) as {passed: number; failed: number; cases: Array<{dir: string; function: string; status: string}>}
    expect(summary).to.include({passed: 4, failed: 0})
    expect(summary.cases.map((c) => [path.basename(c.dir), c.function, c.status])).to.deep.equal(RUNNABLE.map((n) => [n, 'render', 'passed']))
    // The mapping is what runs them: the functions fnr ships know no gcr.io/kpt-fn image.
    const unmapped = await runCli(['test', cases()[0]!], {timeout: 120_000})
    expect(unmapped.exitCode).to.equal(1)
    expect(unmapped.stdout + unmapped.stderr).to.contain('gcr.io/kpt-fn/apply-setters:unstable')
  })

  it('and through a running fnr serve (--runner), as Porch would render them', async function () {
    this.timeout(5 * 60_000)
    serve = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
    const r = await runCli(['test', ...cases(), '--runner', `127.0.0.1:${serve.port}`], {timeout: 240_000})
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('4 passed, 0 failed')
  })
})
