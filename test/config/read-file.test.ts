/**
 * The shared config-file reader (src/lib/read-file.ts) and the readers built on it: the exec
 * config, --pod-cache-config, the listener's TLS files, the registry auth file and CA files. A FIFO
 * must be refused at once (it used to block startup), a device must not be read (/dev/zero used to
 * be read until memory ran out), a directory and an oversized file give one clear Config line.
 */
import {execFileSync} from 'node:child_process'
import {mkdir, symlink, truncate, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {expect} from 'chai'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {PodCacheConfig} from '../../src/lib/config/pod-cache-config.js'
import {ConfigFileError, MAX_CONFIG_FILE_BYTES, readConfigFile} from '../../src/lib/read-file.js'
import {FnrError} from '../../src/lib/errors.js'
import {loadClientCredentials, loadListenerTls} from '../../src/lib/grpc/tls.js'
import {DockerConfig} from '../../src/lib/registry/auth.js'
import {loadCaFile} from '../../src/lib/registry/tls.js'
import {TempDirs} from '../support/tmp.js'

async function configError(p: Promise<unknown>): Promise<FnrError> {
  try {
    await p
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    expect((err as FnrError).message, 'one line').to.not.contain('\n')
    return err as FnrError
  }
  return expect.fail('expected a Config error')
}

describe('config files are read safely (regular files of at most 4 MiB)', () => {
  const temp = new TempDirs()
  let dir: string
  let fifo: string
  let big: string
  let plain: string
  /** Passes the read (a "-----BEGIN" line) and fails only later, when parsed. */
  let pem: string

  before(async () => {
    dir = await temp.make('fnr-read-file-')
    fifo = path.join(dir, 'a.fifo')
    execFileSync('mkfifo', [fifo])
    big = path.join(dir, 'big.yaml')
    await writeFile(big, '')
    // sparse: the size says 5 MiB without writing them
    await truncate(big, MAX_CONFIG_FILE_BYTES + 1024 * 1024)
    plain = path.join(dir, 'plain.yaml')
    await writeFile(plain, 'hello: world\n')
    pem = path.join(dir, 'not-really.pem')
    await writeFile(pem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n')
    await symlink(plain, path.join(dir, 'link.yaml'))
    await symlink(fifo, path.join(dir, 'link-to-fifo'))
    await mkdir(path.join(dir, 'a-dir'))
  })
  after(() => temp.cleanup())

  describe('readConfigFile', () => {
    const read = (file: string, maxBytes?: number): Promise<Buffer> => readConfigFile(file, {label: `thing ${file} cannot be read`, maxBytes})

    it('reads a regular file, also through a symlink (a mounted ConfigMap is one)', async () => {
      expect((await read(plain)).toString()).to.equal('hello: world\n')
      expect((await read(path.join(dir, 'link.yaml'))).toString()).to.equal('hello: world\n')
      // /proc files are regular files whose size says 0: read to their end, within the limit
      expect((await read('/proc/self/status')).toString()).to.match(/^Name:/)
    })

    for (const [label, file, code, reason] of [
      ['missing', 'missing.yaml', 'ENOENT', /^thing .*missing\.yaml cannot be read: no such file \(ENOENT\)$/],
      ['a directory', 'a-dir', 'EISDIR', /: it is a directory \(EISDIR\)$/],
      ['a FIFO (used to block until something wrote to it)', 'a.fifo', 'ENOTREG', /: not a regular file \(it is a FIFO\)$/],
      ['a symlink to a FIFO', 'link-to-fifo', 'ENOTREG', /: not a regular file \(it is a FIFO\)$/],
      ['/dev/zero (used to be read until memory ran out)', '/dev/zero', 'ENOTREG', /: not a regular file \(it is a character device\)$/],
      ['over the size limit', 'big.yaml', 'EFBIG', /: it is 5 MiB, more than the limit of 4 MiB for a config file$/],
      ['through a file', 'plain.yaml/x', 'ENOTDIR', /: a part of the path is not a directory \(ENOTDIR\)$/],
    ] as const) {
      it(`refuses ${label} with one Config line`, async () => {
        const err = await configError(read(path.isAbsolute(file) ? file : path.join(dir, file)))
        expect(err).to.be.instanceOf(ConfigFileError)
        expect((err as ConfigFileError).code).to.equal(code)
        expect(err.message).to.match(reason)
      })
    }

    it('a file that is longer than its size said (or than the limit) is cut off at the limit and refused', async () => {
      const err = await configError(read('/proc/self/maps', 16))
      expect(err.message).to.match(/more than the limit of 16 bytes for a config file$/)
    })
  })

  describe('the readers that use it name their flag or file', () => {
    it('exec config (--config)', async () => {
      for (const [file, reason] of [
        [fifo, /^cannot read exec config ".*a\.fifo": not a regular file \(it is a FIFO\)$/],
        ['/dev/zero', /^cannot read exec config "\/dev\/zero": not a regular file/],
        [big, /^cannot read exec config ".*big\.yaml": it is 5 MiB, more than the limit of 4 MiB/],
        [path.join(dir, 'a-dir'), /EISDIR/],
        [path.join(dir, 'nope.yaml'), /ENOENT/],
      ] as const) {
        expect((await configError(loadExecConfig({configPath: file, functionsDir: dir}))).message).to.match(reason)
      }
    })

    it('--pod-cache-config: missing is "no settings"; a FIFO, a device, a directory or a huge file is a Config error', async () => {
      expect(await PodCacheConfig.load(path.join(dir, 'nope.yaml'))).to.deep.include({missing: true})
      for (const [file, reason] of [
        [fifo, /^pod cache config .*a\.fifo \(--pod-cache-config\) cannot be read: not a regular file \(it is a FIFO\)$/],
        ['/dev/zero', /^pod cache config \/dev\/zero \(--pod-cache-config\) cannot be read: not a regular file \(it is a character device\)$/],
        [path.join(dir, 'a-dir'), /\(--pod-cache-config\) cannot be read: it is a directory/],
        [big, /\(--pod-cache-config\) cannot be read: it is 5 MiB, more than the limit of 4 MiB/],
      ] as const) {
        expect((await configError(PodCacheConfig.load(file))).message).to.match(reason)
      }
    })

    it('--tls-cert-file, --tls-key-file and --tls-client-ca-file; client credentials files', async () => {
      expect((await configError(loadListenerTls({certFile: fifo, keyFile: plain}))).message).to.match(/^--tls-cert-file .*a\.fifo cannot be read: not a regular file \(it is a FIFO\)$/)
      expect((await configError(loadListenerTls({certFile: pem, keyFile: '/dev/zero'}))).message).to.match(/^--tls-key-file \/dev\/zero cannot be read: not a regular file/)
      expect((await configError(loadListenerTls({certFile: pem, keyFile: pem, clientCaFile: big}))).message).to.match(/^--tls-client-ca-file .*big\.yaml cannot be read: it is 5 MiB/)
      expect((await configError(loadClientCredentials({caFile: fifo}))).message).to.match(/^CA file .*a\.fifo cannot be read: not a regular file/)
    })

    it('with several bad files, names the first in flag order, not the first read to fail', async () => {
      // The key's FIFO is refused at once, the certificate only after it was read: the line still
      // names the certificate, on a quiet machine and a loaded one alike.
      for (let i = 0; i < 5; i++) {
        expect((await configError(loadListenerTls({certFile: plain, keyFile: fifo}))).message).to.match(/^--tls-cert-file .*plain\.yaml is not a PEM file/)
        expect((await configError(loadClientCredentials({caFile: plain, certFile: fifo, keyFile: fifo}))).message).to.match(/^client certificate .*a\.fifo cannot be read/)
      }
    })

    it('the registry auth file and CA files', async () => {
      expect((await configError(DockerConfig.load(fifo))).message).to.match(/^registry auth file .*a\.fifo cannot be read: not a regular file \(it is a FIFO\)$/)
      expect((await configError(DockerConfig.load(path.join(dir, 'nope.json')))).message).to.match(/nope\.json does not exist$/)
      expect((await configError(loadCaFile('/dev/zero'))).message).to.match(/^CA file \/dev\/zero cannot be read: not a regular file \(it is a character device\)$/)
      expect((await configError(loadCaFile(big))).message).to.match(/^CA file .*big\.yaml cannot be read: it is 5 MiB/)
      expect((await configError(loadCaFile(path.join(dir, 'a-dir')))).message).to.match(/a-dir is a directory$/)
    })
  })
})
