/**
 * P2: `fnr eval --exec` wall time versus `kpt fn eval --exec` on the same package and function,
 * interleaved in one run; and CLI startup (`fnr --version`, `fnr --help`, `fnr eval --help`, and
 * `fnr eval` on stdin with a trivial function) next to bare `node`. All processes get benchEnv()
 * (without NODE_EXTRA_CA_CERTS); what that variable costs every Node start here is a row of its own.
 */
import {spawnSync} from 'node:child_process'
import {chmod, cp, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {makeResourceList} from './fixture.js'
import {BIN_RUN, ROOT, benchEnv, percentile, round, type Row} from './lib.js'

const ENV = benchEnv()

function wall(cmd: string, args: string[], options: {input?: Buffer; env?: NodeJS.ProcessEnv} = {}): number {
  const t0 = performance.now()
  const r = spawnSync(cmd, args, {stdio: [options.input ? 'pipe' : 'ignore', 'ignore', 'ignore'], input: options.input, env: options.env ?? ENV})
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}`)
  return performance.now() - t0
}

export async function benchEvalVsKpt(iterations: number): Promise<{rows: Row[]; raw: Record<string, unknown>}> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-bench-eval-'))
  const rows: Row[] = []
  const raw: Record<string, unknown> = {}
  try {
    const catFn = path.join(dir, 'cat.sh')
    await writeFile(catFn, '#!/bin/sh\nexec cat\n')
    await chmod(catFn, 0o755)
    const functions = [
      {name: 'cat.sh', exec: catFn, args: [] as string[]},
      {name: 'set-namespace (node)', exec: path.join(ROOT, 'functions', 'set-namespace'), args: ['namespace=bench']},
    ]
    for (const fn of functions) {
      const fnrPkg = path.join(dir, `fnr-${fn.name.replace(/\W/g, '')}`)
      const kptPkg = path.join(dir, `kpt-${fn.name.replace(/\W/g, '')}`)
      await cp(path.join(ROOT, 'examples', 'hello'), fnrPkg, {recursive: true})
      await cp(path.join(ROOT, 'examples', 'hello'), kptPkg, {recursive: true})
      const fnrArgs = [BIN_RUN, 'eval', '--input', fnrPkg, '-o', fnrPkg, '--exec', fn.exec, '--', ...fn.args]
      const kptArgs = ['fn', 'eval', kptPkg, '--exec', fn.exec, '--', ...fn.args]
      for (let i = 0; i < 3; i++) {
        wall(process.execPath, fnrArgs)
        wall('kpt', kptArgs)
      }
      const fnr: number[] = []
      const kpt: number[] = []
      for (let i = 0; i < iterations; i++) {
        // Alternate which goes first, so neither always runs right after the other.
        if (i % 2 === 0) fnr.push(wall(process.execPath, fnrArgs))
        kpt.push(wall('kpt', kptArgs))
        if (i % 2 === 1) fnr.push(wall(process.execPath, fnrArgs))
      }
      const p50 = round(percentile(fnr, 50), 1)
      const base = round(percentile(kpt, 50), 1)
      const ratio = round(p50 / base)
      rows.push({
        case: `P2 fnr eval --exec (${fn.name}) vs kpt fn eval --exec`,
        p50,
        p95: round(percentile(fnr, 95), 1),
        baselineP50: base,
        baselineP95: round(percentile(kpt, 95), 1),
        ratio,
        unit: 'ms',
        target: '≤ 0.8× kpt',
        met: ratio <= 0.8,
      })
      raw[`p2-${fn.name}`] = {fnr, kpt}
    }
    const startup: Record<string, number[]> = {node: [], version: [], help: [], evalHelp: [], evalStdin: [], nodeCaCerts: []}
    const small = makeResourceList(3)
    const withCaCerts = process.env.NODE_EXTRA_CA_CERTS && !process.env.FNR_BENCH_KEEP_ENV ? process.env : undefined
    for (let i = 0; i < iterations; i++) {
      startup.node!.push(wall(process.execPath, ['-e', '0']))
      startup.version!.push(wall(process.execPath, [BIN_RUN, '--version']))
      startup.help!.push(wall(process.execPath, [BIN_RUN, '--help']))
      startup.evalHelp!.push(wall(process.execPath, [BIN_RUN, 'eval', '--help']))
      startup.evalStdin!.push(wall(process.execPath, [BIN_RUN, 'eval', '-', '--exec', 'cat'], {input: small}))
      if (withCaCerts) startup.nodeCaCerts!.push(wall(process.execPath, ['-e', '0'], {env: withCaCerts}))
    }
    const nodeP50 = round(percentile(startup.node!, 50), 1)
    for (const [key, label] of [
      ['version', 'fnr --version'],
      ['help', 'fnr --help'],
      ['evalHelp', 'fnr eval --help'],
      ['evalStdin', 'fnr eval --exec cat < 3-resource list'],
    ] as const) {
      const p50 = round(percentile(startup[key]!, 50), 1)
      rows.push({case: `startup: ${label} vs node -e 0`, p50, p95: round(percentile(startup[key]!, 95), 1), baselineP50: nodeP50, added: round(p50 - nodeP50, 1), unit: 'ms', target: '≤ 250 ms', met: p50 <= 250})
    }
    if (withCaCerts) {
      const p50 = round(percentile(startup.nodeCaCerts!, 50), 1)
      rows.push({
        case: 'host: node -e 0 with this machine\'s NODE_EXTRA_CA_CERTS vs without',
        p50,
        p95: round(percentile(startup.nodeCaCerts!, 95), 1),
        baselineP50: nodeP50,
        added: round(p50 - nodeP50, 1),
        unit: 'ms',
        note: 'added to every Node process start (fnr, Node functions) where the variable is set; not to kpt; left out of the rows above',
      })
    }
    raw.startup = startup
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
  return {rows, raw}
}
