/**
 * Starting the wrapper server as a real process, through any of its front ends:
 *   cli       node bin/run.js wrapper-server …   (the oclif command; needs dist/ built)
 *   entry     node --import tsx src/bin/wrapper-server.ts …   (the packaged binary's main, unbundled)
 *   packaged  <folder>/lib/ld-linux… <folder>/wrapper-server-sea …   (the single executable, run
 *             through its own interpreter because its PT_INTERP, /wrapper-server-tools/…, exists only
 *             in a pod; the launcher <folder>/wrapper-server needs the mount point too: runc tests)
 * The "ready" log line carries the port (--port 0 picks a free one).
 */
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {readdirSync} from 'node:fs'
import path from 'node:path'

import {BIN_RUN, REPO_ROOT} from '../../support/serve.js'

export type Frontend = 'cli' | 'entry' | 'packaged'

export const ENTRY = path.join(REPO_ROOT, 'src', 'bin', 'wrapper-server.ts')
/** tsx's loader by URL, so the entry also starts from a working directory outside the repo. */
const TSX = import.meta.resolve('tsx')
export const READY = /"port":(\d+).*"msg":"wrapper server is ready"/

export interface WrapperProcess {
  child: ChildProcess
  port: number
  address: string
  stderr(): string
  exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>
  /** SIGKILLs the process if it is still running and waits for it. */
  kill(): Promise<void>
}

/** The interpreter inside a packaged folder (lib/ld-linux-*.so.*). */
export function packagedInterpreter(folder: string): string {
  const ld = readdirSync(path.join(folder, 'lib')).find((f) => f.startsWith('ld-linux'))
  if (!ld) throw new Error(`no ld-linux in ${folder}/lib`)
  return path.join(folder, 'lib', ld)
}

/** The argv that runs a front end with ARGS. `program` picks the packaged file (wrapper-server-sea, the executable, or grpc-health-probe). */
export function commandFor(frontend: Frontend, args: string[], folder?: string, program = 'wrapper-server-sea'): [string, string[]] {
  switch (frontend) {
    case 'cli':
      return [process.execPath, [BIN_RUN, 'wrapper-server', ...args]]
    case 'entry':
      return [process.execPath, ['--import', TSX, ENTRY, ...args]]
    case 'packaged':
      if (!folder) throw new Error('the packaged front end needs the folder')
      return [packagedInterpreter(folder), [path.join(folder, program), ...args]]
  }
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv
  cwd?: string
  folder?: string
  timeoutMs?: number
}

export async function startWrapperProcess(frontend: Frontend, args: string[], options: StartOptions = {}): Promise<WrapperProcess> {
  const [cmd, argv] = commandFor(frontend, args, options.folder)
  const child = spawn(cmd, argv, {
    env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', ...options.env},
    cwd: options.cwd ?? REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let err = ''
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  child.stdout!.resume()
  const exited = once(child, 'exit').then(([code, signal]) => ({code: code as number | null, signal: signal as NodeJS.Signals | null}))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`wrapper-server (${frontend}) did not become ready:\n${err}`)), options.timeoutMs ?? 60_000)
    const check = (): void => {
      const m = READY.exec(err)
      if (m) {
        clearTimeout(timer)
        child.stderr!.removeListener('data', check)
        resolve(Number(m[1]))
      }
    }
    child.stderr!.on('data', check)
    void exited.then(({code, signal}) => {
      clearTimeout(timer)
      reject(new Error(`wrapper-server (${frontend}) exited with ${code ?? signal} before it was ready:\n${err}`))
    })
  })
  return {
    child,
    port,
    address: `127.0.0.1:${port}`,
    stderr: () => err,
    exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

/** Runs a front end to completion (for startup errors and --help). */
export function runToExit(frontend: Frontend, args: string[], options: StartOptions = {}): {code: number | null; stdout: string; stderr: string} {
  const [cmd, argv] = commandFor(frontend, args, options.folder)
  const r = spawnSync(cmd, argv, {
    env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', ...options.env},
    cwd: options.cwd ?? REPO_ROOT,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 60_000,
  })
  return {code: r.status, stdout: r.stdout, stderr: r.stderr}
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Polls until `condition` holds (no timing assertions: only a generous upper bound). */
export async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
