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
 * Output goes to stderr (pino), in one of two formats (`--log-format`, $FNR_LOG_FORMAT):
 *   json  one JSON object per line (the default when stderr is not a terminal: pods, CI, pipes)
 *   text  one human-readable line per message (pino-pretty; the default on a terminal, coloured
 *         there unless NO_COLOR is set)
 * Secrets must never be passed in fields; ResourceList contents may only be logged with `trace`.
 */
import {isatty} from 'node:tty'

import {pino, type Logger as PinoLogger} from 'pino'
import {PinoPretty} from 'pino-pretty'

import {FnrError} from '../errors.js'

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

export const LOG_FORMATS = ['json', 'text'] as const
export type LogFormat = (typeof LOG_FORMATS)[number]

export interface LoggerOptions {
  verbosity: number
  name?: string
  destination?: NodeJS.WritableStream | number
  /** Default: the process's format (setLogFormat, i.e. --log-format), else $FNR_LOG_FORMAT, else text on a terminal and json otherwise. */
  format?: LogFormat
}

let processLogFormat: LogFormat | undefined

/** The format every logger of this process uses unless told otherwise (the command line's --log-format). */
export function setLogFormat(format: LogFormat | undefined): void {
  processLogFormat = format
}

export function parseLogFormat(value: string, origin: string): LogFormat {
  if ((LOG_FORMATS as readonly string[]).includes(value)) return value as LogFormat
  throw new FnrError('Usage', `${origin} must be json or text, got ${JSON.stringify(value)}`)
}

/** --log-format, else $FNR_LOG_FORMAT, else text when the destination is a terminal and json otherwise. */
export function resolveLogFormat(destination: NodeJS.WritableStream | number, explicit?: LogFormat, env: NodeJS.ProcessEnv = process.env): LogFormat {
  if (explicit) return explicit
  if (processLogFormat) return processLogFormat
  if (env.FNR_LOG_FORMAT) return parseLogFormat(env.FNR_LOG_FORMAT, 'FNR_LOG_FORMAT')
  return isTerminal(destination) ? 'text' : 'json'
}

function isTerminal(destination: NodeJS.WritableStream | number): boolean {
  return typeof destination === 'number' ? isatty(destination) : (destination as {isTTY?: boolean}).isTTY === true
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
  const format = resolveLogFormat(destination, options.format)
  const stream =
    format === 'text'
      ? textStream(destination)
      : typeof destination === 'number'
        ? pino.destination({dest: destination, sync: true})
        : destination
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

/**
 * pino-pretty used as a plain stream (no transport, no worker thread): each JSON line becomes
 * `[HH:MM:ss.mmm] LEVEL (name): message {fields}` on one line.
 */
function textStream(destination: NodeJS.WritableStream | number): NodeJS.WritableStream {
  const colorize = isTerminal(destination) && !process.env.NO_COLOR && process.env.TERM !== 'dumb'
  return PinoPretty({
    destination,
    sync: true,
    colorize,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    customLevels: Object.entries(CUSTOM_LEVELS).map(([name, value]) => `${name}:${value}`).join(','),
    customColors: 'error:red,warn:yellow,lifecycle:magenta,info:green,request:cyan,debug:blue,trace:gray',
  }) as unknown as NodeJS.WritableStream
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
