/**
 * The checks kpt makes on the package paths of its command lines, before anything is read or
 * written (src/lib/resourcelist/source.ts checkPackageArgument and pathExists, sink.ts
 * checkSinkTarget): a missing package in kpt's words, and a sink target that must not exist yet
 * (not even as a dangling symbolic link), in a temporary directory.
 */
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {checkPackageArgument, checkSinkTarget} from '../../src/lib/resourcelist/index.js'
import {pathExists} from '../../src/lib/resourcelist/source.js'
import {failure} from '../support/fnr-error.js'
import {TempDirs} from '../support/tmp.js'

describe('resourcelist: package paths on the command line', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('a package argument must exist (file or directory), said as kpt says it', async () => {
    const dir = await temp.make('fnr-args-')
    await writeFile(path.join(dir, 'cm.yaml'), 'a: 1\n')
    await checkPackageArgument(dir)
    await checkPackageArgument(path.join(dir, 'cm.yaml'))
    const missing = await failure(checkPackageArgument(path.join(dir, 'nope')))
    expect(missing.kind).to.equal('InvalidArgument')
    expect(missing.message).to.equal(`lstat ${path.join(dir, 'nope')}: no such file or directory`)
    expect(missing.details).to.deep.include({commandLine: true})
  })

  it('pathExists sees files, directories and dangling symbolic links', async () => {
    const dir = await temp.make('fnr-args-')
    await symlink(path.join(dir, 'nowhere'), path.join(dir, 'dangling'))
    expect(await pathExists(dir)).to.equal(true)
    expect(await pathExists(path.join(dir, 'dangling'))).to.equal(true)
    expect(await pathExists(path.join(dir, 'nowhere'))).to.equal(false)
  })

  it('a sink target must not exist: a directory, a file or a dangling link is refused; a path through a file is a path error', async () => {
    const dir = await temp.make('fnr-args-')
    await checkSinkTarget(path.join(dir, 'new'))
    await mkdir(path.join(dir, 'existing'))
    await writeFile(path.join(dir, 'file'), '')
    await symlink(path.join(dir, 'nowhere'), path.join(dir, 'dangling'))
    for (const name of ['existing', 'file', 'dangling']) {
      const e = await failure(checkSinkTarget(path.join(dir, name)))
      expect(e.kind, name).to.equal('InvalidArgument')
      expect(e.message, name).to.equal(`directory ${JSON.stringify(path.join(dir, name))} already exists, please delete the directory and retry`)
    }
    const through = await failure(checkSinkTarget(path.join(dir, 'file', 'sub')))
    expect(through.message).to.equal(`${path.join(dir, 'file', 'sub')}: a path component is not a directory (ENOTDIR)`)
  })
})
