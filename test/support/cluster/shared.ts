/**
 * One real control plane per mocha process, started lazily by the first suite that asks for it and stopped by a
 * root-level `after` hook (registered when this module is first imported by a spec file) or, when an earlier root
 * hook failed and mocha skipped that one, by mocha's global teardown (test/support/teardown.ts). Suites work in namespaces of their own (`namespace()`), so they never see each other's objects.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from './controlplane.js';
import { clusterBinaries, startControlPlane } from './controlplane.js';
import { KubeRequestError, KubeRestClient } from '../k8s/client.js';
import type { ImageMapping } from '../k8s/kubelet.js';
import { onTeardown } from '../teardown.js';

/**
 * The control plane's promise lives on globalThis, not in this module: mocha loads a spec file with require() and,
 * when that fails (an ESM-only dependency somewhere in its imports), with import(), so one process holds two
 * instances of this module, one per module system. A module variable gave each its own control plane (two started
 * per run, ~7 s and a node each); the global gives the process one.
 */
const SHARED = Symbol.for('fnr.test.sharedControlPlane');
const slot = globalThis as typeof globalThis & { [SHARED]?: Promise<ControlPlane> };

/**
 * The process's control plane (etcd, kube-apiserver, kube-controller-manager, the LocalKubelet as node
 * `fnr-node` with the runc node behind it, unless FNR_CLUSTER_NODE=process). The first call takes ~5-15 s (and
 * builds the binaries if a setup did not). Pods pull real images (a test registry); a suite may instead map
 * images to host processes with `cp.kubelet.setImage()` / `setCommand()` (a pod whose images are all mapped).
 */
export function sharedControlPlane(): Promise<ControlPlane> {
  onTeardown('shared control plane', stopSharedControlPlane);
  slot[SHARED] ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'fnr-cluster-'));
    return startControlPlane({
      dir,
      kubelet: { imageMap: {} as Record<string, ImageMapping>, maxGracePeriodSeconds: 2, stopGraceMs: 1000 },
      runc: { backoffMs: 500, maxBackoffMs: 5000, retryMs: 300 },
    });
  })().catch((err: unknown) => {
    slot[SHARED] = undefined;
    throw err;
  });
  return slot[SHARED];
}

/**
 * For a suite's top: waits (without a mocha timeout) until the control plane's binaries are built.
 * `npm test` builds them in the background while earlier suites run (scripts/build-peers.mjs); on a
 * cold machine that can still be going when the cluster suites start, and a build blocks the
 * process, which a suite's own timeout would then count against its first hook.
 */
export function waitForClusterBinaries(): void {
  before(function (this: { timeout(ms: number): void }) {
    this.timeout(0);
    clusterBinaries();
  });
}

/** Stops the shared control plane if one was started. */
export async function stopSharedControlPlane(): Promise<void> {
  const p = slot[SHARED];
  slot[SHARED] = undefined;
  if (p) await (await p.catch(() => undefined))?.stop();
}

declare const after: ((fn: () => Promise<void>) => void) | undefined;
if (typeof after === 'function') {
  after(async function (this: { timeout?: (ms: number) => void }) {
    this.timeout?.(30_000);
    await stopSharedControlPlane();
  });
}

/** An admin REST client for the control plane (close() it). */
export function adminClient(cp: ControlPlane): KubeRestClient {
  return new KubeRestClient({ url: cp.url, token: cp.adminToken, ca: cp.caPem });
}

/**
 * Creates a namespace `<prefix>-<random>` (labels as given) and waits until its `default` ServiceAccount exists
 * (the ServiceAccount admission plugin rejects pods before that). Returns its name and a delete function.
 */
export async function namespace(cp: ControlPlane, prefix: string, labels: Record<string, string> = {}): Promise<{ name: string; remove: () => Promise<void> }> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  const client = adminClient(cp);
  try {
    await client.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await client.raw('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`);
      if (r.code === 200) break;
      if (Date.now() > deadline) throw new Error(`namespace ${name}: no default ServiceAccount within 30 s`);
      await new Promise((res) => setTimeout(res, 100));
    }
  } finally {
    client.close();
  }
  return {
    name,
    remove: async () => {
      const c = adminClient(cp);
      try {
        await c.delete(`/api/v1/namespaces/${name}`).catch((e: unknown) => {
          if (!(e instanceof KubeRequestError && e.code === 404)) throw e;
        });
      } finally {
        c.close();
      }
    },
  };
}
