/**
 * No silent config: a ./config.yaml that is not an exec config never decides what an image runs.
 * The one-shot commands (eval, test, render) use the shipped functions unless --config/--functions
 * is given; serve ignores such a file with a warning; serve with zero images says so.
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EMBEDDED_EXEC_CONFIG, resolveExecPaths} from '../../src/lib/config/embedded.js'
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

  it('serve (not cli): an exec config in ./config.yaml is used; anything else is ignored with a warning', async () => {
    const dir = await temp.make('fnr-cfg-serve-')
    const kpt = path.join(dir, 'kpt.yaml')
    await writeFile(kpt, KPT_CONFIG)
    const warnings: string[] = []
    const r = resolveExecPaths(kpt, path.join(dir, 'functions'), false, false, {warn: (m) => warnings.push(m)})
    expect(r.configPath).to.equal(EMBEDDED_EXEC_CONFIG)
    expect(warnings[0]).to.contain('is not an exec config')
    const exec = path.join(dir, 'exec.yaml')
    await writeFile(exec, 'functions:\n- function: x\n  images: [example.com/x:v1]\n')
    expect(resolveExecPaths(exec, path.join(dir, 'functions'), false, false).configPath).to.equal(exec)
    expect(resolveExecPaths(kpt, 'f', true, false).configPath).to.equal(kpt)
    // The one-shot commands: the shipped functions unless a flag is given.
    expect(resolveExecPaths(exec, 'f', false, false, {cli: true}).configPath).to.equal(EMBEDDED_EXEC_CONFIG)
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
