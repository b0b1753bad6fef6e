// `npm test`: installs what the tests need, builds, and runs every mocha suite.
// Extra arguments go to mocha (e.g. `npm test -- --grep exec`); a first argument --unit or
// --integration runs that set alone (test/suites.mjs).
import {spawn} from 'node:child_process'
import {mkdirSync, openSync} from 'node:fs'
import path from 'node:path'

import {PEERS_OUT} from './go-peers.mjs'
import {runMocha} from './mocha-run.mjs'
import {ROOT, ensureBuilt, ensureNpmDependencies, ensureSupportedNode, ensureTestPackages} from './setup.mjs'
import {mochaSelection} from '../test/suites.mjs'

ensureSupportedNode()
const args = process.argv.slice(2)
const set = ['--unit', '--integration'].includes(args[0]) ? args.shift().slice(2) : 'all'
ensureNpmDependencies()
if (set !== 'unit') ensureTestPackages()
ensureBuilt()
const peers = set === 'unit' ? undefined : startPeerBuild()

/**
 * The Go test peers (catalog functions, Go client, Porch's runner, the control plane) build in the
 * background at low priority while the suites that need none run (test/suites.mjs runs the peer
 * suites last; a suite that needs a peer still building waits for it). Cached builds take seconds.
 */
function startPeerBuild() {
  mkdirSync(PEERS_OUT, {recursive: true})
  const logFile = path.join(PEERS_OUT, 'build.log')
  const out = openSync(logFile, 'w')
  process.stderr.write(`setup: building the Go test peers in the background (log: ${path.relative(ROOT, logFile)})\n`)
  const builder = spawn('nice', ['-n', '19', process.execPath, path.join(ROOT, 'scripts', 'build-peers.mjs')], {cwd: ROOT, stdio: ['ignore', out, out], detached: true})
  builder.on('error', (err) => process.stderr.write(`setup: the peer build did not start: ${err.message}\n`))
  return builder
}

runMocha([...mochaSelection(set), ...args], {
  // A run that needed no peer (--grep, say) leaves no build running behind it.
  beforeExit: () => {
    if (peers && peers.exitCode === null && peers.signalCode === null) {
      try {
        process.kill(-peers.pid, 'SIGTERM')
      } catch {
        // already gone
      }
    }
  },
})
