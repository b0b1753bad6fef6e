/**
 * Function pod and Service templates: fnr's inline default, templates from a ConfigMap
 * (--function-pod-template: keys `template` and `serviceTemplate`, in the runner's namespace, as
 * upstream; docs/porch-swap.md), the template contract, the template version, and the pod and Service
 * built for one function.
 *
 * The contract a template must meet (checked when it is loaded; a broken point stops the runner,
 * or, for a changed ConfigMap, keeps the last good template, with a message naming the point):
 *   1. `template` is a Pod with a container named `function`;
 *   2. that container's command starts the wrapper server (…/wrapper-server, normally
 *      /wrapper-server-tools/wrapper-server);
 *   3. fnr owns the container's image and the tail of its args: the image is replaced with the
 *      function's image (or `repo@digest` with --pin-image-digests), and `--port 9446 --max-request-body-size N -- <entrypoint>` is appended
 *      to the args, so the template's args must not contain `--`;
 *   4. `serviceTemplate` is a Service with a port whose targetPort (or port) is 9446.
 */
import type {V1ConfigMap, V1Container, V1Pod, V1ResourceRequirements, V1Service} from '@kubernetes/client-node'
import {parse as parseYaml} from 'yaml'

import {canonicalJson} from '../../config/canonical-json.js'
import type {ResourceRequirements} from '../../config/pod-cache-config.js'
import {FnrError} from '../../errors.js'
import {WRAPPER_SERVER_PATH, WRAPPER_SERVER_PORT, wrapperServerArgs} from '../../registry/image-config.js'
import {sha256Hex} from './naming.js'
import {hardenPodTemplate, weakPodTemplateSettings} from './pod-security.js'

export const FUNCTION_CONTAINER = 'function'
/**
 * The digest of the image (platform manifest, as the registry client resolved it) a pod was made
 * for: what the response cache compares with its key, and how a restarted runner knows an adopted
 * pod's content.
 */
export const ANNOTATION_IMAGE_DIGEST = 'fnr.dev/image-digest'

/**
 * `repo@digest` for an image reference and its resolved digest (the tag and any digest of the
 * reference dropped): what the function container runs with --pin-image-digests, so a node whose
 * cached copy of a moved tag is stale cannot run old content under the new digest.
 */
export function pinnedImage(image: string, digest: string): string {
  let ref = image.trim()
  const at = ref.indexOf('@')
  if (at >= 0) ref = ref.slice(0, at)
  const slash = ref.lastIndexOf('/')
  const colon = ref.lastIndexOf(':')
  if (colon > slash) ref = ref.slice(0, colon)
  return `${ref}@${digest}`
}
export const WRAPPER_VOLUME = 'wrapper-server-tools'
export const WRAPPER_MOUNT = '/wrapper-server-tools'
/** Where the wrapper-server image keeps its folder (the path upstream's init container copies from). */
export const WRAPPER_IMAGE_FOLDER = '/home/nonroot/wrapper-server'
export const NONROOT_UID = 65532

export interface Templates {
  pod: V1Pod
  service: V1Service
  /** What the pods made from these templates are labelled with (fn.kpt.dev/template-version). */
  version: string
  /** "inline" or "ConfigMap <ns>/<name>", for messages. */
  origin: string
  /** Settings of a user's template weaker than fnr's security defaults (pod-security.ts), kept as written. */
  warnings?: string[]
}

export interface InlineTemplateOptions {
  /** $WRAPPER_SERVER_IMAGE: the init container copies the wrapper from it. */
  wrapperServerImage: string
  /** Requests and limits of the function container. */
  resources?: ResourceRequirements
}

/** Requests/limits of the function container when nothing else is configured. */
export const DEFAULT_FUNCTION_RESOURCES: ResourceRequirements = {requests: {cpu: '100m', memory: '128Mi'}, limits: {memory: '1Gi'}}

const RESTRICTED_CONTAINER = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: {drop: ['ALL']},
}

/** fnr's default function pod: the restricted Pod Security Standard, no service account token. */
export function inlinePodTemplate(options: InlineTemplateOptions): V1Pod {
  const resources = options.resources ?? DEFAULT_FUNCTION_RESOURCES
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      annotations: {
        'cluster-autoscaler.kubernetes.io/safe-to-evict': 'true',
        'sidecar.istio.io/inject': 'false',
      },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: NONROOT_UID,
        runAsGroup: NONROOT_UID,
        fsGroup: NONROOT_UID,
        seccompProfile: {type: 'RuntimeDefault'},
      },
      initContainers: [
        {
          name: 'copy-wrapper-server',
          image: options.wrapperServerImage,
          command: ['cp', '-a', `${WRAPPER_IMAGE_FOLDER}/.`, WRAPPER_MOUNT],
          securityContext: RESTRICTED_CONTAINER,
          resources: {requests: {cpu: '10m', memory: '16Mi'}, limits: {memory: '64Mi'}},
          volumeMounts: [{name: WRAPPER_VOLUME, mountPath: WRAPPER_MOUNT}],
        },
      ],
      containers: [
        {
          name: FUNCTION_CONTAINER,
          image: 'replaced-by-fnr',
          command: [WRAPPER_SERVER_PATH],
          ports: [{name: 'grpc', containerPort: WRAPPER_SERVER_PORT, protocol: 'TCP'}],
          readinessProbe: {grpc: {port: WRAPPER_SERVER_PORT}, periodSeconds: 1, failureThreshold: 3, timeoutSeconds: 1},
          securityContext: RESTRICTED_CONTAINER,
          ...(resources.requests || resources.limits ? {resources: resources as V1ResourceRequirements} : {}),
          volumeMounts: [
            {name: WRAPPER_VOLUME, mountPath: WRAPPER_MOUNT, readOnly: true},
            {name: 'tmp', mountPath: '/tmp'},
          ],
        },
      ],
      volumes: [
        {name: WRAPPER_VOLUME, emptyDir: {}},
        {name: 'tmp', emptyDir: {}},
      ],
    },
  }
}

export function inlineServiceTemplate(): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {},
    spec: {
      type: 'ClusterIP',
      ports: [{name: 'grpc', protocol: 'TCP', port: WRAPPER_SERVER_PORT, targetPort: WRAPPER_SERVER_PORT}],
    },
  }
}

/**
 * The template version: a hash of everything that shapes a pod (both templates and the settings
 * fnr adds, such as the max message size), so a restarted runner adopts only pods it would have
 * made itself, and a ConfigMap update that changes nothing replaces nothing.
 */
export function templateVersion(kind: 'inline' | 'cm', pod: V1Pod, service: V1Service, extra: Record<string, unknown> = {}): string {
  return `${kind}-${sha256Hex(canonicalJson({pod, service, extra})).slice(0, 12)}`
}

export function inlineTemplates(options: InlineTemplateOptions, extra: Record<string, unknown> = {}): Templates {
  const pod = inlinePodTemplate(options)
  const service = inlineServiceTemplate()
  return {pod, service, version: templateVersion('inline', pod, service, extra), origin: 'the inline template'}
}

function contractError(origin: string, point: number, text: string): FnrError {
  return new FnrError('Config', `function pod template (${origin}): contract point ${point} is broken: ${text}`)
}

function decode(text: string, key: string, origin: string): Record<string, unknown> {
  let doc: unknown
  try {
    doc = parseYaml(text)
  } catch (err) {
    throw new FnrError('Config', `function pod template (${origin}): key ${key} is not valid YAML or JSON: ${(err as Error).message.split('\n', 1)[0]}`, {cause: err})
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new FnrError('Config', `function pod template (${origin}): key ${key} must hold one object`)
  return doc as Record<string, unknown>
}

/** Checks points 1-3 on a pod template; returns the function container. */
export function validatePodTemplate(pod: V1Pod, origin: string): V1Container {
  const kind = (pod as {kind?: string}).kind
  if (kind !== undefined && kind !== 'Pod') throw contractError(origin, 1, `key template must hold a Pod, not a ${kind}`)
  const containers = pod.spec?.containers
  if (!Array.isArray(containers) || containers.length === 0) throw contractError(origin, 1, 'the Pod has no containers; it needs one named "function"')
  const fn = containers.find((c) => c?.name === FUNCTION_CONTAINER)
  if (!fn) {
    throw contractError(origin, 1, `no container is named "function" (containers: ${containers.map((c) => JSON.stringify(c?.name)).join(', ')})`)
  }
  const command: unknown = fn.command ?? []
  if (!Array.isArray(command) || command.length === 0 || !/(^|\/)wrapper-server$/.test(String(command[0] ?? ''))) {
    throw contractError(origin, 2, `the "function" container's command must start the wrapper server (${WRAPPER_SERVER_PATH}), got ${JSON.stringify(command)}`)
  }
  const args: unknown = fn.args ?? []
  if (!Array.isArray(args)) throw contractError(origin, 3, `the "function" container's args must be a list, got ${JSON.stringify(args)}`)
  if (args.includes('--')) {
    throw contractError(origin, 3, `the "function" container's args must not contain "--": fnr appends "--port ${WRAPPER_SERVER_PORT} --max-request-body-size N -- <entrypoint>" to them, got ${JSON.stringify(fn.args)}`)
  }
  return fn
}

/** Checks point 4 on a Service template. */
export function validateServiceTemplate(service: V1Service, origin: string): void {
  const kind = (service as {kind?: string}).kind
  if (kind !== undefined && kind !== 'Service') throw contractError(origin, 4, `key serviceTemplate must hold a Service, not a ${kind}`)
  // A template is user YAML: any field may have the wrong type (ports: "9446" is not a list).
  const spec: unknown = service.spec
  const ports: unknown = spec && typeof spec === 'object' ? (spec as {ports?: unknown}).ports ?? [] : []
  const list = Array.isArray(ports) ? (ports as Array<{port?: unknown; targetPort?: unknown} | null>) : []
  const ok = list.some((p) => !!p && typeof p === 'object' && (Number(p.targetPort ?? p.port) === WRAPPER_SERVER_PORT || (p.targetPort === undefined && p.port === WRAPPER_SERVER_PORT)))
  if (!ok) throw contractError(origin, 4, `the Service must have a port whose targetPort is ${WRAPPER_SERVER_PORT} (the wrapper server's port), got ${JSON.stringify(ports)}`)
}

/** How a user's template (a ConfigMap, or Porch's PodTemplate) is taken. */
export interface UserTemplateOptions {
  /**
   * --harden-pod-templates: fill in fnr's security defaults wherever the template says nothing (pod-security.ts).
   * Default false: the template is used as its author wrote it (only the contract points are fnr's), and its
   * weak settings are reported as warnings, so a function that runs under Porch's templates runs under fnr's.
   */
  harden?: boolean
}

/** A user's pod template as used: as written (with its weak settings as warnings), or hardened. */
export function userPodTemplate(pod: V1Pod, options: UserTemplateOptions = {}): {pod: V1Pod; warnings: string[]} {
  if (options.harden) {
    const {pod: hardened, weaker} = hardenPodTemplate(pod)
    return {pod: hardened, warnings: weaker}
  }
  return {pod, warnings: weakPodTemplateSettings(pod)}
}

/** Reads and checks the templates of a ConfigMap (its data keys `template` and `serviceTemplate`). */
export function templatesFromConfigMap(cm: V1ConfigMap, extra: Record<string, unknown> = {}, options: UserTemplateOptions = {}): Templates {
  const origin = `ConfigMap ${cm.metadata?.namespace ?? ''}/${cm.metadata?.name ?? ''}`
  const data = cm.data ?? {}
  if (typeof data.template !== 'string' || data.template.trim() === '') {
    throw contractError(origin, 1, 'key template (a Pod) is missing')
  }
  if (typeof data.serviceTemplate !== 'string' || data.serviceTemplate.trim() === '') {
    throw contractError(origin, 4, 'key serviceTemplate (a Service) is missing')
  }
  const service = decode(data.serviceTemplate, 'serviceTemplate', origin) as V1Service
  validatePodTemplate(decode(data.template, 'template', origin) as V1Pod, origin)
  validateServiceTemplate(service, origin)
  // As written (weak settings reported), or with fnr's security defaults where it says nothing (--harden-pod-templates).
  const {pod, warnings} = userPodTemplate(decode(data.template, 'template', origin) as V1Pod, options)
  return {pod, service, version: templateVersion('cm', pod, service, extra), origin, ...(warnings.length ? {warnings} : {})}
}

export interface PodSpecInput {
  templates: Templates
  image: string
  /** What the function container runs, when not `image` itself (a digest-pinned reference). */
  containerImage?: string
  /** The function's command (the image's entrypoint and cmd), after "--". */
  command: readonly string[]
  name: string
  namespace: string
  labels: Record<string, string>
  annotations: Record<string, string>
  /** Per-image requests/limits (pod-cache-config); replace the template's for the function container. */
  resources?: ResourceRequirements
  maxRequestBodySize: number
  /**
   * `--verbosity N` for the wrapper server (Porch's wrapper flag), put before fnr's other args;
   * undefined adds nothing (the wrapper's default, 2: no request lines).
   */
  wrapperVerbosity?: number
}

/**
 * The timeout an exec probe of the function container that runs grpc-health-probe gets when its template leaves
 * Kubernetes' default of 1 s (unset, or 1 as the API server fills it in on a PodTemplate object). fnr's probe is a
 * Node program (0.2-0.3 s of CPU to start, where Porch's Go probe needs 0.03 s): on a busy node it misses 1 s
 * although the wrapper serves, the liveness probe then restarts a serving wrapper, and the pod may never be Ready
 * (Porch's PodTemplate sets no timeout). A probe that sets a longer one keeps it.
 */
export const HEALTH_PROBE_TIMEOUT_SECONDS = 5

function roomForHealthProbes(fn: V1Container): void {
  for (const probe of [fn.readinessProbe, fn.livenessProbe, fn.startupProbe]) {
    const program = probe?.exec?.command?.[0]
    if (probe && program?.split('/').pop() === 'grpc-health-probe' && (probe.timeoutSeconds ?? 1) <= 1) probe.timeoutSeconds = HEALTH_PROBE_TIMEOUT_SECONDS
  }
}

function clone<T>(value: T): T {
  return structuredClone(value)
}

/** The pod for one function: the template with fnr's name, labels, image and args. */
export function buildPod(input: PodSpecInput): V1Pod {
  const pod = clone(input.templates.pod)
  const meta = pod.metadata ?? {}
  pod.apiVersion = 'v1'
  pod.kind = 'Pod'
  pod.metadata = {
    name: input.name,
    namespace: input.namespace,
    labels: {...(meta.labels ?? {}), ...input.labels},
    annotations: {...(meta.annotations ?? {}), ...input.annotations},
  }
  delete (pod as {status?: unknown}).status
  const spec = pod.spec!
  delete spec.nodeName
  const fn = validatePodTemplate(pod, input.templates.origin)
  fn.image = input.containerImage ?? input.image
  // A template that sets the wrapper's verbosity itself keeps it (the flag may be given once).
  const templateSets = (fn.args ?? []).some((a) => /^--?(verbosity|log-level)(=|$)/.test(a))
  const verbosity = input.wrapperVerbosity !== undefined && !templateSets ? ['--verbosity', String(input.wrapperVerbosity)] : []
  fn.args = [...(fn.args ?? []), ...verbosity, ...wrapperServerArgs(input.command, {port: WRAPPER_SERVER_PORT, maxRequestBodySize: input.maxRequestBodySize})]
  roomForHealthProbes(fn)
  if (input.resources && (input.resources.requests || input.resources.limits)) fn.resources = clone(input.resources) as V1ResourceRequirements
  return pod
}

/** The Service fronting one pod: the template, named like the pod, selecting only that pod. */
export function buildService(templates: Templates, podName: string, namespace: string, labels: Record<string, string>, selector: Record<string, string>): V1Service {
  const svc = clone(templates.service)
  const meta = svc.metadata ?? {}
  svc.apiVersion = 'v1'
  svc.kind = 'Service'
  svc.metadata = {
    name: podName,
    namespace,
    labels: {...(meta.labels ?? {}), 'app.kubernetes.io/name': podName, ...labels},
    ...(meta.annotations ? {annotations: meta.annotations} : {}),
  }
  delete (svc as {status?: unknown}).status
  const spec = svc.spec ?? {}
  delete spec.clusterIP
  delete spec.clusterIPs
  spec.selector = {...(spec.selector ?? {}), ...selector}
  svc.spec = spec
  return svc
}
