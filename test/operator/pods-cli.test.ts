/**
 * The command line of `fnr pods …` (the built CLI as a child process) where no pods are needed:
 * errors as one `fnr: …` line with the documented exit code (an API server that cannot be reached,
 * no Kubernetes configuration at all, bad durations, words that name no command), and the help
 * (topics, `ls --help`). The cluster is the shared control plane, reached through the fault proxy
 * (test/support/cluster/fault-proxy.ts), whose request log shows that the usage errors make no call.
 */
import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli, type CliResult} from '../support/cli.js'
import {FaultProxy} from '../support/cluster/fault-proxy.js'
import {namespace, sharedControlPlane, waitForClusterBinaries} from '../support/cluster/shared.js'
import {TempDirs} from '../support/tmp.js'
import {freePort} from '../support/registry/tools.js'

/** Exactly one line on stderr, fnr's format. */
function oneLine(r: CliResult): string {
  const lines = r.stderr.trim().split('\n')
  expect(lines, r.stderr).to.have.length(1)
  expect(lines[0]).to.match(/^fnr: /)
  return lines[0]!
}

describe('fnr pods: errors and help', function () {
  this.timeout(120_000)
  waitForClusterBinaries()
  const temp = new TempDirs()
  let dir: string
  let deadKubeconfig: string
  let ns: {name: string; remove: () => Promise<void>}
  let proxy: FaultProxy
  /** The admin's kubeconfig through the proxy. */
  let kubeconfig: string
  /** No in-cluster config, no KUBECONFIG, a HOME without ~/.kube/config, no WRAPPER_SERVER_IMAGE. */
  const bareEnv = (): NodeJS.ProcessEnv => ({PATH: process.env.PATH, HOME: dir})

  before(async () => {
    dir = await temp.make('fnr-pods-cli-')
    deadKubeconfig = path.join(dir, 'dead-kubeconfig.yaml')
    // A loopback port nothing listens on: connection refused. (Not port 1: client-node 2's fetch
    // refuses the fetch standard's "bad ports" before it connects.)
    await writeFile(deadKubeconfig, `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${await freePort()}", insecure-skip-tls-verify: true}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\ncurrent-context: c\n`)
    const cp = await sharedControlPlane()
    ns = await namespace(cp, 'pods-cli')
    proxy = await FaultProxy.start(cp.url, cp.caPem)
    kubeconfig = path.join(dir, 'kubeconfig')
    await writeFile(kubeconfig, proxy.kubeconfigFor(cp.adminToken, ns.name))
  })
  after(async () => {
    await proxy?.stop()
    await ns?.remove()
    await temp.cleanup()
  })

  it('an API server that cannot be reached: one error line, exit 8, for gc (with or without template settings, text or JSON) as for ls', async () => {
    for (const args of [['pods', 'gc'], ['pods', 'gc', '--json'], ['pods', 'gc', '--dry-run', '--wrapper-server-image', 'example.com/wrapper:v1'], ['pods', 'gc', '--all'], ['pods', 'ls']]) {
      const r = await runCli([...args, '--kubeconfig', deadKubeconfig], {env: bareEnv(), extendEnv: false})
      expect(r.exitCode, `${args.join(' ')}: ${r.stderr}`).to.equal(8)
      expect(oneLine(r)).to.include('cannot list pods in porch-fn-system').and.include('ECONNREFUSED')
      if (!args.includes('--json')) expect(r.stdout).to.equal('')
      // With --json, the same line and exit code, and the error as the one JSON object on stdout.
      else expect(JSON.parse(r.stdout)).to.deep.equal({error: {kind: 'Unavailable', message: oneLine(r).slice('fnr: '.length), exitCode: 8}})
    }
  })

  it('gc prints its notices only once the pods were read', async () => {
    const r = await runCli(['pods', 'gc', '--dry-run', '--namespace', ns.name, '--kubeconfig', kubeconfig], {env: bareEnv(), extendEnv: false})
    expect(r.exitCode, r.stderr).to.equal(0)
    expect(r.stderr.trim().split('\n')).to.deep.equal([
      'Stale-template rule off: pass --wrapper-server-image (or set WRAPPER_SERVER_IMAGE) or --function-pod-template as the runner has them.',
      `Nothing to collect in namespace ${ns.name}.`,
    ])
  })

  it('--older-than and --stale-grace must be positive: 0 or less is a usage error (exit 2) before any cluster call', async () => {
    const before = proxy.received.length
    for (const flag of ['--older-than=0s', '--older-than=-1h', '--stale-grace=0s', '--stale-grace=-10m']) {
      const r = await runCli(['pods', 'gc', flag, '--namespace', ns.name, '--kubeconfig', kubeconfig], {env: bareEnv(), extendEnv: false})
      expect(r.exitCode, `${flag}: ${r.stderr}`).to.equal(2)
      expect(oneLine(r)).to.match(/^fnr: --(older-than|stale-grace) must be a positive duration \(see --help\)$/)
    }
    expect(proxy.received.length).to.equal(before)
    // positive ones are fine
    const ok = await runCli(['pods', 'gc', '--dry-run', '--older-than=1ms', '--stale-grace=1s', '--namespace', ns.name, '--kubeconfig', kubeconfig], {env: bareEnv(), extendEnv: false})
    expect(ok.exitCode, ok.stderr).to.equal(0)
    expect(proxy.received.length, 'the positive ones did reach the cluster').to.be.greaterThan(before)
  })

  it('no Kubernetes configuration at all: the pods commands say how to give one (not serve\'s --disable-runtimes hint); serve keeps its hint', async () => {
    for (const args of [['pods', 'ls'], ['pods', 'gc'], ['pods', 'warm', '--image', 'example.com/fn:v1', '--wrapper-server-image', 'example.com/wrapper:v1']]) {
      const r = await runCli(args, {env: bareEnv(), extendEnv: false})
      expect(r.exitCode, `${args.join(' ')}: ${r.stderr}`).to.equal(3)
      const line = oneLine(r)
      expect(line).to.include('no Kubernetes configuration found').and.include('pass --kubeconfig FILE or set KUBECONFIG')
      expect(line).to.not.include('--disable-runtimes')
    }
    const serve = await runCli(['serve', '--port=0'], {env: {...bareEnv(), WRAPPER_SERVER_IMAGE: 'example.com/wrapper:v1', FNR_BIND_ADDRESS: '127.0.0.1'}, extendEnv: false})
    expect(serve.exitCode, serve.stderr).to.equal(3)
    expect(serve.stderr).to.include('no Kubernetes configuration found').and.include('disable the pod runtime (--disable-runtimes=pod)')
  })

  it('words that name no command are fnr usage errors (one line, exit 2): unexpected arguments, unknown commands', async () => {
    const before = proxy.received.length
    const cases: Array<[string[], string]> = [
      [['pods', 'ls', 'extra-arg'], 'fnr: Unexpected argument: extra-arg (see --help)'],
      [['pods', 'gc', 'now', '--dry-run'], 'fnr: Unexpected argument: now (see --help)'],
      [['pods', 'bogus'], 'fnr: unknown command "fnr pods bogus"; fnr pods has gc, ls, warm (see --help)'],
      [['image', 'bogus', 'x'], 'fnr: unknown command "fnr image bogus x"; fnr image has inspect (see --help)'],
    ]
    for (const [args, expected] of cases) {
      const r = await runCli([...args, '--kubeconfig', kubeconfig], {env: bareEnv(), extendEnv: false})
      expect(r.exitCode, `${args.join(' ')}: ${r.stderr}`).to.equal(2)
      expect(oneLine(r)).to.equal(expected)
      expect(r.stdout).to.equal('')
    }
    const top = await runCli(['bogus'], {env: bareEnv(), extendEnv: false})
    expect(top.exitCode).to.equal(2)
    expect(oneLine(top)).to.match(/^fnr: unknown command "fnr bogus"; fnr has .*\bpods\b.*\bserve\b/)
    expect(proxy.received.slice(before)).to.deep.equal([])
  })

  it('`fnr --help`, `fnr pods` and `fnr image` describe the topics themselves, not one of their commands', async () => {
    const help = await runCli(['--help'])
    expect(help.exitCode).to.equal(0)
    const topics = help.stdout.slice(help.stdout.indexOf('TOPICS'), help.stdout.indexOf('COMMANDS'))
    expect(topics).to.match(/^\s+pods\s+Operate the function pods fnr manages: list them, collect garbage, warm\s+them up\.$/m)
    expect(topics).to.match(/^\s+image\s+Inspect function images: what fnr would run for an image\.$/m)
    expect(topics).to.not.include('Delete the function pods').and.not.include('digest, platform')

    const pods = await runCli(['pods'])
    expect(pods.exitCode).to.equal(0)
    expect(pods.stdout.split('\n')[0]).to.equal('Operate the function pods fnr manages: list them, collect garbage, warm them up.')
    expect(pods.stdout).to.match(/pods gc\s+Delete the function pods/).and.match(/pods ls\s+List the function pods/).and.match(/pods warm\s+Create a ready function pod/)
    const image = await runCli(['image'])
    expect(image.exitCode).to.equal(0)
    expect(image.stdout.split('\n')[0]).to.equal('Inspect function images: what fnr would run for an image.')
  })

  it('ls --help has examples, the flags and the --json schema', async () => {
    const r = await runCli(['pods', 'ls', '--help'])
    expect(r.exitCode).to.equal(0)
    expect(r.stdout).to.include('EXAMPLES').and.include('$ fnr pods ls --image').and.include('--json').and.include('--namespace').and.include('--context').and.include('--kubeconfig')
    expect(r.stdout).to.include('ownerLease').and.include('ttlLeftSeconds')
  })
})
