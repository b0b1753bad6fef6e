/**
 * Progress of the `fnr pods …` admin commands on stderr (the CLI adapter's part; the admin
 * operations in src/lib/pods/admin/ take a `run` callback and know nothing of terminals).
 */
export interface ProgressTask<R> {
  title: string
  /** `update` shows a one-line detail under the title (terminal only). */
  run: (update: (detail: string) => void) => Promise<R>
  /** The line that replaces the title when the task ends. */
  done: (result: R) => {ok: boolean; line: string}
}

/**
 * Runs tasks (a few at a time) with progress on stderr: listr2 when stderr is a terminal, one
 * plain line per finished task otherwise. Never writes to stdout. listr2 is loaded only here.
 */
export async function runWithProgress<R>(tasks: ReadonlyArray<ProgressTask<R>>, options: {tty?: boolean; concurrency?: number; stderr?: NodeJS.WriteStream} = {}): Promise<R[]> {
  const stderr = options.stderr ?? process.stderr
  const tty = options.tty ?? stderr.isTTY === true
  const concurrency = Math.max(1, options.concurrency ?? 4)
  const results: R[] = new Array(tasks.length)
  if (tty) {
    const {Listr, ProcessOutput} = await import('listr2')
    const list = new Listr(
      tasks.map((t, i) => ({
        title: t.title,
        task: async (_ctx: unknown, task: {title: string; output: string}) => {
          results[i] = await t.run((detail) => (task.output = detail))
          const {ok, line} = t.done(results[i]!)
          task.title = line
          if (!ok) throw new Error(line)
        },
      })),
      {concurrent: concurrency, exitOnError: false, collectErrors: false, rendererOptions: {processOutput: new ProcessOutput(stderr, stderr)}} as never,
    )
    await list.run().catch(() => {})
    return results
  }
  let next = 0
  const worker = async (): Promise<void> => {
    for (let i = next++; i < tasks.length; i = next++) {
      results[i] = await tasks[i]!.run(() => {})
      const {ok, line} = tasks[i]!.done(results[i]!)
      stderr.write(`${ok ? 'ok' : 'FAILED'}: ${line}\n`)
    }
  }
  await Promise.all(Array.from({length: Math.min(concurrency, tasks.length)}, worker))
  return results
}
