/**
 * The endpoints controller: keeps an `Endpoints` object (same name as the Service) in step with the pods a
 * Service's selector matches. Ready pods go to `addresses`, pods with an IP that are not ready (or are terminating)
 * go to `notReadyAddresses`; terminal pods are left out. Services without a selector are not touched.
 */
import type { KubeRestClient } from './client.js';
import { KubeRequestError, resourcePath } from './client.js';
import { deepEqual } from './patch.js';
import { Reflector } from './reflector.js';
import { matchLabels, selectorFromMap } from './selectors.js';
import type { KubeObject } from './status.js';

function isReady(pod: KubeObject): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  const conditions: KubeObject[] = Array.isArray(pod.status?.conditions) ? pod.status.conditions : [];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

function resolveTargetPort(pod: KubeObject, target: unknown): number | undefined {
  if (typeof target === 'number') return target;
  if (typeof target === 'string' && /^\d+$/.test(target)) return Number(target);
  for (const c of (pod.spec?.containers ?? []) as KubeObject[]) {
    for (const p of (c.ports ?? []) as KubeObject[]) if (p.name === target) return Number(p.containerPort);
  }
  return undefined;
}

export class EndpointsController {
  private readonly services: Reflector;
  private readonly dirty = new Set<string>();
  private readonly running = new Map<string, Promise<void>>();
  private stopped = false;

  constructor(
    private readonly client: KubeRestClient,
    private readonly pods: () => KubeObject[],
  ) {
    this.services = new Reflector(client, '/api/v1/services', {
      onAdd: (s) => this.enqueue(s.metadata.namespace, s.metadata.name),
      onUpdate: (s) => this.enqueue(s.metadata.namespace, s.metadata.name),
      onDelete: (s) => this.enqueue(s.metadata.namespace, s.metadata.name),
    });
  }

  start(): Promise<void> {
    return this.services.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.services.stop();
    await Promise.allSettled([...this.running.values()]);
  }

  /** Called by the kubelet for every pod change. */
  podChanged(pod: KubeObject): void {
    for (const svc of this.services.list()) {
      if (svc.metadata.namespace === pod.metadata?.namespace) this.enqueue(svc.metadata.namespace, svc.metadata.name);
    }
  }

  private enqueue(namespace: string, name: string): void {
    if (this.stopped) return;
    const key = `${namespace}/${name}`;
    this.dirty.add(key);
    if (this.running.has(key)) return;
    const run = (async () => {
      while (this.dirty.has(key) && !this.stopped) {
        this.dirty.delete(key);
        try {
          await this.sync(namespace, name);
        } catch {
          // conflicts and transient errors: try again on the next change, or shortly
          if (!this.stopped) {
            await new Promise((r) => setTimeout(r, 100));
            this.dirty.add(key);
          }
        }
      }
      this.running.delete(key);
    })();
    this.running.set(key, run);
  }

  private desiredSubsets(svc: KubeObject): KubeObject[] {
    const selector = selectorFromMap(svc.spec?.selector);
    const ports: KubeObject[] = Array.isArray(svc.spec?.ports) ? svc.spec.ports : [];
    const groups = new Map<string, { ports: KubeObject[]; addresses: KubeObject[]; notReadyAddresses: KubeObject[] }>();
    const pods = this.pods()
      .filter((p) => p.metadata?.namespace === svc.metadata.namespace && matchLabels(selector, p.metadata?.labels))
      .filter((p) => p.status?.podIP && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
      .sort((a, b) => String(a.status.podIP).localeCompare(String(b.status.podIP), 'en', { numeric: true }));
    for (const pod of pods) {
      const epPorts: KubeObject[] = [];
      for (const sp of ports) {
        const port = resolveTargetPort(pod, sp.targetPort ?? sp.port);
        if (port === undefined) continue;
        const entry: KubeObject = {};
        if (sp.name) entry.name = sp.name;
        entry.port = port;
        entry.protocol = sp.protocol ?? 'TCP';
        epPorts.push(entry);
      }
      const groupKey = JSON.stringify(epPorts);
      let group = groups.get(groupKey);
      if (!group) {
        group = { ports: epPorts, addresses: [], notReadyAddresses: [] };
        groups.set(groupKey, group);
      }
      const address = {
        ip: pod.status.podIP,
        nodeName: pod.spec?.nodeName,
        targetRef: { kind: 'Pod', namespace: pod.metadata.namespace, name: pod.metadata.name, uid: pod.metadata.uid },
      };
      (isReady(pod) ? group.addresses : group.notReadyAddresses).push(address);
    }
    return [...groups.values()].map((g) => {
      const subset: KubeObject = {};
      if (g.addresses.length > 0) subset.addresses = g.addresses;
      if (g.notReadyAddresses.length > 0) subset.notReadyAddresses = g.notReadyAddresses;
      if (g.ports.length > 0) subset.ports = g.ports;
      return subset;
    });
  }

  private async sync(namespace: string, name: string): Promise<void> {
    const path = resourcePath('v1', 'endpoints', namespace, name);
    const svc = this.services.get(namespace, name);
    let current: KubeObject | undefined;
    try {
      current = await this.client.get(path);
    } catch (e) {
      if (!(e instanceof KubeRequestError && e.code === 404)) throw e;
    }
    if (!svc) {
      // The Service is gone: so are its endpoints (only if we made them).
      if (current && current.metadata?.annotations?.['fnr.test/managed-by'] === 'local-kubelet') {
        await this.client.delete(path).catch(() => undefined);
      }
      return;
    }
    const selector = svc.spec?.selector;
    if (!selector || Object.keys(selector).length === 0) return;
    const subsets = this.desiredSubsets(svc);
    const labels = { ...(svc.metadata.labels ?? {}) };
    const desired: KubeObject = {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name, namespace, labels, annotations: { ...(current?.metadata?.annotations ?? {}), 'fnr.test/managed-by': 'local-kubelet' } },
    };
    if (subsets.length > 0) desired.subsets = subsets;
    if (!current) {
      await this.client.create(resourcePath('v1', 'endpoints', namespace), desired);
      return;
    }
    if (deepEqual(current.subsets ?? [], desired.subsets ?? []) && deepEqual(current.metadata?.labels ?? {}, labels) && current.metadata?.annotations?.['fnr.test/managed-by']) {
      return;
    }
    desired.metadata.resourceVersion = current.metadata.resourceVersion;
    await this.client.replace(path, desired);
  }
}
