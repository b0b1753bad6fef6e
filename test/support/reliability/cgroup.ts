/**
 * A memory cgroup with a limit, for running fnr's servers as the Deployment runs them (1 GiB,
 * manifests/deployment.yaml). cgroup v1 (memory hierarchy) where it is mounted, else cgroup v2.
 * The cgroup is made as a child of this process's own memory cgroup, so whatever limit applies
 * to the tests still applies; processes are started inside it from their first instruction (a
 * shell writes its pid into cgroup.procs, then execs the server), so Node sizes its heap for the
 * limit as it would in the container. remove() kills what is left inside and removes it.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import {imageAllocatorEnv} from '../node/fnr-image.js'
import {BIN_RUN} from '../serve.js'

/**
 * Puts a process started by the tests back at the normal priority (niceness 0). `npm test` runs one
 * of its two lanes at `nice -n 10` (docs/contributing.md "Lanes"), and the servers a reliability
 * spec judges, and its health prober, would inherit that. Beside two nice-0 busy loops, the niced
 * prober sent 51 probes where it sends 189, its p99 1,947 ms against 865. What a spec measures is a
 * server at a server's priority, probed on time.
 * Lowering a niceness needs root, which these specs have (cgroups); elsewhere it stays as it was.
 */
export function atNormalPriority(pid: number | undefined): void {
  if (pid === undefined) return
  try {
    if (os.getPriority(pid) > 0) os.setPriority(pid, 0)
  } catch {
    // not root, or the process is gone
  }
}

export interface MemoryCgroup {
  dir: string
  version: 1 | 2
  /** OOM kills inside the cgroup since it was made. */
  oomKills(): number
  /** Bytes charged now, and the most ever charged (v1; v2: peak where the kernel has memory.peak). */
  usage(): {bytes: number; maxBytes: number}
  /** Pids inside. */
  pids(): number[]
  /** argv that runs `argv` inside the cgroup. */
  wrap(argv: readonly string[]): string[]
  remove(): void
}

function ownPath(controller: string): string | undefined {
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, controllers, p] = /^\d+:([^:]*):(.*)$/.exec(line) ?? []
    if (controllers === undefined) continue
    if (controller === '' ? controllers === '' : controllers.split(',').includes(controller)) return p
  }
  return undefined
}

let counter = 0

/** Why no memory cgroup can be made here, or undefined when one can. */
/** The memory limit manifests/deployment.yaml sets for fnr serve (bytes), read from the manifest itself. */
export function deploymentMemoryLimit(): number {
  const text = readFileSync(path.join(import.meta.dirname, '../../../manifests/deployment.yaml'), 'utf8')
  const m = /limits:\s*\n\s*memory:\s*(\d+)Gi/.exec(text)
  if (!m) throw new Error('manifests/deployment.yaml sets no memory limit in Gi')
  return Number(m[1]) * 1024 ** 3
}

export function memoryCgroupProblem(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root'
  if (existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes') || existsSync('/sys/fs/cgroup/cgroup.controllers')) return undefined
  return 'no cgroup memory controller mounted at /sys/fs/cgroup'
}

export function createMemoryCgroup(limitBytes: number): MemoryCgroup {
  const name = `fnr-test-${process.pid}-${counter++}`
  const v1Root = '/sys/fs/cgroup/memory'
  if (existsSync(path.join(v1Root, 'memory.limit_in_bytes'))) {
    const dir = path.join(v1Root, ownPath('memory') ?? '/', name)
    mkdirSync(dir)
    writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(limitBytes))
    // Without swap this is the same limit; with swap, it keeps the test from swapping instead of OOM.
    try {
      writeFileSync(path.join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes))
    } catch {
      // no swap accounting
    }
    const read = (f: string): string => readFileSync(path.join(dir, f), 'utf8')
    return {
      dir,
      version: 1,
      oomKills: () => Number(/oom_kill (\d+)/.exec(read('memory.oom_control'))?.[1] ?? 0),
      usage: () => ({bytes: Number(read('memory.usage_in_bytes')), maxBytes: Number(read('memory.max_usage_in_bytes'))}),
      pids: () => pidsOf(path.join(dir, 'cgroup.procs')),
      wrap: (argv) => ['/bin/sh', '-c', `echo $$ > ${path.join(dir, 'cgroup.procs')} && exec "$@"`, 'sh', ...argv],
      remove: () => removeCgroup(dir, path.join(dir, 'cgroup.procs')),
    }
  }
  const dir = path.join('/sys/fs/cgroup', ownPath('') ?? '/', name)
  mkdirSync(dir)
  writeFileSync(path.join(dir, 'memory.max'), String(limitBytes))
  try {
    writeFileSync(path.join(dir, 'memory.swap.max'), '0')
  } catch {
    // no swap controller
  }
  const read = (f: string): string => readFileSync(path.join(dir, f), 'utf8')
  return {
    dir,
    version: 2,
    oomKills: () => Number(/oom_kill (\d+)/.exec(read('memory.events'))?.[1] ?? 0),
    usage: () => ({bytes: Number(read('memory.current')), maxBytes: existsSync(path.join(dir, 'memory.peak')) ? Number(read('memory.peak')) : Number(read('memory.current'))}),
    pids: () => pidsOf(path.join(dir, 'cgroup.procs')),
    wrap: (argv) => ['/bin/sh', '-c', `echo $$ > ${path.join(dir, 'cgroup.procs')} && exec "$@"`, 'sh', ...argv],
    remove: () => removeCgroup(dir, path.join(dir, 'cgroup.procs')),
  }
}

function pidsOf(procs: string): number[] {
  return readFileSync(procs, 'utf8').split('\n').filter((l) => l.trim() !== '').map(Number)
}

function removeCgroup(dir: string, procs: string): void {
  if (!existsSync(dir)) return
  for (let attempt = 0; attempt < 50; attempt++) {
    const left = pidsOf(procs)
    for (const pid of left) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
    try {
      rmdirSync(dir)
      return
    } catch {
      // busy until the killed processes are gone
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100)
    }
  }
  throw new Error(`cannot remove the test cgroup ${dir}`)
}

export interface CgroupServer {
  child: ChildProcess
  stderr(): string
  exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>
  /** Stops it (SIGKILL) and waits. */
  kill(): Promise<void>
}

/**
 * Starts the built CLI (`fnr ARGS`) inside the cgroup, with FNR_BIND_ADDRESS=127.0.0.1 and the
 * image's allocator (fnr-image.ts imageAllocatorEnv: what memory the server gives back depends on
 * it), and waits for the line matching `ready`.
 */
export async function startInCgroup(cg: MemoryCgroup, args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}, readyMs = 30_000, nodeArgs: string[] = []): Promise<CgroupServer> {
  const [cmd, ...rest] = cg.wrap([process.execPath, ...nodeArgs, BIN_RUN, ...args])
  const child = spawn(cmd!, rest, {env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', ...(await imageAllocatorEnv()), ...env}, stdio: ['ignore', 'ignore', 'pipe']})
  atNormalPriority(child.pid)
  let err = ''
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString()
    if (err.length > 4_000_000) err = err.slice(-2_000_000)
  })
  const exited = once(child, 'exit').then(([code, signal]) => ({code: code as number | null, signal: signal as NodeJS.Signals | null}))
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in ${readyMs} ms:\n${err}`)), readyMs)
    const check = (): void => {
      if (ready.test(err)) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stderr!.on('data', check)
    void exited.then(({code, signal}) => {
      clearTimeout(timer)
      reject(new Error(`exited (${code ?? signal}) before it was ready:\n${err}`))
    })
  })
  return {
    child,
    stderr: () => err,
    exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}
