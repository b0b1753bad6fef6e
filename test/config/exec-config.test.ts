import {expect} from 'chai'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {normaliseImage} from '../../src/lib/config/image-ref.js'
import {FnrError} from '../../src/lib/errors.js'
import {SCRIPTS, TempDirs, writeExecutable} from '../support/tmp.js'

async function expectConfigError(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  try {
    await p
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    expect((err as FnrError).message).to.match(pattern)
    return
  }
  expect.fail('expected a Config error')
}

describe('exec config', () => {
  const temp = new TempDirs()
  let root: string
  let fns: string

  beforeEach(async () => {
    root = await temp.make()
    fns = path.join(root, 'functions')
    await mkdir(fns)
    await writeExecutable(path.join(fns, 'set-namespace'), SCRIPTS.cat)
    await writeExecutable(path.join(fns, 'set-labels'), SCRIPTS.cat)
  })
  afterEach(() => temp.cleanup())

  async function load(yaml: string) {
    const configPath = path.join(root, 'config.yaml')
    await writeFile(configPath, yaml)
    return loadExecConfig({configPath, functionsDir: fns})
  }

  it('maps images to binaries, exact names first', async () => {
    const config = await load(`functions:
- function: set-namespace
  images: [ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1, gcr.io/kpt-fn/set-namespace:v0.4.1]
- function: set-labels
  images: [ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2]
`)
    expect(config.lookup('ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1')?.name).to.equal('set-namespace')
    expect(config.lookup('gcr.io/kpt-fn/set-namespace:v0.4.1')?.binary).to.equal(path.join(fns, 'set-namespace'))
    expect(config.lookup('ghcr.io/kptdev/krm-functions-catalog/set-labels:v0.2.2')?.name).to.equal('set-labels')
    expect(config.lookup('ghcr.io/kptdev/krm-functions-catalog/set-labels:v9')).to.equal(undefined)
    expect(config.lookup('')).to.equal(undefined)
  })

  it('matches short names through the default prefix and default tag', async () => {
    const config = await load(`functions:
- function: set-namespace
  images: [ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1, ghcr.io/kptdev/krm-functions-catalog/set-namespace:latest]
- function: set-labels
  images: [docker.io/library/labels, example.com/team/set-labels]
`)
    expect(config.lookup('set-namespace:v0.4.1')?.name).to.equal('set-namespace')
    expect(config.lookup('set-namespace')?.name).to.equal('set-namespace')
    expect(config.lookup('labels:latest')).to.equal(undefined) // short names get the catalog prefix, not docker.io
    expect(config.lookup('library/labels')?.name).to.equal('set-labels')
    expect(config.lookup('index.docker.io/library/labels:latest')?.name).to.equal('set-labels')
    expect(config.lookup('EXAMPLE.com/team/set-labels:latest')?.name).to.equal('set-labels')
    expect(config.lookup('example.com/team/set-labels:v1')).to.equal(undefined)
  })

  it('keeps the first of duplicate images and warns', async () => {
    const config = await load(`functions:
- function: set-namespace
  images: [x.io/a:v1]
- function: set-labels
  images: [x.io/a:v1, x.io/b:v1]
`)
    expect(config.lookup('x.io/a:v1')?.name).to.equal('set-namespace')
    expect(config.lookup('x.io/b:v1')?.name).to.equal('set-labels')
    expect(config.warnings).to.have.length(1)
    expect(config.warnings[0]).to.match(/duplicate image "x.io\/a:v1"/)
  })

  it('rejects ".." in function names, naming the entry', async () => {
    await expectConfigError(load('functions:\n- function: ../evil\n  images: [x.io/a:v1]\n'), /functions\[0\] \(function "..\/evil"\).*"\.\."/)
    await expectConfigError(load('functions:\n- function: sub/../../evil\n  images: [x.io/a:v1]\n'), /"\.\."/)
  })

  it('rejects absolute paths', async () => {
    await expectConfigError(load('functions:\n- function: /bin/sh\n  images: [x.io/a:v1]\n'), /absolute paths are not allowed/)
  })

  it('rejects symlinks that escape the functions directory', async () => {
    await symlink('/bin/sh', path.join(fns, 'escape'))
    await expectConfigError(load('functions:\n- function: escape\n  images: [x.io/a:v1]\n'), /outside the functions directory/)
  })

  it('accepts symlinks that stay inside', async () => {
    await symlink(path.join(fns, 'set-labels'), path.join(fns, 'alias'))
    const config = await load('functions:\n- function: alias\n  images: [x.io/a:v1]\n')
    expect(config.lookup('x.io/a:v1')?.binary).to.equal(path.join(fns, 'set-labels'))
  })

  it('rejects missing and non-executable binaries', async () => {
    await expectConfigError(load('functions:\n- function: nope\n  images: [x.io/a:v1]\n'), /functions\[0\] \(function "nope"\).*does not exist/)
    await writeFile(path.join(fns, 'plain'), 'data')
    await expectConfigError(load('functions:\n- function: plain\n  images: [x.io/a:v1]\n'), /not executable/)
    await mkdir(path.join(fns, 'dir'))
    await expectConfigError(load('functions:\n- function: dir\n  images: [x.io/a:v1]\n'), /not a regular file/)
  })

  it('rejects malformed files with a clear message', async () => {
    await expectConfigError(load('functions: [\n'), /cannot parse exec config/)
    await expectConfigError(load('- just\n- a list\n'), /expected a mapping/)
    await expectConfigError(load('functions: nope\n'), /"functions" must be a list/)
    await expectConfigError(load('functions:\n- images: [a]\n'), /"function" must be a string/)
    await expectConfigError(load('functions:\n- function: set-labels\n  images: nope\n'), /"images" must be a list/)
    await expectConfigError(load('functions:\n- function: set-labels\n  images: [""]\n'), /"images" must be a list of non-empty strings/)
    await expectConfigError(loadExecConfig({configPath: path.join(root, 'missing.yaml'), functionsDir: fns}), /cannot read exec config .*ENOENT/)
    await expectConfigError(
      (async () => {
        await writeFile(path.join(root, 'c.yaml'), 'functions:\n- function: a\n  images: [x]\n')
        return loadExecConfig({configPath: path.join(root, 'c.yaml'), functionsDir: path.join(root, 'nodir')})
      })(),
      /functions directory .* does not exist/,
    )
  })

  it('treats "" as no exec functions and an empty file as empty', async () => {
    expect((await loadExecConfig({configPath: '', functionsDir: fns})).imageCount).to.equal(0)
    expect((await load('')).imageCount).to.equal(0)
  })
})

describe('image normalisation for matching', () => {
  it('applies the documented rule', () => {
    expect(normaliseImage('set-namespace:v0.4.1')).to.equal('ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1')
    expect(normaliseImage('set-namespace', 'gcr.io/kpt-fn')).to.equal('gcr.io/kpt-fn/set-namespace:latest')
    expect(normaliseImage('nginx', '')).to.equal('docker.io/library/nginx:latest')
    expect(normaliseImage('docker.io/nginx:1')).to.equal('docker.io/library/nginx:1')
    expect(normaliseImage('user/app:1')).to.equal('docker.io/user/app:1')
    expect(normaliseImage('localhost:5000/app')).to.equal('localhost:5000/app:latest')
    expect(normaliseImage('Reg.Example.com/app@sha256:abc')).to.equal('reg.example.com/app@sha256:abc')
    expect(normaliseImage('reg.example.com/app:v1@sha256:abc')).to.equal('reg.example.com/app:v1@sha256:abc')
  })
})
