/**
 * Wrapper-server benchmarks (docs/wrapper-server.md):
 *   W1  round trip of a trivial function (/bin/cat) through the wrapper versus spawning it
 *       directly with the same stdin, interleaved in one run: the packaged single executable
 *       and `fnr wrapper-server` (oclif, dist/). Target: ≤ 2 ms added at p50.
 *   W2  startup of the packaged wrapper to its first SERVING health answer: on the host (run
 *       through its own interpreter) and, when runc works here, in a container as a pod runs it;
 *       with `fnr wrapper-server` as the baseline.
 *   W3  idle RSS of the packaged wrapper.
 *
 * Standalone: `node --import tsx bench/wrapper.ts` (FNR_BENCH_ITERATIONS, default 200) prints a
 * table and writes bench/results/wrapper.json. bench/run.ts can call benchWrapper().
 */
import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import {protoPath as healthProtoPath} from 'grpc-health-check'
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {existsSync, readdirSync} from 'node:fs'
import {mkdir, mkdtemp, readFile, rm, writeFile, copyFile, chmod} from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {EvaluatorClient} from '../src/lib/grpc/client.js'
import {BIN_RUN, ROOT, percentile, printTable, round, rssMiB, saveResults, timedSpawn, type Row} from './lib.js'
import {makeResourceList} from './serve-exec.js'

const PACKAGE_SCRIPT = path.join(ROOT, 'scripts', 'package-wrapper.mjs')
const PACKAGED = path.join(ROOT, 'build', 'wrapper-server')
const READY = /"port":(\d+).*"msg":"wrapper server is ready"/

type Variant = 'packaged' | 'cli'

function interpreter(folder: string): string {
  return path.join(folder, 'lib', readdirSync(path.join(folder, 'lib')).find((f) => f.startsWith('ld-linux'))!)
}

function commandFor(variant: Variant, args: string[]): [string, string[]] {
  return variant === 'packaged' ? [interpreter(PACKAGED), [path.join(PACKAGED, 'wrapper-server-sea'), ...args]] : [process.execPath, [BIN_RUN, 'wrapper-server', ...args]]
}

interface Started {
  child: ChildProcess
  port: number
  stop(): Promise<void>
}

async function startWrapper(variant: Variant, entrypoint: string[]): Promise<Started> {
  const [cmd, argv] = commandFor(variant, ['--port=0', '--log-level=1', '--', ...entrypoint])
  const child = spawn(cmd, argv, {env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1'}, stdio: ['ignore', 'ignore', 'pipe']})
  let err = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString()
      const m = READY.exec(err)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', (code) => reject(new Error(`${variant} wrapper exited ${code}: ${err}`)))
  })
  return {
    child,
    port,
    stop: async () => {
      if (child.exitCode !== null) return
      child.kill('SIGTERM')
      await new Promise((r) => child.once('exit', r))
    },
  }
}

/** A free port on 127.0.0.1 (for startup measurements, where the port must be known up front). */
export async function freePort(): Promise<number> {
  const srv = net.createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as net.AddressInfo).port
  await new Promise((r) => srv.close(r))
  return port
}

type HealthClient = grpc.Client & {check(req: {service: string}, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: {status: string}) => void): void}
let HealthCtor: (new (address: string, creds: grpc.ChannelCredentials, options: grpc.ChannelOptions) => HealthClient) | undefined

function healthCtor() {
  if (!HealthCtor) {
    const def = protoLoader.loadSync(healthProtoPath, {keepCase: true, enums: String, defaults: true})
    const pkg = grpc.loadPackageDefinition(def) as unknown as {grpc: {health: {v1: {Health: typeof HealthCtor}}}}
    HealthCtor = pkg.grpc.health.v1.Health
  }
  return HealthCtor!
}

/** Resolves when 127.0.0.1:port answers a health Check with SERVING (polling: TCP first, then a fresh channel per try). */
export async function waitServing(port: number, deadline: number): Promise<void> {
  for (;;) {
    if (Date.now() > deadline) throw new Error(`port ${port} did not become SERVING`)
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), resolve(true)))
      s.once('error', () => resolve(false))
    })
    if (!open) {
      await new Promise((r) => setTimeout(r, 1))
      continue
    }
    const Ctor = healthCtor()
    const client = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {'grpc.use_local_subchannel_pool': 1})
    const status = await new Promise<string | undefined>((resolve) =>
      client.check({service: ''}, {deadline: Date.now() + 2000}, (err, res) => resolve(err ? undefined : res?.status)),
    )
    client.close()
    if (status === 'SERVING') return
  }
}

async function startupMs(command: string, args: string[], port: number, cleanup: (child: ChildProcess) => Promise<void>): Promise<number> {
  const t0 = performance.now()
  const child = spawn(command, args, {env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1'}, stdio: ['ignore', 'ignore', 'ignore']})
  try {
    await waitServing(port, Date.now() + 60_000)
    return performance.now() - t0
  } finally {
    await cleanup(child)
  }
}

export async function killAndWait(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGKILL')
  await exited
}

function runcUsable(): string | undefined {
  if (process.getuid?.() !== 0) return undefined
  const runc = ['/usr/sbin/runc', '/usr/bin/runc'].find((p) => existsSync(p))
  const busybox = ['/bin/busybox', '/usr/bin/busybox'].find((p) => existsSync(p))
  return runc && busybox ? runc : undefined
}

/**
 * Startup in a runc container whose rootfs holds only a static busybox (as runc.test.ts). `entry`:
 * the launcher Porch's templates run (wrapper-server, PID 1 reaping zombies), or the executable
 * itself as PID 1 (wrapper-server-sea: the launcher's cost is the difference).
 */
async function containerStartups(runc: string, runs: number, entry = '/wrapper-server-tools/wrapper-server'): Promise<number[]> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-bench-runc-'))
  const state = path.join(dir, 'state')
  const times: number[] = []
  try {
    await mkdir(path.join(dir, 'bundle', 'rootfs'), {recursive: true})
    await copyFile(['/bin/busybox', '/usr/bin/busybox'].find((p) => existsSync(p))!, path.join(dir, 'bundle', 'rootfs', 'busybox'))
    await chmod(path.join(dir, 'bundle', 'rootfs', 'busybox'), 0o755)
    const spec = spawnSync(runc, ['spec', '--bundle', path.join(dir, 'bundle')])
    if (spec.status !== 0) return []
    const configFile = path.join(dir, 'bundle', 'config.json')
    const base = JSON.parse(await readFile(configFile, 'utf8'))
    for (let i = 0; i < runs; i++) {
      const port = await freePort()
      const config = structuredClone(base)
      config.process.terminal = false
      config.process.args = [entry, `--port=${port}`, '--log-level=1', '--', '/busybox', 'cat']
      config.process.env = ['FNR_BIND_ADDRESS=127.0.0.1']
      config.linux.namespaces = config.linux.namespaces.filter((n: {type: string}) => n.type !== 'network')
      config.mounts.push({destination: '/wrapper-server-tools', type: 'bind', source: PACKAGED, options: ['rbind', 'ro']})
      await writeFile(configFile, JSON.stringify(config))
      const id = `fnr-bench-${process.pid}-${i}`
      try {
        times.push(
          await startupMs(runc, ['--root', state, 'run', '--bundle', path.join(dir, 'bundle'), id], port, async (child) => {
            spawnSync(runc, ['--root', state, 'kill', id, 'KILL'])
            await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)))
          }),
        )
      } finally {
        spawnSync(runc, ['--root', state, 'delete', '--force', id])
      }
    }
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
  return times
}

export async function benchWrapper(iterations: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const built = spawnSync(process.execPath, [PACKAGE_SCRIPT, '--quiet'], {cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit']})
  if (built.status !== 0) throw new Error('scripts/package-wrapper.mjs failed')
  const info = JSON.parse(await readFile(path.join(PACKAGED, 'build-info.json'), 'utf8')) as {totalBytes: number}
  const rows: Row[] = []
  const raw: Record<string, unknown> = {folderBytes: info.totalBytes}
  const input = makeResourceList(3)

  // W1: round trip.
  const packaged = await startWrapper('packaged', ['/bin/cat'])
  const cli = await startWrapper('cli', ['/bin/cat'])
  const clients = {packaged: new EvaluatorClient(`127.0.0.1:${packaged.port}`), cli: new EvaluatorClient(`127.0.0.1:${cli.port}`)}
  try {
    const samples = {packaged: [] as number[], cli: [] as number[], direct: [] as number[]}
    for (let i = 0; i < 20; i++) {
      await clients.packaged.evaluateRaw('bench/cat', input)
      await clients.cli.evaluateRaw('bench/cat', input)
      await timedSpawn('/bin/cat', [], input)
    }
    for (let i = 0; i < iterations; i++) {
      for (const v of ['packaged', 'cli'] as const) {
        const t0 = performance.now()
        await clients[v].evaluateRaw('bench/cat', input)
        samples[v].push(performance.now() - t0)
      }
      samples.direct.push(await timedSpawn('/bin/cat', [], input))
    }
    const base = round(percentile(samples.direct, 50))
    for (const v of ['packaged', 'cli'] as const) {
      const p50 = round(percentile(samples[v], 50))
      const added = round(p50 - base)
      rows.push({
        case: `W1 wrapper round trip, ${v === 'packaged' ? 'packaged executable' : 'fnr wrapper-server'} (/bin/cat) vs direct spawn`,
        p50,
        p95: round(percentile(samples[v], 95)),
        baselineP50: base,
        baselineP95: round(percentile(samples.direct, 95)),
        added,
        unit: 'ms',
        target: '≤ 2 ms added at p50',
        met: added <= 2,
      })
    }
    raw.roundTrip = samples
    // W3: idle RSS after the round trips.
    await new Promise((r) => setTimeout(r, 500))
    const rss = await rssMiB(packaged.child.pid!)
    rows.push({case: 'W3 RSS of the packaged wrapper after the round trips', p50: rss, p95: rss, unit: 'MiB'})
  } finally {
    clients.packaged.close()
    clients.cli.close()
    await packaged.stop()
    await cli.stop()
  }

  // W2: startup to SERVING.
  const runs = Math.max(5, Math.min(20, Math.round(iterations / 10)))
  const startups: Record<string, number[]> = {packaged: [], cli: []}
  for (let i = 0; i < runs; i++) {
    for (const v of ['packaged', 'cli'] as const) {
      const port = await freePort()
      const [cmd, argv] = commandFor(v, [`--port=${port}`, '--log-level=1', '--', '/bin/cat'])
      startups[v]!.push(await startupMs(cmd, argv, port, killAndWait))
    }
  }
  const runc = runcUsable()
  if (runc) startups.container = await containerStartups(runc, runs)
  if (runc) startups.containerDirect = await containerStartups(runc, runs, '/wrapper-server-tools/wrapper-server-sea')
  const cliP50 = round(percentile(startups.cli!, 50))
  for (const [v, label] of [
    ['packaged', 'packaged executable on the host'],
    ['container', 'packaged executable in a runc container (incl. container creation)'],
    ['containerDirect', 'the same without the launcher (the executable as PID 1)'],
    ['cli', 'fnr wrapper-server (node + oclif)'],
  ] as const) {
    const times = startups[v]
    if (!times || times.length === 0) continue
    const p50 = round(percentile(times, 50), 1)
    rows.push({
      case: `W2 startup to first SERVING, ${label}`,
      p50,
      p95: round(percentile(times, 95), 1),
      ...(v !== 'cli' ? {baselineP50: cliP50, ratio: round(p50 / cliP50)} : {}),
      unit: 'ms',
    })
  }
  raw.startup = startups
  return {rows, raw}
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const iterations = Number(process.env.FNR_BENCH_ITERATIONS ?? 200)
  const {rows, raw} = await benchWrapper(iterations)
  process.stdout.write(`\n${printTable(rows)}\n\n`)
  const file = await saveResults('wrapper', {date: new Date().toISOString(), node: process.version, iterations, folderMiB: round((raw.folderBytes as number) / 1024 / 1024, 1), rows})
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}
