/**
 * Structured logging with Porch-style verbosity levels (--log-level 0-5).
 *
 *   0  errors and warnings only
 *   1  + lifecycle (start, ready, drain, stop)
 *   2  + informational events (default; config loaded, pods created, GC)
 *   3  + one line per request
 *   4  + debug detail (sizes, stderr of functions, timings)
 *   5  + trace (whole ResourceLists; never enable in production)
 *
 * Output is JSON lines on stderr (pino). Secrets must never be passed in fields; ResourceList
 * contents may only be logged with `trace`.
 */
import {pino, type Logger as PinoLogger} from 'pino'

export const LOG_LEVELS = ['warn', 'lifecycle', 'info', 'request', 'debug', 'trace'] as const

export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  lifecycle(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  request(msg: string, fields?: Record<string, unknown>): void
  debug(msg: string, fields?: Record<string, unknown>): void
  trace(msg: string, fields?: Record<string, unknown>): void
  /** True when messages at this verbosity (0-5) are written. */
  enabled(verbosity: number): boolean
  child(bindings: Record<string, unknown>): Logger
}

export interface LoggerOptions {
  verbosity: number
  name?: string
  destination?: NodeJS.WritableStream | number
}

const CUSTOM_LEVELS = {lifecycle: 35, request: 25}

class PinoBackedLogger implements Logger {
  constructor(
    private readonly p: PinoLogger<'lifecycle' | 'request'>,
    private readonly verbosity: number,
  ) {}

  error(msg: string, fields?: Record<string, unknown>): void {
    this.p.error(fields ?? {}, msg)
  }

  warn(msg: string, fields?: Record<string, unknown>): void {
    this.p.warn(fields ?? {}, msg)
  }

  lifecycle(msg: string, fields?: Record<string, unknown>): void {
    this.p.lifecycle(fields ?? {}, msg)
  }

  info(msg: string, fields?: Record<string, unknown>): void {
    this.p.info(fields ?? {}, msg)
  }

  request(msg: string, fields?: Record<string, unknown>): void {
    this.p.request(fields ?? {}, msg)
  }

  debug(msg: string, fields?: Record<string, unknown>): void {
    this.p.debug(fields ?? {}, msg)
  }

  trace(msg: string, fields?: Record<string, unknown>): void {
    this.p.trace(fields ?? {}, msg)
  }

  enabled(verbosity: number): boolean {
    return verbosity <= this.verbosity
  }

  child(bindings: Record<string, unknown>): Logger {
    return new PinoBackedLogger(this.p.child(bindings), this.verbosity)
  }
}

export function clampVerbosity(level: number): number {
  if (!Number.isFinite(level)) return 2
  return Math.max(0, Math.min(5, Math.trunc(level)))
}

export function createLogger(options: LoggerOptions): Logger {
  const verbosity = clampVerbosity(options.verbosity)
  const destination = options.destination ?? 2
  const stream =
    typeof destination === 'number' ? pino.destination({dest: destination, sync: true}) : destination
  const p = pino<'lifecycle' | 'request'>(
    {
      name: options.name,
      level: LOG_LEVELS[verbosity],
      customLevels: CUSTOM_LEVELS,
      formatters: {level: (label) => ({level: label})},
      timestamp: pino.stdTimeFunctions.isoTime,
      base: undefined,
      redact: {paths: ['password', 'token', 'auth', 'authorization', '*.password', '*.token', '*.auth'], censor: '[redacted]'},
    },
    stream as pino.DestinationStream,
  )
  return new PinoBackedLogger(p, verbosity)
}

/** A logger that drops everything (for library use without a configured logger). */
export const silentLogger: Logger = {
  error() {},
  warn() {},
  lifecycle() {},
  info() {},
  request() {},
  debug() {},
  trace() {},
  enabled: () => false,
  child() {
    return silentLogger
  },
}
