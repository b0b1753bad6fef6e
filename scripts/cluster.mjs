// npm run cluster -- up | down | env | status | build
// A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, built from Go modules) and the local
// node, on 127.0.0.1, state in .cluster/ (git-ignored). See docs/cluster.md.
// Runs under tsx (the npm script passes --import tsx): the control plane library is test/support/cluster/.
import {spawn} from 'node:child_process'
import {existsSync, openSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {buildClusterBinaries, kubeVersion} from './cluster-build.mjs'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const DIR = path.join(ROOT, '.cluster')
const STATE = path.join(DIR, 'state.json')
const KUBECONFIG = path.join(DIR, 'kubeconfig')

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

function readState() {
  try {
    return JSON.parse(readFileSync(STATE, 'utf8'))
  } catch {
    return undefined
  }
}

function running() {
  const state = readState()
  return state && alive(state.supervisor) ? state : undefined
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function up() {
  const state = running()
  if (state) {
    console.error(`a cluster is already running (supervisor pid ${state.supervisor}, ${state.url}); npm run cluster -- down stops it`)
    console.log(`export KUBECONFIG=${KUBECONFIG}`)
    return 0
  }
  if (existsSync(DIR)) rmSync(DIR, {recursive: true, force: true}) // left over from a crash
  const started = Date.now()
  buildClusterBinaries()
  const built = Date.now()
  const {mkdirSync} = await import('node:fs')
  mkdirSync(DIR, {recursive: true})
  const logFd = openSync(path.join(DIR, 'cluster.log'), 'a')
  // The node: runc (default) or host processes (`up --node=process` or FNR_CLUSTER_NODE=process).
  const nodeArg = process.argv.slice(3).find((a) => a.startsWith('--node='))
  const env = nodeArg ? {...process.env, FNR_CLUSTER_NODE: nodeArg.slice('--node='.length)} : process.env
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '__supervise'], {cwd: ROOT, detached: true, stdio: ['ignore', logFd, logFd], env})
  child.unref()
  for (;;) {
    const s = readState()
    if (s?.ready) break
    if (!alive(child.pid)) {
      console.error(`the cluster did not start:\n${readFileSync(path.join(DIR, 'cluster.log'), 'utf8').split('\n').slice(-30).join('\n')}`)
      rmSync(DIR, {recursive: true, force: true})
      return 1
    }
    if (Date.now() - built > 120_000) {
      console.error('the cluster was not ready within 120 s; see .cluster/*.log; stopping it')
      await down()
      return 1
    }
    await sleep(100)
  }
  const s = readState()
  console.error(`cluster ready in ${((Date.now() - built) / 1000).toFixed(1)} s${built - started > 1000 ? ` (binaries built in ${((built - started) / 1000).toFixed(0)} s)` : ''}: ${s.version}, API server ${s.url}, node ${s.node} (pods ${s.podRuntime === 'runc' ? 'under runc' : 'as host processes'})`)
  console.error(`control plane memory (RSS): ${Object.entries(s.rssKiB).map(([k, v]) => `${k} ${(v / 1024).toFixed(0)} MiB`).join(', ')}`)
  console.log(`export KUBECONFIG=${KUBECONFIG}`)
  return 0
}

async function supervise() {
  const {startControlPlane} = await import('../test/support/cluster/controlplane.ts')
  const log = (m) => console.log(`${new Date().toISOString()} ${m}`)
  const cp = await startControlPlane({dir: DIR, build: false, log, kubelet: {pullAnyImage: true, onLog: undefined}})
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    log('stopping')
    await cp.stop()
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  const rssKiB = await cp.rssKiB()
  writeFileSync(STATE, JSON.stringify({ready: true, supervisor: process.pid, pids: cp.pids, url: cp.url, kubeconfig: cp.kubeconfigPath, node: cp.kubelet?.nodeName, podRuntime: cp.runtime ? 'runc' : 'process', version: kubeVersion(), rssKiB}, null, 2))
  log('ready')
}

async function down() {
  const state = readState()
  if (!state) {
    if (existsSync(DIR)) rmSync(DIR, {recursive: true, force: true})
    console.error('no cluster is running')
    return 0
  }
  if (alive(state.supervisor)) {
    process.kill(state.supervisor, 'SIGTERM')
    const deadline = Date.now() + 20_000
    while (alive(state.supervisor) && Date.now() < deadline) await sleep(100)
  }
  for (const pid of [state.supervisor, ...Object.values(state.pids ?? {})]) {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
  }
  rmSync(DIR, {recursive: true, force: true})
  console.error('cluster stopped, .cluster/ removed')
  return 0
}

function env() {
  if (!running()) {
    console.error('no cluster is running: npm run cluster -- up')
    return 1
  }
  console.log(`export KUBECONFIG=${KUBECONFIG}`)
  return 0
}

function status() {
  const s = running()
  if (!s) {
    console.error('no cluster is running')
    return 1
  }
  console.log(JSON.stringify(s, null, 2))
  return 0
}

const cmd = process.argv[2]
const commands = {up, down, env, status, build: () => (buildClusterBinaries(), 0), __supervise: supervise}
if (!commands[cmd]) {
  console.error('usage: npm run cluster -- up [--node=runc|process] | down | env | status | build')
  process.exit(2)
}
const code = await commands[cmd]()
if (cmd !== '__supervise') process.exit(code)
