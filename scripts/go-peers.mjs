// Go test peers (the real control plane, the catalog functions, Porch's runner, a Go gRPC client):
// each peer is a small consumer module under test/peers/<name>/ (go.mod, go.sum, maybe main.go),
// built with the machine's Go through the module proxy into .cache/peers/<name>/ (git-ignored).
// A build is reused while the peer's go.mod and go.sum are unchanged; Go's own build cache makes a
// rebuild after a change, or the build in a fresh clone, cheap (goBuildArgs: the links are cached too). Only Node built-ins here: setup.mjs imports it before npm ci.
import {spawnSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const PEERS_SRC = path.join(ROOT, 'test', 'peers')
export const PEERS_OUT = path.join(ROOT, '.cache', 'peers')

/** Where a peer's binaries go. */
export function peerBinDir(name) {
  return path.join(PEERS_OUT, name)
}

/** A hash of every file of the peer's module folder (not sub-folders' build output): the cache key. */
export function sourceKey(dir) {
  const hash = createHash('sha256')
  const walk = (d) => {
    for (const entry of readdirSync(d, {withFileTypes: true}).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) walk(p)
      else {
        hash.update(path.relative(dir, p))
        hash.update(readFileSync(p))
      }
    }
  }
  walk(dir)
  return hash.digest('hex')
}

/**
 * The `go` arguments that build `pkg` (with `flags`) into the file `dest`. Not `go build -o`: Go
 * caches the compiled packages but links every binary again (kube-apiserver's link alone is most of
 * a minute), so a warm Go cache still spent ~170 s linking the peers on a fresh clone. `go run`'s
 * executables are kept in Go's build cache (Go 1.24+), and `-exec cp` makes "running" the binary a
 * copy of it to `dest`: on a warm cache each peer is a copy. A Go older than 1.24 links again, as
 * `go build` did.
 */
export function goBuildArgs(pkg, dest, flags = []) {
  return ['run', '-exec', 'cp', '-trimpath', ...flags, pkg, dest]
}

/**
 * Builds the peer `name`: `targets` is a list of {pkg, out} (a Go package path and the binary's
 * file name). Returns the folder holding the binaries. Extra environment (GOTOOLCHAIN, CGO_ENABLED,
 * -tags via `flags`) as given. Throws with Go's own output when a build fails.
 */
export function buildGoPeer(name, targets, {env = {}, flags = [], log = (m) => process.stderr.write(`peers: ${m}\n`)} = {}) {
  const src = path.join(PEERS_SRC, name)
  const out = peerBinDir(name)
  const stamp = path.join(out, '.source-key')
  const key = sourceKey(src) + JSON.stringify({targets, flags, env})
  const done = () => existsSync(stamp) && readFileSync(stamp, 'utf8') === key && targets.every((t) => existsSync(path.join(out, t.out)))
  if (done()) return out
  // One builder per peer at a time: npm test starts the builds in the background
  // (scripts/build-peers.mjs) while the suites that need no peer run; a suite that needs one waits here.
  const release = acquireLock(name, log)
  try {
    if (done()) return out
    mkdirSync(out, {recursive: true})
    const goEnv = {...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod', ...env}
    for (const {pkg, out: file} of targets) {
      const started = Date.now()
      log(`building ${name}: ${pkg}`)
      const r = spawnSync('go', goBuildArgs(pkg, path.join(out, file), flags), {cwd: src, env: goEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024})
      if (r.status !== 0) throw new Error(`go build ${pkg} (peer ${name}) failed with exit code ${r.status}:\n${r.stdout}${r.stderr}`)
      log(`built ${file} in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    }
    writeFileSync(stamp, key)
    return out
  } finally {
    release()
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4))

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

/**
 * Takes the peer's build lock (a folder holding the builder's pid), waiting while another live
 * process holds it; a lock whose process is gone is taken over. Returns the release function.
 */
export function acquireLock(name, log) {
  const dir = path.join(PEERS_OUT, '.locks', name.replaceAll('/', '_'))
  const pidFile = path.join(dir, 'pid')
  mkdirSync(path.dirname(dir), {recursive: true})
  let said = false
  for (;;) {
    try {
      mkdirSync(dir)
      writeFileSync(pidFile, String(process.pid))
      return () => rmSync(dir, {recursive: true, force: true})
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
    }
    let pid = Number.NaN
    try {
      pid = Number(readFileSync(pidFile, 'utf8'))
    } catch {
      // the holder has made the folder but not written its pid yet
    }
    if (Number.isInteger(pid) && pid > 0 && !alive(pid)) {
      rmSync(dir, {recursive: true, force: true})
      continue
    }
    if (!said) {
      log(`waiting for ${name}: another process (pid ${pid}) is building it`)
      said = true
    }
    Atomics.wait(sleeper, 0, 0, 500)
  }
}
