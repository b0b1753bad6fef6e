/**
 * Porch at HEAD's base templates (docs/function-config.md): the core PodTemplate `base-pod-template` and the
 * `config.porch.kpt.dev/v1alpha1` ServiceTemplate `base-service-template`, in the pod namespace. With
 * --function-config-source=crd|both and no --function-pod-template, fnr reads and watches them:
 *
 *   - a PodTemplate's `template` (metadata + spec) becomes the function pod template, a ServiceTemplate's
 *     `template` the Service template; either one that does not exist is fnr's inline default (fnr does not
 *     create them, unlike Porch, so the runner needs no write access);
 *   - the first init container's image is set to $WRAPPER_SERVER_IMAGE when that is set (as Porch does);
 *   - they must meet the template contract (template.ts); a broken one stops the start, a later edit into a broken
 *     one is reported and ignored (the last good templates stay);
 *   - the PodTemplate is used as its author wrote it (as a ConfigMap template is), its settings weaker than fnr's
 *     security defaults logged as a warning; with --harden-pod-templates it gets those defaults wherever it says
 *     nothing (pod-security.ts: no service-account token, non-root, seccomp RuntimeDefault, no privilege
 *     escalation, capabilities dropped);
 *   - the template version is a hash of both and fnr's settings (Porch uses the PodTemplate's resourceVersion), so
 *     a restarted runner adopts only pods it would have made, and a change replaces pods as they go idle.
 */
import type {V1Pod, V1PodTemplate, V1Service} from '@kubernetes/client-node'

import {FnrError} from '../../errors.js'
import type {KubeClients} from '../../k8s/client.js'
import {apiStatusCode} from '../../k8s/errors.js'
import {withApiRetries} from '../../k8s/retry.js'
import {ResourceWatcher, type ObjectList} from '../../k8s/watch.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import {inlinePodTemplate, inlineServiceTemplate, inlineTemplates, templateVersion, userPodTemplate, validatePodTemplate, validateServiceTemplate, type InlineTemplateOptions, type Templates} from '../model/template.js'
import {TemplateSource} from './template-source.js'

export const BASE_POD_TEMPLATE = 'base-pod-template'
export const BASE_SERVICE_TEMPLATE = 'base-service-template'
export const SERVICE_TEMPLATE_GROUP = 'config.porch.kpt.dev'
export const SERVICE_TEMPLATE_VERSION = 'v1alpha1'
export const SERVICE_TEMPLATE_PLURAL = 'servicetemplates'

export interface ServiceTemplateObject {
  metadata?: {name?: string; namespace?: string; resourceVersion?: string}
  template?: {metadata?: V1Service['metadata']; spec?: V1Service['spec']}
}

export interface PorchTemplateOptions {
  namespace: string
  /** $WRAPPER_SERVER_IMAGE and the inline resources: the inline default, and the init container's image. */
  inline: Partial<InlineTemplateOptions>
  /** The settings fnr adds (part of the version). */
  extra?: Record<string, unknown>
  /** --harden-pod-templates (template.ts UserTemplateOptions). */
  harden?: boolean
}

/** The templates made of the two objects (either may be missing); FnrError('Config') naming a broken one. */
export function templatesFromPorchObjects(podTemplate: V1PodTemplate | undefined, serviceTemplate: ServiceTemplateObject | undefined, options: PorchTemplateOptions): Templates {
  const ns = options.namespace
  const extra = options.extra ?? {}
  if (!podTemplate && !serviceTemplate) {
    if (!options.inline.wrapperServerImage) {
      throw new FnrError('Config', `environment variable WRAPPER_SERVER_IMAGE must be set to use the inline template (there is no PodTemplate ${ns}/${BASE_POD_TEMPLATE})`)
    }
    return inlineTemplates(options.inline as InlineTemplateOptions, extra)
  }
  const origins: string[] = []
  const warnings: string[] = []
  let pod: V1Pod
  if (podTemplate) {
    const origin = `PodTemplate ${ns}/${BASE_POD_TEMPLATE}`
    origins.push(origin)
    const t = podTemplate.template
    if (!t?.spec) throw new FnrError('Config', `function pod template (${origin}): contract point 1 is broken: template.spec is missing`)
    pod = {apiVersion: 'v1', kind: 'Pod', metadata: structuredClone(t.metadata ?? {}), spec: structuredClone(t.spec)}
    const init = pod.spec!.initContainers?.[0]
    if (init && options.inline.wrapperServerImage) init.image = options.inline.wrapperServerImage
    validatePodTemplate(pod, origin)
    // As written, or hardened, as a ConfigMap template (template.ts userPodTemplate).
    const used = userPodTemplate(pod, {harden: options.harden === true})
    pod = used.pod
    warnings.push(...used.warnings)
  } else {
    if (!options.inline.wrapperServerImage) throw new FnrError('Config', `environment variable WRAPPER_SERVER_IMAGE must be set: there is no PodTemplate ${ns}/${BASE_POD_TEMPLATE}, so fnr uses its inline pod template`)
    pod = inlinePodTemplate(options.inline as InlineTemplateOptions)
  }
  let service: V1Service
  if (serviceTemplate) {
    const origin = `ServiceTemplate ${ns}/${BASE_SERVICE_TEMPLATE}`
    origins.push(origin)
    service = {apiVersion: 'v1', kind: 'Service', metadata: structuredClone(serviceTemplate.template?.metadata ?? {}), spec: structuredClone(serviceTemplate.template?.spec ?? {})}
    validateServiceTemplate(service, origin)
  } else {
    service = inlineServiceTemplate()
  }
  return {pod, service, version: templateVersion('cm', pod, service, extra).replace(/^cm-/, 'porch-'), origin: origins.join(' and '), ...(warnings.length ? {warnings} : {})}
}

/** Reads and watches both objects; the returned source follows their changes. */
export async function porchTemplateSource(clients: KubeClients, options: PorchTemplateOptions & {logger?: Logger; watchRetryMs?: number}): Promise<TemplateSource> {
  const logger = options.logger ?? silentLogger
  const {k8s, kubeConfig, core} = clients
  const ns = options.namespace
  const custom = kubeConfig.makeApiClient(k8s.CustomObjectsApi)
  const pods = new ResourceWatcher<V1PodTemplate>({
    k8s,
    kubeConfig,
    path: `/api/v1/namespaces/${encodeURIComponent(ns)}/podtemplates`,
    fieldSelector: `metadata.name=${BASE_POD_TEMPLATE}`,
    list: () => core.listNamespacedPodTemplate({namespace: ns, fieldSelector: `metadata.name=${BASE_POD_TEMPLATE}`}),
    logger,
    description: `PodTemplate ${ns}/${BASE_POD_TEMPLATE}`,
    retryMs: options.watchRetryMs,
  })
  const services = new ResourceWatcher<ServiceTemplateObject>({
    k8s,
    kubeConfig,
    path: `/apis/${SERVICE_TEMPLATE_GROUP}/${SERVICE_TEMPLATE_VERSION}/namespaces/${encodeURIComponent(ns)}/${SERVICE_TEMPLATE_PLURAL}`,
    fieldSelector: `metadata.name=${BASE_SERVICE_TEMPLATE}`,
    list: () =>
      custom.listNamespacedCustomObject({group: SERVICE_TEMPLATE_GROUP, version: SERVICE_TEMPLATE_VERSION, namespace: ns, plural: SERVICE_TEMPLATE_PLURAL, fieldSelector: `metadata.name=${BASE_SERVICE_TEMPLATE}`}) as Promise<ObjectList<ServiceTemplateObject>>,
    logger,
    description: `ServiceTemplate ${ns}/${BASE_SERVICE_TEMPLATE}`,
    retryMs: options.watchRetryMs,
  })
  const stop = (): void => {
    pods.stop()
    services.stop()
  }
  let watchServices = true
  try {
    await withApiRetries(() => pods.start(), {what: `cannot list PodTemplate ${ns}/${BASE_POD_TEMPLATE}`})
    try {
      await withApiRetries(() => services.start(), {what: `cannot list ServiceTemplate ${ns}/${BASE_SERVICE_TEMPLATE}`})
    } catch (err) {
      if (apiStatusCode(err) !== 404) throw err
      // The ServiceTemplate CRD is not installed: the inline Service template, nothing to watch.
      watchServices = false
      services.stop()
      logger.info('no ServiceTemplate CRD; using the inline Service template', {namespace: ns})
    }
  } catch (err) {
    stop()
    throw err instanceof FnrError ? new FnrError('Config', err.message, {cause: err, details: err.details}) : err
  }
  const read = (): Templates => templatesFromPorchObjects(pods.get(BASE_POD_TEMPLATE), watchServices ? services.get(BASE_SERVICE_TEMPLATE) : undefined, options)
  // Explicit settings weaker than the security defaults are kept, and said whenever the templates are (re)read.
  const warnWeaker = (t: Templates): void => {
    if (t.warnings?.length) logger.warn(`the function pod template is weaker than fnr's security defaults; using it as written${options.harden ? '' : ' (--harden-pod-templates fills in the defaults it leaves unset)'}`, {template: t.origin, settings: t.warnings})
  }
  let initial: Templates
  try {
    initial = read()
  } catch (err) {
    stop()
    throw err
  }
  warnWeaker(initial)
  const fed = TemplateSource.fed(initial, stop)
  const onChange = (): void => {
    let next: Templates
    try {
      next = read()
    } catch (err) {
      logger.error('the changed function pod template is not usable; keeping the last good one', {error: (err as Error).message})
      return
    }
    if (next.version !== fed.source.current().version) warnWeaker(next)
    fed.set(next)
  }
  pods.on(onChange)
  if (watchServices) services.on(onChange)
  return fed.source
}
