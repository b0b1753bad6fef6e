/**
 * Feeds the FunctionConfig store (function-config-crd.ts) from the API server: a list, then a watch that resumes
 * or relists after drops (k8s/watch.ts), over @kubernetes/client-node (loaded here, so only when a FunctionConfig
 * source is chosen). After each object is applied, its `status.functionRunnerObservedGeneration` and
 * `status.error` are written (merge patch on the status subresource, as Porch's runner does), so `kubectl get
 * functionconfigs` shows what fnr made of it; a runner without that permission only logs it once.
 */
import type {CustomObjectsApi} from '@kubernetes/client-node'

import {FnrError} from '../errors.js'
import {connectKube, type ClientNode, type KubeClients, type KubeConnectOptions} from '../k8s/client.js'
import {apiStatusCode, kubeError} from '../k8s/errors.js'
import {withApiRetries} from '../k8s/retry.js'
import {ResourceWatcher, type ObjectList} from '../k8s/watch.js'
import {silentLogger, type Logger} from '../telemetry/log.js'
import {
  FUNCTION_CONFIG_GROUP,
  FUNCTION_CONFIG_PLURAL,
  FUNCTION_CONFIG_VERSION,
  FunctionConfigStore,
  type FunctionConfigObject,
  type FunctionConfigOutcome,
} from './function-config-crd.js'

export interface FunctionConfigWatchOptions {
  kube?: KubeConnectOptions
  /** Namespace of the FunctionConfigs (one namespace, as Porch's runner: its cache is the pod namespace). */
  namespace: string
  /** --functions (binaryExecutor.path is relative to it). */
  functionsDir: string
  defaultImagePrefix: string
  /** Write status.functionRunnerObservedGeneration and status.error (default true). */
  writeStatus?: boolean
  logger?: Logger
  watchRetryMs?: number
}

/**
 * Whether the API server serves FunctionConfigs (discovery of config.porch.kpt.dev/v1alpha1): how
 * `--function-config-source=auto` tells a Porch at HEAD (CRD installed) from an older Porch. A
 * group the server does not know is false; an unreachable server is an error (after retries).
 */
export async function functionConfigApiServed(kube: KubeConnectOptions = {}): Promise<{served: boolean; server: string}> {
  const clients = await connectKube(kube)
  const api = clients.kubeConfig.makeApiClient(clients.k8s.CustomObjectsApi)
  try {
    const list = await withApiRetries(() => api.getAPIResources({group: FUNCTION_CONFIG_GROUP, version: FUNCTION_CONFIG_VERSION}), {
      what: `cannot discover ${FUNCTION_CONFIG_GROUP}/${FUNCTION_CONFIG_VERSION}`,
      attempts: 3,
    })
    return {served: (list.resources ?? []).some((r) => r.name === FUNCTION_CONFIG_PLURAL), server: clients.server}
  } catch (err) {
    if (apiStatusCode(err) === 404) return {served: false, server: clients.server}
    throw err instanceof FnrError ? err : kubeError(err, `cannot discover ${FUNCTION_CONFIG_GROUP}/${FUNCTION_CONFIG_VERSION}`)
  }
}

export class FunctionConfigWatch {
  private statusDenied = false

  private constructor(
    readonly store: FunctionConfigStore,
    readonly clients: KubeClients,
    private readonly watcher: ResourceWatcher<FunctionConfigObject>,
  ) {}

  /** Connects, lists (a missing CRD or an unreachable API server is a Config error) and starts watching. */
  static async start(options: FunctionConfigWatchOptions): Promise<FunctionConfigWatch> {
    const logger = options.logger ?? silentLogger
    const clients = await connectKube(options.kube)
    const {k8s, kubeConfig} = clients
    const api = kubeConfig.makeApiClient(k8s.CustomObjectsApi)
    const ns = options.namespace
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns) || ns.length > 63) {
      throw new FnrError('Usage', `--function-config-namespace ${JSON.stringify(ns)} is not a valid namespace name`)
    }
    const where = `namespace ${ns}`
    const base = `/apis/${FUNCTION_CONFIG_GROUP}/${FUNCTION_CONFIG_VERSION}`
    let self: FunctionConfigWatch | undefined
    const store = new FunctionConfigStore({
      functionsDir: options.functionsDir,
      defaultImagePrefix: options.defaultImagePrefix,
      logger,
      onOutcome: options.writeStatus === false ? undefined : (obj, outcome) => void self?.writeStatus(api, k8s, obj, outcome, logger),
    })
    const list = (): Promise<ObjectList<FunctionConfigObject>> =>
      api.listNamespacedCustomObject({group: FUNCTION_CONFIG_GROUP, version: FUNCTION_CONFIG_VERSION, namespace: ns, plural: FUNCTION_CONFIG_PLURAL}) as Promise<ObjectList<FunctionConfigObject>>
    const watcher = new ResourceWatcher<FunctionConfigObject>({
      k8s,
      kubeConfig,
      path: `${base}/namespaces/${encodeURIComponent(ns)}/${FUNCTION_CONFIG_PLURAL}`,
      list,
      logger,
      description: `FunctionConfigs in ${where}`,
      retryMs: options.watchRetryMs,
    })
    self = new FunctionConfigWatch(store, clients, watcher)
    watcher.on((type, object) => {
      if (type === 'DELETED') store.remove(object)
      else void store.apply(object)
    })
    try {
      // The first list is retried on transient errors; the watch then keeps itself alive.
      await withApiRetries(() => watcher.start(), {what: `cannot list FunctionConfigs in ${where}`, attempts: 4})
    } catch (err) {
      watcher.stop()
      if (apiStatusCode(err) === 404) {
        throw new FnrError('Config', `cannot list FunctionConfigs in ${where}: the FunctionConfig CRD (${FUNCTION_CONFIG_PLURAL}.${FUNCTION_CONFIG_GROUP}) is not installed; install Porch's CRDs (or fnr's: manifests/function-config/crds/) or use --function-config-source=files`, {cause: err})
      }
      const e = err instanceof FnrError ? err : kubeError(err, `cannot list FunctionConfigs in ${where}`)
      if (apiStatusCode(err) === 403) {
        // RBAC does not grant this runner FunctionConfigs (fnr's manifests/ without manifests/function-config/
        // on a cluster with Porch's CRD). details.status stays 403: `auto` falls back to files on it (serve.ts).
        throw new FnrError(
          'Config',
          `${e.message} (--function-config-source needs get, list and watch on ${FUNCTION_CONFIG_PLURAL}.${FUNCTION_CONFIG_GROUP} in ${where}: apply manifests/function-config/rbac.yaml, or use --function-config-source=files or auto)`,
          {cause: err, details: {status: 403}},
        )
      }
      throw new FnrError('Config', `${e.message} (--function-config-source needs the FunctionConfig API)`, {cause: err})
    }
    await store.settled()
    logger.info('FunctionConfig source ready', {namespace: ns, objects: watcher.list().length, inEffect: store.list().length, kubernetes: clients.server})
    return self
  }

  private async writeStatus(api: CustomObjectsApi, k8s: ClientNode, obj: FunctionConfigObject, outcome: FunctionConfigOutcome, logger: Logger): Promise<void> {
    if (this.statusDenied || !obj.metadata?.name || !obj.metadata.namespace) return
    // Compare with what the API has now (an earlier status write may have changed it since `obj` was seen).
    const latest = this.watcher.get(obj.metadata.name)
    if (latest && latest.metadata?.uid !== obj.metadata.uid) return
    const status = (latest ?? obj).status ?? {}
    const generation = outcome.error ? status.functionRunnerObservedGeneration : outcome.generation
    if (status.functionRunnerObservedGeneration === generation && (status.error ?? '') === (outcome.error ?? '')) return
    const body = {status: {functionRunnerObservedGeneration: generation ?? null, error: outcome.error ?? null}}
    try {
      await api.patchNamespacedCustomObjectStatus(
        {group: FUNCTION_CONFIG_GROUP, version: FUNCTION_CONFIG_VERSION, namespace: obj.metadata.namespace, plural: FUNCTION_CONFIG_PLURAL, name: obj.metadata.name, body},
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      )
    } catch (err) {
      const code = apiStatusCode(err)
      if (code === 403) {
        this.statusDenied = true
        logger.warn('cannot write FunctionConfig status (forbidden); not trying again (grant patch on functionconfigs/status)', {functionConfig: outcome.key})
      } else if (code !== 404 && code !== 409) {
        logger.warn('cannot write FunctionConfig status', {functionConfig: outcome.key, error: kubeError(err, 'patch status').message})
      }
    }
  }

  close(): void {
    this.watcher.stop()
  }
}
