/**
 * Porch's own e2e API suite (test/e2e/api of Porch v1.5.8, built as a test binary by scripts/porch-peers.mjs) run
 * against porch-server with fnr serve as its function runner, then against the same setup with Porch's own runner
 * (func/server v1.5.8) in its place (docs/porch-swap.md, "Porch's own e2e API suite"). What the suite expects, set up
 * as it expects it:
 * - the default kubeconfig (KUBECONFIG: the project's control plane, etcd, kube-apiserver with the aggregation layer,
 *   kube-controller-manager) and Porch's API there, porch-server a process on 127.0.0.1:443 (./porch-server.ts);
 * - Gitea on localhost:3000, user nephio, with the repositories nephio/porch-test (one commit on main) and
 *   nephio/test-blueprints (Porch's test blueprints bundle, every branch and tag): ./gitea.ts;
 * - in its local mode, no function-runner Service in porch-system (its pod-evaluator and render-failure tests skip
 *   themselves); in its runner mode, such a Service (with nothing behind it), and those tests run too (MODES below).
 * Both runners run the exec runtime on one config.yaml: the catalog binaries (functions/catalog.yaml), plus the
 * suite's two images no Porch config maps, set-annotations:v0.1.4 and starlark:v0.3.0, on the catalog's
 * set-annotations and starlark binaries (their versions differ; docs/porch-swap.md says which).
 * Each run gets a fresh control plane, fresh repositories and a fresh porch-server. The claim checked, in each mode:
 * every test that passes with Porch's runner passes with fnr.
 *
 * Opt-in (`npm run porch-e2e`, scripts/porch-e2e.mjs).
 */
import {expect} from 'chai'
import {createWriteStream} from 'node:fs'
import {mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {loadavg, tmpdir} from 'node:os'
import path from 'node:path'

import {execa} from 'execa'
import {parse, stringify} from 'yaml'

import {buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {PORCH_E2E_PKG, buildPorchE2e, buildPorchServer} from '../../scripts/porch-peers.mjs'
import {createBareRepo, startGiteaStandIn, type GiteaStandIn} from './gitea.js'
import {porchServerFiles, type PorchServerFiles} from './porch-files.js'
import {git, installPorchApi, startPorchServer, waitForPorchApi, type PorchServer} from './porch-server.js'
import {runnerBed, startPorchRunner, type PorchRunner} from '../porch-side-by-side/support.js'
import {startControlPlane, type ControlPlane} from '../support/cluster/controlplane.js'
import {adminClient} from '../support/cluster/shared.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {onTeardown} from '../support/teardown.js'

/** What the suite hard-codes (its suiteutils package): Gitea's port, owner, user and password, and the two repositories. */
const GITEA = {port: 3000, owner: 'nephio', user: 'nephio', password: 'secret'}
const TEST_REPO = 'porch-test'
const BLUEPRINTS_REPO = 'test-blueprints'
const REGISTRY = 'ghcr.io/kptdev/krm-functions-catalog'
/** The suite's images that no Porch config.yaml maps, on the catalog binary of the same function. */
const EXTRA_IMAGES: Record<string, string[]> = {'set-annotations': [`${REGISTRY}/set-annotations:v0.1.4`], starlark: [`${REGISTRY}/starlark:v0.3.0`]}
/**
 * The suite's two modes. `local`: no function-runner Service in porch-system (a porch-server run on a developer's host),
 * the pod-evaluator and render-failure tests skip themselves. `runner`: such a Service with a selector exists, so the
 * suite takes its runner for an in-cluster one and runs those nine too, and TestLargePackageRevision adds a
 * set-annotations:v0.1.5 mutator to its 5 MiB package. FNR_PORCH_E2E_MODES=local (or runner) runs one.
 */
type Mode = 'local' | 'runner'
const MODES = (process.env.FNR_PORCH_E2E_MODES ?? 'local,runner').split(',').map((m) => m.trim()).filter((m): m is Mode => m === 'local' || m === 'runner')
/** Room for the whole suite on two shared cores (Porch's CI gives `go test` its default of 10 minutes on larger machines). */
const SUITE_TIMEOUT_MIN = 75

type Result = 'pass' | 'fail' | 'skip'

interface TestOutcome {
  result: Result
  seconds: number
  /** The test's own output (its assertion messages), for failures. */
  output: string[]
}

interface SuiteRun {
  runner: string
  /** TestE2E/<name> (and deeper sub-tests) → outcome. */
  tests: Map<string, TestOutcome>
  exitCode: number | undefined
  seconds: number
  load: string
  /** test2json's raw stream, kept in the work folder while the run lasts. */
  log: string
}

/** Reads `go tool test2json` events into per-test outcomes. */
export function parseTest2Json(text: string): Map<string, TestOutcome> {
  const tests = new Map<string, TestOutcome>()
  const outputs = new Map<string, string[]>()
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue
    let e: {Action?: string; Test?: string; Elapsed?: number; Output?: string}
    try {
      e = JSON.parse(line) as typeof e
    } catch {
      continue
    }
    if (!e.Test) continue
    if (e.Action === 'output' && e.Output !== undefined) {
      const o = outputs.get(e.Test) ?? []
      o.push(e.Output.replace(/\n$/, ''))
      outputs.set(e.Test, o)
    } else if (e.Action === 'pass' || e.Action === 'fail' || e.Action === 'skip') {
      tests.set(e.Test, {result: e.Action, seconds: e.Elapsed ?? 0, output: outputs.get(e.Test) ?? []})
    }
  }
  return tests
}

/** The suite's tests (TestE2E/<method>), without the suite itself or table-driven sub-tests. */
const topTests = (run: SuiteRun): Array<[string, TestOutcome]> => [...run.tests].filter(([name]) => name.split('/').length === 2)

/** A failure's gist: the suite's ERROR/FATAL lines and testify's Error lines of the test and its failed sub-tests, short. */
function gist(run: SuiteRun, name: string): string {
  const own = [...run.tests].filter(([n, o]) => n === name || (n.startsWith(`${name}/`) && o.result === 'fail')).flatMap(([, o]) => o.output)
  const lines = own.map((l) => l.trim()).filter((l) => /ERROR:|FATAL:|Error:|Messages:|panic:|timed out/.test(l))
  return (lines.length > 0 ? lines : own.slice(-3).map((l) => l.trim())).slice(0, 6).map((l) => l.slice(0, 400).replaceAll('|', '/')).join(' / ')
}

describe("Porch's own e2e API suite (v1.5.8) against porch-server with fnr serve as its runner, and with Porch's", function () {
  this.timeout((SUITE_TIMEOUT_MIN + 15) * 60_000)
  if (MODES.length === 0) throw new Error(`FNR_PORCH_E2E_MODES names no mode (local, runner): ${process.env.FNR_PORCH_E2E_MODES}`)
  let work: string
  let files: PorchServerFiles
  let e2e: {test: string; test2json: string}
  let porchBinary: string
  let gitea: GiteaStandIn | undefined
  let fnr: ServeProcess | undefined
  let porchRunner: PorchRunner | undefined
  let cp: ControlPlane | undefined
  let client: KubeRestClient | undefined
  let server: PorchServer | undefined
  /** Ends the running suite binary and test2json (their process group), while they run. */
  let stopSuite: (() => void) | undefined
  const runs: Record<string, SuiteRun> = {}

  before(async function () {
    // The suite comes from Porch's module, so do Porch's CRDs and APIService by default (./porch-files.ts).
    files = porchServerFiles(process.env.FNR_PORCH_FILES ?? 'module')
    porchBinary = buildPorchServer().porch
    e2e = buildPorchE2e()
    const runner = buildPorchRunner().server
    work = await mkdtemp(path.join(tmpdir(), 'fnr-porch-e2e-api-'))
    gitea = await startGiteaStandIn({root: path.join(work, 'gitea'), ...GITEA})
    const bed = await runnerBed(path.join(work, 'runner'))
    const config = parse(await readFile(bed.configPath, 'utf8')) as {functions: Array<{function: string; images: string[]}>}
    for (const [fn, images] of Object.entries(EXTRA_IMAGES)) {
      const entry = config.functions.find((e) => e.function === fn)
      if (!entry) throw new Error(`the runner's config.yaml maps no ${fn} (functions/catalog.yaml)`)
      entry.images.push(...images)
    }
    await writeFile(bed.configPath, stringify(config))
    // fnr first: porch-server's client backs off for ~40 s when its runner is not up yet (docs/porch-swap.md).
    fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod'])
    porchRunner = await startPorchRunner(runner, bed)
  })

  const stopCluster = async (): Promise<void> => {
    await server?.stop()
    server = undefined
    client?.close()
    client = undefined
    await cp?.stop()
    cp = undefined
  }

  /** Everything this suite started, stopped; safe to call twice (also the run's teardown on a signal). */
  const cleanup = async (): Promise<void> => {
    stopSuite?.()
    await stopCluster()
    if (fnr && fnr.child.exitCode === null && fnr.child.signalCode === null) {
      fnr.child.kill('SIGTERM')
      await fnr.exited
    }
    await porchRunner?.stop()
    await gitea?.stop()
    gitea = undefined
    // FNR_PORCH_E2E_KEEP=1 keeps the work folder (test2json and porch-server logs of each run) for a look afterwards.
    if (work && process.env.FNR_PORCH_E2E_KEEP === '1') console.log(`      kept ${work}`)
    else if (work) await rm(work, {recursive: true, force: true})
  }
  onTeardown("Porch's e2e API suite", cleanup)

  after(cleanup)

  /** Gitea's two repositories as Porch's setup script leaves them (fresh for each run). */
  async function seedGitea(): Promise<void> {
    await rm(path.join(work, 'gitea'), {recursive: true, force: true})
    await createBareRepo(gitea!.repoDir(TEST_REPO), '')
    await git(['clone', '-q', '--bare', files.blueprintsBundle, gitea!.repoDir(BLUEPRINTS_REPO)])
  }

  /** A fresh control plane, Porch's API, porch-server calling `runner`; then the suite in `mode`, through test2json. */
  async function runSuite(label: string, mode: Mode, runner: string): Promise<SuiteRun> {
    const dir = path.join(work, label)
    await mkdir(dir, {recursive: true})
    await seedGitea()
    cp = await startControlPlane({dir: path.join(dir, 'cluster'), kubelet: false, scheduler: false})
    client = adminClient(cp)
    await installPorchApi(cp, client, files)
    // What the suite looks for to decide its runner is in the cluster: a Service function-runner with a selector in
    // porch-system. Nothing backs it and nothing calls it (porch-server calls its --function-runner).
    if (mode === 'runner') {
      await client.create('/api/v1/namespaces/porch-system/services', {apiVersion: 'v1', kind: 'Service', metadata: {name: 'function-runner'}, spec: {selector: {app: 'function-runner'}, ports: [{port: 9445, targetPort: 9445}]}})
    }
    // With CERT_STORAGE_DIR set, as Porch's deployment sets it, porch-server registers its validating webhooks (deletion
    // of PackageRevisions, Repository changes) and serves them on port 8443 of every address (Porch's code: ":8443").
    // WEBHOOK_HOST=localhost (Porch's local-development setting) registers the deletion webhook by URL,
    // https://localhost:8443/validate-deletion. KUBECONFIG: the webhook setup reads the default kubeconfig.
    server = await startPorchServer(porchBinary, cp, path.join(dir, 'porch-server'), runner, {KUBECONFIG: cp.kubeconfigPath, CERT_STORAGE_DIR: path.join(dir, 'webhook-certs'), WEBHOOK_HOST: 'localhost'})
    await waitForPorchApi(server, client)
    const log = path.join(dir, 'test2json.log')
    const out = createWriteStream(log)
    const started = performance.now()
    const r = execa(e2e.test2json, ['-t', '-p', PORCH_E2E_PKG, e2e.test,
      '-test.v=test2json', '-test.run=^TestE2E$', `-test.timeout=${SUITE_TIMEOUT_MIN}m`], {
      cwd: dir,
      env: {PATH: process.env.PATH, HOME: dir, KUBECONFIG: cp.kubeconfigPath, E2E: '1'},
      extendEnv: false,
      reject: false,
      buffer: false,
      // A group of its own: test2json runs the suite binary as its child, and a teardown ends both.
      detached: true,
      timeout: (SUITE_TIMEOUT_MIN + 5) * 60_000,
    })
    stopSuite = () => {
      try {
        if (r.pid) process.kill(-r.pid, 'SIGKILL')
      } catch {
        // the group has ended
      }
    }
    r.stdout?.pipe(out)
    let stderr = ''
    r.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    const done = await r
    stopSuite = undefined
    await new Promise<void>((resolve) => out.end(resolve))
    const text = await readFile(log, 'utf8')
    const run: SuiteRun = {runner: label, tests: parseTest2Json(text), exitCode: done.exitCode, seconds: Math.round((performance.now() - started) / 1000), load: loadavg().map((l) => l.toFixed(2)).join(' '), log}
    await writeFile(path.join(dir, 'porch-server.log'), server.log())
    await stopCluster()
    expect(run.tests.get('TestE2E'), `the suite ran (exit ${done.exitCode}):\n${stderr.slice(-2000)}\n${text.slice(-3000)}`).to.not.equal(undefined)
    return run
  }

  function table(run: SuiteRun): string {
    const tests = topTests(run)
    const count = (r: Result): number => tests.filter(([, o]) => o.result === r).length
    const rows = tests.map(([name, o]) => `      | ${name.slice('TestE2E/'.length)} | ${o.result} | ${o.seconds.toFixed(1)} |${o.result === 'fail' ? ` ${gist(run, name)}` : ''}`)
    return [
      `\n      ${run.runner}: ${count('pass')} passed, ${count('fail')} failed, ${count('skip')} skipped of ${tests.length} in ${run.seconds} s (load average after: ${run.load})`,
      '      | test | result | s | failure |', '      |---|---|---|---|', ...rows,
    ].join('\n')
  }

  /** fnr's request log: one JSON line per EvaluateFunction call. */
  const fnrCalls = (): Array<{image: string; code: number; evaluator: string}> =>
    fnr!.stderr().split('\n').filter((l) => l.startsWith('{') && l.includes('"ms"') && l.includes('"image"')).map((l) => JSON.parse(l) as {image: string; code: number; evaluator: string})

  for (const mode of MODES) {
    const key = (runner: string): string => `${mode}-${runner}`

    it(`${mode} mode: runs with fnr serve as the function runner`, async () => {
      const before = fnrCalls().length
      const run = await runSuite(key('fnr'), mode, `127.0.0.1:${fnr!.port}`)
      runs[key('fnr')] = run
      console.log(table(run))
      const calls = fnrCalls().slice(before)
      const byImage = new Map<string, number>()
      for (const c of calls) byImage.set(`${c.image} (${c.evaluator}, code ${c.code})`, (byImage.get(`${c.image} (${c.evaluator}, code ${c.code})`) ?? 0) + 1)
      console.log(`      fnr served ${calls.length} EvaluateFunction calls: ${[...byImage].map(([k, n]) => `${n} × ${k}`).join(', ')}`)
      expect(topTests(run).length).to.be.greaterThan(0)
    })

    it(`${mode} mode: runs with Porch's own runner in its place`, async () => {
      const fnrBefore = fnrCalls().length
      const run = await runSuite(key('porch'), mode, `127.0.0.1:${porchRunner!.port}`)
      runs[key('porch')] = run
      console.log(table(run))
      // porch-server called Porch's runner this time, not fnr.
      expect(fnrCalls().length).to.equal(fnrBefore)
      expect(topTests(run).length).to.be.greaterThan(0)
    })

    it(`${mode} mode: every test that passes with Porch's runner passes with fnr`, () => {
      const withFnr = runs[key('fnr')]
      const withPorch = runs[key('porch')]
      expect(withFnr, 'the fnr run').to.not.equal(undefined)
      expect(withPorch, "the Porch's runner run").to.not.equal(undefined)
      const fnrTests = withFnr!.tests
      const rows = topTests(withPorch!).map(([name, o]) => `      | ${name.slice('TestE2E/'.length)} | ${fnrTests.get(name)?.result ?? 'absent'} | ${o.result} |`)
      console.log(`\n      ${mode} mode\n      | test | fnr | Porch's runner |\n      |---|---|---|\n${rows.join('\n')}`)
      const regressions = topTests(withPorch!).filter(([name, o]) => o.result === 'pass' && fnrTests.get(name)?.result !== 'pass')
      expect(regressions.map(([name]) => `${name}: ${fnrTests.get(name)?.result ?? 'absent'} with fnr${fnrTests.get(name) ? ` (${gist(withFnr!, name)})` : ''}`)).to.deep.equal([])
    })
  }
})
