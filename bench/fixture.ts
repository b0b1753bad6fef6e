/**
 * What the serve benchmarks share: a functions folder with an exec config, a `fnr serve` process
 * (exec runtime) on 127.0.0.1 and a free port, a client, and ResourceLists of a given size.
 */
import {spawn} from 'node:child_process'
import {copyFile, cp, mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {minimalEnvironment} from '../src/lib/process/run.js'
import {imageAllocatorEnv} from '../test/support/node/fnr-image.js'
import {BIN_RUN, ROOT, benchEnv} from './lib.js'

export interface ServeHandle {
  pid: number
  port: number
  stop(): Promise<void>
}

/**
 * Starts `fnr serve` with the given extra flags and resolves once it logs that it is ready, with
 * the image's allocator (docker/fnr.Dockerfile; `allocator` replaces it, {} for glibc's own), as
 * it runs in a cluster. FNR_BENCH_SERVE_NODE_ARGS adds Node options, e.g. "--cpu-prof
 * --cpu-prof-dir=/tmp/prof" to profile the server (the profile is written when it stops).
 * `binRun`: another checkout's bin/run.js (a before/after comparison).
 */
export async function startServe(args: string[], binRun = BIN_RUN, allocator?: Record<string, string>): Promise<ServeHandle> {
  const nodeArgs = process.env.FNR_BENCH_SERVE_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? []
  const child = spawn(process.execPath, [...nodeArgs, binRun, 'serve', '--port=0', '--log-level=1', ...args], {
    env: benchEnv({FNR_BIND_ADDRESS: '127.0.0.1', ...(allocator ?? (await imageAllocatorEnv()))}),
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  // If the benchmark dies half way, its servers go with it.
  const killOnExit = (): void => {
    child.kill('SIGKILL')
  }
  process.once('exit', killOnExit)
  child.once('exit', () => process.removeListener('exit', killOnExit))
  let err = ''
  let ready = false
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (c: Buffer) => {
      if (ready) return
      err += c.toString()
      const m = /"port":(\d+).*fnr serve is ready/.exec(err)
      if (m) {
        ready = true
        resolve(Number(m[1]))
      }
    })
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)))
  })
  return {
    pid: child.pid!,
    port,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      await exited
    },
  }
}

/** One ConfigMap per resource; `padTo` pads each resource to about that many bytes. */
export function makeResourceList(items: number, padTo = 0): Buffer {
  const parts = ['apiVersion: config.kubernetes.io/v1', 'kind: ResourceList', 'items:']
  for (let i = 0; i < items; i++) {
    const base = `- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-${i}\n    namespace: default\n  data:\n    key: value-${i}`
    const pad = padTo - base.length - 15
    parts.push(pad > 0 ? `${base}\n    padding: ${'x'.repeat(pad)}` : base)
  }
  parts.push('functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data:\n    namespace: bench')
  return Buffer.from(`${parts.join('\n')}\n`)
}

export interface FunctionUnderTest {
  name: string
  /** File to copy into the functions dir (a sibling "lib" folder is copied along, for Node functions). */
  source: string
}

export interface ServeFixture {
  serve: ServeHandle
  client: EvaluatorClient
  fnDir: string
  /** The environment and cwd the exec runtime gives a function (for direct spawns of the same binary). */
  spawnOptions: {cwd: string; env: NodeJS.ProcessEnv}
  image(name: string): string
  binary(name: string): string
  close(): Promise<void>
}

/**
 * A functions folder and config for the given functions, and `fnr serve` on it (exec runtime only
 * unless extraArgs set --disable-runtimes; `allocator`: as startServe's).
 */
export async function startExecServe(functions: FunctionUnderTest[], extraArgs: string[] = [], allocator?: Record<string, string>): Promise<ServeFixture> {
  // Inside the repository, so Node functions resolve their npm imports.
  await mkdir(path.join(ROOT, 'build'), {recursive: true})
  const dir = await mkdtemp(path.join(ROOT, 'build', 'bench-'))
  try {
    const fnDir = path.join(dir, 'functions')
    await mkdir(fnDir)
    const entries: string[] = []
    for (const fn of functions) {
      await copyFile(fn.source, path.join(fnDir, fn.name))
      if (fn.source.startsWith(path.join(ROOT, 'functions'))) {
        await cp(path.join(ROOT, 'functions', 'lib'), path.join(fnDir, 'lib'), {recursive: true})
        await copyFile(path.join(ROOT, 'functions', 'package.json'), path.join(fnDir, 'package.json'))
      }
      entries.push(`- function: ${fn.name}\n  images: [bench.local/${fn.name}:v1]`)
    }
    await writeFile(path.join(dir, 'config.yaml'), `functions:\n${entries.join('\n')}\n`)
    // Exec only, unless the caller chooses the runtimes.
    const runtimes = extraArgs.some((a) => a.startsWith('--disable-runtimes')) ? [] : ['--disable-runtimes=pod']
    const serve = await startServe([`--config=${path.join(dir, 'config.yaml')}`, `--functions=${fnDir}`, ...runtimes, ...extraArgs], BIN_RUN, allocator)
    const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
    return {
      serve,
      client,
      fnDir,
      spawnOptions: {cwd: fnDir, env: minimalEnvironment()},
      image: (name) => `bench.local/${name}:v1`,
      binary: (name) => path.join(fnDir, name),
      close: async () => {
        client.close()
        await serve.stop()
        await rm(dir, {recursive: true, force: true})
      },
    }
  } catch (err) {
    await rm(dir, {recursive: true, force: true})
    throw err
  }
}
