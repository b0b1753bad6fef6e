/**
 * Paths inside an image's root file system (src/lib/container/layers.ts resolveInRoot): symbolic
 * links met on the way are followed as if the root were `/`, never above it, absolute targets
 * restart at the root, the last component is not followed, and a loop of links is refused. Built
 * in a temporary directory; unpacking whole layers is in ./layers.test.ts.
 */
import {mkdir, symlink} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {resolveInRoot} from '../../src/lib/container/layers.js'
import {TempDirs} from '../support/tmp.js'

describe('container layers: paths inside the root', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('plain components, "." and "..", never above the root', async () => {
    const root = await temp.make('fnr-root-')
    expect(await resolveInRoot(root, [])).to.equal(root)
    expect(await resolveInRoot(root, ['usr', 'bin', 'fn'])).to.equal(path.join(root, 'usr/bin/fn'))
    expect(await resolveInRoot(root, ['usr', '.', '', 'lib', 'x'])).to.equal(path.join(root, 'usr/lib/x'))
    expect(await resolveInRoot(root, ['..', '..', 'etc', 'passwd'])).to.equal(path.join(root, 'etc/passwd'))
    expect(await resolveInRoot(root, ['usr', '..', '..', 'x'])).to.equal(path.join(root, 'x'))
  })

  it('follows links on the way inside the root: relative ones from where they are, absolute ones from the root; not the last component', async () => {
    const root = await temp.make('fnr-root-')
    await mkdir(path.join(root, 'usr/lib'), {recursive: true})
    await symlink('usr/lib', path.join(root, 'lib'))
    await symlink('/etc', path.join(root, 'usr/etc'))
    await symlink('../../../../..', path.join(root, 'usr/up'))
    await symlink('/outside', path.join(root, 'last'))
    expect(await resolveInRoot(root, ['lib', 'libc.so'])).to.equal(path.join(root, 'usr/lib/libc.so'))
    expect(await resolveInRoot(root, ['usr', 'etc', 'hosts'])).to.equal(path.join(root, 'etc/hosts'))
    expect(await resolveInRoot(root, ['usr', 'up', 'tmp', 'x'])).to.equal(path.join(root, 'tmp/x'))
    expect(await resolveInRoot(root, ['last'])).to.equal(path.join(root, 'last'))
  })

  it('refuses a loop of symbolic links', async () => {
    const root = await temp.make('fnr-root-')
    await symlink('b', path.join(root, 'a'))
    await symlink('a', path.join(root, 'b'))
    const err = await resolveInRoot(root, ['a', 'x']).catch((e: unknown) => e)
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('FailedPrecondition')
    expect((err as FnrError).message).to.match(/^too many levels of symbolic links under \/[ab]$/)
  })
})
