/** Starting `fnr serve` in-process or as a real child process for tests. */
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {DEFAULT_IMAGE_PREFIX} from '../../src/lib/config/image-ref.js'
import {silentLogger, type Logger} from '../../src/lib/telemetry/log.js'
import {startServe, type RunningServer, type ServeOptions} from '../../src/lib/serve.js'
import {onTeardown} from './teardown.js'
import {SCRIPTS, writeExecutable} from './tmp.js'

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const BIN_RUN = path.join(REPO_ROOT, 'bin', 'run.js')

/** A functions dir with the shell functions of SCRIPTS, each mapped to example.com/<name>:v1. */
export async function makeFunctionsDir(dir: string): Promise<{configPath: string; functionsDir: string}> {
  const functionsDir = path.join(dir, 'functions')
  const {mkdir} = await import('node:fs/promises')
  await mkdir(functionsDir, {recursive: true})
  const entries: string[] = []
  for (const [name, script] of Object.entries(SCRIPTS)) {
    await writeExecutable(path.join(functionsDir, name), script)
    entries.push(`- function: ${name}\n  images: [example.com/${name.toLowerCase()}:v1]`)
  }
  const configPath = path.join(dir, 'config.yaml')
  await writeFile(configPath, `functions:\n${entries.join('\n')}\n`)
  return {configPath, functionsDir}
}

export function serveOptions(overrides: Partial<ServeOptions> & {configPath: string; functionsDir: string}): ServeOptions {
  const {configPath, functionsDir, ...rest} = overrides
  return {
    port: 0,
    host: '127.0.0.1',
    disableRuntimes: 'pod',
    maxRequestBodySize: 6 * 1024 * 1024,
    gracePeriodMs: 5000,
    exec: {configPath, functionsDir, embedded: false, defaultImagePrefix: DEFAULT_IMAGE_PREFIX},
    pod: {
      namespace: 'porch-fn-system',
      ttlMs: 1_800_000,
      scanIntervalMs: 60_000,
      cacheConfigPath: '',
      warmUp: false,
      templateConfigMap: '',
      maxWaitlistLength: 2,
      maxParallelPodsPerFunction: 1,
    },
    registry: {enablePrivateRegistries: false, authSecretPath: '', authSecretName: 'auth-secret', enableTls: false, tlsSecretPath: ''},
    ...rest,
  }
}

export async function startInProcess(options: ServeOptions, logger: Logger = silentLogger): Promise<RunningServer> {
  return startServe(options, logger, false)
}

export interface ServeProcess {
  child: ChildProcess
  port: number
  stderr(): string
  /** Resolves with the exit code (or signal) once the process ends. */
  exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>
}

/**
 * Every `fnr serve` child still running, killed at the end of the run whatever happened (a test
 * that timed out before its `after` hook stopped it would leave it behind the run).
 */
const running = new Set<ChildProcess>()
onTeardown('fnr serve child processes', async () => {
  await Promise.all(
    [...running].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const gone = once(child, 'exit')
      child.kill('SIGKILL')
      await gone
    }),
  )
})

/** Runs `node bin/run.js serve ARGS` (the built CLI) and waits for its "ready" log line. */
export async function startServeProcess(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN_RUN, 'serve', '--port=0', '--log-level=3', ...args], {
    env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', ...env},
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  running.add(child)
  child.once('exit', () => running.delete(child))
  let err = ''
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  child.stdout!.resume()
  const exited = once(child, 'exit').then(([code, signal]) => ({code: code as number | null, signal: signal as NodeJS.Signals | null}))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`fnr serve did not become ready in 20 s (killed):\n${err}`))
    }, 20_000)
    const check = (): void => {
      const m = /"port":(\d+).*"msg":"fnr serve is ready"/.exec(err)
      if (m) {
        clearTimeout(timer)
        resolve(Number(m[1]))
      }
    }
    child.stderr!.on('data', check)
    void exited.then(({code}) => {
      clearTimeout(timer)
      reject(new Error(`fnr serve exited with ${code} before it was ready:\n${err}`))
    })
  })
  return {child, port, stderr: () => err, exited}
}
