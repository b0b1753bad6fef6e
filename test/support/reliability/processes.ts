/**
 * Finding processes a test left behind, from /proc (Linux).
 *
 * Every function process of the reliability suites runs in (or changes into) a directory made
 * for the test, and its descendants inherit that working directory even when they are orphaned
 * or leave the process group. So "leftover processes" are the live processes whose cwd is under
 * such a directory; zombies (already dead, waiting to be reaped by whoever adopted them) are not
 * counted, as they hold no resources but a pid.
 */
import {readFileSync, readdirSync, readlinkSync} from 'node:fs'

import {SPAWNER_MODE_ENV} from '../../../src/lib/process/spawner-process.js'
import {eventually} from './tally.js'

export interface ProcessInfo {
  pid: number
  ppid: number
  pgid: number
  state: string
  cwd: string
  cmdline: string
}

function stat(pid: number): {state: string; ppid: number; pgid: number} | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // pid (comm) state ppid pgrp ...: comm may contain spaces and parentheses.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ')
    return {state: rest[0]!, ppid: Number(rest[1]), pgid: Number(rest[2])}
  } catch {
    return undefined
  }
}

/** Live (non-zombie) processes whose working directory is `dir` or under it. */
export function processesUnder(dir: string): ProcessInfo[] {
  const out: ProcessInfo[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const pid = Number(name)
    if (pid === process.pid) continue
    let cwd: string
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`)
    } catch {
      continue
    }
    if (cwd !== dir && !cwd.startsWith(`${dir}/`)) continue
    const st = stat(pid)
    if (!st || st.state === 'Z' || st.state === 'X') continue
    let cmdline = ''
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim()
    } catch {
      // gone meanwhile
    }
    out.push({pid, ...st, cwd, cmdline})
  }
  return out
}

/** Direct children of this process that are zombies (exited but never reaped: a leak). */
export function unreapedChildren(): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    const st = stat(Number(name))
    if (st && st.ppid === process.pid && st.state === 'Z') out.push(Number(name))
  }
  return out
}

/** "pid (comm)" of each unreaped child, for messages (a zombie has no cmdline left, but keeps comm). */
export function describeUnreaped(pids: readonly number[]): string {
  return pids
    .map((pid) => {
      try {
        const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
        return `${pid} ${text.slice(text.indexOf('('), text.lastIndexOf(')') + 1)}`
      } catch {
        return `${pid} (gone)`
      }
    })
    .join(', ')
}

/**
 * Waits (up to `ms`) for every process under `dirs` to be gone; returns those still alive.
 * Function processes are killed asynchronously after a call ends, so a short wait is normal.
 */
export async function leftoversAfter(dirs: readonly string[], ms = 5_000): Promise<ProcessInfo[]> {
  let left: ProcessInfo[] = []
  await eventually(() => {
    left = dirs.flatMap((d) => processesUnder(d))
    return left.length === 0
  }, ms)
  return left
}

/** SIGKILLs every process under `dirs` (cleanup of processes a test expects to outlive it). */
export function killAllUnder(dirs: readonly string[]): number {
  let n = 0
  for (const p of dirs.flatMap((d) => processesUnder(d))) {
    try {
      process.kill(p.pid, 'SIGKILL')
      n++
    } catch {
      // already gone
    }
  }
  return n
}

export function describeProcesses(list: readonly ProcessInfo[]): string {
  return list.map((p) => `${p.pid} (ppid ${p.ppid}, pgid ${p.pgid}, ${p.state}): ${p.cmdline}`).join('; ')
}

/** Open file descriptors and RSS of a process (for before/after comparisons). */
/**
 * True for a runner's process spawner (src/lib/process/spawner.ts): a process of fnr's own that
 * lives as long as its server, not a function process. It is known by the mode variable in its
 * environment, whichever way it was started (the module, or the packaged wrapper run as itself).
 */
export function isSpawnerProcess(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').some((v) => v === `${SPAWNER_MODE_ENV}=1`)
  } catch {
    return false
  }
}

export function resourceUsage(pid = process.pid): {fds: number; rssKiB: number} {
  const fds = readdirSync(`/proc/${pid}/fd`).length
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
  return {fds, rssKiB}
}
