/**
 * Conformance with kpt (docs/conformance.md): kpt's own e2e cases for `kpt fn eval` and
 * `kpt fn render` (kptdev/kpt e2e/testdata/fn-eval and fn-render, fetched into the git-ignored
 * cache by scripts/kpt-e2e.mjs) run through the real kpt and through fnr, with the same function
 * binaries (the catalog peers: kpt through a `docker` shim, fnr through an exec config), each
 * judged by one port of kpt's e2e runner (kpt-runner.ts). Asserted: fnr passes every case kpt
 * passes here, or the case is on KNOWN_FAILURES (known-failures.ts, empty now), and no case on that list
 * passes any more. Cases whose functions are not built here are not runnable (counted with the
 * reason); cases kpt itself fails here are reported, not asserted.
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import path from 'node:path'

import {createKptShim, defaultFnrCommand, type KptShim} from '../../src/lib/fntest/scripts.js'
import {buildCatalogFunctions, CATALOG} from '../../scripts/catalog-peers.mjs'
import {KPT_E2E_DIR, KPT_E2E_SUITES, kptE2eFetched} from '../../scripts/kpt-e2e.mjs'
import {BUILD_TIMEOUT_MS} from '../catalog/support.js'
import {REPO_ROOT} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {discoverKptCases, type KptCase} from './cases.js'
import {DEFAULT_PREFIX, unrunnable, writeDockerShim, writeExecConfig} from './functions.js'
import {KNOWN_FAILURES} from './known-failures.js'
import {runKptCase, type Outcome, type Tool} from './kpt-runner.js'
import {categorize, formatReport, type CaseReport} from './report.js'
import {forEachLimit} from '../support/concurrency.js'

const KPT = '/usr/bin/kpt'
/** Cases run at once (each is a handful of short processes). */
const CONCURRENCY = 4

describe("conformance: kpt's e2e cases for fn eval and fn render, through kpt and through fnr", function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let fnrShim: KptShim | undefined
  const reports: CaseReport[] = []

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    if (!existsSync(KPT)) throw new Error(`kpt is not installed at ${KPT}: the conformance suite runs kpt 1.0.0-beta.56 beside fnr`)
    if (!kptE2eFetched()) throw new Error(`kpt's e2e cases are missing: ${path.relative(REPO_ROOT, KPT_E2E_DIR)} (fetched by scripts/kpt-e2e.mjs, which npm test's peer build runs)`)
    if (!existsSync(path.join(REPO_ROOT, 'dist', 'commands'))) throw new Error('dist/ is missing: build fnr first (npm run build)')
    const functionsDir = buildCatalogFunctions()
    const binaries = new Map(CATALOG.map((f) => [f.name, path.join(functionsDir, f.name)] as const).filter(([, bin]) => existsSync(bin)))

    // FNR_CONFORMANCE_FILTER=TEXT runs only the cases whose name contains TEXT (for a closer look).
    const filter = process.env.FNR_CONFORMANCE_FILTER
    const cases = (await discoverKptCases(KPT_E2E_DIR, KPT_E2E_SUITES)).filter((c) => !filter || c.name.includes(filter))
    const dir = await temp.make('fnr-conformance-bed-')
    await writeDockerShim(dir, binaries)
    const configPath = await writeExecConfig(path.join(dir, 'exec-config.yaml'), cases.flatMap((c) => c.images), binaries)
    fnrShim = await createKptShim(defaultFnrCommand(), {configPath, functionsDir, embedded: false, defaultImagePrefix: DEFAULT_PREFIX})
    const basePath = `${dir}${path.delimiter}${process.env.PATH ?? ''}`
    // KPT_FN_RUNTIME unset: docker, as kpt's own e2e runs.
    const env: Record<string, string> = {KPT_FN_RUNTIME: '', FNR_CONTENT_TYPE: ''}
    const kpt: Tool = {name: 'kpt', kptBin: KPT, path: basePath, env}
    const fnr: Tool = {name: 'fnr', kptBin: path.join(fnrShim.dir, 'kpt'), path: `${fnrShim.dir}${path.delimiter}${basePath}`, env}

    const work: Array<{c: KptCase; report: CaseReport; tool: Tool}> = []
    for (const c of cases) {
      const report: CaseReport = {name: c.name}
      reports.push(report)
      if (c.config.skip) report.notRun = 'skip: true in its config.yaml'
      else if (c.config.runtimes.length > 0) report.notRun = `runtimes: ${c.config.runtimes.join(', ')} (KPT_FN_RUNTIME is unset, as in kpt's runs without it)`
      else {
        const why = c.images.map((i) => unrunnable(i, binaries)).find((w) => w !== undefined)
        if (why) report.notRun = why
      }
      if (report.notRun) continue
      work.push({c, report, tool: kpt}, {c, report, tool: fnr})
    }
    await forEachLimit(work, CONCURRENCY, async ({c, report, tool}) => {
      const outcome: Outcome = await runKptCase(c, tool)
      if (tool === kpt) report.kpt = outcome
      else report.fnr = outcome
    })
    for (const r of reports) if (r.fnr && !r.fnr.passed) r.category = categorize(r.name, r.fnr)
    process.stdout.write(formatReport(reports))
  })

  after(async () => {
    await fnrShim?.remove()
    await temp.cleanup()
  })

  it('finds the cases (fn-eval and fn-render) and runs some through both tools', () => {
    if (process.env.FNR_CONFORMANCE_FILTER) {
      expect(reports, 'no case matches FNR_CONFORMANCE_FILTER').to.not.be.empty
      return
    }
    expect(reports.filter((r) => r.name.startsWith('fn-eval/')).length).to.be.greaterThan(20)
    expect(reports.filter((r) => r.name.startsWith('fn-render/')).length).to.be.greaterThan(40)
    expect(reports.filter((r) => r.kpt?.passed).length).to.be.greaterThan(10)
  })

  it('fnr passes every case kpt passes (the known list is empty; a listed case must still fail, so it cannot go stale)', () => {
    const failing = reports.filter((r) => r.kpt?.passed && !r.fnr?.passed && !(r.name in KNOWN_FAILURES))
    expect(failing.map((r) => `${r.name} [${r.category}]: ${r.fnr?.message?.split('\n')[0]}`)).to.deep.equal([])
    const filter = process.env.FNR_CONFORMANCE_FILTER
    const stale = Object.keys(KNOWN_FAILURES).filter((name) => {
      const r = reports.find((x) => x.name === name)
      if (!r && filter && !name.includes(filter)) return false
      return !r || !r.kpt?.passed || r.fnr?.passed
    })
    expect(stale).to.deep.equal([])
  })
})
