/**
 * The pod runtime's side of FunctionConfig objects (config/function-config-crd.ts holds and
 * validates them): their templateOverrides applied to a new pod, and the PodRuntimeExtension
 * hooks (per-image settings, warm-up images, the overlay version) backed by the store. It lives
 * here so that lib/config never imports lib/pods (the pods read config, not the other way).
 */
import type {V1Pod} from '@kubernetes/client-node'

import type {ContainerOverrides, FunctionConfigStore, TemplateOverrides} from '../../config/function-config-crd.js'
import {silentLogger, type Logger} from '../../telemetry/log.js'
import {overridePodSecurityContext} from '../model/pod-security.js'
import type {PodRuntimeExtension} from './runtime.js'

/**
 * Applies an image's templateOverrides to a pod built from the base template. They replace, not merge (as
 * upstream): serviceAccountName, and per container resources.requests, resources.limits, env and envFrom, on the
 * first init container and on the "function" container. securityContext is merged field by field over the
 * template's (upstream replaces it, which silently dropped runAsNonRoot and seccomp); the weaker values are
 * returned (the caller warns).
 */
export function applyTemplateOverrides(pod: V1Pod, overrides: TemplateOverrides): {weaker: string[]} {
  const spec = pod.spec
  if (!spec) return {weaker: []}
  let weaker: string[] = []
  if (overrides.serviceAccountName) spec.serviceAccountName = overrides.serviceAccountName
  if (overrides.securityContext) {
    // Merged over the template's securityContext, not replacing it (pod-security.ts).
    const merged = overridePodSecurityContext(spec.securityContext, overrides.securityContext)
    spec.securityContext = merged.securityContext
    weaker = merged.weaker
  }
  const patch = (container: {resources?: {requests?: Record<string, unknown>; limits?: Record<string, unknown>}; env?: unknown; envFrom?: unknown} | undefined, o: ContainerOverrides | undefined): void => {
    if (!container || !o) return
    if (o.resources?.requests) container.resources = {...(container.resources ?? {}), requests: {...o.resources.requests}}
    if (o.resources?.limits) container.resources = {...(container.resources ?? {}), limits: {...o.resources.limits}}
    if (o.env) container.env = structuredClone(o.env)
    if (o.envFrom) container.envFrom = structuredClone(o.envFrom)
  }
  patch(spec.initContainers?.[0] as never, overrides.initContainer)
  patch(spec.containers?.find((c) => c.name === 'function') as never, overrides.container)
  return {weaker}
}

/**
 * A pod preparer applying the store's templateOverrides for the image; a securityContext override that
 * weakens fnr's defaults is warned about once per image and settings.
 */
export function functionConfigPodPreparer(store: FunctionConfigStore, logger: Logger = silentLogger): (pod: V1Pod, image: string) => void {
  const said = new Set<string>()
  return (pod, image) => {
    const overrides = store.templateOverridesFor(image)
    if (!overrides) return
    const {weaker} = applyTemplateOverrides(pod, overrides)
    const key = `${image}\0${weaker.join('\0')}`
    if (weaker.length > 0 && !said.has(key)) {
      said.add(key)
      logger.warn('a FunctionConfig templateOverrides.securityContext weakens fnr\'s security defaults; keeping its explicit settings', {image, settings: weaker})
    }
  }
}

/**
 * The pod runtime's hooks (runtime.ts PodRuntimeExtension) backed by a store; with `templates`, the base
 * templates come from Porch's PodTemplate/ServiceTemplate objects in that namespace (template-porch.ts).
 */
export function podRuntimeExtension(store: FunctionConfigStore, templates?: {namespace: string; logger?: Logger}): PodRuntimeExtension {
  return {
    ...(templates
      ? {
          baseTemplates: async (clients, inline, extra, user) => {
            const {porchTemplateSource} = await import('../cluster/template-porch.js')
            return porchTemplateSource(clients, {namespace: templates.namespace, inline, extra, logger: templates.logger, harden: user?.harden === true})
          },
        }
      : {}),
    settingsFor: (image, fallback) => store.settingsFor(image, fallback),
    warmUpImages: () => store.warmUpImages(),
    preparePod: functionConfigPodPreparer(store, templates?.logger),
    overlayVersion: () => (store.overridesVersion ? `fc${store.overridesVersion}` : ''),
    onChange: (listener) => store.onChange(listener),
  }
}
