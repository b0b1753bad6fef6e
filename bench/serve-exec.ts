/**
 * P1: EvaluateFunction latency through `fnr serve` (exec runtime) versus spawning the same binary
 * directly with the same stdin, interleaved in one run. Also the idle RSS of `fnr serve`.
 */
import {spawn} from 'node:child_process'
import {copyFile, cp, mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {BIN_RUN, ROOT, percentile, round, rssMiB, timedSpawn, type Row} from './lib.js'

export interface ServeHandle {
  pid: number
  port: number
  stop(): Promise<void>
}

export async function startServe(args: string[]): Promise<ServeHandle> {
  const child = spawn(process.execPath, [BIN_RUN, 'serve', '--port=0', '--log-level=1', ...args], {
    env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1'},
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let err = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString()
      const m = /"port":(\d+).*fnr serve is ready/.exec(err)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)))
  })
  return {
    pid: child.pid!,
    port,
    stop: async () => {
      child.kill('SIGTERM')
      await new Promise((r) => child.once('exit', r))
    },
  }
}

export function makeResourceList(items: number): Buffer {
  const parts = ['apiVersion: config.kubernetes.io/v1', 'kind: ResourceList', 'items:']
  for (let i = 0; i < items; i++) {
    parts.push(`- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-${i}\n    namespace: default\n  data:\n    key: value-${i}`)
  }
  parts.push('functionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: function-input\n  data:\n    namespace: bench')
  return Buffer.from(`${parts.join('\n')}\n`)
}

export interface FunctionUnderTest {
  name: string
  /** File to copy into the functions dir (a sibling "lib" folder is copied along, for Node functions). */
  source: string
}

export async function benchServeExec(functions: FunctionUnderTest[], iterations: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  // Inside the repository, so Node functions resolve their npm imports.
  await mkdir(path.join(ROOT, 'build'), {recursive: true})
  const dir = await mkdtemp(path.join(ROOT, 'build', 'bench-'))
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
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
    const serve = await startServe([`--config=${path.join(dir, 'config.yaml')}`, `--functions=${fnDir}`, '--disable-runtimes=pod'])
    await new Promise((r) => setTimeout(r, 500))
    const idleRss = await rssMiB(serve.pid)
    rows.push({case: 'P6 idle RSS of fnr serve (exec only)', p50: idleRss, p95: idleRss, unit: 'MiB', target: '≤ 80 MiB', met: idleRss <= 80})
    const client = new EvaluatorClient(`127.0.0.1:${serve.port}`)
    const input = makeResourceList(3)
    for (const fn of functions) {
      const image = `bench.local/${fn.name}:v1`
      const binary = path.join(fnDir, fn.name)
      for (let i = 0; i < 10; i++) {
        await client.evaluateRaw(image, input)
        await timedSpawn(binary, [], input, {cwd: fnDir})
      }
      const viaServe: number[] = []
      const direct: number[] = []
      for (let i = 0; i < iterations; i++) {
        const t0 = performance.now()
        await client.evaluateRaw(image, input)
        viaServe.push(performance.now() - t0)
        direct.push(await timedSpawn(binary, [], input, {cwd: fnDir}))
      }
      const p50 = round(percentile(viaServe, 50))
      const base = round(percentile(direct, 50))
      const added = round(p50 - base)
      rows.push({
        case: `P1 serve exec (${fn.name}) vs direct spawn`,
        p50,
        p95: round(percentile(viaServe, 95)),
        baselineP50: base,
        baselineP95: round(percentile(direct, 95)),
        added,
        unit: 'ms',
        target: '≤ 2 ms added at p50',
        met: added <= 2,
      })
      raw[`p1-${fn.name}`] = {viaServe, direct}
    }
    client.close()
    await serve.stop()
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
  return {rows, raw}
}
