/** The conformance suite's pure parts: kpt's runner's normalisations, the image mapping, config decoding, case discovery. */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {TempDirs} from '../support/tmp.js'
import {decodeConfig, discoverKptCases} from './cases.js'
import {catalogFunction, fullImage, unrunnable} from './functions.js'
import {kptMessageForm, sanitizeTimestamps} from './kpt-runner.js'

describe('conformance judge (pure parts)', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it("sanitizes [PASS]/[FAIL] durations as kpt's runner does, and nothing else", () => {
    expect(sanitizeTimestamps('[RUNNING] "a"\n[PASS] "a" in 2.1s\n[FAIL] "b" in 300ms\n  [PASS] "c" in 1s\n[PASS] "d" on 1 in 2s')).to.equal(
      '[RUNNING] "a"\n[PASS] "a" in 0s\n[FAIL] "b" in 0s\n  [PASS] "c" in 1s\n[PASS] "d" on 1 in 2s',
    )
  })

  it("reads fnr's `fnr: MSG (see --help)` lines in kpt's two message forms", () => {
    const text = '[RUNNING] "x"\nfnr: must run with `--allow-exec` (see --help)\nfnr: second\n'
    expect(kptMessageForm(text)).to.equal('[RUNNING] "x"\nError: must run with `--allow-exec`\nError: second\n')
    expect(kptMessageForm(text, 'error')).to.equal('[RUNNING] "x"\nerror: must run with `--allow-exec`\nerror: second\n')
  })

  it('maps every catalog spelling of an image to its function, whatever the tag', () => {
    expect(catalogFunction('ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.2.0')).to.equal('set-namespace')
    expect(catalogFunction('gcr.io/kpt-fn/starlark@sha256:abc')).to.equal('starlark')
    expect(catalogFunction('set-labels:v0.1.5')).to.equal('set-labels')
    expect(catalogFunction('gcr.io/kpt-fn-demo/set-namespace:v0.5.0')).to.equal(undefined)
    expect(catalogFunction('ghcr.io/kptdev/krm-functions-catalog/wasm/set-namespace:v0.5.0')).to.equal(undefined)
    expect(fullImage('set-labels:v0.1.5')).to.equal('ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.1.5')
    const built = new Map([['set-namespace', '/bin/true']])
    expect(unrunnable('set-namespace:v0.2.0', built)).to.equal(undefined)
    expect(unrunnable('ghcr.io/kptdev/krm-functions-catalog/dne', built)).to.equal(undefined)
    expect(unrunnable('set-labels:v0.1.5', built)).to.equal('image set-labels:v0.1.5: function set-labels is not built here')
  })

  it("decodes config.yaml as kpt's runner: its keys, case-sensitive, render by default", () => {
    const c = decodeConfig('exitCode: 1\nStdErrRegEx: x\nstdErr: boom\nargs:\n  replicas: 3\napiVersion: v1\n')
    expect(c).to.include({exitCode: 1, stdErr: 'boom', stdErrRegEx: '', testType: 'render'})
    expect(c.args).to.deep.equal({replicas: '3'})
    expect(decodeConfig(undefined)).to.include({exitCode: 0, testType: 'render', skip: false})
    expect(decodeConfig('testType: eval\nskip: true\n')).to.include({testType: 'eval', skip: true})
  })

  it('finds cases (nested too) and the images of their config, Kptfiles and scripts', async () => {
    const root = await temp.make('fnr-conformance-cases-')
    const a = path.join(root, 'fn-eval', 'a')
    await mkdir(path.join(a, '.expected'), {recursive: true})
    await writeFile(path.join(a, '.expected', 'config.yaml'), 'testType: eval\nimage: set-namespace:v0.2.0\n')
    const b = path.join(root, 'fn-eval', 'b', 'pkg')
    await mkdir(path.join(b, '.expected'), {recursive: true})
    await mkdir(path.join(b, 'sub'))
    await writeFile(path.join(b, 'sub', 'Kptfile'), 'apiVersion: kpt.dev/v1\nkind: Kptfile\npipeline:\n  mutators:\n  - image: starlark:v0.5\n  validators:\n  - exec: ./x\n')
    await writeFile(path.join(b, '.expected', 'exec.sh'), 'IMG="ghcr.io/kptdev/krm-functions-catalog/foo:v1"\nkpt fn eval --image $IMG\nkpt fn eval -i apply-setters:v0.2 .\n')
    const cases = await discoverKptCases(root, ['fn-eval'])
    expect(cases.map((c) => [c.name, c.config.testType, c.images])).to.deep.equal([
      ['fn-eval/a', 'eval', ['set-namespace:v0.2.0']],
      ['fn-eval/b/pkg', 'render', ['ghcr.io/kptdev/krm-functions-catalog/foo:v1', 'apply-setters:v0.2', 'starlark:v0.5']],
    ])
  })
})
