/**
 * The container runtime's settings read before any container runs (src/lib/container/oci-runtime.ts,
 * image-cache.ts): the function limits from FNR_FN_MEMORY/CPUS/PIDS, sizes, the state directory,
 * the image's nobody user, and the environment a container gets. No runtime is started.
 */
import {mkdir, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {expect} from 'chai'

import {FnrError} from '../../src/lib/errors.js'
import {cacheLimit, DEFAULT_CACHE_BYTES, parseSize} from '../../src/lib/container/image-cache.js'
import {containerEnv, defaultStateRoot, limitsFromEnv, nobodyOf} from '../../src/lib/container/oci-runtime.js'
import {TempDirs} from '../support/tmp.js'

function configError(f: () => unknown): FnrError {
  try {
    f()
  } catch (err) {
    expect(err).to.be.instanceOf(FnrError)
    expect((err as FnrError).kind).to.equal('Config')
    return err as FnrError
  }
  return expect.fail('expected a Config error')
}

describe('container runtime settings', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('sizes: bytes, decimal and binary units in any case, decimals floored; anything else is a Config error naming the setting', () => {
    expect(parseSize('1048576', 'X')).to.equal(1048576)
    expect(parseSize('4GiB', 'X')).to.equal(4 * 1024 ** 3)
    expect(parseSize('500MB', 'X')).to.equal(500e6)
    expect(parseSize(' 1.5 g ', 'X')).to.equal(1.5e9)
    expect(parseSize('2ki', 'X')).to.equal(2048)
    expect(parseSize('1.0001k', 'X')).to.equal(1000)
    expect(configError(() => parseSize('lots', 'FNR_IMAGE_CACHE_SIZE')).message).to.equal('FNR_IMAGE_CACHE_SIZE: "lots" is not a size (e.g. 4GiB, 500MB, 1048576)')
    expect(configError(() => parseSize('5 parsecs', 'X')).message).to.contain('"5 parsecs" is not a size')
    expect(configError(() => parseSize('-1', 'X')).message).to.contain('is not a size')
    expect(cacheLimit({})).to.equal(DEFAULT_CACHE_BYTES)
    expect(cacheLimit({FNR_IMAGE_CACHE_SIZE: '1GiB'})).to.equal(1024 ** 3)
  })

  it('function limits from FNR_FN_MEMORY, FNR_FN_CPUS and FNR_FN_PIDS, each checked', () => {
    expect(limitsFromEnv({})).to.deep.equal({})
    expect(limitsFromEnv({FNR_FN_MEMORY: '256Mi', FNR_FN_CPUS: '1.5', FNR_FN_PIDS: '64'})).to.deep.equal({memoryBytes: 256 * 1024 ** 2, cpus: 1.5, pids: 64})
    expect(configError(() => limitsFromEnv({FNR_FN_CPUS: '0'})).message).to.equal('FNR_FN_CPUS="0": expected a number of CPUs above 0, e.g. 1.5')
    expect(configError(() => limitsFromEnv({FNR_FN_CPUS: 'many'})).message).to.contain('FNR_FN_CPUS="many"')
    expect(configError(() => limitsFromEnv({FNR_FN_PIDS: '1.5'})).message).to.equal('FNR_FN_PIDS="1.5": expected a whole number above 0')
    expect(configError(() => limitsFromEnv({FNR_FN_MEMORY: 'big'})).message).to.contain('FNR_FN_MEMORY: "big" is not a size')
  })

  it('the state directory: FNR_RUNC_ROOT, else by user (root: /run; others: $XDG_RUNTIME_DIR, else the temporary directory)', () => {
    expect(defaultStateRoot('runc', {FNR_RUNC_ROOT: 'rel/dir'})).to.equal(path.resolve('rel/dir'))
    const uid = process.getuid?.() ?? 0
    if (uid === 0) {
      expect(defaultStateRoot('runc', {})).to.equal('/run/fnr-runc')
      expect(defaultStateRoot('crun', {XDG_RUNTIME_DIR: '/run/user/1000'})).to.equal('/run/fnr-crun')
    } else {
      expect(defaultStateRoot('runc', {XDG_RUNTIME_DIR: '/run/user/1000'})).to.equal('/run/user/1000/fnr-runc')
      expect(defaultStateRoot('runc', {XDG_RUNTIME_DIR: 'relative'})).to.equal(path.join(os.tmpdir(), `fnr-runc-${uid}`))
    }
  })

  it('the image\'s nobody user from its /etc/passwd, else 65534', async () => {
    const rootfs = await temp.make('fnr-rootfs-')
    expect(nobodyOf(rootfs)).to.deep.equal({uid: 65534, gid: 65534})
    await mkdir(path.join(rootfs, 'etc'))
    await writeFile(path.join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:99:98:nobody:/:/sbin/nologin\n')
    expect(nobodyOf(rootfs)).to.deep.equal({uid: 99, gid: 98})
    await writeFile(path.join(rootfs, 'etc', 'passwd'), 'nobody:x:abc:98::/:\n')
    expect(nobodyOf(rootfs)).to.deep.equal({uid: 65534, gid: 65534})
  })

  it('the container\'s environment: the image\'s, then the extra over it, PATH and HOME when the image has none', () => {
    expect(containerEnv([], [])).to.deep.equal(['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/'])
    expect(containerEnv(['A=1', 'B=x=y', 'NOEQUALS'], ['A=2'])).to.deep.equal(['A=2', 'B=x=y', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/'])
  })
})
