/**
 * `fnr serve`'s exec runtime through its gRPC API, for the function-process edges of issues 15
 * and 16: empty output, the exact size limit, the stderr kept in `log`, the exec environment.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {parsePassEnv} from '../../src/lib/process/run.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import {serveOptions, startInProcess} from '../support/serve.js'
import {SAMPLE_RL, TempDirs, writeExecutable} from '../support/tmp.js'
import {expectStatus} from '../support/grpc.js'

/** A functions dir with the given shell functions, each mapped to example.com/<name>:v1. */
export async function functionsDirWith(dir: string, scripts: Record<string, string>): Promise<{configPath: string; functionsDir: string}> {
  const functionsDir = path.join(dir, 'functions')
  await mkdir(functionsDir, {recursive: true})
  const entries: string[] = []
  for (const [name, script] of Object.entries(scripts)) {
    await writeExecutable(path.join(functionsDir, name), script)
    entries.push(`- function: ${name}\n  images: [example.com/${name.toLowerCase()}:v1]`)
  }
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, `functions:\n${entries.join('\n')}\n`)
  return {configPath, functionsDir}
}

export class ServeHarness {
  readonly temp = new TempDirs()
  running?: RunningServer
  client?: EvaluatorClient
  functionsDir = ''

  async start(scripts: Record<string, string>, overrides: Partial<ServeOptions> = {}, passEnv?: string[]): Promise<EvaluatorClient> {
    const fns = await functionsDirWith(await this.temp.make(), scripts)
    this.functionsDir = fns.functionsDir
    const options = serveOptions({...fns, ...overrides})
    if (passEnv) options.exec.passEnv = passEnv
    this.running = await startInProcess(options)
    this.client = new EvaluatorClient(`127.0.0.1:${this.running.port}`, {maxMessageSize: 64 * 1024 * 1024})
    return this.client
  }

  async stop(): Promise<void> {
    this.client?.close()
    await this.running?.stop()
    await this.temp.cleanup()
  }
}

describe('fnr serve exec runtime: a function\'s empty output is never an empty package', () => {
  const h = new ServeHarness()
  let client: EvaluatorClient
  before(async () => {
    client = await h.start({
      empty: '#!/bin/sh\ncat >/dev/null\necho "nothing to say" >&2\n',
      blank: '#!/bin/sh\ncat >/dev/null\nprintf "\\n   \\n\\n"\n',
      cat: '#!/bin/sh\nexec cat\n',
    })
  })
  after(() => h.stop())

  it('answers INTERNAL with a message that says the output was empty, and the stderr', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/empty:v1', SAMPLE_RL), grpc.status.INTERNAL)
    expect(e.details).to.contain('function "example.com/empty:v1" exited with code 0 but wrote no output to stdout, not a ResourceList')
    expect(e.details).to.contain('nothing to say')
  })

  it('answers INTERNAL for whitespace-only output too', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/blank:v1', SAMPLE_RL), grpc.status.INTERNAL)
    expect(e.details).to.contain('wrote only whitespace (6 bytes) to stdout')
  })

  it('still passes a real output through', async () => {
    expect((await client.evaluateRaw('example.com/cat:v1', SAMPLE_RL)).resourceList.equals(SAMPLE_RL)).to.equal(true)
  })
})

const ENV_FN = '#!/bin/sh\ncat >/dev/null\necho "kind: ResourceList"\nenv | sort | sed "s/^/# /"\n'

describe('fnr serve exec runtime: the environment functions get', () => {
  const h = new ServeHarness()
  const saved: Record<string, string | undefined> = {}
  const SET = {HTTP_PROXY: 'http://proxy.example:3128', https_proxy: 'http://proxy.example:3129', NO_PROXY: '.svc,10.0.0.0/8', no_grpc_proxy: '127.0.0.1', FNR_TEST_EXTRA: 'extra-value', FNR_TEST_SECRET: 'not passed'}
  let client: EvaluatorClient
  before(async () => {
    for (const [k, v] of Object.entries(SET)) {
      saved[k] = process.env[k]
      process.env[k] = v
    }
    client = await h.start({env: ENV_FN})
  })
  after(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
    await h.stop()
  })

  it('passes the runner\'s proxy variables (any case) and nothing else of its environment', async () => {
    const out = (await client.evaluateRaw('example.com/env:v1', SAMPLE_RL)).resourceList.toString()
    expect(out).to.contain('# HTTP_PROXY=http://proxy.example:3128\n')
    expect(out).to.contain('# https_proxy=http://proxy.example:3129\n')
    expect(out).to.contain('# NO_PROXY=.svc,10.0.0.0/8\n')
    expect(out).not.to.contain('FNR_TEST_EXTRA')
    expect(out).not.to.contain('FNR_TEST_SECRET')
  })

  it('passes the variables named by --exec-env (comma-separated or repeated), and refuses a bad name', async () => {
    const h2 = new ServeHarness()
    try {
      const c2 = await h2.start({env: ENV_FN}, {}, parsePassEnv(['FNR_TEST_EXTRA,UNSET_VARIABLE']))
      const out = (await c2.evaluateRaw('example.com/env:v1', SAMPLE_RL)).resourceList.toString()
      expect(out).to.contain('# FNR_TEST_EXTRA=extra-value\n')
      expect(out).not.to.contain('UNSET_VARIABLE')
      expect(out).not.to.contain('FNR_TEST_SECRET')
    } finally {
      await h2.stop()
    }
    expect(parsePassEnv(['A,B', ' C ', ''])).to.deep.equal(['A', 'B', 'C'])
    expect(() => parsePassEnv(['1BAD'])).to.throw(/--exec-env: "1BAD" is not an environment variable name/)
    expect(() => parsePassEnv(['A=b'])).to.throw(/is not an environment variable name/)
  })
})
