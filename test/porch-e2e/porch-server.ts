/**
 * porch-server as a process on this host's loopback behind the project's control plane, shared by the specs of
 * test/porch-e2e/: Porch's CRDs, namespace and APIService applied as written (./porch-files.ts), the APIService's
 * Service pointing at localhost, porch-server started with a given function runner, and a wait for its API.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {once} from 'node:events'
import {mkdir} from 'node:fs/promises'
import path from 'node:path'

import {execa} from 'execa'

import type {PorchServerFiles} from './porch-files.js'
import type {ControlPlane} from '../support/cluster/controlplane.js'
import type {KubeRestClient} from '../support/k8s/client.js'
import type {KubeObject} from '../support/k8s/status.js'

/** The port of Porch's APIService as written (no port: 443); porch-server listens there on 127.0.0.1. */
export const PORCH_PORT = 443

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/** Polls `check` every 200 ms until it returns a truthy value; throws after `timeoutMs` with the last error. */
export async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | false | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const v = await check()
      if (v) return v
    } catch (err) {
      last = err
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s${last ? ` (last error: ${String(last)})` : ''}`)
    await sleep(200)
  }
}

export async function git(args: string[], cwd?: string): Promise<string> {
  const r = await execa('git', args, {cwd, env: {GIT_AUTHOR_NAME: 'fnr', GIT_AUTHOR_EMAIL: 'fnr@example.com', GIT_COMMITTER_NAME: 'fnr', GIT_COMMITTER_EMAIL: 'fnr@example.com'}})
  return String(r.stdout)
}

/**
 * Applies Porch's namespace, CRDs and APIService, and the Service the APIService names (`api` in porch-system) as an
 * ExternalName for localhost: porch-server runs on this host's loopback (Porch's local-development recipe).
 * `externalName: false` leaves that Service out (porch-server as a pod: Porch's own `api` Service, ./porch-pod.ts).
 */
export async function installPorchApi(cp: ControlPlane, client: KubeRestClient, files: PorchServerFiles, options: {externalName?: boolean} = {}): Promise<void> {
  for (const f of [files.namespace, files.repositoriesCrd, files.packagerevsCrd, files.apiService]) {
    const r = await cp.kubectl(['apply', '-f', f])
    if (r.code !== 0) throw new Error(`kubectl apply -f ${f}: ${r.stderr}`)
  }
  if (options.externalName === false) return
  await client.create('/api/v1/namespaces/porch-system/services', {apiVersion: 'v1', kind: 'Service', metadata: {name: 'api'}, spec: {type: 'ExternalName', externalName: 'localhost'}})
}

export interface PorchServer {
  child: ChildProcess
  log(): string
  stop(): Promise<void>
}

/**
 * Starts porch-server on 127.0.0.1:443 with `runner` (host:port) as its function runner; state under `dir`; `env` is
 * added to its environment.
 */
export async function startPorchServer(binary: string, cp: ControlPlane, dir: string, runner: string, env: NodeJS.ProcessEnv = {}): Promise<PorchServer> {
  await mkdir(dir, {recursive: true})
  const child = spawn(binary, [
    `--kubeconfig=${cp.kubeconfigPath}`,
    '--bind-address=127.0.0.1', `--secure-port=${PORCH_PORT}`,
    `--cert-dir=${path.join(dir, 'certs')}`, `--cache-directory=${path.join(dir, 'cache')}`,
    `--function-runner=${runner}`,
    '--repo-sync-frequency=3m', '--repo-operation-retry-attempts=3', '--max-request-body-size=6291456',
  ], {env: {PATH: process.env.PATH, HOME: dir, OTEL_METRICS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none', ...env}, stdio: ['ignore', 'pipe', 'pipe']})
  let log = ''
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()))
  const exited = once(child, 'exit')
  return {
    child,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
        await exited
        clearTimeout(timer)
      }
    },
  }
}

/** Waits until kube-apiserver serves porch.kpt.dev/v1alpha1 from `server` (its APIService Available). */
export async function waitForPorchApi(server: PorchServer, client: KubeRestClient, timeoutMs = 180_000): Promise<void> {
  await until('porch-server serving porch.kpt.dev/v1alpha1 through kube-apiserver', timeoutMs, async () => {
    if (server.child.exitCode !== null) throw new Error(`porch-server exited with ${server.child.exitCode}:\n${server.log().split('\n').slice(-30).join('\n')}`)
    const svc = await client.get('/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.porch.kpt.dev')
    const available = (svc.status?.conditions ?? []).some((c: KubeObject) => c.type === 'Available' && c.status === 'True')
    return available && (await client.raw('GET', '/apis/porch.kpt.dev/v1alpha1')).code === 200
  })
}
