// mocha's spec reporter, plus the wall time of each spec file (its hooks included) at the end of
// the run, slowest first, and in .cache/test-times.json (test-times-<lane>.json for a lane of npm
// test, scripts/mocha-run.mjs): what to cut when the CI run nears its
// time limit (docs/contributing.md).
'use strict'
const fs = require('node:fs')
const path = require('node:path')
const {Spec} = require('mocha').reporters

const SHOWN = 15

class TimingReporter extends Spec {
  constructor(runner, options) {
    super(runner, options)
    /** file → milliseconds, from its first top-level suite's start to its last one's end */
    const times = new Map()
    const started = new Map()
    const fileOf = (suite) => (suite.file ? path.relative(process.cwd(), suite.file) : undefined)
    runner.on('suite', (suite) => {
      const file = suite.parent?.root ? fileOf(suite) : undefined
      if (file) started.set(suite, Date.now())
    })
    runner.on('suite end', (suite) => {
      const t0 = started.get(suite)
      if (t0 === undefined) return
      started.delete(suite)
      const file = fileOf(suite)
      times.set(file, (times.get(file) ?? 0) + Date.now() - t0)
    })
    runner.once('end', () => {
      const sorted = [...times].sort((a, b) => b[1] - a[1])
      const total = sorted.reduce((s, [, ms]) => s + ms, 0)
      if (sorted.length > 1) {
        process.stdout.write(`\n  slowest spec files (of ${sorted.length}, ${Math.round(total / 1000)} s in all, hooks included):\n`)
        for (const [file, ms] of sorted.slice(0, SHOWN)) process.stdout.write(`  ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`)
      }
      try {
        const dir = path.join(process.cwd(), '.cache')
        fs.mkdirSync(dir, {recursive: true})
        // One file per lane when npm test runs its spec files in lanes (scripts/mocha-run.mjs).
        const lane = process.env.FNR_TEST_LANE
        fs.writeFileSync(path.join(dir, lane ? `test-times-${lane}.json` : 'test-times.json'), JSON.stringify(Object.fromEntries(sorted.map(([f, ms]) => [f, ms])), null, 1) + '\n')
      } catch {
        // the listing above is what matters
      }
    })
  }
}

module.exports = TimingReporter
