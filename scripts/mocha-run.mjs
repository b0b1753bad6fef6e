// Runs mocha for the npm scripts (`npm test`, `npm run porch-e2e`) and ends with one plain line that
// CI reads in any language: `N passed, N failed[, N skipped]`.
import {spawn} from 'node:child_process'
import path from 'node:path'

import {ROOT} from './setup.mjs'

/** Runs one mocha process with `args` (runMochaLanes with one lane). */
export function runMocha(args, options = {}) {
  runMochaLanes([{name: '', args}], options)
}

/**
 * Runs one mocha process per lane, all at once, and ends when all have ended. A lane is
 * `{name, args, nice?, after?}`: mocha's arguments, its niceness (nice(1): a lane whose suites
 * bear being slowed yields the CPU to one whose suites time real probes), and a promise to wait
 * for before it starts, at the
 * latest until the lanes before it have ended (the peer lane waits for the Go peers' build: on a
 * warm Go cache seconds; on a cold one the other lane ends first, and the peer lane's suites then
 * wait for the peers they need as one lane's did). The first lane's output is passed through as it comes;
 * each other lane's is kept and printed, under a header, once the lanes before it have ended (then
 * passed through as it comes), so no two lanes' lines interleave. Each mocha runs with
 * FNR_TEST_LANE set to its lane's name (the timing reporter names its file after it).
 *
 * mocha's summary ("N passing (…)", "N pending", "N failing") is read line by line as it comes (the
 * failures printed after it can be long enough to push it out of any fixed-size tail), and the
 * lanes' counts are added up. The failures a lane printed after its "N failing" line are repeated,
 * shortened, just before the summary line: a lane's output can end long before the run does (the
 * other lanes' output follows it), and a reader of the run's last lines must still see which test
 * failed and why. `beforeExit` runs once every mocha has ended, before the summary
 * line; then the process exits with the first failed lane's mocha code (1 for a lane killed by a
 * signal), else 0.
 *
 * Each mocha runs in a process group of its own, and SIGTERM, SIGINT and SIGHUP sent to this
 * process go to every group: with `node-option` (.mocharc.json) mocha's launcher starts the process
 * that runs the tests as its child and passes it SIGINT only, so a CI limit's SIGTERM would leave
 * the tests (and the control plane they started) running. The test process then runs its teardown
 * (test/support/teardown.ts) before it ends. A lane still waiting to start when a signal comes
 * never starts.
 */
export function runMochaLanes(lanes, {beforeExit} = {}) {
  const children = []
  let stopping = false
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => {
      stopping = true
      for (const child of children) {
        try {
          process.kill(-child.pid, signal)
        } catch {
          // the group is gone already
        }
      }
    })
  }
  const summary = {passing: 0, failing: 0, pending: 0}
  const states = lanes.map(() => ({kept: [], ended: false, code: 0, ms: 0, failures: [], inFailures: false}))
  /** The first lane that has not ended: its output goes straight through. */
  let current = 0
  const advance = () => {
    while (current < lanes.length && states[current].ended) {
      current++
      if (current < lanes.length) {
        const lane = lanes[current]
        process.stdout.write(`\n── lane ${lane.name} (ran beside the lane before it; its output follows) ──\n`)
        for (const chunk of states[current].kept) process.stdout.write(chunk)
        states[current].kept = []
      }
    }
  }
  if (lanes.length > 1) {
    process.stdout.write(`tests: ${lanes.length} lanes of spec files at once (${lanes.map((l) => l.name).join(', ')}); each prints its output once the one before it has ended\n`)
  }
  const ended = []
  lanes.forEach((lane, i) =>
    ended.push(
      new Promise((resolve) => {
        const state = states[i]
        const finish = (code) => {
          state.ended = true
          state.code = code
          advance()
          resolve()
        }
        const start = () => {
          if (stopping) return finish(1)
          const started = Date.now()
          const mocha = path.join(ROOT, 'node_modules', '.bin', 'mocha')
          // nice execs mocha: the same process, so the group and the signals are mocha's.
          const [command, args] = lane.nice ? ['nice', ['-n', String(lane.nice), mocha, ...lane.args]] : [mocha, lane.args]
          const child = spawn(command, args, {
            cwd: ROOT,
            stdio: ['ignore', 'pipe', 'inherit'],
            detached: true,
            env: {...process.env, FNR_TEST_LANE: lane.name},
          })
          children.push(child)
          let partial = ''
          child.stdout.on('data', (chunk) => {
            if (i === current) process.stdout.write(chunk)
            else state.kept.push(chunk)
            const lines = (partial + chunk.toString()).split('\n')
            partial = lines.pop() ?? ''
            for (const line of lines) {
              const m = /^ {2}(\d+) (passing|failing|pending)\b/.exec(line)
              if (m) summary[m[2]] += Number(m[1])
              if (m?.[2] === 'failing') state.inFailures = true
              // the timing reporter's list (test/support/timing-reporter.cjs) follows the failures
              else if (/^ {2}slowest spec files/.test(line)) state.inFailures = false
              else if (state.inFailures) state.failures.push(line)
            }
          })
          child.on('close', (code, signal) => {
            state.ms = Date.now() - started
            finish(signal ? 1 : (code ?? 1))
          })
        }
        if (!lane.after) return start()
        let begun = false
        const once = () => {
          if (begun) return
          begun = true
          start()
        }
        lane.after.then(once, once)
        // ... or once the lanes before it have ended, whichever comes first.
        Promise.all(ended.slice(0, i)).then(once)
      }),
    ),
  )
  Promise.all(ended).then(() => {
    beforeExit?.()
    const {passing, failing, pending} = summary
    if (lanes.length > 1) {
      const times = lanes.map((l, i) => `${l.name} ${Math.round(states[i].ms / 1000)} s${states[i].code ? ' (failed)' : ''}`)
      process.stdout.write(`\nlanes: ${times.join(', ')}\n`)
    }
    writeFailureRecap(lanes, states)
    process.stdout.write(`\n${passing} passed, ${failing} failed${pending ? `, ${pending} skipped` : ''}\n`)
    process.exit(states.find((s) => s.code !== 0)?.code ?? 0)
  })
}

/** Lines of one lane's failure report repeated at the end, at most. */
const RECAP_LINES = 40

/** Repeats each failed lane's failure report (its first RECAP_LINES lines) under a header. */
function writeFailureRecap(lanes, states) {
  states.forEach((state, i) => {
    const report = state.failures.filter((line) => !/^\s*at /.test(line))
    while (report.length && report[0].trim() === '') report.shift()
    while (report.length && report.at(-1).trim() === '') report.pop()
    if (!report.length) return
    const name = lanes[i].name ? `lane ${lanes[i].name}` : 'mocha'
    process.stdout.write(`\nfailures (${name}, repeated from above${report.length > RECAP_LINES ? `, first ${RECAP_LINES} lines without stack frames` : ', without stack frames'}):\n`)
    for (const line of report.slice(0, RECAP_LINES)) process.stdout.write(`${line}\n`)
  })
}
