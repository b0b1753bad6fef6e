/**
 * Running the built CLI (bin/run.js) with bad flags and unreadable inputs, and judging the
 * result: the exit code the README's table gives, exactly one `fnr: ` line on stderr, no stack
 * trace, no signal death, an answer within the hang limit.
 */
import {expect} from 'chai'
import {execa} from 'execa'

import {BIN_RUN, REPO_ROOT} from '../serve.js'
import {HANG_MS, tally} from './tally.js'

export interface CliCase {
  /** Unique label (command name first). */
  label: string
  args: string[]
  /** stdin (default: a small ConfigMap). */
  stdin?: string | Buffer
  env?: NodeJS.ProcessEnv
  /** Run as the unprivileged user nobody (65534), so file permissions apply. */
  asNobody?: boolean
  code: number
  message: RegExp
  /** Only in the long run (a variation of a case the short run has). */
  long?: boolean
  /** The `fnr: ` line must be all there is on stderr (nothing from libraries before it). */
  onlyLine?: boolean
  /**
   * `fnr test`: a case that cannot run is that case's error in the report on stdout (the other
   * cases still run), so `message` is matched there, not as a `fnr: ` line on stderr.
   */
  inReport?: boolean
}

export interface CliRun {
  exitCode: number | undefined
  signal: string | undefined
  timedOut: boolean
  stdout: string
  stderr: string
}

export const DEFAULT_STDIN = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n'

export async function runCliCase(c: CliCase): Promise<CliRun> {
  const r = await execa(process.execPath, [BIN_RUN, ...c.args], {
    reject: false,
    timeout: HANG_MS * 2,
    input: c.stdin ?? DEFAULT_STDIN,
    cwd: REPO_ROOT,
    // These cases pin fnr's own exit codes and "fnr: " lines: eval and render report as kpt does
    // unless asked (test/commands/eval-kpt-cli.test.ts pins that form).
    env: {FNR_DEBUG: '', ...(c.args[0] === 'eval' || c.args[0] === 'render' ? {FNR_EXIT_CODES: 'fnr'} : {}), ...c.env},
    ...(c.asNobody ? {uid: 65534, gid: 65534} : {}),
    stripFinalNewline: false,
  })
  return {exitCode: r.exitCode, signal: r.signal, timedOut: r.timedOut, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '')}
}

/** Runs cases a few at a time (each is a whole Node process). */
export async function runAll(cases: readonly CliCase[], concurrency = 3): Promise<Map<string, CliRun>> {
  const out = new Map<string, CliRun>()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const c = cases[next++]!
      out.set(c.label, await runCliCase(c))
    }
  }
  await Promise.all(Array.from({length: concurrency}, worker))
  return out
}

const STACK_LINE = /^\s+at .+(\(|\s)[^\s]*:\d+:\d+\)?$/m

export function checkCliRun(c: CliCase, r: CliRun): void {
  const label = `fnr ${c.label}`
  const shown = `exit ${r.exitCode ?? r.signal}\nstderr:\n${r.stderr.slice(0, 2000)}`
  if (r.timedOut) tally.hang(label)
  else if (r.signal || STACK_LINE.test(r.stderr) || /\b(TypeError|ReferenceError|RangeError|Unhandled|uncaught)\b/.test(r.stderr)) {
    tally.crash(label, shown)
  }
  expect(r.timedOut, `${label}: no answer within ${HANG_MS * 2} ms`).to.equal(false)
  expect(r.exitCode, `${label}: ${shown}`).to.equal(c.code)
  if (c.inReport) {
    expect(r.stdout, `${label}: the case's error in the report\nstdout:\n${r.stdout.slice(0, 2000)}`).to.match(/^ERROR /m).and.match(c.message)
    expect(STACK_LINE.test(r.stderr) || STACK_LINE.test(r.stdout), `${label}: no stack trace\n${shown}`).to.equal(false)
    return
  }
  const fnrLines = r.stderr.split('\n').filter((l) => l.startsWith('fnr: '))
  expect(fnrLines, `${label}: exactly one "fnr: " line\n${shown}`).to.have.length(1)
  expect(fnrLines[0], `${label}: ${shown}`).to.match(c.message)
  expect(STACK_LINE.test(r.stderr), `${label}: no stack trace\n${shown}`).to.equal(false)
  if (c.onlyLine) expect(r.stderr.trim().split('\n'), `${label}: stderr is only the "fnr: " line\n${shown}`).to.have.length(1)
  // Errors go to stderr only; stdout carries data (none, on failure).
  expect(r.stdout, `${label}: stdout`).to.equal('')
}
