/**
 * A bare image name (`set-namespace:v0.2.0`) is named as kpt names it, with the default image
 * prefix, in `[RUNNING]`/`[PASS]` and in results.yaml, by fnr eval and fnr render (kpt's e2e cases
 * fn-eval/short-image-path and fn-render/short-image-path); the exec config still matches it.
 */
import {expect} from 'chai'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {displayImage} from '../../src/lib/config/image-ref.js'
import {runCli} from '../support/cli.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

const FULL = 'ghcr.io/kptdev/krm-functions-catalog/cat-fn:v1'

describe('bare image names, named as kpt names them', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('displayImage adds the default prefix to a name without "/" only', () => {
    expect(displayImage('cat-fn:v1')).to.equal(FULL)
    expect(displayImage('cat-fn:v1', 'example.com/fns')).to.equal('example.com/fns/cat-fn:v1')
    expect(displayImage('example.com/x/cat-fn:v1')).to.equal('example.com/x/cat-fn:v1')
    expect(displayImage('nginx')).to.equal('ghcr.io/kptdev/krm-functions-catalog/nginx')
  })

  it('fnr eval and fnr render print and record the prefixed name', async () => {
    const dir = await temp.make('fnr-image-names-')
    const fns = path.join(dir, 'functions')
    await mkdir(fns)
    await writeExecutable(path.join(fns, 'cat-fn'), '#!/bin/sh\nexec cat\n')
    const config = path.join(dir, 'config.yaml')
    await writeFile(config, `functions:\n- function: cat-fn\n  images: [${FULL}]\n`)
    const pkg = path.join(dir, 'pkg')
    await mkdir(pkg)
    await writeFile(path.join(pkg, 'cm.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n')
    const flags = ['--config', config, '--functions', fns]

    const results = path.join(dir, 'r1')
    const e = await runCli(['eval', pkg, '--image', 'cat-fn:v1', ...flags, '--results-dir', results])
    expect(e.exitCode, e.stderr).to.equal(0)
    expect(e.stderr).to.include(`[RUNNING] "${FULL}"\n[PASS] "${FULL}" in `)
    expect(await readFile(path.join(results, 'results.yaml'), 'utf8')).to.include(`- image: ${FULL}\n`)

    await writeFile(path.join(pkg, 'Kptfile'), 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - image: cat-fn:v1\n')
    const results2 = path.join(dir, 'r2')
    const r = await runCli(['render', pkg, ...flags, '--results-dir', results2])
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stderr).to.include(`[RUNNING] "${FULL}"\n[PASS] "${FULL}" in `)
    expect(await readFile(path.join(results2, 'results.yaml'), 'utf8')).to.include(`- image: ${FULL}\n`)
  })
})
