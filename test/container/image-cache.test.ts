/**
 * fnr's image cache (src/lib/container/image-cache.ts) and the pieces of the container runtime that
 * need no process: sizes, the reference → digest record, LRU eviction under the size cap, kpt's
 * container CLI line, and the OCI bundle's config.
 */
import {expect} from 'chai'
import {mkdir, readdir, utimes, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {cliRunArgs, withoutPullProgress} from '../../src/lib/container/cli-runtime.js'
import {ImageCache, cacheLimit, defaultCacheDir, parseSize} from '../../src/lib/container/image-cache.js'
import {containerEnvEntries, parseMount} from '../../src/lib/container/index.js'
import {bundleConfig, containerEnv, runtimeLogError} from '../../src/lib/container/oci-runtime.js'
import {kptRuntime, runtimeChoice} from '../../src/lib/container/runtime-select.js'
import {FnrError} from '../../src/lib/errors.js'
import type {ImageRunConfig} from '../../src/lib/registry/client.js'
import {TempDirs} from '../support/tmp.js'

const CONFIG: ImageRunConfig = {entrypoint: ['/fn'], cmd: [], env: ['PATH=/bin'], workingDir: '', user: ''}
const digest = (c: string): string => `sha256:${c.repeat(64)}`

describe('container image cache', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('reads sizes and the cache settings from the environment', () => {
    expect(parseSize('4GiB', 'x')).to.equal(4 * 1024 ** 3)
    expect(parseSize('500MB', 'x')).to.equal(500e6)
    expect(parseSize('1.5k', 'x')).to.equal(1500)
    expect(parseSize('1048576', 'x')).to.equal(1048576)
    expect(() => parseSize('lots', 'FNR_IMAGE_CACHE_SIZE')).to.throw(FnrError, /FNR_IMAGE_CACHE_SIZE: "lots" is not a size/)
    expect(cacheLimit({})).to.equal(4 * 1024 ** 3)
    expect(cacheLimit({FNR_IMAGE_CACHE_SIZE: '2G'})).to.equal(2e9)
    expect(defaultCacheDir({FNR_IMAGE_CACHE_DIR: '/c'})).to.equal('/c')
    expect(defaultCacheDir({XDG_CACHE_HOME: '/x'})).to.equal('/x/fnr/images')
  })

  it('keeps what a reference resolved to, adds an image whole, and evicts the least recently used down to the cap (never one in use)', async () => {
    const dir = await temp.make('fnr-image-cache-')
    const writer = new ImageCache(dir, 250)
    const add = (c: string, bytes: number): Promise<unknown> =>
      writer.add({digest: digest(c), reference: `r/${c}:v1`, platform: 'linux/amd64', config: CONFIG}, async (rootfs) => {
        await writeFile(path.join(rootfs, 'f'), 'x'.repeat(bytes))
        return bytes
      })
    for (const c of ['a', 'b', 'c']) await add(c, 100)
    expect(await writer.resolvedDigest('r/a:v1', 'linux/amd64')).to.equal(undefined)
    await writer.rememberDigest('r/a:v1', 'linux/amd64', digest('a'))
    expect(await writer.resolvedDigest('r/a:v1', 'linux/amd64')).to.equal(digest('a'))
    expect(await writer.resolvedDigest('r/a:v1', 'linux/arm64')).to.equal(undefined)

    // Another user of the cache: the writer is done with its images; the reader uses c now.
    await writer.release()
    const reader = new ImageCache(dir, 250)
    const image = await reader.get(digest('c'))
    expect(image).to.deep.include({digest: digest('c'), reference: 'r/c:v1', size: 100})
    expect(image!.rootfs).to.equal(path.join(dir, 'images', `sha256-${'c'.repeat(64)}`, 'rootfs'))
    const old = new Date(Date.now() - 3600_000)
    await utimes(path.join(dir, 'images', `sha256-${'b'.repeat(64)}`, 'image.json'), old, old)
    await utimes(path.join(dir, 'images', `sha256-${'a'.repeat(64)}`, 'image.json'), new Date(Date.now() - 60_000), new Date(Date.now() - 60_000))
    expect(await reader.evict()).to.deep.equal([digest('b')])
    expect((await reader.list()).map((i) => i.digest).sort()).to.deep.equal([digest('a'), digest('c')])
    // A use marker of another live process (pid 1) keeps an image; one of a process that is gone does not.
    const users = (c: string): string => path.join(dir, 'images', `sha256-${c.repeat(64)}`, 'users')
    await mkdir(users('a'), {recursive: true})
    await writeFile(path.join(users('a'), '1'), '')
    await writeFile(path.join(users('c'), '2147483646'), '')
    const strict = new ImageCache(dir, 1)
    expect(await strict.evict()).to.deep.equal([digest('c')])
    expect(await readdir(path.join(dir, 'tmp'))).to.deep.equal([])
    expect(await reader.get(digest('b'))).to.equal(undefined)
  })

  it('builds kpt\'s container CLI line and drops the CLI\'s pull progress from stderr', () => {
    expect(cliRunArgs({image: 'ghcr.io/x/fn:v1', policy: 'IfNotPresent', network: false, mounts: [], env: ['B=2', 'KEY', 'A=1']}, 'fnr-1')).to.deep.equal(
      ['run', '--rm', '-i', '--network', 'none', '--user', 'nobody', '--security-opt=no-new-privileges', '--pull', 'missing', '-e', 'A=1', '-e', 'B=2', '-e', 'KEY', '--name', 'fnr-1', 'ghcr.io/x/fn:v1'],
    )
    expect(cliRunArgs({image: 'i', policy: 'Always', network: true, user: '1000:1000', mounts: ['type=bind,src=/a,dst=/b'], env: []}, 'n')).to.deep.equal(
      ['run', '--rm', '-i', '--network', 'host', '--user', '1000:1000', '--security-opt=no-new-privileges', '--pull', 'always', '--mount', 'type=bind,src=/a,dst=/b', '--name', 'n', 'i'],
    )
    const stderr = "Unable to find image 'ghcr.io/x/fn:v1' locally\nv1: Pulling from x/fn\n4e9f2cdf4387: Pull complete\nDigest: sha256:" + 'a'.repeat(64) + '\nStatus: Downloaded newer image for ghcr.io/x/fn:v1\nthe function speaks\n'
    expect(withoutPullProgress(Buffer.from(stderr)).toString()).to.equal('the function speaks\n')
  })

  it('reads kpt\'s --mount and --env, FNR_CONTAINER_RUNTIME, KPT_FN_RUNTIME and KRM_FN_RUNTIME', () => {
    expect(parseMount('type=bind,src=/data,dst=/in')).to.deep.equal({source: '/data', target: '/in', readOnly: true})
    expect(parseMount('type=bind,source=/data,target=/in,rw=true')).to.deep.equal({source: '/data', target: '/in', readOnly: false})
    expect(() => parseMount('type=volume,src=v,dst=/in')).to.throw(FnrError, /mounts type=bind only/)
    expect(() => parseMount('type=bind,src=/a,dst=in')).to.throw(FnrError, /absolute path/)
    expect(containerEnvEntries(['A=1', 'HOME', 'NOT_SET_HERE'], {HOME: '/root'})).to.deep.equal(['A=1', 'HOME=/root'])
    expect(runtimeChoice({})).to.equal('auto')
    expect(runtimeChoice({FNR_CONTAINER_RUNTIME: 'RUNC'})).to.equal('runc')
    expect(() => runtimeChoice({FNR_CONTAINER_RUNTIME: 'lxc'})).to.throw(FnrError, /expected one of auto, docker, podman, nerdctl, runc, crun, none/)
    expect(kptRuntime({})).to.equal('docker')
    expect(kptRuntime({KRM_FN_RUNTIME: 'Podman'})).to.equal('podman')
    expect(kptRuntime({KPT_FN_RUNTIME: 'nerdctl', KRM_FN_RUNTIME: 'podman'})).to.equal('nerdctl')
    expect(kptRuntime({KPT_FN_RUNTIME: '', KRM_FN_RUNTIME: 'podman'})).to.equal('podman')
    expect(() => kptRuntime({KRM_FN_RUNTIME: 'runc'})).to.throw(FnrError, /^KRM_FN_RUNTIME="runc": unsupported runtime/)
  })

  it('gives the function a read-only root, no network but its own loopback, nobody and no capabilities (rootless: root in its own user namespace)', async () => {
    const rootfs = await temp.make('fnr-rootfs-')
    const image = {digest: digest('d'), reference: 'r', platform: 'linux/amd64', size: 1, rootfs, config: {...CONFIG, cmd: ['--flag'], workingDir: '/work'}}
    const config = bundleConfig({image, network: false, mounts: [], env: ['X=1'], limits: {memoryBytes: 1 << 28, cpus: 0.5, pids: 64}}) as Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(config.root).to.deep.equal({path: rootfs, readonly: true})
    expect(config.process.args).to.deep.equal(['/fn', '--flag'])
    expect(config.process.user).to.deep.equal({uid: 65534, gid: 65534})
    expect(config.process.cwd).to.equal('/work')
    expect(config.process.noNewPrivileges).to.equal(true)
    expect(config.process.capabilities.effective).to.deep.equal([])
    expect(config.process.env).to.deep.equal(['PATH=/bin', 'X=1', 'HOME=/'])
    expect(config.linux.namespaces.map((n: {type: string}) => n.type)).to.deep.equal(['pid', 'ipc', 'uts', 'mount', 'network'])
    expect(config.linux.resources).to.deep.equal({memory: {limit: 1 << 28, swap: 1 << 28}, cpu: {quota: 50_000, period: 100_000}, pids: {limit: 64}})
    expect(config.mounts.map((m: {destination: string}) => m.destination)).to.include('/tmp')
    const networked = bundleConfig({image, network: true, user: {uid: 0, gid: 0}, mounts: [{source: '/data', target: '/in', readOnly: true}], env: [], limits: {}}) as Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(networked.linux.namespaces.map((n: {type: string}) => n.type)).not.to.include('network')
    expect(networked.mounts.slice(-3).map((m: {destination: string}) => m.destination)).to.deep.equal(['/etc/resolv.conf', '/etc/hosts', '/in'])
    expect(networked.process.capabilities.effective).to.include('CAP_CHOWN')
    // Rootless: the container's root is the host user, its only id, with no capabilities; the host's /sys bound on its network.
    const rootless = bundleConfig({image, network: true, mounts: [], env: [], limits: {}, rootless: {uid: 1000, gid: 1001}}) as Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(rootless.process.user).to.deep.equal({uid: 0, gid: 0})
    expect(rootless.process.capabilities.effective).to.deep.equal([])
    expect(rootless.linux.uidMappings).to.deep.equal([{containerID: 0, hostID: 1000, size: 1}])
    expect(rootless.linux.gidMappings).to.deep.equal([{containerID: 0, hostID: 1001, size: 1}])
    expect(rootless.linux.namespaces.map((n: {type: string}) => n.type)).to.deep.equal(['pid', 'ipc', 'uts', 'mount', 'user'])
    expect(rootless.mounts.find((m: {destination: string}) => m.destination === '/sys')).to.deep.include({type: 'none', source: '/sys'})
    expect(containerEnv(['PATH=/x', 'HOME=/h'], ['PATH=/y'])).to.deep.equal(['PATH=/y', 'HOME=/h'])
    expect(runtimeLogError('{"level":"info","msg":"hi"}\n{"level":"error","msg":"runc run failed: boom"}\n')).to.equal('runc run failed: boom')
    expect(runtimeLogError('')).to.equal(undefined)
  })
})
