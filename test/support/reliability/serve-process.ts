/**
 * `fnr serve` as a real child process on a port the test chooses (so it can be killed with
 * SIGKILL and restarted on the same address), built CLI (bin/run.js).
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import net from 'node:net'

import {BIN_RUN} from '../serve.js'

export interface ServeChild {
  child: ChildProcess
  port: number
  stderr(): string
  exited: Promise<{code: number | null; signal: NodeJS.Signals | null}>
}

/** A free TCP port on 127.0.0.1 (bound and released). */
export async function freePort(): Promise<number> {
  const server = net.createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  await new Promise((r) => server.close(r))
  return port
}

/** Starts `fnr serve --port=PORT ARGS` and waits for its ready line (rejects if it exits first). */
export async function startServeChild(port: number, args: string[], env: NodeJS.ProcessEnv = {}, readyMs = 30_000): Promise<ServeChild> {
  // The exec runtime alone unless the caller chooses (the pod tests pass --disable-runtimes=exec).
  const runtimes = args.some((a) => a.startsWith('--disable-runtimes')) ? [] : ['--disable-runtimes=pod']
  const child = spawn(process.execPath, [BIN_RUN, 'serve', `--port=${port}`, ...runtimes, ...args], {
    env: {...process.env, FNR_BIND_ADDRESS: '127.0.0.1', ...env},
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let err = ''
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()))
  const exited = once(child, 'exit').then(([code, signal]) => ({code: code as number | null, signal: signal as NodeJS.Signals | null}))
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fnr serve did not become ready in ${readyMs} ms:\n${err}`)), readyMs)
    const check = (): void => {
      if (/"msg":"fnr serve is ready"/.test(err)) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stderr!.on('data', check)
    void exited.then(({code, signal}) => {
      clearTimeout(timer)
      reject(new Error(`fnr serve exited (${code ?? signal}) before it was ready:\n${err}`))
    })
  })
  return {child, port, stderr: () => err, exited}
}
