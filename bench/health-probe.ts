/**
 * H: how long an exec health probe takes, fnr's grpc-health-probe against grpc-ecosystem's (the
 * one Porch's wrapper-server image ships; test/peers/grpc-health-probe), side by side in one run.
 * Porch's pod templates probe function pods' readiness and liveness with
 * `/wrapper-server-tools/grpc-health-probe -addr localhost:9446`, and its Deployment probes the
 * runner with `/home/nonroot/grpc-health-probe -addr localhost:9445`, as exec probes with
 * Kubernetes' default timeout of 1 s; three liveness probes in a row that miss it restart the
 * function container. So a probe's wall time from exec to exit is what counts.
 *
 * One packaged wrapper-server (build/wrapper-server, `npm run package:wrapper`) serves; the probes
 * run one at a time, arms rotating, `rounds` times each, first on a quiet machine, then with
 * FNR_BENCH_COMPETITOR busy processes beside them (4 by default, 0 skips that phase).
 *
 *   node --import tsx bench/health-probe.ts     (FNR_BENCH_H_ROUNDS=30 by default)
 *   FNR_BENCH_BEFORE_FOLDER=<a packaged wrapper folder of another build> adds its probe as an arm.
 */
import {execFile, spawn} from 'node:child_process'
import {readdirSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {buildHealthProbe} from '../scripts/catalog-peers.mjs'
import {ROOT, benchEnv, loadAverage, percentile, printTable, round, saveResults, sleep, type Row} from './lib.js'
import {startCompetitors} from './porch-runner.js'
import {freePort, waitServing} from './wrapper.js'

const ENV = benchEnv()

/** argv that runs the grpc-health-probe of the packaged folder FOLDER (through its own interpreter). */
function folderProbe(folder: string): [string, string[]] {
  const ld = readdirSync(path.join(folder, 'lib')).find((f) => f.startsWith('ld-linux'))
  if (!ld) throw new Error(`no ld-linux in ${folder}/lib`)
  return [path.join(folder, 'lib', ld), ['--library-path', path.join(folder, 'lib'), path.join(folder, 'grpc-health-probe')]]
}

function timedProbe([file, args]: [string, string[]], addr: string): Promise<{ms: number; code: number}> {
  const t0 = performance.now()
  return new Promise((resolve, reject) => {
    execFile(file, [...args, '-addr', addr], {env: ENV}, (error) => {
      const ms = performance.now() - t0
      const code = error ? Number((error as {code?: number}).code ?? -1) : 0
      if (code !== 0) reject(new Error(`${file} ${args.join(' ')} exited ${code}: ${String(error)}`))
      else resolve({ms, code})
    })
  })
}

export async function benchHealthProbe(rounds: number, competitors: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const folder = path.join(ROOT, 'build', 'wrapper-server')
  const arms: Record<string, [string, string[]]> = {
    'grpc-ecosystem (Go)': [buildHealthProbe(), []],
    'fnr, wrapper folder': folderProbe(folder),
    'fnr, runner image': [process.execPath, [path.join(ROOT, 'dist', 'bin', 'grpc-health-probe.js')]],
  }
  const before = process.env.FNR_BENCH_BEFORE_FOLDER
  if (before) arms[`fnr before, wrapper folder (${path.basename(before)})`] = folderProbe(before)
  const port = await freePort()
  const [ld, ldArgs] = folderProbe(folder)
  const server = spawn(ld, [...ldArgs.slice(0, 2), path.join(folder, 'wrapper-server-sea'), `--port=${port}`, '--', 'cat'], {env: ENV, stdio: 'ignore'})
  const addr = `localhost:${port}`
  const rows: Row[] = []
  const raw: Record<string, Record<string, number[]>> = {}
  try {
    await waitServing(port, Date.now() + 30_000)
    for (const phase of competitors > 0 ? ['quiet', 'loaded'] : ['quiet']) {
      const competitor = phase === 'loaded' ? startCompetitors(competitors) : undefined
      const load = loadAverage()
      try {
        if (competitor) await sleep(3000)
        const samples: Record<string, number[]> = Object.fromEntries(Object.keys(arms).map((a) => [a, []]))
        for (const arm of Object.keys(arms)) await timedProbe(arms[arm]!, addr) // warm the page cache
        for (let r = 0; r < rounds; r++) {
          const names = Object.keys(arms)
          for (let i = 0; i < names.length; i++) {
            const arm = names[(i + r) % names.length]!
            samples[arm]!.push((await timedProbe(arms[arm]!, addr)).ms)
          }
        }
        raw[phase] = samples
        const go = samples['grpc-ecosystem (Go)']!
        for (const [arm, values] of Object.entries(samples)) {
          const over = values.filter((v) => v >= 1000).length
          rows.push({
            case: `H probe exec → exit, ${arm}, ${phase === 'quiet' ? 'quiet' : `${competitors} busy processes`}`,
            p50: round(percentile(values, 50), 1),
            p95: round(percentile(values, 95), 1),
            baselineP50: round(percentile(go, 50), 1),
            baselineP95: round(percentile(go, 95), 1),
            ratio: round(percentile(values, 50) / percentile(go, 50)),
            unit: 'ms',
            note: `max ${round(Math.max(...values), 1)} ms; ${over} of ${values.length} at or over Kubernetes' 1 s probe timeout; load at start ${load}`,
          })
        }
      } finally {
        competitor?.stop()
      }
    }
  } finally {
    server.kill('SIGKILL')
  }
  return {rows, raw: {samples: raw, node: process.version, competitors}}
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const rounds = Number(process.env.FNR_BENCH_H_ROUNDS ?? 30)
  const competitors = Number(process.env.FNR_BENCH_COMPETITOR ?? 4)
  const loadBefore = loadAverage()
  const {rows, raw} = await benchHealthProbe(rounds, competitors)
  const loadAfter = loadAverage()
  process.stdout.write(`${printTable(rows)}\n\nload average (1/5/15 min) before: ${loadBefore}, after: ${loadAfter}; ${rounds} rounds, ${process.version}\n`)
  const file = await saveResults('health-probe', {date: new Date().toISOString(), rounds, loadBefore, loadAfter, rows, raw})
  process.stdout.write(`results: ${path.relative(ROOT, file)}\n`)
}
