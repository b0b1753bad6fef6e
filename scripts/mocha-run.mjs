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
 *
 * mocha runs in a process group of its own, and SIGTERM, SIGINT and SIGHUP sent to this process go
 * to that whole group: with `node-option` (.mocharc.json) mocha's launcher starts the process that
 * runs the tests as its child and passes it SIGINT only, so a CI limit's SIGTERM would leave the
 * tests (and the control plane they started) running. The test process then runs its teardown
 * (test/support/teardown.ts) before it ends.
 */
export function runMocha(args, {beforeExit} = {}) {
  const child = spawn(path.join(ROOT, 'node_modules', '.bin', 'mocha'), args, {cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], detached: true})
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => {
      try {
        process.kill(-child.pid, signal)
      } catch {
        // the group is gone already
      }
    })
  }
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
