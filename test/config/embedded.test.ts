/**
 * src/lib/config/embedded.ts: when fnr uses the functions it ships instead of Porch's defaults
 * (./config.yaml, ./functions): never when a flag was given; for `serve` when ./config.yaml is
 * missing or is not an exec config (with a warning); for the one-shot commands always.
 */
import {existsSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {EMBEDDED_EXEC_CONFIG, EMBEDDED_FUNCTIONS_DIR, looksLikeExecConfig, resolveExecPaths} from '../../src/lib/config/embedded.js'
import {TempDirs} from '../support/tmp.js'

describe('config/embedded', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())
  let dir: string
  let execConfig: string
  let kptConfig: string
  beforeEach(async () => {
    dir = await temp.make()
    execConfig = path.join(dir, 'exec.yaml')
    kptConfig = path.join(dir, 'kpt.yaml')
    await writeFile(execConfig, 'functions:\n  - image: example.com/fn:v1\n    exec: ./fn\n')
    await writeFile(kptConfig, 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nfunctions: []\n')
  })
  const EMBEDDED = {configPath: EMBEDDED_EXEC_CONFIG, functionsDir: EMBEDDED_FUNCTIONS_DIR, embedded: true}

  it('points at functions/ and functions/config.yaml of this installation', () => {
    expect(path.basename(EMBEDDED_FUNCTIONS_DIR)).to.equal('functions')
    expect(EMBEDDED_EXEC_CONFIG).to.equal(path.join(EMBEDDED_FUNCTIONS_DIR, 'config.yaml'))
    expect(existsSync(EMBEDDED_EXEC_CONFIG)).to.equal(true)
    expect(looksLikeExecConfig(EMBEDDED_EXEC_CONFIG)).to.equal(true)
  })

  it('uses the given paths as they are when either flag was set', () => {
    const missing = path.join(dir, 'missing.yaml')
    expect(resolveExecPaths(missing, 'fns', true, false)).to.deep.equal({configPath: missing, functionsDir: 'fns', embedded: false})
    expect(resolveExecPaths(missing, 'fns', false, true)).to.deep.equal({configPath: missing, functionsDir: 'fns', embedded: false})
    // even for the one-shot commands, and even when the file is not an exec config
    expect(resolveExecPaths(kptConfig, 'fns', true, true, {cli: true, warn: () => expect.fail('no warning')})).to.deep.equal({configPath: kptConfig, functionsDir: 'fns', embedded: false})
  })

  it('serve: uses the shipped functions when the default config.yaml does not exist', () => {
    expect(resolveExecPaths(path.join(dir, 'missing.yaml'), './functions', false, false, {warn: () => expect.fail('no warning')})).to.deep.equal(EMBEDDED)
  })

  it('serve: uses a default config.yaml that is an exec config', () => {
    expect(resolveExecPaths(execConfig, './functions', false, false, {warn: () => expect.fail('no warning')})).to.deep.equal({configPath: execConfig, functionsDir: './functions', embedded: false})
  })

  it('serve: ignores a default config.yaml that is not an exec config, with one warning', () => {
    const warnings: string[] = []
    expect(resolveExecPaths(kptConfig, './functions', false, false, {warn: (m) => warnings.push(m)})).to.deep.equal(EMBEDDED)
    expect(warnings).to.deep.equal([
      `${kptConfig} is not an exec config (no top-level "functions:"); it is ignored and the shipped functions are used (give --config to use a file)`,
    ])
  })

  it('one-shot commands: always the shipped functions without flags, even beside an exec config', () => {
    expect(resolveExecPaths(execConfig, './functions', false, false, {cli: true, warn: () => expect.fail('no warning')})).to.deep.equal(EMBEDDED)
  })

  describe('looksLikeExecConfig', () => {
    async function file(name: string, text: string): Promise<string> {
      const f = path.join(dir, name)
      await writeFile(f, text)
      return f
    }

    it('is true for a mapping with functions and no kind', async () => {
      expect(looksLikeExecConfig(await file('a.yaml', 'functions: []\n'))).to.equal(true)
      expect(looksLikeExecConfig(await file('b.yaml', 'functions:\n'))).to.equal(true)
    })

    it('is false for a KRM resource, a mapping without functions, a list, a scalar and an empty file', async () => {
      expect(looksLikeExecConfig(kptConfig)).to.equal(false)
      expect(looksLikeExecConfig(await file('c.yaml', 'other: 1\n'))).to.equal(false)
      expect(looksLikeExecConfig(await file('d.yaml', '- functions: []\n'))).to.equal(false)
      expect(looksLikeExecConfig(await file('e.yaml', 'functions\n'))).to.equal(false)
      expect(looksLikeExecConfig(await file('f.yaml', ''))).to.equal(false)
    })

    it('is true for what it cannot read or parse, so the config loader says what is wrong', async () => {
      expect(looksLikeExecConfig(await file('g.yaml', 'functions: [unclosed\n'))).to.equal(true)
      expect(looksLikeExecConfig(path.join(dir, 'missing.yaml'))).to.equal(true)
      const sub = path.join(dir, 'sub')
      await mkdir(sub)
      expect(looksLikeExecConfig(sub)).to.equal(true)
    })
  })
})
