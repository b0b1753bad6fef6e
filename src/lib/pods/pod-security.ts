/**
 * Security defaults of function pods made from a template ConfigMap (--function-pod-template).
 *
 * fnr's inline template already meets the restricted Pod Security Standard. A ConfigMap template
 * gets the same defaults wherever it says nothing:
 *   - spec.automountServiceAccountToken: false;
 *   - pod securityContext: runAsNonRoot: true, with runAsUser/runAsGroup 65532 (the distroless
 *     "nonroot" user the wrapper server image runs as) when no uid is set anywhere, and
 *     seccompProfile RuntimeDefault when neither the pod nor a container sets a profile;
 *   - every container and init container: allowPrivilegeEscalation: false and
 *     capabilities.drop ["ALL"] (capabilities it adds are kept).
 * A setting the template states explicitly is kept as written (e.g. runAsUser: 0 or
 * allowPrivilegeEscalation: true for a function that truly needs it): the ConfigMap is the
 * operator's deliberate choice, and fnr reports each such weaker setting as a warning when the
 * template is loaded instead of silently overriding it.
 */
import type {V1Container, V1Pod, V1SecurityContext} from '@kubernetes/client-node'

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
