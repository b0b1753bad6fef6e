/**
 * Fixtures and the assertion shared by test/reliability/pod-security.test.ts (pods on the real
 * control plane) and test/reliability/pod-security-defaults.test.ts (pods built in process).
 */
import type {V1ConfigMap, V1Pod} from '@kubernetes/client-node'
import {expect} from 'chai'

export const BARE_TEMPLATE = `apiVersion: v1
kind: Pod
spec:
  initContainers:
  - name: copy
    image: fnr.test/wrapper-server:v1
    command: [cp, -a, /x, /y]
  containers:
  - name: function
    image: placeholder
    command: [/wrapper-server-tools/wrapper-server]
  - name: sidecar
    image: busybox
`
export const SERVICE_TEMPLATE = 'apiVersion: v1\nkind: Service\nspec:\n  ports: [{port: 9446, targetPort: 9446}]\n'

export const cm = (template: string, name = 'tmpl', namespace = 'fnr-system'): V1ConfigMap => ({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name, namespace}, data: {template, serviceTemplate: SERVICE_TEMPLATE}})

/** Asserts the five defaults the issue lists, on every container. */
export function expectSecureDefaults(pod: V1Pod): void {
  const spec = pod.spec!
  expect(spec.automountServiceAccountToken, 'automountServiceAccountToken').to.equal(false)
  expect(spec.securityContext?.runAsNonRoot, 'runAsNonRoot').to.equal(true)
  expect(spec.securityContext?.runAsUser, 'runAsUser').to.be.a('number').and.not.equal(0)
  expect(spec.securityContext?.seccompProfile, 'seccomp').to.deep.equal({type: 'RuntimeDefault'})
  const all = [...(spec.initContainers ?? []), ...spec.containers]
  expect(all.length).to.be.greaterThan(0)
  for (const c of all) {
    expect(c.securityContext?.allowPrivilegeEscalation, `${c.name}: allowPrivilegeEscalation`).to.equal(false)
    expect(c.securityContext?.capabilities?.drop, `${c.name}: capabilities.drop`).to.deep.equal(['ALL'])
    expect(c.securityContext?.privileged ?? false, `${c.name}: privileged`).to.equal(false)
  }
}

