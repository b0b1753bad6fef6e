// `npm run porch-e2e`: porch-server itself with fnr as its function runner (test/porch-e2e/, docs/porch-swap.md): as a
// process on loopback, and as a pod from Porch's own Deployment on the control plane's runc node (root and runc).
// Not part of `npm test`: porch-server's cold build takes most of an hour on two cores. This script builds what the
// suite needs on demand (at low priority: porch-server and porchctl, Porch's own e2e API suite as a test binary, the
// catalog functions, Porch's own runner, the control plane; each cached in .cache/peers/ as the other peers are), then
// runs the suite's specs with mocha.
// Extra arguments go to mocha.
import {spawnSync} from 'node:child_process'

import {runMocha} from './mocha-run.mjs'
import {ROOT, ensureBuilt, ensureNpmDependencies, ensureSupportedNode, ensureTestPackages} from './setup.mjs'

ensureSupportedNode()
ensureNpmDependencies()
ensureTestPackages()
ensureBuilt()

const started = Date.now()
const build = `
  const {buildPorchE2e, buildPorchServer} = await import('./scripts/porch-peers.mjs')
  const {buildCatalogFunctions, buildPorchRunner} = await import('./scripts/catalog-peers.mjs')
  const {buildClusterBinaries} = await import('./scripts/cluster-build.mjs')
  buildClusterBinaries()
  buildCatalogFunctions()
  buildPorchRunner()
  buildPorchServer()
  buildPorchE2e()
`
process.stderr.write('porch-e2e: building the peers (porch-server, porchctl, Porch\'s e2e API suite, catalog functions, Porch\'s runner, control plane; cached)\n')
const built = spawnSync('nice', ['-n', '19', process.execPath, '--input-type=module', '-e', build], {cwd: ROOT, stdio: 'inherit'})
if (built.status !== 0) {
  process.stderr.write(`porch-e2e: the peer build failed (exit ${built.status})\n`)
  process.exit(1)
}
process.stderr.write(`porch-e2e: peers ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)

runMocha(['--spec', 'test/porch-e2e/**/*.test.ts', ...process.argv.slice(2)])
