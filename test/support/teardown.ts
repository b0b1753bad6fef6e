/**
 * Cleanups that must run at the end of a mocha run whatever happened before: stopping the shared
 * control plane and the reliability suite's servers. Their root-level `after` hooks do it on the
 * normal path, but mocha skips the remaining root hooks once one fails (the reliability summary's
 * hook fails the run when its target is missed), and a control plane left running keeps the
 * process alive with `exit: false` (.mocharc.json): the run never ends. This module is loaded
 * with `--require` (.mocharc.json) and runs every registered cleanup in mocha's global teardown,
 * which mocha runs after the run in any case.
 */
const KEY = Symbol.for('fnr.test.teardowns')
type Cleanup = () => Promise<void>
const registry = globalThis as typeof globalThis & {[KEY]?: Map<string, Cleanup>}

/** Registers (once per name) a cleanup for the end of the run; it must be safe to call twice. */
export function onTeardown(name: string, cleanup: Cleanup): void {
  ;(registry[KEY] ??= new Map()).set(name, cleanup)
}

export async function mochaGlobalTeardown(): Promise<void> {
  for (const [name, cleanup] of registry[KEY] ?? []) {
    try {
      await cleanup()
    } catch (err) {
      process.stderr.write(`teardown ${name}: ${(err as Error).message}\n`)
    }
  }
}
