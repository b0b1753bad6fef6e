/**
 * P2: `fnr eval --exec` wall time versus `kpt fn eval --exec` on the same package and function,
 * interleaved in one run; and CLI startup (`fnr --version`, `fnr --help`) next to bare `node`.
 */
import {spawnSync} from 'node:child_process'
import {chmod, cp, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

import {BIN_RUN, ROOT, percentile, round, type Row} from './lib.js'

function wall(cmd: string, args: string[]): number {
  const t0 = performance.now()
  const r = spawnSync(cmd, args, {stdio: 'ignore'})
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
      const fnrArgs = [BIN_RUN, 'eval', '-i', fnrPkg, '-o', fnrPkg, '--exec', fn.exec, '--', ...fn.args]
      const kptArgs = ['fn', 'eval', kptPkg, '--exec', fn.exec, '--', ...fn.args]
      for (let i = 0; i < 3; i++) {
        wall(process.execPath, fnrArgs)
        wall('kpt', kptArgs)
      }
      const fnr: number[] = []
      const kpt: number[] = []
      for (let i = 0; i < iterations; i++) {
        fnr.push(wall(process.execPath, fnrArgs))
        kpt.push(wall('kpt', kptArgs))
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
    const startup: Record<string, number[]> = {node: [], version: [], help: [], evalHelp: []}
    for (let i = 0; i < iterations; i++) {
      startup.node!.push(wall(process.execPath, ['-e', '0']))
      startup.version!.push(wall(process.execPath, [BIN_RUN, '--version']))
      startup.help!.push(wall(process.execPath, [BIN_RUN, '--help']))
      startup.evalHelp!.push(wall(process.execPath, [BIN_RUN, 'eval', '--help']))
    }
    const nodeP50 = round(percentile(startup.node!, 50), 1)
    for (const [key, label] of [['version', 'fnr --version'], ['help', 'fnr --help'], ['evalHelp', 'fnr eval --help']] as const) {
      const p50 = round(percentile(startup[key]!, 50), 1)
      rows.push({case: `startup: ${label} vs node -e 0`, p50, p95: round(percentile(startup[key]!, 95), 1), baselineP50: nodeP50, added: round(p50 - nodeP50, 1), unit: 'ms', target: '≤ 250 ms', met: p50 <= 250})
    }
    raw.startup = startup
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
  return {rows, raw}
}
