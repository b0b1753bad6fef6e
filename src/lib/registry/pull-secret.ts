/**
 * The image pull Secret of the pod runtime (as Porch's runner does it): with private registries on, fnr copies the
 * docker config JSON at --registry-auth-secret-path into a kubernetes.io/dockerconfigjson Secret
 * named --registry-auth-secret-name in --pod-namespace, and function pods reference it.
 *
 * Unlike Porch (which attaches it to every image outside gcr.io/kpt-fn/), fnr attaches the secret
 * only to pods whose image's registry has credentials in it (secretHasCredentialsFor).
 *
 * @kubernetes/client-node is used for types only; the caller passes its CoreV1Api.
 */
import type {CoreV1Api, V1Secret} from '@kubernetes/client-node'

import {FnrError} from '../errors.js'
import {DockerConfig} from './auth.js'
import {ImageReference, parseImageReference} from './reference.js'

export const DOCKER_CONFIG_JSON_TYPE = 'kubernetes.io/dockerconfigjson'
export const DOCKER_CONFIG_JSON_KEY = '.dockerconfigjson'
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by'

/** The subset of CoreV1Api that ensurePullSecret uses (client-node 1.x object-style parameters). */
export type SecretsApi = Pick<CoreV1Api, 'readNamespacedSecret' | 'createNamespacedSecret' | 'replaceNamespacedSecret'>

/**
 * The Secret object for a docker config. The data holds the exact bytes given (as Porch does); the
 * JSON is parsed first so a broken file is a Config error rather than a Secret the kubelet rejects.
 */
export function buildPullSecret(name: string, namespace: string, dockerConfigJson: string | Buffer): V1Secret {
  const bytes = typeof dockerConfigJson === 'string' ? Buffer.from(dockerConfigJson, 'utf8') : dockerConfigJson
  DockerConfig.parse(bytes, `the docker config for Secret ${namespace}/${name}`)
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {name, namespace, labels: {[MANAGED_BY_LABEL]: 'fnr'}},
    type: DOCKER_CONFIG_JSON_TYPE,
    data: {[DOCKER_CONFIG_JSON_KEY]: bytes.toString('base64')},
  }
}

/** True when the docker config has credentials for the registry of `image` (any Docker Hub alias counts). */
export function secretHasCredentialsFor(dockerConfig: DockerConfig, image: string | ImageReference): boolean {
  const ref = typeof image === 'string' ? parseImageReference(image) : image
  return dockerConfig.hasCredentialsFor(ref.registry)
}

/**
 * Adds {name: secretName} to a pod spec's imagePullSecrets when the secret has credentials for the
 * image's registry and it is not there yet. Returns true when the spec was changed.
 */
export function attachPullSecret(
  podSpec: {imagePullSecrets?: Array<{name?: string}>},
  secretName: string,
  dockerConfig: DockerConfig,
  image: string | ImageReference,
): boolean {
  if (!secretHasCredentialsFor(dockerConfig, image)) return false
  const list = podSpec.imagePullSecrets ?? []
  if (list.some((s) => s.name === secretName)) return false
  podSpec.imagePullSecrets = [...list, {name: secretName}]
  return true
}

export type EnsureResult = 'created' | 'updated' | 'unchanged'

/**
 * Creates the pull Secret, or replaces its data when it differs from the docker config. Races with
 * another runner (409 on create or replace) are resolved by reading again, once. A Secret of
 * another type is left alone (the type is immutable) and reported as a FailedPrecondition.
 */
export async function ensurePullSecret(api: SecretsApi, namespace: string, name: string, dockerConfigJson: string | Buffer): Promise<EnsureResult> {
  const desired = buildPullSecret(name, namespace, dockerConfigJson)
  const where = `Secret ${namespace}/${name}`
  for (let attempt = 0; ; attempt++) {
    let existing: V1Secret | undefined
    try {
      existing = await api.readNamespacedSecret({name, namespace})
    } catch (err) {
      if (statusOf(err) !== 404) throw apiError(err, `cannot read ${where}`)
    }
    if (existing === undefined) {
      try {
        await api.createNamespacedSecret({namespace, body: desired})
        return 'created'
      } catch (err) {
        if (statusOf(err) === 409 && attempt === 0) continue
        throw apiError(err, `cannot create ${where}`)
      }
    }
    if (existing.type !== undefined && existing.type !== DOCKER_CONFIG_JSON_TYPE) {
      throw new FnrError(
        'FailedPrecondition',
        `${where} exists with type ${existing.type}, not ${DOCKER_CONFIG_JSON_TYPE}; delete it or choose another --registry-auth-secret-name`,
      )
    }
    const want = desired.data![DOCKER_CONFIG_JSON_KEY]
    if (existing.data?.[DOCKER_CONFIG_JSON_KEY] === want) return 'unchanged'
    const body: V1Secret = {
      ...existing,
      apiVersion: 'v1',
      kind: 'Secret',
      type: DOCKER_CONFIG_JSON_TYPE,
      data: {...existing.data, [DOCKER_CONFIG_JSON_KEY]: want!},
    }
    delete body.stringData
    try {
      await api.replaceNamespacedSecret({name, namespace, body})
      return 'updated'
    } catch (err) {
      if (statusOf(err) === 409 && attempt === 0) continue
      throw apiError(err, `cannot update ${where}`)
    }
  }
}

/** The HTTP status of a client-node error (ApiException.code), if any. */
function statusOf(err: unknown): number | undefined {
  const e = err as {code?: unknown; statusCode?: unknown; response?: {statusCode?: unknown}} | null
  for (const v of [e?.code, e?.statusCode, e?.response?.statusCode]) if (typeof v === 'number') return v
  return undefined
}

function apiError(err: unknown, what: string): FnrError {
  const status = statusOf(err)
  let reason = ''
  const body = (err as {body?: unknown} | null)?.body
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as {message?: unknown}
      if (typeof parsed.message === 'string') reason = parsed.message
    } catch {
      reason = body.split('\n', 1)[0] ?? ''
    }
  } else if (body !== null && typeof body === 'object' && typeof (body as {message?: unknown}).message === 'string') {
    reason = (body as {message: string}).message
  }
  if (reason === '') reason = err instanceof Error ? err.message.split('\n', 1)[0] ?? '' : String(err)
  const kind = status === 401 ? 'Unauthenticated' : status === 403 ? 'PermissionDenied' : status === 404 ? 'NotFound' : status === 422 || status === 400 ? 'InvalidArgument' : status === undefined || status >= 500 ? 'Unavailable' : 'Internal'
  return new FnrError(kind, `${what}: ${reason}`, {cause: err, details: {status}})
}
