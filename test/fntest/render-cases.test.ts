/**
 * fnr test runs kpt e2e cases of `testType: render` (kpt's default when a case names no function):
 * the package's Kptfile pipeline is rendered on a scratch copy and compared with .expected/.
 */
import {expect} from 'chai'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: foo\n'

describe('fnr test: render cases (kpt e2e testType: render)', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('renders the Kptfile pipeline (exec with allowExec, images through the exec config), --update writes diff.patch and results.yaml, then the cases pass; kpt keys fnr cannot honour are warnings', async () => {
    const dir = await temp.make('fnr-test-render-')
    const fn = await writeExecutable(path.join(dir, 'foobar.sh'), "#!/bin/sh\nexec sed -e 's/foo/bar/'\n")
    const cases = path.join(dir, 'cases')
    // An exec pipeline, testType render spelled out, with kpt harness keys fnr does not use.
    const a = path.join(cases, 'exec-pipeline')
    await mkdir(path.join(a, '.expected'), {recursive: true})
    await writeFile(path.join(a, 'Kptfile'), `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: a\npipeline:\n  mutators:\n    - exec: ${fn}\n`)
    await writeFile(path.join(a, 'cm.yaml'), CM)
    await writeFile(path.join(a, '.expected', 'config.yaml'), 'testType: render\nallowExec: true\nrunCount: 2\nimagePullPolicy: never\nnetwork: true\n')
    // No config.yaml and no function named: kpt's default, render; a shipped image.
    const b = path.join(cases, 'image-pipeline')
    await mkdir(path.join(b, '.expected'), {recursive: true})
    await writeFile(
      path.join(b, 'Kptfile'),
      'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: b\npipeline:\n  mutators:\n    - image: fnr.local/set-namespace:v0.4\n      configMap:\n        namespace: prod\n',
    )
    await writeFile(path.join(b, 'cm.yaml'), CM)
    await writeFile(path.join(b, '.expected', 'results.yaml'), '')

    const u = await runCli(['test', cases, '--update'])
    expect(u.exitCode, u.stdout + u.stderr).to.equal(0)
    expect(u.stdout).to.contain('network is not used').and.not.to.contain('runCount')
    const patchA = await readFile(path.join(a, '.expected', 'diff.patch'), 'utf8')
    expect(patchA).to.contain('-  k: foo\n+  k: bar')
    const patchB = await readFile(path.join(b, '.expected', 'diff.patch'), 'utf8')
    expect(patchB).to.contain('+  namespace: prod')
    expect(await readFile(path.join(b, '.expected', 'results.yaml'), 'utf8')).to.contain('image: fnr.local/set-namespace:v0.4')

    const r = await runCli(['test', cases])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.match(/PASS\s+\S*exec-pipeline/).and.to.match(/PASS\s+\S*image-pipeline/)
    expect(r.stdout).to.contain('2 passed, 0 failed')

    // Without allowExec the exec pipeline fails like kpt (exit 2 with kpt's message).
    await writeFile(path.join(a, '.expected', 'config.yaml'), 'testType: render\n')
    const f = await runCli(['test', a])
    expect(f.exitCode).to.equal(1)
    expect(f.stdout).to.contain('must run with `--allow-exec` option')

    // A render case whose function breaks the package is a failure with a diff.
    await writeFile(path.join(a, '.expected', 'config.yaml'), 'allowExec: true\n')
    await writeFile(path.join(a, 'cm.yaml'), CM.replace('k: foo', 'k: foo\n  other: foo'))
    const d = await runCli(['test', a])
    expect(d.exitCode).to.equal(1)
    expect(d.stdout).to.contain('differs from the input + .expected/diff.patch')
  })

  it('keys that are not kpt\'s are ignored as kpt ignores them; skip skips; stdOut is checked', async () => {
    const dir = await temp.make('fnr-test-keys-')
    const c = path.join(dir, 'case')
    await mkdir(path.join(c, '.expected'), {recursive: true})
    await writeFile(path.join(c, 'cm.yaml'), CM)
    // kpt's decoder matches keys exactly: a mis-cased exitcode is no exitCode, and the catalog's
    // configs carry apiVersion/kind/metadata.
    await writeFile(path.join(c, '.expected', 'config.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nexitcode: 1\nStdErrRegEx: nothing-like-this\n')
    const r = await runCli(['test', c, '--exec', 'cat'])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('1 passed, 0 failed')
    await writeFile(path.join(c, '.expected', 'config.yaml'), 'skip: true\n')
    const s = await runCli(['test', c, '--exec', 'cat'])
    expect(s.exitCode, s.stdout + s.stderr).to.equal(0)
    expect(s.stdout).to.match(/^SKIP\s+\S*case .*\n {2}! skip: true in \.expected\/config\.yaml/m)
    expect(s.stdout).to.contain('0 passed, 0 failed, 1 skipped (1 case')
    await writeFile(path.join(c, '.expected', 'config.yaml'), 'stdOut: "kind: ConfigMap"\n')
    const o = await runCli(['test', c, '--exec', 'cat'])
    expect(o.exitCode, o.stdout + o.stderr).to.equal(1)
    expect(o.stdout).to.contain('stdout does not contain stdOut "kind: ConfigMap"')
  })
})
