// The real catalog functions Porch ships, Porch's own runner and a Go gRPC client, built from their
// Go modules through the module proxy as test peers (scripts/go-peers.mjs; git-ignored output in
// .cache/peers/). Each catalog function is its own consumer module (test/peers/catalog/<name>/) so
// it builds with exactly the dependency versions its own go.mod selects.
//
// Porch ships ten functions (docs/catalog-functions.md). The module proxy serves only some of their
// versions: CATALOG lists the versions that build here, `wanted` the version Porch ships and
// MISSING the ones for which no nearby version is served (docs/catalog-functions.md says which
// module versions were refused). Only Node built-ins here: setup.mjs may import this before npm ci.
import {copyFileSync, chmodSync, existsSync, mkdirSync, statSync} from 'node:fs'
import path from 'node:path'

import {buildGoPeer, PEERS_OUT} from './go-peers.mjs'

const KPTDEV = 'github.com/kptdev/krm-functions-catalog/functions/go'
const GCT = 'github.com/GoogleContainerTools/kpt-functions-catalog/functions/go'

/** The catalog functions built from the module proxy: {name, module, version, wanted}. */
export const CATALOG = [
  {name: 'apply-setters', module: `${KPTDEV}/apply-setters`, version: 'v0.2.2', wanted: 'v0.2.2'},
  {name: 'set-namespace', module: `${GCT}/set-namespace`, version: 'v0.4.1', wanted: 'v0.4.2'},
  {name: 'starlark', module: `${KPTDEV}/starlark`, version: 'v0.5.5', wanted: 'v0.5.2'},
]

/** Porch ships these too, but no version of their modules near the shipped one is served. */
export const MISSING = [
  {name: 'ensure-name-substring', wanted: 'v0.2.1'},
  {name: 'search-replace', wanted: 'v0.2.1'},
  {name: 'set-annotations', wanted: 'v0.1.5'},
  {name: 'set-image', wanted: 'v0.1.2'},
  {name: 'set-labels', wanted: 'v0.2.2'},
  {name: 'set-project-id', wanted: 'v0.2.1'},
  {name: 'upsert-resource', wanted: 'v0.2.1'},
]

/** Folder holding the built catalog binaries under their function names (Porch's image layout). */
export const CATALOG_FUNCTIONS_DIR = path.join(PEERS_OUT, 'catalog', 'functions')

// The checksum database has no entry for the kptdev paths (the proxy serves them); go.sum pins them.
const ENV = {GONOSUMDB: 'github.com/kptdev/krm-functions-catalog'}

/** Builds every function of CATALOG (cached) and returns CATALOG_FUNCTIONS_DIR. */
export function buildCatalogFunctions(options = {}) {
  mkdirSync(CATALOG_FUNCTIONS_DIR, {recursive: true})
  for (const fn of CATALOG) {
    const out = buildGoPeer(`catalog/${fn.name}`, [{pkg: fn.module, out: 'function'}], {env: ENV, ...options})
    const src = path.join(out, 'function')
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
