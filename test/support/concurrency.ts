/**
 * Runs `task` on every item, at most `limit` at a time, and resolves when all have ended; rejects
 * with the first failure once the tasks already started have ended (none is left running behind
 * the test). Side-by-side comparisons whose cases are independent processes use it to keep the
 * machine's cores busy instead of running one process at a time.
 */
export async function forEachLimit<T>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0
  let failure: {error: unknown} | undefined
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const i = next++
      try {
        await task(items[i]!, i)
      } catch (error) {
        failure ??= {error}
      }
    }
  }
  await Promise.all(Array.from({length: Math.max(1, Math.min(limit, items.length))}, worker))
  if (failure) throw failure.error
}
