/**
 * `fnr wrapper-server`: the gRPC server inside each function pod (port 9446). It serves the
 * same evaluator.FunctionEvaluator service as `fnr serve`, running the image's entrypoint for
 * every call, plus grpc.health.v1; SIGTERM drains calls in flight.
 *
 * Two front ends start it: the oclif command (src/commands/wrapper-server.ts) and the packaged
 * single executable (src/bin/wrapper-server.ts, which cannot carry oclif). Both take the same
 * flags, defined once as FlagSpecs (WRAPPER_FLAG_SPECS below; flags/spec.ts): the oclif command
 * makes its flags from them, and parseWrapperArgs, the packaged binary's parser, parses them with
 * parseWithSpecs.
 */
import {normaliseGoStyleArgs} from './config/go-flags.js'
import {EntrypointEvaluator} from './evaluators/entrypoint.js'
import type {EvaluationRequest, EvaluationResponse, Evaluator} from './evaluator.js'
import {parseLimitFlags, serverLimits, type ListenerLimits} from './grpc/limits.js'
import {EvaluatorServer} from './grpc/server.js'
import {drainOnStop, type StopHandle} from './drain.js'
import {detectMemoryLimit} from './budget.js'
import {LISTENER_LIMIT_FLAG_SPECS, LOG_FORMAT_SPEC, LOG_LEVEL_SPEC, MAX_REQUEST_BODY_SIZE_SPEC} from './flags/runner-flag-specs.js'
import {parseWithSpecs, type FlagSpecs} from './flags/spec.js'
import {parseLogFormat, type LogFormat, type Logger} from './telemetry/log.js'
import {startProcessTracing, type Tracing} from './telemetry/otel.js'
import {NO_TELEMETRY, type Telemetry} from './telemetry/telemetry.js'
import {logEscapedProcesses} from './process/sweep.js'
import {ProcessLauncher} from './process/launcher.js'
import {serverLaunchMode} from './process/spawner.js'

export interface WrapperOptions {
  port: number
  host?: string
  maxRequestBodySize: number
  entrypoint: string[]
  gracePeriodMs: number
  /** The budget and HTTP/2 limits (--max-concurrent-calls, ...; grpc/limits.ts); absent: derived. */
  limits?: ListenerLimits
}

export interface RunningWrapper extends StopHandle {
  server: EvaluatorServer
  port: number
}

export const WRAPPER_DEFAULTS = {
  port: 9446,
  /** Porch's default (6 MiB); the function runner passes its own value in the pod args. */
  maxRequestBodySize: MAX_REQUEST_BODY_SIZE_SPEC.default,
  minMaxRequestBodySize: MAX_REQUEST_BODY_SIZE_SPEC.min,
  logLevel: LOG_LEVEL_SPEC.default,
  gracePeriodMs: 25_000,
} as const

/** Porch's wrapper flags (--port, --max-request-body-size, --verbosity) and fnr's additions: the oclif command's flags. */
export const WRAPPER_FLAG_SPECS = {
  port: {kind: 'integer', summary: 'gRPC listen port.', default: WRAPPER_DEFAULTS.port, min: 0, max: 65535},
  'max-request-body-size': MAX_REQUEST_BODY_SIZE_SPEC,
  verbosity: {kind: 'integer', summary: 'Log verbosity (Porch\'s spelling of --log-level).', min: 0, max: 5},
  'log-level': LOG_LEVEL_SPEC,
  'grace-period': {kind: 'duration', summary: 'How long calls in flight may run after SIGTERM.', default: WRAPPER_DEFAULTS.gracePeriodMs, defaultHelp: '25s'},
  ...LISTENER_LIMIT_FLAG_SPECS,
} satisfies FlagSpecs

export type WrapperFlagName = keyof typeof WRAPPER_FLAG_SPECS
export const WRAPPER_FLAGS = Object.keys(WRAPPER_FLAG_SPECS) as WrapperFlagName[]

/** What the packaged binary parses: the command's flags plus --log-format, which oclif commands get from FnrCommand's baseFlags. */
const PACKAGED_FLAG_SPECS = {...WRAPPER_FLAG_SPECS, 'log-format': LOG_FORMAT_SPEC} satisfies FlagSpecs

/** What the command line of either front end asks for. */
export interface WrapperCommandLine {
  options: WrapperOptions
  verbosity: number
  /** --log-format, when given. */
  logFormat?: LogFormat
}

/** Splits argv at the first "--": flags before it, the function's command after it. */
export function splitEntrypoint(argv: readonly string[]): {flagArgs: string[]; entrypoint: string[]} {
  const dash = argv.indexOf('--')
  return dash >= 0 ? {flagArgs: argv.slice(0, dash), entrypoint: argv.slice(dash + 1)} : {flagArgs: [...argv], entrypoint: []}
}

/**
 * Parses a wrapper-server command line (`--port 9446 --max-request-body-size N -- ENTRYPOINT…`)
 * without oclif, for the packaged executable. Same flags, defaults and limits as the oclif
 * command; Go's one-dash spellings are accepted; positional arguments before "--" are ignored,
 * as upstream does. Bad flags are FnrError('Usage'); a missing entrypoint is left to
 * startWrapperServer (a Config error there, as in the command).
 */
export function parseWrapperArgs(argv: readonly string[]): WrapperCommandLine {
  const {flagArgs, entrypoint} = splitEntrypoint(argv)
  const args = normaliseGoStyleArgs(flagArgs, new Set(), new Set(Object.keys(PACKAGED_FLAG_SPECS)))
  const {values} = parseWithSpecs(args, PACKAGED_FLAG_SPECS, 'wrapper')
  const str = (name: keyof typeof PACKAGED_FLAG_SPECS): string | undefined => values[name] as string | undefined
  const num = (name: 'port' | 'max-request-body-size' | 'log-level' | 'grace-period'): number => values[name] as number
  const limits = parseLimitFlags((name) => str(name))
  const host = str('bind-address')
  const logFormat = str('log-format')
  return {
    verbosity: (values.verbosity as number | undefined) ?? num('log-level'),
    ...(logFormat === undefined ? {} : {logFormat: parseLogFormat(logFormat, '--log-format')}),
    options: {
      port: num('port'),
      maxRequestBodySize: num('max-request-body-size'),
      entrypoint,
      gracePeriodMs: num('grace-period'),
      ...(host ? {host} : {}),
      ...(Object.keys(limits).length ? {limits} : {}),
    },
  }
}

/**
 * The function process as an OpenTelemetry span of `otel` (child of the wrapper's EvaluateFunction
 * span), around the evaluator.
 */
function tracedFunction(inner: Evaluator, entrypoint: readonly string[], otel: Tracing): Evaluator {
  return {
    name: inner.name,
    async evaluate(request: EvaluationRequest): Promise<EvaluationResponse> {
      const span = otel.startSpan('function.process', {parent: request.trace?.traceparent, attributes: {'fn.image': request.image, 'process.executable.path': entrypoint[0]}})
      try {
        const res = await inner.evaluate(request)
        span.setAttributes({'process.exit.code': 0, 'fnr.bytes_out': res.resourceList.length})
        span.end()
        return res
      } catch (err) {
        const failure = (err as {details?: {failure?: {exitCode?: number | null}}}).details?.failure
        if (typeof failure?.exitCode === 'number') span.setAttributes({'process.exit.code': failure.exitCode})
        span.end((err as Error).message.slice(0, 500))
        throw err
      }
    },
    close: () => inner.close(),
  }
}

export async function startWrapperServer(options: WrapperOptions, logger: Logger, handleSignals = true): Promise<RunningWrapper> {
  // Validates the entrypoint before anything listens: no entrypoint is a startup error.
  const launcher = new ProcessLauncher(serverLaunchMode(detectMemoryLimit().bytes))
  const entrypoint = new EntrypointEvaluator({entrypoint: options.entrypoint, maxOutputBytes: options.maxRequestBodySize, logger, launcher})
  // OpenTelemetry export when the pod's env asks for it (OTEL_* through the pod template).
  const traced = await startProcessTracing('fnr-wrapper-server', logger)
  // This server's telemetry: tracing only (the wrapper serves no metrics), handed to what it builds.
  const telemetry: Telemetry = traced.tracing ? {...NO_TELEMETRY, tracing: traced.tracing} : NO_TELEMETRY
  const evaluator = telemetry.tracing ? tracedFunction(entrypoint, options.entrypoint, telemetry.tracing) : entrypoint
  const limits = serverLimits(options.limits, logger, {quiet: true, runningPids: () => launcher.sleepCandidates(), paceStarts: launcher.startsInRunner, telemetry})
  const server = new EvaluatorServer({evaluator, maxMessageSize: options.maxRequestBodySize, logger, host: options.host, port: options.port, telemetry, ...limits})
  let port: number
  try {
    port = await server.start()
  } catch (err) {
    await launcher.close()
    await traced.stop()
    throw err
  }
  server.setServing(true)
  // Started once the server listens: a wrapper that cannot start leaves no spawner behind.
  launcher.start((why) => logger.warn(why))
  const unlogEscapes = logEscapedProcesses(logger)
  const handle = drainOnStop(server, {
    gracePeriodMs: options.gracePeriodMs,
    logger,
    handleSignals,
    launcher,
    release: async () => {
      await launcher.close()
      await traced.stop()
      unlogEscapes()
    },
  })
  logger.lifecycle('wrapper server is ready', {port, entrypoint: options.entrypoint})
  return {server, port, ...handle}
}

/**
 * Set by the packaged folder's launcher (docker/wrapper-launcher.sh): the environment the kernel
 * gave it, base64 of /proc/PID/environ. The launcher is a busybox shell, which rewrites the
 * environment it passes on (adds PWD, SHLVL, PATH; drops names that are not shell identifiers),
 * and the wrapper hands its environment to the function, as Porch's wrapper does.
 */
export const LAUNCHER_ENVIRON = 'FNRW_LAUNCHER_ENVIRON'

/**
 * Replaces `env` (process.env) with the launcher's original environment when LAUNCHER_ENVIRON is
 * set, and removes LAUNCHER_ENVIRON. Returns whether it did. Entries without "=" are skipped;
 * for a repeated name the first wins (as getenv(3) reads it).
 */
export function restoreLauncherEnvironment(env: NodeJS.ProcessEnv = process.env): boolean {
  const encoded = env[LAUNCHER_ENVIRON]
  if (encoded === undefined) return false
  const restored = new Map<string, string>()
  for (const entry of Buffer.from(encoded, 'base64').toString('utf8').split('\0')) {
    const eq = entry.indexOf('=')
    if (eq <= 0) continue
    const name = entry.slice(0, eq)
    if (!restored.has(name)) restored.set(name, entry.slice(eq + 1))
  }
  for (const name of Object.keys(env)) delete env[name]
  for (const [name, value] of restored) env[name] = value
  return true
}
