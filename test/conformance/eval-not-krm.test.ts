/**
 * A package file that is not KRM fails `fnr eval DIR` as it fails `kpt fn eval DIR` (kpt's e2e case
 * fn-eval/non-krm-resource): the function is announced, fails in 0s, then the reason; nothing runs
 * and nothing is written.
 */
import {expect} from 'chai'
import {execa} from 'execa'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {REPO_ROOT} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

const KPT = '/usr/bin/kpt'
const SET_NS = path.join(REPO_ROOT, 'functions', 'set-namespace')
const REASON = 'input resource list must contain only KRM resources: nonkrm.yaml: resource must have `apiVersion`'

describe('fnr eval on a package with a file that is not KRM (as kpt fn eval)', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('prints [RUNNING], [FAIL] in 0s and the reason, and leaves the package as it was', async () => {
    const dir = await temp.make('fnr-eval-not-krm-')
    const make = async (name: string): Promise<string> => {
      const pkg = path.join(dir, name)
      await mkdir(pkg)
      await writeFile(path.join(pkg, 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
      await writeFile(path.join(pkg, 'nonkrm.yaml'), 'replicas: 3\n')
      return pkg
    }
    const label = JSON.stringify(SET_NS)
    const k = await execa(KPT, ['fn', 'eval', await make('k'), '--exec', SET_NS, '--', 'namespace=prod'], {reject: false})
    expect(k.exitCode).to.equal(1)
    expect(k.stderr).to.include(`[RUNNING] ${label}\n[FAIL] ${label} in 0s\nerror: ${REASON}`)

    const f = await make('f')
    const r = await runCli(['eval', f, '--exec', SET_NS, '--', 'namespace=prod'])
    expect(r.exitCode).to.not.equal(0)
    // The reason's prefix (`fnr:` or kpt's `error:`) is the CLI's business.
    expect(r.stderr).to.match(/^\[RUNNING\] [^\n]+\n\[FAIL\] [^\n]+ in 0s\n[^\n]*input resource list must contain only KRM resources: nonkrm\.yaml: resource must have `apiVersion`$/m)
    expect(r.stderr.split('\n').slice(0, 2)).to.deep.equal([`[RUNNING] ${label}`, `[FAIL] ${label} in 0s`])
    expect(await readFile(path.join(f, 'cm.yaml'), 'utf8')).to.equal('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
  })
})
