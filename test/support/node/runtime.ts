/**
 * RuncRuntime: the container side of the test node. LocalKubelet delegates pods to it when constructed with
 * `runtime: new RuncRuntime(...)`; it can also run pods on its own (startPod with a PodHost), without any API server.
 * State (runc's --root, unpacked images, pod dirs) lives in one temp dir removed by stop().
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import type { KubeRestClient } from '../k8s/client.js';
import { KubeRequestError, resourcePath } from '../k8s/client.js';
import { ImageStore, type ImageStoreOptions } from './images.js';
import { liveNetworks } from './network.js';
import { NodePod, type PodHost } from './pod.js';
import { ServiceRouter, type ServiceRouterOptions } from './services.js';
import { findRunc, nodeUnavailableReason, run } from './runc.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface RuncRuntimeOptions {
  /** TLS registries: host → dir with ca.crt (others are pulled over http / without verification). */
  certDirs?: ImageStoreOptions['certDirs'];
  /** First restart / pull back-off, doubling up to maxBackoffMs (a kubelet: 10 s and 300 s). Defaults 1 s and 10 s. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long an ErrImagePull / config error is shown before the next step (default 500 ms). */
  retryMs?: number;
  /** `nameserver` written to the pods' /etc/resolv.conf (e.g. the test DNS server's address). */
  dnsServer?: string;
  clusterDomain?: string;
  /**
   * Route Service ClusterIPs from inside pods and give them a kubelet's Service variables, from the API server the
   * pods come from (./services.ts). For a real control plane (test/support/cluster turns it on).
   */
  serviceRouting?: ServiceRouterOptions;
}

/** What LocalKubelet keeps per pod; NodePod behind a kubelet adapter has the same shape as its process runtime. */
export interface KubeletPod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly ip: string;
  readonly pid: number | undefined;
  pod: KubeObject;
  readonly logs: Map<string, string>;
  start(): void;
  terminate(graceSeconds: number): Promise<void>;
  abandon(graceMs: number): Promise<void>;
}

/** Runtimes not stopped yet: on process exit (after() hooks never ran) their containers, mounts and dirs go. */
const liveRuntimes = new Set<RuncRuntime>();
let exitHook = false;
function lastResort(): void {
  for (const r of liveRuntimes) {
    const list = spawnSync(r.runc, ['--root', r.stateRoot, 'list', '-q'], { encoding: 'utf8' });
    for (const id of (list.stdout ?? '').split('\n').filter((x) => x !== '')) spawnSync(r.runc, ['--root', r.stateRoot, 'delete', '--force', id]);
    for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
      const target = line.split(' ')[1];
      if (target?.startsWith(r.dir)) spawnSync('umount', ['-l', target]);
    }
    rmSync(r.dir, { recursive: true, force: true });
  }
}

export class RuncRuntime {
  readonly runc: string;
  readonly stateRoot: string;
  readonly images: ImageStore;
  readonly hostIP = '127.0.0.1';
  readonly retryMs: number;
  readonly dnsServer: string | undefined;
  readonly clusterDomain: string;
  private readonly pods = new Set<NodePod>();
  private router: ServiceRouter | undefined;

  private constructor(
    readonly dir: string,
    private readonly options: RuncRuntimeOptions,
  ) {
    this.runc = findRunc()!;
    this.stateRoot = path.join(dir, 'runc');
    this.images = new ImageStore(path.join(dir, 'images'), { certDirs: options.certDirs });
    this.retryMs = options.retryMs ?? 500;
    this.dnsServer = options.dnsServer;
    this.clusterDomain = options.clusterDomain ?? 'cluster.local';
    liveRuntimes.add(this);
    if (!exitHook) {
      exitHook = true;
      process.on('exit', lastResort);
    }
  }

  /** Makes the state dir; throws with the reason when this machine cannot run containers (not root, no runc, …). */
  static async create(options: RuncRuntimeOptions = {}): Promise<RuncRuntime> {
    const reason = nodeUnavailableReason();
    if (reason) throw new Error(`the runc node cannot run here: ${reason}`);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fnr-node-'));
    await mkdir(path.join(dir, 'runc'));
    return new RuncRuntime(dir, options);
  }

  backoff(n: number): number {
    const base = this.options.backoffMs ?? 1000;
    return Math.min(this.options.maxBackoffMs ?? 10_000, base * 2 ** Math.max(0, n - 1));
  }

  /** Starts running a pod (status goes to host.writeStatus). */
  startPod(pod: KubeObject, host: PodHost): NodePod {
    const p = new NodePod(this, pod, host);
    this.pods.add(p);
    p.start();
    return p;
  }

  /** A pod for LocalKubelet: statuses are JSON patches with a uid test; terminate() ends with the grace-0 delete. */
  kubeletPod(pod: KubeObject, client: KubeRestClient, onLog?: (container: string, chunk: string) => void): KubeletPod {
    const namespace: string = pod.metadata.namespace;
    const name: string = pod.metadata.name;
    const uid: string = pod.metadata.uid;
    let gone = false;
    const host: PodHost = {
      read: async (kind, ns, objName) => {
        try {
          const o = await client.get(resourcePath('v1', kind, ns, objName));
          const data = (o.data ?? {}) as Record<string, string>;
          return kind === 'secrets' ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])) : { ...data };
        } catch (e) {
          if (e instanceof KubeRequestError && e.code === 404) return undefined;
          throw e;
        }
      },
      token: async (ns, serviceAccount, request) => {
        const review = await client.create(resourcePath('v1', 'serviceaccounts', ns, serviceAccount, 'token'), {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: {
            audiences: request.audience ? [request.audience] : [],
            expirationSeconds: request.expirationSeconds ?? 3607,
            boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: request.podName, uid: request.podUid },
          },
        });
        return String(review.status?.token ?? '');
      },
      writeStatus: async (status) => {
        if (gone) return;
        await client.patch(resourcePath('v1', 'pods', namespace, name, 'status'), [
          { op: 'test', path: '/metadata/uid', value: uid },
          { op: 'replace', path: '/status', value: status },
        ], 'json');
      },
      onLog,
    };
    if (this.options.serviceRouting) host.services = this.router ??= new ServiceRouter(client, { clusterDomain: this.clusterDomain, ...this.options.serviceRouting });
    let nodePod: NodePod | undefined;
    const adapter: KubeletPod = {
      uid,
      namespace,
      name,
      get ip() {
        return nodePod?.ip ?? '';
      },
      get pid() {
        return nodePod?.pid;
      },
      get pod() {
        return nodePod?.pod ?? pod;
      },
      set pod(p: KubeObject) {
        if (nodePod) nodePod.pod = p;
      },
      get logs() {
        return nodePod?.logs ?? new Map<string, string>();
      },
      start: () => {
        nodePod = this.startPod(pod, host);
      },
      terminate: async (graceSeconds) => {
        await nodePod?.terminate(graceSeconds);
        this.pods.delete(nodePod!);
        await client.delete(resourcePath('v1', 'pods', namespace, name), { gracePeriodSeconds: 0, preconditions: { uid } }).catch(() => undefined);
      },
      abandon: async (graceMs) => {
        gone = true;
        await nodePod?.abandon(graceMs);
        this.pods.delete(nodePod!);
      },
    };
    return adapter;
  }

  /** Kills every pod (no more status writes), deletes leftover runc containers, networks and the state dir. */
  async stop(graceMs = 2000): Promise<void> {
    liveRuntimes.delete(this);
    await Promise.all([...this.pods].map((p) => p.abandon(graceMs)));
    this.pods.clear();
    await this.router?.stop();
    const list = await run(this.runc, ['--root', this.stateRoot, 'list', '-q']);
    for (const id of list.stdout.split('\n').filter((x) => x !== '')) await run(this.runc, ['--root', this.stateRoot, 'delete', '--force', id]);
    // Overlay mounts left by a crash would keep the dir busy.
    const mounts = await run('sh', ['-c', `grep -F ${JSON.stringify(this.dir)} /proc/self/mounts | cut -d' ' -f2`]);
    for (const m of mounts.stdout.split('\n').filter((x) => x !== '')) await run('umount', ['-l', m]);
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Pod networks still present (for tests asserting cleanup). */
  static liveNetworks(): string[] {
    return liveNetworks();
  }
}
