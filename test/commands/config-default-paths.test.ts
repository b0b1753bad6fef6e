/** Which exec config `fnr serve` and the one-shot commands use by default (src/lib/config/embedded.ts resolveExecPaths), in process; the commands themselves are in ./config-default.test.ts. */
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EMBEDDED_EXEC_CONFIG, resolveExecPaths} from '../../src/lib/config/embedded.js'
import {TempDirs} from '../support/tmp.js'

const KPT_CONFIG = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config\ndata:\n  a: b\n'

describe('exec config defaults (no silent config.yaml)', function () {
  const temp = new TempDirs()
  after(() => temp.cleanup())

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
})
