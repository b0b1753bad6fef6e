/**
 * Security defaults of function pods made from a template: a ConfigMap (--function-pod-template)
 * or Porch's PodTemplate base-pod-template (--function-config-source=crd|both).
 *
 * fnr's inline template already meets the restricted Pod Security Standard. A user's template (a
 * ConfigMap or PodTemplate) is used as its author wrote it: weakPodTemplateSettings lists what it
 * leaves weaker than these defaults, for a warning. With --harden-pod-templates it gets the same
 * defaults wherever it says nothing (hardenPodTemplate):
 *   - spec.automountServiceAccountToken: false;
 *   - pod securityContext: runAsNonRoot: true, with runAsUser/runAsGroup 65532 (the distroless
 *     "nonroot" user the wrapper server image runs as) when no uid is set anywhere, and
 *     seccompProfile RuntimeDefault when neither the pod nor a container sets a profile;
 *   - every container and init container: allowPrivilegeEscalation: false and
 *     capabilities.drop ["ALL"] (capabilities it adds are kept).
 * A setting the template states explicitly is kept as written (e.g. runAsUser: 0 or
 * allowPrivilegeEscalation: true for a function that truly needs it): the template is the
 * operator's deliberate choice, and fnr reports each such weaker setting as a warning when the
 * template is loaded instead of silently overriding it.
 *
 * A FunctionConfig's templateOverrides.securityContext is merged over the pod's
 * securityContext field by field (overridePodSecurityContext), so {runAsUser: 1000} keeps
 * runAsNonRoot and the seccomp profile; explicitly weaker values in it are kept and reported the
 * same way.
 */
import type {V1Container, V1Pod, V1PodSecurityContext, V1SecurityContext} from '@kubernetes/client-node'

export const NONROOT_ID = 65532

export interface HardenedPod {
  pod: V1Pod
  /** What was filled in (for logs and tests), e.g. "spec.automountServiceAccountToken: false". */
  added: string[]
  /** Explicit settings weaker than the defaults, kept as written. */
  weaker: string[]
}

/** A copy of the pod template with the security defaults filled in where it says nothing. */
export function hardenPodTemplate(template: V1Pod): HardenedPod {
  const pod = structuredClone(template)
  const added: string[] = []
  const weaker: string[] = []
  const spec = pod.spec
  if (!spec) return {pod, added, weaker}
  const containers: Array<[string, V1Container]> = [
    ...(spec.initContainers ?? []).map((c, i): [string, V1Container] => [`spec.initContainers[${i}] (${c?.name})`, c]),
    ...(spec.containers ?? []).map((c, i): [string, V1Container] => [`spec.containers[${i}] (${c?.name})`, c]),
  ].filter(([, c]) => c && typeof c === 'object')

  if (spec.automountServiceAccountToken === undefined) {
    spec.automountServiceAccountToken = false
    added.push('spec.automountServiceAccountToken: false')
  } else if (spec.automountServiceAccountToken) weaker.push('spec.automountServiceAccountToken: true')

  const psc = (spec.securityContext ??= {})
  const anyUid = psc.runAsUser !== undefined || containers.some(([, c]) => c.securityContext?.runAsUser !== undefined)
  const rootUid = psc.runAsUser === 0 || containers.some(([, c]) => c.securityContext?.runAsUser === 0)
  let nonRootAdded = false
  if (psc.runAsNonRoot === undefined && !containers.some(([, c]) => c.securityContext?.runAsNonRoot !== undefined)) {
    if (rootUid) weaker.push('runAsUser: 0 (runAsNonRoot left unset)')
    else {
      psc.runAsNonRoot = true
      nonRootAdded = true
      added.push('spec.securityContext.runAsNonRoot: true')
    }
  }
  if (psc.runAsNonRoot === false) weaker.push('spec.securityContext.runAsNonRoot: false')
  for (const [where, c] of containers) if (c.securityContext?.runAsNonRoot === false) weaker.push(`${where}.securityContext.runAsNonRoot: false`)
  if (!anyUid && nonRootAdded) {
    psc.runAsUser = NONROOT_ID
    added.push(`spec.securityContext.runAsUser: ${NONROOT_ID}`)
    if (psc.runAsGroup === undefined) {
      psc.runAsGroup = NONROOT_ID
      added.push(`spec.securityContext.runAsGroup: ${NONROOT_ID}`)
    }
  }
  const seccompSet = psc.seccompProfile !== undefined || containers.some(([, c]) => c.securityContext?.seccompProfile !== undefined)
  if (!seccompSet) {
    psc.seccompProfile = {type: 'RuntimeDefault'}
    added.push('spec.securityContext.seccompProfile: RuntimeDefault')
  }
  if (psc.seccompProfile?.type === 'Unconfined') weaker.push('spec.securityContext.seccompProfile: Unconfined')

  for (const [where, c] of containers) {
    const sc: V1SecurityContext = (c.securityContext ??= {})
    if (sc.seccompProfile?.type === 'Unconfined') weaker.push(`${where}.securityContext.seccompProfile: Unconfined`)
    if (sc.privileged) weaker.push(`${where}.securityContext.privileged: true`)
    if (sc.allowPrivilegeEscalation === undefined) {
      // Kubernetes rejects allowPrivilegeEscalation: false together with privileged: true.
      if (!sc.privileged) {
        sc.allowPrivilegeEscalation = false
        added.push(`${where}.securityContext.allowPrivilegeEscalation: false`)
      }
    } else if (sc.allowPrivilegeEscalation) weaker.push(`${where}.securityContext.allowPrivilegeEscalation: true`)
    const caps = (sc.capabilities ??= {})
    if (caps.drop === undefined) {
      caps.drop = ['ALL']
      added.push(`${where}.securityContext.capabilities.drop: [ALL]`)
    } else if (!caps.drop.some((d) => d.toUpperCase() === 'ALL')) weaker.push(`${where}.securityContext.capabilities.drop: ${JSON.stringify(caps.drop)} (not ALL)`)
    if (caps.add?.length) weaker.push(`${where}.securityContext.capabilities.add: ${JSON.stringify(caps.add)}`)
  }
  return {pod, added, weaker}
}

/**
 * The weak settings of a template used as written (fnr's policy for a user's template, unless
 * --harden-pod-templates): what hardenPodTemplate would fill in (said as "not set: …") and the
 * explicit settings weaker than fnr's defaults. The template itself is not changed.
 */
export function weakPodTemplateSettings(template: V1Pod): string[] {
  const {added, weaker} = hardenPodTemplate(template)
  return [...weaker, ...added.map((a) => `not set: ${a.replace(/^(.*): (.*)$/, '$1 (fnr would set $2)')}`)]
}

export interface OverriddenSecurityContext {
  securityContext: V1PodSecurityContext
  /** Explicit settings of the override weaker than fnr's defaults, kept as written. */
  weaker: string[]
}

/**
 * A templateOverrides.securityContext (FunctionConfig) over a pod's securityContext: the override's
 * fields replace the pod's, the others stay (upstream replaces the whole object, which silently
 * dropped runAsNonRoot and the seccomp profile). A field set to null removes it. An override with
 * runAsUser: 0 and no runAsNonRoot of its own drops the template's runAsNonRoot: true (the kubelet
 * would refuse to start the container otherwise). Weaker settings are reported.
 */
export function overridePodSecurityContext(base: V1PodSecurityContext | undefined, override: Record<string, unknown>): OverriddenSecurityContext {
  const merged: Record<string, unknown> = {...structuredClone(base ?? {})}
  const weaker: string[] = []
  const where = 'templateOverrides.securityContext'
  for (const [key, value] of Object.entries(override)) {
    if (value === null) {
      if (key in merged && ['runAsNonRoot', 'seccompProfile'].includes(key)) weaker.push(`${where}.${key}: null (the default ${JSON.stringify(merged[key])} removed)`)
      delete merged[key]
    } else merged[key] = structuredClone(value)
  }
  const sc = merged as V1PodSecurityContext
  if (override.runAsNonRoot === false) weaker.push(`${where}.runAsNonRoot: false`)
  if (override.runAsUser === 0) {
    if (override.runAsNonRoot === undefined && sc.runAsNonRoot === true) {
      delete sc.runAsNonRoot
      weaker.push(`${where}.runAsUser: 0 (runAsNonRoot: true dropped)`)
    } else weaker.push(`${where}.runAsUser: 0`)
  }
  const seccomp = override.seccompProfile as {type?: string} | undefined
  if (seccomp && typeof seccomp === 'object' && seccomp.type === 'Unconfined') weaker.push(`${where}.seccompProfile: Unconfined`)
  return {securityContext: sc, weaker}
}
