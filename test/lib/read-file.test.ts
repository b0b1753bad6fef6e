/**
 * The config-file reader's rules (src/lib/read-file.ts) without a FIFO (mkfifo is a process): the
 * problem a file's type and size make, the sizes as said in the line, the typed error, and reads
 * through symlink loops, sockets and across read chunks. FIFOs, /dev/zero, /proc files and the
 * readers built on it are test/config/read-file.test.ts.
 */
import type {Stats} from 'node:fs'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {ConfigFileError, MAX_CONFIG_FILE_BYTES, fileProblem, readConfigFile} from '../../src/lib/read-file.js'
import {TempDirs} from '../support/tmp.js'

/** A Stats that is only what it is said to be. */
function stats(kind: 'file' | 'dir' | 'fifo' | 'char' | 'block' | 'socket' | 'other', size = 0): Stats {
  return {
    size,
    isFile: () => kind === 'file',
    isDirectory: () => kind === 'dir',
    isFIFO: () => kind === 'fifo',
    isCharacterDevice: () => kind === 'char',
    isBlockDevice: () => kind === 'block',
    isSocket: () => kind === 'socket',
    isSymbolicLink: () => false,
  } as Stats
}

async function refused(p: Promise<unknown>): Promise<ConfigFileError> {
  const err = await p.then(() => undefined, (e: unknown) => e)
  expect(err).to.be.instanceOf(ConfigFileError)
  expect(err).to.be.instanceOf(FnrError)
  expect((err as FnrError).kind).to.equal('Config')
  return err as ConfigFileError
}

describe('config file reader (rules)', () => {
  describe('fileProblem', () => {
    it('a regular file within the limit has none, the limit itself included', () => {
      expect(fileProblem(stats('file', 0))).to.equal(undefined)
      expect(fileProblem(stats('file', MAX_CONFIG_FILE_BYTES))).to.equal(undefined)
      expect(fileProblem(stats('file', 16), 16)).to.equal(undefined)
    })

    it('the limit is 4 MiB by default (a ConfigMap or Secret holds at most 1 MiB)', () => {
      expect(MAX_CONFIG_FILE_BYTES).to.equal(4 * 1024 * 1024)
      expect(fileProblem(stats('file', MAX_CONFIG_FILE_BYTES + 1))).to.deep.equal({code: 'EFBIG', reason: 'it is 4 MiB, more than the limit of 4 MiB for a config file'})
    })

    it('says sizes in bytes, KiB or MiB, to one decimal', () => {
      expect(fileProblem(stats('file', 17), 16)!.reason).to.equal('it is 17 bytes, more than the limit of 16 bytes for a config file')
      expect(fileProblem(stats('file', 1536), 1024)!.reason).to.equal('it is 1.5 KiB, more than the limit of 1 KiB for a config file')
      expect(fileProblem(stats('file', 700 * 1024 * 1024))!.reason).to.equal('it is 700 MiB, more than the limit of 4 MiB for a config file')
      expect(fileProblem(stats('file', 5_500_000))!.reason).to.equal('it is 5.2 MiB, more than the limit of 4 MiB for a config file')
    })

    it('names what a file that is not regular is', () => {
      expect(fileProblem(stats('dir'))).to.deep.equal({code: 'EISDIR', reason: 'it is a directory (EISDIR)'})
      expect(fileProblem(stats('fifo'))).to.deep.equal({code: 'ENOTREG', reason: 'not a regular file (it is a FIFO)'})
      expect(fileProblem(stats('char'))).to.deep.equal({code: 'ENOTREG', reason: 'not a regular file (it is a character device)'})
      expect(fileProblem(stats('block'))).to.deep.equal({code: 'ENOTREG', reason: 'not a regular file (it is a block device)'})
      expect(fileProblem(stats('socket'))).to.deep.equal({code: 'ENOTREG', reason: 'not a regular file (it is a socket)'})
      expect(fileProblem(stats('other'))).to.deep.equal({code: 'ENOTREG', reason: 'not a regular file (it is not a file)'})
    })

    it('the type is judged before the size (a huge device is a device)', () => {
      expect(fileProblem(stats('block', 10 * MAX_CONFIG_FILE_BYTES))!.code).to.equal('ENOTREG')
    })
  })

  describe('readConfigFile', () => {
    const temp = new TempDirs()
    let dir: string
    const label = (file: string): string => `thing ${file} cannot be read`
    before(async () => {
      dir = await temp.make('fnr-read-file-unit-')
    })
    after(() => temp.cleanup())

    it('reads an empty file as no bytes, and a file larger than one read chunk whole', async () => {
      const empty = path.join(dir, 'empty')
      await writeFile(empty, '')
      expect((await readConfigFile(empty, {label: label(empty)})).length).to.equal(0)
      const big = path.join(dir, 'big')
      const content = Buffer.alloc(200 * 1024 + 7, 'abcdefg')
      await writeFile(big, content)
      expect((await readConfigFile(big, {label: label(big)})).equals(content)).to.equal(true)
    })

    it('reads a file of exactly maxBytes, and refuses one byte more', async () => {
      const f = path.join(dir, 'sixteen')
      await writeFile(f, '0123456789abcdef')
      expect((await readConfigFile(f, {label: label(f), maxBytes: 16})).toString()).to.equal('0123456789abcdef')
      const err = await refused(readConfigFile(f, {label: label(f), maxBytes: 15}))
      expect(err.message).to.equal(`thing ${f} cannot be read: it is 16 bytes, more than the limit of 15 bytes for a config file`)
      expect(err.code).to.equal('EFBIG')
    })

    it('the error carries the file, the code and the reason, also in details; an errno error is its cause', async () => {
      const missing = path.join(dir, 'missing.yaml')
      const err = await refused(readConfigFile(missing, {label: label(missing)}))
      expect(err.message).to.equal(`thing ${missing} cannot be read: no such file (ENOENT)`)
      expect({file: err.file, code: err.code, reason: err.reason}).to.deep.equal({file: missing, code: 'ENOENT', reason: 'no such file (ENOENT)'})
      expect(err.details).to.deep.include({file: missing, code: 'ENOENT'})
      expect((err.cause as NodeJS.ErrnoException).code).to.equal('ENOENT')
    })

    it('another wording of the line comes from the problem', async () => {
      const missing = path.join(dir, 'nope.json')
      const err = await refused(readConfigFile(missing, {label: 'unused', message: (p) => `registry auth file ${missing} does not exist [${p.code}]`}))
      expect(err.message).to.equal(`registry auth file ${missing} does not exist [ENOENT]`)
    })

    it('a symlink loop, a name too long, a path through a file: each in words with its code', async () => {
      const loop = path.join(dir, 'loop')
      await symlink(loop, loop)
      expect((await refused(readConfigFile(loop, {label: label(loop)}))).reason).to.equal('too many levels of symbolic links (ELOOP)')
      const long = path.join(dir, 'x'.repeat(300))
      expect((await refused(readConfigFile(long, {label: label(long)}))).reason).to.equal('the name is too long (ENAMETOOLONG)')
      const file = path.join(dir, 'plain')
      await writeFile(file, 'x')
      expect((await refused(readConfigFile(path.join(file, 'y'), {label: 'x'}))).code).to.equal('ENOTDIR')
    })

    it('a directory, also through a symlink, is EISDIR', async () => {
      const sub = path.join(dir, 'sub')
      await mkdir(sub)
      await symlink(sub, path.join(dir, 'sub-link'))
      for (const f of [sub, path.join(dir, 'sub-link')]) {
        const err = await refused(readConfigFile(f, {label: label(f)}))
        expect(err.message).to.equal(`thing ${f} cannot be read: it is a directory (EISDIR)`)
      }
    })

    it('a Unix socket is refused at open, never read', async () => {
      const sock = path.join(dir, 's.sock')
      const server = net.createServer()
      await new Promise<void>((resolve) => server.listen(sock, resolve))
      try {
        const err = await refused(readConfigFile(sock, {label: label(sock)}))
        expect(err.code).to.equal('ENXIO')
        expect(err.reason).to.equal('not a regular file (no such device or address; a socket?) (ENXIO)')
      } finally {
        await new Promise<void>((resolve) => server.close(() => resolve()))
      }
    })

    it('a character device is refused by type, without reading it', async () => {
      const err = await refused(readConfigFile('/dev/null', {label: label('/dev/null')}))
      expect(err.message).to.equal('thing /dev/null cannot be read: not a regular file (it is a character device)')
      expect(err.code).to.equal('ENOTREG')
    })
  })
})
