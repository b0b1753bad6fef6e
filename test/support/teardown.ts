/**
 * Cleanups that must run at the end of a mocha run whatever happened before: stopping the shared
 * control plane and the reliability suite's servers. Their root-level `after` hooks do it on the
 * normal path, but mocha skips the remaining root hooks once one fails (the reliability summary's
 * hook fails the run when its target is missed), and a control plane left running keeps the
 * process alive with `exit: false` (.mocharc.json): the run never ends. This module is loaded
 * with `--require` (.mocharc.json) and runs every registered cleanup in mocha's global teardown,
 * which mocha runs after the run in any case, and on SIGTERM, SIGINT or SIGHUP (a CI limit or ^C).
 *
 * The cleanups run side by side, each bounded: one that hangs (a server waiting for a call that
 * never ends) is reported by name and cannot keep another from running. Once the teardown is done
 * the run must end: if something still holds the process after EXIT_GRACE_MS, the handles holding
 * it are printed and the process exits, failed (a leak is a test failure, not a hang of CI).
 */
const KEY = Symbol.for('fnr.test.teardowns')
type Cleanup = () => Promise<void>
const registry = globalThis as typeof globalThis & {[KEY]?: Map<string, Cleanup>}

/** How long one cleanup may take before it is reported and left (FNR_TEST_CLEANUP_LIMIT_MS for the spec of this module). */
export const CLEANUP_LIMIT_MS = Number(process.env.FNR_TEST_CLEANUP_LIMIT_MS) || 45_000
/** How long the process may stay alive after the teardown before it is ended (FNR_TEST_EXIT_GRACE_MS likewise). */
export const EXIT_GRACE_MS = Number(process.env.FNR_TEST_EXIT_GRACE_MS) || 60_000

/** Registers (once per name) a cleanup for the end of the run; it must be safe to call twice. */
export function onTeardown(name: string, cleanup: Cleanup): void {
  ;(registry[KEY] ??= new Map()).set(name, cleanup)
}

/**
 * Runs every registered cleanup at once, each for at most `limitMs`; resolves with the names of
 * those that failed or did not finish in time (each also reported on stderr). Never rejects.
 */
export async function runCleanups(limitMs = CLEANUP_LIMIT_MS, write = (line: string) => process.stderr.write(line)): Promise<string[]> {
  const problems: string[] = []
  await Promise.all(
    [...(registry[KEY] ?? [])].map(async ([name, cleanup]) => {
      let timer: NodeJS.Timeout | undefined
      const outcome = await Promise.race([
        cleanup().then(
          () => undefined,
          (err: unknown) => `failed: ${err instanceof Error ? err.message : String(err)}`,
        ),
        new Promise<string>((resolve) => {
          timer = setTimeout(() => resolve(`still running after ${limitMs} ms; left behind`), limitMs)
        }),
      ])
      clearTimeout(timer)
      if (outcome) {
        problems.push(name)
        write(`teardown ${name}: ${outcome}\n`)
      }
    }),
  )
  return problems
}

/** What keeps the event loop alive, counted by kind ("3 × TCPSocketWrap, 1 × Timeout"). */
export function describeActiveResources(): string {
  const counts = new Map<string, number>()
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1)
  return [...counts].map(([kind, n]) => `${n} × ${kind}`).join(', ') || 'nothing'
}

let exitWatch: NodeJS.Timeout | undefined

/**
 * Arms (once) a timer that does not itself keep the process alive: if the process is still
 * running `graceMs` later, it says what holds it and exits with code 1.
 */
export function armExitWatch(graceMs = EXIT_GRACE_MS): void {
  if (exitWatch) return
  exitWatch = setTimeout(() => {
    process.stderr.write(
      `teardown: the run ended ${Math.round(graceMs / 1000)} s ago but the process is still alive, held by ${describeActiveResources()}; ending it as failed (a test left something running)\n`,
    )
    // mocha (exit: false) sets the exit code from its failure count in an 'exit' listener of its
    // own, 0 for a run that passed: this listener comes after it and keeps the failure.
    process.on('exit', () => {
      process.exitCode = 1
    })
    process.exit(1)
  }, graceMs)
  exitWatch.unref()
}

let teardown: Promise<string[]> | undefined

export async function mochaGlobalTeardown(): Promise<void> {
  teardown ??= runCleanups()
  await teardown
  armExitWatch()
}

// A CI time limit or ^C: the cleanups still run (the control plane's processes would otherwise
// outlive the run), then the process ends as the signal would have ended it.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
  process.once(signal, () => {
    process.stderr.write(`teardown: ${signal}, stopping what the run started\n`)
    teardown ??= runCleanups(10_000)
    void teardown.finally(() => process.kill(process.pid, signal))
  })
}
