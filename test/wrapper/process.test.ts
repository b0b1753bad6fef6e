/**
 * The wrapper server as a real process, through each front end: the oclif command
 * (`fnr wrapper-server`), the packaged executable's main run unbundled, and the packaged single
 * executable itself. They must take the same command lines and behave the same.
 */
import * as grpc from '@grpc/grpc-js'
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {checkHealth, healthClient} from '../support/health.js'
import {SAMPLE_RL, TempDirs} from '../support/tmp.js'
import {writeShellFunctions, type ShellFunction} from './support/functions.js'
import {copyFolder, packagedFolder, PACKAGE_TIMEOUT_MS} from './support/package.js'
import {runToExit, startWrapperProcess, waitFor, type Frontend, type WrapperProcess} from './support/process.js'

const FRONTENDS: Frontend[] = ['cli', 'entry', 'packaged']

for (const frontend of FRONTENDS) {
  describe(`wrapper-server process (${frontend})`, function () {
    this.timeout(120_000)
    const temp = new TempDirs()
    let sh: Record<ShellFunction, string>
    let folder: string | undefined
    let dir: string
    const procs: WrapperProcess[] = []
    const clients: Array<{close(): void}> = []

    const start = async (args: string[], options: {env?: NodeJS.ProcessEnv; cwd?: string} = {}): Promise<WrapperProcess> => {
      const p = await startWrapperProcess(frontend, args, {...options, folder})
      procs.push(p)
      return p
    }
    const client = (p: WrapperProcess): EvaluatorClient => {
      const c = new EvaluatorClient(p.address)
      clients.push(c)
      return c
    }
    const exit = (args: string[]) => runToExit(frontend, args, {folder})

    before(async function () {
      if (frontend === 'packaged') this.timeout(PACKAGE_TIMEOUT_MS)
      dir = await temp.make('fnr-wrapper-proc-')
      sh = await writeShellFunctions(path.join(dir, 'sh'))
      if (frontend === 'packaged') {
        folder = path.join(dir, 'tools')
        await mkdir(folder)
        copyFolder(await packagedFolder(), folder)
      }
    })

    afterEach(async () => {
      for (const c of clients.splice(0)) c.close()
      await Promise.all(procs.splice(0).map((p) => p.kill()))
    })

    after(() => temp.cleanup())

    it('starts with the args the function runner puts in the pod, serves calls and health', async () => {
      const p = await start(['--port', '0', '--max-request-body-size', '6291456', '--', sh.setNamespace])
      expect(p.stderr()).to.contain(`"entrypoint":[${JSON.stringify(sh.setNamespace)}]`)
      const rl = Buffer.from(SAMPLE_RL.toString().replace('name: cfg', 'name: cfg\n    namespace: old'))
      const res = await client(p).evaluateRaw('example.com/set-namespace:v1', rl)
      expect(res.resourceList.toString()).to.contain('namespace: new')
      const health = healthClient(p.address)
      clients.push(health)
      expect(await checkHealth(health)).to.equal('SERVING')
      expect(await checkHealth(health, 'evaluator.FunctionEvaluator')).to.equal('SERVING')
    })

    it('accepts Go one-dash flags, --verbosity and ignores positional arguments before "--"', async () => {
      const p = await start(['-port=0', 'ignored', '-verbosity', '3', '--', sh.cat])
      expect((await client(p).evaluateRaw('x', SAMPLE_RL)).resourceList.equals(SAMPLE_RL)).to.equal(true)
      // Verbosity 3 logs one line per request.
      await waitFor(() => /"msg":"EvaluateFunction"/.test(p.stderr()), 'the request log line')
    })

    it('gives the function the container\'s environment and working directory', async () => {
      const cwd = await temp.make('fnr-wrapper-cwd-')
      const env = await start(['--port=0', '--', sh.env], {env: {FNR_TEST_FROM_IMAGE_ENV: 'yes it is'}})
      expect((await client(env).evaluateRaw('x', SAMPLE_RL)).resourceList.toString()).to.contain('# FNR_TEST_FROM_IMAGE_ENV=yes it is\n')
      const pwd = await start(['--port=0', '--', sh.pwd], {cwd})
      expect((await client(pwd).evaluateRaw('x', SAMPLE_RL)).resourceList.toString()).to.contain(`# cwd=${cwd}\n`)
    })

    it('reports function failures with the exit code and the fnr-failure-bin trailer', async () => {
      const p = await start(['--port=0', '--', sh.failWithResults])
      const err = (await client(p).evaluateRaw('x', SAMPLE_RL).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError
      expect(err.code).to.equal(grpc.status.INTERNAL)
      expect(err.details).to.contain('exited with code 3')
      expect(err.metadata.get('fnr-failure-bin')).to.have.length(1)
    })

    it('on SIGTERM lets the call in flight finish, refuses new ones and exits 0', async () => {
      const p = await start(['--port=0', '--', sh.markedSlowCat])
      const c = client(p)
      const inFlight = c.evaluateRaw('x', SAMPLE_RL)
      await waitFor(() => existsSync(`${sh.markedSlowCat}.started`), 'the call to be in flight')
      p.child.kill('SIGTERM')
      expect((await inFlight).resourceList.equals(SAMPLE_RL)).to.equal(true)
      const {code} = await p.exited
      expect(code, p.stderr()).to.equal(0)
      expect(p.stderr()).to.match(/"msg":"draining"/)
      expect(p.stderr()).to.match(/"forced":false/)
      const err = (await c.evaluateRaw('x', SAMPLE_RL, {deadline: Date.now() + 2000}).catch((e: grpc.ServiceError) => e)) as grpc.ServiceError
      expect(err.code).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED])
    })

    it('cancels calls still running after --grace-period, killing the function, and still exits 0', async () => {
      const p = await start(['--port=0', '--grace-period=300ms', '--', sh.markedSleep])
      const inFlight = client(p).evaluateRaw('x', SAMPLE_RL).catch((e: grpc.ServiceError) => e)
      await waitFor(() => existsSync(`${sh.markedSleep}.started`), 'the call to be in flight')
      p.child.kill('SIGTERM')
      expect(((await inFlight) as grpc.ServiceError).code).to.be.oneOf([grpc.status.CANCELLED, grpc.status.UNAVAILABLE])
      expect((await p.exited).code).to.equal(0)
      expect(p.stderr()).to.match(/"forced":true/)
    })

    it('refuses to start without an entrypoint: exit 3 and one clear line', () => {
      for (const args of [['--port=0'], ['--port=0', '--']]) {
        const r = exit(args)
        expect(r.code, r.stderr).to.equal(3)
        expect(r.stderr.trim()).to.match(/^fnr: no function entrypoint: pass the function's command after "--"/)
        expect(r.stderr.trim().split('\n')).to.have.length(1)
      }
    })

    it('exits 8 with a clear message when the port is taken', async () => {
      const first = await start(['--port=0', '--', sh.cat])
      const r = exit([`--port=${first.port}`, '--', sh.cat])
      expect(r.code, r.stderr).to.equal(8)
      // grpc-js logs its own "E No address added…" line to stderr first.
      expect(r.stderr).to.match(new RegExp(`^fnr: cannot listen on 127\\.0\\.0\\.1:${first.port}: .*EADDRINUSE`, 'm'))
    })

    it('rejects bad flags with exit 2 and one line', () => {
      for (const args of [['--bogus'], ['--port=70000'], ['--port=x'], ['--max-request-body-size=10'], ['--verbosity=9'], ['--grace-period=30'], ['--port']]) {
        const r = exit([...args, '--', sh.cat])
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2)
        expect(r.stderr.trim()).to.match(/^fnr: /)
        expect(r.stderr.trim().split('\n'), r.stderr).to.have.length(1)
      }
    })

    it('has help that names Porch\'s flags', () => {
      const r = exit(['--help'])
      expect(r.code).to.equal(0)
      for (const flag of ['--port', '--max-request-body-size', '--verbosity', '--grace-period']) expect(r.stdout).to.contain(flag)
    })
  })
}
