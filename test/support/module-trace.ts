/**
 * Module-resolution traces: test/support/pods/module-trace.mjs, loaded with `node --import`,
 * writes every module URL a process resolves into $FNR_MODULE_TRACE (one a line), so a test can
 * tell whether a heavy module was ever loaded.
 *
 * @kubernetes/client-node reaches a process either as the package or, after `npm run build`, as
 * fnr's tree-shaken bundle of it (dist/lib/k8s/client-node.bundle.mjs): both count as loading it.
 *
 * `fnr serve` runs on its plain modules here (FNR_NO_BUNDLE=1): a trace names module files, and the
 * serve bundle (scripts/bundles.mjs) folds them into chunks. The bundle keeps the same split (what
 * a module imports lazily is a chunk loaded when that line runs), and
 * test/lib/lazy-loading.test.ts checks which chunks a start loads.
 */
import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'

import {until} from './pods/index.js'
import {BIN_RUN, REPO_ROOT} from './serve.js'

export const CLIENT_NODE_BUNDLE_SUFFIX = '/dist/lib/k8s/client-node.bundle.mjs'

const HOOK = path.join(REPO_ROOT, 'test', 'support', 'pods', 'module-trace.mjs')

export function isClientNodeModule(url: string): boolean {
  return url.includes('/node_modules/@kubernetes/client-node/') || url.endsWith(CLIENT_NODE_BUNDLE_SUFFIX)
}

/**
 * Starts the built `fnr serve --port=0 --log-level=2 ARGS` with the trace on, waits until it is
 * ready, stops it with SIGTERM and returns the modules it loaded and what it logged. `env` is the
 * whole environment of the process (FNR_BIND_ADDRESS and FNR_MODULE_TRACE are added); the trace
 * file goes in `dir`.
 */
export async function traceServeModules(dir: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<{modules: string[]; stderr: string}> {
  const trace = path.join(dir, 'modules.txt')
  await writeFile(trace, '')
  const child = spawn(process.execPath, ['--import', HOOK, BIN_RUN, 'serve', '--port=0', '--log-level=2', ...args], {
    env: {...env, FNR_BIND_ADDRESS: '127.0.0.1', FNR_MODULE_TRACE: trace, FNR_NO_BUNDLE: '1'},
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
  const exited = once(child, 'exit')
  await until(() => /fnr serve is ready/.test(stderr) || child.exitCode !== null, 'serve ready')
  child.kill('SIGTERM')
  await exited
  if (!/fnr serve is ready/.test(stderr)) throw new Error(`fnr serve did not get ready:\n${stderr}`)
  return {modules: (await readFile(trace, 'utf8')).split('\n').filter((l) => l !== ''), stderr}
}
