// `npm run porch-e2e`: porch-server itself with fnr as its function runner (test/porch-e2e/, docs/porch-swap.md).
// Not part of `npm test`: porch-server's cold build takes most of an hour on two cores. This script builds what the
// suite needs on demand (at low priority: porch-server and porchctl, the catalog functions, Porch's own runner, the
// control plane; each cached in .cache/peers/ as the other peers are), then runs the suite's specs with mocha.
// Extra arguments go to mocha.
import {spawn, spawnSync} from 'node:child_process'
import path from 'node:path'

import {ROOT, ensureBuilt, ensureNpmDependencies, ensureSupportedNode, ensureTestPackages} from './setup.mjs'

ensureSupportedNode()
ensureNpmDependencies()
ensureTestPackages()
ensureBuilt()

const started = Date.now()
const build = `
  const {buildPorchServer} = await import('./scripts/porch-peers.mjs')
  const {buildCatalogFunctions, buildPorchRunner} = await import('./scripts/catalog-peers.mjs')
  const {buildClusterBinaries} = await import('./scripts/cluster-build.mjs')
  buildClusterBinaries()
  buildCatalogFunctions()
  buildPorchRunner()
  buildPorchServer()
`
process.stderr.write('porch-e2e: building the peers (porch-server, porchctl, catalog functions, Porch\'s runner, control plane; cached)\n')
const built = spawnSync('nice', ['-n', '19', process.execPath, '--input-type=module', '-e', build], {cwd: ROOT, stdio: 'inherit'})
if (built.status !== 0) {
  process.stderr.write(`porch-e2e: the peer build failed (exit ${built.status})\n`)
  process.exit(1)
}
process.stderr.write(`porch-e2e: peers ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)

const mocha = path.join(ROOT, 'node_modules', '.bin', 'mocha')
const child = spawn(mocha, ['--spec', 'test/porch-e2e/**/*.test.ts', ...process.argv.slice(2)], {cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit']})
const summary = {passing: 0, failing: 0, pending: 0}
let partial = ''
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk)
  const lines = (partial + chunk.toString()).split('\n')
  partial = lines.pop() ?? ''
  for (const line of lines) {
    const m = /^ {2}(\d+) (passing|failing|pending)\b/.exec(line)
    if (m) summary[m[2]] = Number(m[1])
  }
})
child.on('close', (code, signal) => {
  const {passing, failing, pending} = summary
  process.stdout.write(`\n${passing} passed, ${failing} failed${pending ? `, ${pending} skipped` : ''}\n`)
  process.exit(signal ? 1 : (code ?? 1))
})
