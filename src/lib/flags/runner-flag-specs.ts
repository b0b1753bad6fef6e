/**
 * The specs of the flags `fnr serve`, `fnr wrapper-server` and `fnr pods …` share (oclif flags are
 * made from them in flags.ts). The serve flags keep the names and defaults of Porch's function
 * runner, so its Deployment args carry over unchanged. A file of its own, apart from spec.ts, so
 * the eval fast path's bundle does not carry them.
 */
import {LIMIT_FLAG_NAMES, LIMIT_FLAGS, type LimitFlagName} from '../grpc/limits.js'
import type {RunnerTemplateOptions} from '../pods/admin/templates.js'
import type {FlagSpec, FlagSpecs, SpecValue} from './spec.js'

export const DEFAULT_MAX_REQUEST_BODY_SIZE = 6 * 1024 * 1024

export const LOG_LEVEL_SPEC = {
  kind: 'integer',
  summary: 'Log verbosity, 0 (errors and warnings) to 5 (trace, includes ResourceLists).',
  default: 2,
  min: 0,
  max: 5,
  helpGroup: 'GLOBAL',
} satisfies FlagSpec

/** Given to every command that has --log-level (FnrCommand's baseFlags). */
export const LOG_FORMAT_SPEC = {
  kind: 'string',
  summary: 'Log format: json (one object per line) or text (one readable line). Default $FNR_LOG_FORMAT, else text when stderr is a terminal and json otherwise.',
  options: ['json', 'text'],
  helpGroup: 'GLOBAL',
} satisfies FlagSpec

export const MAX_REQUEST_BODY_SIZE_SPEC = {
  kind: 'integer',
  summary: 'Maximum gRPC message size in bytes, for receiving and sending (keep in sync with porch-server).',
  default: DEFAULT_MAX_REQUEST_BODY_SIZE,
  min: 1024,
} satisfies FlagSpec

export const POD_FLAG_SPECS = {
  'pod-namespace': {kind: 'string', summary: 'Namespace of function pods, their Services and the pull secret.', default: 'porch-fn-system', helpGroup: 'POD RUNTIME'},
  'pod-ttl': {kind: 'duration', summary: 'Idle time after which a function pod is garbage collected.', default: 30 * 60_000, defaultHelp: '30m', helpGroup: 'POD RUNTIME'},
  'scan-interval': {kind: 'duration', summary: 'How often the pod garbage collector runs (<= 0 disables it).', default: 60_000, defaultHelp: '1m', helpGroup: 'POD RUNTIME'},
  'pod-cache-config': {kind: 'string', summary: 'Per-image pod settings and the warm-up list.', default: '/pod-cache-config/pod-cache-config.yaml', helpGroup: 'POD RUNTIME'},
  'warm-up-pod-cache': {kind: 'go-bool', summary: 'Create pods for the pod-cache-config images at startup.', default: true, helpGroup: 'POD RUNTIME'},
  'strict-config': {kind: 'go-bool', summary: 'Fail the start on a --pod-cache-config that cannot be read or has bad entries (Porch only warns and serves with the defaults, and so does fnr by default).', default: false, helpGroup: 'POD RUNTIME'},
  'function-pod-template': {kind: 'string', summary: 'ConfigMap (in the runner\'s namespace) with "template" and "serviceTemplate" keys.', default: '', helpGroup: 'POD RUNTIME'},
  'collect-porch-pods': {kind: 'go-bool', summary: 'At start, delete the function pods (and Services) Porch\'s runner left in --pod-namespace (label fn.kpt.dev/image without fnr\'s labels). Turn it on once Porch\'s runner is gone: a call of it may still be using them.', default: false, helpGroup: 'POD RUNTIME'},
  'harden-pod-templates': {kind: 'go-bool', summary: 'Fill in fnr\'s security defaults (non-root uid 65532 when no uid is set, no service-account token, seccomp RuntimeDefault, no privilege escalation, capabilities dropped) wherever a user\'s template (--function-pod-template, Porch\'s PodTemplate) says nothing; by default it is used as written, with a warning for its weak settings.', default: false, helpGroup: 'POD RUNTIME'},
  'max-waitlist-length': {kind: 'integer', summary: 'Calls in flight on a pod before another pod is started (<= 0 means 2).', default: 2, helpGroup: 'POD RUNTIME'},
  'max-parallel-pods-per-function': {kind: 'integer', summary: 'Maximum pods per function image (<= 0 means 1).', default: 1, helpGroup: 'POD RUNTIME'},
  'pod-ready-timeout': {kind: 'duration', summary: 'How long a new function pod may take to become ready (the caller\'s deadline always caps the wait).', default: 60_000, defaultHelp: '60s', helpGroup: 'POD RUNTIME'},
  'pod-call-retries': {kind: 'integer', summary: 'Retries of a call whose pod turned out unavailable (the pod is evicted; the retry goes to another pod).', default: 1, min: 0, max: 5, helpGroup: 'POD RUNTIME'},
  'pod-address': {kind: 'string', summary: 'How fnr reaches function pods: "service" (the pod\'s Service DNS name) or "pod-ip".', default: 'service', options: ['service', 'pod-ip'], helpGroup: 'POD RUNTIME'},
  'cluster-domain': {kind: 'string', summary: 'Cluster domain of Service DNS names (<svc>.<ns>.svc.<domain>).', default: 'cluster.local', helpGroup: 'POD RUNTIME'},
  kubeconfig: {kind: 'string', summary: 'Kubeconfig file; default in-cluster config, then $KUBECONFIG or ~/.kube/config.', default: '', helpGroup: 'POD RUNTIME'},
  'pod-requests': {kind: 'string', summary: 'Resource requests of the function container in the inline template ("cpu=100m,memory=128Mi"; "" for none).', default: 'cpu=100m,memory=128Mi', helpGroup: 'POD RUNTIME'},
  'pod-limits': {kind: 'string', summary: 'Resource limits of the function container in the inline template ("memory=1Gi"; "" for none).', default: 'memory=1Gi', helpGroup: 'POD RUNTIME'},
  'replica-id': {kind: 'string', summary: 'This replica\'s identity on the pods it owns and its Lease (default $POD_NAME, else the host name plus a random suffix); unique among live replicas.', default: '', helpGroup: 'POD RUNTIME'},
  'pin-image-digests': {kind: 'string', summary: 'Run function containers as repo@digest (the digest the registry resolved for the tag), so a node\'s stale copy of a moved tag cannot run: true, false, or auto (on when the response cache is on).', default: 'auto', options: ['auto', 'true', 'false'], helpGroup: 'POD RUNTIME'},
  'replica-lease-duration': {kind: 'duration', summary: 'Duration of this replica\'s Lease in the pod namespace, renewed every third of it (0: hold no Lease).', default: 30_000, defaultHelp: '30s', helpGroup: 'POD RUNTIME'},
} satisfies FlagSpecs

export const REGISTRY_FLAG_SPECS = {
  'enable-private-registries': {kind: 'go-bool', summary: 'Use registry credentials from --registry-auth-secret-path for any registry.', default: false, helpGroup: 'REGISTRIES'},
  'registry-auth-secret-path': {kind: 'string', summary: 'Docker config JSON with registry credentials.', default: '/var/tmp/config-secret/.dockerconfigjson', helpGroup: 'REGISTRIES'},
  'registry-auth-secret-name': {kind: 'string', summary: 'Name of the image pull Secret created in --pod-namespace.', default: 'auth-secret', helpGroup: 'REGISTRIES'},
  'enable-private-registries-tls': {kind: 'go-bool', summary: 'Trust the CA in --tls-secret-path for registries (needs --enable-private-registries).', default: false, helpGroup: 'REGISTRIES'},
  'tls-secret-path': {kind: 'string', summary: 'Directory holding ca.crt or ca.pem.', default: '/var/tmp/tls-secret/', helpGroup: 'REGISTRIES'},
} satisfies FlagSpecs

/** Where the `fnr pods …` commands find the cluster and the function pods. */
export const CLUSTER_FLAG_SPECS = {
  namespace: {kind: 'string', char: 'n', summary: 'Namespace of the function pods (serve\'s --pod-namespace).', default: 'porch-fn-system', helpGroup: 'CLUSTER'},
  context: {kind: 'string', summary: 'Kubeconfig context to use (default: the current context).', helpGroup: 'CLUSTER'},
  kubeconfig: {kind: 'string', summary: 'Kubeconfig file; default in-cluster config, then $KUBECONFIG or ~/.kube/config.', helpGroup: 'CLUSTER'},
  'log-level': {kind: 'integer', summary: 'Log verbosity, 0 (errors and warnings) to 5 (trace); 4 and up print stack traces on errors.', default: 0, min: 0, max: 5, helpGroup: 'GLOBAL'},
} satisfies FlagSpecs

/**
 * What `fnr pods warm|gc` need to know the runner's current function pod templates (and so the
 * template version its pods carry): the same flags as `fnr serve`, plus the wrapper-server image
 * serve reads from $WRAPPER_SERVER_IMAGE and the runner's namespace.
 */
export const RUNNER_TEMPLATE_FLAG_SPECS = {
  'function-pod-template': POD_FLAG_SPECS['function-pod-template'],
  'harden-pod-templates': POD_FLAG_SPECS['harden-pod-templates'],
  'wrapper-server-image': {kind: 'string', summary: 'Wrapper-server image of the inline template (what `fnr serve` reads from $WRAPPER_SERVER_IMAGE).', env: 'WRAPPER_SERVER_IMAGE', helpGroup: 'POD RUNTIME'},
  'runner-namespace': {kind: 'string', summary: 'Namespace of the runner, where --function-pod-template is read (default: this pod\'s service account namespace, else $POD_NAMESPACE, else porch-system).', helpGroup: 'POD RUNTIME'},
  'pod-requests': POD_FLAG_SPECS['pod-requests'],
  'pod-limits': POD_FLAG_SPECS['pod-limits'],
  'max-request-body-size': MAX_REQUEST_BODY_SIZE_SPEC,
} satisfies FlagSpecs

/** `fnr serve`: where exec mappings, per-image pod settings and pod changes come from (FunctionConfig CRD). */
export const FUNCTION_CONFIG_FLAG_SPECS = {
  'function-config-source': {
    kind: 'string',
    summary: 'Where exec mappings, per-image pod settings and pod template changes come from: files (--config, --pod-cache-config), crd (FunctionConfig objects, watched), both (FunctionConfig first, then the files), or auto: crd when the API server serves FunctionConfigs (both if --config or --pod-cache-config is given), else files; exec-only without a configured cluster is files.',
    default: 'auto',
    options: ['auto', 'files', 'crd', 'both'],
    helpGroup: 'FUNCTION CONFIG',
  },
  'function-config-namespace': {
    kind: 'string',
    summary: 'Namespace of the FunctionConfig objects (default: --pod-namespace, where Porch keeps them).',
    default: '',
    helpGroup: 'FUNCTION CONFIG',
  },
} satisfies FlagSpecs

/** The budget and HTTP/2 limits of serve and wrapper-server (lib/grpc/limits.ts parses them). */
export const LISTENER_LIMIT_FLAG_SPECS = {
  'bind-address': {kind: 'string', summary: 'Listen address (gRPC and metrics), e.g. 127.0.0.1 or ::1; default $FNR_BIND_ADDRESS, else every address family (IPv4 and IPv6), as Go\'s ":port".', helpGroup: 'LIMITS'},
  ...(Object.fromEntries(LIMIT_FLAG_NAMES.map((name) => [name, {kind: 'string', summary: LIMIT_FLAGS[name].summary, helpGroup: 'LIMITS'}])) as Record<LimitFlagName, {kind: 'string'; summary: string; helpGroup: string}>),
} satisfies FlagSpecs

/** `fnr serve --metrics-port` (fnr only; Porch has no metrics endpoint). */
export const METRICS_FLAG_SPECS = {
  'metrics-port': {kind: 'integer', summary: 'Port of the Prometheus endpoint (/metrics, /healthz) on the gRPC listen address; 0 turns metrics off.', default: 0, min: 0, max: 65535, helpGroup: 'OBSERVABILITY'},
} satisfies FlagSpecs

/** `fnr serve` response cache (fnr only, off by default). */
export const RESPONSE_CACHE_FLAG_SPECS = {
  'cache-ttl': {kind: 'duration', summary: 'Response cache: how long a successful response is reused for the same function and request bytes; 0 (default) caches only images switched on in --pod-cache-config.', default: 0, defaultHelp: '0s', helpGroup: 'RESPONSE CACHE'},
  'cache-max-ttl': {kind: 'duration', summary: 'Response cache: the longest any entry lives (clamps --cache-ttl and per-image TTLs).', default: 3_600_000, defaultHelp: '1h', helpGroup: 'RESPONSE CACHE'},
  'cache-max-bytes': {kind: 'integer', summary: 'Response cache: total size bound in bytes (least recently used entries go first).', default: 256 * 1024 * 1024, min: 1024, helpGroup: 'RESPONSE CACHE'},
  'cache-max-entries': {kind: 'integer', summary: 'Response cache: entry count bound.', default: 10_000, min: 1, helpGroup: 'RESPONSE CACHE'},
} satisfies FlagSpecs

/** TLS on the `fnr serve` listener (off by default: Porch's porch-server dials plaintext). */
export const LISTENER_TLS_FLAG_SPECS = {
  'tls-cert-file': {kind: 'string', summary: 'Serve TLS with this certificate (PEM; with --tls-key-file). Default: plaintext, as Porch.', helpGroup: 'LISTENER TLS'},
  'tls-key-file': {kind: 'string', summary: 'Private key (PEM) of --tls-cert-file.', helpGroup: 'LISTENER TLS'},
  'tls-client-ca-file': {kind: 'string', summary: 'Require client certificates signed by a CA in this PEM file (mutual TLS).', helpGroup: 'LISTENER TLS'},
} satisfies FlagSpecs

/** What RUNNER_TEMPLATE_FLAG_SPECS parse to (`fnr pods warm|gc`). */
export interface RunnerTemplateFlagValues {
  'function-pod-template': string
  'wrapper-server-image'?: string
  'runner-namespace'?: string
  'pod-requests': string
  'pod-limits': string
  'harden-pod-templates': boolean
  'max-request-body-size': number
}

/** The runner's template settings from its flags, as `fnr pods warm` and `fnr pods gc` read them. */
export function runnerTemplateSettings(flags: RunnerTemplateFlagValues): RunnerTemplateOptions {
  return {
    templateConfigMap: flags['function-pod-template'],
    wrapperServerImage: flags['wrapper-server-image'] || undefined,
    runnerNamespace: flags['runner-namespace'],
    podRequests: flags['pod-requests'],
    hardenTemplates: flags['harden-pod-templates'],
    podLimits: flags['pod-limits'],
    maxRequestBodySize: flags['max-request-body-size'],
  }
}

/** The registry settings from REGISTRY_FLAG_SPECS' values (`fnr serve`, `fnr pods warm`). */
export function registrySettings(flags: {[K in keyof typeof REGISTRY_FLAG_SPECS]: SpecValue<(typeof REGISTRY_FLAG_SPECS)[K]>}): RegistryFlagSettings {
  return {
    enablePrivateRegistries: flags['enable-private-registries'],
    authSecretPath: flags['registry-auth-secret-path'],
    authSecretName: flags['registry-auth-secret-name'],
    enableTls: flags['enable-private-registries-tls'],
    tlsSecretPath: flags['tls-secret-path'],
  }
}

export interface RegistryFlagSettings {
  enablePrivateRegistries: boolean
  authSecretPath: string
  authSecretName: string
  enableTls: boolean
  tlsSecretPath: string
}
