/**
 * Names, labels and annotations of function pods and their Services.
 *
 * A pod name is `<name>-<tag>-<image hash>-<random>`, e.g. `set-labels-v022-1a2b3c4d-x7k2p`:
 *   - name and tag come from the image reference, lowercased, every character outside [a-z0-9-]
 *     turned into "-" (dots dropped from the tag, as upstream: v0.2.2 → v022), cut so the whole
 *     name stays within 63 characters;
 *   - a digest reference uses the first 12 hex digits of the digest as its tag;
 *   - the hash is 8 hex digits of sha256(image), so different images never share a base;
 *   - the random part (5 characters) makes names unique across pods of one image, runner
 *     instances and restarts;
 *   - the name starts with a letter ("fn-" is put in front otherwise) and ends with a letter or
 *     digit, so it is a valid DNS-1123 label *and* DNS-1035 label (the Service has the same name).
 * Upstream builds the name from the tag alone and breaks on digests, uppercase and underscores
 * (docs/runtimes.md, "The pod runtime"); this works for any string.
 */
import {createHash, randomInt} from 'node:crypto'
import os from 'node:os'

/** Porch's label: present on every function pod; its value (the pod's id) is what the pod's Service selects. */
export const LABEL_FN_IMAGE = 'fn.kpt.dev/image'
/** Porch's annotation with the version of the template a pod was made from. */
export const ANNOTATION_TEMPLATE_VERSION = 'fn.kpt.dev/template-version'

export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by'
export const MANAGED_BY_FNR = 'fnr'
export const LABEL_COMPONENT = 'app.kubernetes.io/component'
export const COMPONENT_POD = 'function-pod'
export const COMPONENT_SERVICE = 'function-service'
/** sha256 of the image reference (first 32 hex digits): select all pods of one image. */
export const LABEL_IMAGE_HASH = 'fnr.dev/image-hash'
/** The runner instance that created (or adopted) the pod, as a label value. */
export const LABEL_OWNER = 'fnr.dev/owner'
/** On a Service: the name of the pod it fronts. */
export const LABEL_POD = 'fnr.dev/pod'

/** The image reference exactly as requested (labels cannot hold it). */
export const ANNOTATION_IMAGE = 'fnr.dev/image'
/** RFC 3339 time of the last call routed to the pod (updated off the request path, throttled). */
export const ANNOTATION_LAST_USED = 'fnr.dev/last-used'
/** The pod's idle TTL in seconds when it was last used. */
export const ANNOTATION_TTL = 'fnr.dev/ttl-seconds'
/** The full runner identity, when the owner label had to be shortened. */
export const ANNOTATION_OWNER = 'fnr.dev/owner'
/** A random id per create request, so a retried create recognises its own pod on 409. */
export const ANNOTATION_CREATION_ID = 'fnr.dev/creation-id'
/**
 * When the owner took the pod over (adoption at startup or reclaim from a replica that is gone):
 * written with a resourceVersion precondition, so two replicas can never both take one pod.
 */
export const ANNOTATION_CLAIMED_AT = 'fnr.dev/claimed-at'
/**
 * The owner label (and annotation) of pods made by `fnr pods warm`: no runner has it (a runner's
 * identity is its pod name), and a running runner adopts such pods (cache.ts, gc.ts).
 */
export const WARM_OWNER = 'fnr-pods-warm'
/** On a replica's Lease (app.kubernetes.io/component). */
export const COMPONENT_LEASE = 'replica-lease'

/** Label selector of every function pod fnr manages. */
export const POD_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY_FNR},${LABEL_FN_IMAGE}`
/** Label selector of every function Service fnr manages. */
export const SERVICE_SELECTOR = `${LABEL_MANAGED_BY}=${MANAGED_BY_FNR},${LABEL_POD}`

const MAX_NAME = 63
const HASH_LEN = 8
const RANDOM_LEN = 5
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/** The value of LABEL_IMAGE_HASH for an image. */
export function imageHash(image: string): string {
  return sha256Hex(image).slice(0, 32)
}

function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '')
}

/** Splits a reference leniently into its last path segment, tag and digest (never throws). */
export function imageParts(image: string): {name: string; tag?: string; digest?: string} {
  let rest = image.trim()
  let digest: string | undefined
  const at = rest.indexOf('@')
  if (at >= 0) {
    digest = rest.slice(at + 1)
    rest = rest.slice(0, at)
  }
  const slash = rest.lastIndexOf('/')
  let last = slash >= 0 ? rest.slice(slash + 1) : rest
  let tag: string | undefined
  const colon = last.lastIndexOf(':')
  if (colon >= 0) {
    tag = last.slice(colon + 1)
    last = last.slice(0, colon)
  }
  return {name: last, tag: tag || undefined, digest: digest || undefined}
}

export function randomSuffix(length = RANDOM_LEN): string {
  let out = ''
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(ALPHABET.length)]
  return out
}

/** The readable part of a pod name for an image (without hash and random suffix). */
export function podNameBase(image: string): string {
  const {name, tag, digest} = imageParts(image)
  const digestHex = digest ? slug(digest.replace(/^[a-z0-9]+:/i, '')).slice(0, 12) : ''
  const tagPart = tag ? slug(tag.replace(/\./g, '')) : digestHex || 'latest'
  const namePart = slug(name) || 'fn'
  let base = tagPart ? `${namePart}-${tagPart}` : namePart
  if (!/^[a-z]/.test(base)) base = `fn-${base}`
  const room = MAX_NAME - 1 - HASH_LEN - 1 - RANDOM_LEN
  return base.slice(0, room).replace(/-+$/, '')
}

/** A fresh, unique, valid name for a pod (and its Service) running `image`. */
export function podNameFor(image: string, random: string = randomSuffix()): string {
  return `${podNameBase(image)}-${sha256Hex(image).slice(0, HASH_LEN)}-${random}`
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/

export function isValidLabelValue(value: string): boolean {
  return value.length <= 63 && LABEL_VALUE.test(value)
}

/** A DNS-1035 label: what a Service name must be (and a pod name made here always is). */
export function isDns1035Label(value: string): boolean {
  return value.length >= 1 && value.length <= 63 && /^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(value)
}

/** A label value for any text: itself when valid, else a readable prefix plus a hash. */
export function labelValueFor(text: string): string {
  if (isValidLabelValue(text)) return text
  const hash = sha256Hex(text).slice(0, 10)
  const readable = text.replace(/[^A-Za-z0-9_.-]+/g, '-').replace(/^[^A-Za-z0-9]+/, '').slice(0, 63 - hash.length - 1)
  const cut = readable.replace(/[^A-Za-z0-9]+$/, '')
  return cut ? `${cut}-${hash}` : hash
}

/**
 * This runner's identity (its replica id): $POD_NAME (set from the downward API) when set, which
 * is stable across container restarts in one pod, so a restarted container adopts its own pods at
 * once; otherwise the host name plus a random suffix per process start, since several processes
 * on one host (or a restarted one) must not share an identity.
 */
export function defaultRunnerIdentity(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POD_NAME) return env.POD_NAME
  return `${os.hostname() || 'fnr'}-${randomSuffix()}`
}

/**
 * The labels of a function pod: what the runner's pod cache and `fnr pods warm` put on the pods
 * they create (one definition, so either kind of pod is adopted and collected the same way).
 */
export function functionPodLabels(podName: string, image: string, ownerLabel: string): Record<string, string> {
  return {
    [LABEL_FN_IMAGE]: podName,
    [LABEL_MANAGED_BY]: MANAGED_BY_FNR,
    [LABEL_COMPONENT]: COMPONENT_POD,
    [LABEL_IMAGE_HASH]: imageHash(image),
    [LABEL_OWNER]: ownerLabel,
  }
}

/** The annotations of a new function pod (see functionPodLabels). */
export function functionPodAnnotations(input: {templateVersion: string; image: string; owner: string; now: number; ttlMs: number; creationId: string}): Record<string, string> {
  return {
    [ANNOTATION_TEMPLATE_VERSION]: input.templateVersion,
    [ANNOTATION_IMAGE]: input.image,
    [ANNOTATION_OWNER]: input.owner,
    [ANNOTATION_LAST_USED]: new Date(input.now).toISOString(),
    [ANNOTATION_TTL]: String(Math.round(input.ttlMs / 1000)),
    [ANNOTATION_CREATION_ID]: input.creationId,
  }
}

/** The labels of a function pod's Service; its selector is {[LABEL_FN_IMAGE]: podName}. */
export function functionServiceLabels(podName: string, ownerLabel: string): Record<string, string> {
  return {[LABEL_MANAGED_BY]: MANAGED_BY_FNR, [LABEL_COMPONENT]: COMPONENT_SERVICE, [LABEL_POD]: podName, [LABEL_OWNER]: ownerLabel}
}
