/**
 * `fnr serve`'s flags as plain specs and the ServeOptions they make: one definition for the oclif
 * command (src/commands/serve.ts: help, manifest, parsing) and for the direct entry bin/run.js
 * uses to start the server without loading oclif (fast-serve.ts). Nothing here imports oclif.
 */
import {resolveExecPaths} from '../lib/config/embedded.js'
import {parseResourceFlags} from '../lib/config/pod-cache-config.js'
import {DEFAULT_MAX_PARALLEL_PODS, DEFAULT_MAX_WAITLIST_LENGTH, parseFunctionConfigSource, parsePinImageDigests, parsePodAddress, podRuntimeEnv, positiveOr} from '../lib/config/serve-config.js'
import {
  FUNCTION_CONFIG_FLAG_SPECS,
  LISTENER_LIMIT_FLAG_SPECS,
  LISTENER_TLS_FLAG_SPECS,
  LOG_LEVEL_SPEC,
  MAX_REQUEST_BODY_SIZE_SPEC,
  METRICS_FLAG_SPECS,
  POD_FLAG_SPECS,
  REGISTRY_FLAG_SPECS,
  RESPONSE_CACHE_FLAG_SPECS,
  registrySettings,
} from '../lib/flags/runner-flag-specs.js'
import {EXEC_FLAG_SPECS, type FlagSpecs, type SpecValue} from '../lib/flags/spec.js'
import {parseLimitFlags} from '../lib/grpc/limits.js'
import {DEFAULT_PRESTART_IDLE_TTL_MS, DEFAULT_PRESTART_PER_IMAGE} from '../lib/process/prestart.js'
import {parsePassEnv} from '../lib/process/run.js'
import type {ServeOptions} from '../lib/serve.js'

/** In the order help lists them. */
export const SERVE_FLAG_SPECS = {
  port: {kind: 'integer', summary: 'gRPC listen port.', default: 9445, min: 0, max: 65535},
  'disable-runtimes': {kind: 'string', summary: 'Comma-separated runtimes to disable: exec, pod.', default: ''},
  'log-level': LOG_LEVEL_SPEC,
  'max-request-body-size': MAX_REQUEST_BODY_SIZE_SPEC,
  'grace-period': {kind: 'duration', summary: 'How long calls in flight may run after SIGTERM before they are cancelled.', default: 25_000, defaultHelp: '25s'},
  ...EXEC_FLAG_SPECS,
  'exec-env': {kind: 'string', summary: 'Runner environment variables to pass to exec functions, besides HTTP_PROXY, HTTPS_PROXY and NO_PROXY (any case), which always pass (comma-separated or repeated).', multiple: true},
  'prestart-functions': {kind: 'integer', summary: 'Exec function processes kept started and waiting on stdin per image called recently, so a call only writes its input (0 turns pre-starting off; docs/process.md).', default: DEFAULT_PRESTART_PER_IMAGE, min: 0, max: 16, helpGroup: 'EXEC RUNTIME'},
  'prestart-idle-ttl': {kind: 'duration', summary: 'How long a pre-started exec function process waits for a call before it is killed.', default: DEFAULT_PRESTART_IDLE_TTL_MS, defaultHelp: '1m', helpGroup: 'EXEC RUNTIME'},
  ...POD_FLAG_SPECS,
  ...REGISTRY_FLAG_SPECS,
  ...FUNCTION_CONFIG_FLAG_SPECS,
  ...METRICS_FLAG_SPECS,
  ...RESPONSE_CACHE_FLAG_SPECS,
  ...LISTENER_TLS_FLAG_SPECS,
  ...LISTENER_LIMIT_FLAG_SPECS,
} satisfies FlagSpecs

/** Porch's boolean flags that Go also accepts bare (config/go-flags.ts normaliseGoStyleArgs). */
export const SERVE_BOOLEAN_FLAG_NAMES = new Set(['warm-up-pod-cache', 'enable-private-registries', 'enable-private-registries-tls', 'strict-config', 'harden-pod-templates', 'collect-porch-pods'])

export type ServeFlagValues = {[K in keyof typeof SERVE_FLAG_SPECS]: SpecValue<(typeof SERVE_FLAG_SPECS)[K]>}

/**
 * ServeOptions from parsed flags; `given(name)` says whether the command line set the flag. `warn`
 * receives the warnings reading them gives (default: one stderr line each, as the commands print).
 */
export function serveOptionsFromFlags(flags: ServeFlagValues, given: (name: keyof typeof SERVE_FLAG_SPECS) => boolean, warn?: (message: string) => void): ServeOptions {
  return {
    port: flags.port,
    ...(flags['bind-address'] ? {host: flags['bind-address']} : {}),
    limits: parseLimitFlags((name) => flags[name] as string | undefined),
    disableRuntimes: flags['disable-runtimes'],
    maxRequestBodySize: flags['max-request-body-size'],
    gracePeriodMs: flags['grace-period'],
    tls: {certFile: flags['tls-cert-file'], keyFile: flags['tls-key-file'], clientCaFile: flags['tls-client-ca-file']},
    exec: {
      ...resolveExecPaths(flags.config, flags.functions, given('config'), given('functions'), warn ? {warn} : {}),
      defaultImagePrefix: flags['default-image-prefix'],
      passEnv: parsePassEnv(flags['exec-env'] ?? []),
      prestart: {perImage: flags['prestart-functions'], idleTtlMs: flags['prestart-idle-ttl']},
    },
    pod: {
      namespace: flags['pod-namespace'],
      ttlMs: flags['pod-ttl'],
      scanIntervalMs: flags['scan-interval'],
      cacheConfigPath: flags['pod-cache-config'],
      warmUp: flags['warm-up-pod-cache'],
      templateConfigMap: flags['function-pod-template'],
      maxWaitlistLength: positiveOr(flags['max-waitlist-length'], DEFAULT_MAX_WAITLIST_LENGTH),
      maxParallelPodsPerFunction: positiveOr(flags['max-parallel-pods-per-function'], DEFAULT_MAX_PARALLEL_PODS),
      wrapperServerImage: podRuntimeEnv().wrapperServerImage,
      podReadyTimeoutMs: flags['pod-ready-timeout'],
      callRetries: flags['pod-call-retries'],
      podAddress: parsePodAddress(flags['pod-address']),
      clusterDomain: flags['cluster-domain'],
      kubeconfig: flags.kubeconfig || undefined,
      resources: parseResourceFlags(flags['pod-requests'], flags['pod-limits']),
      strictConfig: flags['strict-config'],
      hardenTemplates: flags['harden-pod-templates'],
      collectPorchPods: flags['collect-porch-pods'],
      owner: flags['replica-id'] || undefined,
      leaseDurationMs: flags['replica-lease-duration'],
      pinImageDigests: parsePinImageDigests(flags['pin-image-digests']),
    },
    functionConfig: {
      source: parseFunctionConfigSource(flags['function-config-source']),
      filesGiven: given('config') || given('pod-cache-config'),
      ...(flags['function-config-namespace'] ? {namespace: flags['function-config-namespace']} : {}),
    },
    registry: registrySettings(flags),
    metricsPort: flags['metrics-port'],
    responseCache: {ttlMs: flags['cache-ttl'], maxTtlMs: flags['cache-max-ttl'], maxBytes: flags['cache-max-bytes'], maxEntries: flags['cache-max-entries']},
  }
}
