/** A Logger for tests that keeps what it is told, in order. */
import type {Logger} from '../../src/lib/telemetry/log.js'

export interface LogLine {
  level: string
  msg: string
  fields?: Record<string, unknown>
}

/** A Logger that keeps what it is told. */
export function memoryLogger(lines: LogLine[] = []): Logger & {lines: LogLine[]} {
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({level, msg, fields})
  const logger = {
    lines,
    error: at('error'),
    warn: at('warn'),
    lifecycle: at('lifecycle'),
    info: at('info'),
    request: at('request'),
    debug: at('debug'),
    trace: at('trace'),
    enabled: () => true,
    child: () => logger,
  }
  return logger
}
