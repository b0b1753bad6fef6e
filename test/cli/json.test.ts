/**
 * --json on every command whose output is data (fnr eval, fnr test, fnr pods ls|gc|warm, fnr image
 * inspect), through the built CLI (dist/, `node scripts/build.mjs` first): the data as one JSON
 * object on stdout; a failure as {"error": {kind, message, exitCode}} on stdout (beside the report
 * when the command has one), with the same exit code and stderr line as the same run without
 * --json. fnr eval keeps stdout for the ResourceList: --json with the resources on stdout is a
 * usage error.
 */
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'
import {execa} from 'execa'

import {runCli, type CliResult} from '../support/cli.js'
import {BIN_RUN} from '../support/serve.js'
import {namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {seedImages} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../support/tmp.js'

interface ErrorJson {
  kind: string
  message: string
  exitCode: number
}

/** stdout is exactly one JSON object (JSON.parse refuses anything before or after it). */
function onlyJson(r: CliResult): Record<string, unknown> {
  const value = JSON.parse(r.stdout) as unknown
  expect(value, r.stdout).to.be.an('object').and.not.be.an('array')
  return value as Record<string, unknown>
}

/** The last `fnr: ` line on stderr, without its "(see --help)". */
function errorLine(r: CliResult): string {
  const line = r.stderr.trimEnd().split('\n').filter((l) => l.startsWith('fnr: ')).at(-1)
  expect(line, r.stderr).to.be.a('string')
  return line!.replace(/^fnr: /, '').replace(/ \(see --help\)$/, '')
}

/**
 * Runs `args` with and without --json: the same exit code (`code`) and error line; with --json,
 * stdout is the error as JSON (and `extra` keys of a report beside it), without it, `plainStdout`.
 * --json has fnr's exit codes: eval and render (kpt's codes by default) run plain with
 * FNR_EXIT_CODES=fnr to compare.
 */
async function expectJsonError(args: string[], code: number, kind: string, options: {extraKeys?: string[]; plainStdout?: string; env?: NodeJS.ProcessEnv} = {}): Promise<Record<string, unknown>> {
  const plain = await runCli(args, {env: {...(['eval', 'render'].includes(args[0]!) ? {FNR_EXIT_CODES: 'fnr'} : {}), ...options.env}})
  const json = await runCli([...args, '--json'], {env: options.env})
  expect(plain.exitCode, plain.stderr).to.equal(code)
  expect(json.exitCode, json.stderr).to.equal(code)
  if (options.plainStdout !== undefined) expect(plain.stdout).to.equal(options.plainStdout)
  const out = onlyJson(json)
  expect(Object.keys(out).sort()).to.deep.equal([...(options.extraKeys ?? []), 'error'].sort())
  expect(out.error).to.deep.equal({kind, message: errorLine(plain), exitCode: code} satisfies ErrorJson)
  expect(errorLine(json)).to.equal(errorLine(plain))
  return out
}

/** Polls `check` until it holds (a child's pid file written), failing after 60 s. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const end = Date.now() + 60_000
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: "1"\n'

describe('--json: data or the error as one JSON object on stdout, exit codes as without it', function () {
  this.timeout(180_000)
  const temp = new TempDirs()
  let dir: string

  before(async () => {
    dir = await temp.make('fnr-json-')
  })
  after(() => temp.cleanup())

  describe('fnr eval', () => {
    async function pkg(name: string): Promise<string> {
      const p = path.join(dir, name)
      await mkdir(p, {recursive: true})
      await writeFile(path.join(p, 'cm.yaml'), CM)
      return p
    }

    it('in place: the FunctionResultList results.yaml would hold, and the files written', async () => {
      const p = await pkg('in-place')
      const r = await runCli(['eval', p, '--image', 'fnr.local/set-namespace:v0.4', '--json', '--', 'namespace=prod'])
      expect(r.exitCode, r.stderr).to.equal(0)
      const out = onlyJson(r) as {items: Array<{results: Array<{message: string}>}>}
      expect(out).to.deep.include({apiVersion: 'kpt.dev/v1', kind: 'FunctionResultList', metadata: {name: 'fnresults'}, exitCode: 0})
      expect(out.items).to.have.length(1)
      expect(out.items[0]).to.deep.include({image: 'fnr.local/set-namespace:v0.4', exitCode: 0})
      expect(out.items[0]!.results[0]!.message).to.include('updated to "prod"')
      expect(out).to.deep.include({output: {to: p, inPlace: true, written: ['cm.yaml'], unchanged: [], deleted: []}})
      expect(await readFile(path.join(p, 'cm.yaml'), 'utf8')).to.include('namespace: prod')
      // kpt's console still goes to stderr.
      expect(r.stderr).to.include('[PASS] "fnr.local/set-namespace:v0.4"')
    })

    it('--output DIR: the new directory\'s files', async () => {
      const p = await pkg('to-dir')
      const out = path.join(dir, 'to-dir-out')
      const fn = await writeExecutable(path.join(dir, 'cat.sh'), SCRIPTS.cat)
      const r = await runCli(['eval', '--input', p, '-o', out, '--exec', fn, '--json'])
      expect(r.exitCode, r.stderr).to.equal(0)
      expect(onlyJson(r)).to.deep.include({exitCode: 0, items: [{exec: fn, exitCode: 0, results: []}], output: {to: out, inPlace: false, written: ['cm.yaml'], unchanged: [], deleted: []}})
    })

    it('a function that fails: exit 1 both ways, its FunctionResultList with the error, the package untouched', async () => {
      const p = await pkg('fails')
      const fn = await writeExecutable(path.join(dir, 'fail.sh'), SCRIPTS.failWithResults)
      const out = (await expectJsonError(['eval', p, '--exec', fn], 1, 'FunctionFailed', {extraKeys: ['apiVersion', 'kind', 'metadata', 'exitCode', 'items'], plainStdout: ''})) as {
        exitCode: number
        items: Array<{exitCode: number; results: Array<{severity?: string}>}>
      }
      expect(out.exitCode).to.equal(1)
      expect(out.items[0]!.exitCode).to.not.equal(0)
      expect(out.items[0]!.results.map((res) => res.severity)).to.include('error')
      expect(await readFile(path.join(p, 'cm.yaml'), 'utf8')).to.equal(CM)
    })

    it('errors before the function runs: unmapped image (4), timeout (6), bad flag (2), the error alone', async () => {
      const p = await pkg('errors')
      await expectJsonError(['eval', p, '--image', 'example.com/not-mapped:v1'], 4, 'NotFound', {plainStdout: ''})
      const sleep = await writeExecutable(path.join(dir, 'sleep.sh'), SCRIPTS.sleep)
      await expectJsonError(['eval', p, '--exec', sleep, '--timeout', '1s'], 6, 'DeadlineExceeded', {plainStdout: ''})
      await expectJsonError(['eval', p, '--exec', sleep, '--no-such-flag'], 2, 'Usage', {plainStdout: ''})
      expect(await readFile(path.join(p, 'cm.yaml'), 'utf8')).to.equal(CM)
    })

    it('interrupted: the error JSON carries the exit code the process ends with (130 for SIGINT), not the Cancelled kind\'s', async () => {
      const p = await pkg('interrupted')
      const pidFile = path.join(dir, 'hang.pid')
      const hang = await writeExecutable(path.join(dir, 'hang.sh'), `#!/bin/sh\ncat >/dev/null\necho $$ > ${pidFile}\nexec sleep 60\n`)
      const proc = execa(process.execPath, [BIN_RUN, 'eval', p, '--exec', hang, '--json'], {reject: false})
      try {
        await until(async () => (await readFile(pidFile, 'utf8').catch(() => '')).trim() !== '', 'the function started')
        proc.kill('SIGINT')
        const r = await proc
        expect(r.exitCode, String(r.stderr)).to.equal(130)
        const out = onlyJson({exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr)})
        expect(out.error).to.deep.include({kind: 'Cancelled', exitCode: 130})
        expect(await readFile(path.join(p, 'cm.yaml'), 'utf8')).to.equal(CM)
      } finally {
        proc.kill('SIGKILL')
      }
    })

    it('stdout stays the ResourceList: --json with the resources on stdout is a usage error (2); without --json the list comes out', async () => {
      const p = await pkg('stdout')
      for (const args of [['-'], ['--input', p], [p, '-o', 'unwrap']]) {
        const r = await runCli(['eval', ...args, '--image', 'fnr.local/set-namespace:v0.4', '--json', '--', 'namespace=prod'], {input: CM})
        expect(r.exitCode, r.stderr).to.equal(2)
        expect((onlyJson(r).error as ErrorJson).kind).to.equal('Usage')
        expect(errorLine(r)).to.match(/^--json prints a report on stdout, where --output (stdout|unwrap) writes the resources/)
      }
      const plain = await runCli(['eval', '-', '--image', 'fnr.local/set-namespace:v0.4', '--', 'namespace=prod'], {input: CM})
      expect(plain.exitCode, plain.stderr).to.equal(0)
      expect(plain.stdout).to.match(/^apiVersion: config\.kubernetes\.io\/v1\nkind: ResourceList\n/)
      expect(await readFile(path.join(p, 'cm.yaml'), 'utf8')).to.equal(CM)
    })
  })

  describe('fnr test', () => {
    let cases: string
    let cat: string
    before(async () => {
      cases = path.join(dir, 'cases')
      await mkdir(path.join(cases, 'unchanged', '.expected'), {recursive: true})
      await writeFile(path.join(cases, 'unchanged', 'cm.yaml'), CM)
      cat = await writeExecutable(path.join(dir, 'test-cat.sh'), SCRIPTS.cat)
    })

    it('the summary, whatever the cases\' outcome (0 passed, 1 failed), with the console on stderr', async () => {
      const ok = await runCli(['test', cases, '--exec', cat, '--json'])
      expect(ok.exitCode, ok.stderr).to.equal(0)
      const summary = onlyJson(ok) as {cases: Array<{name: string; status: string}>}
      expect(summary).to.deep.include({total: 1, passed: 1, failed: 0, errors: 0, notRun: 0})
      expect(summary.cases.map((c) => [c.name, c.status])).to.deep.equal([[path.join(cases, 'unchanged'), 'passed']])
      expect(ok.stderr).to.include(`PASS    ${path.join(cases, 'unchanged')}`)

      const fail = await writeExecutable(path.join(dir, 'test-fail.sh'), SCRIPTS.failWithResults)
      const plain = await runCli(['test', cases, '--exec', fail])
      const failed = await runCli(['test', cases, '--exec', fail, '--json'])
      expect(plain.exitCode).to.equal(1)
      expect(failed.exitCode, failed.stderr).to.equal(1)
      expect(onlyJson(failed)).to.deep.include({total: 1, passed: 0, failed: 1})
    })

    it('FNR_CONTENT_TYPE=json is JSON for fnr test itself, not for the kpt commands of a case\'s exec.sh', async () => {
      const scripted = path.join(dir, 'scripted')
      await mkdir(path.join(scripted, 'piped', '.expected'), {recursive: true})
      await writeFile(path.join(scripted, 'piped', 'cm.yaml'), CM)
      // `kpt fn eval -` writes the ResourceList to stdout, which --json would refuse.
      await writeFile(path.join(scripted, 'piped', '.expected', 'exec.sh'), 'cat cm.yaml | kpt fn eval - --image fnr.local/set-namespace:v0.4 -- namespace=x > /dev/null\n')
      const r = await runCli(['test', scripted], {env: {FNR_CONTENT_TYPE: 'json'}})
      expect(r.exitCode, r.stderr).to.equal(0)
      expect(onlyJson(r)).to.deep.include({total: 1, passed: 1})
    })

    it('a run that cannot start: no case found (3), no folder (2), as {"error": …}', async () => {
      const empty = path.join(dir, 'no-cases')
      await mkdir(empty, {recursive: true})
      await expectJsonError(['test', empty, '--exec', cat], 3, 'Config', {plainStdout: ''})
      await expectJsonError(['test', '--exec', cat], 2, 'Usage', {plainStdout: ''})
    })
  })

  describe('fnr image inspect', () => {
    let registry: TestRegistry
    before(async () => {
      registry = await TestRegistry.start({mode: 'none'})
      await seedImages(registry)
    })
    after(() => registry?.stop())

    it('the image\'s facts and the wrapper command', async () => {
      const r = await runCli(['image', 'inspect', '--insecure-registry', registry.host, `${registry.host}/fn/hello:v1`, '--json'])
      expect(r.exitCode, r.stderr).to.equal(0)
      const out = onlyJson(r)
      expect(out).to.deep.include({image: `${registry.host}/fn/hello:v1`, entrypoint: ['/bin/fn'], cmd: ['--verbose'], command: ['/bin/fn', '--verbose']})
      expect(out.wrapper).to.deep.equal({command: ['/wrapper-server-tools/wrapper-server'], args: ['--port', '9446', '--max-request-body-size', '6291456', '--', '/bin/fn', '--verbose']})
      expect(r.stderr).to.equal('')
    })

    it('failures: not found (4), bad reference (2), as {"error": …}', async () => {
      await expectJsonError(['image', 'inspect', '--insecure-registry', registry.host, `${registry.host}/fn/hello:nope`], 4, 'NotFound', {plainStdout: ''})
      await expectJsonError(['image', 'inspect', 'Not/Valid'], 2, 'InvalidArgument', {plainStdout: ''})
    })
  })

  describe('fnr pods ls|gc|warm', () => {
    waitForClusterBinaries()
    let kubeconfigPath: string
    let ns: {name: string; remove: () => Promise<void>}
    /** The shared control plane's admin kubeconfig and a namespace of this suite's own. */
    const kube = (namespaced = true): string[] => ['--kubeconfig', kubeconfigPath, ...(namespaced ? ['--namespace', ns.name] : [])]
    before(async () => {
      const cp = await sharedControlPlane()
      kubeconfigPath = cp.kubeconfigPath
      ns = await namespace(cp, 'cli-json')
    })
    after(() => ns?.remove())

    it('ls and gc: the listing and the summary', async () => {
      const ls = await runCli(['pods', 'ls', ...kube(), '--json'])
      expect(ls.exitCode, ls.stderr).to.equal(0)
      expect(onlyJson(ls)).to.deep.equal({namespace: ns.name, pods: []})
      const gc = await runCli(['pods', 'gc', '--dry-run', ...kube(), '--json'])
      expect(gc.exitCode, gc.stderr).to.equal(0)
      expect(onlyJson(gc)).to.deep.equal({namespace: ns.name, dryRun: true, templateVersion: null, items: [], deleted: 0, skipped: 0, failed: 0})
    })

    it('warm with an image that fails: exit 1 both ways, the summary with the error beside it', async () => {
      const unreachable = '127.0.0.1:1/fn/cat:v1'
      const args = ['pods', 'warm', ...kube(), '--wrapper-server-image', 'example.com/wrapper:v1', '--image', unreachable, '--timeout', '20s']
      const out = (await expectJsonError(args, 1, 'Internal', {extraKeys: ['namespace', 'templateVersion', 'template', 'images', 'ready', 'failed', 'created']})) as {
        images: Array<{image: string; ok: boolean}>
        failed: number
      }
      expect(out.failed).to.equal(1)
      expect(out.images).to.have.length(1)
      expect(out.images[0]).to.deep.include({image: unreachable, ok: false})
    })

    it('failures before any listing: usage (2), as {"error": …}', async () => {
      await expectJsonError(['pods', 'gc', '--older-than=0s', ...kube()], 2, 'Usage', {plainStdout: ''})
      await expectJsonError(['pods', 'ls', '-n', 'Not_A_Namespace', ...kube(false)], 2, 'Usage', {plainStdout: ''})
    })
  })
})
