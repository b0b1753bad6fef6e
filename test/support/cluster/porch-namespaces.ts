/**
 * Porch's namespaces on the shared control plane. Their names are fixed (porch-system for the runner,
 * porch-fn-system for function pods), so each suite that uses them owns them while it runs: it waits for an
 * earlier suite's deletion to finish, and deletes them (and waits) when it is done.
 */
import {writeFile} from 'node:fs/promises'
import path from 'node:path'

import type {ControlPlane} from './controlplane.js'
import type {KubeRestClient} from '../k8s/client.js'
import {eventually} from '../k8s/fixtures.js'

export const RUNNER_NS = 'porch-system'
export const POD_NS = 'porch-fn-system'
/** The runner's ServiceAccount, as Porch's and fnr's manifests name it, and its user name in the audit log. */
export const RUNNER_SA = 'porch-fn-runner'
export const RUNNER_USER = `system:serviceaccount:${RUNNER_NS}:${RUNNER_SA}`

async function gone(admin: KubeRestClient): Promise<boolean> {
  for (const ns of [RUNNER_NS, POD_NS]) if ((await admin.raw('GET', `/api/v1/namespaces/${ns}`)).code !== 404) return false
  return true
}

/** Waits until neither namespace exists (an earlier suite may still be deleting them). */
export async function porchNamespacesGone(admin: KubeRestClient, timeoutMs = 90_000): Promise<void> {
  await eventually(() => gone(admin), timeoutMs, 250)
}

/** Deletes both namespaces and waits for them to go (their pods stop on the node first); never throws. */
export async function deletePorchNamespaces(admin: KubeRestClient | undefined): Promise<void> {
  if (!admin) return
  for (const ns of [RUNNER_NS, POD_NS]) await admin.delete(`/api/v1/namespaces/${ns}`).catch(() => undefined)
  await eventually(() => gone(admin), 90_000, 250).catch(() => undefined)
}

/**
 * A kubeconfig at `dir`/runner.kubeconfig with a one-hour token of the runner's ServiceAccount (never admin), once
 * the ServiceAccount exists. Returns its path.
 */
export async function runnerKubeconfig(cp: ControlPlane, admin: KubeRestClient, dir: string): Promise<string> {
  await eventually(async () => (await admin.raw('GET', `/api/v1/namespaces/${RUNNER_NS}/serviceaccounts/${RUNNER_SA}`)).code === 200, 20_000, 100)
  const r = await cp.kubectl(['create', 'token', RUNNER_SA, '-n', RUNNER_NS, '--duration=1h'])
  if (r.code !== 0) throw new Error(`kubectl create token ${RUNNER_SA}: ${r.stderr}`)
  const file = path.join(dir, 'runner.kubeconfig')
  await writeFile(file, cp.kubeconfigFor(r.stdout.trim(), RUNNER_NS))
  return file
}

/**
 * `kubectl apply -k target` (fnr's manifests/ or an overlay of them), the runner Deployment scaled to zero (fnr
 * serve runs in the test process; its own pod would need the fnr image) and the pod namespace labelled to enforce
 * Pod Security `restricted`. Returns what apply printed.
 */
export async function applyRunnerManifests(cp: ControlPlane, target: string): Promise<string> {
  const run = async (args: string[]): Promise<string> => {
    const r = await cp.kubectl(args)
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`)
    return r.stdout
  }
  const out = await run(['apply', '-k', target])
  await run(['scale', '-n', RUNNER_NS, 'deployment/function-runner', '--replicas=0'])
  await run(['label', '--overwrite', 'namespace', POD_NS, 'pod-security.kubernetes.io/enforce=restricted'])
  return out
}
