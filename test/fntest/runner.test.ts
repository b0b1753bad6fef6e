import {expect} from 'chai'
import {cp, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {RunningServer} from '../../src/lib/serve.js'
import {runCli} from '../support/cli.js'
import {waitForClusterBinaries} from '../support/cluster/shared.js'
import {startClusterPodBed, type ClusterPodBed} from '../support/pods/cluster-bed.js'
import {RL, WRAPPER_IMAGE, image} from '../support/pods/index.js'
import {REPO_ROOT, serveOptions, startInProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

const TESTDATA = path.join(REPO_ROOT, 'functions', 'testdata')

describe('fnr test --runner: the cases evaluated through a running function runner over gRPC', function () {
  this.timeout(180_000)
  const temp = new TempDirs()
  let running: RunningServer | undefined
  let work: string

  before(async () => {
    work = await temp.make('fnr-fntest-runner-')
    // fnr serve with the exec runtime serving the shipped functions (as in fnr's image).
    running = await startInProcess(serveOptions({configPath: path.join(REPO_ROOT, 'functions', 'config.yaml'), functionsDir: path.join(REPO_ROOT, 'functions'), disableRuntimes: 'pod'}))
  })
  after(async () => {
    await running?.stop()
    await temp.cleanup()
  })

  it('every shipped case passes through the runner, failing functions included (exit code, results and stderr from the failure trailer)', async () => {
    const r = await runCli(['test', TESTDATA, '--runner', `127.0.0.1:${running!.port}`])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.match(/^\d+ passed, 0 failed \(\d+ cases,/m)
    expect(r.stdout).not.to.contain('FAIL')
  })

  it('a mismatch through the runner fails with a diff; --update rewrites it', async () => {
    const dir = path.join(work, 'broken', 'simple')
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), dir, {recursive: true})
    const patchFile = path.join(dir, '.expected', 'diff.patch')
    const good = await readFile(patchFile, 'utf8')
    await writeFile(patchFile, good.replaceAll('+  namespace: prod', '+  namespace: qa'))
    const r = await runCli(['test', path.join(work, 'broken'), '--runner', `127.0.0.1:${running!.port}`])
    expect(r.exitCode).to.equal(1)
    expect(r.stdout).to.contain('\n-  namespace: qa\n+  namespace: prod\n')
    const u = await runCli(['test', path.join(work, 'broken'), '--runner', `127.0.0.1:${running!.port}`, '--update'])
    expect(u.exitCode, u.stdout).to.equal(0)
    expect(await readFile(patchFile, 'utf8')).to.equal(good)
  })

  it('an image the runner does not know fails the case with the runner\'s message; --exec with --runner and a malformed address are usage errors', async () => {
    const dir = path.join(work, 'unknown')
    await cp(path.join(TESTDATA, 'set-namespace', 'simple'), dir, {recursive: true})
    const unknown = await runCli(['test', dir, '--image', 'example.com/unknown:v1', '--runner', `127.0.0.1:${running!.port}`])
    expect(unknown.exitCode).to.equal(1)
    expect(unknown.stdout).to.contain('example.com/unknown:v1')
    const usage = await runCli(['test', dir, '--exec', '/bin/cat', '--runner', `127.0.0.1:${running!.port}`])
    expect(usage.exitCode).to.equal(2)
    const bad = await runCli(['test', dir, '--runner', 'not-an-address'])
    expect(bad.exitCode).to.equal(2)
    expect(bad.stderr).to.contain('--runner must be HOST:PORT')
  })
})

describe('fnr test --runner through fnr serve\'s pod runtime (on the real control plane)', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let pb: ClusterPodBed
  let running: RunningServer | undefined

  before(async () => {
    pb = await startClusterPodBed()
    const dir = await temp.make()
    const base = serveOptions({configPath: path.join(dir, 'none.yaml'), functionsDir: dir, disableRuntimes: 'exec'})
    running = await startInProcess({
      ...base,
      pod: {...base.pod, namespace: await pb.namespace(), wrapperServerImage: WRAPPER_IMAGE, podAddress: 'pod-ip', metadata: pb.metadata, kubeconfig: pb.kubeconfigPath, owner: 'fntest'},
    })
  })
  after(async () => {
    await running?.stop()
    await pb?.stop()
    await temp.cleanup()
  })

  it('a ResourceList case of an image runs in a function pod and passes', async () => {
    const dir = path.join(await temp.make(), 'cat-case')
    const {mkdir} = await import('node:fs/promises')
    await mkdir(path.join(dir, '.expected'), {recursive: true})
    await writeFile(path.join(dir, 'resourcelist.yaml'), RL)
    await writeFile(path.join(dir, '.expected', 'config.yaml'), `image: ${image('stderr')}\nstdErr: working on it\n`)
    const u = await runCli(['test', dir, '--runner', `127.0.0.1:${running!.port}`, '--update'])
    expect(u.exitCode, u.stdout + u.stderr).to.equal(0)
    const r = await runCli(['test', dir, '--runner', `127.0.0.1:${running!.port}`])
    expect(r.exitCode, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('1 passed, 0 failed')
    expect(await readFile(path.join(dir, '.expected', 'resourcelist.yaml'), 'utf8')).to.contain('kind: ResourceList')
  })
})
