// The real catalog functions Porch ships, Porch's own runner and a Go gRPC client, built as test
// peers (scripts/go-peers.mjs; git-ignored output in .cache/peers/).
//
// Porch ships ten catalog functions (docs/catalog-functions.md). Three are built from their Go modules
// through the module proxy, each as its own consumer module (test/peers/catalog/<name>/) so it builds
// with exactly the dependency versions its own go.mod selects. The proxy refuses the modules of the
// other seven near the versions Porch ships; they are built from the catalog's source at one commit
// (../shared/peers/krm-functions-catalog, its README says what was measured): the source is copied
// into the peer cache at build time and built there with its own go.mod; set-labels first gets its
// SDK import path rewritten to the SDK's new home (the old path's pseudo-version is refused).
// `source` in CATALOG says which source answers. Only Node built-ins here: setup.mjs may import
// this before npm ci.
import {spawnSync} from 'node:child_process'
import {chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import path from 'node:path'

import {acquireLock, buildGoPeer, goBuildArgs, PEERS_OUT, ROOT, sourceKey} from './go-peers.mjs'

const KPTDEV = 'github.com/kptdev/krm-functions-catalog/functions/go'
const GCT = 'github.com/GoogleContainerTools/kpt-functions-catalog/functions/go'

/** The catalog's source: functions/go/<name>/ of kptdev/krm-functions-catalog at CATALOG_SOURCE_COMMIT. */
export const CATALOG_SOURCE = process.env.FNR_CATALOG_SOURCE || path.join(ROOT, '..', 'shared', 'peers', 'krm-functions-catalog')
export const CATALOG_SOURCE_COMMIT = '76fe3817f9496724ca04414d136917a9926e5e40'
/** The version recorded for a function built from the source (also its image tag in the pod suites). */
const SOURCE_VERSION = `src-${CATALOG_SOURCE_COMMIT.slice(0, 8)}`

const fromSource = (name, wanted, extra = {}) => ({name, source: 'catalog-source', module: `${KPTDEV}/${name}`, version: SOURCE_VERSION, wanted, ...extra})

/**
 * The ten catalog functions Porch ships: {name, source, module, version, wanted}. `source` is
 * 'module-proxy' (the module at `version`) or 'catalog-source' (CATALOG_SOURCE; `version` names the
 * commit); `wanted` is the version Porch ships.
 */
export const CATALOG = [
  {name: 'apply-setters', source: 'module-proxy', module: `${KPTDEV}/apply-setters`, version: 'v0.2.2', wanted: 'v0.2.2'},
  {name: 'set-namespace', source: 'module-proxy', module: `${GCT}/set-namespace`, version: 'v0.4.1', wanted: 'v0.4.2'},
  {name: 'starlark', source: 'module-proxy', module: `${KPTDEV}/starlark`, version: 'v0.5.5', wanted: 'v0.5.2'},
  fromSource('ensure-name-substring', 'v0.2.1'),
  fromSource('search-replace', 'v0.2.1'),
  fromSource('set-annotations', 'v0.1.5'),
  fromSource('set-image', 'v0.1.2'),
  fromSource('set-labels', 'v0.2.2', {sdkRewrite: true}),
  fromSource('set-project-id', 'v0.2.1'),
  fromSource('upsert-resource', 'v0.2.1'),
]

/** Functions Porch ships that are not built here: none since the catalog's source builds them. */
export const MISSING = []

/** Folder holding the built catalog binaries under their function names (Porch's image layout). */
export const CATALOG_FUNCTIONS_DIR = path.join(PEERS_OUT, 'catalog', 'functions')

// The checksum database has no entry for the kptdev paths (the proxy serves them); go.sum pins them.
const ENV = {GONOSUMDB: 'github.com/kptdev/krm-functions-catalog'}
// From source: the catalog's modules and the SDK's new home (github.com/kptdev/krm-functions-sdk) alike.
const SOURCE_ENV = {GONOSUMDB: 'github.com/kptdev'}
// The copy sits inside fnr's git checkout (.cache/peers is git-ignored): no VCS stamp of fnr's commit in the binary.
const SOURCE_GOFLAGS = '-mod=mod -buildvcs=false'

// The SDK's old import path, whose pseudo-versions the proxy refuses, and its new home.
const SDK_OLD = 'github.com/GoogleContainerTools/kpt-functions-sdk'
const SDK_NEW = 'github.com/kptdev/krm-functions-sdk'
const SDK_NEW_VERSION = 'v1.0.2'

/**
 * Points a copied module at the SDK's new home: `<old>/go/fn` imports become `<new>/go/fn`, go.mod
 * requires `<new>/go/fn v1.0.2` and drops its other requirements on the old path (the indirect
 * `go/api` pseudo-version is refused too; the new SDK brings its own).
 */
export function rewriteSdk(dir) {
  const walk = (d) => {
    for (const entry of readdirSync(d, {withFileTypes: true})) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) walk(p)
      else if (entry.name.endsWith('.go')) {
        const text = readFileSync(p, 'utf8')
        if (text.includes(`${SDK_OLD}/go/fn`)) writeFileSync(p, text.replaceAll(`${SDK_OLD}/go/fn`, `${SDK_NEW}/go/fn`))
      }
    }
  }
  walk(dir)
  const goMod = path.join(dir, 'go.mod')
  const lines = readFileSync(goMod, 'utf8').split('\n')
  const out = []
  for (const line of lines) {
    if (!line.includes(`${SDK_OLD}/`)) out.push(line)
    else if (/^\s*(require\s+)?github\.com\/GoogleContainerTools\/kpt-functions-sdk\/go\/fn\s/.test(line)) out.push(line.replace(/github\.com\/GoogleContainerTools\/kpt-functions-sdk\/go\/fn\s+\S+/, `${SDK_NEW}/go/fn ${SDK_NEW_VERSION}`))
  }
  if (!out.some((l) => l.includes(`${SDK_NEW}/go/fn ${SDK_NEW_VERSION}`))) throw new Error(`${goMod}: no requirement on ${SDK_OLD}/go/fn to rewrite`)
  writeFileSync(goMod, out.join('\n'))
}

const defaultLog = (m) => process.stderr.write(`peers: ${m}\n`)

/** Where a function from the source is built, and the cache key of its source. */
function sourceBuild(fn) {
  const src = path.join(CATALOG_SOURCE, 'functions', 'go', fn.name)
  if (!existsSync(path.join(src, 'go.mod'))) throw new Error(`catalog source of ${fn.name} not found at ${src} (kptdev/krm-functions-catalog at ${CATALOG_SOURCE_COMMIT}; set FNR_CATALOG_SOURCE to its folder)`)
  const out = path.join(PEERS_OUT, 'catalog', fn.name)
  const binary = path.join(out, 'function')
  const stamp = path.join(out, '.source-key')
  const key = sourceKey(src) + JSON.stringify({commit: CATALOG_SOURCE_COMMIT, sdk: fn.sdkRewrite ? `${SDK_NEW}@${SDK_NEW_VERSION}` : null, env: SOURCE_ENV, goflags: SOURCE_GOFLAGS})
  const done = () => existsSync(stamp) && readFileSync(stamp, 'utf8') === key && existsSync(binary)
  return {fn, src, out, binary, stamp, key, done, work: path.join(out, 'src')}
}

// Two builds at a time: on 2 cores one `go build` leaves the CPU idle while it downloads modules and
// links; the seven share GOMODCACHE, so a module version two of them need is downloaded once.
const PARALLEL_BUILDS = 2

/**
 * Builds functions from CATALOG_SOURCE into .cache/peers/catalog/<name>/function (each cached while
 * its source folder is unchanged, under the same per-peer build lock as scripts/go-peers.mjs, taken in
 * CATALOG order). Each source folder is copied to .cache/peers/catalog/<name>/src/ and built there,
 * so nothing is written into the shared source; at most PARALLEL_BUILDS `go build`s run at once.
 * Throws with Go's output for the builds that failed (the others are kept).
 */
export function buildFromCatalogSource(fns, {log = defaultLog} = {}) {
  const builds = fns.map(sourceBuild).filter((b) => !b.done())
  if (builds.length === 0) return
  const releases = []
  try {
    const todo = []
    for (const b of builds) {
      releases.push(acquireLock(`catalog/${b.fn.name}`, log))
      if (b.done()) continue
      rmSync(b.work, {recursive: true, force: true})
      rmSync(path.join(b.out, 'build.rc'), {force: true})
      mkdirSync(b.out, {recursive: true})
      cpSync(b.src, b.work, {recursive: true})
      if (b.fn.sdkRewrite) rewriteSdk(b.work)
      log(`building catalog/${b.fn.name} from the catalog's source${b.fn.sdkRewrite ? ` (SDK import path rewritten to ${SDK_NEW}/go/fn ${SDK_NEW_VERSION})` : ''}`)
      todo.push(b)
    }
    if (todo.length === 0) return
    const started = Date.now()
    const env = {...process.env, CGO_ENABLED: '0', GOFLAGS: SOURCE_GOFLAGS, ...SOURCE_ENV}
    // xargs runs them; each writes its output to build.log and its exit status to build.rc beside src/.
    const each = `cd "$1" && { go ${goBuildArgs('.', '../function').join(' ')} >../build.log 2>&1; echo $? >../build.rc; }`
    const r = spawnSync('xargs', ['-0', '-n', '1', '-P', String(PARALLEL_BUILDS), 'sh', '-c', each, 'sh'], {input: todo.map((b) => `${b.work}\0`).join(''), env, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe']})
    if (r.error) throw r.error
    const failed = []
    for (const b of todo) {
      const rc = existsSync(path.join(b.out, 'build.rc')) ? readFileSync(path.join(b.out, 'build.rc'), 'utf8').trim() : 'none'
      if (rc === '0' && existsSync(b.binary)) writeFileSync(b.stamp, b.key)
      else failed.push(`go build (catalog/${b.fn.name} from ${b.src}) failed with exit code ${rc}:\n${existsSync(path.join(b.out, 'build.log')) ? readFileSync(path.join(b.out, 'build.log'), 'utf8') : r.stderr}`)
    }
    log(`built ${todo.length - failed.length} of ${todo.length} catalog functions from the catalog's source in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    if (failed.length > 0) throw new Error(failed.join('\n'))
  } finally {
    for (const release of releases.reverse()) release()
  }
}

/** Builds one function of CATALOG from its source (cached); returns the binary's path. */
function buildCatalogFunction(fn, options) {
  if (fn.source === 'catalog-source') {
    buildFromCatalogSource([fn], options)
    return sourceBuild(fn).binary
  }
  const out = buildGoPeer(`catalog/${fn.name}`, [{pkg: fn.module, out: 'function'}], {env: ENV, ...options})
  return path.join(out, 'function')
}

/** Builds every function of CATALOG (cached) and returns CATALOG_FUNCTIONS_DIR. */
export function buildCatalogFunctions(options = {}) {
  mkdirSync(CATALOG_FUNCTIONS_DIR, {recursive: true})
  // The ones from source first, two at a time; the loop below then finds them built.
  buildFromCatalogSource(CATALOG.filter((f) => f.source === 'catalog-source'), options)
  for (const fn of CATALOG) {
    const src = buildCatalogFunction(fn, options)
    const dest = path.join(CATALOG_FUNCTIONS_DIR, fn.name)
    if (!existsSync(dest) || statSync(dest).mtimeMs < statSync(src).mtimeMs || statSync(dest).size !== statSync(src).size) {
      copyFileSync(src, dest)
      chmodSync(dest, 0o755)
    }
  }
  return CATALOG_FUNCTIONS_DIR
}

const PORCH = 'github.com/nephio-project/porch'

/** Porch v1.5.8's function runner and wrapper server: returns {server, wrapperServer}. */
export function buildPorchRunner(options = {}) {
  const out = buildGoPeer('porch', [
    {pkg: `${PORCH}/func/server`, out: 'server'},
    {pkg: `${PORCH}/func/wrapper-server`, out: 'wrapper-server'},
  ], options)
  return {server: path.join(out, 'server'), wrapperServer: path.join(out, 'wrapper-server')}
}

/**
 * grpc-health-probe, the exec probe Porch's wrapper-server image ships beside its wrapper
 * (test/peers/grpc-health-probe): fnr's own probe is compared with it.
 */
export function buildHealthProbe(options = {}) {
  return path.join(buildGoPeer('grpc-health-probe', [{pkg: 'github.com/grpc-ecosystem/grpc-health-probe', out: 'grpc-health-probe'}], options), 'grpc-health-probe')
}

/** The Go client that calls a runner as porch-server does (test/peers/goclient). */
export function buildGoClient(options = {}) {
  return path.join(buildGoPeer('goclient', [{pkg: '.', out: 'goclient'}], options), 'goclient')
}

/**
 * Porch v1.5.8's own client path (pkg/engine, pkg/task, kpt's renderer, the gRPC function runtime)
 * around in-memory storage (test/peers/porchclient): runs PackageRevisionResources updates against
 * a runner and prints what Porch sees.
 */
export function buildPorchClient(options = {}) {
  // pkg/engine's built-in functions come from the catalog's modules: the same checksum exception
  return path.join(buildGoPeer('porchclient', [{pkg: '.', out: 'porchclient'}], {env: ENV, ...options}), 'porchclient')
}

// `node scripts/catalog-peers.mjs` builds them all (what a fresh CI machine does before the tests).
if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const started = Date.now()
  buildCatalogFunctions()
  buildGoClient()
  buildPorchRunner()
  buildPorchClient()
  process.stderr.write(`peers: catalog functions, goclient, Porch's runner and Porch's client ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
}
