/**
 * The transport floor for P4: the same gRPC server fnr serve uses (EvaluatorServer, same message
 * limit), with an evaluator that answers each call with its own ResourceList and runs nothing.
 * A call through it costs what moving the payload to fnr and back over gRPC costs; the function
 * (the raw pipe) comes on top. Run as its own process: `node --import tsx bench/echo-server.ts`
 * prints "PORT <n>" and serves until SIGTERM.
 */
import {spawn} from 'node:child_process'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {EvaluatorServer} from '../src/lib/grpc/server.js'
import {DEFAULT_MAX_MESSAGE_SIZE} from '../src/lib/grpc/client.js'
import {benchEnv, ROOT} from './lib.js'

export interface EchoServer {
  pid: number
  port: number
  stop(): Promise<void>
}

/** Starts bench/echo-server.ts in a process of its own (like fnr serve) on 127.0.0.1. */
export async function startEchoServer(): Promise<EchoServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench', 'echo-server.ts')], {env: benchEnv(), cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit']})
  const killOnExit = (): void => {
    child.kill('SIGKILL')
  }
  process.once('exit', killOnExit)
  child.once('exit', () => process.removeListener('exit', killOnExit))
  let out = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
      const m = /^PORT (\d+)$/m.exec(out)
      if (m) resolve(Number(m[1]))
    })
    child.once('exit', (code) => reject(new Error(`echo server exited ${code}`)))
  })
  return {
    pid: child.pid!,
    port,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      await exited
    },
  }
}

/** The echo server in this process (for comparisons with an in-process fnr serve). */
export async function startEchoInProcess(): Promise<EchoServer> {
  const server = new EvaluatorServer({
    evaluator: {
      name: 'echo',
      evaluate: async (request) => ({resourceList: request.resourceList, log: Buffer.alloc(0), evaluator: 'echo'}),
      close: async () => {},
    },
    maxMessageSize: DEFAULT_MAX_MESSAGE_SIZE,
    host: '127.0.0.1',
    port: 0,
  })
  const port = await server.start()
  server.setServing(true)
  return {
    pid: process.pid,
    port,
    stop: async () => {
      await server.shutdown(0)
    },
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const {port} = await startEchoInProcess()
  process.stdout.write(`PORT ${port}\n`)
  process.once('SIGTERM', () => process.exit(0))
}
