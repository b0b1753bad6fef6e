/**
 * kpt's command line on fnr eval and fnr render: `fnr eval [DIR]` (in place, DIR defaults to the
 * current directory) and `fnr eval -`, kpt's flags (-i, -s/-t, -m, --image-pull-policy, --network,
 * …), --match-KEY and --exclude-KEY (same function input and files as kpt), kpt's exit codes and
 * error lines beside kpt's own, --env, --runner, and -h on every command.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {cp, mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {RunningServer} from '../../src/lib/serve.js'
import {runCli} from '../support/cli.js'
import {writeTree} from '../support/package-tree.js'
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
    expect(u.exitCode).to.equal(1)
    expect(u.stderr).to.contain('--env cannot be passed through --runner').and.to.contain('proto/evaluator.proto')
    const bad = await runCli(['eval', '--input', pkg, '--exec', fn, '--env', '=x'])
    expect(bad.exitCode).to.equal(1)
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
      expect(unknown.exitCode).to.equal(1)
      const own = await runCli(['eval', '--input', pkg, '--image', 'example.com/nope:v1', '--runner', `127.0.0.1:${running.port}`, '--exit-codes', 'fnr'])
      expect(own.exitCode).to.equal(4)
    } finally {
      await running?.stop()
    }
  })

  /** The lines kpt's CLI prints for an error ("error: …" from its CLI library, "Error: … " from kpt). */
  const errorLines = (stderr: string): string[] => stderr.split('\n').filter((l) => /^(error|Error): /.test(l))

  describe('failures: exit 1 and kpt\'s line, beside kpt', () => {
    let work: string
    let fail: string
    before(async () => {
      work = await temp.make('fnr-kpt-failures-')
      await cp(pkg, path.join(work, 'pkg'), {recursive: true})
      await writeFile(path.join(work, 'pkg', 'Kptfile'), 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n')
      await mkdir(path.join(work, 'exists'))
      await writeFile(path.join(work, 'fc.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\ndata:\n  a: b\n')
      fail = await writeExecutable(path.join(work, 'fail.sh'), '#!/bin/sh\necho boom >&2\nexit 3\n')
      await writeTree(path.join(work, 'needs-exec'), {Kptfile: `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: needs-exec\npipeline:\n  mutators:\n  - exec: ${SET_NS}\n`})
      await writeTree(path.join(work, 'fails'), {Kptfile: `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: fails\npipeline:\n  mutators:\n  - exec: ${fail}\n`, 'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'})
      await writeTree(path.join(work, 'no-kptfile'), {'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'})
    })

    // [what, args (kpt's after `kpt fn`, fnr's the same), how fnr's line compares: 'same' word for word,
    // 'prefix' kpt's line then more, or a pattern both lines match (the wording is each tool's own),
    // and 'oclif too' where fnr's oclif command must say the same as its fast path]
    const cases: Array<[string, string[], 'same' | 'prefix' | RegExp, 'oclif too'?]> = [
      ['-o without its value', ['eval', 'pkg', '--exec', SET_NS, '-o'], 'same', 'oclif too'],
      ['--output without its value', ['eval', 'pkg', '--exec', SET_NS, '--output'], 'same', 'oclif too'],
      ['render: -o without its value', ['render', 'needs-exec', '-o'], 'same', 'oclif too'],
      ['render: --results-dir without its value', ['render', 'needs-exec', '--results-dir'], 'same', 'oclif too'],
      ['render: unknown flag (oclif too)', ['render', 'needs-exec', '--bogus'], 'same', 'oclif too'],
      ['no function', ['eval', 'pkg'], 'same'],
      ['unknown flag', ['eval', 'pkg', '--exec', SET_NS, '--bogus'], 'same'],
      ['the function fails (no line after its [FAIL] block)', ['eval', 'pkg', '--exec', 'FAIL'], 'same'],
      ['-m (deprecated)', ['eval', 'pkg', '--exec', SET_NS, '-m'], 'same'],
      ['--save without --type', ['eval', 'pkg', '--exec', SET_NS, '-s'], 'same'],
      ['--save with a bad --type', ['eval', 'pkg', '--exec', SET_NS, '-s', '-t', 'other'], 'same'],
      ['--image-pull-policy not a policy', ['eval', 'pkg', '--exec', SET_NS, '--image-pull-policy', 'sometimes'], 'same'],
      ['--fn-config missing', ['eval', 'pkg', '--exec', SET_NS, '--fn-config', 'nope.yaml'], 'same'],
      ['--fn-config outside the package with --save', ['eval', 'pkg', '--exec', SET_NS, '-s', '-t', 'mutator', '--fn-config', 'fc.yaml'], 'same'],
      ['-o an existing directory', ['eval', 'pkg', '--exec', SET_NS, '-o', 'exists'], 'same'],
      ['two DIRs', ['eval', 'pkg', 'exists', '--exec', SET_NS], 'prefix'],
      ['--fn-config and arguments', ['eval', 'pkg', '--exec', SET_NS, '--fn-config', 'fc.yaml', '--', 'a=b'], 'prefix'],
      ['--network with --exec', ['eval', 'pkg', '--exec', SET_NS, '--network'], /can only be used with container functions/],
      ['DIR missing', ['eval', 'nope', '--exec', SET_NS], 'same'],
      ['--exec missing', ['eval', 'pkg', '--exec', './missing-fn'], /^error: .*missing-fn/],
      ['render: exec without --allow-exec', ['render', 'needs-exec'], 'same'],
      ['render: unknown flag', ['render', 'needs-exec', '--bogus'], 'same'],
      ['render: --image-pull-policy not a policy', ['render', 'needs-exec', '--image-pull-policy', 'sometimes'], 'same'],
      ['render: no Kptfile', ['render', 'no-kptfile'], 'same'],
      ['render: the function fails', ['render', 'fails', '--allow-exec'], 'same'],
      ['render: DIR missing', ['render', 'nope'], 'same'],
    ]
    for (const [what, args, compare, oclifToo] of cases) {
      it(`${what}: ${args.join(' ')}`, async () => {
        const argv = args.map((a) => (a === 'FAIL' ? fail : a))
        const k = await execa(KPT, ['fn', ...argv], {cwd: work, reject: false})
        const f = await runCli(argv, {cwd: work})
        if (oclifToo) {
          const o = await runCli(argv, {cwd: work, env: {FNR_NO_FAST_PATH: '1'}})
          expect([o.exitCode, o.stderr], 'through oclif').to.deep.equal([f.exitCode, f.stderr])
        }
        expect(k.exitCode, String(k.stderr)).to.equal(1)
        expect(f.exitCode, f.stderr).to.equal(1)
        const kl = errorLines(String(k.stderr)).map((l) => l.split(work).join('WORK'))
        const fl = errorLines(f.stderr).map((l) => l.split(work).join('WORK'))
        expect(f.stderr).not.to.match(/^fnr: /m)
        if (compare === 'same') expect(fl).to.deep.equal(kl)
        else if (compare === 'prefix') {
          expect(fl).to.have.length(1)
          expect(fl[0]!.startsWith(kl[0]!), `${fl[0]} starts with ${kl[0]}`).to.equal(true)
        } else {
          expect(kl, String(k.stderr)).to.have.length(1)
          expect(fl, f.stderr).to.have.length(1)
          expect(fl[0]).to.match(compare)
        }
        // fnr's own codes and lines on request.
        const own = await runCli([argv[0]!, '--exit-codes', 'fnr', ...argv.slice(1)], {cwd: work})
        expect(own.stderr).not.to.match(/^error: /m)
      })
    }
  })

  it('no DIR is the current directory, in place (stdin is read only for "-"), with the same files as kpt', async () => {
    const work = await temp.make('fnr-eval-cwd-')
    for (const who of ['kpt', 'fnr']) await cp(pkg, path.join(work, who), {recursive: true})
    const input = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-stdin\n'
    const k = await execa(KPT, ['fn', 'eval', '--exec', SET_NS, '--', 'namespace=here'], {cwd: path.join(work, 'kpt'), input, reject: false})
    const f = await runCli(['eval', '--exec', SET_NS, '--', 'namespace=here'], {cwd: path.join(work, 'fnr'), input})
    expect(k.exitCode, String(k.stderr)).to.equal(0)
    expect(f.exitCode, f.stderr).to.equal(0)
    expect(f.stdout).to.equal('')
    expect(await tree(path.join(work, 'fnr'))).to.deep.equal(await tree(path.join(work, 'kpt')))
    expect((await tree(path.join(work, 'fnr')))['deploy.yaml']).to.contain('namespace: here')
  })

  it('-s -t adds the function to the Kptfile as kpt does (then updates it), and -i, --image-pull-policy, -k are accepted', async () => {
    const work = await temp.make('fnr-eval-save-')
    const kptfile = '# the package\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg # its name\npipeline:\n  mutators:\n  - image: example.com/other:v1\n'
    for (const who of ['kpt', 'fnr']) {
      await cp(pkg, path.join(work, who), {recursive: true})
      await writeFile(path.join(work, who, 'Kptfile'), kptfile)
      await writeFile(path.join(work, who, 'fc.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fc\n  annotations:\n    config.kubernetes.io/local-config: "true"\ndata:\n  namespace: validated\n')
    }
    const runs = [
      ['-s', '-t', 'mutator', '--exec', SET_NS, '--match-kind', 'ConfigMap', '--exclude-name', 'x', '--', 'namespace=first', 'n=5'],
      ['--save', '--type', 'mutator', '--exec', SET_NS, '--image-pull-policy', 'never', '-k', 'ns', '--', 'namespace=second'],
      ['-s', '-t', 'validator', '--exec', SET_NS, '--fn-config', 'DIR/fc.yaml'],
    ]
    for (const run of runs) {
      const out: Record<string, {exitCode: number; stderr: string[]}> = {}
      for (const who of ['kpt', 'fnr']) {
        const dir = path.join(work, who)
        const argv = [dir, ...run.map((a) => a.replace('DIR', dir))]
        const r = who === 'kpt' ? await execa(KPT, ['fn', 'eval', ...argv], {reject: false}) : await runCli(['eval', ...argv])
        out[who] = {exitCode: r.exitCode ?? -1, stderr: String(r.stderr).split('\n').filter((l) => / in the Kptfile\.$/.test(l))}
      }
      expect(out.fnr, run.join(' ')).to.deep.equal(out.kpt)
      expect(out.fnr!.exitCode).to.equal(0)
      expect(await tree(path.join(work, 'fnr')), run.join(' ')).to.deep.equal(await tree(path.join(work, 'kpt')))
    }
    const saved = (await tree(path.join(work, 'fnr')))['Kptfile']!
    expect(saved).to.contain('# the package').and.to.contain(`exec: ${SET_NS}`).and.to.contain('configPath: fc.yaml').and.to.contain('namespace: second')
    // -i is --image (the shipped set-namespace), as in kpt.
    const i = await runCli(['eval', path.join(work, 'fnr'), '-i', 'fnr.local/set-namespace:v0.4', '--image-pull-policy', 'IfNotPresent', '-o', 'unwrap', '--', 'namespace=by-image'])
    expect(i.exitCode, i.stderr).to.equal(0)
    expect(i.stdout).to.contain('namespace: by-image')
  })

  it('render takes kpt\'s --allow-network and --image-pull-policy (and ignores an extra argument), with the same files as kpt, and --allow-alpha-wasm', async () => {
    const work = await temp.make('fnr-render-flags-')
    const files = {Kptfile: `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\npipeline:\n  mutators:\n  - exec: ${SET_NS}\n    configMap:\n      namespace: rendered\n`, 'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'}
    await writeTree(path.join(work, 'kpt'), files)
    await writeTree(path.join(work, 'fnr'), files)
    const flags = ['--allow-exec', '--allow-network', '--image-pull-policy', 'Never']
    // An argument after PKG_PATH is ignored, as kpt ignores it.
    const k = await execa(KPT, ['fn', 'render', path.join(work, 'kpt'), 'extra', ...flags], {reject: false})
    // kpt 1.0.0-beta.56 as released refuses --allow-alpha-wasm (built without wasmtime); fnr accepts it and runs no wasm.
    const f = await runCli(['render', path.join(work, 'fnr'), 'extra', ...flags, '--allow-alpha-wasm'])
    expect(k.exitCode, String(k.stderr)).to.equal(0)
    expect(f.exitCode, f.stderr).to.equal(0)
    expect(await tree(path.join(work, 'fnr'))).to.deep.equal(await tree(path.join(work, 'kpt')))
    const viaRunner = await runCli(['render', path.join(work, 'fnr'), '--allow-network', '--runner', '127.0.0.1:1'])
    expect(viaRunner.exitCode).to.equal(1)
    expect(viaRunner.stderr).to.match(/^error: --allow-network cannot be passed through --runner/)
  })

  it('-h prints help on every command, like --help', async () => {
    for (const cmd of [['eval'], ['test'], ['render'], ['serve'], ['image', 'inspect']]) {
      const r = await runCli([...cmd, '-h'])
      expect(r.exitCode, `${cmd.join(' ')}: ${r.stderr}`).to.equal(0)
      expect(r.stdout, cmd.join(' ')).to.contain('USAGE')
    }
  })
})
