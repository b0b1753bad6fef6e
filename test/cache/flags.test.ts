import {expect} from 'chai'
import net from 'node:net'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import {runCli} from '../support/cli.js'
import {TempDirs} from '../support/tmp.js'

describe('fnr serve: metrics and response-cache flags', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())
  const env = {FNR_BIND_ADDRESS: '127.0.0.1'}

  it('rejects a negative --cache-ttl as a usage error (exit 2)', async () => {
    const r = await runCli(['serve', '--disable-runtimes=pod', '--port=0', '--cache-ttl=-5s'], {env})
    expect(r.exitCode).to.equal(2)
    expect(r.stderr).to.contain('--cache-ttl must be 0 (off) or a positive duration')
  })

  it('a --metrics-port in use stops the start with one line (exit 8)', async () => {
    const blocker = net.createServer()
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()))
    const port = (blocker.address() as net.AddressInfo).port
    try {
      const r = await runCli(['serve', '--disable-runtimes=pod', '--port=0', `--metrics-port=${port}`], {env})
      expect(r.exitCode).to.equal(8)
      expect(r.stderr).to.contain(`cannot listen on 127.0.0.1:${port} for metrics: the address is already in use`)
    } finally {
      blocker.close()
    }
  })

  it('a bad responseCache value in --pod-cache-config is a configuration error (exit 3)', async () => {
    const dir = await temp.make()
    const file = path.join(dir, 'pod-cache-config.yaml')
    await writeFile(file, '- name: example.com/fn:v1\n  responseCache: sometimes\n')
    const r = await runCli(['serve', '--disable-runtimes=', '--port=0', '--cache-ttl=1m', `--pod-cache-config=${file}`, '--kubeconfig=/nonexistent'], {env: {...env, WRAPPER_SERVER_IMAGE: 'x'}})
    expect(r.exitCode).to.equal(3)
    // (a JSON log line: the value's quotes are escaped)
    expect(r.stderr).to.contain('responseCache: Invalid value: \\"sometimes\\": must be a duration like 30m')
  })
})
