// `npm test`: installs what the tests need, builds, and runs every mocha suite.
// Extra arguments go to mocha (e.g. `npm test -- --grep exec`); a first argument --unit or
// --integration runs that set alone (test/suites.mjs).
import {spawn} from 'node:child_process'
import {mkdirSync, openSync} from 'node:fs'
import path from 'node:path'

import {PEERS_OUT} from './go-peers.mjs'
import {runMocha, runMochaLanes} from './mocha-run.mjs'
import {ROOT, ensureBuilt, ensureNpmDependencies, ensureSupportedNode, ensureTestPackages} from './setup.mjs'
import {mochaLanes, mochaSelection} from '../test/suites.mjs'

ensureSupportedNode()
const args = process.argv.slice(2)
const set = ['--unit', '--integration'].includes(args[0]) ? args.shift().slice(2) : 'all'
ensureNpmDependencies()
if (set !== 'unit') ensureTestPackages()
ensureBuilt()
const peers = set === 'unit' ? undefined : startPeerBuild()

/**
 * The Go test peers (catalog functions, Go client, Porch's runner, the control plane) build in the
 * background at low priority while the suites that need none run (the peer lane starts once the
 * build has ended; in one lane, test/suites.mjs runs the peer suites last and a suite that needs a
 * peer still building waits for it). Cached builds take seconds.
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

// A run that needed no peer (--grep, say) leaves no build running behind it.
const stopPeerBuild = () => {
  if (peers && peers.exitCode === null && peers.signalCode === null) {
    try {
      process.kill(-peers.pid, 'SIGTERM')
    } catch {
      // already gone
    }
  }
}

/** Resolves once the background peer build has ended, however it ended. */
const peersBuilt = (builder) =>
  new Promise((resolve) => {
    if (builder.exitCode !== null || builder.signalCode !== null) resolve()
    builder.once('exit', resolve)
    builder.once('error', resolve)
  })

// Lanes (test/suites.mjs mochaLanes): the whole set runs as two mocha processes at once, the one
// that needs the Go peers started once their build has ended. A run given mocha arguments (--grep,
// a file) is one process, as is FNR_TEST_LANES=1 (one lane, the order of mochaSelection).
if (peers && args.length === 0 && process.env.FNR_TEST_LANES !== '1') {
  const [other, peer] = mochaLanes(set)
  runMochaLanes([other, {...peer, after: peersBuilt(peers)}], {beforeExit: stopPeerBuild})
} else {
  runMocha([...mochaSelection(set), ...args], {beforeExit: stopPeerBuild})
}
