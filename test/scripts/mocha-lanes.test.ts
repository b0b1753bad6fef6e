/**
 * npm test's lanes (scripts/mocha-run.mjs runMochaLanes): two mocha processes at once, their
 * outputs printed one after the other (never interleaved), their counts added up, the run failed
 * when either lane fails, a waiting lane started by its promise or at the latest when the lane
 * before it ended, SIGTERM reaching both; and the split itself (test/suites.mjs mochaLanes).
 */
import {spawn} from 'node:child_process'
import {existsSync} from 'node:fs'
import {readFile, rm, writeFile} from 'node:fs/promises'
import {getPriority} from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'

import {TempDirs} from '../support/tmp.js'
import {OTHER_LANE_SPECS, PEER_LANE_FOLDERS, mochaLanes, mochaSelection} from '../suites.mjs'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const url = (rel: string): string => JSON.stringify(new URL(rel, `file://${ROOT}/`).href)

type Run = {code: number | null; stdout: string; stderr: string}

/**
 * Runs runMochaLanes in a child process on two lanes. `after` is the second lane's wait, as
 * JavaScript source of a promise (undefined: none).
 */
function runLanes(dir: string, first: string, second: string, after?: string, onStart?: (child: ReturnType<typeof spawn>) => void, firstNice?: number): Promise<Run> {
  const launcher = path.join(dir, 'lanes.mjs')
  const lanes = `[{name: 'one', ${firstNice ? `nice: ${firstNice}, ` : ''}args: ['--spec', ${JSON.stringify(first)}]}, {name: 'two', args: ['--spec', ${JSON.stringify(second)}]${after ? `, after: ${after}` : ''}}]`
  return writeFile(launcher, `import {runMochaLanes} from ${url('scripts/mocha-run.mjs')}\nrunMochaLanes(${lanes})\n`).then(
    () =>
      new Promise<Run>((resolve, reject) => {
        const child = spawn(process.execPath, [launcher], {cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe']})
        let stdout = ''
        let stderr = ''
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
        child.on('error', reject)
        child.on('close', (code) => resolve({code, stdout, stderr}))
        onStart?.(child)
      }),
  )
}

/** A spec whose tests each wait `ms`, then write a stamp (with the time) into `log`. */
function spec(name: string, tests: string[], log: string, ms = 300): string {
  return `
import {appendFileSync} from 'node:fs'
describe('lane fixture ${name}', () => {
${tests.map((t) => `  it(${JSON.stringify(t)}, async () => { await new Promise((r) => setTimeout(r, ${ms})); appendFileSync(${JSON.stringify(log)}, ${JSON.stringify(`${name}:${t}`)} + ' ' + Date.now() + '\\n')${t.startsWith('fails') ? "; throw new Error('it fails')" : ''} })`).join('\n')}
})
`
}

describe('npm test lanes: two mocha processes at once, one output after the other', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('runs both lanes at once, prints the second lane after the first, and adds up the counts', async () => {
    const dir = await temp.make('fnr-lanes-')
    const log = path.join(dir, 'stamps')
    await writeFile(path.join(dir, 'a.test.ts'), spec('a', ['first', 'second', 'third'], log, 1500))
    await writeFile(path.join(dir, 'b.test.ts'), spec('b', ['first', 'second'], log, 300))
    const run = await runLanes(dir, path.join(dir, 'a.test.ts'), path.join(dir, 'b.test.ts'))
    expect(run.code, run.stdout + run.stderr).to.equal(0)
    // b's tests ended while a's still ran (at once, not one after the other) ...
    const stamps = (await readFile(log, 'utf8')).trim().split('\n').map((l) => l.split(' ')[0])
    expect(stamps.indexOf('b:second')).to.be.below(stamps.indexOf('a:third'))
    // ... yet its lines come after all of a's.
    const aEnd = run.stdout.indexOf('3 passing')
    const header = run.stdout.indexOf('── lane two')
    expect(aEnd).to.be.greaterThan(-1)
    expect(header).to.be.greaterThan(aEnd)
    expect(run.stdout.indexOf('lane fixture b')).to.be.greaterThan(header)
    expect(run.stdout).to.match(/\nlanes: one \d+ s, two \d+ s\n/)
    expect(run.stdout.trimEnd().split('\n').pop()).to.equal('5 passed, 0 failed')
  })

  it('a failure in either lane fails the run; the counts still add up; the failure is repeated just above the summary line', async () => {
    const dir = await temp.make('fnr-lanes-')
    const log = path.join(dir, 'stamps')
    await writeFile(path.join(dir, 'a.test.ts'), spec('a', ['first'], log))
    await writeFile(path.join(dir, 'b.test.ts'), spec('b', ['fails here', 'second'], log))
    const run = await runLanes(dir, path.join(dir, 'a.test.ts'), path.join(dir, 'b.test.ts'))
    expect(run.code).to.not.equal(0)
    expect(run.stdout).to.match(/lanes: one \d+ s, two \d+ s \(failed\)/)
    expect(run.stdout.trimEnd().split('\n').pop()).to.equal('2 passed, 1 failed')
    // the end of the run names the failed test and its error, without stack frames, after the
    // lanes line (a run's last lines are all a CI log may keep)
    const tail = run.stdout.slice(run.stdout.lastIndexOf('\nlanes: '))
    expect(tail).to.match(/\nfailures \(lane two, repeated from above, without stack frames\):\n {2}1\) lane fixture b\n\s+fails here:\n\s+Error: it fails\n\n2 passed, 1 failed\n$/)
    expect(tail).to.not.match(/^\s+at /m)
    expect(tail).to.not.include('lane one')
  })

  it('a waiting lane starts when its promise resolves, or at the latest when the lane before it has ended', async () => {
    const dir = await temp.make('fnr-lanes-')
    const log = path.join(dir, 'stamps')
    // a's tests take 3 s each, so b (started beside it) stamps first even when its mocha process
    // starts seconds later than a's: with 800 ms a CI run's loaded lane lost that race
    await writeFile(path.join(dir, 'a.test.ts'), spec('a', ['first', 'second'], log, 3000))
    await writeFile(path.join(dir, 'b.test.ts'), spec('b', ['first'], log, 100))
    // never resolves: b starts once a has ended
    const never = await runLanes(dir, path.join(dir, 'a.test.ts'), path.join(dir, 'b.test.ts'), 'new Promise(() => {})')
    expect(never.code, never.stdout + never.stderr).to.equal(0)
    expect((await readFile(log, 'utf8')).trim().split('\n').map((l) => l.split(' ')[0])).to.deep.equal(['a:first', 'a:second', 'b:first'])
    await rm(log)
    // resolves at once: b runs beside a
    const soon = await runLanes(dir, path.join(dir, 'a.test.ts'), path.join(dir, 'b.test.ts'), 'Promise.resolve()')
    expect(soon.code).to.equal(0)
    expect((await readFile(log, 'utf8')).trim().split('\n').map((l) => l.split(' ')[0])[0]).to.equal('b:first')
  })

  it('a lane given a niceness runs at it; the other at the runner\'s', async () => {
    const dir = await temp.make('fnr-lanes-')
    const record = (name: string): string => `import {appendFileSync} from 'node:fs'\nimport os from 'node:os'\ndescribe('nice ${name}', () => { it('records', () => { appendFileSync(${JSON.stringify(path.join(dir, 'nice'))}, '${name} ' + os.getPriority() + '\\n') }) })\n`
    await writeFile(path.join(dir, 'a.test.ts'), record('a'))
    await writeFile(path.join(dir, 'b.test.ts'), record('b'))
    const run = await runLanes(dir, path.join(dir, 'a.test.ts'), path.join(dir, 'b.test.ts'), undefined, undefined, 10)
    expect(run.code, run.stdout + run.stderr).to.equal(0)
    const base = getPriority()
    expect((await readFile(path.join(dir, 'nice'), 'utf8')).trim().split('\n').sort()).to.deep.equal([`a ${Math.min(19, base + 10)}`, `b ${base}`])
  })

  it('SIGTERM to the runner reaches both lanes and the run ends failed', async () => {
    const dir = await temp.make('fnr-lanes-')
    // each lane's test says it runs (its teardown is in place by then), then waits for ever
    const forever = (name: string): string =>
      `import {writeFileSync} from 'node:fs'\ndescribe('lane fixture', () => { it('waits', function () { this.timeout(0); writeFileSync(${JSON.stringify(path.join(dir, `${name}.running`))}, ''); return new Promise(() => {}) }) })\n`
    await writeFile(path.join(dir, 'a.test.ts'), forever('a'))
    await writeFile(path.join(dir, 'b.test.ts'), forever('b'))
    const started = Date.now()
    const run = await runLanes(dir, path.join(dir, 'a.test.ts'), path.join(dir, 'b.test.ts'), undefined, (child) => {
      // SIGTERM once both lanes' tests run: a fixed delay raced a loaded machine's mocha start
      // (a lane killed before its test process had its teardown said nothing)
      const both = setInterval(() => {
        if (existsSync(path.join(dir, 'a.running')) && existsSync(path.join(dir, 'b.running'))) {
          clearInterval(both)
          child.kill('SIGTERM')
        }
      }, 50)
      child.on('close', () => clearInterval(both))
    })
    expect(run.code).to.not.equal(0)
    expect(Date.now() - started).to.be.below(90_000)
    expect(run.stderr.match(/teardown: SIGTERM/g) ?? []).to.have.length(2)
  })

  it('the lanes hold every spec file of the set once, in one lane\'s order but the folders and specs moved to even them and the reliability folder (whole, in one lane) first', () => {
    for (const set of ['all', 'integration'] as const) {
      const one = mochaSelection(set)
      const lanes = mochaLanes(set)
      expect(lanes.map((l) => l.name)).to.deep.equal(['other', 'peer'])
      const specs = (args: string[]): string[] => args.filter((a, i) => args[i - 1] === '--spec')
      const ignores = (args: string[]): string[] => args.filter((a, i) => args[i - 1] === '--ignore')
      // PEER_LANE_FOLDERS first in the peer lane, then every other spec file in one lane's order
      const moved = PEER_LANE_FOLDERS.map((f) => `test/${f}/**/*.test.ts`)
      expect(specs(lanes[1]!.args).slice(0, moved.length)).to.deep.equal(moved)
      // the reliability folder first in the other lane (its floods end before the peer lane reaches the control plane)
      expect(specs(lanes[0]!.args)[0]).to.equal('test/reliability/**/*.test.ts')
      // OTHER_LANE_SPECS (control-plane specs moved to even the lanes) last in the other lane
      const other = specs(lanes[0]!.args)
      expect(other.slice(-OTHER_LANE_SPECS.length)).to.deep.equal(OTHER_LANE_SPECS)
      for (const f of OTHER_LANE_SPECS) expect(specs(one), f).to.include(f)
      const rest = [...other.slice(1, -OTHER_LANE_SPECS.length), ...specs(lanes[1]!.args).slice(moved.length)]
      expect(rest, set).to.deep.equal(specs(one).filter((g) => !moved.includes(g) && g !== 'test/reliability/**/*.test.ts' && !OTHER_LANE_SPECS.includes(g)))
      for (const g of moved) expect(specs(one), g).to.include(g)
      for (const lane of lanes) expect(ignores(lane.args), set).to.deep.equal(ignores(one))
      expect(specs(lanes[0]!.args)).to.include('test/reliability/**/*.test.ts')
      expect(specs(lanes[1]!.args).some((g) => g.startsWith('test/reliability/'))).to.equal(false)
    }
  })
})
