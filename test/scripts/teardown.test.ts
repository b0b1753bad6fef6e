/**
 * The end of a test run (test/support/teardown.ts, scripts/mocha-run.mjs): a failed root hook, a
 * cleanup that hangs, a handle a test left open, or a CI limit's SIGTERM still stops what the run
 * started and ends the run, failed and saying why. Before, one hanging cleanup kept the shared
 * control plane's cleanup from running and mocha alive for 40 minutes.
 *
 * Each case runs mocha (as `npm test` does, through runMocha) on a small spec written here that
 * starts a `sleep` in a process group of its own, as the control plane's processes are, and
 * registers its stop with onTeardown.
 */
import {spawn} from 'node:child_process'
import {existsSync, readFileSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'

import {TempDirs} from '../support/tmp.js'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const url = (rel: string): string => JSON.stringify(new URL(rel, `file://${ROOT}/`).href)

/** A spec: `body`, then a detached `sleep` started, its pid written to `pidFile` and its stop registered. */
function fixtureSpec(pidFile: string, body: string): string {
  return `
import {spawn} from 'node:child_process'
import {writeFileSync} from 'node:fs'
import {onTeardown} from ${url('test/support/teardown.ts')}
${body}
const sleeper = spawn('sleep', ['300'], {detached: true, stdio: 'ignore'})
sleeper.unref()
writeFileSync(${JSON.stringify(pidFile)}, String(sleeper.pid))
onTeardown('sleeper', async () => { process.kill(-sleeper.pid, 'SIGKILL') })
`
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  // a zombie whose parent is gone is reaped by init soon; count it as dead
  return !/^\S+ \(.*\) Z/.test(readStat(pid))
}

function readStat(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return ''
  }
}

type Run = {code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number}

/** Runs runMocha on `spec` in a child process; `onStart` gets the child once it runs. */
function runThroughMochaRun(dir: string, spec: string, env: Record<string, string>, onStart?: (child: ReturnType<typeof spawn>) => void): Promise<Run> {
  const launcher = path.join(dir, 'launch.mjs')
  return writeFile(launcher, `import {runMocha} from ${url('scripts/mocha-run.mjs')}\nrunMocha([${JSON.stringify(spec)}])\n`).then(
    () =>
      new Promise<Run>((resolve, reject) => {
        const start = Date.now()
        const child = spawn(process.execPath, [launcher], {cwd: ROOT, env: {...process.env, ...env}, stdio: ['ignore', 'pipe', 'pipe']})
        let stdout = ''
        let stderr = ''
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
        child.on('error', reject)
        child.on('close', (code, signal) => resolve({code, signal, stdout, stderr, ms: Date.now() - start}))
        onStart?.(child)
      }),
  )
}

async function waitFor(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return check()
}

describe('the end of a test run: teardown after a failed root hook, a hanging cleanup, a leak, SIGTERM', function () {
  this.timeout(120_000)
  const temp = new TempDirs()
  after(() => temp.cleanup())

  it('a failed root hook and a cleanup that never ends: the other cleanups still run, the hang is named, the open handle is named, and the run ends failed', async () => {
    const dir = await temp.make('fnr-teardown-')
    const pidFile = path.join(dir, 'sleeper.pid')
    const spec = path.join(dir, 'hang.test.ts')
    await writeFile(
      spec,
      fixtureSpec(
        pidFile,
        `
// registered before the sleeper's stop would run in a sequential teardown: it never ends and keeps a handle open
onTeardown('a hanging stop', () => new Promise(() => { setInterval(() => {}, 1000) }))
describe('fixture', () => { it('passes', () => {}) })
after(function () { throw new Error('the root hook fails') })
`,
      ),
    )
    const run = await runThroughMochaRun(dir, spec, {FNR_TEST_CLEANUP_LIMIT_MS: '1500', FNR_TEST_EXIT_GRACE_MS: '1500'})
    const pid = Number(await readFile(pidFile, 'utf8'))
    expect(alive(pid), `the sleeper (${pid}) was stopped`).to.equal(false)
    expect(run.stderr).to.include('teardown a hanging stop: still running after 1500 ms; left behind')
    expect(run.stderr).to.match(/the process is still alive, held by .*Timeout/)
    expect(run.code, run.stdout + run.stderr).to.not.equal(0)
    expect(run.stdout).to.match(/1 passed, 1 failed/)
    expect(run.ms).to.be.below(60_000)
  })

  it('a passing run that leaves a handle open ends failed after the grace, naming the handle', async () => {
    const dir = await temp.make('fnr-teardown-')
    const pidFile = path.join(dir, 'sleeper.pid')
    const spec = path.join(dir, 'leak.test.ts')
    await writeFile(spec, fixtureSpec(pidFile, `describe('fixture', () => { it('leaks a timer', () => { setInterval(() => {}, 1000) }) })\n`))
    const run = await runThroughMochaRun(dir, spec, {FNR_TEST_EXIT_GRACE_MS: '1500'})
    expect(alive(Number(await readFile(pidFile, 'utf8')))).to.equal(false)
    expect(run.stderr).to.match(/held by .*Timeout.*ending it as failed/)
    expect(run.code).to.equal(1)
    expect(run.stdout).to.match(/1 passed, 0 failed/)
  })

  it('SIGTERM to the runner (a CI limit) reaches the test process, which stops what it started and ends', async () => {
    const dir = await temp.make('fnr-teardown-')
    const pidFile = path.join(dir, 'sleeper.pid')
    const spec = path.join(dir, 'sigterm.test.ts')
    await writeFile(spec, fixtureSpec(pidFile, `describe('fixture', () => { it('waits for ever', function () { this.timeout(0); return new Promise(() => {}) }) })\n`))
    const run = await runThroughMochaRun(dir, spec, {}, (child) => {
      void waitFor(() => existsSync(pidFile), 60_000).then(async () => {
        await new Promise((r) => setTimeout(r, 500))
        child.kill('SIGTERM')
      })
    })
    const pid = Number(await readFile(pidFile, 'utf8'))
    expect(run.stderr).to.include('teardown: SIGTERM, stopping what the run started')
    expect(await waitFor(() => !alive(pid), 5000), `the sleeper (${pid}) was stopped`).to.equal(true)
    expect(run.code).to.not.equal(0)
  })
})
