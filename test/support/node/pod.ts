/**
 * One pod on the runc node: its network namespace, its volumes, its images, its init containers (in order,
 * each to completion) and its containers (all of them, each under runc), probes, restarts and status.
 * The pod reports its status through PodHost.writeStatus; it never talks to an API server itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, chown, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';

import { alwaysPull, ImagePullError, type PulledImage, registryHost, type RegistryCredential } from './images.js';
import { createPodNetwork, type PodNetwork, removePodNetwork } from './network.js';
import type { ServiceRouter } from './services.js';
import { run } from './runc.js';
import type { RuncRuntime } from './runtime.js';
import {
  containerArgv,
  ContainerConfigError,
  DEFAULT_PATH,
  expandVars,
  type Mount,
  resolveCapabilities,
  resolveResources,
  resolveUser,
  runtimeSpec,
} from './spec.js';
import { Naps } from '../k8s/naps.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What the node needs from its kubelet: reading ConfigMaps/Secrets and writing the pod's status. */
export interface PodHost {
  /** A ConfigMap's data or a Secret's data (values decoded), undefined when it does not exist. */
  read(kind: 'configmaps' | 'secrets', namespace: string, name: string): Promise<Record<string, string> | undefined>;
  /** Called with the whole pod status whenever it changes. */
  writeStatus(status: KubeObject): Promise<void>;
  /**
   * A bound token of the pod's ServiceAccount (TokenRequest), for a projected `serviceAccountToken` source (the
   * `kube-api-access-*` volume ServiceAccount admission adds). Without it such volumes are refused.
   */
  token?(namespace: string, serviceAccount: string, request: { audience?: string; expirationSeconds?: number; podName: string; podUid: string }): Promise<string>;
  onLog?(container: string, chunk: string): void;
  /** Service routing and environment for the pod (./services.ts); without it pods reach no ClusterIP. */
  services?: Pick<ServiceRouter, 'attach' | 'detach' | 'environment' | 'nameserver'>;
}

interface ContainerModel {
  spec: KubeObject;
  init: boolean;
  state: KubeObject;
  lastState: KubeObject;
  ready: boolean;
  started: boolean;
  restartCount: number;
  containerID?: string;
  imageID?: string;
  /** The running container's runc id. */
  runcId?: string;
  child?: ChildProcess;
  exited?: Promise<Exit>;
  /** Why the node killed it (liveness), for the message. */
  killedFor?: string;
  mountDir?: string;
  pullFailures?: number;
  /** `runc events` reported an OOM kill in the container's memory cgroup. */
  oomKilled?: boolean;
  /** runc accepted a SIGTERM for the current container. */
  killSent?: boolean;
}

interface Exit {
  exitCode: number;
  reason: string;
  message?: string;
  signal?: number;
  startedAt: string;
  finishedAt: string;
}

const LOG_LIMIT = 2 * 1024 * 1024;

export function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

let healthCtor: grpc.ServiceClientConstructor | undefined;
function healthClient(address: string): grpc.Client & { check(req: { service: string }, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: { status: string }) => void): void } {
  if (!healthCtor) {
    const def = protoLoader.loadSync(protoPath, { keepCase: true, enums: String, defaults: true });
    healthCtor = (grpc.loadPackageDefinition(def) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } }).grpc.health.v1.Health;
  }
  return new healthCtor(address, grpc.credentials.createInsecure()) as never;
}

export class NodePod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  pod: KubeObject;
  readonly logs = new Map<string, string>();
  private net: PodNetwork | undefined;
  private dir: string;
  private phase = 'Pending';
  private readonly startTime = now();
  private readonly conditions = new Map<string, { status: string; lastTransitionTime: string; reason?: string; message?: string }>();
  private readonly models = new Map<string, ContainerModel>();
  private initialized: boolean;
  private stopping = false;
  private readonly naps = new Naps();
  private statusChain: Promise<void> = Promise.resolve();
  private lastPushed = '';
  private runPromise: Promise<void> | undefined;
  private done: Promise<void> | undefined;
  private stopGraceMs = 0;
  /** Every runc container id of this pod starts with it. */
  readonly runcPrefix: string;
  private creds: Array<{ host: string; cred: RegistryCredential }> | undefined;

  constructor(
    private readonly node: RuncRuntime,
    pod: KubeObject,
    private readonly host: PodHost,
  ) {
    this.pod = pod;
    this.uid = pod.metadata.uid;
    this.namespace = pod.metadata.namespace;
    this.name = pod.metadata.name;
    this.dir = path.join(node.dir, 'pods', this.uid);
    this.runcPrefix = `fnr-${createHash('sha256').update(this.uid).digest('hex').slice(0, 10)}-`;
    const hasInit = (pod.spec?.initContainers ?? []).length > 0;
    for (const c of (pod.spec?.initContainers ?? []) as KubeObject[]) this.models.set(c.name, this.model(c, true, 'PodInitializing'));
    for (const c of (pod.spec?.containers ?? []) as KubeObject[]) this.models.set(c.name, this.model(c, false, hasInit ? 'PodInitializing' : 'ContainerCreating'));
    const t = now();
    this.conditions.set('PodReadyToStartContainers', { status: 'False', lastTransitionTime: t });
    this.conditions.set('Initialized', hasInit ? { status: 'False', lastTransitionTime: t, reason: 'ContainersNotInitialized' } : { status: 'True', lastTransitionTime: t });
    this.conditions.set('Ready', { status: 'False', lastTransitionTime: t, reason: 'ContainersNotReady' });
    this.conditions.set('ContainersReady', { status: 'False', lastTransitionTime: t, reason: 'ContainersNotReady' });
    this.conditions.set('PodScheduled', { status: 'True', lastTransitionTime: t });
    this.initialized = !hasInit;
  }

  private model(spec: KubeObject, init: boolean, waiting: string): ContainerModel {
    return { spec, init, state: { waiting: { reason: waiting } }, lastState: {}, ready: false, started: false, restartCount: 0 };
  }

  get ip(): string {
    return this.net?.podIP ?? '';
  }

  /** The pod's network namespace (undefined before the sandbox exists). */
  get netns(): string | undefined {
    return this.net?.netns;
  }

  /** Host pids of the containers' runc processes. */
  get pid(): number | undefined {
    for (const m of this.models.values()) if (m.child && m.child.exitCode === null) return m.child.pid;
    return undefined;
  }

  /** runc ids of the pod's running containers. */
  containerIds(): string[] {
    return [...this.models.values()].map((m) => m.runcId).filter((x): x is string => x !== undefined);
  }

  get restartPolicy(): string {
    return this.pod.spec?.restartPolicy ?? 'Always';
  }

  start(): void {
    this.runPromise = this.run().catch(async (e: unknown) => {
      // Sandbox failures (namespace, volumes) leave the pod Pending with the reason, as a kubelet does.
      this.conditions.set('PodReadyToStartContainers', { status: 'False', lastTransitionTime: now(), reason: 'FailedCreatePodSandBox', message: (e as Error).message });
      await this.pushStatus();
    });
  }

  // ------------------------------------------------------------------------------------------------ status

  private setCondition(type: string, ok: boolean, reason?: string, message?: string): void {
    const value = ok ? 'True' : 'False';
    const current = this.conditions.get(type);
    if (current && current.status === value && current.reason === reason && current.message === message) return;
    const entry: { status: string; lastTransitionTime: string; reason?: string; message?: string } = {
      status: value,
      lastTransitionTime: current && current.status === value ? current.lastTransitionTime : now(),
    };
    if (reason) entry.reason = reason;
    if (message) entry.message = message;
    this.conditions.set(type, entry);
  }

  private containerStatus(m: ContainerModel): KubeObject {
    const s: KubeObject = {
      name: m.spec.name,
      state: m.state,
      lastState: m.lastState,
      ready: m.ready,
      restartCount: m.restartCount,
      image: m.spec.image,
      imageID: m.imageID ?? '',
      started: m.started,
    };
    if (m.containerID) s.containerID = m.containerID;
    return s;
  }

  buildStatus(): KubeObject {
    const mains = [...this.models.values()].filter((m) => !m.init);
    const unready = mains.filter((m) => !m.ready).map((m) => m.spec.name);
    const ok = this.initialized && this.phase === 'Running' && unready.length === 0;
    const message = unready.length > 0 ? `containers with unready status: [${unready.join(' ')}]` : undefined;
    this.setCondition('ContainersReady', ok, ok ? undefined : 'ContainersNotReady', message);
    this.setCondition('Ready', ok, ok ? undefined : 'ContainersNotReady', message);
    if (this.initialized) this.setCondition('Initialized', true);
    else {
      const pending = [...this.models.values()].filter((m) => m.init && !m.state.terminated?.exitCode && m.state.terminated?.reason !== 'Completed').map((m) => m.spec.name);
      this.setCondition('Initialized', false, 'ContainersNotInitialized', `containers with incomplete status: [${pending.join(' ')}]`);
    }
    const order = ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'];
    const status: KubeObject = {
      phase: this.phase,
      conditions: order.map((type) => {
        const c = this.conditions.get(type)!;
        const out: KubeObject = { type, status: c.status, lastProbeTime: null, lastTransitionTime: c.lastTransitionTime };
        if (c.reason) out.reason = c.reason;
        if (c.message) out.message = c.message;
        return out;
      }),
      hostIP: this.net?.hostIP ?? this.node.hostIP,
      hostIPs: [{ ip: this.net?.hostIP ?? this.node.hostIP }],
      startTime: this.startTime,
    };
    if (this.net) {
      status.podIP = this.net.podIP;
      status.podIPs = [{ ip: this.net.podIP }];
    }
    const inits = [...this.models.values()].filter((m) => m.init);
    if (inits.length > 0) status.initContainerStatuses = inits.map((m) => this.containerStatus(m));
    status.containerStatuses = mains.map((m) => this.containerStatus(m));
    status.qosClass = this.pod.status?.qosClass ?? 'BestEffort';
    return status;
  }

  pushStatus(): Promise<void> {
    const status = this.buildStatus();
    this.statusChain = this.statusChain.then(async () => {
      const text = JSON.stringify(status);
      if (text === this.lastPushed) return;
      this.lastPushed = text;
      await this.host.writeStatus(status).catch(() => undefined);
    });
    return this.statusChain;
  }

  // ------------------------------------------------------------------------------------------------ lifecycle

  private async run(): Promise<void> {
    await this.pushStatus();
    await this.setupSandbox();
    if (this.stopping) return;
    this.setCondition('PodReadyToStartContainers', true);
    await this.pushStatus();

    for (const m of [...this.models.values()].filter((x) => x.init)) {
      for (;;) {
        if (this.stopping) return;
        const exit = await this.runOnce(m);
        if (this.stopping) return;
        if (exit === undefined) continue; // waited out a pull or config error
        m.state = { terminated: exit };
        if (exit.exitCode === 0) {
          await this.pushStatus();
          break;
        }
        if (this.restartPolicy === 'Never') {
          this.phase = 'Failed';
          for (const other of this.models.values()) if (!other.init) other.state = { waiting: { reason: 'PodInitializing' } };
          await this.pushStatus();
          return;
        }
        m.restartCount++;
        m.lastState = { terminated: exit };
        m.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${Math.round(this.node.backoff(m.restartCount) / 1000)}s restarting failed container=${m.spec.name} pod=${this.name}_${this.namespace}(${this.uid})` } };
        await this.pushStatus();
        await this.naps.sleep(this.node.backoff(m.restartCount));
      }
    }
    this.initialized = true;
    for (const m of this.models.values()) if (!m.init && m.state.waiting?.reason === 'PodInitializing') m.state = { waiting: { reason: 'ContainerCreating' } };
    await this.pushStatus();
    const mains = [...this.models.values()].filter((x) => !x.init);
    await Promise.all(mains.map((m) => this.runMain(m)));
  }

  private async runMain(m: ContainerModel): Promise<void> {
    for (;;) {
      if (this.stopping) return;
      const exit = await this.runOnce(m);
      if (this.stopping) return;
      if (exit === undefined) continue;
      m.ready = false;
      const restart = this.restartPolicy === 'Always' || (this.restartPolicy === 'OnFailure' && exit.exitCode !== 0);
      if (!restart) {
        m.state = { terminated: exit };
        const mains = [...this.models.values()].filter((x) => !x.init);
        if (mains.every((x) => x.state.terminated)) this.phase = mains.every((x) => x.state.terminated.exitCode === 0) ? 'Succeeded' : 'Failed';
        await this.pushStatus();
        return;
      }
      m.restartCount++;
      m.lastState = { terminated: exit };
      const delay = this.node.backoff(m.restartCount);
      m.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${Math.round(delay / 1000)}s restarting failed container=${m.spec.name} pod=${this.name}_${this.namespace}(${this.uid})` } };
      await this.pushStatus();
      await this.naps.sleep(delay);
    }
  }

  private async setupSandbox(): Promise<void> {
    await mkdir(path.join(this.dir, 'volumes'), { recursive: true });
    await mkdir(path.join(this.dir, 'containers'), { recursive: true });
    this.net = await createPodNetwork();
    if (this.stopping) return;
    await this.host.services?.attach(this.net);
    const fsGroup = this.pod.spec?.securityContext?.fsGroup;
    for (const v of (this.pod.spec?.volumes ?? []) as KubeObject[]) {
      if (v.projected) {
        await this.projectVolume(v);
        continue;
      }
      // A configMap or secret volume is a projected volume of that one source.
      const source = v.configMap ? { configMap: v.configMap } : v.secret ? { secret: { ...v.secret, name: v.secret.secretName } } : undefined;
      if (source) {
        await this.projectVolume({ name: v.name, projected: { defaultMode: (v.configMap ?? v.secret).defaultMode, sources: [source] } });
        continue;
      }
      if (!v.emptyDir) continue; // other volume types are not supported by the test node (docs/node.md)
      const d = path.join(this.dir, 'volumes', v.name);
      await mkdir(d, { recursive: true });
      if (fsGroup !== undefined) {
        await chown(d, 0, Number(fsGroup));
        await chmod(d, 0o2777);
      } else {
        await chmod(d, 0o777);
      }
    }
    const etc = path.join(this.dir, 'etc');
    await mkdir(etc, { recursive: true });
    const hostname = String(this.pod.spec?.hostname ?? this.name).slice(0, 63);
    await writeFile(path.join(etc, 'hostname'), `${hostname}\n`);
    await writeFile(path.join(etc, 'hosts'), `# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${this.net.podIP}\t${hostname}\n`);
    const dns = this.node.dnsServer ?? this.host.services?.nameserver;
    const search = `${this.namespace}.svc.${this.node.clusterDomain} svc.${this.node.clusterDomain} ${this.node.clusterDomain}`;
    await writeFile(path.join(etc, 'resolv.conf'), `${dns ? `nameserver ${dns}\n` : ''}search ${search}\noptions ndots:5\n`);
  }

  /**
   * A `projected` volume, written once at sandbox set-up (a real kubelet also refreshes the token before it
   * expires; the test pods live minutes): `serviceAccountToken` (TokenRequest bound to this pod), `configMap`,
   * `secret` and `downwardAPI` (fieldRef) sources, files mode `defaultMode` (0644), readable by `fsGroup`.
   */
  private async projectVolume(v: KubeObject): Promise<void> {
    const d = path.join(this.dir, 'volumes', v.name);
    await mkdir(d, { recursive: true });
    const fsGroup = this.pod.spec?.securityContext?.fsGroup;
    const mode = Number(v.projected.defaultMode ?? 0o644);
    const files: Array<[string, string, number | undefined]> = [];
    for (const src of (v.projected.sources ?? []) as KubeObject[]) {
      if (src.serviceAccountToken) {
        const sa = String(this.pod.spec?.serviceAccountName ?? 'default');
        if (!this.host.token) throw new ContainerConfigError(`volume "${v.name}": no token source for service account tokens on this node`);
        const t = src.serviceAccountToken;
        files.push([t.path, await this.host.token(this.namespace, sa, { audience: t.audience, expirationSeconds: t.expirationSeconds, podName: this.name, podUid: this.uid }), undefined]);
      } else if (src.configMap || src.secret) {
        const ref = src.configMap ?? src.secret;
        const kind = src.configMap ? 'configmaps' : 'secrets';
        const data = await this.host.read(kind, this.namespace, ref.name);
        if (!data) {
          if (ref.optional === true) continue;
          throw new ContainerConfigError(`volume "${v.name}": ${kind === 'secrets' ? 'secret' : 'configmap'} "${ref.name}" not found`);
        }
        const items = (ref.items as KubeObject[] | undefined) ?? Object.keys(data).map((key): KubeObject => ({ key, path: key }));
        for (const it of items) {
          if (data[it.key] === undefined) throw new ContainerConfigError(`volume "${v.name}": couldn't find key ${it.key} in ${ref.name}`);
          files.push([it.path, data[it.key]!, it.mode]);
        }
      } else if (src.downwardAPI) {
        for (const it of (src.downwardAPI.items ?? []) as KubeObject[]) {
          if (!it.fieldRef) throw new ContainerConfigError(`volume "${v.name}": downwardAPI item ${it.path}: only fieldRef is supported by the test node`);
          files.push([it.path, this.fieldRef(String(it.fieldRef.fieldPath)), it.mode]);
        }
      } else {
        throw new ContainerConfigError(`volume "${v.name}": projected source ${Object.keys(src).join(',')} is not supported by the test node`);
      }
    }
    for (const [rel, content, itemMode] of files) {
      const f = path.join(d, rel);
      if (!f.startsWith(d + path.sep)) throw new ContainerConfigError(`volume "${v.name}": path ${rel} leaves the volume`);
      await mkdir(path.dirname(f), { recursive: true });
      await writeFile(f, content);
      await chmod(f, Number(itemMode ?? mode));
      if (fsGroup !== undefined) await chown(f, 0, Number(fsGroup));
    }
    await chmod(d, 0o755);
  }

  /** The pod's pull credentials for an image's registry, from its imagePullSecrets. */
  private async credentials(image: string): Promise<RegistryCredential[]> {
    if (!this.creds) {
      const hostFor: Array<{ host: string; cred: RegistryCredential }> = [];
      for (const ref of (this.pod.spec?.imagePullSecrets ?? []) as KubeObject[]) {
        const data = await this.host.read('secrets', this.namespace, ref.name).catch(() => undefined);
        const json = data?.['.dockerconfigjson'] ?? data?.['.dockercfg'];
        if (!json) continue;
        try {
          const parsed = JSON.parse(json) as KubeObject;
          const auths: KubeObject = parsed.auths ?? parsed;
          for (const [key, entry] of Object.entries(auths)) {
            let username = entry.username as string | undefined;
            let password = entry.password as string | undefined;
            if (entry.auth) {
              const decoded = Buffer.from(String(entry.auth), 'base64').toString('utf8');
              const i = decoded.indexOf(':');
              username = decoded.slice(0, i);
              password = decoded.slice(i + 1);
            }
            if (username === undefined || password === undefined) continue;
            hostFor.push({ host: key.replace(/^https?:\/\//, '').split('/')[0]!, cred: { username, password } });
          }
        } catch {
          // a malformed Secret gives no credentials, as with a kubelet
        }
      }
      this.creds = hostFor;
    }
    const host = registryHost(image);
    return this.creds.filter((a) => a.host === host).map((a) => a.cred);
  }

  /** Pulls the container's image, retrying with back-off (ErrImagePull, then ImagePullBackOff) until it works. */
  private async pull(m: ContainerModel): Promise<PulledImage | undefined> {
    const image: string = m.spec.image;
    const present = this.node.images.present(image);
    if (present && !alwaysPull(image, m.spec.imagePullPolicy)) return present;
    if (m.spec.imagePullPolicy === 'Never') {
      m.state = { waiting: { reason: 'ErrImageNeverPull', message: `Container image "${image}" is not present with pull policy of Never` } };
      await this.pushStatus();
      await this.naps.sleep(this.node.retryMs);
      return undefined;
    }
    try {
      return await this.node.images.pull(image, await this.credentials(image));
    } catch (e) {
      const message = e instanceof ImagePullError ? e.message : `failed to pull and unpack image "${image}": ${(e as Error).message}`;
      m.state = { waiting: { reason: 'ErrImagePull', message } };
      await this.pushStatus();
      await this.naps.sleep(this.node.retryMs);
      if (this.stopping) return undefined;
      m.pullFailures = (m.pullFailures ?? 0) + 1;
      m.state = { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${image}"` } };
      await this.pushStatus();
      await this.naps.sleep(this.node.backoff(m.pullFailures));
      return undefined;
    }
  }

  private async env(c: KubeObject, image: PulledImage): Promise<Record<string, string>> {
    const env: Record<string, string> = {};
    const imageEnv = image.config.Env ?? [];
    if (!imageEnv.some((e) => e.startsWith('PATH='))) imageEnv.unshift(DEFAULT_PATH);
    for (const e of imageEnv) {
      const i = e.indexOf('=');
      env[i < 0 ? e : e.slice(0, i)] = i < 0 ? '' : e.slice(i + 1);
    }
    env.HOSTNAME = String(this.pod.spec?.hostname ?? this.name);
    // A kubelet's Service variables: below envFrom and env, which may refer to them.
    if (this.host.services) Object.assign(env, await this.host.services.environment(this.namespace, this.pod.spec?.enableServiceLinks !== false));
    for (const from of (c.envFrom ?? []) as KubeObject[]) {
      const ref = from.configMapRef ?? from.secretRef;
      if (!ref) continue;
      const kind = from.configMapRef ? 'configmaps' : 'secrets';
      const data = await this.host.read(kind, this.namespace, ref.name);
      if (!data && ref.optional !== true) throw new ContainerConfigError(`${kind === 'secrets' ? 'secret' : 'configmap'} "${ref.name}" not found`);
      for (const [k, v] of Object.entries(data ?? {})) env[String(from.prefix ?? '') + k] = v;
    }
    for (const e of (c.env ?? []) as KubeObject[]) {
      if (e.valueFrom === undefined) {
        env[e.name] = expandVars(String(e.value ?? ''), env);
        continue;
      }
      const from = e.valueFrom;
      if (from.fieldRef) env[e.name] = this.fieldRef(String(from.fieldRef.fieldPath));
      else if (from.configMapKeyRef || from.secretKeyRef) {
        const ref = from.configMapKeyRef ?? from.secretKeyRef;
        const kind = from.configMapKeyRef ? 'configmaps' : 'secrets';
        const data = await this.host.read(kind, this.namespace, ref.name);
        if (!data) {
          if (ref.optional !== true) throw new ContainerConfigError(`${kind === 'secrets' ? 'secret' : 'configmap'} "${ref.name}" not found`);
        } else if (data[ref.key] !== undefined) env[e.name] = data[ref.key]!;
        else if (ref.optional !== true) throw new ContainerConfigError(`couldn't find key ${ref.key} in ${kind === 'secrets' ? 'Secret' : 'ConfigMap'} ${this.namespace}/${ref.name}`);
      } else if (from.resourceFieldRef) env[e.name] = '0';
    }
    return env;
  }

  private fieldRef(p: string): string {
    const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(p);
    if (m) return String(this.pod.metadata?.[m[1]!]?.[m[2]!] ?? '');
    switch (p) {
      case 'metadata.name':
        return this.name;
      case 'metadata.namespace':
        return this.namespace;
      case 'metadata.uid':
        return this.uid;
      case 'spec.nodeName':
        return String(this.pod.spec?.nodeName ?? '');
      case 'spec.serviceAccountName':
        return String(this.pod.spec?.serviceAccountName ?? '');
      case 'status.podIP':
        return this.ip;
      case 'status.hostIP':
        return this.net?.hostIP ?? '';
      default:
        throw new ContainerConfigError(`unsupported fieldRef ${p}`);
    }
  }

  /**
   * Pulls, configures and runs one container until it exits. Returns undefined after a pull or configuration
   * error (shown in the container's waiting state and waited out), else how it ended.
   */
  private async runOnce(m: ContainerModel): Promise<Exit | undefined> {
    const image = await this.pull(m);
    if (!image || this.stopping) return undefined;
    m.imageID = image.imageID;
    if (m.state.waiting && m.state.waiting.reason !== 'CrashLoopBackOff') m.state = { waiting: { reason: m.init || this.initialized ? 'ContainerCreating' : 'PodInitializing' } };
    const c = m.spec;
    const id = `${this.runcPrefix}${c.name.slice(0, 30)}-${m.restartCount}-${Math.random().toString(36).slice(2, 6)}`;
    const bundle = path.join(this.dir, 'containers', id);
    let config: KubeObject;
    try {
      const env = await this.env(c, image);
      const argv = containerArgv(c, image.config, env);
      const user = resolveUser(this.pod, c, image.config, image.rootfs);
      const mounts: Mount[] = [
        { destination: '/etc/hosts', source: path.join(this.dir, 'etc', 'hosts') },
        { destination: '/etc/hostname', source: path.join(this.dir, 'etc', 'hostname') },
        { destination: '/etc/resolv.conf', source: path.join(this.dir, 'etc', 'resolv.conf') },
      ];
      const podVolumes = (this.pod.spec?.volumes ?? []) as KubeObject[];
      const projected = new Set(podVolumes.filter((v) => v.projected || v.configMap || v.secret).map((v) => v.name as string));
      const volumes = new Set([...podVolumes.filter((v) => v.emptyDir).map((v) => v.name as string), ...projected]);
      for (const vm of (c.volumeMounts ?? []) as KubeObject[]) {
        if (!volumes.has(vm.name)) throw new ContainerConfigError(`volume "${vm.name}" is not an emptyDir, projected, configMap or secret volume of the pod (the test node supports only those)`);
        const source = path.join(this.dir, 'volumes', vm.name, vm.subPath ?? '');
        if (vm.subPath) await mkdir(source, { recursive: true });
        // Projected (and configMap, secret) volumes are read-only whatever the mount says, as a kubelet mounts them.
        mounts.push({ destination: vm.mountPath, source, readOnly: vm.readOnly === true || projected.has(vm.name) });
      }
      const sc: KubeObject = c.securityContext ?? {};
      if (sc.privileged === true) throw new ContainerConfigError('privileged containers are not supported by the test node');
      config = runtimeSpec({
        argv,
        env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        cwd: c.workingDir || image.config.WorkingDir || '/',
        user,
        capabilities: resolveCapabilities(c),
        noNewPrivileges: sc.allowPrivilegeEscalation === false,
        readonlyRootfs: sc.readOnlyRootFilesystem === true,
        hostname: String(this.pod.spec?.hostname ?? this.name).slice(0, 63),
        netnsPath: this.net!.nsPath,
        mounts,
        resources: resolveResources(c),
        cgroupsPath: id,
      });
    } catch (e) {
      const reason = e instanceof ContainerConfigError ? 'CreateContainerConfigError' : 'CreateContainerError';
      m.state = { waiting: { reason, message: (e as Error).message } };
      await this.pushStatus();
      await this.naps.sleep(this.node.retryMs);
      return undefined;
    }
    // The container's root: an overlay over the image's unpacked layers (the image stays untouched).
    const rootfs = path.join(bundle, 'rootfs');
    for (const d of ['rootfs', 'upper', 'work']) await mkdir(path.join(bundle, d), { recursive: true });
    const mounted = await run('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${image.rootfs},upperdir=${path.join(bundle, 'upper')},workdir=${path.join(bundle, 'work')}`, rootfs]);
    if (mounted.code !== 0) {
      m.state = { waiting: { reason: 'CreateContainerError', message: `overlay mount failed: ${mounted.stderr.trim()}` } };
      await this.pushStatus();
      await this.naps.sleep(this.node.retryMs);
      await rm(bundle, { recursive: true, force: true });
      return undefined;
    }
    m.mountDir = rootfs;
    await writeFile(path.join(bundle, 'config.json'), JSON.stringify(config));
    const logFile = path.join(bundle, 'runc.log');
    const startedAt = now();
    const child = spawn(this.node.runc, ['--root', this.node.stateRoot, '--log', logFile, '--log-format', 'json', 'run', '--bundle', bundle, id], { stdio: ['ignore', 'pipe', 'pipe'] });
    m.child = child;
    m.runcId = id;
    m.killedFor = undefined;
    m.oomKilled = false;
    m.killSent = false;
    const onData = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      const next = (this.logs.get(c.name) ?? '') + text;
      this.logs.set(c.name, next.length > LOG_LIMIT ? next.slice(next.length - LOG_LIMIT) : next);
      this.host.onLog?.(c.name, text);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    m.exited = new Promise<Exit>((resolve) => {
      child.once('error', (e) => resolve({ exitCode: 128, reason: 'StartError', message: e.message, startedAt, finishedAt: now() }));
      child.once('close', (code) => {
        void (async () => {
          const finishedAt = now();
          const log = await readFile(logFile, 'utf8').catch(() => '');
          const errors = log
            .split('\n')
            .filter((l) => l.includes('"level":"error"'))
            .map((l) => {
              try {
                return String((JSON.parse(l) as { msg: string }).msg);
              } catch {
                return l;
              }
            });
          if (errors.length > 0 && !m.started) {
            resolve({ exitCode: 128, reason: 'StartError', message: errors.join('; '), startedAt, finishedAt });
            return;
          }
          const exitCode = code ?? 128 + 9;
          const exit: Exit = { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt, finishedAt };
          if (exitCode > 128 && exitCode < 160) exit.signal = exitCode - 128;
          if (m.killedFor) exit.message = m.killedFor;
          if (m.oomKilled && exitCode === 137) exit.reason = 'OOMKilled';
          resolve(exit);
        })();
      });
    });
    // Running once runc reports the container process started (or it already ended).
    const running = await this.waitRunning(id, m.exited);
    // Deleted while the container was being created: the kill in terminate()/abandon() may have come too early.
    if (running && this.stopping && !m.killSent) void this.kill(m, this.stopGraceMs);
    let events: ChildProcess | undefined;
    if (running && config.linux?.resources?.memory) {
      // OOM kills are only visible while the cgroup exists: watch them as they happen.
      events = spawn(this.node.runc, ['--root', this.node.stateRoot, 'events', id], { stdio: ['ignore', 'pipe', 'ignore'] });
      events.stdout!.on('data', (d: Buffer) => {
        if (d.toString('utf8').includes('"type":"oom"')) m.oomKilled = true;
      });
      events.on('error', () => undefined);
    }
    if (running) {
      m.state = { running: { startedAt } };
      m.started = true;
      m.containerID = `runc://${id}`;
      if (!m.init) {
        this.phase = 'Running';
        m.ready = c.readinessProbe === undefined;
      }
      await this.pushStatus();
      if (!m.init) void this.probeLoops(m);
    }
    const exit = await m.exited;
    events?.kill('SIGKILL');
    m.started = false;
    m.ready = false;
    await run(this.node.runc, ['--root', this.node.stateRoot, 'delete', '--force', id]);
    await run('umount', ['-l', rootfs]);
    await rm(bundle, { recursive: true, force: true }).catch(() => undefined);
    m.child = undefined;
    m.runcId = undefined;
    m.mountDir = undefined;
    return exit;
  }

  private async waitRunning(id: string, exited: Promise<Exit>): Promise<boolean> {
    let ended = false;
    void exited.then(() => (ended = true));
    for (;;) {
      if (ended) {
        const e = await exited;
        return e.reason !== 'StartError';
      }
      const r = await run(this.node.runc, ['--root', this.node.stateRoot, 'state', id]);
      if (r.code === 0 && /"status":\s*"running"/.test(r.stdout)) return true;
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  // ------------------------------------------------------------------------------------------------ probes

  private async probeOnce(m: ContainerModel, probe: KubeObject): Promise<boolean> {
    const timeoutMs = Number(probe.timeoutSeconds ?? 1) * 1000;
    const portOf = (p: unknown): number => {
      if (typeof p === 'number') return p;
      const named = ((m.spec.ports ?? []) as KubeObject[]).find((x) => x.name === p);
      return Number(named?.containerPort ?? p);
    };
    if (probe.tcpSocket) {
      const port = portOf(probe.tcpSocket.port);
      return new Promise((resolve) => {
        const sock = connect({ host: this.ip, port, timeout: timeoutMs });
        sock.once('connect', () => {
          sock.destroy();
          resolve(true);
        });
        sock.once('timeout', () => {
          sock.destroy();
          resolve(false);
        });
        sock.once('error', () => resolve(false));
      });
    }
    if (probe.grpc) {
      const client = healthClient(`${this.ip}:${portOf(probe.grpc.port)}`);
      try {
        return await new Promise<boolean>((resolve) =>
          client.check({ service: String(probe.grpc.service ?? '') }, { deadline: Date.now() + timeoutMs }, (err, res) => resolve(!err && res?.status === 'SERVING')),
        );
      } finally {
        client.close();
      }
    }
    if (probe.exec) {
      if (!m.runcId) return false;
      const r = await run(this.node.runc, ['--root', this.node.stateRoot, 'exec', m.runcId, ...((probe.exec.command ?? []) as string[])], { timeoutMs });
      return r.code === 0;
    }
    if (probe.httpGet) {
      const port = portOf(probe.httpGet.port);
      return new Promise((resolve) => {
        // scheme HTTPS: TLS without verifying the certificate, as a kubelet does
        const https = String(probe.httpGet.scheme ?? 'HTTP').toUpperCase() === 'HTTPS';
        const sock = https ? tlsConnect({ host: this.ip, port, timeout: timeoutMs, rejectUnauthorized: false }) : connect({ host: this.ip, port, timeout: timeoutMs });
        sock.once(https ? 'secureConnect' : 'connect', () => sock.end(`GET ${probe.httpGet.path ?? '/'} HTTP/1.0\r\nHost: ${this.ip}\r\n\r\n`));
        let head = '';
        sock.on('data', (d: Buffer) => (head += d.toString('latin1')));
        sock.once('close', () => resolve(/^HTTP\/1\.[01] [23]\d\d/.test(head)));
        sock.once('timeout', () => sock.destroy());
        sock.once('error', () => resolve(false));
      });
    }
    return true;
  }

  /** Readiness and liveness loops, each with its own initialDelaySeconds/periodSeconds/thresholds, while `m` runs. */
  private async probeLoops(m: ContainerModel): Promise<void> {
    const child = m.child;
    const alive = (): boolean => !this.stopping && m.child === child && child !== undefined && child.exitCode === null;
    const loop = async (probe: KubeObject, kind: 'readiness' | 'liveness'): Promise<void> => {
      await this.naps.sleep(Number(probe.initialDelaySeconds ?? 0) * 1000);
      const period = Number(probe.periodSeconds ?? 10) * 1000;
      const failureThreshold = Number(probe.failureThreshold ?? 3);
      const successThreshold = Number(probe.successThreshold ?? 1);
      let failures = 0;
      let successes = 0;
      while (alive()) {
        const ok = await this.probeOnce(m, probe);
        if (!alive()) return;
        if (ok) {
          failures = 0;
          successes++;
          if (kind === 'readiness' && successes >= successThreshold && !m.ready) {
            m.ready = true;
            await this.pushStatus();
          }
        } else {
          successes = 0;
          failures++;
          if (failures >= failureThreshold) {
            if (kind === 'readiness' && m.ready) {
              m.ready = false;
              await this.pushStatus();
            } else if (kind === 'liveness') {
              m.killedFor = `Container ${m.spec.name} failed liveness probe, will be restarted`;
              await this.kill(m, Number(this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000);
              return;
            }
          }
        }
        await this.naps.sleep(period);
      }
    };
    const loops: Array<Promise<void>> = [];
    if (m.spec.readinessProbe) loops.push(loop(m.spec.readinessProbe, 'readiness'));
    if (m.spec.livenessProbe) loops.push(loop(m.spec.livenessProbe, 'liveness'));
    await Promise.all(loops);
  }

  /** SIGTERM, then SIGKILL after graceMs, to one container. */
  private async kill(m: ContainerModel, graceMs: number): Promise<void> {
    const id = m.runcId;
    const exited = m.exited;
    if (!id || !exited) return;
    const term = await run(this.node.runc, ['--root', this.node.stateRoot, 'kill', id, 'TERM']);
    if (term.code === 0) m.killSent = true;
    const timer = setTimeout(() => void run(this.node.runc, ['--root', this.node.stateRoot, 'kill', '--all', id, 'KILL']), Math.max(0, graceMs));
    await exited;
    clearTimeout(timer);
  }

  // ------------------------------------------------------------------------------------------------ ending

  /** Graceful deletion: stops every container within the grace period and reports the final status. */
  terminate(graceSeconds: number): Promise<void> {
    this.done ??= (async () => {
      this.stopping = true;
      this.stopGraceMs = graceSeconds * 1000;
      this.naps.wakeAll();
      const running = [...this.models.values()].filter((m) => m.runcId);
      const exits = new Map<ContainerModel, Exit>();
      await Promise.all(
        running.map(async (m) => {
          await this.kill(m, graceSeconds * 1000);
          exits.set(m, await m.exited!);
        }),
      );
      await this.runPromise;
      for (const m of this.models.values()) {
        m.ready = false;
        const exit = exits.get(m);
        if (exit) m.state = { terminated: exit };
        else if (m.state.running) m.state = { terminated: { exitCode: 0, reason: 'Completed', startedAt: m.state.running.startedAt, finishedAt: now() } };
      }
      const mains = [...this.models.values()].filter((m) => !m.init);
      if (this.phase !== 'Succeeded' && this.phase !== 'Failed') this.phase = mains.every((m) => m.state.terminated?.exitCode === 0) ? 'Succeeded' : 'Failed';
      await this.pushStatus();
      await this.cleanup();
    })();
    return this.done;
  }

  /** The pod is gone (or the node stops): kill everything within graceMs, no more status. */
  abandon(graceMs: number): Promise<void> {
    this.done ??= (async () => {
      this.stopping = true;
      this.stopGraceMs = graceMs;
      this.naps.wakeAll();
      await Promise.all([...this.models.values()].filter((m) => m.runcId).map((m) => this.kill(m, graceMs)));
      await this.runPromise;
      await this.statusChain;
      await this.cleanup();
    })();
    return this.done;
  }

  private async cleanup(): Promise<void> {
    await this.statusChain;
    if (this.net) {
      await this.host.services?.detach(this.net);
      await removePodNetwork(this.net);
    }
    await rm(this.dir, { recursive: true, force: true }).catch(() => undefined);
  }
}
