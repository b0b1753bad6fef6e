/**
 * kpt's command line on fnr eval: `fnr eval DIR` (in place) and `fnr eval -`, --match-KEY and --exclude-KEY
 * (same function input and files as kpt), --env, --runner, and -h on every command.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {cp, mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {RunningServer} from '../../src/lib/serve.js'
import {runCli} from '../support/cli.js'
import {REPO_ROOT, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'
const SET_NS = path.join(REPO_ROOT, 'functions', 'set-namespace')

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  async function walk(d: string): Promise<void> {
    for (const e of await readdir(d, {withFileTypes: true})) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) await walk(p)
      else out[path.relative(dir, p)] = await readFile(p, 'utf8')
    }
  }
  await walk(dir)
  return out
}

describe('fnr eval: kpt\'s command line', function () {
  this.timeout(90_000)
  const temp = new TempDirs()
  let dir: string
  let pkg: string
  before(async () => {
    dir = await temp.make('fnr-eval-kptcli-')
    pkg = path.join(dir, 'pkg')
    await mkdir(path.join(pkg, 'sub'), {recursive: true})
    await writeFile(path.join(pkg, 'deploy.yaml'), 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  replicas: 1\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n')
    await writeFile(path.join(pkg, 'sub', 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: old\n')
  })
  after(() => temp.cleanup())

  it('fnr eval DIR edits DIR in place, with the same files as kpt fn eval DIR', async () => {
    const k = path.join(dir, 'k1')
    const f = path.join(dir, 'f1')
    await cp(pkg, k, {recursive: true})
    await cp(pkg, f, {recursive: true})
    await execa(KPT, ['fn', 'eval', k, '--exec', SET_NS, '--', 'namespace=prod'])
    const r = await runCli(['eval', f, '--exec', SET_NS, '--', 'namespace=prod'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.equal('')
    expect(await tree(f)).to.deep.equal(await tree(k))
    // "-" is stdin, as kpt fn eval -
    const source = await execa(KPT, ['fn', 'source', pkg])
    const kd = await execa(KPT, ['fn', 'eval', '-', '--exec', SET_NS, '--', 'namespace=x'], {input: source.stdout})
    const fd = await runCli(['eval', '-', '--exec', SET_NS, '--', 'namespace=x'], {input: source.stdout})
    expect(fd.exitCode, fd.stderr).to.equal(0)
    expect(fd.stdout.trimEnd()).to.equal(kd.stdout.trimEnd())
  })

  for (const flags of [
    ['--match-kind', 'Service'],
    ['--match-labels', 'app=web'],
    ['--match-namespace', 'old'],
    ['--exclude-kind', 'Deployment', '--match-api-version', 'v1'],
    ['--match-name', 'web', '--exclude-kind', 'Service'],
  ]) {
    it(`${flags.join(' ')}: the function gets what kpt sends it, and the files come out the same`, async () => {
      const work = await temp.make('fnr-eval-match-')
      const dump = await writeExecutable(path.join(work, 'dump.sh'), `#!/bin/sh\ntee "$DUMP"\n`)
      const result: Record<string, {dump: string; files: Record<string, string>; stderr: string}> = {}
      for (const who of ['kpt', 'fnr']) {
        const p = path.join(work, who)
        await cp(pkg, p, {recursive: true})
        const env = {DUMP: path.join(work, `${who}.dump`)}
        const r = who === 'kpt' ? await execa(KPT, ['fn', 'eval', p, '--exec', dump, ...flags], {env, reject: false}) : await runCli(['eval', p, '--exec', dump, ...flags], {env})
        expect(r.exitCode, String(r.stderr)).to.equal(0)
        result[who] = {dump: await readFile(env.DUMP, 'utf8'), files: await tree(p), stderr: String(r.stderr).split('\n')[0]!}
      }
      expect(result.fnr!.dump).to.equal(result.kpt!.dump)
      expect(result.fnr!.files).to.deep.equal(result.kpt!.files)
      expect(result.fnr!.stderr).to.equal(result.kpt!.stderr)
    })
  }

  it('--env sets variables for --exec and for --image (exec config) functions; with --runner it is a usage error that says why', async () => {
    const work = await temp.make('fnr-eval-env-')
    const script = '#!/bin/sh\ncat\necho "team=$TEAM own=$OWN secret=$SECRET" >&2\n'
    const fn = await writeExecutable(path.join(work, 'env.sh'), script)
    const env = {OWN: 'mine', SECRET: 's'}
    const r = await runCli(['eval', '--input', pkg, '--exec', fn, '--env', 'TEAM=blue', '-e', 'OWN', '--no-truncate-output'], {env})
    expect(r.exitCode, r.stderr).to.equal(0)
    // --exec: fnr's whole environment, as kpt.
    expect(r.stderr).to.contain('"team=blue own=mine secret=s"')
    // --image: the exec runtime's minimal environment plus --env (KEY alone: fnr's own value).
    await mkdir(path.join(work, 'functions'))
    await writeExecutable(path.join(work, 'functions', 'env-fn'), script)
    await writeFile(path.join(work, 'config.yaml'), 'functions:\n- function: env-fn\n  images: [example.com/env:v1]\n')
    const execConfig = ['--config', path.join(work, 'config.yaml'), '--functions', path.join(work, 'functions')]
    const i = await runCli(['eval', '--input', pkg, '--image', 'example.com/env:v1', ...execConfig, '--env', 'TEAM=green', '--env', 'OWN', '--no-truncate-output'], {env})
    expect(i.exitCode, i.stderr).to.equal(0)
    expect(i.stderr).to.contain('"team=green own=mine secret="')
    const without = await runCli(['eval', '--input', pkg, '--image', 'example.com/env:v1', ...execConfig, '--no-truncate-output'], {env})
    expect(without.stderr).to.contain('"team= own= secret="')
    const u = await runCli(['eval', '--input', pkg, '--image', 'fnr.local/set-namespace:v0.4', '--runner', '127.0.0.1:1', '--env', 'A=b'])
    expect(u.exitCode).to.equal(2)
    expect(u.stderr).to.contain('--env cannot be passed through --runner').and.to.contain('proto/evaluator.proto')
    const bad = await runCli(['eval', '--input', pkg, '--exec', fn, '--env', '=x'])
    expect(bad.exitCode).to.equal(2)
    expect(bad.stderr).to.contain('--env takes KEY=VALUE or KEY, got "=x"')
  })

  it('--runner runs --image through a running fnr serve, with the same output as the local exec config', async () => {
    let running: RunningServer | undefined
    try {
      running = await startInProcess(serveOptions({configPath: path.join(REPO_ROOT, 'functions', 'config.yaml'), functionsDir: path.join(REPO_ROOT, 'functions'), disableRuntimes: 'pod'}))
      const args = ['eval', '--input', pkg, '--image', 'fnr.local/set-namespace:v0.4', '-o', 'unwrap']
      const remote = await runCli([...args, '--runner', `127.0.0.1:${running.port}`, '--', 'namespace=remote'])
      const local = await runCli([...args, '--', 'namespace=remote'])
      expect(remote.exitCode, remote.stderr).to.equal(0)
      expect(remote.stdout).to.equal(local.stdout).and.to.contain('namespace: remote')
      const unknown = await runCli(['eval', '--input', pkg, '--image', 'example.com/nope:v1', '--runner', `127.0.0.1:${running.port}`])
      expect(unknown.exitCode).to.equal(4)
    } finally {
      await running?.stop()
    }
  })

  it('-h prints help on every command, like --help', async () => {
    for (const cmd of [['eval'], ['test'], ['render'], ['serve'], ['image', 'inspect']]) {
      const r = await runCli([...cmd, '-h'])
      expect(r.exitCode, `${cmd.join(' ')}: ${r.stderr}`).to.equal(0)
      expect(r.stdout, cmd.join(' ')).to.contain('USAGE')
    }
  })
})
