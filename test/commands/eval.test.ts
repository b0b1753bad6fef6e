import {expect} from 'chai'
import {execa} from 'execa'
import {cp, mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {BIN_RUN, REPO_ROOT} from '../support/serve.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'
const EXAMPLE = path.join(REPO_ROOT, 'examples', 'hello')
const SET_NS = path.join(REPO_ROOT, 'functions', 'set-namespace')

/** Every file under dir (relative path → content). */
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

describe('fnr eval', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let work: string
  let kptResult: Record<string, string>

  before(async () => {
    try {
      await execa(KPT, ['version'])
    } catch {
      throw new Error(`${KPT} is needed for the kpt interop tests (it ships with the machine image as google-cloud-cli-kpt)`)
    }
    work = await temp.make('fnr-eval-')
    // The reference: kpt fn eval, in place, on a copy of the example.
    const kptPkg = path.join(work, 'kpt-pkg')
    await cp(EXAMPLE, kptPkg, {recursive: true})
    await execa(KPT, ['fn', 'eval', kptPkg, '--exec', SET_NS, '--', 'namespace=prod'])
    kptResult = await tree(kptPkg)
  })
  after(() => temp.cleanup())

  it('kpt fn source | fnr eval --exec | kpt fn sink gives the same files as kpt fn eval', async () => {
    const out = path.join(work, 'piped')
    const cmd = `${KPT} fn source ${EXAMPLE} | ${process.execPath} ${BIN_RUN} eval - --exec ${SET_NS} -- namespace=prod | ${KPT} fn sink ${out}`
    await execa('bash', ['-o', 'pipefail', '-c', cmd])
    expect(await tree(out)).to.deep.equal(kptResult)
    expect(kptResult['deploy.yaml']).to.contain('namespace: prod')
  })

  it('the same files as kpt fn eval whether the function gives back every item unchanged, changes one, or changes all (unchanged items are kept, the others parsed one at a time)', async () => {
    const edits: Record<string, string> = {
      unchanged: 'cat',
      'one changed': "sed 's/replicas: 2 # scale as needed/replicas: 3 # scaled/'",
      'all changed': "sed 's/^  kind: /  # edited\\n  kind: /'",
    }
    for (const [name, filter] of Object.entries(edits)) {
      const fn = await writeExecutable(path.join(work, `${name.replace(' ', '-')}.sh`), `#!/bin/sh\n${filter}\n`)
      const fnrPkg = path.join(work, `fnr-${name.replace(' ', '-')}`)
      const kptPkg = path.join(work, `kpt-${name.replace(' ', '-')}`)
      await cp(EXAMPLE, fnrPkg, {recursive: true})
      await cp(EXAMPLE, kptPkg, {recursive: true})
      await execa(KPT, ['fn', 'eval', kptPkg, '--exec', fn])
      const r = await runCli(['eval', fnrPkg, '--exec', fn])
      expect(r.exitCode, r.stderr).to.equal(0)
      expect(await tree(fnrPkg), name).to.deep.equal(await tree(kptPkg))
    }
    expect(await readFile(path.join(work, 'fnr-one-changed', 'deploy.yaml'), 'utf8')).to.contain('replicas: 3 # scaled')
    expect(await readFile(path.join(work, 'fnr-all-changed', 'deploy.yaml'), 'utf8')).to.contain('# edited\nkind: Service')
  })

  it('--input DIR --output NEWDIR gives the same files', async () => {
    const out = path.join(work, 'sunk')
    const r = await runCli(['eval', '--input', EXAMPLE, '--output', out, '--exec', SET_NS, '--', 'namespace=prod'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(await tree(out)).to.deep.equal(kptResult)
    expect(r.stdout).to.equal('')
    expect(r.stderr).to.contain(`[PASS] "${SET_NS}"`)
  })

  it('--input DIR --output DIR updates the package in place', async () => {
    const pkg = path.join(work, 'inplace')
    await cp(EXAMPLE, pkg, {recursive: true})
    const r = await runCli(['eval', '--input', pkg, '-o', pkg, '--image', 'fnr.local/set-namespace:v0.4', '--', 'namespace=prod'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(await tree(pkg)).to.deep.equal(kptResult)
  })

  it('resolves fnr’s own image names through the shipped config and writes results.yaml like kpt', async () => {
    const kptRes = path.join(work, 'kpt-results')
    const kptPkg = path.join(work, 'kpt-pkg2')
    await cp(EXAMPLE, kptPkg, {recursive: true})
    await execa(KPT, ['fn', 'eval', kptPkg, '--exec', SET_NS, '--results-dir', kptRes, '--', 'namespace=prod'])
    const fnrRes = path.join(work, 'fnr-results')
    const r = await runCli(['eval', '--input', EXAMPLE, '--exec', SET_NS, '--results-dir', fnrRes, '--', 'namespace=prod'])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(await readFile(path.join(fnrRes, 'results.yaml'), 'utf8')).to.equal(await readFile(path.join(kptRes, 'results.yaml'), 'utf8'))
    expect(r.stderr).to.contain('[info]: namespace [default hello] updated to "prod"')
    const short = await runCli(['eval', '--input', EXAMPLE, '--image', 'fnr.local/set-namespace:v0.4', '-o', 'unwrap', '--', 'namespace=prod'])
    expect(short.exitCode, short.stderr).to.equal(0)
    expect(short.stdout).to.contain('namespace: prod')
    expect(short.stdout).not.to.contain('internal.config.kubernetes.io')
    expect(short.stdout).to.contain('\n---\n')
  })

  it('a failing function writes nothing, exits 1 and reports results and stderr like kpt', async () => {
    const pkg = path.join(work, 'failing')
    await cp(EXAMPLE, pkg, {recursive: true})
    const before = await tree(pkg)
    const kptRes = path.join(work, 'kpt-fail-results')
    const kptPkg = path.join(work, 'kpt-fail-pkg')
    await cp(EXAMPLE, kptPkg, {recursive: true})
    const k = await execa(KPT, ['fn', 'eval', kptPkg, '--exec', SET_NS, '--results-dir', kptRes], {reject: false})
    expect(k.exitCode).to.equal(1)
    const fnrRes = path.join(work, 'fnr-fail-results')
    const r = await runCli(['eval', '--input', pkg, '-o', pkg, '--exec', SET_NS, '--results-dir', fnrRes])
    expect(r.exitCode).to.equal(1)
    expect(await tree(pkg)).to.deep.equal(before)
    expect(r.stderr).to.contain(`[FAIL] "${SET_NS}"`)
    expect(r.stderr).to.contain('Exit code: 1')
    // As kpt: the [FAIL] block says it all, no line after it; fnr's own form adds one.
    expect(r.stderr.trimEnd()).to.match(/Exit code: 1\n\n\nFor complete results, see .*results\.yaml$/)
    const own = await runCli(['eval', '--input', pkg, '-o', pkg, '--exec', SET_NS, '--exit-codes', 'fnr'])
    expect(own.exitCode).to.equal(1)
    expect(own.stderr).to.match(/fnr: function .* exited with code 1; nothing was written/)
    expect(await readFile(path.join(fnrRes, 'results.yaml'), 'utf8')).to.equal(await readFile(path.join(kptRes, 'results.yaml'), 'utf8'))
  })

  it('reads plain YAML documents on stdin and keeps a ResourceList\'s own functionConfig', async () => {
    const docs = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n'
    const r = await runCli(['eval', '-', '--exec', SET_NS, '--', 'namespace=x'], {input: docs})
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.match(/kind: ResourceList/)
    expect(r.stdout.match(/namespace: x/g)).to.have.length(2)
    const list = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: function-input
  data:
    namespace: from-list
`
    const own = await runCli(['eval', '-', '--exec', SET_NS], {input: list})
    expect(own.exitCode, own.stderr).to.equal(0)
    expect(own.stdout).to.contain('namespace: from-list')
  })

  it('--fail-on-error-results turns error results into exit 1; by default they pass like kpt', async () => {
    const dir = await temp.make()
    const fn = await writeExecutable(
      path.join(dir, 'warn-fn'),
      `#!/bin/sh
cat >/dev/null
cat <<'YAML'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
results:
- message: something is wrong
  severity: error
YAML
`,
    )
    const input = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'
    const pass = await runCli(['eval', '-', '--exec', fn], {input})
    expect(pass.exitCode, pass.stderr).to.equal(0)
    expect(pass.stderr).to.contain('[error]: something is wrong')
    const fail = await runCli(['eval', '-', '--exec', fn, '--fail-on-error-results'], {input})
    expect(fail.exitCode).to.equal(1)
    expect(fail.stdout).to.equal('')
  })

  it('kills a function at --timeout (exit 6 with fnr\'s exit codes)', async () => {
    const dir = await temp.make()
    const fn = await writeExecutable(path.join(dir, 'sleepy'), SCRIPTS.sleep)
    const r = await runCli(['eval', '-', '--exec', fn, '--timeout', '500ms', '--exit-codes', 'fnr'], {input: 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'})
    expect(r.exitCode).to.equal(6)
    expect(r.stderr).to.match(/did not finish before the deadline/)
  })

  it('gives one-line usage errors: kpt\'s "error: " line and exit 1, or fnr\'s own code and "fnr: " line with --exit-codes fnr', async () => {
    const input = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'
    const cases: Array<[string[], number, RegExp, string?]> = [
      [['eval', '--input', EXAMPLE], 2, /must specify --image or --exec/],
      [['eval', '-', '--image', 'a', '--exec', 'b'], 2, /cannot also be provided when using --exec|--image/],
      [['eval', '--image', 'example.com/not-there:v1', '--input', EXAMPLE], 4, /not in the exec config/],
      [['eval', '-', '--exec', SET_NS], 2, /stdin is empty/, ''],
      [['eval', '--exec', 'cat | sh', '--input', EXAMPLE], 2, /shell operators are not supported/],
      [['eval', '--exec', SET_NS, '--input', EXAMPLE, '--fn-config', '/nonexistent', '--', 'a=b'], 2, /cannot be used together/],
      [['eval', '--exec', SET_NS, '--input', '/nonexistent/dir'], 2, /nonexistent/],
      [['eval', '--exec', SET_NS, 'stray'], 2, /stray: no such file or directory/],
      [['eval', '--exec', SET_NS, EXAMPLE, 'stray'], 2, /0 or 1 arguments supported, function arguments go after '--'/],
    ]
    for (const [args, code, pattern, stdin] of cases) {
      const fnr = await runCli([...args.slice(0, 1), '--exit-codes', 'fnr', ...args.slice(1)], {input: stdin ?? input})
      expect(fnr.exitCode, `${args.join(' ')}\n${fnr.stderr}`).to.equal(code)
      expect(fnr.stderr, args.join(' ')).to.match(pattern)
      expect(fnr.stderr.trim().split('\n').filter((l) => l.startsWith('fnr: ')), args.join(' ')).to.have.length(1)
      const kpt = await runCli(args, {input: stdin ?? input})
      expect(kpt.exitCode, `${args.join(' ')}\n${kpt.stderr}`).to.equal(1)
      const lines = kpt.stderr.trim().split('\n').filter((l) => /^(error|fnr): /.test(l))
      expect(lines, args.join(' ')).to.have.length(1)
      expect(lines[0], args.join(' ')).to.match(/^error: /).and.to.match(pattern)
    }
  })

  it('restores the input key order like kpt when a function reorders or adds keys', async () => {
    const dir = await temp.make()
    const pkg = path.join(dir, 'pkg')
    await mkdir(pkg)
    await writeFile(
      path.join(pkg, 'cm.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    x: y\n    w: z\ndata:\n  k1: v\n  k2: v\nspec:\n  inner:\n    a: 1\n    b: 2\n',
    )
    const fn = await writeExecutable(
      path.join(dir, 'reorder'),
      `#!/usr/bin/env node
let s = require('fs').readFileSync(0, 'utf8')
s = s.replace('  data:\\n    k1: v\\n    k2: v\\n', '  data:\\n    new: n\\n    k2: v\\n    k1: v\\n')
s = s.replace('    labels:\\n      x: y\\n      w: z\\n', '    labels:\\n      w: z\\n      x: y\\n')
s = s.replace('  kind: ConfigMap\\n', '  kind: ConfigMap\\n  top: t\\n')
process.stdout.write(s)
`,
    )
    const kptPkg = path.join(dir, 'kpt')
    await cp(pkg, kptPkg, {recursive: true})
    await execa(KPT, ['fn', 'eval', kptPkg, '--exec', fn])
    const out = path.join(dir, 'out')
    const r = await runCli(['eval', '--input', pkg, '-o', out, '--exec', fn])
    expect(r.exitCode, r.stderr).to.equal(0)
    const ours = await tree(out)
    expect(ours).to.deep.equal(await tree(kptPkg))
    expect(ours['cm.yaml']).to.contain('top: t')
  })

  it('gives the same results through oclif as through the fast path', async () => {
    const input = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'
    const cases = [
      ['eval', '-', '--exec', SET_NS, '--', 'namespace=x'],
      ['eval', '-', '--exec', SET_NS, '-o', 'unwrap', '--no-truncate-output', '--timeout', '1m', '--', 'namespace=y'],
      ['eval', '-', '--image', 'fnr.local/set-namespace:v0.4', '--', 'namespace=z'],
      ['eval', '-', '--image', 'a', '--exec', 'b'],
      ['eval', '-', '--exec', SET_NS, '--timeout', 'soon'],
      ['eval', '-', '--exec', SET_NS, '--max-output-size', '12'],
      ['eval', '-', '--exec', SET_NS, '--bogus'],
      ['eval', '--exec', SET_NS, 'stray'],
      ['eval', '-', '--exec', SET_NS],
      ['eval', '-', '--exec', SET_NS, '--bogus', '--exit-codes', 'fnr'],
      ['eval', '-', '-i', 'fnr.local/set-namespace:v0.4', '--image-pull-policy', 'never', '-o', 'unwrap', '--', 'namespace=w'],
    ]
    for (const args of cases) {
      const fast = await runCli(args, {input})
      const viaOclif = await runCli(args, {input, env: {FNR_NO_FAST_PATH: '1'}})
      expect(fast.exitCode, `${args.join(' ')}: ${fast.stderr}`).to.equal(viaOclif.exitCode)
      expect(fast.stdout, args.join(' ')).to.equal(viaOclif.stdout)
      // The error line in the same form (kpt's, or fnr's with --exit-codes fnr).
      const errorLines = (text: string): string[] => text.split('\n').filter((l) => /^(error|fnr): /.test(l)).map((l) => l.split(':')[0]!)
      expect(errorLines(fast.stderr), args.join(' ')).to.deep.equal(errorLines(viaOclif.stderr))
      if (fast.exitCode === 0) expect(fast.stdout).to.contain('kind: ')
    }
  })

  it('refuses to sink into an existing directory, like kpt fn sink', async () => {
    const out = path.join(work, 'exists')
    await mkdir(out)
    await writeFile(path.join(out, 'keep.txt'), 'mine')
    const r = await runCli(['eval', '--input', EXAMPLE, '-o', out, '--exec', SET_NS, '--', 'namespace=prod'])
    expect(r.exitCode).to.equal(1)
    expect(r.stderr).to.contain(`error: directory ${JSON.stringify(out)} already exists, please delete the directory and retry`)
    expect(await tree(out)).to.deep.equal({'keep.txt': 'mine'})
  })
})
