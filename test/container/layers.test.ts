/**
 * Unpacking image layers (src/lib/container/layers.ts): files, directories and links, OCI
 * whiteouts, and the ways an archive could write outside the root filesystem, each refused or kept
 * inside. Layers are built here with tar-stream's packer, compressed as registries serve them.
 */
import {expect} from 'chai'
import {lstat, mkdir, readFile, readdir, readlink, stat, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {buffer} from 'node:stream/consumers'
import zlib from 'node:zlib'

import {pack} from 'tar-stream'

import {FnrError} from '../../src/lib/errors.js'
import {compressionOf, entryComponents, unpackLayer} from '../../src/lib/container/layers.js'
import {TempDirs} from '../support/tmp.js'

interface Entry {
  name: string
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo'
  content?: string
  linkname?: string
  mode?: number
}

async function tarOf(entries: Entry[]): Promise<Buffer> {
  const p = pack()
  for (const e of entries) {
    const type = e.type ?? 'file'
    const mode = e.mode ?? (type === 'directory' ? 0o755 : 0o644)
    if (type === 'file') p.entry({name: e.name, mode, type}, Buffer.from(e.content ?? ''))
    else p.entry({name: e.name, mode, type, linkname: e.linkname})
  }
  p.finalize()
  return buffer(p as unknown as NodeJS.ReadableStream)
}

describe('container layers: unpacking into a root filesystem', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  /** A fresh directory with `root` inside it (so "outside the root" is inside the test's directory). */
  async function bed(): Promise<{dir: string; root: string; layer: (entries: Entry[], compression?: 'gzip' | 'zstd' | 'none') => Promise<string>}> {
    const dir = await temp.make('fnr-layers-')
    const root = path.join(dir, 'root')
    await mkdir(root)
    let n = 0
    const layer = async (entries: Entry[], compression: 'gzip' | 'zstd' | 'none' = 'gzip'): Promise<string> => {
      const t = await tarOf(entries)
      const body = compression === 'gzip' ? zlib.gzipSync(t) : compression === 'zstd' ? zlib.zstdCompressSync(t) : t
      const file = path.join(dir, `layer-${n++}`)
      await writeFile(file, body)
      return file
    }
    return {dir, root, layer}
  }
  const opts = {label: 'layer sha256:test of image "x"'}

  it('makes files, directories, symbolic and hard links with their modes, from gzip, zstd or plain tar', async () => {
    for (const compression of ['gzip', 'zstd', 'none'] as const) {
      const {root, layer} = await bed()
      const file = await layer(
        [
          {name: 'usr/', type: 'directory'},
          {name: 'usr/local/bin/function', content: '#!/bin/sh\ncat\n', mode: 0o755},
          {name: './etc/passwd', content: 'nobody:x:65534:65534::/:/bin/false\n'},
          {name: 'bin', type: 'symlink', linkname: 'usr/local/bin'},
          {name: 'usr/local/bin/fn-link', type: 'link', linkname: 'usr/local/bin/function'},
          {name: 'dev/null', type: 'fifo'},
        ],
        compression,
      )
      expect(compressionOf(await readFile(file))).to.equal(compression)
      const stats = await unpackLayer(root, file, opts)
      expect(stats).to.deep.include({entries: 6, skipped: 1})
      expect(await readFile(path.join(root, 'usr/local/bin/function'), 'utf8')).to.equal('#!/bin/sh\ncat\n')
      expect((await stat(path.join(root, 'usr/local/bin/function'))).mode & 0o777).to.equal(0o755)
      expect(await readlink(path.join(root, 'bin'))).to.equal('usr/local/bin')
      expect((await stat(path.join(root, 'usr/local/bin/fn-link'))).ino).to.equal((await stat(path.join(root, 'usr/local/bin/function'))).ino)
      expect(await readFile(path.join(root, 'etc/passwd'), 'utf8')).to.include('nobody')
      expect(await readdir(root)).to.have.members(['usr', 'etc', 'bin'])
    }
  })

  it('applies whiteouts to the layers below: .wh.<name> deletes it, .wh..wh..opq empties the directory of what they put there', async () => {
    const {root, layer} = await bed()
    await unpackLayer(root, await layer([{name: 'a/keep', content: '1'}, {name: 'a/gone', content: '2'}, {name: 'a/dir/x', content: '3'}, {name: 'b/old', content: '4'}, {name: 'c/old', content: '5'}]), opts)
    await unpackLayer(
      root,
      await layer([
        {name: 'a/.wh.gone'},
        {name: 'a/.wh.dir'},
        {name: 'b/.wh..wh..opq'},
        {name: 'b/new', content: 'new'},
        // the marker after a file of the same layer: that file stays
        {name: 'c/new', content: 'new'},
        {name: 'c/.wh..wh..opq'},
        {name: '.wh.not-there'},
      ]),
      opts,
    )
    expect((await readdir(path.join(root, 'a'))).sort()).to.deep.equal(['keep'])
    expect(await readdir(path.join(root, 'b'))).to.deep.equal(['new'])
    expect(await readdir(path.join(root, 'c'))).to.deep.equal(['new'])
    expect((await readdir(root)).some((n) => n.startsWith('.wh.'))).to.equal(false)
  })

  it('refuses an entry or a hard link with a ".." component, and writes nothing outside the root', async () => {
    const {dir, root, layer} = await bed()
    for (const entries of [[{name: '../escaped', content: 'x'}], [{name: 'a/../../escaped', content: 'x'}], [{name: 'ok', content: 'x'}, {name: 'hl', type: 'link' as const, linkname: '../outside'}]]) {
      const err = await unpackLayer(root, await layer(entries), opts).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(err).to.be.instanceOf(FnrError)
      expect((err as FnrError).kind).to.equal('FailedPrecondition')
      expect((err as FnrError).message).to.match(/^layer sha256:test of image "x": (entry ".*" leaves the root filesystem|hard link "hl" points at "..\/outside", outside the root filesystem); the image is refused$/)
    }
    expect((await readdir(dir)).filter((n) => !n.startsWith('layer-'))).to.deep.equal(['root'])
    expect(entryComponents('/abs/./x//y/')).to.deep.equal(['abs', 'x', 'y'])
    expect(entryComponents('a/../b')).to.equal(undefined)
  })

  it('follows a symbolic link on the way to an entry inside the root only, and never writes through the entry\'s own link', async () => {
    const {dir, root, layer} = await bed()
    const outside = path.join(dir, 'outside.txt')
    await writeFile(outside, 'host file\n')
    await unpackLayer(
      root,
      await layer([
        {name: 'up', type: 'symlink', linkname: '../../../..'},
        {name: 'abs', type: 'symlink', linkname: '/'},
        {name: 'host', type: 'symlink', linkname: dir},
        {name: 'f', type: 'symlink', linkname: outside},
        {name: 'loop', type: 'symlink', linkname: 'loop'},
      ]),
      opts,
    )
    await unpackLayer(
      root,
      await layer([
        {name: 'up/pwned-up', content: 'x'},
        {name: 'abs/etc/pwned-abs', content: 'x'},
        {name: 'host/outside.txt', content: 'overwritten\n'},
        {name: 'f', content: 'new\n'},
        {name: 'hl', type: 'link', linkname: 'abs/etc/pwned-abs'},
      ]),
      opts,
    )
    expect(await readFile(outside, 'utf8')).to.equal('host file\n')
    expect((await readdir(dir)).filter((n) => !n.startsWith('layer-')).sort()).to.deep.equal(['outside.txt', 'root'])
    expect(await readFile(path.join(root, 'pwned-up'), 'utf8')).to.equal('x')
    expect(await readFile(path.join(root, 'etc/pwned-abs'), 'utf8')).to.equal('x')
    // `host` points at the test's directory: read as the root's "/tmp/…", created inside the root.
    expect(await readFile(path.join(root, dir, 'outside.txt'), 'utf8')).to.equal('overwritten\n')
    expect((await lstat(path.join(root, 'f'))).isFile()).to.equal(true)
    expect(await readFile(path.join(root, 'hl'), 'utf8')).to.equal('x')
    const loop = await unpackLayer(root, await layer([{name: 'loop/x', content: 'x'}]), opts).then(
      () => undefined,
      (e: unknown) => e as FnrError,
    )
    expect(loop?.message).to.match(/too many levels of symbolic links/)
  })

  it('stops at the size limit (ResourceExhausted) and names a layer that is not an archive', async () => {
    const {root, layer} = await bed()
    const big = await unpackLayer(root, await layer([{name: 'a', content: 'x'.repeat(5000)}]), {...opts, maxBytes: 4096}).then(
      () => undefined,
      (e: unknown) => e as FnrError,
    )
    expect([big?.kind, big?.message]).to.deep.equal(['ResourceExhausted', 'layer sha256:test of image "x": the image unpacks to more than 4096 bytes (the image cache\'s size limit)'])
    const {dir} = await bed()
    const junk = path.join(dir, 'junk')
    await writeFile(junk, Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from('not gzip at all')]))
    const bad = await unpackLayer(root, junk, opts).then(
      () => undefined,
      (e: unknown) => e as FnrError,
    )
    expect(bad?.kind).to.equal('FailedPrecondition')
    expect(bad?.message).to.match(/^layer sha256:test of image "x": (the layer is not valid gzip data|cannot unpack the layer)/)
  })
})
