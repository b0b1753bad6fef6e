/**
 * The packaged folder (scripts/package-wrapper.mjs): its layout and ELF wiring, its build cache,
 * and wire compatibility: the single executable answers exactly like the in-process wrapper, to
 * the client fnr serve uses for pods and to a plain client built from proto/evaluator.proto.
 * On the host it runs through its own interpreter (its PT_INTERP exists only in a pod); the
 * container tests are in runc.test.ts.
 */
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import {expect} from 'chai'
import {spawn, spawnSync} from 'node:child_process'
import {lstatSync, readFileSync, readdirSync, readlinkSync, statSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {readFailure} from '../../src/lib/grpc/metadata.js'
import {PROTO_PATH} from '../../src/lib/grpc/proto.js'
import {EvaluatorServer} from '../../src/lib/grpc/server.js'
import {silentLogger} from '../../src/lib/telemetry/log.js'
import {startWrapperServer, type RunningWrapper} from '../../src/lib/wrapper.js'
import {REPO_ROOT} from '../support/serve.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {resourceList, writeShellFunctions, type ShellFunction} from './support/functions.js'
import {copyFolder, packagedFolder, PACKAGE_SCRIPT, PACKAGE_TIMEOUT_MS, readBuildInfo} from './support/package.js'
import {packagedInterpreter, startWrapperProcess, type WrapperProcess} from './support/process.js'

function elf(args: string[]): string {
  const r = spawnSync('patchelf', args, {encoding: 'utf8'})
  expect(r.status, r.stderr).to.equal(0)
  return r.stdout.trim()
}

/** What a caller sees of one call, in a form two servers can be compared by. */
async function observe(client: EvaluatorClient, input: Buffer, deadlineMs?: number): Promise<Record<string, unknown>> {
  try {
    const res = await client.evaluate('example.com/fn:v1', input, deadlineMs ? {deadline: Date.now() + deadlineMs} : {})
    return {ok: true, resourceList: res.resourceList.toString('base64'), log: res.log.toString(), failure: readFailure(res.trailers), evaluator: res.trailers.get('fnr-evaluator')}
  } catch (err) {
    const e = err as {kind: string; message: string; details: {grpcCode: number; failure?: unknown}}
    // A deadline may fire on the client first, whose message names the (different) server address.
    const message = e.details.grpcCode === grpc.status.DEADLINE_EXCEEDED ? '(deadline)' : e.message
    return {ok: false, kind: e.kind, grpcCode: e.details.grpcCode, message, failure: e.details.failure}
  }
}

describe('packaged wrapper-server folder', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  let built: string
  let folder: string
  let sh: Record<ShellFunction, string>

  before(async function () {
    this.timeout(PACKAGE_TIMEOUT_MS)
    built = await packagedFolder()
    const dir = await temp.make('fnr-packaged-')
    folder = path.join(dir, 'wrapper-server-tools')
    await mkdir(folder)
    copyFolder(built, folder)
    sh = await writeShellFunctions(path.join(dir, 'sh'))
  })

  after(() => temp.cleanup())

  describe('layout', () => {
    it('holds the launcher, its static busybox, the executable, the probe link, the interpreter and libraries, licences and build info', () => {
      for (const f of ['wrapper-server', 'wrapper-server-sea', 'busybox']) expect(statSync(path.join(folder, f)).mode & 0o777, f).to.equal(0o555)
      // The entry Porch's templates run is the launcher, a script for the static busybox (PID 1 of a pod: reaps zombies).
      expect(readFileSync(path.join(folder, 'wrapper-server'), 'utf8').split('\n')[0]).to.equal('#!/wrapper-server-tools/busybox sh')
      const ldd = spawnSync('ldd', [path.join(folder, 'busybox')], {encoding: 'utf8'})
      expect(`${ldd.stdout}${ldd.stderr}`).to.match(/not a dynamic executable|statically linked/)
      expect(lstatSync(path.join(folder, 'grpc-health-probe')).isSymbolicLink()).to.equal(true)
      expect(readlinkSync(path.join(folder, 'grpc-health-probe'))).to.equal('wrapper-server-sea')
      expect(readdirSync(path.join(folder, 'licenses'))).to.include('busybox-static.copyright')
      const libs = readdirSync(path.join(folder, 'lib'))
      expect(libs).to.include('ld-linux-x86-64.so.2')
      expect(libs).to.include('libc.so.6')
      expect(readdirSync(path.join(folder, 'licenses'))).to.include.members(['libc6.copyright', 'bundled-npm-packages.txt'])
      const info = readBuildInfo(folder)
      expect(info.mountPoint).to.equal('/wrapper-server-tools')
      expect(info.version).to.match(/^fnr wrapper-server \d+\.\d+\.\d+ \(node v\d+\./)
      console.log(`      packaged folder: ${(info.totalBytes / 1024 / 1024).toFixed(1)} MiB (${info.files.map((f) => `${f.path} ${(f.bytes / 1024 / 1024).toFixed(1)}`).join(', ')})`)
      expect(info.totalBytes).to.be.below(160 * 1024 * 1024)
    })

    it('points PT_INTERP into /wrapper-server-tools and finds its libraries by DT_RPATH ($ORIGIN first)', () => {
      const exe = path.join(folder, 'wrapper-server-sea')
      expect(elf(['--print-interpreter', exe])).to.equal('/wrapper-server-tools/lib/ld-linux-x86-64.so.2')
      expect(elf(['--print-rpath', exe])).to.equal('$ORIGIN/lib:/wrapper-server-tools/lib')
      // DT_RPATH, not DT_RUNPATH: it wins over an LD_LIBRARY_PATH the function image may set.
      const dyn = spawnSync('readelf', ['-d', exe], {encoding: 'utf8'})
      if (dyn.status === 0) {
        expect(dyn.stdout).to.match(/\(RPATH\)/)
        expect(dyn.stdout).not.to.match(/\(RUNPATH\)/)
      }
    })

    it('carries every library that the executable and its libraries need', () => {
      const lib = path.join(folder, 'lib')
      const present = new Set(readdirSync(lib))
      const needed = new Set<string>()
      for (const file of [path.join(folder, 'wrapper-server-sea'), ...[...present].filter((f) => !f.startsWith('ld-linux')).map((f) => path.join(lib, f))]) {
        for (const n of elf(['--print-needed', file]).split('\n').filter(Boolean)) needed.add(n)
      }
      const missing = [...needed].filter((n) => !present.has(n))
      expect(missing, `needed but not carried: ${missing.join(', ')}`).to.deep.equal([])
    })

    it('is not rebuilt when no input changed', () => {
      // The first run brings the build up to date (another engineer may have edited a source
      // file since this suite started); the second must then find nothing to do.
      const first = spawnSync(process.execPath, [PACKAGE_SCRIPT, '--quiet'], {cwd: REPO_ROOT, encoding: 'utf8'})
      expect(first.status, first.stderr).to.equal(0)
      const before = statSync(path.join(built, 'wrapper-server-sea')).mtimeMs
      const r = spawnSync(process.execPath, [PACKAGE_SCRIPT], {cwd: REPO_ROOT, encoding: 'utf8'})
      expect(r.status, r.stderr).to.equal(0)
      expect(r.stderr).to.contain('is up to date')
      expect(statSync(path.join(built, 'wrapper-server-sea')).mtimeMs).to.equal(before)
    })

    it('ignores NODE_OPTIONS and NODE_ICU_DATA meant for Node functions (FNRW_OPTIONS instead only when built from Node 22)', () => {
      const {renamedEnv} = readBuildInfo(folder)
      // Node 26 has no NODE_OPTIONS string to rename; the SEA's execArgvExtension "none" keeps it out there.
      const nodeMajor = Number(/^v(\d+)/.exec(readBuildInfo(folder).node)?.[1])
      expect(renamedEnv).to.deep.equal(nodeMajor >= 26 ? ['NODE_ICU_DATA=>FNRW_ICU_DATA'] : ['NODE_OPTIONS=>FNRW_OPTIONS', 'NODE_ICU_DATA=>FNRW_ICU_DATA'])
      const run = (env: NodeJS.ProcessEnv) => spawnSync(packagedInterpreter(folder), [path.join(folder, 'wrapper-server-sea'), '--version'], {env, encoding: 'utf8'})
      const ignored = run({NODE_OPTIONS: '--require /nonexistent/tracing.js', NODE_ICU_DATA: '/nonexistent'})
      expect(ignored.status, ignored.stderr).to.equal(0)
      const renamed = run({FNRW_OPTIONS: '--require /nonexistent/tracing.js'})
      // Node 24 and later honour the SEA's execArgvExtension "none": no variable passes node flags.
      if (renamedEnv.includes('NODE_OPTIONS=>FNRW_OPTIONS') && nodeMajor < 24) {
        expect(renamed.status).to.not.equal(0)
        expect(renamed.stderr).to.contain('/nonexistent/tracing.js')
      } else {
        expect(renamed.status, renamed.stderr).to.equal(0)
      }
    })

    it('runs without Node or a PATH: prints its version', () => {
      const r = spawnSync(packagedInterpreter(folder), [path.join(folder, 'wrapper-server-sea'), '--version'], {env: {}, encoding: 'utf8'})
      expect(r.status, r.stderr).to.equal(0)
      expect(r.stdout).to.match(/^fnr wrapper-server \S+ \(node v\d+\.\S+, single executable\)\n$/)
    })
  })

  describe('wire compatibility with the in-process wrapper and proto/', () => {
    const CASES: Array<{fn: ShellFunction; input?: Buffer; deadlineMs?: number}> = [
      {fn: 'cat'},
      {fn: 'stderr'},
      {fn: 'setNamespace', input: resourceList('- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    namespace: old\n')},
      {fn: 'failWithResults'},
      {fn: 'okWithErrorResults'},
      {fn: 'echoAndFail'},
      {fn: 'notResourceList'},
      {fn: 'empty'},
      {fn: 'flood'},
      {fn: 'sleep', deadlineMs: 700},
      {fn: 'cat', input: Buffer.alloc(0)},
      {fn: 'cat', input: Buffer.alloc(2 * 1024 * 1024, 'x')},
    ]
    const procs: WrapperProcess[] = []
    const inProcess: RunningWrapper[] = []
    const clients: EvaluatorClient[] = []

    after(async () => {
      for (const c of clients) c.close()
      await Promise.all(procs.map((p) => p.kill()))
      await Promise.all(inProcess.map((w) => w.stop()))
    })

    for (const c of CASES) {
      it(`answers ${c.fn}${c.input ? ` (${c.input.length}-byte input)` : ''} exactly as the in-process wrapper does`, async () => {
        const max = 1024 * 1024
        const packaged = await startWrapperProcess('packaged', ['--port=0', `--max-request-body-size=${max}`, '--', sh[c.fn]], {folder})
        procs.push(packaged)
        const local = await startWrapperServer({port: 0, host: '127.0.0.1', maxRequestBodySize: max, entrypoint: [sh[c.fn]], gracePeriodMs: 1000}, silentLogger, false)
        inProcess.push(local)
        const a = new EvaluatorClient(packaged.address, {maxMessageSize: 16 * 1024 * 1024})
        const b = new EvaluatorClient(`127.0.0.1:${local.port}`, {maxMessageSize: 16 * 1024 * 1024})
        clients.push(a, b)
        const input = c.input ?? SAMPLE_RL
        const [fromPackaged, fromLocal] = await Promise.all([observe(a, input, c.deadlineMs), observe(b, input, c.deadlineMs)])
        expect(fromPackaged).to.deep.equal(fromLocal)
      })
    }

    it('answers a plain client generated from proto/evaluator.proto with the original field names', async () => {
      const def = protoLoader.loadSync(PROTO_PATH, {keepCase: true, defaults: true})
      const pkg = grpc.loadPackageDefinition(def) as unknown as {evaluator: {FunctionEvaluator: grpc.ServiceClientConstructor}}
      const p = await startWrapperProcess('packaged', ['--port=0', '--', sh.stderr], {folder})
      procs.push(p)
      const raw = new pkg.evaluator.FunctionEvaluator(p.address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
        EvaluateFunction(req: unknown, cb: (err: grpc.ServiceError | null, res?: {resource_list: Buffer; log: Buffer}) => void): void
      }
      try {
        const res = await new Promise<{resource_list: Buffer; log: Buffer}>((resolve, reject) =>
          raw.EvaluateFunction({resource_list: SAMPLE_RL, image: 'gcr.io/kpt-fn/x:v1'}, (err, r) => (err ? reject(err) : resolve(r!))),
        )
        expect(Buffer.from(res.resource_list).equals(SAMPLE_RL)).to.equal(true)
        expect(Buffer.from(res.log).toString()).to.equal('working on it\n')
      } finally {
        raw.close()
      }
    })
  })

  describe('grpc-health-probe (the symlink)', () => {
    const probe = (args: string[]) => spawnSync(packagedInterpreter(folder), [path.join(folder, 'grpc-health-probe'), ...args], {encoding: 'utf8', timeout: 60_000})
    let p: WrapperProcess

    before(async () => {
      p = await startWrapperProcess('packaged', ['--port=0', '--', sh.cat], {folder})
    })
    after(() => p.kill())

    it('exits 0 for a SERVING wrapper (Porch\'s readiness probe command line)', () => {
      const r = probe(['-addr', `localhost:${p.port}`])
      expect(r.status, r.stderr).to.equal(0)
      expect(r.stderr).to.contain('status: SERVING')
      expect(probe(['-addr', `127.0.0.1:${p.port}`, '-service', 'evaluator.FunctionEvaluator']).status).to.equal(0)
    })

    it('exits 2 when nothing listens, 3 for an unknown service, 1 for bad arguments', () => {
      const closed = probe(['-addr', '127.0.0.1:1', '-connect-timeout', '500ms'])
      expect(closed.status, closed.stderr).to.equal(2)
      expect(closed.stderr).to.contain('failed to connect')
      const unknown = probe(['-addr', `127.0.0.1:${p.port}`, '-service', 'no.such.Service'])
      expect(unknown.status, unknown.stderr).to.equal(3)
      expect(probe([]).status).to.equal(1)
      expect(probe(['-addr', 'localhost:1', '-tls']).status).to.equal(1)
    })

    it('exits 4 for a server that is NOT_SERVING', async () => {
      const server = new EvaluatorServer({evaluator: {name: 'none', evaluate: async () => Promise.reject(new Error('no')), close: async () => {}}, maxMessageSize: 1 << 20, host: '127.0.0.1', port: 0})
      const port = await server.start()
      try {
        const r = await new Promise<{status: number | null; stderr: string}>((resolve) => {
          // Asynchronous: this process serves the probe's call.
          const child = spawn(packagedInterpreter(folder), [path.join(folder, 'grpc-health-probe'), '-addr', `localhost:${port}`])
          let err = ''
          child.stderr.on('data', (c: Buffer) => (err += c.toString()))
          child.on('close', (status) => resolve({status, stderr: err}))
        })
        expect(r.status, r.stderr).to.equal(4)
        expect(r.stderr).to.contain('NOT_SERVING')
      } finally {
        server.forceShutdown()
      }
    })
  })
})
