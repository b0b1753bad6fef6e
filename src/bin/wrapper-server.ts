/**
 * Main of the packaged wrapper-server: the single executable that scripts/package-wrapper.mjs
 * builds (esbuild bundle → Node single-executable application) and that function pods run as
 * /wrapper-server-tools/wrapper-server. It is `fnr wrapper-server` without oclif: the flags
 * (names, defaults, limits, Go spellings) are lib/wrapper.ts's FlagSpecs, which the oclif command
 * makes its flags from, and the server is the same startWrapperServer.
 *
 *   wrapper-server [--port 9446] [--max-request-body-size N] [--verbosity V | --log-level V]
 *                  [--log-format json|text] [--grace-period 25s] -- ENTRYPOINT [ARGS…]
 *
 * In the packaged folder this file is `wrapper-server-sea`; `wrapper-server` is the launcher
 * (docker/wrapper-launcher.sh), which as PID 1 of a pod runs it as a child and reaps zombies, and
 * hands over the container's environment verbatim in FNRW_LAUNCHER_ENVIRON (restored first thing).
 *
 * Run as `grpc-health-probe` (the symlink next to it in the packaged folder), or with
 * `grpc-health-probe` as its first argument, it is a health probe instead
 * (lib/grpc/health-probe.ts). Kubernetes gives an exec probe 1 s by default, so each branch
 * loads only its own modules (dynamic imports, which the bundle keeps lazy): the probe never
 * evaluates grpc-js, the server or the spawner.
 *
 * Errors print one line, `fnr: <message>`, and exit with the code of their kind (errors.ts), as
 * the CLI does. It also runs unbundled (`node --import tsx src/bin/wrapper-server.ts …`), which is
 * how the tests check its argument handling without packaging.
 */
import {readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'

import {runSpawnerProcess, SPAWNER_MODE_ENV} from '../lib/process/spawner-process.js'

/** Set by the bundle's banner (scripts/package-wrapper.mjs): build facts. */
declare const __FNR_EMBEDDED__: {version: string; builtFrom: string} | undefined

const embedded = typeof __FNR_EMBEDDED__ === 'undefined' ? undefined : __FNR_EMBEDDED__

const USAGE = `Runs a KRM function's entrypoint for every evaluator.FunctionEvaluator/EvaluateFunction call.

Usage:
  wrapper-server [flags] -- ENTRYPOINT [ARGS...]
  grpc-health-probe -addr HOST:PORT [-service NAME] [-connect-timeout 1s] [-rpc-timeout 1s]

Flags (Porch's spellings; -flag and --flag, "--flag value" and "--flag=value" all work):
  --port                   gRPC listen port (default 9446)
  --bind-address           listen address; default FNR_BIND_ADDRESS, else every address family (IPv4 and IPv6)
  --max-request-body-size  maximum gRPC message size in bytes, received and sent (default 6291456)
  --verbosity, --log-level log verbosity 0-5 (default 2)
  --log-format             json or text; default FNR_LOG_FORMAT, else text on a terminal and json otherwise
  --grace-period           how long calls in flight may run after SIGTERM (default 25s)

Limits (docs/limits.md; defaults derived from the cgroup's memory limit):
  --memory-limit, --max-concurrent-calls, --max-queued-calls, --max-inflight-bytes,
  --max-concurrent-streams, --connection-idle-timeout, --message-receive-timeout, --handshake-timeout
`

let verbosity = 0

/**
 * Node 26 names its main thread "node-MainThread", and the main thread's name is the one `ps`,
 * `top` and /proc/<pid>/comm show for the process. The executable's own name goes back, as the
 * kernel set it at exec (the file name's first 15 bytes: `wrapper-server-`), so the process in a
 * pod is recognisable. Left alone where Node did not rename it.
 */
function restoreProcessName(): void {
  try {
    if (readFileSync('/proc/self/comm', 'latin1').trim() === 'node-MainThread') writeFileSync('/proc/self/comm', path.basename(process.argv0).slice(0, 15))
  } catch {
    // No /proc: nothing to restore.
  }
}

async function main(argv: string[]): Promise<number> {
  const probeArgs = path.basename(process.argv0) === 'grpc-health-probe' ? argv : argv[0] === 'grpc-health-probe' ? argv.slice(1) : undefined
  if (probeArgs) {
    const {runHealthProbe} = await import('../lib/grpc/health-probe.js')
    return runHealthProbe(probeArgs)
  }
  const [{createLogger, setLogFormat}, {parseWrapperArgs, restoreLauncherEnvironment, splitEntrypoint, startWrapperServer}] = await Promise.all([
    import('../lib/telemetry/log.js'),
    import('../lib/wrapper.js'),
  ])
  restoreLauncherEnvironment()
  const {flagArgs} = splitEntrypoint(argv)
  if (flagArgs.some((a) => a === '--help' || a === '-h' || a === '-help')) {
    process.stdout.write(USAGE)
    return 0
  }
  if (flagArgs.some((a) => a === '--version' || a === '-version')) {
    process.stdout.write(`fnr wrapper-server ${embedded?.version ?? 'dev'} (node ${process.version}${embedded ? `, ${embedded.builtFrom}` : ''})\n`)
    return 0
  }
  const cli = parseWrapperArgs(argv)
  verbosity = cli.verbosity
  setLogFormat(cli.logFormat)
  const logger = createLogger({verbosity: cli.verbosity, name: 'fnr-wrapper'})
  const running = await startWrapperServer(cli.options, logger)
  await running.done
  return 0
}

/** Prints the failure as one line and exits with the code of its kind (errors.ts). */
async function fail(err: unknown): Promise<never> {
  const {firstLine, toFnrError} = await import('../lib/errors.js')
  const e = toFnrError(err)
  process.stderr.write(`fnr: ${firstLine(e.message, 2000)}${e.kind === 'Usage' ? ' (see --help)' : ''}\n`)
  if (verbosity >= 4 || process.env.FNR_DEBUG) process.stderr.write(`${(e.cause instanceof Error ? e.cause : e).stack ?? ''}\n`)
  process.exit(e.exitCode)
}

restoreProcessName()
if (process.env[SPAWNER_MODE_ENV] === '1') {
  // Started by its own server as the process spawner (lib/process/spawner.ts): a single executable
  // has no other module to run for that.
  runSpawnerProcess()
} else {
  // The executable is built with --disable-sigusr1 in its execArgv where the building Node
  // honours that (scripts/package-wrapper.mjs); the listener covers the others: with one
  // installed, Node does not open its inspector on SIGUSR1 (docs/process.md "No debugger by signal").
  process.on('SIGUSR1', () => {})
  main(process.argv.slice(2)).then((code) => process.exit(code), fail)
}
