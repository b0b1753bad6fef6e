/**
 * No silent config: a ./config.yaml that is not an exec config never decides what an image runs.
 * The one-shot commands (eval, test, render) use the shipped functions unless --config/--functions
 * is given; serve ignores such a file with a warning; serve with zero images says so.
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {startServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

const KPT_CONFIG = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config\ndata:\n  a: b\n'
const CM = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'

describe('exec config defaults (no silent config.yaml)', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('fnr eval --image in a directory holding a kpt config.yaml runs the shipped function', async () => {
    const dir = await temp.make('fnr-cfg-')
    await writeFile(path.join(dir, 'config.yaml'), KPT_CONFIG)
    const r = await runCli(['eval', '-', '--image', 'fnr.local/set-namespace:v0.4', '-o', 'unwrap', '--', 'namespace=prod'], {cwd: dir, input: CM})
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stdout).to.contain('namespace: prod')
    // --config still chooses a file, and says what is wrong with it.
    const c = await runCli(['eval', '-', '--image', 'fnr.local/set-namespace:v0.4', '--config', 'config.yaml', '--', 'namespace=prod'], {cwd: dir, input: CM})
    expect(c.exitCode).to.not.equal(0)
  })

  it('fnr serve with an exec config mapping no image says so in one log line', async () => {
    const dir = await temp.make('fnr-cfg-empty-')
    await mkdir(path.join(dir, 'functions'))
    await writeFile(path.join(dir, 'config.yaml'), 'functions: []\n')
    const proc = await startServeProcess(['--disable-runtimes=pod', `--config=${path.join(dir, 'config.yaml')}`, `--functions=${path.join(dir, 'functions')}`])
    try {
      const lines = proc.stderr().split('\n').filter((l) => l.includes('serves no images'))
      expect(lines).to.have.length(1)
    } finally {
      proc.child.kill('SIGTERM')
      await proc.exited
    }
  })
})
