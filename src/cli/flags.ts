/**
 * Flag definitions shared by the commands. The serve flags keep the names and defaults of Porch's
 * function runner (porch-function-runner.md §7.1), so its Deployment args carry over unchanged.
 */
import {Flags} from '@oclif/core'

import {FnrError} from '../lib/errors.js'
import {parseGoBool, parseGoDuration} from '../lib/config/go-flags.js'
import {LIMIT_FLAG_NAMES, LIMIT_FLAGS, type LimitFlagName} from '../lib/grpc/limits.js'
import {EXEC_FLAG_SPECS, type FlagSpec, type FlagSpecs} from './spec.js'

export const goBool = Flags.custom<boolean>({
  parse: async (input) => {
    const v = parseGoBool(input)
    if (v === undefined) throw new FnrError('Usage', `expected true or false, got ${JSON.stringify(input)}`)
    return v
  },
  helpValue: 'true|false',
})

/** A Go duration ("30m", "1h30m", "500ms") parsed to milliseconds. */
export const goDuration = Flags.custom<number>({
  parse: async (input) => {
    const v = parseGoDuration(input)
    if (v === undefined) throw new FnrError('Usage', `expected a duration like 30m, 1h30m or 500ms, got ${JSON.stringify(input)}`)
    return v
  },
  helpValue: '<duration>',
})

export const DEFAULT_MAX_REQUEST_BODY_SIZE = 6 * 1024 * 1024

export const logLevelFlag = Flags.integer({
  summary: 'Log verbosity, 0 (errors and warnings) to 5 (trace, includes ResourceLists).',
  default: 2,
  min: 0,
  max: 5,
  helpGroup: 'GLOBAL',
})

/** Given to every command that has --log-level (FnrCommand's baseFlags). */
export const logFormatFlag = Flags.string({
  summary: 'Log format: json (one object per line) or text (one readable line). Default $FNR_LOG_FORMAT, else text when stderr is a terminal and json otherwise.',
  options: ['json', 'text'],
  helpGroup: 'GLOBAL',
})

export const maxRequestBodySizeFlag = Flags.integer({
  summary: 'Maximum gRPC message size in bytes, for receiving and sending (keep in sync with porch-server).',
  default: DEFAULT_MAX_REQUEST_BODY_SIZE,
  min: 1024,
})

/** oclif flags built from plain specs (spec.ts), so the oclif-free fast paths share them. */
export function oclifFlags<S extends FlagSpecs>(specs: S): Record<keyof S, ReturnType<typeof oclifFlag>> {
  return Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, oclifFlag(spec)])) as Record<keyof S, ReturnType<typeof oclifFlag>>
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function oclifFlag(spec: FlagSpec): any {
  const common = {
    summary: spec.summary,
    description: spec.description,
    char: spec.char as 'i' | undefined,
    helpGroup: spec.helpGroup,
    exclusive: spec.exclusive,
  }
  switch (spec.kind) {
    case 'boolean':
      return Flags.boolean({...common, default: spec.default as boolean | undefined, allowNo: spec.allowNo})
    case 'integer':
      return Flags.integer({...common, default: spec.default as number | undefined, min: spec.min})
    case 'duration':
      return goDuration({...common, default: spec.default as number | undefined, ...(spec.defaultHelp ? {defaultHelp: async () => spec.defaultHelp!} : {})})
    default:
      return spec.multiple
        ? Flags.string({...common, multiple: true})
        : Flags.string({...common, default: spec.default as string | undefined})
  }
}

export const execFlags = {
  functions: Flags.string({...oclifCommon(EXEC_FLAG_SPECS.functions), default: EXEC_FLAG_SPECS.functions.default}),
  config: Flags.string({...oclifCommon(EXEC_FLAG_SPECS.config), default: EXEC_FLAG_SPECS.config.default}),
  'default-image-prefix': Flags.string({...oclifCommon(EXEC_FLAG_SPECS['default-image-prefix']), default: EXEC_FLAG_SPECS['default-image-prefix'].default}),
}

function oclifCommon(spec: FlagSpec): {summary: string; description?: string; helpGroup?: string} {
  return {summary: spec.summary, description: spec.description, helpGroup: spec.helpGroup}
}

export const podFlags = {
  'pod-namespace': Flags.string({summary: 'Namespace of function pods, their Services and the pull secret.', default: 'porch-fn-system', helpGroup: 'POD RUNTIME'}),
  'pod-ttl': goDuration({summary: 'Idle time after which a function pod is garbage collected.', default: 30 * 60_000, defaultHelp: async () => '30m', helpGroup: 'POD RUNTIME'}),
  'scan-interval': goDuration({summary: 'How often the pod garbage collector runs (<= 0 disables it).', default: 60_000, defaultHelp: async () => '1m', helpGroup: 'POD RUNTIME'}),
  'pod-cache-config': Flags.string({summary: 'Per-image pod settings and the warm-up list.', default: '/pod-cache-config/pod-cache-config.yaml', helpGroup: 'POD RUNTIME'}),
  'warm-up-pod-cache': goBool({summary: 'Create pods for the pod-cache-config images at startup.', default: true, helpGroup: 'POD RUNTIME'}),
  'strict-config': goBool({summary: 'Fail the start on a --pod-cache-config that cannot be read or has bad entries (Porch only warns and serves with the defaults, and so does fnr by default).', default: false, helpGroup: 'POD RUNTIME'}),
  'function-pod-template': Flags.string({summary: 'ConfigMap (in the runner\'s namespace) with "template" and "serviceTemplate" keys.', default: '', helpGroup: 'POD RUNTIME'}),
  'collect-porch-pods': goBool({summary: 'At start, delete the function pods (and Services) Porch\'s runner left in --pod-namespace (label fn.kpt.dev/image without fnr\'s labels). Turn it on once Porch\'s runner is gone: a call of it may still be using them.', default: false, helpGroup: 'POD RUNTIME'}),
  'harden-pod-templates': goBool({summary: 'Fill in fnr\'s security defaults (non-root uid 65532 when no uid is set, no service-account token, seccomp RuntimeDefault, no privilege escalation, capabilities dropped) wherever a user\'s template (--function-pod-template, Porch\'s PodTemplate) says nothing; by default it is used as written, with a warning for its weak settings.', default: false, helpGroup: 'POD RUNTIME'}),
  'max-waitlist-length': Flags.integer({summary: 'Calls in flight on a pod before another pod is started (<= 0 means 2).', default: 2, helpGroup: 'POD RUNTIME'}),
  'max-parallel-pods-per-function': Flags.integer({summary: 'Maximum pods per function image (<= 0 means 1).', default: 1, helpGroup: 'POD RUNTIME'}),
  'pod-ready-timeout': goDuration({summary: 'How long a new function pod may take to become ready (the caller\'s deadline always caps the wait).', default: 60_000, defaultHelp: async () => '60s', helpGroup: 'POD RUNTIME'}),
  'pod-call-retries': Flags.integer({summary: 'Retries of a call whose pod turned out unavailable (the pod is evicted; the retry goes to another pod).', default: 1, min: 0, max: 5, helpGroup: 'POD RUNTIME'}),
  'pod-address': Flags.string({summary: 'How fnr reaches function pods: "service" (the pod\'s Service DNS name) or "pod-ip".', default: 'service', options: ['service', 'pod-ip'], helpGroup: 'POD RUNTIME'}),
  'cluster-domain': Flags.string({summary: 'Cluster domain of Service DNS names (<svc>.<ns>.svc.<domain>).', default: 'cluster.local', helpGroup: 'POD RUNTIME'}),
  kubeconfig: Flags.string({summary: 'Kubeconfig file; default in-cluster config, then $KUBECONFIG or ~/.kube/config.', default: '', helpGroup: 'POD RUNTIME'}),
  'pod-requests': Flags.string({summary: 'Resource requests of the function container in the inline template ("cpu=100m,memory=128Mi"; "" for none).', default: 'cpu=100m,memory=128Mi', helpGroup: 'POD RUNTIME'}),
  'pod-limits': Flags.string({summary: 'Resource limits of the function container in the inline template ("memory=1Gi"; "" for none).', default: 'memory=1Gi', helpGroup: 'POD RUNTIME'}),
  'replica-id': Flags.string({summary: 'This replica\'s identity on the pods it owns and its Lease (default $POD_NAME, else the host name plus a random suffix); unique among live replicas.', default: '', helpGroup: 'POD RUNTIME'}),
  'pin-image-digests': Flags.string({summary: 'Run function containers as repo@digest (the digest the registry resolved for the tag), so a node\'s stale copy of a moved tag cannot run: true, false, or auto (on when the response cache is on).', default: 'auto', options: ['auto', 'true', 'false'], helpGroup: 'POD RUNTIME'}),
  'replica-lease-duration': goDuration({summary: 'Duration of this replica\'s Lease in the pod namespace, renewed every third of it (0: hold no Lease).', default: 30_000, defaultHelp: async () => '30s', helpGroup: 'POD RUNTIME'}),
}

export const registryFlags = {
  'enable-private-registries': goBool({summary: 'Use registry credentials from --registry-auth-secret-path for any registry.', default: false, helpGroup: 'REGISTRIES'}),
  'registry-auth-secret-path': Flags.string({summary: 'Docker config JSON with registry credentials.', default: '/var/tmp/config-secret/.dockerconfigjson', helpGroup: 'REGISTRIES'}),
  'registry-auth-secret-name': Flags.string({summary: 'Name of the image pull Secret created in --pod-namespace.', default: 'auth-secret', helpGroup: 'REGISTRIES'}),
  'enable-private-registries-tls': goBool({summary: 'Trust the CA in --tls-secret-path for registries (needs --enable-private-registries).', default: false, helpGroup: 'REGISTRIES'}),
  'tls-secret-path': Flags.string({summary: 'Directory holding ca.crt or ca.pem.', default: '/var/tmp/tls-secret/', helpGroup: 'REGISTRIES'}),
}

/** Where the `fnr pods …` commands find the cluster and the function pods. */
export const clusterFlags = {
  namespace: Flags.string({char: 'n', summary: 'Namespace of the function pods (serve\'s --pod-namespace).', default: 'porch-fn-system', helpGroup: 'CLUSTER'}),
  context: Flags.string({summary: 'Kubeconfig context to use (default: the current context).', helpGroup: 'CLUSTER'}),
  kubeconfig: Flags.string({summary: 'Kubeconfig file; default in-cluster config, then $KUBECONFIG or ~/.kube/config.', helpGroup: 'CLUSTER'}),
  'log-level': Flags.integer({summary: 'Log verbosity, 0 (errors and warnings) to 5 (trace); 4 and up print stack traces on errors.', default: 0, min: 0, max: 5, helpGroup: 'GLOBAL'}),
}

/**
 * What `fnr pods warm|gc` need to know the runner's current function pod templates (and so the
 * template version its pods carry): the same flags as `fnr serve`, plus the wrapper-server image
 * serve reads from $WRAPPER_SERVER_IMAGE and the runner's namespace.
 */
export const runnerTemplateFlags = {
  'function-pod-template': podFlags['function-pod-template'],
  'harden-pod-templates': podFlags['harden-pod-templates'],
  'wrapper-server-image': Flags.string({summary: 'Wrapper-server image of the inline template (what `fnr serve` reads from $WRAPPER_SERVER_IMAGE).', env: 'WRAPPER_SERVER_IMAGE', helpGroup: 'POD RUNTIME'}),
  'runner-namespace': Flags.string({summary: 'Namespace of the runner, where --function-pod-template is read (default: this pod\'s service account namespace, else $POD_NAMESPACE, else porch-system).', helpGroup: 'POD RUNTIME'}),
  'pod-requests': podFlags['pod-requests'],
  'pod-limits': podFlags['pod-limits'],
  'max-request-body-size': maxRequestBodySizeFlag,
}

/** `fnr serve`: where exec mappings, per-image pod settings and pod changes come from (FunctionConfig CRD). */
export const functionConfigFlags = {
  'function-config-source': Flags.string({
    summary: 'Where exec mappings, per-image pod settings and pod template changes come from: files (--config, --pod-cache-config), crd (FunctionConfig objects, watched), both (FunctionConfig first, then the files), or auto: crd when the API server serves FunctionConfigs (both if --config or --pod-cache-config is given), else files; exec-only without a configured cluster is files.',
    default: 'auto',
    options: ['auto', 'files', 'crd', 'both'],
    helpGroup: 'FUNCTION CONFIG',
  }),
  'function-config-namespace': Flags.string({
    summary: 'Namespace of the FunctionConfig objects (default: --pod-namespace, where Porch keeps them).',
    default: '',
    helpGroup: 'FUNCTION CONFIG',
  }),
}

/** `fnr serve --metrics-port` (fnr only; Porch has no metrics endpoint). */
/** The budget and HTTP/2 limits of serve and wrapper-server (lib/grpc/limits.ts parses them). */
export const listenerLimitFlags = {
  'bind-address': Flags.string({summary: 'Listen address (gRPC and metrics), e.g. 127.0.0.1 or ::1; default $FNR_BIND_ADDRESS, else every address family (IPv4 and IPv6), as Go\'s ":port".', helpGroup: 'LIMITS'}),
  ...(Object.fromEntries(LIMIT_FLAG_NAMES.map((name) => [name, Flags.string({summary: LIMIT_FLAGS[name].summary, helpGroup: 'LIMITS'})])) as Record<LimitFlagName, ReturnType<typeof Flags.string>>),
}

export const metricsFlags = {
  'metrics-port': Flags.integer({summary: 'Port of the Prometheus endpoint (/metrics, /healthz) on the gRPC listen address; 0 turns metrics off.', default: 0, min: 0, max: 65535, helpGroup: 'OBSERVABILITY'}),
}

/** `fnr serve` response cache (fnr only, off by default). */
export const responseCacheFlags = {
  'cache-ttl': goDuration({summary: 'Response cache: how long a successful response is reused for the same function and request bytes; 0 (default) caches only images switched on in --pod-cache-config.', default: 0, defaultHelp: async () => '0s', helpGroup: 'RESPONSE CACHE'}),
  'cache-max-ttl': goDuration({summary: 'Response cache: the longest any entry lives (clamps --cache-ttl and per-image TTLs).', default: 3_600_000, defaultHelp: async () => '1h', helpGroup: 'RESPONSE CACHE'}),
  'cache-max-bytes': Flags.integer({summary: 'Response cache: total size bound in bytes (least recently used entries go first).', default: 256 * 1024 * 1024, min: 1024, helpGroup: 'RESPONSE CACHE'}),
  'cache-max-entries': Flags.integer({summary: 'Response cache: entry count bound.', default: 10_000, min: 1, helpGroup: 'RESPONSE CACHE'}),
}

/** TLS on the `fnr serve` listener (off by default: Porch's porch-server dials plaintext). */
export const listenerTlsFlags = {
  'tls-cert-file': Flags.string({summary: 'Serve TLS with this certificate (PEM; with --tls-key-file). Default: plaintext, as Porch.', helpGroup: 'LISTENER TLS'}),
  'tls-key-file': Flags.string({summary: 'Private key (PEM) of --tls-cert-file.', helpGroup: 'LISTENER TLS'}),
  'tls-client-ca-file': Flags.string({summary: 'Require client certificates signed by a CA in this PEM file (mutual TLS).', helpGroup: 'LISTENER TLS'}),
}
