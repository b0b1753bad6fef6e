/**
 * Optional OpenTelemetry tracing of `fnr serve` and `fnr wrapper-server`, exported over OTLP/HTTP.
 *
 * Opt-in through the standard environment variables, read once at startup:
 *   - OTEL_TRACES_EXPORTER=otlp turns it on (other exporters are not supported and are reported;
 *     `none`, which Porch's Deployment sets, means off);
 *   - without OTEL_TRACES_EXPORTER, it is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 *     OTEL_EXPORTER_OTLP_ENDPOINT is set (the endpoint is the opt-in: no collector is assumed);
 *   - OTEL_SDK_DISABLED=true turns it off whatever else is set;
 *   - the exporter reads its own settings (endpoints, OTEL_EXPORTER_OTLP_*_HEADERS, timeouts;
 *     protocol http/json); OTEL_SERVICE_NAME names the service (default fnr-serve or fnr-wrapper-server).
 * When off, nothing of OpenTelemetry is loaded (the SDK and exporter are imported here lazily), and
 * the server's Telemetry has no tracing (telemetry.ts), so the request path costs one property read.
 *
 * Spans (W3C trace context in the gRPC `traceparent` metadata links the processes, trace.ts):
 *   runner   EvaluateFunction (server; fn.image, fnr.runtime, rpc.grpc.status_code)
 *              ├ pod.acquire (internal; fnr.pod.name, fnr.pod.started) ─ pod.create (when this call started the pod)
 *              └ wrapper.call (client; net.peer.name), whose id is the traceparent the wrapper gets
 *   wrapper  EvaluateFunction (server, child of wrapper.call)
 *              └ function.process (internal; the entrypoint's run, process.exit.code)
 */
import type {Logger} from './log.js'
import type {TraceContext} from './trace.js'

export type SpanKindName = 'server' | 'client' | 'internal'

export interface SpanOptions {
  /** The parent, as a traceparent header (the caller's, or a span of this process). */
  parent?: string
  tracestate?: string
  kind?: SpanKindName
  attributes?: Record<string, string | number | boolean | undefined>
  /** Start time (ms since the epoch), for spans recorded after the fact. */
  startTime?: number
}

export interface SpanHandle {
  /** This span as trace context: its traceparent is what a child (or the next hop) gets. */
  readonly context: TraceContext
  setAttributes(attributes: Record<string, string | number | boolean | undefined>): void
  /** Ends the span; with an error, its status is ERROR with the message. */
  end(error?: string, endTime?: number): void
}

export interface Tracing {
  startSpan(name: string, options?: SpanOptions): SpanHandle
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>
}

/** Whether the environment asks for trace export (see the top of the file); never loads anything. */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): {on: boolean; problem?: string} {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return {on: false}
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '')
  if (exporters.length > 0) {
    if (exporters.includes('none')) return {on: false}
    const others = exporters.filter((e) => e !== 'otlp')
    return {on: exporters.includes('otlp'), ...(others.length ? {problem: `OTEL_TRACES_EXPORTER ${others.join(',')} is not supported (only otlp, over HTTP)`} : {})}
  }
  return {on: !!(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT)}
}

const FLAGS_SAMPLED = 1

/**
 * Starts tracing when the environment asks for it (loading the SDK and the OTLP/HTTP exporter
 * now); undefined otherwise.
 */
export async function startTracingFromEnv(defaultServiceName: string, logger: Logger, env: NodeJS.ProcessEnv = process.env): Promise<Tracing | undefined> {
  const wanted = tracingRequested(env)
  if (wanted.problem) logger.warn('OpenTelemetry: ' + wanted.problem)
  if (!wanted.on) return undefined
  if ((env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/json') !== 'http/json') {
    logger.warn('OpenTelemetry: only the http/json OTLP protocol is supported; exporting with it', {protocol: env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL})
  }
  const [api, sdk, {OTLPTraceExporter}, {resourceFromAttributes}] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ])
  const serviceName = env.OTEL_SERVICE_NAME || defaultServiceName
  const exporter = new OTLPTraceExporter()
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes({'service.name': serviceName}),
    spanProcessors: [new sdk.BatchSpanProcessor(exporter, {scheduledDelayMillis: 1000})],
  })
  const tracer = provider.getTracer('fnr')
  const kinds = {server: api.SpanKind.SERVER, client: api.SpanKind.CLIENT, internal: api.SpanKind.INTERNAL}
  const parentContext = (traceparent: string | undefined, tracestate: string | undefined): import('@opentelemetry/api').Context => {
    const m = traceparent ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(traceparent.trim()) : null
    if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return api.ROOT_CONTEXT
    return api.trace.setSpanContext(api.ROOT_CONTEXT, {
      traceId: m[1]!,
      spanId: m[2]!,
      traceFlags: parseInt(m[3]!, 16),
      isRemote: true,
      ...(tracestate ? {traceState: api.createTraceState(tracestate)} : {}),
    })
  }
  const t: Tracing = {
    startSpan(name, options = {}) {
      const attributes = Object.fromEntries(Object.entries(options.attributes ?? {}).filter(([, v]) => v !== undefined)) as Record<string, string | number | boolean>
      const ctx = parentContext(options.parent, options.tracestate)
      const span = tracer.startSpan(name, {kind: kinds[options.kind ?? 'internal'], attributes, ...(options.startTime !== undefined ? {startTime: options.startTime} : {})}, ctx)
      const sc = span.spanContext()
      const parent = api.trace.getSpanContext(ctx)
      const flags = (sc.traceFlags & FLAGS_SAMPLED ? '01' : '00')
      const context: TraceContext = {
        traceId: sc.traceId,
        spanId: sc.spanId,
        ...(parent ? {parentSpanId: parent.spanId} : {}),
        flags,
        traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`,
        ...(options.tracestate ? {tracestate: options.tracestate} : {}),
      }
      return {
        context,
        setAttributes(a) {
          for (const [k, v] of Object.entries(a)) if (v !== undefined) span.setAttribute(k, v)
        },
        end(error, endTime) {
          if (error !== undefined) span.setStatus({code: api.SpanStatusCode.ERROR, message: error})
          span.end(endTime)
        },
      }
    },
    async shutdown() {
      await provider.shutdown().catch((err: unknown) => logger.warn('OpenTelemetry: cannot export the last spans', {error: (err as Error).message}))
    },
  }
  logger.info('OpenTelemetry tracing on', {service: serviceName, endpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || '(exporter default)'})
  return t
}

/**
 * `fnr serve` / `fnr wrapper-server`: starts tracing from the environment, for the server to hand
 * to what it builds (telemetry.ts); stop() flushes. Without tracing (nothing loaded) when it is off.
 */
export async function startProcessTracing(defaultServiceName: string, logger: Logger): Promise<{tracing?: Tracing; stop(): Promise<void>}> {
  if (!tracingRequested().on && !tracingRequested().problem) return {stop: async () => {}}
  const t = await startTracingFromEnv(defaultServiceName, logger)
  if (!t) return {stop: async () => {}}
  return {tracing: t, stop: () => t.shutdown()}
}
