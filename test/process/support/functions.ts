/** Functions directories for the process tests. */
import {readdirSync, readFileSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {CALL_MARKER_ENV} from '../../../src/lib/process/sweep.js'
import {isSpawnerProcess} from '../../support/reliability/processes.js'
import {writeExecutable} from '../../support/tmp.js'

/** A functions dir with the given shell functions, each mapped to example.com/<name>:v1. */
export async function functionsDirWith(dir: string, scripts: Record<string, string>): Promise<{configPath: string; functionsDir: string}> {
  const functionsDir = path.join(dir, 'functions')
  await mkdir(functionsDir, {recursive: true})
  const entries: string[] = []
  for (const [name, script] of Object.entries(scripts)) {
    await writeExecutable(path.join(functionsDir, name), script)
    entries.push(`- function: ${name}\n  images: [example.com/${name.toLowerCase()}:v1]`)
  }
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, `functions:\n${entries.join('\n')}\n`)
  return {configPath, functionsDir}
}


/**
 * The function processes a runner started: its children, and its process spawner's children
 * (src/lib/process/spawner.ts), that carry a call's marker (FNR_FUNCTION_CALL) in their
 * environment. A runner's first calls may start directly, before its spawner is ready.
 */
export function functionProcesses(runnerPid: number): number[] {
  // Every thread's list: the native helper's functions are children of its spawn threads.
  const children = (pid: number): number[] => {
    try {
      return readdirSync(`/proc/${pid}/task`).flatMap((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number))
    } catch {
      return []
    }
  }
  const environ = (pid: number): string[] => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0')
    } catch {
      return []
    }
  }
  const direct = children(runnerPid)
  const viaSpawner = direct.filter(isSpawnerProcess).flatMap(children)
  return [...direct, ...viaSpawner].filter((pid) => environ(pid).some((v) => v.startsWith(`${CALL_MARKER_ENV}=`)))
}
