/**
 * fnr test expectations hold however the function is spelled: a short or full image name, `./fn`,
 * `fn` or an absolute path (results.yaml and the console's [RUNNING]/[PASS]/[FAIL] names).
 */
import {expect} from 'chai'
import {cp, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {REPO_ROOT} from '../support/serve.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

describe('fnr test: expectations independent of how the function is spelled', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('the shipped cases pass with the image name the help example gives, and the help example works', async () => {
    const r = await runCli(['test', 'functions/testdata/set-namespace', '--image', 'fnr.local/set-namespace:v0.4'], {cwd: REPO_ROOT})
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('4 passed, 0 failed')
  })

  it('an expectation recorded with --exec ./fn passes with --exec /abs/path/fn', async () => {
    const dir = await temp.make('fnr-spelling-')
    await writeExecutable(path.join(dir, 'fn'), "#!/bin/sh\necho 'said something' >&2\nexec sed -e 's/foo/bar/'\n")
    const c = path.join(dir, 'cases', 'one')
    await mkdir(path.join(c, '.expected'), {recursive: true})
    await writeFile(path.join(c, 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: foo\n')
    await writeFile(path.join(c, '.expected', 'results.yaml'), '')
    await writeFile(path.join(c, '.expected', 'config.yaml'), 'stdErr: "[PASS] \\"./fn\\" in 0s"\n')
    const u = await runCli(['test', 'cases', '--exec', './fn', '--update'], {cwd: dir})
    expect(u.exitCode, u.stdout + u.stderr).to.equal(0)
    const moved = await temp.make('fnr-spelling-ci-')
    await cp(path.join(dir, 'cases'), path.join(moved, 'cases'), {recursive: true})
    const r = await runCli(['test', path.join(moved, 'cases'), '--exec', path.join(dir, 'fn')])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
  })
})
