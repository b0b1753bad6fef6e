import {expect} from 'chai'

import {runCli} from '../support/cli.js'
import {makeFunctionsDir, startServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('fnr serve flags', () => {
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('accepts the args of Porch\'s Deployment unchanged (Go spellings too)', async () => {
    const fns = await makeFunctionsDir(await temp.make())
    const proc = await startServeProcess([
      `-config=${fns.configPath}`,
      `--functions=${fns.functionsDir}`,
      '--pod-namespace=porch-fn-system',
      '--max-request-body-size=6291456',
      '--max-parallel-pods-per-function=2',
      '--max-waitlist-length=1',
      '--warm-up-pod-cache=true',
      '--pod-ttl=30m',
      '--scan-interval=1m',
      '--enable-private-registries',
      '--enable-private-registries-tls=false',
      '--disable-runtimes=pod',
    ])
    proc.child.kill('SIGTERM')
    expect((await proc.exited).code).to.equal(0)
  })

  it('refuses to start with every runtime disabled, with a clear one-line error', async () => {
    const r = await runCli(['serve', '--disable-runtimes=exec,pod', '--port=0'])
    expect(r.exitCode).to.equal(3)
    expect(r.stderr.trim()).to.match(/^fnr: every runtime is disabled/)
    expect(r.stderr.trim().split('\n')).to.have.length(1)
  })

  it('requires WRAPPER_SERVER_IMAGE for the pod runtime, as upstream does', async () => {
    const env = {...process.env}
    delete env.WRAPPER_SERVER_IMAGE
    const r = await runCli(['serve', '--port=0'], {env, extendEnv: false})
    expect(r.exitCode).to.equal(3)
    expect(r.stderr).to.contain('WRAPPER_SERVER_IMAGE must be set')
  })

  it('rejects unknown flags, bad durations, bad booleans and bad runtimes with exit 2', async () => {
    for (const args of [['--no-such-flag'], ['--pod-ttl=30'], ['--warm-up-pod-cache=maybe'], ['--disable-runtimes=docker'], ['--port=70000'], ['--log-level=9']]) {
      const r = await runCli(['serve', '--disable-runtimes=pod', ...args])
      expect(r.exitCode, `${args.join(' ')}: ${r.stderr}`).to.equal(2)
      expect(r.stderr).to.match(/^fnr: /)
    }
  })

  it('names the bad exec config entry at startup', async () => {
    const dir = await temp.make()
    const fns = await makeFunctionsDir(dir)
    const {writeFile} = await import('node:fs/promises')
    await writeFile(fns.configPath, 'functions:\n- function: ../../etc/passwd\n  images: [x.io/a:v1]\n')
    const r = await runCli(['serve', '--disable-runtimes=pod', '--port=0', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`])
    expect(r.exitCode).to.equal(3)
    expect(r.stderr).to.contain('functions[0] (function "../../etc/passwd")')
  })

  it('has help with examples', async () => {
    const r = await runCli(['serve', '--help'])
    expect(r.exitCode).to.equal(0)
    expect(r.stdout).to.contain('--max-request-body-size')
    expect(r.stdout).to.contain('EXAMPLES')
    expect(r.stdout).to.contain('[default: 30m]')
  })
})
