// `npm test`: installs what the tests need, builds, and runs every mocha suite.
// Extra arguments go to mocha (e.g. `npm test -- --grep exec`); a first argument --unit or
// --integration runs that set alone (test/suites.mjs).
import {spawn} from 'node:child_process'
import {mkdirSync, openSync} from 'node:fs'
import path from 'node:path'

import {PEERS_OUT} from './go-peers.mjs'
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

const mocha = path.join(ROOT, 'node_modules', '.bin', 'mocha')
const child = spawn(mocha, [...mochaSelection(set), ...args], {cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit']})
// mocha's summary ("N passing (…)", "N pending", "N failing") is read line by line as it comes:
// the failures printed after it can be long enough to push it out of any fixed-size tail.
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
  // A run that needed no peer (--grep, say) leaves no build running behind it.
  if (peers && peers.exitCode === null && peers.signalCode === null) {
    try {
      process.kill(-peers.pid, 'SIGTERM')
    } catch {
      // already gone
    }
  }
  const {passing, failing, pending} = summary
  // A plain summary line that CI reads in any language.
  process.stdout.write(`\n${passing} passed, ${failing} failed${pending ? `, ${pending} skipped` : ''}\n`)
  if (signal) process.exit(1)
  process.exit(code ?? 1)
})
