/**
 * `fnr eval --save`: the function written into a package's Kptfile on disk
 * (src/lib/save-function.ts saveFunctionToKptfile), in a temporary directory: kpt's messages when
 * it is added or updated, and the lines it prints instead when there is no Kptfile or the Kptfile
 * cannot take it, with the file left as it was. The entry itself is in ./save-function.test.ts.
 */
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {saveFunctionToKptfile} from '../../src/lib/save-function.js'
import {TempDirs} from '../support/tmp.js'

const KPTFILE = 'apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n'

describe('fnr eval --save: the Kptfile on disk', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('adds the function, then updates the entry with the same image, in kpt\'s words', async () => {
    const dir = await temp.make('fnr-save-')
    await writeFile(path.join(dir, 'Kptfile'), KPTFILE)
    expect(await saveFunctionToKptfile(dir, {image: 'set-labels:v0.1', fnConfigArgs: ['app=a']}, 'mutator')).to.equal('Added "set-labels:v0.1" as mutator in the Kptfile.\n')
    expect(await readFile(path.join(dir, 'Kptfile'), 'utf8')).to.equal(`${KPTFILE}pipeline:\n  mutators:\n    - image: set-labels:v0.1\n      configMap:\n        app: a\n`)
    expect(await saveFunctionToKptfile(dir, {image: 'set-labels:v0.1', fnConfigArgs: ['app=b']}, 'mutator')).to.equal('Updated "set-labels:v0.1" as mutator in the Kptfile.\n')
    expect(await readFile(path.join(dir, 'Kptfile'), 'utf8')).to.equal(`${KPTFILE}pipeline:\n  mutators:\n    - image: set-labels:v0.1\n      configMap:\n        app: b\n`)
  })

  it('no Kptfile (or no package): says so and writes nothing', async () => {
    const dir = await temp.make('fnr-save-')
    expect(await saveFunctionToKptfile(dir, {image: 'x:v1', fnConfigArgs: []}, 'validator')).to.equal('function not added: Kptfile not exists\n')
    expect(await saveFunctionToKptfile('', {image: 'x:v1', fnConfigArgs: []}, 'validator')).to.equal('function not added: Kptfile not exists\n')
  })

  it('a Kptfile that cannot take the function: says why and leaves the file as it was', async () => {
    const dir = await temp.make('fnr-save-')
    const broken = 'apiVersion: [kpt.dev/v1\nkind: Kptfile\n'
    await writeFile(path.join(dir, 'Kptfile'), broken)
    let said = await saveFunctionToKptfile(dir, {image: 'x:v1', fnConfigArgs: []}, 'mutator')
    expect(said).to.equal(`function is not added to Kptfile: Kptfile at ${JSON.stringify(dir)} can't be read\n`)
    expect(await readFile(path.join(dir, 'Kptfile'), 'utf8')).to.equal(broken)
    // a Kptfile that is not a map either
    await writeFile(path.join(dir, 'Kptfile'), '- a\n- b\n')
    said = await saveFunctionToKptfile(dir, {image: 'x:v1', fnConfigArgs: []}, 'mutator')
    expect(said).to.equal(`function is not added to Kptfile: Kptfile at ${JSON.stringify(dir)} can't be read\n`)
    expect(await readFile(path.join(dir, 'Kptfile'), 'utf8')).to.equal('- a\n- b\n')
  })
})
