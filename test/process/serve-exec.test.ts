/**
 * `fnr serve`'s exec runtime through its gRPC API, for the function-process edges in docs/process.md: empty output, the exact size limit, the stderr kept in `log`, the exec environment.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {parsePassEnv} from '../../src/lib/process/run.js'
import type {RunningServer, ServeOptions} from '../../src/lib/serve.js'
import {serveOptions, startInProcess} from '../support/serve.js'
import {functionsDirWith} from './support/functions.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {expectStatus} from '../support/grpc.js'

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

describe('fnr serve exec runtime: output size limit and log', () => {
  const h = new ServeHarness()
  const MAX = 1024 * 1024
  let client: EvaluatorClient
  before(async () => {
    client = await h.start(
      {
        // N bytes of output, N from the first line of the input
        sized: '#!/bin/sh\nread n\ncat >/dev/null\nhead -c "$n" /dev/zero | tr "\\0" "a"\n',
        // N bytes of stderr and a small output
        noisy: '#!/bin/sh\nread n\ncat >/dev/null\nhead -c "$n" /dev/zero | tr "\\0" "e" >&2\necho "kind: ResourceList"\n',
      },
      {maxRequestBodySize: MAX},
    )
  })
  after(() => h.stop())

  const input = (n: number) => Buffer.from(`${n}\n`)

  // at 1 MiB the framing is 1 + 3 (varint) = 4 bytes (an empty log is left out, as Go's protobuf
  // does); at 6 MiB the varint takes 4 and it is 5
  for (const under of [63, 10, 7, 6, 5, 4]) {
    it(`sends an output of max - ${under} bytes (only the 4 bytes of real framing count)`, async () => {
      const res = await client.evaluateRaw('example.com/sized:v1', input(MAX - under))
      expect(res.resourceList.length).to.equal(MAX - under)
      expect(res.log.length).to.equal(0)
    })
  }

  it('refuses an output of max - 3 bytes with RESOURCE_EXHAUSTED, naming the framing', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/sized:v1', input(MAX - 3)), grpc.status.RESOURCE_EXHAUSTED)
    expect(e.details).to.equal(`function "example.com/sized:v1" returned ${MAX - 3} bytes, more than fit in the maximum message size ${MAX} (the response adds 4 bytes of framing)`)
  })

  it('keeps all of a stderr larger than 256 KiB in the log when it fits', async () => {
    const res = await client.evaluateRaw('example.com/noisy:v1', input(600 * 1024))
    expect(res.log.length).to.equal(600 * 1024)
    expect(res.log.toString()).to.match(/^e+$/)
  })

  it('cuts a stderr larger than the message at its start, saying how much was left out, and fills the message exactly', async () => {
    const n = 3 * MAX
    const res = await client.evaluateRaw('example.com/noisy:v1', input(n))
    const log = res.log.toString()
    const m = /^\[fnr: the first (\d+) bytes of this function's stderr were left out to fit the maximum message size; the rest follows\]\n(e+)$/.exec(log)
    expect(m, log.slice(0, 200)).to.not.equal(null)
    expect(Number(m![1]) + m![2]!.length).to.equal(n)
    const {responseSize} = await import('../../src/lib/grpc/reply.js')
    expect(responseSize(res.resourceList.length, res.log.length)).to.be.within(MAX - 8, MAX)
  })
})

// logRoom's property test is in test/grpc/reply.test.ts (unit).

describe('fnr serve exec runtime: what a failing function\'s status message carries', () => {
  const h = new ServeHarness()
  let client: EvaluatorClient
  before(async () => {
    client = await h.start({
      // 5 results (one of each severity and two errors) and 20 KiB of numbered stderr lines, exit 2
      failing: `#!/bin/sh
cat >/dev/null
i=0; while [ $i -lt 1000 ]; do echo "stderr line $i ................" >&2; i=$((i+1)); done
cat <<'YAML'
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items: []
results:
- {message: first info, severity: info}
- {message: first error, severity: error, resourceRef: {apiVersion: v1, kind: ConfigMap, name: a}}
- {message: a warning, severity: warning}
- {message: second error, severity: error, field: {path: data.x}}
- {message: no severity}
YAML
exit 2
`,
    })
  })
  after(() => h.stop())

  it('every result (errors first) and a stderr tail that fills the message, since Porch\'s client reads only the message', async () => {
    const e = await expectStatus(client.evaluateRaw('example.com/failing:v1', SAMPLE_RL), grpc.status.INTERNAL)
    const lines = e.details.split('\n')
    expect(lines.slice(0, 7)).to.deep.equal([
      'function "example.com/failing:v1" exited with code 2',
      'results:',
      '[error] v1/ConfigMap/a: first error',
      '[error] data.x: second error',
      '[info]: first info',
      '[warning]: a warning',
      '[info]: no severity',
    ])
    expect(lines[7]).to.equal('stderr:')
    expect(e.details).to.contain('stderr line 999 ................')
    // far more than the former 1 KiB tail, within the 8 KiB status message limit
    const stderrShown = e.details.slice(e.details.indexOf('stderr:\n') + 8)
    expect(stderrShown.length).to.be.above(5 * 1024)
    expect(Buffer.byteLength(e.details)).to.be.at.most(8 * 1024)
  })
})
