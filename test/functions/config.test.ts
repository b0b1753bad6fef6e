import {expect} from 'chai'
import {constants as fsConstants} from 'node:fs'
import {access, readFile, stat} from 'node:fs/promises'
import path from 'node:path'

import {parse} from 'yaml'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {FUNCTIONS_DIR} from './support.js'

const CONFIG = path.join(FUNCTIONS_DIR, 'config.yaml')

// fnr's own implementations answer only under fnr's own names, never the catalog's (catalog.yaml
// maps those to the real binaries: test/catalog/).
const EXPECTED: Record<string, string[]> = {
  'set-namespace': ['v0.4', 'latest'],
  'set-labels': ['v0.2', 'latest'],
  'set-annotations': ['v0.1', 'latest'],
  'apply-setters': ['v0.2', 'latest'],
  'remove-local-config-resources': ['v0.1', 'latest'],
}
const PREFIXES = ['fnr.local/']

interface Entry {
  function: string
  images: string[]
}

describe('functions/config.yaml', () => {
  let entries: Entry[]
  let text: string

  before(async () => {
    text = await readFile(CONFIG, 'utf8')
    entries = (parse(text) as {functions: Entry[]}).functions
  })

  it('says these are fnr’s own implementations', () => {
    expect(text.split('\n')[0]).to.match(/^#/)
    expect(text).to.contain("fnr's own implementations")
  })

  it('maps both image prefixes with the tags Porch and kpt use', () => {
    expect(entries.map((e) => e.function)).to.deep.equal(Object.keys(EXPECTED))
    for (const e of entries) {
      const want = PREFIXES.flatMap((p) => EXPECTED[e.function].map((t) => `${p}${e.function}:${t}`))
      expect(e.images, e.function).to.have.members(want)
      expect(e.images, e.function).to.have.length(want.length)
    }
  })

  it('names executables with a node shebang, mode 755', async () => {
    for (const e of entries) {
      const file = path.join(FUNCTIONS_DIR, e.function)
      await access(file, fsConstants.X_OK)
      expect((await stat(file)).mode & 0o777, e.function).to.equal(0o755)
      expect((await readFile(file, 'utf8')).split('\n')[0], e.function).to.equal('#!/usr/bin/env node')
    }
  })

  it('loads with fnr’s exec config loader without warnings', async () => {
    const config = await loadExecConfig({configPath: CONFIG, functionsDir: FUNCTIONS_DIR})
    expect(config.warnings).to.deep.equal([])
    expect(config.lookup('fnr.local/set-namespace:v0.4')?.name).to.equal('set-namespace')
    expect(config.lookup('fnr.local/set-labels:latest')?.name).to.equal('set-labels')
    for (const catalogName of ['ghcr.io/kptdev/krm-functions-catalog/set-namespace:v0.4.1', 'set-namespace:v0.4.2', 'gcr.io/kpt-fn/set-labels:v0.2.2', 'set-labels']) {
      expect(config.lookup(catalogName), catalogName).to.equal(undefined)
    }
    expect(config.imageCount).to.equal(PREFIXES.length * Object.values(EXPECTED).flat().length)
  })
})
