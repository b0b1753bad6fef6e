/**
 * fnr test on kpt's e2e layout: cases built here the way kpt's own e2e cases are (setup.sh,
 * exec.sh calling `kpt fn eval`, .krmignore, config.yaml with keys kpt ignores), whose
 * expectations are recorded with the real kpt (1.0.0-beta.56) the way kpt's runner records them
 * (the case copied, committed, setup.sh, the command, `git diff` of the two commits), then run
 * through `fnr test`. Also: a kpt command the shim does not map, and an interrupted run.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {spawn} from 'node:child_process'
import {cp, mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {parse as shellParse} from 'shell-quote'

import {runCli} from '../support/cli.js'
import {BIN_RUN, REPO_ROOT} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'
import {findAll, parseXml} from './xml.js'
import {isAlive} from '../wrapper/support/process.js'

const KPT = '/usr/bin/kpt'
const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  k: foo\n'
const FN = "#!/bin/sh\nexec sed -e 's/foo/bar/'\n"

async function writeFiles(dir: string, files: Record<string, string>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), {recursive: true})
    if (rel.endsWith('.sh') && !rel.startsWith('.expected/')) await writeExecutable(path.join(dir, rel), content)
    else await writeFile(path.join(dir, rel), content)
  }
}

/**
 * What kpt's e2e runner does with a case, with the real kpt: copy it (.expected included), commit,
 * run setup.sh, then exec.sh or `kpt fn eval DIR --exec FN -- ARGS`; the diff of the two commits.
 */
async function recordWithKpt(caseDir: string, scratch: string, command?: string[]): Promise<{exitCode: number; stdout: string; diff: string}> {
  const pkg = path.join(scratch, path.basename(caseDir))
  await cp(caseDir, pkg, {recursive: true})
  const git = (...args: string[]) => execa('git', ['-c', 'user.name=none', '-c', 'user.email=none', ...args], {cwd: pkg, env: {GIT_DIFF_OPTS: ''}})
  await git('init', '-q')
  await git('add', '--all')
  await git('commit', '-qm', 'first', '--allow-empty')
  const first = (await git('rev-parse', 'HEAD')).stdout.trim()
  const setup = path.join(caseDir, '.expected', 'setup.sh')
  const exec = path.join(caseDir, '.expected', 'exec.sh')
  const exists = async (f: string) => readFile(f).then(() => true, () => false)
  if (await exists(setup)) await execa('bash', [setup], {cwd: pkg})
  const r = (await exists(exec)) ? await execa('bash', [exec], {cwd: pkg, reject: false}) : await execa(KPT, ['fn', 'eval', pkg, ...command!], {reject: false})
  await git('add', '--all')
  await git('commit', '-qm', 'second', '--allow-empty')
  const diff = (await git('diff', first, 'HEAD')).stdout.trim()
  return {exitCode: r.exitCode ?? -1, stdout: String(r.stdout), diff}
}

describe('fnr test: kpt e2e layout (setup.sh, exec.sh, .krmignore, diff.patch, kpt config keys)', function () {
  this.timeout(180_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('passes cases whose diff.patch the real kpt recorded as its runner does, exec.sh and setup.sh included', async () => {
    try {
      await execa(KPT, ['version'])
    } catch {
      throw new Error(`${KPT} is needed (it ships with the machine image as google-cloud-cli-kpt)`)
    }
    const dir = await temp.make('fnr-kpt-layout-')
    const cases = path.join(dir, 'cases')
    const krmignore = '.expected\n'
    // An eval case kpt's way: execPath relative to .expected/, config keys kpt ignores (apiVersion, kind, runCount).
    const evalCase = path.join(cases, 'eval-execpath')
    await writeFiles(evalCase, {
      'cm.yaml': CM,
      'fn.sh': FN,
      '.krmignore': krmignore,
      '.expected/config.yaml': 'apiVersion: kpt.dev/v1alpha1\nkind: TestCase\nmetadata:\n  name: eval-execpath\ntestType: eval\nexecPath: ../fn.sh\nrunCount: 2\n',
    })
    // exec.sh replaces the command: `kpt` on its PATH is fnr; stdOut is checked.
    const script = path.join(cases, 'exec-script')
    await writeFiles(script, {
      'cm.yaml': CM,
      'fn.sh': FN,
      '.krmignore': krmignore,
      '.expected/exec.sh': 'set -eo pipefail\necho from-exec-sh\nkpt fn eval . --exec ./fn.sh\n',
      '.expected/config.yaml': 'stdOut: from-exec-sh\n',
    })
    // setup.sh runs after kpt's first commit: the file it writes is part of the change.
    const setup = path.join(cases, 'setup-script')
    await writeFiles(setup, {
      'cm.yaml': CM,
      'fn.sh': FN,
      '.krmignore': krmignore,
      '.expected/setup.sh': `cat > extra.yaml <<'EOF'\n${CM.replace('settings', 'extra')}EOF\n`,
      '.expected/config.yaml': 'testType: eval\nexecPath: ../fn.sh\n',
    })
    // .krmignore keeps a file that is not KRM out of the function's input (kpt would refuse it).
    const ignore = path.join(cases, 'krmignore')
    await writeFiles(ignore, {
      'cm.yaml': CM,
      'fn.sh': FN,
      'notes.yaml': 'just: a note\n',
      '.krmignore': `${krmignore}notes.yaml\n`,
      '.expected/config.yaml': 'testType: eval\nexecPath: ../fn.sh\n',
    })

    const recorded: Record<string, string> = {}
    for (const c of [evalCase, setup, ignore]) {
      const r = await recordWithKpt(c, await temp.make('kpt-way-'), ['--exec', path.join(c, 'fn.sh')])
      expect(r.exitCode, c).to.equal(0)
      recorded[path.basename(c)] = r.diff
    }
    const s = await recordWithKpt(script, await temp.make('kpt-way-'))
    expect(s.exitCode).to.equal(0)
    expect(s.stdout).to.contain('from-exec-sh')
    recorded['exec-script'] = s.diff
    expect(recorded['setup-script']).to.contain('new file mode').and.to.contain('+  k: bar')
    for (const [name, diff] of Object.entries(recorded)) {
      expect(diff, name).to.match(/^index [0-9a-f]+\.\.[0-9a-f]+ 100644$/m)
      await writeFile(path.join(cases, name, '.expected', 'diff.patch'), `${diff}\n`)
    }

    const r = await runCli(['test', cases, '--json'])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    const summary = JSON.parse(r.stdout) as {passed: number; cases: Array<{name: string; status: string; function: string}>}
    expect(summary.passed, r.stderr).to.equal(4)
    expect(summary.cases.find((c) => c.name.endsWith('exec-script'))!.function).to.equal('exec.sh')

    // The comparison is real: the wrong stdOut, or a diff.patch from another case, fails.
    await writeFile(path.join(script, '.expected', 'config.yaml'), 'stdOut: something-else\n')
    await writeFile(path.join(setup, '.expected', 'diff.patch'), `${recorded['eval-execpath']}\n`)
    const f = await runCli(['test', cases])
    expect(f.exitCode, f.stdout + f.stderr).to.equal(1)
    expect(f.stdout).to.match(/^FAIL\s+\S*exec-script .*\n {2}✗ stdout does not contain stdOut "something-else"/m)
    expect(f.stdout).to.match(/^FAIL\s+\S*setup-script /m)
    expect(f.stdout).to.contain('2 passed, 2 failed')
  })

  it('exec.sh: the kpt on PATH maps fn eval, render, source and sink; other kpt commands fail with exit 127 and say so', async () => {
    const dir = await temp.make('fnr-kpt-shim-')
    const c = path.join(dir, 'pkg-get')
    await writeFiles(c, {
      'cm.yaml': CM,
      '.expected/exec.sh': 'kpt pkg get x\n',
      '.expected/config.yaml': "exitCode: 127\nstdErr: \"'kpt pkg get x' is not available here: only 'kpt fn eval', 'render', 'source' and 'sink' run, through fnr\"\n",
    })
    const r = await runCli(['test', c])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('1 passed, 0 failed')
    // A failing setup.sh makes the case an error (it could not run); the others still run.
    const bad = path.join(dir, 'setup-fails')
    await writeFiles(bad, {'cm.yaml': CM, '.expected/setup.sh': 'echo cannot prepare >&2\nexit 3\n'})
    const e = await runCli(['test', dir])
    expect(e.exitCode, e.stdout + e.stderr).to.equal(1)
    expect(e.stdout).to.match(/^ERROR\s+\S*setup-fails .*\n(?: {2}! .*\n)* {2}✗ \.expected\/setup\.sh failed \(exit code 3\)\ncannot prepare/m)
    expect(e.stdout).to.contain('1 passed, 0 failed, 1 error (2 cases')
  })

  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`${signal} during a run: the running case is "interrupted" (no FAIL, no diff), no more start, exit ${code}, JUnit and --json say so`, async () => {
      const dir = await temp.make('fnr-test-interrupt-')
      const marker = path.join(dir, 'started')
      // The function says it started (its pid) and then blocks.
      const fn = await writeExecutable(path.join(dir, 'block.sh'), `#!/bin/sh\necho $$ > ${marker}.tmp && mv ${marker}.tmp ${marker}\nexec sleep 600\n`)
      for (const name of ['a', 'b', 'c']) await writeFiles(path.join(dir, 'cases', name), {'cm.yaml': CM, '.expected/diff.patch': 'not a patch'})
      const junit = path.join(dir, 'report.xml')
      const child = spawn(process.execPath, [BIN_RUN, 'test', path.join(dir, 'cases'), '--exec', fn, '--concurrency', '1', '--json', '--junit', junit], {stdio: ['ignore', 'pipe', 'pipe']})
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)))
      // Wait for the event "the function runs" (the marker file), then interrupt.
      while (!(await readFile(marker, 'utf8').then((t) => t.trim() !== '', () => false))) {
        expect(child.exitCode, stderr).to.equal(null)
        await new Promise((r) => setTimeout(r, 50))
      }
      const pid = Number((await readFile(marker, 'utf8')).trim())
      child.kill(signal)
      expect(await exited, stdout + stderr).to.equal(code)
      const summary = JSON.parse(stdout) as {signal: string; interrupted: number; failed: number; notRun: number; cases: Array<{name: string; status: string; problems: Array<{message: string}>}>}
      expect(summary.signal).to.equal(signal)
      expect(summary).to.include({interrupted: 1, failed: 0, notRun: 2})
      expect(summary.cases).to.have.length(1)
      expect(summary.cases[0]!.status).to.equal('interrupted')
      expect(summary.cases[0]!.problems[0]!.message).to.match(new RegExp(`^interrupted by ${signal}`))
      expect(stderr).to.match(/^INTERRUPTED \S*cases\/a /m)
      expect(stderr).not.to.match(/FAIL|exit code 6|---|\+\+\+/)
      expect(stderr).to.contain(`interrupted by ${signal}: 0 passed, 0 failed, 1 interrupted, 2 not run (3 cases`)
      const doc = parseXml(await readFile(junit, 'utf8'))
      expect(findAll(doc, 'testcase')).to.have.length(3)
      expect(findAll(doc, 'failure')).to.have.length(0)
      expect(findAll(doc, 'error').map((e) => e.attrs.type)).to.deep.equal(['interrupted'])
      expect(findAll(doc, 'skipped')).to.have.length(2)
      // The blocked function was killed with its process group.
      for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100))
      expect(isAlive(pid), `function ${pid} should be killed`).to.equal(false)
      await rm(marker, {force: true})
    })
  }

  it('docs/fn-test.md: the examples of its first code block work as written (from the repository)', async () => {
    const doc = await readFile(path.join(REPO_ROOT, 'docs', 'fn-test.md'), 'utf8')
    const block = /```sh\n([\s\S]*?)```/.exec(doc)![1]!
    const lines = block.split('\n').filter((l) => l.startsWith('fnr test '))
    expect(lines.length).to.be.greaterThan(2)
    for (const line of lines) {
      const words = shellParse(line.replace(/\s+#.*$/, '')) as string[]
      const r = await runCli(words.slice(1), {cwd: REPO_ROOT})
      expect(r.exitCode, `${line}\n${r.stdout}${r.stderr}`).to.equal(0)
      expect(r.stdout).to.match(/^[1-9]\d* passed, 0 failed/m)
    }
  })
})
