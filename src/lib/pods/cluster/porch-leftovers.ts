/**
 * After a swap from Porch's runner: the function pods Porch's runner left in the pod namespace.
 *
 * How Porch marks them (docs/porch-swap.md, "After the swap: Porch's leftover function pods"): a pod carries the label `fn.kpt.dev/image=<podId>` (podId =
 * `<name>-<tag>-<n>-<digest8>`) and the annotation `fn.kpt.dev/template-version` (`inline-v1`, a ConfigMap's or a
 * PodTemplate's resourceVersion); its Service is named `<podId>` and selects `fn.kpt.dev/image=<podId>`. No other
 * label: fnr's own pods and Services carry `app.kubernetes.io/managed-by=fnr` besides, which is how the two are told
 * apart. fnr never adopts Porch's pods (they run Porch's wrapper-server, which answers differently than fnr's in
 * failure messages and limits, and have none of fnr's bookkeeping: owner, last use, TTL, image digest), and without
 * this module it never sees them: they would stay forever.
 *
 * Collecting is behind a flag (`fnr serve --collect-porch-pods`, `fnr pods gc --porch-leftovers`): while Porch's
 * runner still runs (a rolling update, side by side), a call of it may be in flight on one of them. By default the
 * runner only says, at start, how many there are.
 */
import type {CoreV1Api, V1Pod, V1Service} from '@kubernetes/client-node'

import {apiStatusCode, kubeError} from '../../k8s/errors.js'
import {withApiRetries} from '../../k8s/retry.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import {LABEL_FN_IMAGE, LABEL_MANAGED_BY, MANAGED_BY_FNR} from '../model/naming.js'

/** Pods with Porch's label and without fnr's (the API server filters). */
export const PORCH_POD_SELECTOR = `${LABEL_FN_IMAGE},${LABEL_MANAGED_BY}!=${MANAGED_BY_FNR}`

export interface PorchLeftover {
  kind: 'Pod' | 'Service'
  name: string
  /** The pod's fn.kpt.dev/image label (Porch's podId). */
  podId: string
  /** The function image (the container named "function", else the first). */
  image?: string
  deleted: boolean
  /** Why it was left alone, or what failed. */
  skipped?: string
  error?: string
}

/** True for a pod Porch's runner made: its label, not fnr's. */
export function isPorchFunctionPod(pod: V1Pod): boolean {
  const labels = pod.metadata?.labels ?? {}
  return labels[LABEL_FN_IMAGE] !== undefined && labels[LABEL_MANAGED_BY] !== MANAGED_BY_FNR
}

/** True for a Service Porch's runner made: it selects exactly fn.kpt.dev/image=<value> and has no fnr label. */
export function isPorchFunctionService(service: V1Service): boolean {
  const selector = service.spec?.selector ?? {}
  const keys = Object.keys(selector)
  return keys.length === 1 && keys[0] === LABEL_FN_IMAGE && service.metadata?.labels?.[LABEL_MANAGED_BY] !== MANAGED_BY_FNR
}

/** Porch's function pods and (unless `services: false`: one list call less) Services in a namespace. */
export async function findPorchLeftovers(core: CoreV1Api, namespace: string, options: {services?: boolean} = {}): Promise<{pods: V1Pod[]; services: V1Service[]}> {
  const what = `cannot list the function pods Porch's runner left in ${namespace}`
  const pods = (await withApiRetries(() => core.listNamespacedPod({namespace, labelSelector: PORCH_POD_SELECTOR}), {what})).items.filter(isPorchFunctionPod)
  if (options.services === false) return {pods, services: []}
  const services = (await withApiRetries(() => core.listNamespacedService({namespace}), {what})).items.filter(isPorchFunctionService)
  return {pods, services}
}

export interface CollectPorchLeftoversOptions {
  core: CoreV1Api
  namespace: string
  dryRun?: boolean
  logger?: Logger
}

/**
 * Deletes Porch's function pods (each with a resourceVersion precondition) and its Services: those of the pods
 * found, and any other that selects no live pod. Failures are reported per object, never thrown.
 */
export async function collectPorchLeftovers(options: CollectPorchLeftoversOptions): Promise<PorchLeftover[]> {
  const {core, namespace} = options
  const logger = options.logger ?? silentLogger
  const {pods, services} = await findPorchLeftovers(core, namespace)
  const out: PorchLeftover[] = []
  for (const pod of pods) {
    const name = pod.metadata!.name!
    const podId = pod.metadata!.labels![LABEL_FN_IMAGE]!
    const containers = pod.spec?.containers ?? []
    const image = (containers.find((c) => c.name === 'function') ?? containers[0])?.image
    const item: PorchLeftover = {kind: 'Pod', name, podId, ...(image ? {image} : {}), deleted: false}
    out.push(item)
    if (pod.metadata?.deletionTimestamp) {
      item.skipped = 'already being deleted'
      continue
    }
    if (options.dryRun) continue
    try {
      await withApiRetries(() => core.deleteNamespacedPod({name, namespace, body: {preconditions: {resourceVersion: pod.metadata?.resourceVersion}}}), {what: `cannot delete pod ${namespace}/${name}`, attempts: 3})
      item.deleted = true
    } catch (err) {
      const code = apiStatusCode(err)
      if (code === 404) item.skipped = 'already gone'
      else if (code === 409) item.skipped = 'changed since it was listed'
      else item.error = kubeError(err, `cannot delete pod ${namespace}/${name}`).message
    }
  }
  // Services: those of the pods above, and those whose pod is gone (Porch deletes both, but not always).
  // a pod that was deleted here, or was already gone when its delete came (404), no longer holds its Service
  const gone = (p: V1Pod): boolean => {
    const o = out.find((i) => i.kind === 'Pod' && i.name === p.metadata?.name)
    return o?.deleted === true || o?.skipped === 'already gone'
  }
  const livePodIds = new Set(pods.filter((p) => !gone(p)).map((p) => p.metadata!.labels![LABEL_FN_IMAGE]!))
  for (const service of services) {
    const name = service.metadata!.name!
    const podId = service.spec!.selector![LABEL_FN_IMAGE]!
    const item: PorchLeftover = {kind: 'Service', name, podId, deleted: false}
    out.push(item)
    if (livePodIds.has(podId) && !options.dryRun) {
      item.skipped = 'its pod is still there'
      continue
    }
    if (options.dryRun) continue
    try {
      await withApiRetries(() => core.deleteNamespacedService({name, namespace, body: {preconditions: {resourceVersion: service.metadata?.resourceVersion}}}), {what: `cannot delete Service ${namespace}/${name}`, attempts: 3})
      item.deleted = true
    } catch (err) {
      const code = apiStatusCode(err)
      if (code === 404) item.skipped = 'already gone'
      else if (code === 409) item.skipped = 'changed since it was listed'
      else item.error = kubeError(err, `cannot delete Service ${namespace}/${name}`).message
    }
  }
  if (out.length > 0) {
    logger.info(options.dryRun ? 'function pods left by Porch\'s runner (dry run)' : 'collected the function pods left by Porch\'s runner', {
      namespace,
      pods: out.filter((o) => o.kind === 'Pod').map((o) => o.name),
      services: out.filter((o) => o.kind === 'Service').map((o) => o.name),
      deleted: out.filter((o) => o.deleted).length,
      failed: out.filter((o) => o.error).length,
    })
  }
  for (const o of out.filter((i) => i.error)) logger.warn('cannot delete a function pod left by Porch\'s runner', {kind: o.kind, name: o.name, error: o.error})
  return out
}
