import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {until} from '../support/pods/index.js'
import {freePort} from '../support/registry/tools.js'
import {BIN_RUN, REPO_ROOT, makeFunctionsDir} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'

describe('metrics and the response cache cost nothing when off', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('`fnr serve` loads neither prom-client nor lru-cache unless --metrics-port / --cache-ttl turn them on (module-resolution trace)', async () => {
    const dir = await temp.make()
    const fns = await makeFunctionsDir(dir)
    const trace = path.join(dir, 'modules.txt')
    const hook = path.join(REPO_ROOT, 'test', 'support', 'pods', 'module-trace.mjs')
    const run = async (args: string[]): Promise<string[]> => {
      await writeFile(trace, '')
      const child = spawn(process.execPath, ['--import', hook, BIN_RUN, 'serve', '--port=0', '--log-level=2', '--disable-runtimes=pod', `--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, ...args], {
        env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', FNR_MODULE_TRACE: trace},
        stdio: ['ignore', 'ignore', 'pipe'],
      })
      let stderr = ''
      child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
      const exited = once(child, 'exit')
      await until(() => /fnr serve is ready/.test(stderr) || child.exitCode !== null, 'serve ready')
      child.kill('SIGTERM')
      await exited
      expect(stderr, stderr).to.match(/fnr serve is ready/)
      return (await readFile(trace, 'utf8')).split('\n').filter((l) => l !== '')
    }
    const loads = (modules: string[], name: string): boolean => modules.some((u) => u.includes(`/node_modules/${name}/`))
    const off = await run([])
    expect(off.some((u) => u.includes('/dist/lib/serve.js'))).to.equal(true)
    expect(loads(off, 'prom-client')).to.equal(false)
    expect(loads(off, 'lru-cache')).to.equal(false)
    const on = await run([`--metrics-port=${await freePort()}`, '--cache-ttl=1m'])
    expect(loads(on, 'prom-client')).to.equal(true)
    expect(loads(on, 'lru-cache')).to.equal(true)
  })
})
