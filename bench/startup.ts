/**
 * S: start → SERVING, `fnr serve` against Porch's runner (v1.5.8 func/server, built by
 * scripts/catalog-peers.mjs), side by side in one run (docs/performance.md, "Start → SERVING").
 *
 * Both runners get the same command line (exec runtime only, one config.yaml mapping an image to
 * /bin/cat, the same functions folder, a port found free just before, --log-level=1) and the same
 * environment; they are started alternately, `rounds` times each, each one stopped (SIGTERM, then
 * waited for) before the next starts. A sample is the wall time from spawn() to the first SERVING
 * answer of grpc.health.v1 Check on that port (bench/wrapper.ts waitServing: a TCP connect is
 * tried every millisecond, then a Check). `fnr serve` runs as a user starts it: bin/run.js run as
 * a program, as a shell's `fnr serve` or a pod whose command is `fnr serve` runs it (its first
 * lines start the Node this bench runs on, found first on PATH, with --expose-gc
 * --disable-sigusr1). One untimed start of each first, so Node's compile cache is warm, as on a
 * machine that ran fnr before.
 *
 *   node --import tsx bench/startup.ts        (FNR_BENCH_S_ROUNDS=20 by default)
 *   FNR_BENCH_S_FNR_ARGS="--foo" adds arguments to fnr's side only (none by default).
 *   FNR_BENCH_BEFORE_ROOT=<a built checkout> adds an arm: that checkout's bin/run.js, run as a
 *   program the same way.
 *   FNR_BENCH_S_BREAKDOWN=1 adds four: `node bin/run.js serve` (no server flags on Node's
 *   command line: bin/run.js re-runs the process with them), `node --expose-gc --disable-sigusr1
 *   bin/run.js serve` (the images' way: no shell, no re-run), fnr with FNR_SPAWNER=off (no
 *   spawner process) and fnr with FNR_NO_BUNDLE=1 (the plain modules instead of the serve bundle).
 *   FNR_BENCH_COMPETITOR=N runs N busy processes beside the whole bench (porch-runner.ts
 *   besideCompetitors); the results then go to startup-competitor.json (or startup-x-competitor).
 */
import {spawn} from 'node:child_process'
import {copyFile, mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {buildPorchRunner} from '../scripts/catalog-peers.mjs'
import {besideCompetitors} from './porch-runner.js'
import {ROOT, benchEnv, loadAverage, percentile, printTable, round, saveResults, type Row} from './lib.js'
import {freePort, waitServing} from './wrapper.js'

// PATH starts with this Node's folder: bin/run.js run as a program starts `node` from PATH.
const ENV = benchEnv({OTEL_METRICS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none', PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`})

async function toServing(command: string, args: string[], env: NodeJS.ProcessEnv = ENV): Promise<number> {
  const port = await freePort()
  const t0 = performance.now()
  const child = spawn(command, [...args, `--port=${port}`], {env, stdio: ['ignore', 'ignore', 'ignore']})
  const exited = new Promise((r) => child.once('exit', r))
  const killOnExit = (): void => {
    child.kill('SIGKILL')
  }
  process.once('exit', killOnExit)
  try {
    await Promise.race([waitServing(port, Date.now() + 60_000), exited.then(() => Promise.reject(new Error(`${command} exited before SERVING`)))])
    return performance.now() - t0
  } finally {
    process.removeListener('exit', killOnExit)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
  }
}

export async function benchStartup(rounds: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const {server} = buildPorchRunner()
  await mkdir(path.join(ROOT, 'build'), {recursive: true})
  const dir = await mkdtemp(path.join(ROOT, 'build', 'bench-startup-'))
  try {
    const fnDir = path.join(dir, 'functions')
    await mkdir(fnDir)
    await copyFile('/bin/cat', path.join(fnDir, 'cat'))
    const config = path.join(dir, 'config.yaml')
    await writeFile(config, 'functions:\n- function: cat\n  images: [bench.local/cat:v1]\n')
    const common = ['--disable-runtimes=pod', `--config=${config}`, `--functions=${fnDir}`, '--log-level=1']
    const before = process.env.FNR_BENCH_BEFORE_ROOT
    const breakdown = Boolean(process.env.FNR_BENCH_S_BREAKDOWN)
    const extra = process.env.FNR_BENCH_S_FNR_ARGS?.split(/\s+/).filter(Boolean) ?? []
    const runJs = path.join(ROOT, 'bin', 'run.js')
    const arms = {
      porch: () => toServing(server, common),
      fnr: () => toServing(runJs, ['serve', ...common, ...extra]),
      ...(before ? {before: () => toServing(path.join(before, 'bin', 'run.js'), ['serve', ...common])} : {}),
      ...(breakdown
        ? {
            // Node started on bin/run.js without the server flags: bin/run.js re-runs the process with them.
            'fnr, node bin/run.js (re-run)': () => toServing(process.execPath, [runJs, 'serve', ...common, ...extra]),
            // The server flags on Node's command line, as the images pass them: no shell, no re-run.
            'fnr, node --expose-gc --disable-sigusr1': () => toServing(process.execPath, ['--expose-gc', '--disable-sigusr1', runJs, 'serve', ...common, ...extra]),
            // Functions forked by the server itself: no spawner process started beside it.
            'fnr, FNR_SPAWNER=off': () => toServing(runJs, ['serve', ...common, ...extra], {...ENV, FNR_SPAWNER: 'off'}),
            // The plain modules instead of the serve bundle (scripts/bundles.mjs).
            'fnr, FNR_NO_BUNDLE=1': () => toServing(runJs, ['serve', ...common, ...extra], {...ENV, FNR_NO_BUNDLE: '1'}),
          }
        : {}),
    } as Record<string, () => Promise<number>>
    const names = Object.keys(arms)
    const samples: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]))
    for (const start of Object.values(arms)) await start() // warm caches
    for (let i = 0; i < rounds; i++) {
      // Alternate which goes first, so neither always follows the other's shutdown.
      const order = i % 2 === 0 ? names : [...names].reverse()
      for (const name of order) samples[name]!.push(await arms[name]!())
    }
    const p = (name: string, q: number): number => round(percentile(samples[name]!, q), 1)
    const rows: Row[] = [
      {case: "S start → SERVING, Porch's runner v1.5.8", p50: p('porch', 50), p95: p('porch', 90), unit: 'ms', note: 'p95 column holds p90'},
      {
        case: 'S start → SERVING, fnr serve',
        p50: p('fnr', 50),
        p95: p('fnr', 90),
        baselineP50: p('porch', 50),
        baselineP95: p('porch', 90),
        ratio: round(p('fnr', 50) / p('porch', 50)),
        target: '≤ 1.5×',
        met: p('fnr', 50) / p('porch', 50) <= 1.5,
        unit: 'ms',
        note: `p95 column holds p90; p90 ratio ${round(p('fnr', 90) / p('porch', 90))}×`,
      },
    ]
    for (const name of names.filter((n) => n.startsWith('fnr, '))) {
      rows.push({case: `S start → SERVING, ${name}`, p50: p(name, 50), p95: p(name, 90), baselineP50: p('fnr', 50), baselineP95: p('fnr', 90), ratio: round(p(name, 50) / p('fnr', 50)), unit: 'ms', note: 'baseline: fnr serve run as a program; p95 column holds p90'})
    }
    if (before) {
      rows.push({
        case: `S start → SERVING, fnr serve before (${path.basename(before)})`,
        p50: p('before', 50),
        p95: p('before', 90),
        baselineP50: p('porch', 50),
        baselineP95: p('porch', 90),
        ratio: round(p('before', 50) / p('porch', 50)),
        unit: 'ms',
        note: `p95 column holds p90; p90 ratio ${round(p('before', 90) / p('porch', 90))}×`,
      })
    }
    return {rows, raw: {startup: samples, node: process.version, fnrExtraArgs: extra}}
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const rounds = Number(process.env.FNR_BENCH_S_ROUNDS ?? 20)
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 0)
  const loadBefore = loadAverage()
  const {rows, raw} = await besideCompetitors(competitors, () => benchStartup(rounds))
  const loadAfter = loadAverage()
  const beside = competitors > 0 ? `, ${competitors} busy processes beside it` : ''
  process.stdout.write(`${printTable(rows)}\n\nload average (1/5/15 min) before: ${loadBefore}, after: ${loadAfter}; ${rounds} rounds${beside}, ${process.version}\n`)
  const label = process.env.FNR_BENCH_S_LABEL
  const name = `startup${label ? `-${label}` : ''}${competitors > 0 ? '-competitor' : ''}`
  const file = await saveResults(name, {date: new Date().toISOString(), rounds, competitors, loadBefore, loadAfter, rows, raw})
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}
