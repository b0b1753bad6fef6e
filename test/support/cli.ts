/** Running the built CLI (bin/run.js) as a real child process. */
import {execa, type Options} from 'execa'

import {BIN_RUN} from './serve.js'

export interface CliResult {
  exitCode: number
  stdout: string
  stderr: string
}

export async function runCli(args: string[], options: Options = {}): Promise<CliResult> {
  const r = await execa(process.execPath, [BIN_RUN, ...args], {reject: false, timeout: 60_000, ...options})
  return {exitCode: r.exitCode ?? -1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '')}
}
