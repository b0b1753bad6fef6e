// porch-server and porchctl of Porch v1.5.8, built from the module proxy as a Go peer
// (scripts/go-peers.mjs; test/peers/porch-server is the consumer module, output in
// .cache/peers/porch-server/, git-ignored). Too slow for npm test's default path (tens of minutes
// cold on two cores): only `npm run porch-e2e` (scripts/porch-e2e.mjs) builds it, on demand.
// Porch's e2e API suite (test/e2e/api) is built the same way, as a test binary (`go test -c`; module
// test/peers/porch-e2e, output in .cache/peers/porch-e2e/). Only Node built-ins here.
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, readFileSync, symlinkSync, rmSync, writeFileSync} from 'node:fs'
import path from 'node:path'

import {PEERS_SRC, acquireLock, buildGoPeer, peerBinDir, sourceKey} from './go-peers.mjs'

const PORCH = 'github.com/nephio-project/porch'

export const PORCH_SERVER_TARGETS = [
  {pkg: `${PORCH}/cmd/porch`, out: 'porch'},
  {pkg: `${PORCH}/cmd/porchctl`, out: 'porchctl'},
]

// The checksum database has no entry for the catalog's kptdev paths (the proxy serves them); go.sum
// pins them. One package at a time: the build shares two cores with everything else.
const ENV = {GONOSUMDB: 'github.com/kptdev/krm-functions-catalog', GOFLAGS: '-mod=mod -p=1'}

/** Builds (or reuses) porch-server and porchctl; returns {porch, porchctl}. */
export function buildPorchServer(options = {}) {
  const out = buildGoPeer('porch-server', PORCH_SERVER_TARGETS, {env: ENV, flags: ['-ldflags=-s -w'], ...options})
  return {porch: path.join(out, 'porch'), porchctl: path.join(out, 'porchctl')}
}

export const PORCH_E2E_PKG = `${PORCH}/test/e2e/api`
const KPT = 'github.com/kptdev/kpt'

/**
 * Builds (or reuses) Porch v1.5.8's e2e API suite as one test binary, and Go's test2json beside it (to read the
 * binary's -test.v output as events); returns {test, test2json}.
 *
 * Its render-failure tests name kptfilev1.SaveOnRenderFailureAnnotation, which kpt v1.0.0-beta.61 (the
 * release the module proxy serves; test/peers/porch-server/go.mod) does not define. The build adds that one
 * constant to kpt's kptfile/v1 package with `go test -overlay` (test/peers/porch-e2e/overlay/). The go
 * command refuses overlays of files beneath GOMODCACHE, so a workspace file (in the output folder) replaces
 * kpt's module with a symlink to the same folder of the module cache: the same files, read in place, nothing
 * written there, and Porch's files untouched.
 */
export function buildPorchE2e({log = (m) => process.stderr.write(`peers: ${m}\n`)} = {}) {
  const name = 'porch-e2e'
  const src = path.join(PEERS_SRC, name)
  const out = peerBinDir(name)
  const binary = path.join(out, 'porch-e2e-api.test')
  const stamp = path.join(out, '.source-key')
  const key = sourceKey(src) + JSON.stringify({pkg: PORCH_E2E_PKG, env: ENV})
  const test2json = path.join(out, 'test2json')
  const built = () => existsSync(stamp) && readFileSync(stamp, 'utf8') === key && existsSync(binary)
  const done = () => built() && existsSync(test2json)
  if (done()) return {test: binary, test2json}
  const release = acquireLock(name, log)
  try {
    if (done()) return {test: binary, test2json}
    mkdirSync(out, {recursive: true})
    const env = {...process.env, CGO_ENABLED: '0', ...ENV}
    const go = (args, extra = {}) => {
      const r = spawnSync('go', args, {cwd: src, env: {...env, ...extra}, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024})
      if (r.status !== 0) throw new Error(`go ${args.join(' ')} (peer ${name}) failed with exit code ${r.status}:\n${r.stdout}${r.stderr}`)
      return r.stdout.trim()
    }
    if (!existsSync(test2json)) go(['build', '-trimpath', '-o', test2json, 'cmd/test2json'])
    if (built()) return {test: binary, test2json}
    const kptDir = go(['list', '-m', '-f', '{{.Dir}}', KPT])
    if (!kptDir || !existsSync(kptDir)) throw new Error(`kpt's module folder is missing: ${kptDir || KPT}`)
    const link = path.join(out, 'kpt')
    rmSync(link, {force: true})
    symlinkSync(kptDir, link)
    const overlay = path.join(out, 'overlay.json')
    writeFileSync(overlay, JSON.stringify({Replace: {[path.join(link, 'pkg', 'api', 'kptfile', 'v1', 'zz_fnr_overlay.go')]: path.join(src, 'overlay', 'save_on_render_failure.go.in')}}))
    const work = path.join(out, 'go.work')
    const goVersion = /^go (\S+)$/m.exec(readFileSync(path.join(src, 'go.mod'), 'utf8'))?.[1] ?? '1.25'
    writeFileSync(work, `go ${goVersion}\n\nuse ${src}\n\nreplace ${KPT} => ${link}\n`)
    const started = Date.now()
    log(`building ${name}: go test -c ${PORCH_E2E_PKG}`)
    // Workspace mode allows no -mod=mod: the module's go.sum already lists the suite's dependencies.
    go(['test', '-c', '-vet=off', '-trimpath', `-overlay=${overlay}`, '-o', binary, '-ldflags=-s -w', PORCH_E2E_PKG], {GOWORK: work, GOFLAGS: '-p=1'})
    log(`built porch-e2e-api.test in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    writeFileSync(stamp, key)
    return {test: binary, test2json}
  } finally {
    release()
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const started = Date.now()
  buildPorchServer()
  process.stderr.write(`peers: porch-server and porchctl ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
}
