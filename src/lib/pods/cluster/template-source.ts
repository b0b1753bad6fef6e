/**
 * Where the current function pod templates come from: fnr's inline template, or a ConfigMap
 * (--function-pod-template) in the runner's namespace that is watched, so an edit is picked up
 * without a restart. A changed ConfigMap that breaks the contract is reported and ignored (the
 * last good templates stay in use); a deleted one keeps the last good templates too.
 */
import type {CoreV1Api, KubeConfig, V1ConfigMap} from '@kubernetes/client-node'

import {FnrError} from '../../errors.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import type {ClientNode} from '../../k8s/client.js'
import {apiStatusCode, kubeError} from '../../k8s/errors.js'
import {withApiRetries} from '../../k8s/retry.js'
import {ResourceWatcher} from '../../k8s/watch.js'
import {inlineTemplates, templatesFromConfigMap, type InlineTemplateOptions, type Templates, type UserTemplateOptions} from '../model/template.js'

export class TemplateSource {
  private listeners = new Set<(templates: Templates) => void>()
  private watcher: ResourceWatcher<V1ConfigMap> | undefined
  /** The templates as read (inline or the ConfigMap), before the overlay version is added. */
  private base: Templates
  private overlayVersion = ''

  private constructor(private templates: Templates) {
    this.base = templates
  }

  static inline(options: InlineTemplateOptions, extra: Record<string, unknown> = {}): TemplateSource {
    return new TemplateSource(inlineTemplates(options, extra))
  }

  /** Reads the ConfigMap (a missing or broken one is a Config error) and watches it. */
  static async fromConfigMap(options: {
    k8s: ClientNode
    kubeConfig: KubeConfig
    core: CoreV1Api
    namespace: string
    name: string
    extra?: Record<string, unknown>
    logger?: Logger
    watchRetryMs?: number
    /** --harden-pod-templates */
    harden?: boolean
  }): Promise<TemplateSource> {
    const {core, namespace, name} = options
    const logger = options.logger ?? silentLogger
    const userOptions = {harden: options.harden === true}
    const {cm, templates} = await readTemplateConfigMap(core, namespace, name, options.extra, userOptions)
    const source = new TemplateSource(templates)
    warnWeaker(logger, source.templates, userOptions.harden)
    let lastResourceVersion = cm.metadata?.resourceVersion
    source.watcher = new ResourceWatcher<V1ConfigMap>({
      k8s: options.k8s,
      kubeConfig: options.kubeConfig,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
      fieldSelector: `metadata.name=${name}`,
      list: () => core.listNamespacedConfigMap({namespace, fieldSelector: `metadata.name=${name}`}),
      logger,
      description: `ConfigMap ${namespace}/${name}`,
      retryMs: options.watchRetryMs,
    })
    source.watcher.on((type, object) => {
      if (type === 'DELETED') {
        logger.warn('the function pod template ConfigMap was deleted; keeping the last templates', {configMap: `${namespace}/${name}`})
        lastResourceVersion = undefined
        return
      }
      if (object.metadata?.resourceVersion === lastResourceVersion) return
      lastResourceVersion = object.metadata?.resourceVersion
      let next: Templates
      try {
        next = templatesFromConfigMap(object, options.extra, userOptions)
      } catch (err) {
        logger.error('the changed function pod template is not usable; keeping the last good one', {error: (err as Error).message})
        return
      }
      if (next.version !== source.templates.version) warnWeaker(logger, next, userOptions.harden)
      source.update(next)
    })
    source.watcher.start().catch((err: unknown) => logger.warn('cannot watch the function pod template ConfigMap', {error: (err as Error).message}))
    return source
  }

  /**
   * A source fed from elsewhere (Porch's PodTemplate and ServiceTemplate objects, template-porch.ts): `set`
   * replaces the templates; `onClose` stops the feeder.
   */
  static fed(initial: Templates, onClose?: () => void): {source: TemplateSource; set(next: Templates): void} {
    const source = new TemplateSource(initial)
    if (onClose) source.closers.push(onClose)
    return {source, set: (next) => source.update(next)}
  }

  private closers: Array<() => void> = []

  current(): Templates {
    return this.templates
  }

  onChange(listener: (templates: Templates) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * Per-image changes made to new pods elsewhere (FunctionConfig templateOverrides) have a version too; it is
   * part of the template version, so a change of them replaces pods like a template change does. '' for none.
   */
  setOverlayVersion(version: string): void {
    if (version === this.overlayVersion) return
    this.overlayVersion = version
    this.update(this.base)
  }

  private update(next: Templates): void {
    this.base = next
    const composed = this.overlayVersion ? {...next, version: `${next.version}-${this.overlayVersion}`} : next
    if (composed.version === this.templates.version) return
    this.templates = composed
    for (const l of this.listeners) l(composed)
  }

  close(): void {
    this.watcher?.stop()
    for (const c of this.closers.splice(0)) c()
  }
}

/**
 * Reads the --function-pod-template ConfigMap once and checks its templates (a missing or broken
 * one is a Config error): what TemplateSource.fromConfigMap starts from, and what `fnr pods warm|gc`
 * use to learn the runner's current templates.
 */
export async function readTemplateConfigMap(core: CoreV1Api, namespace: string, name: string, extra: Record<string, unknown> = {}, options: UserTemplateOptions = {}): Promise<{cm: V1ConfigMap; templates: Templates}> {
  const where = `function pod template ConfigMap ${namespace}/${name} (--function-pod-template)`
  let cm: V1ConfigMap
  try {
    cm = await withApiRetries(() => core.readNamespacedConfigMap({name, namespace}), {what: `cannot read ${where}`})
  } catch (err) {
    if (apiStatusCode(err) === 404) throw new FnrError('Config', `${where} does not exist`, {cause: err})
    throw err instanceof FnrError ? new FnrError('Config', err.message, {cause: err, details: err.details}) : kubeError(err, `cannot read ${where}`)
  }
  return {cm, templates: templatesFromConfigMap(cm, extra, options)}
}

/** Explicit template settings weaker than fnr's security defaults are kept, and said once. */
function warnWeaker(logger: Logger, templates: Templates, harden: boolean): void {
  if (templates.warnings?.length) logger.warn(`the function pod template is weaker than fnr's security defaults; using it as written${harden ? '' : ' (--harden-pod-templates fills in the defaults it leaves unset)'}`, {template: templates.origin, settings: templates.warnings})
}
