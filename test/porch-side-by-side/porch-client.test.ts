/**
 * Porch's own client code against fnr serve and against Porch's runner v1.5.8
 * (docs/catalog-functions.md).
 *
 * The peer test/peers/porchclient runs porch-server's path for a PackageRevisionResources update:
 * Porch v1.5.8's engine replaces the draft's resources, renders them with kpt's renderer through
 * Porch's gRPC function runtime (one connection for the whole run, 6 MiB limits), and writes the
 * result into the draft; only the storage is in memory. The same batches of updates go through
 * fnr serve and through Porch's func/server, both on one config.yaml and functions dir (the real
 * catalog binaries plus shell functions), and what Porch sees must be the same: every byte of
 * every resource the draft received, whether the draft was pushed, the render status (error and
 * results), the error text and the gRPC code wrapped in it.
 */
import {expect} from 'chai'
import {execa} from 'execa'

import {buildPorchClient, buildPorchRunner} from '../../scripts/catalog-peers.mjs'
import {BUILD_TIMEOUT_MS} from '../catalog/support.js'
import {startServeProcess, type ServeProcess} from '../support/serve.js'
import {TempDirs} from '../support/tmp.js'
import {runnerBed, startPorchRunner, type PorchRunner} from './support.js'

const MAX = 6 * 1024 * 1024
const PREFIX = 'ghcr.io/kptdev/krm-functions-catalog'
/** fnr's idle limit in this spec, and the pause of the idle-gap case (longer). */
const IDLE = '2s'
const GAP_MS = 4000
/** The request deadline of the timeout case; porch-server's own is 291 s (its request timeout). */
const DEADLINE_MS = 2000

/** Shell functions beside runnerBed's (cat, stderr, fail-with-results, exit-2), as example.com/<name>:v1. */
const FUNCTIONS = {
  // exit 0, the items as they came, and an error result
  'error-results': "#!/bin/sh\ncat\nprintf 'results:\\n- message: replicas must be at most 3\\n  severity: error\\n  field: {path: spec.replicas}\\n'\n",
  sleep: '#!/bin/sh\ncat >/dev/null\nsleep 8\n',
  'slow-cat': '#!/bin/sh\nsleep 1\nexec cat\n',
  garbage: "#!/bin/sh\ncat >/dev/null\necho 'not: [yaml'\n",
  // 1 MiB on stderr, then success (the items as they came) or exit 1
  'loud-ok': '#!/bin/sh\nhead -c 1048576 /dev/zero | tr "\\0" e >&2\nexec cat\n',
  'loud-fail': '#!/bin/sh\ncat >/dev/null\nhead -c 1048576 /dev/zero | tr "\\0" e >&2\nexit 1\n',
  // The input as it came plus a comment line: exactly outputSize bytes (from its ConfigMap).
  sized: [
    '#!/bin/sh',
    'input=$(cat)',
    'n=$(printf "%s\\n" "$input" | sed -n \'s/^ *outputSize: "*\\([0-9][0-9]*\\)"* *$/\\1/p\' | head -n 1)',
    's=$(printf "%s\\n" "$input" | wc -c)',
    'printf "%s\\n#" "$input"',
    'head -c $((n - s - 2)) /dev/zero | tr "\\0" a',
    'printf "\\n"',
    '',
  ].join('\n'),
}

interface Outcome {
  name: string
  draft: Record<string, string> | null
  draftUpdates: number
  closed: boolean
  renderStatus: {result?: {exitCode: number; items?: Array<Record<string, unknown>>}; error: string} | null
  error?: string
  grpcCode?: string
  grpcMessage?: string
  elapsedMs: number
}

interface Update {
  name: string
  resources: Record<string, string>
  timeoutMs?: number
}

interface Batch {
  pauseMs?: number
  updates: Update[]
}

/** Runs `batches` through Porch's client path against the runner at `addr`: one outcome per update, in order. */
async function porchClient(binary: string, addr: string, batches: Batch[]): Promise<Outcome[]> {
  const input = JSON.stringify({address: addr, maxMessageSize: MAX, defaultImagePrefix: `${PREFIX}/`, batches})
  const r = await execa(binary, [], {input, timeout: 10 * 60_000, maxBuffer: 1024 * 1024 * 1024})
  return JSON.parse(String(r.stdout)) as Outcome[]
}

const RESOURCES = {
  'deployment.yaml': 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # kpt-set: ${app}\n  namespace: default\nspec:\n  replicas: 4 # kpt-set: ${replicas}\n',
  'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  mode: fast\n',
}

/** A package whose Kptfile runs `mutators` (image, configMap) in order. */
function pkg(name: string, mutators: Array<{image: string; configMap?: Record<string, string>}>, resources: Record<string, string> = RESOURCES): Update {
  const pipeline = mutators
    .map((m) => `  - image: ${m.image}\n${m.configMap ? `    configMap:\n${Object.entries(m.configMap).map(([k, v]) => `      ${k}: ${JSON.stringify(v)}\n`).join('')}` : ''}`)
    .join('')
  const kptfile = `apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: ${name}\n  annotations:\n    config.kubernetes.io/local-config: "true"\npipeline:\n  mutators:\n${pipeline}`
  return {name, resources: {Kptfile: kptfile, ...resources}}
}

const catalog = (fn: string, version: string): string => `${PREFIX}/${fn}:${version}`
const shell = (fn: string): string => `example.com/${fn}:v1`
const setNamespace = {image: catalog('set-namespace', 'v0.4.2'), configMap: {namespace: 'prod'}}
const applySetters = {image: catalog('apply-setters', 'v0.2.2'), configMap: {app: 'shop', replicas: '3'}}

/** The cases, as batches: each a batch of its own but `concurrent` (one batch) and the idle gap (a pause first). */
function batches(): Batch[] {
  const one = (u: Update): Batch => ({updates: [u]})
  return [
    one(pkg('success', [setNamespace, applySetters])),
    one(pkg('error-results', [setNamespace, {image: shell('error-results')}])),
    one(pkg('fail-with-results', [setNamespace, {image: shell('fail-with-results')}])),
    one(pkg('exit-2', [{image: shell('exit-2')}])),
    one({...pkg('timeout', [{image: shell('sleep')}]), timeoutMs: DEADLINE_MS}),
    ...[6, 5, 4].map((under) => one(pkg(`size-6MiB-${under}`, [{image: shell('sized'), configMap: {outputSize: String(MAX - under)}}]))),
    one(pkg('loud-ok', [{image: shell('loud-ok')}])),
    one(pkg('loud-fail', [{image: shell('loud-fail')}])),
    one(pkg('unknown-image', [{image: shell('not-there')}])),
    one(pkg('garbage', [{image: shell('garbage')}])),
    {
      updates: Array.from({length: 8}, (_, i) =>
        pkg(`concurrent-${i}`, i % 2 === 0 ? [setNamespace, {image: shell('slow-cat')}, applySetters] : [{image: shell('stderr')}, {...setNamespace, configMap: {namespace: `ns${i}`}}]),
      ),
    },
    one(pkg('before-gap', [setNamespace])),
    {pauseMs: GAP_MS, updates: [pkg('after-gap', [applySetters, setNamespace])]},
  ]
}

/** The gRPC status in an error text: kpt's renderer keeps only the text of the runtime's error. */
const STATUS = /rpc error: code = (\w+) desc = ([\s\S]*)$/
const code = (error: string | undefined): string | undefined => (error ? STATUS.exec(error)?.[1] : undefined)
const desc = (error: string | undefined): string | undefined => (error ? STATUS.exec(error)?.[2] : undefined)

/**
 * What Porch sees, without the timing and with the runner's own status message (what follows
 * "desc = ", the end of the text) replaced by a marker: everything Porch and kpt wrap around it
 * must be the same; the messages themselves are compared case by case.
 */
const seen = (o: Outcome): Omit<Outcome, 'elapsedMs'> => {
  const {elapsedMs: _elapsed, ...rest} = o
  const mark = (text: string): string => text.replace(STATUS, 'rpc error: code = $1 desc = <runner message>')
  return {
    ...rest,
    error: rest.error === undefined ? undefined : mark(rest.error),
    renderStatus: rest.renderStatus ? {...rest.renderStatus, error: mark(rest.renderStatus.error)} : rest.renderStatus,
  }
}

describe("Porch's own client code (pkg/engine, pkg/task) against fnr serve and Porch's runner", function () {
  this.timeout(BUILD_TIMEOUT_MS)
  const temp = new TempDirs()
  let fnr: ServeProcess | undefined
  let porch: PorchRunner | undefined
  const fromFnr = new Map<string, Outcome>()
  const fromPorch = new Map<string, Outcome>()

  before(async function () {
    this.timeout(BUILD_TIMEOUT_MS)
    const client = buildPorchClient()
    const porchServer = buildPorchRunner().server
    const work = await temp.make('fnr-porch-client-')
    const bed = await runnerBed(work, FUNCTIONS)
    fnr = await startServeProcess([`--config=${bed.configPath}`, `--functions=${bed.functionsDir}`, '--disable-runtimes=pod', `--connection-idle-timeout=${IDLE}`])
    porch = await startPorchRunner(porchServer, bed)
    for (const o of await porchClient(client, `127.0.0.1:${fnr.port}`, batches())) fromFnr.set(o.name, o)
    for (const o of await porchClient(client, `127.0.0.1:${porch.port}`, batches())) fromPorch.set(o.name, o)
  })

  after(async () => {
    fnr?.child.kill('SIGTERM')
    if (fnr) await fnr.exited
    await porch?.stop()
    await temp.cleanup()
  })

  /** The outcome of `name` from both runners, after checking Porch sees the same from both. */
  const same = (name: string): Outcome => {
    const f = fromFnr.get(name)
    const p = fromPorch.get(name)
    expect(p, `porch: ${name}`).to.not.equal(undefined)
    expect(f, `fnr: ${name}`).to.not.equal(undefined)
    for (const file of new Set([...Object.keys(p!.draft ?? {}), ...Object.keys(f!.draft ?? {})])) {
      expect(Buffer.from(f!.draft?.[file] ?? '').equals(Buffer.from(p!.draft?.[file] ?? '')), `${name}: ${file}, byte for byte`).to.equal(true)
    }
    expect(seen(f!), name).to.deep.equal(seen(p!))
    return p!
  }
  /** The runner's own status message in what Porch saw: [from fnr, from Porch's runner]. */
  const messages = (name: string): [string | undefined, string | undefined] => [desc(fromFnr.get(name)!.error), desc(fromPorch.get(name)!.error)]

  it('success (set-namespace, apply-setters): the same rendered files and results, pushed', () => {
    const o = same('success')
    expect(o.error).to.equal(undefined)
    expect(o.closed).to.equal(true)
    expect(o.renderStatus!.error).to.equal('')
    expect(o.renderStatus!.result!.items!.map((i) => i.image)).to.deep.equal([setNamespace.image, applySetters.image])
    expect(o.draft!['deployment.yaml']).to.contain('namespace: prod').and.contain('name: shop').and.contain('replicas: 3')
  })

  it('exit 0 with an error result: the same outcome and render status (pushed: kpt goes by the exit code)', () => {
    const o = same('error-results')
    expect(o.error).to.equal(undefined)
    expect(o.closed).to.equal(true)
    expect(JSON.stringify(o.renderStatus!.result!.items![1])).to.contain('replicas must be at most 3')
  })

  // What Porch keeps of a runner's failure is text: kpt's renderer turns the gRPC runtime's error
  // into a string, so no status (code) survives in the error chain (the peer finds none); the code
  // is only in the text, and the runner's message follows "desc = ".
  it('a failing function that prints results: the same code (in the text) and render status, not pushed; fnr\'s message also carries the results', () => {
    const o = same('fail-with-results')
    expect(o.grpcCode).to.equal(undefined)
    expect(code(o.error)).to.equal('Internal')
    expect(o.closed).to.equal(false)
    expect(o.draft).to.not.equal(null)
    const [f, p] = messages('fail-with-results')
    expect(p).to.equal('Failed to execute function "example.com/fail-with-results:v1": exit status 3 (fatal: boom\n)')
    expect(f).to.equal('function "example.com/fail-with-results:v1" exited with code 3\nresults:\n[error] apps/v1/Deployment/prod/web spec.replicas: replicas must be at most 3\n[info]: just saying\nstderr:\nfatal: boom')
  })

  it('a function exiting 2: the same code, both messages carry its stderr', () => {
    expect(code(same('exit-2').error)).to.equal('Internal')
    const [f, p] = messages('exit-2')
    expect(p).to.equal('Failed to execute function "example.com/exit-2:v1": exit status 2 (bad things happened\n)')
    expect(f).to.equal('function "example.com/exit-2:v1" exited with code 2\nstderr:\nbad things happened')
  })

  it(`a function outliving the request's deadline (${DEADLINE_MS} ms here, 291 s in porch-server): the same DeadlineExceeded`, () => {
    const o = same('timeout')
    expect(code(o.error)).to.equal('DeadlineExceeded')
    // Both the client and the server keep the deadline, and whichever timer fires first writes the
    // message: usually the client's own "context deadline exceeded"; on a loaded machine the
    // server's answer can arrive first (grpc-go's server resets the stream with CANCEL, which its
    // client reports as DeadlineExceeded; grpc-js's server sends its "Deadline exceeded" status).
    // CI saw Porch's runner win that race once. The code and the outcome are the same either way.
    const [f, p] = messages('timeout')
    expect(['context deadline exceeded', 'Deadline exceeded'], 'fnr').to.include(f)
    expect(['context deadline exceeded', 'stream terminated by RST_STREAM with error code: CANCEL'], "Porch's runner").to.include(p)
    expect(o.closed).to.equal(false)
  })

  for (const under of [6, 5]) {
    it(`an output of 6 MiB - ${under} bytes: rendered the same by both`, () => {
      const o = same(`size-6MiB-${under}`)
      expect(o.error).to.equal(undefined)
      expect(o.closed).to.equal(true)
    })
  }

  it('an output of 6 MiB - 4 bytes (one over): ResourceExhausted from both; fnr says which function and how many bytes', () => {
    expect(code(same('size-6MiB-4').error)).to.equal('ResourceExhausted')
    const [f, p] = messages('size-6MiB-4')
    expect(p).to.equal(`grpc: trying to send message larger than max (${MAX + 1} vs. ${MAX})`)
    expect(f).to.equal(`function "example.com/sized:v1" returned ${MAX - 4} bytes, more than fit in the maximum message size ${MAX} (the response adds 5 bytes of framing)`)
  })

  it('1 MiB of stderr on success: the same files', () => {
    const o = same('loud-ok')
    expect(o.error).to.equal(undefined)
    expect(o.closed).to.equal(true)
  })

  it("1 MiB of stderr on failure: the same code; Porch's runner sends all of it, fnr its last KiBs", () => {
    expect(code(same('loud-fail').error)).to.equal('Internal')
    const [f, p] = messages('loud-fail')
    expect(p).to.equal(`Failed to execute function "example.com/loud-fail:v1": exit status 1 (${'e'.repeat(1024 * 1024)})`)
    expect(f!.startsWith('function "example.com/loud-fail:v1" exited with code 1\nstderr:\n…eee')).to.equal(true)
    expect(f!.length).to.be.below(8 * 1024)
  })

  it('an unknown image: NotFound, the same text from both', () => {
    expect(code(same('unknown-image').error)).to.equal('NotFound')
    expect(messages('unknown-image')).to.deep.equal(['function "example.com/not-there:v1" not found', 'function "example.com/not-there:v1" not found'])
  })

  it("garbage output (exit 0): the same kpt parse failure, not pushed", () => {
    const o = same('garbage')
    expect(o.error).to.contain('MalformedYAMLError')
    expect(o.closed).to.equal(false)
  })

  it("8 updates at once through one engine (one connection): each the same as with Porch's runner", () => {
    for (let i = 0; i < 8; i++) expect(same(`concurrent-${i}`).error, `concurrent-${i}`).to.equal(undefined)
  })

  it(`a pause of ${GAP_MS} ms (longer than fnr's idle limit here, ${IDLE}) between two calls: both calls the same`, () => {
    expect(same('before-gap').error).to.equal(undefined)
    expect(same('after-gap').error).to.equal(undefined)
  })
})
