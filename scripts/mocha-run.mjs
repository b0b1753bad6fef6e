// Runs mocha for the npm scripts (`npm test`, `npm run porch-e2e`) and ends with one plain line that
// CI reads in any language: `N passed, N failed[, N skipped]`.
import {spawn} from 'node:child_process'
import path from 'node:path'

import {ROOT} from './setup.mjs'

/**
 * Runs mocha with `args`, passing its output through; mocha's summary ("N passing (…)", "N pending",
 * "N failing") is read line by line as it comes (the failures printed after it can be long enough to
 * push it out of any fixed-size tail). `beforeExit` runs once mocha has ended, before the summary
 * line; then the process exits with mocha's code (1 when mocha was killed by a signal).
 */
export function runMocha(args, {beforeExit} = {}) {
  const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'mocha'), args, {cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit']})
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
    beforeExit?.()
    const {passing, failing, pending} = summary
    process.stdout.write(`\n${passing} passed, ${failing} failed${pending ? `, ${pending} skipped` : ''}\n`)
    process.exit(signal ? 1 : (code ?? 1))
  })
}
