/**
 * The listener and budget flags that `fnr serve` and `fnr wrapper-server` (oclif command and
 * packaged executable) share, parsed from strings in one place (docs/limits.md).
 */
import {parseGoDuration} from '../config/go-flags.js'
import {CallBudget, deriveBudget, fmtBytes, parseByteQuantity, validateBudgetOverrides, type BudgetOverrides} from '../budget.js'
import {FnrError} from '../errors.js'
import type {Logger} from '../telemetry/log.js'
import type {Telemetry} from '../telemetry/telemetry.js'
import type {EvaluatorServerOptions} from './server.js'

export interface ListenerLimits extends BudgetOverrides {
  /** --connection-idle-timeout: GOAWAY to a connection without streams for this long. */
  connectionIdleMs?: number
  /** --message-receive-timeout: a request must be complete this long after its stream opened. */
  receiveTimeoutMs?: number
  /** --handshake-timeout: a connection must send the HTTP/2 preface within this. */
  handshakeTimeoutMs?: number
  /** --default-deadline: the deadline of a call that came without one (0: none). */
  defaultDeadlineMs?: number
}

/**
 * The deadline a call without one gets, by default: 5 minutes. porch-server's API requests time
 * out after 291 s (Porch v1.5.8 sets the generic API server's RequestTimeout to 291 s, "just above"
 * its own 290 s), so no render that porch-server still waits for through its API is cut; calls it
 * makes without a request behind them (no deadline at all) no longer hang for ever.
 */
export const DEFAULT_DEADLINE_MS = 5 * 60_000

/** Flag name → what it sets and how it is parsed. */
export const LIMIT_FLAGS = {
  'memory-limit': {summary: 'Memory the budget is derived from (1Gi, 512Mi); default the cgroup\'s memory limit, else the machine\'s memory.', kind: 'bytes', key: 'memoryLimitBytes'},
  'max-concurrent-calls': {summary: 'Slots: calls evaluated at once whose function works (a call whose function sleeps takes only a share of one; from 4 slots, one is kept for a client with no call running); default one per 64 MiB of the memory limit (2-256).', kind: 'int', key: 'maxConcurrentCalls'},
  'max-queued-calls': {summary: 'Calls waiting for a turn before calls are refused RESOURCE_EXHAUSTED; default 64 per concurrent call (64-10000).', kind: 'int', key: 'maxQueuedCalls'},
  'max-inflight-bytes': {summary: 'Request bytes held by calls being received, queued or running (1Gi, 512Mi); default half of the memory limit.', kind: 'bytes', key: 'maxHeldBytes'},
  'max-concurrent-streams': {summary: 'HTTP/2 streams per connection, plus one per call whose function sleeps (clients queue the rest); default twice --max-concurrent-calls (at least 4).', kind: 'int', key: 'maxConcurrentStreams'},
  'connection-idle-timeout': {summary: 'Close (GOAWAY) a connection that has had no call for this long; default 5m, 0 never.', kind: 'duration', key: 'connectionIdleMs'},
  'message-receive-timeout': {summary: 'Reset a stream whose request message, still incomplete, received less than 1 KiB a second over this long (a stalled or trickling client); default 60s, 0 never.', kind: 'duration', key: 'receiveTimeoutMs'},
  'handshake-timeout': {summary: 'Close a connection that has not sent the HTTP/2 preface within this; default 10s, 0 never.', kind: 'duration', key: 'handshakeTimeoutMs'},
  'default-deadline': {summary: 'Deadline of a call that comes without one (porch-server often sends none): past it the call fails DEADLINE_EXCEEDED and its function processes are killed; default 5m (porch-server\'s API requests time out after 291s), 0 never.', kind: 'duration', key: 'defaultDeadlineMs'},
} as const satisfies Record<string, {summary: string; kind: 'bytes' | 'int' | 'duration'; key: keyof ListenerLimits}>

export type LimitFlagName = keyof typeof LIMIT_FLAGS
export const LIMIT_FLAG_NAMES = Object.keys(LIMIT_FLAGS) as LimitFlagName[]

/** Parses the limit flags given as strings (absent ones stay undefined); throws Usage errors. */
export function parseLimitFlags(get: (name: LimitFlagName) => string | undefined): ListenerLimits {
  const limits: Record<string, number> = {}
  for (const name of LIMIT_FLAG_NAMES) {
    const raw = get(name)
    if (raw === undefined) continue
    const spec = LIMIT_FLAGS[name]
    let value: number | undefined
    if (spec.kind === 'bytes') value = parseByteQuantity(name, raw)
    else if (spec.kind === 'duration') {
      value = /^\s*0\s*$/.test(raw) ? 0 : parseGoDuration(raw)
      if (value === undefined || value < 0) throw new FnrError('Usage', `--${name}: expected a duration like 30s, 5m or 0, got ${JSON.stringify(raw)}`)
    } else {
      if (!/^\s*\d+\s*$/.test(raw)) throw new FnrError('Usage', `--${name}: expected a whole number, got ${JSON.stringify(raw)}`)
      value = Number(raw)
    }
    limits[spec.key] = value
  }
  const parsed = limits as ListenerLimits
  validateBudgetOverrides(parsed)
  if (parsed.maxConcurrentStreams !== undefined && parsed.maxConcurrentStreams < 1) throw new FnrError('Usage', '--max-concurrent-streams must be 1 or more')
  return parsed
}

/**
 * The budget and HTTP/2 settings of a server for these limits; logs the budget once (at debug level
 * for the in-pod wrapper, whose stderr a failed start shows as one line). The budget reports to
 * `telemetry`, the server's.
 */
export function serverLimits(
  limits: ListenerLimits | undefined,
  logger: Logger,
  {quiet = false, runningPids, paceStarts, telemetry}: {quiet?: boolean; runningPids?: () => Iterable<number>; paceStarts?: boolean; telemetry?: Telemetry} = {},
): Pick<EvaluatorServerOptions, 'budget' | 'http2' | 'defaultDeadlineMs'> {
  const l = limits ?? {}
  const settings = deriveBudget(l)
  logger[quiet ? 'debug' : 'info']('call budget', {
    memoryLimit: fmtBytes(settings.memoryLimit.bytes),
    from: settings.memoryLimit.file ?? settings.memoryLimit.source,
    maxConcurrentCalls: settings.maxConcurrentCalls,
    maxQueuedCalls: settings.maxQueuedCalls,
    maxInflightBytes: fmtBytes(settings.maxHeldBytes),
    maxRunningBytes: fmtBytes(settings.maxRunningBytes),
    maxConcurrentStreams: settings.maxConcurrentStreams,
    defaultDeadline: l.defaultDeadlineMs === 0 ? 'none' : `${(l.defaultDeadlineMs ?? DEFAULT_DEADLINE_MS) / 1000}s`,
  })
  return {
    budget: new CallBudget(settings, logger, {runningPids, paceStarts, telemetry}),
    defaultDeadlineMs: l.defaultDeadlineMs ?? DEFAULT_DEADLINE_MS,
    http2: {maxConcurrentStreams: settings.maxConcurrentStreams, connectionIdleMs: l.connectionIdleMs === 0 ? NEVER_MS : l.connectionIdleMs, receiveTimeoutMs: l.receiveTimeoutMs, handshakeTimeoutMs: l.handshakeTimeoutMs},
  }
}

/** grpc-js reads an idle time at or above ~2^31 ms as "never". */
const NEVER_MS = 2 ** 31 - 1
