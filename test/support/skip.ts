/**
 * Skipping a test that cannot check what it is for here: it is counted as skipped (mocha's
 * pending, `N skipped` in npm test's summary line), never as passed, and its title carries the
 * reason, so the spec reporter prints it. The reason is also kept on the test (`skipReason`): the
 * test did run and decided, which the reliability tally counts as run (tally.ts).
 */
export interface SkippedTest {
  title: string
  skipReason?: string
}

export function skipWithReason(context: Mocha.Context, reason: string): never {
  const test = context.test as (Mocha.Runnable & SkippedTest) | undefined
  if (test) {
    test.title += ` (skipped: ${reason})`
    test.skipReason = reason
  }
  context.skip()
}
