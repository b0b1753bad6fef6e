// Makes a checkout ready to run: npm dependencies, the TypeScript build and, for tests, the
// Debian packages they use. Only Node built-ins here: this runs before node_modules exists.
import {spawnSync} from 'node:child_process'
import {existsSync, lstatSync, readFileSync, readdirSync, realpathSync, statSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {buildNative} from './build-native.mjs'
import {NODE_MAIN, nodeBinary, pathWith} from './node-runtime.mjs'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))

/**
 * Debian's libjemalloc2 on this machine's architecture: the allocator the fnr image preloads
 * (docker/fnr.Dockerfile), which the suites that judge memory and the benchmarks run fnr with.
 */
export const JEMALLOC_LIBRARY = `/usr/lib/${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-linux-gnu/libjemalloc.so.2`

/** Debian packages the test suites use, and the command each provides. */
export const TEST_PACKAGES = [
  {pkg: 'docker-registry', cmd: 'docker-registry'},
  {pkg: 'skopeo', cmd: 'skopeo'},
  {pkg: 'apache2-utils', cmd: 'htpasswd'},
  {pkg: 'openssl', cmd: 'openssl'},
  {pkg: 'runc', cmd: 'runc'},
  {pkg: 'patchelf', cmd: 'patchelf'},
  {pkg: 'busybox-static', cmd: 'busybox'},
  // PID 1 of the fnr image (docker/fnr.Dockerfile), laid out by test/support/node/fnr-image.ts
  {pkg: 'tini', cmd: 'tini'},
  // the image's allocator (LD_PRELOAD in docker/fnr.Dockerfile), laid out and used the same way
  {pkg: 'libjemalloc2', file: JEMALLOC_LIBRARY},
  {pkg: 'binutils', cmd: 'strip'},
  {pkg: 'iproute2', cmd: 'ip'},
  {pkg: 'etcd-server', cmd: 'etcd'},
  // the C compiler and libc headers `npm run build` builds the native spawn helper with
  {pkg: 'gcc', cmd: 'cc'},
  {pkg: 'libc6-dev', file: '/usr/include/spawn.h'},
]

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, {stdio: 'inherit', cwd: ROOT, ...opts})
  if (r.status !== 0) {
    console.error(`setup: ${cmd} ${args.join(' ')} failed with exit code ${r.status}`)
    process.exit(r.status ?? 1)
  }
}

function log(msg) {
  process.stderr.write(`setup: ${msg}\n`)
}

function mtime(p) {
  try {
    return statSync(p).mtimeMs
  } catch {
    return 0
  }
}

function newestIn(dir) {
  let newest = 0
  if (!existsSync(dir)) return 0
  for (const entry of readdirSync(dir, {withFileTypes: true})) {
    const p = path.join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestIn(p) : mtime(p))
  }
  return newest
}

/** package.json's engines.node, a `>=X.Y[.Z]` range. */
export function engineFloor() {
  const range = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).engines?.node ?? ''
  const m = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim())
  if (!m) throw new Error(`setup: package.json's engines.node must be a >=X.Y range, not ${JSON.stringify(range)}`)
  return {range, floor: [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)]}
}

/** True when a Node version (process.versions.node form) is at or above the engines floor. */
export function nodeIsSupported(version = process.versions.node) {
  const have = version.split('.').map(Number)
  const {floor} = engineFloor()
  for (let i = 0; i < 3; i++) if (have[i] !== floor[i]) return have[i] > floor[i]
  return true
}

/**
 * On a Node older than package.json's engines (a machine whose OS ships Node 20, say), re-runs the
 * calling script (`npm test`, `npm run demo`) with the same arguments on NODE_MAIN, which
 * scripts/node-runtime.mjs installs from the npm registry into .cache/node/ the first time. Its
 * bin folder goes first in PATH, so everything the script starts (npm, mocha, `#!/usr/bin/env
 * node` scripts) runs on it too. Returns when this Node is supported; otherwise exits with the
 * re-run's status.
 */
export function ensureSupportedNode() {
  if (nodeIsSupported()) return
  log(`Node ${process.version} is older than package.json's engines (${engineFloor().range}); running on Node ${NODE_MAIN} from .cache/node/ instead (scripts/node-runtime.mjs)`)
  let binary
  try {
    binary = nodeBinary('main')
  } catch (err) {
    log(`${err.message}\nInstall Node ${NODE_MAIN} (or any version the engines range allows) and run again.`)
    process.exit(1)
  }
  const r = spawnSync(binary, [...process.execArgv, process.argv[1], ...process.argv.slice(2)], {stdio: 'inherit', env: {...process.env, PATH: pathWith(binary)}})
  if (r.error) log(`${binary} could not be run: ${r.error.message}`)
  process.exit(r.status ?? 1)
}

export function ensureNpmDependencies() {
  const marker = path.join(ROOT, 'node_modules', '.package-lock.json')
  if (existsSync(marker) && mtime(marker) >= mtime(path.join(ROOT, 'package-lock.json'))) return
  const modules = path.join(ROOT, 'node_modules')
  if (existsSync(modules) && lstatSync(modules).isSymbolicLink()) {
    // npm ci empties node_modules first: through a link that would wipe another checkout's copy.
    process.stderr.write(`setup: node_modules is a link to ${realpathSync(modules)} and looks stale; not running npm ci through it (it would empty the other checkout). Run npm ci there, or replace the link with a copy.\n`)
    process.exit(1)
  }
  log('installing npm dependencies (npm ci)')
  // Once more after a failure: the registry sometimes drops a connection (EIDLETIMEOUT, ECONNRESET)
  // that npm's own retries do not cover, and npm ci starts from an empty node_modules each time.
  const first = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {stdio: 'inherit', cwd: ROOT})
  if (first.status === 0) return
  log(`npm ci failed with exit code ${first.status}; trying once more in 10 s`)
  spawnSync('sleep', ['10'])
  run('npm', ['ci', '--no-audit', '--no-fund'])
}

export function ensureBuilt() {
  const out = path.join(ROOT, 'dist', 'commands')
  const manifest = path.join(ROOT, 'oclif.manifest.json')
  // (a directory's mtime changes only when entries come or go, not when tsc rewrites its files)
  const built = mtime(out) > 0 ? newestIn(path.join(ROOT, 'dist')) : 0
  if (built > 0 && newestIn(path.join(ROOT, 'src')) <= built && mtime(manifest) > 0) {
    // The native spawn helper on its own (its source changed, or a compiler came since).
    try {
      buildNative()
    } catch (err) {
      console.error(`setup: ${err.message}`)
      process.exit(1)
    }
    return
  }
  log('building (tsc, the eval, serve and client-node bundles, oclif manifest)')
  build()
}

/** The build (`npm run build`, and ensureBuilt when dist/ is missing or older than src/). */
export function build() {
  // TypeScript 7, the native compiler (package.json's typescript-native); `typescript` 6 is there
  // only for the checkers that load its compiler API (docs/contributing.md "Lint").
  run(process.execPath, [path.join(ROOT, 'node_modules', 'typescript-native', 'bin', 'tsc'), '-p', 'tsconfig.build.json'])
  // The native spawn helper (dist/native/fnr-spawn), where a C compiler exists.
  try {
    buildNative()
  } catch (err) {
    console.error(`setup: ${err.message}`)
    process.exit(1)
  }
  run(process.execPath, [path.join(ROOT, 'scripts', 'bundles.mjs')])
  run(process.execPath, [path.join(ROOT, 'scripts', 'bundle-client-node.mjs')])
  // The manifest keeps `fnr --help` and command lookup fast; oclif's own chatter is dropped.
  const r = spawnSync(path.join(ROOT, 'node_modules', '.bin', 'oclif'), ['manifest'], {cwd: ROOT, encoding: 'utf8'})
  if (r.status !== 0) {
    process.stderr.write(r.stdout + r.stderr)
    process.exit(r.status ?? 1)
  }
  run(process.execPath, [path.join(ROOT, 'scripts', 'sort-manifest.mjs')])
}

function have(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], {stdio: 'ignore'}).status === 0
}

/** Installs missing test packages when running as root; otherwise says what is missing. */
export function ensureTestPackages() {
  const missing = TEST_PACKAGES.filter(({cmd, file}) => (file ? !existsSync(file) : !have(cmd) && !existsSync(`/usr/sbin/${cmd}`)))
  if (missing.length === 0) return []
  const names = missing.map((m) => m.pkg)
  if (process.getuid?.() !== 0) {
    log(`missing Debian packages: ${names.join(' ')} (not root, so not installing; the tests that need them will fail and say so)`)
    return names
  }
  log(`installing Debian packages: ${names.join(' ')}`)
  const env = {...process.env, DEBIAN_FRONTEND: 'noninteractive'}
  run('apt-get', ['update', '-qq'], {env})
  run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...names], {env})
  return []
}
