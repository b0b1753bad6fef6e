// `npm test`: installs what the tests need, builds, and runs every mocha suite.
// Extra arguments go to mocha (e.g. `npm test -- --grep exec`); a first argument --unit or
// --integration runs that set alone (test/suites.mjs).
import {spawn} from 'node:child_process'
import path from 'node:path'

import {ROOT, ensureBuilt, ensureClusterBinaries, ensureNpmDependencies, ensureTestPackages} from './setup.mjs'
import {mochaSelection} from '../test/suites.mjs'

const args = process.argv.slice(2)
const set = ['--unit', '--integration'].includes(args[0]) ? args.shift().slice(2) : 'all'
ensureNpmDependencies()
if (set !== 'unit') ensureTestPackages()
ensureBuilt()
if (set !== 'unit') await ensureClusterBinaries()

const mocha = path.join(ROOT, 'node_modules', '.bin', 'mocha')
const child = spawn(mocha, [...mochaSelection(set), ...args], {cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit']})
let tail = ''
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk)
  tail = (tail + chunk.toString()).slice(-4000)
})
child.on('close', (code, signal) => {
  const passing = Number(/(\d+) passing/.exec(tail)?.[1] ?? 0)
  const failing = Number(/(\d+) failing/.exec(tail)?.[1] ?? 0)
  const pending = Number(/(\d+) pending/.exec(tail)?.[1] ?? 0)
  // A plain summary line that CI reads in any language.
  process.stdout.write(`\n${passing} passed, ${failing} failed${pending ? `, ${pending} skipped` : ''}\n`)
  if (signal) process.exit(1)
  process.exit(code ?? 1)
})
