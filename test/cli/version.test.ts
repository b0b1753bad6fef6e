/**
 * `fnr --version` answers without loading oclif (bin/run.js) and prints exactly what oclif prints
 * (FNR_NO_FAST_PATH=1 runs oclif's own).
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'

import {BIN_RUN} from '../support/serve.js'

describe('fnr --version', function () {
  this.timeout(60_000)
  const run = (env: NodeJS.ProcessEnv): {status: number | null; stdout: string; stderr: string} => spawnSync(process.execPath, [BIN_RUN, '--version'], {env: {...process.env, ...env}, encoding: 'utf8'})

  it("prints oclif's line, byte for byte, without loading oclif", () => {
    const fast = run({NODE_DEBUG: 'module'})
    const oclif = run({FNR_NO_FAST_PATH: '1'})
    expect(oclif.status).to.equal(0)
    expect(fast.status).to.equal(0)
    expect(fast.stdout).to.equal(oclif.stdout)
    expect(fast.stdout).to.match(/^fnr\/\d+\.\d+\.\d+ linux-x64 node-v\d+\.\d+\.\d+\n$/)
    // NODE_DEBUG=module names every CommonJS module loaded: none of oclif's
    expect(fast.stderr).to.not.contain('@oclif')
  })
})
