import {expect} from 'chai'
import {execa} from 'execa'
import {cp, mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {parse} from 'yaml'

import {runCli} from '../support/cli.js'
import {REPO_ROOT} from '../support/serve.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../support/tmp.js'
import {findAll, parseXml} from './xml.js'

const TESTDATA = path.join(REPO_ROOT, 'functions', 'testdata')
/** The shipped functions, as functions/config.yaml lists them: each must have cases. */
async function shippedFunctions(): Promise<string[]> {
  const config = parse(await readFile(path.join(REPO_ROOT, 'functions', 'config.yaml'), 'utf8')) as {functions: Array<{function: string}>}
  return [...new Set(config.functions.map((f) => f.function))]
}
const KPT = '/usr/bin/kpt'
const SET_NS_IMAGE = 'fnr.local/set-namespace:v0.4'

async function countCases(dir: string): Promise<number> {
  let n = 0
  for (const e of await readdir(dir, {withFileTypes: true})) {
    if (!e.isDirectory()) continue
    if (e.name === '.expected') return 1
    n += await countCases(path.join(dir, e.name))
  }
  return n
}

/** Writes a case: files (relative path -> content) under dir/name, expectations under .expected/. */
async function writeCase(dir: string, files: Record<string, string>): Promise<string> {
  await mkdir(path.join(dir, '.expected'), {recursive: true})
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), {recursive: true})
    await writeFile(path.join(dir, rel), content)
  }
  return dir
}

const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n'

describe('fnr test (CLI)', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  let work: string

  before(async () => {
    work = await temp.make('fnr-fntest-')
  })
  after(() => temp.cleanup())

  it('passes every shipped function case, and has cases for each shipped function', async () => {
    const shipped = await shippedFunctions()
    expect(shipped).to.include.members(['set-namespace', 'set-labels', 'set-annotations', 'apply-setters', 'remove-local-config-resources'])
    for (const fn of shipped) expect(await countCases(path.join(TESTDATA, fn)).catch(() => 0), `cases of the shipped function ${fn} in functions/testdata/${fn}`).to.be.greaterThan(0)
    const total = await countCases(TESTDATA)
    const r = await runCli(['test', TESTDATA])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain(`${total} passed, 0 failed (${total} cases,`)
    expect(r.stdout).not.to.contain('FAIL')
    expect(r.stdout.match(/^PASS /gm)).to.have.length(total)
  })

  it('runs a folder of cases with --exec overriding the function the cases name', async () => {
    // The cases record the image in results.yaml; a copy without results.yaml tests --exec alone.
    const dir = path.join(work, 'exec-override')
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), dir, {recursive: true})
    await rm(path.join(dir, '.expected', 'results.yaml'))
    const r = await runCli(['test', dir, '--exec', path.join(REPO_ROOT, 'functions', 'set-namespace')])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('1 passed, 0 failed')
  })

  it('a broken expectation fails with a unified diff and exit 1; --update rewrites it and then it passes', async () => {
    const root = path.join(work, 'broken')
    const dir = path.join(root, 'simple')
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), dir, {recursive: true})
    const patchFile = path.join(dir, '.expected', 'diff.patch')
    const good = await readFile(patchFile, 'utf8')
    await writeFile(patchFile, good.replaceAll('+  namespace: prod', '+  namespace: qa'))

    const r = await runCli(['test', root])
    expect(r.exitCode).to.equal(1)
    expect(r.stdout).to.match(/^FAIL +.*broken\/simple/m)
    expect(r.stdout).to.contain('the package after the function differs from the input + .expected/diff.patch')
    expect(r.stdout).to.contain('--- expected/app.yaml\n+++ actual/app.yaml\n')
    expect(r.stdout).to.contain('\n-  namespace: qa\n+  namespace: prod\n')
    expect(r.stdout).to.contain('0 passed, 1 failed (1 case,')

    const u = await runCli(['test', root, '--update'])
    expect(u.exitCode, u.stdout + u.stderr).to.equal(0)
    expect(u.stdout).to.match(/^UPDATED .*broken\/simple/m)
    expect(u.stdout).to.contain('wrote .expected/diff.patch')
    expect(u.stdout).to.contain('0 passed, 0 failed, 1 updated')
    expect(await readFile(patchFile, 'utf8')).to.equal(good)

    const again = await runCli(['test', root])
    expect(again.exitCode, again.stdout).to.equal(0)
    expect(again.stdout).to.contain('1 passed, 0 failed')
    // --update on a passing case writes nothing.
    const idle = await runCli(['test', root, '--update'])
    expect(idle.exitCode, idle.stdout).to.equal(0)
    expect(idle.stdout).to.contain('1 passed, 0 failed (1 case,')
  })

  it('--update records new cases from scratch: diff.patch, results.yaml, a non-zero exit code, an output ResourceList', async () => {
    const root = path.join(work, 'fresh')
    const fn = await writeExecutable(path.join(work, 'fail-with-results.sh'), SCRIPTS.failWithResults)
    await writeCase(path.join(root, 'fails'), {'cm.yaml': CM})
    await writeCase(path.join(root, 'changes'), {'cm.yaml': CM, '.expected/config.yaml': `image: ${SET_NS_IMAGE}\nargs:\n  namespace: prod\n`})
    const first = await runCli(['test', path.join(root, 'fails'), '--exec', fn])
    expect(first.exitCode).to.equal(1)
    expect(first.stdout).to.contain('exit code 1, expected 0')
    expect(first.stdout).to.contain('fatal: boom')

    const u = await runCli(['test', path.join(root, 'fails'), '--exec', fn, '--update'])
    expect(u.exitCode, u.stdout).to.equal(0)
    expect(await readFile(path.join(root, 'fails', '.expected', 'config.yaml'), 'utf8')).to.equal('exitCode: 1\n')
    const results = await readFile(path.join(root, 'fails', '.expected', 'results.yaml'), 'utf8')
    expect(results).to.contain('exitCode: 1')
    expect(results).to.contain('message: replicas must be at most 3')
    const u2 = await runCli(['test', path.join(root, 'changes'), '--update'])
    expect(u2.exitCode, u2.stdout).to.equal(0)
    expect(await readFile(path.join(root, 'changes', '.expected', 'diff.patch'), 'utf8')).to.contain('+  namespace: prod')

    const r = await runCli(['test', path.join(root, 'fails'), '--exec', fn])
    expect(r.exitCode, r.stdout).to.equal(0)
    const r2 = await runCli(['test', path.join(root, 'changes')])
    expect(r2.exitCode, r2.stdout).to.equal(0)

    // A ResourceList case: the output ResourceList is recorded in .expected/resourcelist.yaml.
    const rl = `apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- ${CM.trimEnd().replaceAll('\n', '\n  ')}\n`
    await writeCase(path.join(root, 'rl'), {'resourcelist.yaml': rl, '.expected/config.yaml': 'image: fnr.local/set-labels:v0.2\nargs:\n  env: dev\n'})
    const rlFirst = await runCli(['test', path.join(root, 'rl')])
    expect(rlFirst.exitCode).to.equal(1)
    expect(rlFirst.stdout).to.contain('the output ResourceList differs from .expected/resourcelist.yaml')
    expect(rlFirst.stdout).to.contain('+++ actual/resourcelist.yaml\n@@ -0,0 +1,')
    expect((await runCli(['test', path.join(root, 'rl'), '--update'])).exitCode).to.equal(0)
    const recorded = await readFile(path.join(root, 'rl', '.expected', 'resourcelist.yaml'), 'utf8')
    expect(recorded).to.match(/^apiVersion: config\.kubernetes\.io\/v1\nkind: ResourceList\n/)
    expect(recorded).to.contain('      env: dev\n')
    expect((await runCli(['test', path.join(root, 'rl')])).exitCode).to.equal(0)
  })

  it('checks an expected non-zero exit code, stdErr and results.yaml of a failing function', async () => {
    const root = path.join(work, 'failing')
    const fn = await writeExecutable(path.join(work, 'fail.sh'), SCRIPTS.failWithResults)
    const resultsYaml = `apiVersion: kpt.dev/v1
kind: FunctionResultList
metadata:
  name: fnresults
exitCode: 1
items:
  - exec: ${fn}
    stderr: |
      fatal: boom
    exitCode: 3
    results:
      - message: replicas must be at most 3
        severity: error
        resourceRef:
          apiVersion: apps/v1
          kind: Deployment
          name: web
          namespace: prod
        field:
          path: spec.replicas
      - message: just saying
        severity: info
`
    await writeCase(path.join(root, 'expects-failure'), {
      'cm.yaml': CM,
      '.expected/config.yaml': 'exitCode: 1\nstdErr: "[error] apps/v1/Deployment/prod/web spec.replicas: replicas must be at most 3"\n',
      '.expected/results.yaml': resultsYaml,
    })
    // Like kpt's harness, results.yaml is compared without leading and trailing white space.
    await writeCase(path.join(root, 'expects-failure-trimmed'), {'cm.yaml': CM, '.expected/config.yaml': 'exitCode: 1\n', '.expected/results.yaml': `\n${resultsYaml.trimEnd()}`})
    await writeCase(path.join(root, 'wrong-results'), {
      'cm.yaml': CM,
      '.expected/config.yaml': 'exitCode: 1\n',
      '.expected/results.yaml': resultsYaml.replace('just saying', 'something else'),
    })
    await writeCase(path.join(root, 'wrong-stderr'), {'cm.yaml': CM, '.expected/config.yaml': 'exitCode: 1\nstdErr: "not in the output"\n', '.expected/results.yaml': resultsYaml})

    const r = await runCli(['test', root, '--exec', fn])
    expect(r.exitCode).to.equal(1)
    expect(r.stdout).to.match(/^PASS +.*failing\/expects-failure/m)
    expect(r.stdout).to.match(/^FAIL +.*failing\/wrong-results/m)
    expect(r.stdout).to.contain('results differ from .expected/results.yaml')
    expect(r.stdout).to.contain('-      - message: something else\n+      - message: just saying\n')
    expect(r.stdout).to.match(/^FAIL +.*failing\/wrong-stderr/m)
    expect(r.stdout).to.contain('stderr does not contain stdErr "not in the output"')
    expect(r.stdout).to.match(/^PASS +.*failing\/expects-failure-trimmed/m)
    expect(r.stdout).to.contain('2 passed, 2 failed (4 cases,')
    // stdErr cannot be derived from a run: --update leaves that case failing.
    const u = await runCli(['test', path.join(root, 'wrong-stderr'), '--exec', fn, '--update'])
    expect(u.exitCode).to.equal(1)
    expect(u.stdout).to.contain('stderr does not contain stdErr')
  })

  it('writes JUnit XML that parses back: one testcase per case, failures with message and diff, names escaped', async () => {
    const root = path.join(work, 'junit')
    const tricky = 'a&b <c> "q" \'s\''
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), path.join(root, tricky), {recursive: true})
    await cp(path.join(TESTDATA, 'set-labels', 'resourcelist'), path.join(root, 'rl'), {recursive: true})
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), path.join(root, 'broken'), {recursive: true})
    const patchFile = path.join(root, 'broken', '.expected', 'diff.patch')
    await writeFile(patchFile, (await readFile(patchFile, 'utf8')).replaceAll('+  namespace: prod', '+  namespace: <qa&co>'))
    // A function whose stderr carries an escape character (not allowed in XML 1.0) and fails.
    const ansi = await writeExecutable(path.join(work, 'ansi.sh'), '#!/bin/sh\ncat >/dev/null\nprintf "\\033[31mred ]]> alert\\033[0m\\n" >&2\nexit 2\n')
    await writeCase(path.join(root, 'zz-\x1b[1m-ansi'), {'cm.yaml': CM, '.expected/config.yaml': `execPath: ${ansi}\n`})

    const file = path.join(work, 'reports', 'fn.xml')
    const r = await runCli(['test', root, '--junit', file])
    expect(r.exitCode).to.equal(1)
    const xml = await readFile(file, 'utf8')
    expect(xml.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n')).to.equal(true)
    const doc = parseXml(xml)
    expect(doc.name).to.equal('testsuites')
    expect(doc.attrs).to.include({tests: '4', failures: '2', errors: '0'})
    const suite = findAll(doc, 'testsuite')
    expect(suite).to.have.length(1)
    const cases = findAll(doc, 'testcase')
    expect(cases).to.have.length(4)
    const names = cases.map((c) => path.basename(c.attrs.name!))
    // The escape character in the last name cannot be carried by XML 1.0: it reads U+FFFD.
    expect(names).to.deep.equal(['a&b <c> "q" \'s\'', 'broken', 'rl', 'zz-\uFFFD[1m-ansi'])
    expect(findAll(doc, 'failure')).to.have.length(2)
    const broken = cases.find((c) => c.attrs.name!.endsWith('broken'))!
    const failure = broken.children.find((c) => c.name === 'failure')!
    expect(failure.attrs.message).to.contain('differs from the input + .expected/diff.patch')
    expect(failure.text).to.contain('-  namespace: <qa&co>\n+  namespace: prod\n')
    const ansiCase = cases.find((c) => c.attrs.name!.endsWith('-ansi'))!
    const ansiFailure = ansiCase.children.find((c) => c.name === 'failure')!
    expect(ansiFailure.attrs.message).to.equal('exit code 1, expected 0')
    expect(ansiFailure.text).to.contain('red ]]> alert')
    for (const c of cases) expect(Number(c.attrs.time)).to.be.at.least(0)
    expect(cases.filter((c) => c.children.length === 0)).to.have.length(2)
  })

  it('prints a JSON summary with --json, and --filter selects cases', async () => {
    // --filter takes one value each time, so a folder may follow it.
    const r = await runCli(['test', '--filter', 'set-namespace/', TESTDATA, '--json', '--filter', '*labels/simple'])
    expect(r.exitCode, r.stderr).to.equal(0)
    const summary = JSON.parse(r.stdout)
    const total = await countCases(path.join(TESTDATA, 'set-namespace'))
    expect(summary).to.include({total: total + 1, passed: total + 1, failed: 0, updated: 0})
    expect(summary.cases.map((c: {name: string}) => c.name)).to.include(path.relative(process.cwd(), path.join(TESTDATA, 'set-labels', 'simple')))
    expect(summary.cases.every((c: {status: string; exitCode: number}) => c.status === 'passed')).to.equal(true)
    expect(r.stderr).to.contain(`${total + 1} passed, 0 failed`)
  })

  it('runs cases in parallel but reports them in name order', async () => {
    const root = path.join(work, 'order')
    // Earlier names take longer, so later cases finish first.
    const fn = await writeExecutable(path.join(work, 'slow-by-name.sh'), '#!/bin/sh\nin=$(cat)\ncase "$in" in *slow3*) sleep 1.5;; *slow2*) sleep 1;; *slow1*) sleep 0.5;; esac\nprintf "%s\\n" "$in"\n')
    for (const [i, n] of ['slow3', 'slow2', 'slow1', 'fast'].entries()) {
      await writeCase(path.join(root, `case-${i}`), {'cm.yaml': CM.replace('settings', n)})
    }
    const r = await runCli(['test', root, '--exec', fn, '--concurrency', '4'])
    expect(r.exitCode, r.stdout).to.equal(0)
    const lines = r.stdout.split('\n').filter((l) => l.startsWith('PASS'))
    expect(lines.map((l) => l.replace(/^PASS +.*\/(case-\d).*$/, '$1'))).to.deep.equal(['case-0', 'case-1', 'case-2', 'case-3'])
  })

  it('a function that hangs hits the per-case timeout, is killed, and the other cases still run', async () => {
    const root = path.join(work, 'hang')
    const hang = await writeExecutable(path.join(work, 'hang.sh'), SCRIPTS.sleepWithChild)
    await writeCase(path.join(root, 'a-hangs'), {'cm.yaml': CM, '.expected/config.yaml': `execPath: ${hang}\n`})
    await writeCase(path.join(root, 'b-ok'), {'cm.yaml': CM, '.expected/config.yaml': `execPath: ${path.join(REPO_ROOT, 'functions', 'remove-local-config-resources')}\ntimeout: 60s # its own, generous: the machine may be busy\n`})
    await writeCase(path.join(root, 'c-own-timeout'), {'cm.yaml': CM, '.expected/config.yaml': `execPath: ${hang}\ntimeout: 1s\n`})
    const r = await runCli(['test', root, '--timeout', '2s'])
    expect(r.exitCode).to.equal(1)
    expect(r.stdout).to.match(/^FAIL +.*hang\/a-hangs/m)
    expect(r.stdout).to.contain('timed out after 2s: the function was killed')
    expect(r.stdout).to.match(/^PASS +.*hang\/b-ok/m)
    expect(r.stdout).to.contain('timed out after 1s: the function was killed')
    expect(r.stdout).to.contain('1 passed, 2 failed')
    // The hung function's child was killed with its process group.
    const pid = Number((await readFile(`${hang}.child`, 'utf8')).trim())
    const alive = (): boolean => {
      try {
        process.kill(pid, 0)
        return true
      } catch {
        return false
      }
    }
    for (let i = 0; i < 50 && alive(); i++) await new Promise((r) => setTimeout(r, 100))
    expect(alive(), `grandchild ${pid} should be killed`).to.equal(false)
  })

  it('accepts a diff.patch made the way kpt\'s e2e harness makes it (git diff after kpt fn eval)', async function () {
    try {
      await execa(KPT, ['version'])
    } catch {
      throw new Error(`${KPT} is needed (it ships with the machine image as google-cloud-cli-kpt)`)
    }
    const pkg = path.join(work, 'kpt-made', 'simple')
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), pkg, {recursive: true})
    await rm(path.join(pkg, '.expected'), {recursive: true})
    const git = (...args: string[]) => execa('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {cwd: pkg, env: {GIT_DIFF_OPTS: ''}})
    await git('init', '-q')
    await git('add', '-A')
    await git('commit', '-qm', 'first')
    await execa(KPT, ['fn', 'eval', pkg, '--exec', path.join(REPO_ROOT, 'functions', 'set-namespace'), '--', 'namespace=prod'])
    const diff = (await git('diff')).stdout + '\n'
    expect(diff).to.match(/^index [0-9a-f]+\.\.[0-9a-f]+ 100644$/m)
    // The case: the untouched input package, and the patch git made as its expectation.
    await rm(pkg, {recursive: true})
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), pkg, {recursive: true})
    await rm(path.join(pkg, '.expected'), {recursive: true})
    await writeCase(pkg, {'.expected/diff.patch': diff, '.expected/config.yaml': 'args:\n  namespace: prod\n'})
    const r = await runCli(['test', pkg, '--exec', path.join(REPO_ROOT, 'functions', 'set-namespace')])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('1 passed, 0 failed')
  })

  describe('usage errors stop the run with one line and their own exit code', () => {
    async function expectSetupError(args: string[], code: number, message: RegExp): Promise<void> {
      const r = await runCli(['test', ...args])
      expect(r.exitCode, r.stdout + r.stderr).to.equal(code)
      expect(r.stdout).to.equal('')
      expect(r.stderr.trimEnd().split('\n'), r.stderr).to.have.length(1)
      expect(r.stderr).to.match(message)
    }

    it('a folder without cases, no folder, a bad flag, a bad --image-pull-policy', async () => {
      await mkdir(path.join(work, 'empty', 'sub'), {recursive: true})
      await expectSetupError([path.join(work, 'empty'), '--exec', 'cat'], 3, /no test cases \(directories holding \.expected\/\) found/)
      await expectSetupError([], 2, /give the folder of test cases/)
      await writeCase(path.join(work, 'ok', 'c'), {'cm.yaml': CM})
      await expectSetupError([path.join(work, 'ok'), '--concurrency', '0'], 2, /concurrency/)
      await expectSetupError([path.join(work, 'ok'), '--exec', 'cat', '--image-pull-policy', 'sometimes'], 2, /--image-pull-policy must be one of Always, IfNotPresent, Never, got "sometimes"/)
    })
  })

  describe('a case that cannot run is that case\'s error; the others run and the exit code is 1', () => {
    /** Runs the folder; expects the good case to pass, the bad one to be an ERROR with the message. */
    async function expectCaseError(folder: string, args: string[], bad: string, message: RegExp): Promise<void> {
      const r = await runCli(['test', folder, ...args, '--json'])
      expect(r.exitCode, r.stdout + r.stderr).to.equal(1)
      const summary = JSON.parse(r.stdout) as {passed: number; errors: number; cases: Array<{name: string; status: string; problems: Array<{message: string}>}>}
      expect(summary.passed, r.stderr).to.equal(1)
      expect(summary.errors, r.stderr).to.equal(1)
      const c = summary.cases.find((x) => x.name.endsWith(bad))!
      expect(c.status, r.stderr).to.equal('error')
      expect(c.problems[0]!.message).to.match(message)
      expect(r.stderr).to.match(new RegExp(`^ERROR {3}\\S*${bad} `, 'm'))
    }

    it('an unknown image or a missing executable (in config.yaml) among good cases', async () => {
      const dir = path.join(work, 'mixed-fn')
      await writeCase(path.join(dir, 'a-good'), {'cm.yaml': CM, '.expected/config.yaml': 'image: fnr.local/remove-local-config-resources:v0.1\n'})
      await writeCase(path.join(dir, 'b-unmapped'), {'cm.yaml': CM, '.expected/config.yaml': 'image: example.com/nope:v1\n'})
      await expectCaseError(dir, [], 'b-unmapped', /^cannot run: function "example\.com\/nope:v1" is not in the exec config/)
      await writeFile(path.join(dir, 'b-unmapped', '.expected', 'config.yaml'), 'execPath: ../does-not-exist\n')
      await expectCaseError(dir, [], 'b-unmapped', /execPath "\.\.\/does-not-exist" does not exist/)
    })

    it('an invalid config.yaml (a wrong type, bad YAML) or a package case expecting a ResourceList', async () => {
      const dir = path.join(work, 'mixed-config')
      await writeCase(path.join(dir, 'a-good'), {'cm.yaml': CM})
      await writeCase(path.join(dir, 'b-bad'), {'cm.yaml': CM, '.expected/config.yaml': 'exitCode: one\n'})
      await expectCaseError(dir, ['--exec', 'cat'], 'b-bad', /\.expected\/config\.yaml: exitCode: Invalid value: "one": must be of type integer$/)
      await writeFile(path.join(dir, 'b-bad', '.expected', 'config.yaml'), 'a: [\n')
      await expectCaseError(dir, ['--exec', 'cat'], 'b-bad', /\.expected\/config\.yaml: /)
      await rm(path.join(dir, 'b-bad', '.expected', 'config.yaml'))
      await writeFile(path.join(dir, 'b-bad', '.expected', 'resourcelist.yaml'), CM)
      await expectCaseError(dir, ['--exec', 'cat'], 'b-bad', /\.expected\/resourcelist\.yaml is for cases whose input is resourcelist\.yaml/)
    })

    it('--exec that is not an executable fails every case as an error (exit 1), with the reason', async () => {
      const r = await runCli(['test', path.join(work, 'ok'), '--exec', './does-not-exist'])
      expect(r.exitCode, r.stdout + r.stderr).to.equal(1)
      expect(r.stdout).to.match(/^ERROR .*--exec "\.\/does-not-exist": \.\/does-not-exist is not an executable file/s)
      expect(r.stdout).to.contain('0 passed, 0 failed, 1 error (1 case')
    })
  })
})
