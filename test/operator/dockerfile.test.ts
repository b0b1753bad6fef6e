/**
 * docker/*.Dockerfile without a Docker engine (none runs on these machines): the image layout each
 * Dockerfile describes is assembled from its own COPY instructions and the build context that
 * .dockerignore leaves, the build stage's `npm run build` runs on that context alone, and the
 * runtime stage's ENTRYPOINT and CMD start a real `fnr serve` from the assembled /app and
 * /home/nonroot, which evaluates a shipped function over gRPC.
 *
 * What is not reproduced: the base image, apt-get (tini and libjemalloc2, which npm test installs
 * here), user creation, and the production-only `npm ci --omit=dev` (the repository's node_modules stands in for both npm ci runs; same lockfile).
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {cp, mkdir, readFile, readdir, symlink} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'

import {expect} from 'chai'
import {parse as parseYaml} from 'yaml'

import {EvaluatorClient} from '../../src/lib/grpc/client.js'
import {envOf} from '../support/node/fnr-image.js'
import {TempDirs} from '../support/tmp.js'
import {copies, dockerignore, ignoredBy, parseDockerfile} from '../support/dockerfile.js'
import {REPO_ROOT} from '../support/serve.js'

/** Copies a context path into `to`, leaving out what .dockerignore excludes. */
async function copyFromContext(patterns: string[], source: string, to: string): Promise<void> {
  await cp(path.join(REPO_ROOT, source), to, {
    recursive: true,
    filter: (src) => {
      const rel = path.relative(REPO_ROOT, src)
      return rel === '' || !ignoredBy(patterns, rel)
    },
  })
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

function run(command: string, args: string[], cwd: string): Promise<{code: number | null; output: string}> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {cwd, stdio: ['ignore', 'pipe', 'pipe']})
    let output = ''
    child.stdout.on('data', (d: Buffer) => (output += d.toString()))
    child.stderr.on('data', (d: Buffer) => (output += d.toString()))
    child.on('close', (code) => resolve({code, output}))
  })
}

describe('docker/ Dockerfiles (assembled without an engine)', function () {
  this.timeout(300_000)
  const temp = new TempDirs()
  let patterns: string[]
  const children: ChildProcess[] = []

  before(async () => {
    patterns = await dockerignore()
  })

  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
    await temp.cleanup()
  })

  it('fnr.Dockerfile: the build stage builds from the context alone, and the runtime stage\'s ENTRYPOINT + CMD serve a shipped function', async () => {
    const stages = parseDockerfile(await readFile(path.join(REPO_ROOT, 'docker', 'fnr.Dockerfile'), 'utf8'))
    const [build, runtime] = [stages.find((s) => s.name === 'build')!, stages.at(-1)!]
    const root = await temp.make('fnr-docker-')
    const inRoot = (p: string): string => path.join(root, p)

    // Build stage: WORKDIR, context COPYs, then its RUN (npm ci is the repository's node_modules).
    const workdir = build.instructions.find((i) => i.op === 'WORKDIR')!.args
    const src = inRoot(workdir)
    await mkdir(src, {recursive: true})
    for (const c of copies(build)) {
      for (const source of c.sources) {
        const dest = c.dest.endsWith('/') || c.sources.length > 1 ? path.join(src, c.dest, path.basename(source)) : path.join(src, c.dest)
        await copyFromContext(patterns, source, dest)
      }
    }
    const runs = build.instructions.filter((i) => i.op === 'RUN').map((i) => i.args)
    expect(runs.join('\n')).to.contain('npm ci').and.to.contain('npm run build')
    await symlink(path.join(REPO_ROOT, 'node_modules'), path.join(src, 'node_modules'))
    const built = await run('npm', ['run', 'build'], src)
    expect(built.code, built.output).to.equal(0)

    // Runtime stage: COPY --from=build into the root, WORKDIR, the node_modules link it makes.
    for (const c of copies(runtime)) {
      expect(c.from, `runtime COPY ${c.sources.join(' ')}`).to.equal('build')
      for (const source of c.sources) {
        const dest = c.dest.endsWith('/') || c.sources.length > 1 ? path.join(c.dest, path.basename(source)) : c.dest
        const target = path.isAbsolute(dest) ? inRoot(dest) : inRoot(path.join('/app', dest))
        await mkdir(path.dirname(target), {recursive: true})
        await cp(inRoot(source), target, {recursive: true, verbatimSymlinks: true})
      }
    }
    const link = runtime.instructions.find((i) => i.op === 'RUN' && i.args.includes('ln -s'))!.args
    const [, linkTarget, linkName] = /ln -s (\S+) (\S+)/.exec(link)!
    await symlink(inRoot(linkTarget!), inRoot(linkName!))
    await readdir(inRoot('/app/dist/commands'))
    await readFile(inRoot('/app/oclif.manifest.json'))
    // the FunctionConfig CRD, whose schema fnr validates FunctionConfigs against
    await readFile(inRoot('/app/manifests/function-config/crds/functionconfigs.yaml'))
    await readdir(inRoot('/home/nonroot/functions')).then((names) => expect(names).to.include('set-namespace').and.not.include('testdata'))

    const entrypoint = JSON.parse(runtime.instructions.find((i) => i.op === 'ENTRYPOINT')!.args) as string[]
    const cmd = JSON.parse(runtime.instructions.find((i) => i.op === 'CMD')!.args) as string[]
    expect(entrypoint.slice(0, 3)).to.deep.equal(['/usr/bin/tini', '--', 'node'])
    const rebase = (arg: string): string => arg.replace(/(^|=)(\/(?:app|home\/nonroot)\b[^,]*)/, (_, pre: string, p: string) => `${pre}${inRoot(p)}`)
    const argv = [...entrypoint.slice(3), ...cmd].map(rebase)
    const port = await freePort()
    // The Deployment's args add the pod runtime; without a cluster here, only exec runs.
    // The stage's ENV as written (NODE_ENV, the preloaded allocator).
    const stageEnv = Object.fromEntries(runtime.instructions.filter((i) => i.op === 'ENV').flatMap((i) => envOf(i.args)))
    expect(stageEnv).to.include({NODE_ENV: 'production', LD_PRELOAD: 'libjemalloc.so.2'})
    const child = spawn(process.execPath, [...argv, `--port=${port}`, '--disable-runtimes=pod'], {
      cwd: inRoot(runtime.instructions.filter((i) => i.op === 'WORKDIR').at(-1)!.args),
      env: {PATH: process.env.PATH, ...stageEnv, FNR_BIND_ADDRESS: '127.0.0.1'},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    children.push(child)
    let log = ''
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()))

    const config = parseYaml(await readFile(inRoot('/home/nonroot/config.yaml'), 'utf8')) as {functions: Array<{function: string; images: string[]}>}
    const image = config.functions.find((f) => f.function === 'set-namespace')!.images[0]!
    const input = Buffer.from('apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cfg\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fn\n  data:\n    namespace: from-the-image\n')
    const client = new EvaluatorClient(`127.0.0.1:${port}`)
    try {
      const started = Date.now()
      for (;;) {
        try {
          const res = await client.evaluateRaw(image, input, {deadline: Date.now() + 30_000})
          expect(res.resourceList.toString()).to.contain('namespace: from-the-image')
          break
        } catch (err) {
          if (child.exitCode !== null || Date.now() - started > 60_000) throw new Error(`fnr serve from the assembled image: ${(err as Error).message}\n${log}`)
          await new Promise((r) => setTimeout(r, 200))
        }
      }
      // the loader found the allocator by the bare name the stage gives
      expect(await readFile(`/proc/${child.pid}/maps`, 'latin1'), 'jemalloc loaded into fnr serve').to.contain('/libjemalloc.so.2')
    } finally {
      client.close()
      child.kill('SIGTERM')
      await new Promise((r) => child.once('close', r))
    }
    expect(child.exitCode, log).to.equal(0)
  })
})
