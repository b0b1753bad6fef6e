/**
 * Skipping a test that cannot check what it is for here: it is counted as skipped (mocha's
 * pending, `N skipped` in npm test's summary line), never as passed, and its title carries the
 * reason, so the spec reporter prints it (skipped from a `before` hook, the reason is printed as a line of its own). The reason is also kept on the test (`skipReason`): the
 * test did run and decided, which the reliability tally counts as run (tally.ts).
 */
export interface SkippedTest {
  title: string
  skipReason?: string
}

export function skipWithReason(context: Mocha.Context, reason: string): never {
  const test = context.test as (Mocha.Runnable & SkippedTest) | undefined
  // From a `before` hook the whole suite is skipped and the reporter prints no hook title: the reason is printed here.
  if (test && (test as {type?: string}).type === 'hook') process.stdout.write(`      skipped (${test.parent?.fullTitle() ?? 'suite'}): ${reason}\n`)
  else if (test) {
    test.title += ` (skipped: ${reason})`
    test.skipReason = reason
  }
  context.skip()
}

/**
 * As skipWithReason, but under CI (`CI` set, as .ci/run sets it) the reason fails the test instead: there a missing
 * tool or kernel feature is a missing install step, which a skip would hide.
 */
export function skipOutsideCi(context: Mocha.Context, reason: string): never {
  if (process.env.CI) throw new Error(`cannot run in CI: ${reason}`)
  skipWithReason(context, reason)
}
