/** Running the built CLI (bin/run.js) as a real child process. */
import {execa, type Options} from 'execa'

import {BIN_RUN} from './serve.js'

export interface CliResult {
  exitCode: number
  stdout: string
  stderr: string
}

/**
 * Runs fnr. An image the exec config does not map is refused as before fnr had container runtimes
 * (FNR_CONTAINER_RUNTIME=none), so no test pulls from a registry it did not start; a test of the
 * container runtimes sets its own (test/container/).
 */
export async function runCli(args: string[], options: Options = {}): Promise<CliResult> {
  const r = await execa(process.execPath, [BIN_RUN, ...args], {reject: false, timeout: 60_000, ...options, env: {FNR_CONTAINER_RUNTIME: 'none', ...options.env}})
  return {exitCode: r.exitCode ?? -1, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '')}
}
