/**
 * Security defaults of the exec runtime and `fnr serve`: nothing outside the functions directory
 * runs, no shell is ever involved, the function's environment is scrubbed, and neither
 * ResourceList contents nor the server's secrets reach the logs (below --log-level=5, which is
 * documented to log ResourceLists).
 */
import {existsSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {loadExecConfig} from '../../src/lib/config/exec-config.js'
import {ProcessLauncher} from '../../src/lib/process/launcher.js'
import {ExecEvaluator} from '../../src/lib/evaluators/exec.js'
import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {makeReliabilityFunctions} from '../support/reliability/functions.js'
import {freePort, startServeChild} from '../support/reliability/serve-process.js'
import {registerSummary, tally, withinHangLimit} from '../support/reliability/tally.js'
import {sharedTargets, type ServeTarget} from '../support/reliability/targets.js'
import {TempDirs, writeExecutable} from '../support/tmp.js'

registerSummary()

const SECRET_ENV = {
  AWS_SECRET_ACCESS_KEY: 'aws-secret-7f3a9c',
  GITHUB_TOKEN: 'ghp_token_5b1e2d',
  FNR_TEST_PASSWORD: 'hunter2-0c4f',
  KUBECONFIG: '/secret/kubeconfig-91ab',
  NODE_OPTIONS: '--max-old-space-size=4096',
}
const SECRET_DATA = 'c3VwZXItc2VjcmV0LXZhbHVlLTQyNDI='

const SECRET_RL = Buffer.from(`apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: Secret
  metadata:
    name: db
  data:
    password: ${SECRET_DATA}
`)

describe('reliability: security defaults', function () {
  this.timeout(60_000)
  const temp = new TempDirs()
  let serve: ServeTarget

  before(async () => {
    ;({serve} = await sharedTargets())
  })

  after(() => temp.cleanup())

  it('never runs an executable outside the functions directory, whatever the image names', async () => {
    const outside = await temp.make('fnr-rel-outside-')
    const marker = path.join(outside, 'ran')
    const tool = await writeExecutable(path.join(outside, 'tool'), `#!/bin/sh\ntouch ${marker}\ncat\n`)
    const images = [tool, `file://${tool}`, path.relative(serve.fns.functionsDir, tool), `../${path.basename(outside)}/tool`, `${tool}:v1`, `localhost/${tool.slice(1)}`]
    for (const image of images) {
      tally.tried('security', {image})
      const e = (await withinHangLimit(image, serve.client.evaluateRaw(image, SECRET_RL).catch((x: unknown) => x))) as grpc.ServiceError
      expect(e.code, image).to.equal(grpc.status.NOT_FOUND)
    }
    expect(existsSync(marker), 'the outside executable ran').to.equal(false)
    await serve.assertHealthy('images naming outside files')
  })

  it('runs the binary itself, never through a shell (a file name full of shell syntax is just a name)', async () => {
    const dir = await temp.make('fnr-rel-noshell-')
    const functionsDir = path.join(dir, 'functions')
    const {mkdir} = await import('node:fs/promises')
    await mkdir(functionsDir)
    const name = 'fn $(touch pwned1) `touch pwned2`; touch pwned3 && touch pwned4 | x > pwned5'
    await writeExecutable(path.join(functionsDir, name), '#!/bin/sh\necho "argc=$#"\n')
    const configPath = path.join(dir, 'config.yaml')
    await writeFile(configPath, `functions:\n- function: ${JSON.stringify(name)}\n  images: [example.com/shell-syntax:v1]\n`)
    const evaluator = new ExecEvaluator({config: await loadExecConfig({configPath, functionsDir}), maxOutputBytes: 1024 * 1024, launcher: new ProcessLauncher()})
    // a legal (if odd) file name that must simply run: a control, not a bad input
    tally.tried('security', {functionFile: name}, {valid: true})
    const res = await evaluator.evaluate({image: 'example.com/shell-syntax:v1', resourceList: SECRET_RL})
    expect(res.resourceList.toString()).to.equal('argc=0\n')
    for (let i = 1; i <= 5; i++) {
      expect(existsSync(path.join(functionsDir, `pwned${i}`)), `pwned${i}`).to.equal(false)
      expect(existsSync(path.join(process.cwd(), `pwned${i}`)), `pwned${i} in cwd`).to.equal(false)
    }
  })

  it('gives functions a scrubbed environment and keeps secrets and ResourceLists out of the logs (real fnr serve, --log-level=4)', async () => {
    const dir = await temp.make('fnr-rel-secrets-')
    const fns = await makeReliabilityFunctions(dir)
    const port = await freePort()
    const child = await startServeChild(port, [`--config=${fns.configPath}`, `--functions=${fns.functionsDir}`, '--log-level=4'], SECRET_ENV)
    const client = new EvaluatorClient(`127.0.0.1:${port}`)
    try {
      const env = (await client.evaluateRaw(fns.image.env!, SECRET_RL)).resourceList.toString()
      const names = env
        .trim()
        .split('\n')
        .map((l) => l.split('=')[0])
        .filter((n) => n !== 'PWD' && n !== 'SHLVL' && n !== '_')
      // plus the call's marker (process/sweep.ts) and the runner's proxy variables when it has any (docs/process.md)
      const proxies = ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy'].filter((n) => process.env[n] !== undefined)
      expect(names.sort()).to.deep.equal(['HOME', 'LANG', 'PATH', 'FNR_FUNCTION_CALL', ...proxies, ...(process.env.TZ ? ['TZ'] : [])].sort())
      for (const value of Object.values(SECRET_ENV)) expect(env, 'a secret reached the function').to.not.contain(value)

      // Calls that succeed, fail, are not found, time out and are too large, all with the secret.
      await client.evaluateRaw(fns.image.cat!, SECRET_RL)
      await client.evaluateRaw(fns.image.failWithResults!, SECRET_RL).catch(() => undefined)
      await client.evaluateRaw('example.com/unknown:v1', SECRET_RL).catch(() => undefined)
      await client.evaluateRaw(fns.image.sleep!, SECRET_RL, {deadline: Date.now() + 300}).catch(() => undefined)
      await client.evaluateRaw(fns.image.cat!, Buffer.concat([SECRET_RL, Buffer.alloc(7 * 1024 * 1024, ' ')])).catch(() => undefined)
    } finally {
      client.close()
      child.child.kill('SIGTERM')
      await child.exited
    }
    const logs = child.stderr()
    expect(logs).to.contain('"msg":"EvaluateFunction"')
    expect(logs, 'ResourceList contents in the logs below level 5').to.not.contain(SECRET_DATA)
    for (const [name, value] of Object.entries(SECRET_ENV)) expect(logs, `${name} in the logs`).to.not.contain(value)
  })
})
