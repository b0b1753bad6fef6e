// porch-server and porchctl of Porch v1.5.8, built from the module proxy as a Go peer
// (scripts/go-peers.mjs; test/peers/porch-server is the consumer module, output in
// .cache/peers/porch-server/, git-ignored). Too slow for npm test's default path (tens of minutes
// cold on two cores): only `npm run porch-e2e` (scripts/porch-e2e.mjs) builds it, on demand.
// Only Node built-ins here.
import path from 'node:path'

import {buildGoPeer} from './go-peers.mjs'

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

if (process.argv[1] && path.resolve(process.argv[1]) === new URL(import.meta.url).pathname) {
  const started = Date.now()
  buildPorchServer()
  process.stderr.write(`peers: porch-server and porchctl ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
}
