/**
 * `fnr eval --image` and `fnr render` with an image the exec config does not map, run by fnr's own
 * container runtime (runc) from a real registry on loopback (docs/container-runtime.md): a real
 * catalog function (set-labels, built from its Go module) packed as the catalog packs it, and a
 * busybox probe. The registry is reached through a recording proxy, so a run that used the image
 * cache can be shown to fetch nothing. Each fnr run gets a TMPDIR, a runc state root and an image
 * cache of this suite's own, and the suite checks that no container or bundle outlives a run.
 */
import {expect} from 'chai'
import {existsSync, readFileSync} from 'node:fs'
import {chmod, chown, readFile, readdir, writeFile, mkdir} from 'node:fs/promises'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import path from 'node:path'

import {execa} from 'execa'

import {buildCatalogFunctions} from '../../scripts/catalog-peers.mjs'
import {runCli, type CliResult} from '../support/cli.js'
import {BIN_RUN} from '../support/serve.js'
import {findRunc, findStaticBusybox, runcUnavailableReason} from '../support/node/runc.js'
import {RegistryProxy} from '../support/registry/proxy.js'
import {pushImage} from '../support/registry/fixtures.js'
import {TestRegistry} from '../support/registry/registry.js'
import {skipOutsideCi} from '../support/skip.js'
import {TempDirs} from '../support/tmp.js'

const INPUT = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: "1"\n'

/** The probe: what it can reach and write, on stderr; the ResourceList back on stdout. */
const PROBE_SCRIPT = `#!/bin/sh
echo "uid=$(/bin/busybox id -u) gid=$(/bin/busybox id -g)" >&2
if echo | /bin/busybox nc -w 2 127.0.0.1 "$PROBE_PORT" >/dev/null 2>&1; then echo "network: reached" >&2; else echo "network: unreachable" >&2; fi
if /bin/busybox touch /written 2>/dev/null; then echo "root: writable" >&2; else echo "root: read-only" >&2; fi
if /bin/busybox touch /tmp/written 2>/dev/null; then echo "tmp: writable" >&2; else echo "tmp: read-only" >&2; fi
exec /bin/busybox cat
`

describe('image functions in fnr\'s own container runtime (runc, images from a registry on loopback)', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  let registry: TestRegistry | undefined
  let proxy: RegistryProxy | undefined
  let server: http.Server | undefined
  let serverPort = 0
  let setLabelsBinary = ''
  let env: Record<string, string> = {}
  let cacheDir = ''
  let runcRoot = ''
  let tmpDir = ''
  let work = ''
  const image = (name: string): string => `${proxy!.host}/${name}`

  const fnr = (args: string[], extra: Record<string, string> = {}): Promise<CliResult> => runCli(args, {input: INPUT, env: {...env, ...extra}})

  before(async function () {
    const reason = runcUnavailableReason()
    if (reason) skipOutsideCi(this, reason)
    work = await temp.make('fnr-container-')
    cacheDir = path.join(work, 'cache')
    runcRoot = path.join(work, 'runc')
    tmpDir = path.join(work, 'tmp')
    await mkdir(tmpDir)
    // A runtime is chosen for fnr (docker may be on PATH, with or without a daemon): runc, this suite's.
    env = {FNR_CONTAINER_RUNTIME: 'runc', FNR_IMAGE_CACHE_DIR: cacheDir, FNR_RUNC_ROOT: runcRoot, TMPDIR: tmpDir, FNR_EXIT_CODES: 'fnr'}
    setLabelsBinary = path.join(buildCatalogFunctions(), 'set-labels')
    registry = await TestRegistry.start({mode: 'none'})
    proxy = await RegistryProxy.start(registry.port)
    const busybox = await readFile(findStaticBusybox()!)
    // As the catalog's images are: the static binary at /usr/local/bin/function, the entrypoint.
    await pushImage(registry, 'kptdev/krm-functions-catalog/set-labels:v1', {entrypoint: ['/usr/local/bin/function'], files: {'usr/local/bin/function': await readFile(setLabelsBinary)}, gzipLevel: 1})
    const probe = {'bin/busybox': busybox, 'bin/sh': busybox, 'usr/local/bin/function': PROBE_SCRIPT}
    await pushImage(registry, 'fn/probe:v1', {entrypoint: ['/usr/local/bin/function'], env: ['PATH=/bin'], files: probe, gzipLevel: 1})
    await pushImage(registry, 'fn/probe-b:v1', {entrypoint: ['/usr/local/bin/function'], env: ['PATH=/bin'], files: {...probe, 'b.txt': 'another image\n'}, gzipLevel: 1})
    await pushImage(registry, 'fn/sleepy:v1', {entrypoint: ['/bin/sh', '-c', '/bin/busybox sleep 60'], files: {'bin/busybox': busybox, 'bin/sh': busybox}, gzipLevel: 1})
    await pushImage(registry, 'fn/neither:v1', {files: {'n.txt': 'no command\n'}})
    await pushImage(registry, 'fn/arm-only:v1', {architecture: 'arm64', entrypoint: ['/fn'], files: {'fn': 'arm\n'}})
    server = http.createServer((_req, res) => res.end('hello\n'))
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    serverPort = (server.address() as AddressInfo).port
  })

  after(async () => {
    server?.close()
    await proxy?.stop()
    await registry?.stop()
    await temp.cleanup()
  })

  afterEach(async function () {
    if (!work) return
    // Nothing outlives a run: no container in the runtime's state, no bundle left in TMPDIR.
    const listed = await execa(findRunc()!, ['--root', runcRoot, 'list', '--quiet'], {reject: false})
    expect(String(listed.stdout).trim(), 'containers left').to.equal('')
    expect((await readdir(tmpDir)).filter((n) => n.startsWith('fnr-bundle-')), 'bundles left').to.deep.equal([])
  })

  const blobGets = (): string[] => proxy!.records.filter((r) => r.method === 'GET' && r.path.includes('/blobs/')).map((r) => r.path)

  it('fnr eval --image gives the exec runtime\'s output byte for byte; a second run uses the cache and fetches nothing', async () => {
    const args = ['eval', '-', '--image', image('kptdev/krm-functions-catalog/set-labels:v1'), '--', 'app=web']
    proxy!.clear()
    const first = await fnr(args)
    expect(first.exitCode, first.stderr).to.equal(0)
    expect(first.stderr).to.match(/\[IMAGE\] ".*set-labels:v1" sha256:[0-9a-f]{64} \(linux\/amd64, pulled 1 layer, [\d.]+ MB in [\d.]+s\)/)
    expect(blobGets().length, 'config and layer fetched').to.equal(2)
    const exec = await fnr(['eval', '-', '--exec', setLabelsBinary, '--', 'app=web'])
    expect(exec.exitCode, exec.stderr).to.equal(0)
    expect(first.stdout).to.equal(exec.stdout)
    expect(first.stdout).to.include('app: web')

    proxy!.clear()
    const second = await fnr(args)
    expect(second.exitCode, second.stderr).to.equal(0)
    expect(second.stdout).to.equal(exec.stdout)
    expect(second.stderr).to.match(/\(linux\/amd64, cached\)/)
    expect(proxy!.records, 'IfNotPresent: the registry is not asked').to.deep.equal([])
    // The oclif command (not the fast path) runs it the same way.
    const viaOclif = await fnr(args, {FNR_NO_FAST_PATH: '1'})
    expect([viaOclif.exitCode, viaOclif.stdout]).to.deep.equal([0, exec.stdout])

    // Always: the tag is resolved again (manifest and config), the layer is not downloaded again.
    const always = await fnr([...args.slice(0, 4), '--image-pull-policy', 'always', '--', 'app=web'])
    expect(always.exitCode, always.stderr).to.equal(0)
    expect(always.stdout).to.equal(exec.stdout)
    expect(proxy!.records.some((r) => r.path.includes('/manifests/v1'))).to.equal(true)
    expect(blobGets(), 'the config only').to.have.length(1)
  })

  it('fnr render of a package whose Kptfile names the image (twice) writes what the exec runtime writes, the tag resolved once', async () => {
    const pkgFor = async (name: string): Promise<string> => {
      const dir = path.join(work, name)
      await mkdir(dir)
      await writeFile(path.join(dir, 'Kptfile'), `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: ${name}\npipeline:\n  mutators:\n  - image: ${image('kptdev/krm-functions-catalog/set-labels:v1')}\n    configMap:\n      app: web\n  - image: ${image('kptdev/krm-functions-catalog/set-labels:v1')}\n    configMap:\n      tier: front\n`)
      await writeFile(path.join(dir, 'cm.yaml'), INPUT)
      return dir
    }
    const viaContainer = await pkgFor('in-container')
    const viaExec = await pkgFor('in-exec')
    const config = path.join(work, 'exec-config.yaml')
    await writeFile(config, `functions:\n- function: set-labels\n  images:\n  - ${image('kptdev/krm-functions-catalog/set-labels:v1')}\n`)
    const c = await fnr(['render', viaContainer])
    expect(c.exitCode, c.stderr).to.equal(0)
    // One tag, one digest for the whole render: resolved (and said) once.
    expect(c.stderr.match(/^\[IMAGE\] /gm)).to.have.length(1)
    expect(c.stderr).to.include('Successfully executed 2 function(s) in 1 package(s).')
    const e = await fnr(['render', viaExec, `--config=${config}`, `--functions=${path.dirname(setLabelsBinary)}`])
    expect(e.exitCode, e.stderr).to.equal(0)
    for (const file of ['cm.yaml', 'Kptfile']) {
      expect(await readFile(path.join(viaContainer, file), 'utf8'), file).to.equal((await readFile(path.join(viaExec, file), 'utf8')).replaceAll('in-exec', 'in-container'))
    }
    expect(await readFile(path.join(viaContainer, 'cm.yaml'), 'utf8')).to.match(/app: web\n\s+tier: front/)
  })

  it('runs the function as nobody, on a read-only root with a writable /tmp, with no network unless --network', async () => {
    const args = ['eval', '-', '--image', image('fn/probe:v1'), '--env', `PROBE_PORT=${serverPort}`]
    const isolated = await fnr(args)
    expect(isolated.exitCode, isolated.stderr).to.equal(0)
    expect(isolated.stderr).to.include('uid=65534 gid=65534')
    expect(isolated.stderr).to.include('network: unreachable')
    expect(isolated.stderr).to.include('root: read-only')
    expect(isolated.stderr).to.include('tmp: writable')
    expect(isolated.stdout).to.include('name: a')
    const networked = await fnr([...args, '--network', '--as-current-user'])
    expect(networked.exitCode, networked.stderr).to.equal(0)
    expect(networked.stderr).to.include('network: reached')
    expect(networked.stderr).to.include(`uid=${process.getuid!()} gid=${process.getgid!()}`)
  })

  it('runs rootless: fnr as another user (nobody) runs runc in a user namespace, the function root inside it only', async function () {
    const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p))
    if (setpriv === undefined) skipOutsideCi(this, 'setpriv is not installed (Debian package util-linux)')
    if (Number(readFileSync('/proc/sys/user/max_user_namespaces', 'utf8').trim()) === 0) skipOutsideCi(this, 'this kernel allows no user namespaces')
    // A home of nobody's own: the image cache, TMPDIR (bundles) and runc's state go there.
    const home = path.join(work, 'rootless-home')
    await chmod(work, 0o755)
    await mkdir(home)
    await chown(home, 65534, 65534)
    const asNobody = (args: string[]): Promise<{exitCode?: number; stdout: string; stderr: string}> =>
      execa(setpriv!, ['--reuid', '65534', '--regid', '65534', '--clear-groups', process.execPath, BIN_RUN, ...args], {
        input: INPUT,
        reject: false,
        extendEnv: false,
        env: {PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TMPDIR: home, XDG_RUNTIME_DIR: home, FNR_CONTAINER_RUNTIME: 'runc', FNR_EXIT_CODES: 'fnr'},
      }) as Promise<{exitCode?: number; stdout: string; stderr: string}>
    const probe = await asNobody(['eval', '-', '--image', image('fn/probe:v1'), '--env', `PROBE_PORT=${serverPort}`])
    expect(probe.exitCode, probe.stderr).to.equal(0)
    expect(probe.stderr).to.include('uid=0 gid=0')
    expect(probe.stderr).to.include('network: unreachable')
    expect(probe.stderr).to.include('root: read-only')
    const labels = await asNobody(['eval', '-', '--image', image('kptdev/krm-functions-catalog/set-labels:v1'), '--network', '--', 'app=web'])
    expect(labels.exitCode, labels.stderr).to.equal(0)
    const exec = await fnr(['eval', '-', '--exec', setLabelsBinary, '--', 'app=web'])
    expect(labels.stdout).to.equal(exec.stdout)
    expect((await readdir(path.join(home, '.cache', 'fnr', 'images', 'images'))).length).to.equal(2)
    const listed = await execa(findRunc()!, ['--root', path.join(home, 'fnr-runc'), 'list', '--quiet'], {reject: false})
    expect(String(listed.stdout).trim()).to.equal('')
    expect((await readdir(home)).filter((n) => n.startsWith('fnr-bundle-'))).to.deep.equal([])
  })

  it('kills the container at --timeout (exit 6) and on an interrupt (130), and leaves none behind', async () => {
    const started = Date.now()
    const r = await fnr(['eval', '-', '--image', image('fn/sleepy:v1'), '--timeout', '1500ms'])
    expect(r.exitCode, r.stderr).to.equal(6)
    expect(r.stderr).to.match(/did not finish before the deadline/)
    expect(Date.now() - started).to.be.below(15_000)
    // A pull counts against --timeout too (a registry that does not answer).
    proxy!.hang = true
    try {
      const hung = await fnr(['eval', '-', '--image', image('fn/probe-b:v2'), '--timeout', '1s'])
      expect(hung.exitCode, hung.stderr).to.equal(6)
      expect(hung.stderr).to.match(/cannot pull image ".*probe-b:v2": timed out talking to registry/)
    } finally {
      proxy!.hang = false
    }
    const child = execa(process.execPath, [BIN_RUN, 'eval', '-', '--image', image('fn/sleepy:v1')], {input: INPUT, env, reject: false})
    let stderr = ''
    await new Promise<void>((resolve) => {
      child.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString()
        if (stderr.includes('[IMAGE]')) resolve()
      })
    })
    // The container is being started: wait until runc lists it, then interrupt.
    for (let i = 0; i < 50; i++) {
      const listed = await execa(findRunc()!, ['--root', runcRoot, 'list', '--quiet'], {reject: false})
      if (String(listed.stdout).trim() !== '') break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    child.kill('SIGINT')
    const interrupted = await child
    expect(interrupted.exitCode, String(interrupted.stderr)).to.equal(130)
  })

  it('says clearly what went wrong: an image that is not there, one without a command, another platform\'s, no usable runtime', async () => {
    const missing = await fnr(['eval', '-', '--image', image('fn/missing:v1')])
    expect(missing.exitCode, missing.stderr).to.equal(4)
    expect(missing.stderr).to.match(/fnr: cannot pull image ".*fn\/missing:v1": image ".*" not found in registry .*\(MANIFEST_UNKNOWN/)
    const neither = await fnr(['eval', '-', '--image', image('fn/neither:v1')])
    expect(neither.exitCode, neither.stderr).to.equal(3)
    expect(neither.stderr).to.match(/has neither Entrypoint nor Cmd in its config, so there is no function to run/)
    const arm = await fnr(['eval', '-', '--image', image('fn/arm-only:v1')])
    expect(arm.exitCode, arm.stderr).to.equal(4)
    expect(arm.stderr).to.match(/cannot pull image ".*fn\/arm-only:v1": image ".*" is linux\/arm64 only, not linux\/amd64/)
    const never = await fnr(['eval', '-', '--image', image('fn/probe:v2'), '--image-pull-policy', 'Never'])
    expect(never.exitCode, never.stderr).to.equal(4)
    expect(never.stderr).to.match(/is not in fnr's image cache .* --image-pull-policy is Never/)
    const none = await fnr(['eval', '-', '--image', image('fn/probe:v1')], {FNR_CONTAINER_RUNTIME: 'none'})
    expect(none.exitCode, none.stderr).to.equal(4)
    expect(none.stderr).to.match(/is not in the exec config .*, and FNR_CONTAINER_RUNTIME is none/)
    const withDocker = {PATH: `${await fakeDocker(work)}:${process.env.PATH}`}
    // auto: docker is there but its daemon is not; said once, and runc runs the function.
    const fellBack = await fnr(['eval', '-', '--image', image('fn/probe:v1'), '--env', 'PROBE_PORT=1'], {...withDocker, FNR_CONTAINER_RUNTIME: 'auto'})
    expect(fellBack.exitCode, fellBack.stderr).to.equal(0)
    expect(fellBack.stderr).to.match(/^\[IMAGE\] running image functions with runc: docker \(.*\) is installed but not usable: `docker version` failed: Cannot connect to the Docker daemon/m)
    const noDaemon = await fnr(['eval', '-', '--image', image('fn/probe:v1')], {...withDocker, FNR_CONTAINER_RUNTIME: 'docker'})
    expect(noDaemon.exitCode, noDaemon.stderr).to.equal(3)
    expect(noDaemon.stderr).to.match(/FNR_CONTAINER_RUNTIME=docker is not usable to run image functions: docker \(.*\) is installed but not usable: `docker version` failed: Cannot connect to the Docker daemon/)
  })

  it('keeps the image cache under FNR_IMAGE_CACHE_SIZE, evicting the image used least recently', async () => {
    const cache = path.join(work, 'small-cache')
    const small = {FNR_IMAGE_CACHE_DIR: cache, FNR_IMAGE_CACHE_SIZE: '6MB'}
    const listed = async (): Promise<string[]> => (await readdir(path.join(cache, 'images'))).sort()
    expect((await fnr(['eval', '-', '--image', image('fn/probe:v1'), '--env', 'PROBE_PORT=1'], small)).exitCode).to.equal(0)
    const probeOnly = await listed()
    expect(probeOnly).to.have.length(1)
    expect((await fnr(['eval', '-', '--image', image('fn/probe-b:v1'), '--env', 'PROBE_PORT=1'], small)).exitCode).to.equal(0)
    const otherOnly = await listed()
    expect(otherOnly).to.have.length(1)
    expect(otherOnly).not.to.deep.equal(probeOnly)
  })
})

/** A docker CLI whose daemon is not running. */
async function fakeDocker(dir: string): Promise<string> {
  const bin = path.join(dir, 'fake-docker-bin')
  await mkdir(bin, {recursive: true})
  await writeFile(path.join(bin, 'docker'), '#!/bin/sh\necho "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2\nexit 1\n', {mode: 0o755})
  return bin
}
