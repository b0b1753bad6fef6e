// Builds every Go test peer (scripts/go-peers.mjs): the catalog functions, the Go client, Porch's
// runner, Porch's client and the control plane, each cached in .cache/peers/. `npm test` runs this
// in the background, at low priority, while the suites that need no peer run first (test/suites.mjs puts
// the peer suites last); a suite that needs a peer still being built waits for its build lock.
// On a machine that built them before this is a few seconds of checks.
import {buildCatalogFunctions, buildGoClient, buildHealthProbe, buildPorchClient, buildPorchRunner} from './catalog-peers.mjs'
import {buildClusterBinaries} from './cluster-build.mjs'
import {fetchKptE2e} from './kpt-e2e.mjs'

const started = Date.now()
let failed = false
// In the order the peer suites run: catalog, Porch side by side, then the cluster suites.
for (const [what, build] of [
  ['kpt e2e cases', fetchKptE2e],
  ['catalog functions', buildCatalogFunctions],
  ['Go client', buildGoClient],
  ["Porch's runner", buildPorchRunner],
  ['grpc-health-probe', buildHealthProbe],
  ["Porch's client", buildPorchClient],
  ['control plane', buildClusterBinaries],
]) {
  try {
    build()
  } catch (err) {
    // The suite that needs it builds it again in the foreground and fails with Go's output.
    failed = true
    process.stderr.write(`peers: ${what} did not build: ${String(err.message).split('\n').slice(0, 20).join('\n')}\n`)
  }
}
process.stderr.write(`peers: ${failed ? 'done, with failures' : 'all built'} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
process.exit(failed ? 1 : 0)
