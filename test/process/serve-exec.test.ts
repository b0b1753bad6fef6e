/**
 * `fnr serve`'s exec runtime through its gRPC API, for the function-process edges of issues 15
 * and 16: empty output, the exact size limit, the stderr kept in `log`, the exec environment.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
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

  async start(scripts: Record<string, string>, overrides: Partial<ServeOptions> = {}): Promise<EvaluatorClient> {
    const fns = await functionsDirWith(await this.temp.make(), scripts)
    this.functionsDir = fns.functionsDir
    this.running = await startInProcess(serveOptions({...fns, ...overrides}))
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
