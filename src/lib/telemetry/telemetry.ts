/**
 * What a server reports through: its metrics (metrics.ts; the no-op NO_METRICS unless metrics are
 * on) and its tracing (otel.ts; undefined unless OpenTelemetry export is on). `fnr serve` and
 * `fnr wrapper-server` build one at start and hand it to what they construct (the call budget, the
 * HTTP/2 guard, the response cache, the pod runtime, the registry client); nothing reads it from a
 * global, so two servers in one process share none of it.
 */
import {NO_METRICS, type Metrics} from './metrics.js'
import type {Tracing} from './otel.js'

export interface Telemetry {
  readonly metrics: Metrics
  /** Undefined when tracing is off: the request path then costs one property read. */
  readonly tracing?: Tracing
}

/** No metrics, no tracing: the default of every consumer. */
export const NO_TELEMETRY: Telemetry = Object.freeze({metrics: NO_METRICS})

/** The metrics of a consumer's `telemetry` option: the no-op ones when it has none. */
export function metricsOf(telemetry: Telemetry | undefined): Metrics {
  return (telemetry ?? NO_TELEMETRY).metrics
}
