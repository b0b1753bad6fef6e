/**
 * LocalKubelet: watches pods in an API server (over HTTP, like a real kubelet), schedules them onto its node,
 * gives each pod its own loopback address, runs the pod's main container as a local process and reports status.
 * See README.md in this directory for the contract.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClusterEndpoint } from './client.js';
import { KubeRequestError, KubeRestClient, resourcePath } from './client.js';
import { allocateLoopbackAddress, DEFAULT_POD_IP_PREFIX } from './loopback.js';
import { Reflector } from './reflector.js';
import type { KubeObject } from './status.js';
import type { KubeletPod, RuncRuntime } from '../node/runtime.js';
import { Naps } from './naps.js';

/** The API's timestamp format: RFC 3339 in whole seconds. */
function nowTimestamp(): string {
  return new Date(Math.floor(Date.now() / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** What an image "contains": the entrypoint and defaults a container of that image runs with. */
export interface ImageEntry {
  /** The image's ENTRYPOINT; used when the container has no `command`. */
  command?: string[];
  /** The image's CMD; used when the container has neither `command` nor `args`. */
  args?: string[];
  /** Working directory of the process. Default: a fresh temp dir per pod. */
  workdir?: string;
  /** Environment the image sets (the container's env overrides it). */
  env?: Record<string, string>;
  /** Path rewrites for this image only, on top of the kubelet's commandMap. */
  commandMap?: Record<string, string | string[]>;
  /** Every pull of this image fails with this message (ErrImagePull, then ImagePullBackOff): an image the node cannot pull. */
  pullError?: string;
}

/**
 * An image mapping: an ImageEntry, or `'skip'`. An init container whose image maps to `'skip'` counts as completed
 * at once; a main container whose image maps to `'skip'` is reported running (and ready) without a process.
 */
export type ImageMapping = ImageEntry | 'skip';

export interface LocalKubeletOptions {
  /** The API server: its URL (+ token and CA for https). */
  api: ClusterEndpoint;
  /** Default `local-node`. */
  nodeName?: string;
  /**
   * Images this node can "pull". Keys are image references; a key ending in `*` matches every image starting with
   * the text before it (`'*'` matches all). An image that matches nothing fails with ErrImagePull/ImagePullBackOff
   * unless `pullAnyImage` is set.
   */
  imageMap?: Record<string, ImageMapping>;
  /** Every token of command/args (and exec probe commands) equal to a key is replaced by the value(s). */
  commandMap?: Record<string, string | string[]>;
  /** Treat unmapped images as pullable (with an empty ImageEntry). Default false. */
  pullAnyImage?: boolean;
  /** Extra pull check, e.g. on imagePullSecrets; throw to fail the pull with ErrImagePull and the error's message. */
  onPullImage?: (image: string, pod: KubeObject) => void | Promise<void>;
  /** Bind unscheduled pods to this node (default true). With false, pods stay Pending unless they name the node. */
  schedule?: boolean;
  /** First three octets of pod addresses, e.g. `127.0.0`. Default: a random `127.A.B` per process (see loopback.ts). */
  podIpPrefix?: string;
  /** Pass the test process's environment to pod processes (default true), under the pod's own variables. */
  inheritEnv?: boolean;
  /** Readiness probing interval until a container first becomes ready. Default 50 ms. */
  probeIntervalMs?: number;
  /** Readiness probing interval once ready. Default 500 ms. */
  readyProbeIntervalMs?: number;
  /** First restart back-off; doubles per restart up to maxRestartBackoffMs. Defaults 200 ms and 5000 ms. */
  restartBackoffMs?: number;
  maxRestartBackoffMs?: number;
  /** Retry interval for failed image pulls and missing ConfigMaps/Secrets. Default 500 ms. */
  retryMs?: number;
  /** Caps a pod's termination grace period (seconds). Default: the pod's own value. */
  maxGracePeriodSeconds?: number;
  /** How long stop() waits after SIGTERM before SIGKILL. Default 2000 ms. */
  stopGraceMs?: number;
  /**
   * Register a Node object named nodeName (status Ready, addresses, capacity) and renew its Lease in
   * kube-node-lease every 10 s, as a real kubelet does; for a real API server (test/support/cluster). Default false.
   */
  registerNode?: boolean;
  /** Receives every chunk a pod process writes to stdout/stderr. */
  onLog?: (pod: { namespace: string; name: string }, container: string, chunk: string) => void;
  /**
   * Who runs the pods: `'process'` (default: host processes, as described in README.md) or a container runtime
   * (test/support/node: real images under runc, a network namespace per pod). With a container runtime, a pod
   * whose every image (init and main containers) is explicitly in imageMap still runs as host processes (so suites
   * that map images keep working on a runc node); every other pod runs under the container runtime.
   */
  runtime?: 'process' | Pick<RuncRuntime, 'kubeletPod'>;
  /**
   * Serve the kubelet API's container logs (`GET /containerLogs/{namespace}/{pod}/{container}`, with `tailLines`,
   * `limitBytes` and `follow`) over TLS on 127.0.0.1 and a free port, published in the Node's
   * status.daemonEndpoints.kubeletEndpoint (with registerNode), so that kube-apiserver's `pods/log` (and
   * `kubectl logs`) reach it. Clients must present a certificate signed by `clientCa` whose CN is one of
   * `allowedClients` (kube-apiserver's --kubelet-client-certificate); anything else is refused, as a kubelet
   * with webhook authentication refuses anonymous requests.
   */
  server?: { cert: string; key: string; clientCa: string; allowedClients: string[] };
}

interface ExitInfo {
  exitCode: number;
  signal?: string;
  reason: string;
  message?: string;
  startedAt: string;
  finishedAt: string;
}

interface ContainerModel {
  name: string;
  image: string;
  state: KubeObject;
  lastState: KubeObject;
  ready: boolean;
  started: boolean;
  restartCount: number;
  containerID?: string;
}

type ProbePlan =
  | { kind: 'none' }
  | { kind: 'tcp'; port: number }
  | { kind: 'http'; port: number; path: string }
  | { kind: 'exec'; argv: string[] };

const SIGNAL_NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };
const LOG_LIMIT = 2 * 1024 * 1024;

/** Every process group any kubelet in this process started; killed on process exit as a last resort. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;
function trackGroup(pid: number): void {
  liveGroups.add(pid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const pgid of liveGroups) {
        try {
          process.kill(-pgid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
}

/**
 * Signals the process group of a container process (every one is spawned detached, so it leads its
 * own group). ESRCH means the group is gone; there is deliberately no fallback to the bare pid:
 * once the leader has been reaped its pid can be recycled (pid_max is 32768 here and the suites
 * start tens of thousands of processes), and a late timer would then kill an unrelated process.
 */
function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

function imageMatches(pattern: string, image: string): boolean {
  return pattern.endsWith('*') ? image.startsWith(pattern.slice(0, -1)) : pattern === image;
}

/** Expands `$(VAR)` references as the kubelet does; `$$` escapes a `$`. */
export function expandVars(text: string, env: Record<string, string | undefined>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    const value = name !== undefined ? env[name] : undefined;
    return value !== undefined ? value : match;
  });
}

class ConfigError extends Error {}

/** One pod's lifecycle on the local node. */
class PodRuntime {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  pod: KubeObject;
  readonly ip: string;
  private dir: string | undefined;
  private phase = 'Pending';
  private reason: string | undefined;
  private readonly startTime = nowTimestamp();
  private readonly conditions = new Map<string, { status: string; lastTransitionTime: string; reason?: string; message?: string }>();
  private readonly containers = new Map<string, ContainerModel>();
  private readonly initContainers = new Map<string, ContainerModel>();
  private readonly mainName: string;
  private proc: ChildProcess | undefined;
  private procExit: Promise<ExitInfo> | undefined;
  private initialized = false;
  private terminating = false;
  /** Removed from the API (or the kubelet is stopping): no more API writes. */
  private gone = false;
  private readonly naps = new Naps();
  private killTimer: NodeJS.Timeout | undefined;
  private killDeadline = Infinity;
  private statusChain: Promise<void> = Promise.resolve();
  private lastPushed = '';
  private runPromise: Promise<void> | undefined;
  private terminationDone: Promise<void> | undefined;
  readonly logs = new Map<string, string>();

  constructor(
    private readonly kubelet: LocalKubelet,
    pod: KubeObject,
    ip: string,
  ) {
    this.pod = pod;
    this.uid = pod.metadata.uid;
    this.namespace = pod.metadata.namespace;
    this.name = pod.metadata.name;
    this.ip = ip;
    const specContainers: KubeObject[] = pod.spec?.containers ?? [];
    this.mainName = (specContainers.find((c) => c.name === 'function') ?? specContainers[0])?.name ?? '';
    for (const c of specContainers) this.containers.set(c.name, this.model(c));
    for (const c of (pod.spec?.initContainers ?? []) as KubeObject[]) this.initContainers.set(c.name, this.model(c));
    const now = nowTimestamp();
    const hasInit = this.initContainers.size > 0;
    this.conditions.set('PodReadyToStartContainers', { status: 'True', lastTransitionTime: now });
    this.conditions.set('Initialized', hasInit ? { status: 'False', lastTransitionTime: now, reason: 'ContainersNotInitialized' } : { status: 'True', lastTransitionTime: now });
    this.conditions.set('Ready', { status: 'False', lastTransitionTime: now, reason: 'ContainersNotReady' });
    this.conditions.set('ContainersReady', { status: 'False', lastTransitionTime: now, reason: 'ContainersNotReady' });
    this.conditions.set('PodScheduled', { status: 'True', lastTransitionTime: now });
    this.initialized = !hasInit;
  }

  private model(c: KubeObject): ContainerModel {
    return {
      name: c.name,
      image: c.image,
      state: { waiting: { reason: this.initContainers.size > 0 ? 'PodInitializing' : 'ContainerCreating' } },
      lastState: {},
      ready: false,
      started: false,
      restartCount: 0,
    };
  }

  get pid(): number | undefined {
    return this.proc?.exitCode === null && this.proc.signalCode === null ? this.proc.pid : undefined;
  }

  get restartPolicy(): string {
    return this.pod.spec?.restartPolicy ?? 'Always';
  }

  start(): void {
    this.runPromise = this.run().catch(() => undefined);
  }

  // ------------------------------------------------------------------------------------------------ status

  private setCondition(type: string, status: boolean, reason?: string, message?: string): void {
    const value = status ? 'True' : 'False';
    const current = this.conditions.get(type);
    if (current && current.status === value && current.reason === reason) return;
    const entry: { status: string; lastTransitionTime: string; reason?: string; message?: string } = {
      status: value,
      lastTransitionTime: current && current.status === value ? current.lastTransitionTime : nowTimestamp(),
    };
    if (reason) entry.reason = reason;
    if (message) entry.message = message;
    this.conditions.set(type, entry);
  }

  private refreshReadiness(): void {
    const all = [...this.containers.values()];
    const unready = all.filter((c) => !c.ready).map((c) => c.name);
    const ok = this.initialized && this.phase === 'Running' && unready.length === 0;
    const message = unready.length > 0 ? `containers with unready status: [${unready.join(' ')}]` : undefined;
    this.setCondition('ContainersReady', ok, ok ? undefined : 'ContainersNotReady', ok ? undefined : message);
    this.setCondition('Ready', ok, ok ? undefined : 'ContainersNotReady', ok ? undefined : message);
    if (this.initialized) this.setCondition('Initialized', true);
  }

  private containerStatus(c: ContainerModel): KubeObject {
    const status: KubeObject = {
      name: c.name,
      state: c.state,
      lastState: c.lastState,
      ready: c.ready,
      restartCount: c.restartCount,
      image: c.image,
      imageID: `${c.image.split('@')[0]}@sha256:${createHash('sha256').update(c.image).digest('hex')}`,
      started: c.started,
    };
    if (c.containerID) status.containerID = c.containerID;
    return status;
  }

  buildStatus(): KubeObject {
    this.refreshReadiness();
    const order = ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'];
    const conditions = order.map((type) => {
      const c = this.conditions.get(type)!;
      const out: KubeObject = { type, status: c.status, lastProbeTime: null, lastTransitionTime: c.lastTransitionTime };
      if (c.reason) out.reason = c.reason;
      if (c.message) out.message = c.message;
      return out;
    });
    const status: KubeObject = {
      phase: this.phase,
      conditions,
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP: this.ip,
      podIPs: [{ ip: this.ip }],
      startTime: this.startTime,
    };
    if (this.reason) status.reason = this.reason;
    if (this.initContainers.size > 0) status.initContainerStatuses = [...this.initContainers.values()].map((c) => this.containerStatus(c));
    status.containerStatuses = [...this.containers.values()].map((c) => this.containerStatus(c));
    status.qosClass = this.pod.status?.qosClass ?? 'BestEffort';
    return status;
  }

  /** Queues a status write (JSON patch replacing /status), skipping writes that change nothing. */
  pushStatus(): Promise<void> {
    if (this.gone) return this.statusChain;
    const status = this.buildStatus();
    this.statusChain = this.statusChain.then(async () => {
      if (this.gone) return;
      const text = JSON.stringify(status);
      if (text === this.lastPushed) return;
      try {
        await this.kubelet.client.patch(resourcePath('v1', 'pods', this.namespace, this.name, 'status'), [
          { op: 'test', path: '/metadata/uid', value: this.uid },
          { op: 'replace', path: '/status', value: status },
        ], 'json');
        this.lastPushed = text;
      } catch {
        // The pod may be gone, replaced or the server stopping: the watch will tell.
      }
    });
    return this.statusChain;
  }

  private get stopping(): boolean {
    return this.terminating || this.gone;
  }

  // ------------------------------------------------------------------------------------------------ lifecycle

  private async run(): Promise<void> {
    await this.pushStatus();
    const specInit: KubeObject[] = this.pod.spec?.initContainers ?? [];
    const main: KubeObject | undefined = (this.pod.spec?.containers ?? []).find((c: KubeObject) => c.name === this.mainName);
    if (!main) return;

    // "Pull" every image first.
    for (const c of [...specInit, main]) {
      const model = this.initContainers.get(c.name) ?? this.containers.get(c.name)!;
      let attempts = 0;
      for (;;) {
        if (this.stopping) return;
        const error = await this.kubelet.pull(c.image, this.pod);
        if (!error) break;
        model.state = { waiting: { reason: attempts === 0 ? 'ErrImagePull' : 'ImagePullBackOff', message: error } };
        attempts++;
        await this.pushStatus();
        await this.naps.sleep(this.kubelet.retryMs);
      }
      if (model.state.waiting?.reason === 'ErrImagePull' || model.state.waiting?.reason === 'ImagePullBackOff') {
        model.state = { waiting: { reason: this.initContainers.has(c.name) ? 'PodInitializing' : 'ContainerCreating' } };
      }
    }

    // Init containers, in order, each to completion.
    for (const c of specInit) {
      const model = this.initContainers.get(c.name)!;
      if (this.kubelet.mappingFor(c.image) === 'skip') {
        const now = nowTimestamp();
        model.state = { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } };
        await this.pushStatus();
        continue;
      }
      for (;;) {
        if (this.stopping) return;
        const exit = await this.runContainer(c, model);
        if (this.stopping) return;
        if (exit === undefined) continue; // config error, retried
        if (exit.exitCode === 0) {
          model.state = { terminated: { ...this.terminatedState(exit) } };
          await this.pushStatus();
          break;
        }
        model.state = { terminated: this.terminatedState(exit) };
        if (this.restartPolicy === 'Never') {
          this.phase = 'Failed';
          await this.pushStatus();
          return;
        }
        model.restartCount++;
        model.lastState = { terminated: this.terminatedState(exit) };
        model.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off restarting failed container ${c.name} in pod ${this.name}_${this.namespace}(${this.uid})` } };
        await this.pushStatus();
        await this.naps.sleep(this.kubelet.backoff(model.restartCount));
      }
    }
    this.initialized = true;
    for (const m of this.containers.values()) if (m.state.waiting?.reason === 'PodInitializing') m.state = { waiting: { reason: 'ContainerCreating' } };

    // The main container (other containers are reported running and ready, without a process).
    const model = this.containers.get(this.mainName)!;
    const skip = this.kubelet.mappingFor(main.image) === 'skip';
    for (;;) {
      if (this.stopping) return;
      if (skip) {
        this.markRunning(model, undefined);
        model.ready = true;
        await this.pushStatus();
        return;
      }
      const exit = await this.runContainer(main, model, true);
      if (this.stopping) return;
      if (exit === undefined) continue;
      model.ready = false;
      for (const other of this.containers.values()) if (other !== model) other.ready = false;
      const restart = this.restartPolicy === 'Always' || (this.restartPolicy === 'OnFailure' && exit.exitCode !== 0);
      if (!restart) {
        model.state = { terminated: this.terminatedState(exit) };
        for (const other of this.containers.values()) {
          if (other !== model) other.state = { terminated: { exitCode: 0, reason: 'Completed', startedAt: exit.startedAt, finishedAt: exit.finishedAt } };
        }
        this.phase = exit.exitCode === 0 ? 'Succeeded' : 'Failed';
        await this.pushStatus();
        return;
      }
      model.restartCount++;
      model.lastState = { terminated: this.terminatedState(exit) };
      model.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off restarting failed container ${main.name} in pod ${this.name}_${this.namespace}(${this.uid})` } };
      await this.pushStatus();
      await this.naps.sleep(this.kubelet.backoff(model.restartCount));
    }
  }

  private terminatedState(exit: ExitInfo): KubeObject {
    const t: KubeObject = { exitCode: exit.exitCode, reason: exit.reason, startedAt: exit.startedAt, finishedAt: exit.finishedAt };
    if (exit.signal) t.signal = SIGNAL_NUMBERS[exit.signal] ?? 0;
    if (exit.message) t.message = exit.message;
    return t;
  }

  private markRunning(model: ContainerModel, pid: number | undefined): void {
    model.state = { running: { startedAt: nowTimestamp() } };
    model.started = true;
    model.containerID = `local://${pid ?? 'none'}`;
    this.phase = 'Running';
    for (const other of this.containers.values()) {
      if (other !== model && !other.state.running) {
        other.state = { running: { startedAt: nowTimestamp() } };
        other.started = true;
        other.ready = true;
      }
    }
  }

  /**
   * Runs one container process until it exits. Returns undefined after a configuration error (which is shown as
   * CreateContainerConfigError and waited out), else how the process ended.
   */
  private async runContainer(spec: KubeObject, model: ContainerModel, isMain = false): Promise<ExitInfo | undefined> {
    let argv: string[];
    let env: Record<string, string>;
    let cwd: string;
    try {
      env = await this.buildEnv(spec);
      argv = this.kubelet.argvFor(spec, env);
      cwd = await this.workdir(spec);
    } catch (e) {
      const reason = e instanceof ConfigError ? 'CreateContainerConfigError' : 'CreateContainerError';
      model.state = { waiting: { reason, message: (e as Error).message } };
      await this.pushStatus();
      await this.naps.sleep(this.kubelet.retryMs);
      return undefined;
    }
    if (this.stopping) return undefined;
    const startedAt = nowTimestamp();
    let child: ChildProcess;
    try {
      child = spawn(argv[0]!, argv.slice(1), { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      return { exitCode: 128, reason: 'StartError', message: (e as Error).message, startedAt, finishedAt: nowTimestamp() };
    }
    this.proc = child;
    if (child.pid) trackGroup(child.pid);
    const onData = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      const prev = this.logs.get(spec.name) ?? '';
      const next = prev + text;
      this.logs.set(spec.name, next.length > LOG_LIMIT ? next.slice(next.length - LOG_LIMIT) : next);
      this.kubelet.emitLog(this, spec.name, text);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    const exitPromise = new Promise<ExitInfo>((resolve) => {
      let spawned = false;
      child.once('spawn', () => {
        spawned = true;
      });
      child.once('error', (e) => {
        if (spawned) return;
        resolve({ exitCode: 128, reason: 'StartError', message: e.message, startedAt, finishedAt: nowTimestamp() });
      });
      child.once('exit', (code, signal) => {
        const exitCode = code ?? (signal ? 128 + (SIGNAL_NUMBERS[signal] ?? 0) : 0);
        const info: ExitInfo = { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', startedAt, finishedAt: nowTimestamp() };
        if (signal) info.signal = signal;
        resolve(info);
      });
    });
    this.procExit = exitPromise.then((info) => {
      // Nothing of the container may outlive it: kill the rest of its process group.
      killGroup(child.pid, 'SIGKILL');
      if (child.pid) liveGroups.delete(child.pid);
      return info;
    });
    const spawnedOk = await Promise.race([
      new Promise<boolean>((resolve) => child.once('spawn', () => resolve(true))),
      exitPromise.then(() => false),
    ]);
    if (spawnedOk) {
      if (isMain) {
        this.markRunning(model, child.pid);
        model.ready = false;
        await this.pushStatus();
        void this.probeLoop(spec, model, child);
      } else {
        model.state = { running: { startedAt } };
        model.started = true;
        model.containerID = `local://${child.pid}`;
        await this.pushStatus();
      }
    }
    const exit = await this.procExit;
    if (this.proc === child) this.proc = undefined;
    return exit;
  }

  private async workdir(spec: KubeObject): Promise<string> {
    const mapping = this.kubelet.mappingFor(spec.image);
    if (mapping && mapping !== 'skip' && mapping.workdir) return mapping.workdir;
    this.dir ??= await mkdtemp(join(tmpdir(), `fnr-pod-${this.name.slice(0, 40)}-`));
    return this.dir;
  }

  private fieldRef(path: string): string {
    const pod = this.pod;
    const labelMatch = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
    if (labelMatch) return String(pod.metadata?.[labelMatch[1]!]?.[labelMatch[2]!] ?? '');
    switch (path) {
      case 'metadata.name':
        return this.name;
      case 'metadata.namespace':
        return this.namespace;
      case 'metadata.uid':
        return this.uid;
      case 'spec.nodeName':
        return this.kubelet.nodeName;
      case 'spec.serviceAccountName':
        return String(pod.spec?.serviceAccountName ?? 'default');
      case 'status.podIP':
      case 'status.podIPs':
        return this.ip;
      case 'status.hostIP':
      case 'status.hostIPs':
        return '127.0.0.1';
      default:
        throw new ConfigError(`unsupported fieldRef path ${path}`);
    }
  }

  private async lookup(kind: 'configmaps' | 'secrets', name: string, optional: boolean): Promise<Record<string, string> | undefined> {
    try {
      const o = await this.kubelet.client.get(resourcePath('v1', kind, this.namespace, name));
      if (kind === 'secrets') {
        return Object.fromEntries(Object.entries((o.data ?? {}) as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
      }
      return { ...((o.data ?? {}) as Record<string, string>) };
    } catch (e) {
      if (e instanceof KubeRequestError && e.code === 404) {
        if (optional) return undefined;
        throw new ConfigError(`${kind === 'secrets' ? 'secret' : 'configmap'} "${name}" not found`);
      }
      throw e;
    }
  }

  private async buildEnv(spec: KubeObject): Promise<Record<string, string>> {
    const mapping = this.kubelet.mappingFor(spec.image);
    const env: Record<string, string> = {};
    if (this.kubelet.inheritEnv) {
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    } else {
      env.PATH = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
    }
    if (mapping && mapping !== 'skip') Object.assign(env, mapping.env ?? {});
    Object.assign(env, { POD_IP: this.ip, POD_NAME: this.name, POD_NAMESPACE: this.namespace, FNR_BIND_ADDRESS: this.ip });
    for (const from of (spec.envFrom ?? []) as KubeObject[]) {
      const prefix = String(from.prefix ?? '');
      const ref = from.configMapRef ?? from.secretRef;
      if (!ref) continue;
      const data = await this.lookup(from.configMapRef ? 'configmaps' : 'secrets', ref.name, ref.optional === true);
      for (const [k, v] of Object.entries(data ?? {})) env[prefix + k] = v;
    }
    for (const e of (spec.env ?? []) as KubeObject[]) {
      if (e.value !== undefined) {
        env[e.name] = expandVars(String(e.value), env);
        continue;
      }
      const from = e.valueFrom;
      if (!from) {
        env[e.name] = '';
      } else if (from.fieldRef) {
        env[e.name] = this.fieldRef(String(from.fieldRef.fieldPath));
      } else if (from.configMapKeyRef || from.secretKeyRef) {
        const ref = from.configMapKeyRef ?? from.secretKeyRef;
        const kind = from.configMapKeyRef ? 'configmaps' : 'secrets';
        const data = await this.lookup(kind, ref.name, ref.optional === true);
        if (data && data[ref.key] !== undefined) env[e.name] = data[ref.key]!;
        else if (data && ref.optional !== true) throw new ConfigError(`couldn't find key ${ref.key} in ${kind === 'secrets' ? 'Secret' : 'ConfigMap'} ${this.namespace}/${ref.name}`);
      } else if (from.resourceFieldRef) {
        env[e.name] = '0';
      }
    }
    return env;
  }

  // ------------------------------------------------------------------------------------------------ probes

  private probePlan(spec: KubeObject, env: Record<string, string>): ProbePlan {
    const probe: KubeObject | undefined = spec.readinessProbe;
    const namedPort = (port: unknown): number | undefined => {
      if (typeof port === 'number') return port;
      if (typeof port === 'string' && /^\d+$/.test(port)) return Number(port);
      const found = ((spec.ports ?? []) as KubeObject[]).find((p) => p.name === port);
      return found ? Number(found.containerPort) : undefined;
    };
    if (probe?.tcpSocket) {
      const port = namedPort(probe.tcpSocket.port);
      if (port) return { kind: 'tcp', port };
    }
    if (probe?.grpc) {
      const port = namedPort(probe.grpc.port);
      if (port) return { kind: 'tcp', port };
    }
    if (probe?.httpGet) {
      const port = namedPort(probe.httpGet.port);
      if (port) return { kind: 'http', port, path: String(probe.httpGet.path ?? '/') };
    }
    if (probe?.exec && Array.isArray(probe.exec.command) && probe.exec.command.length > 0) {
      const command = (probe.exec.command as unknown[]).map(String);
      const rewritten = this.kubelet.rewrite(command, spec.image);
      if (rewritten[0] !== command[0]) {
        // The probe binary maps to something local: run it, pointing localhost at the pod's address.
        const argv = rewritten.map((a) => expandVars(a, env).replace(/\blocalhost\b|\b127\.0\.0\.1\b/g, this.ip));
        return { kind: 'exec', argv };
      }
      for (const arg of command) {
        const m = /(?:^|[\s=])(?:localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)?:(\d{1,5})$/.exec(arg);
        if (m) return { kind: 'tcp', port: Number(m[1]) };
      }
    }
    const firstPort = ((spec.ports ?? []) as KubeObject[]).find((p) => (p.protocol ?? 'TCP') === 'TCP');
    if (firstPort) return { kind: 'tcp', port: Number(firstPort.containerPort) };
    return { kind: 'none' };
  }

  private probeOnce(plan: ProbePlan, timeoutMs: number, env: Record<string, string>): Promise<boolean> {
    return new Promise((resolve) => {
      switch (plan.kind) {
        case 'none':
          resolve(true);
          return;
        case 'tcp': {
          const socket = connect({ host: this.ip, port: plan.port });
          const timer = setTimeout(() => {
            socket.destroy();
            resolve(false);
          }, timeoutMs);
          socket.once('connect', () => {
            clearTimeout(timer);
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => {
            clearTimeout(timer);
            resolve(false);
          });
          return;
        }
        case 'http': {
          const req = httpGet({ host: this.ip, port: plan.port, path: plan.path, timeout: timeoutMs }, (res) => {
            res.resume();
            resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
          });
          req.once('timeout', () => req.destroy());
          req.once('error', () => resolve(false));
          return;
        }
        case 'exec': {
          const child = spawn(plan.argv[0]!, plan.argv.slice(1), { env, stdio: 'ignore', detached: true });
          if (child.pid) trackGroup(child.pid);
          const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), timeoutMs);
          const done = (ok: boolean): void => {
            clearTimeout(timer);
            if (child.pid) liveGroups.delete(child.pid);
            resolve(ok);
          };
          child.once('error', () => done(false));
          child.once('exit', (code) => done(code === 0));
          return;
        }
      }
    });
  }

  private async probeLoop(spec: KubeObject, model: ContainerModel, child: ChildProcess): Promise<void> {
    const env = await this.buildEnv(spec).catch(() => ({}) as Record<string, string>);
    const plan = this.probePlan(spec, env);
    const probe: KubeObject = spec.readinessProbe ?? {};
    const timeoutMs = Math.max(1, Number(probe.timeoutSeconds ?? 1)) * 1000;
    const failureThreshold = Math.max(1, Number(probe.failureThreshold ?? 3));
    let failures = 0;
    const alive = (): boolean => this.proc === child && child.exitCode === null && child.signalCode === null && !this.stopping;
    while (alive()) {
      const ok = await this.probeOnce(plan, timeoutMs, env);
      if (!alive()) return;
      if (ok) {
        failures = 0;
        if (!model.ready) {
          model.ready = true;
          await this.pushStatus();
        }
      } else {
        failures++;
        if (model.ready && failures >= failureThreshold) {
          model.ready = false;
          await this.pushStatus();
        }
      }
      if (plan.kind === 'none') return;
      await this.naps.sleep(model.ready ? this.kubelet.readyProbeIntervalMs : this.kubelet.probeIntervalMs);
    }
  }

  // ------------------------------------------------------------------------------------------------ termination

  private signalProcess(graceMs: number): void {
    const child = this.proc;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const deadline = Date.now() + graceMs;
    if (deadline >= this.killDeadline) return;
    if (this.killDeadline === Infinity) killGroup(child.pid, 'SIGTERM');
    this.killDeadline = deadline;
    if (this.killTimer) clearTimeout(this.killTimer);
    this.killTimer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), Math.max(0, graceMs));
  }

  /** Graceful deletion: stop the process within the grace period, report, then delete the pod with grace 0. */
  terminate(graceSeconds: number): Promise<void> {
    const cap = this.kubelet.maxGracePeriodSeconds;
    const grace = cap !== undefined ? Math.min(graceSeconds, cap) : graceSeconds;
    this.terminating = true;
    this.naps.wakeAll();
    this.signalProcess(grace * 1000);
    this.terminationDone ??= (async () => {
      const exit = this.procExit ? await this.procExit : undefined;
      await this.runPromise;
      if (this.killTimer) clearTimeout(this.killTimer);
      if (!this.gone) {
        const model = this.containers.get(this.mainName);
        if (model && exit && model.state.running) model.state = { terminated: this.terminatedState(exit) };
        for (const c of this.containers.values()) {
          c.ready = false;
          if (c.state.running) c.state = { terminated: { exitCode: 0, reason: 'Completed', startedAt: c.state.running.startedAt, finishedAt: nowTimestamp() } };
        }
        if (this.phase !== 'Succeeded' && this.phase !== 'Failed') this.phase = exit && exit.exitCode === 0 ? 'Succeeded' : 'Failed';
        await this.pushStatus();
        await this.kubelet.client
          .delete(resourcePath('v1', 'pods', this.namespace, this.name), { gracePeriodSeconds: 0, preconditions: { uid: this.uid } })
          .catch(() => undefined);
      }
      await this.cleanup();
    })();
    return this.terminationDone;
  }

  /** The pod is gone from the API (or the kubelet stops): kill the process, make no more API writes. */
  abandon(graceMs: number): Promise<void> {
    this.gone = true;
    this.terminating = true;
    this.naps.wakeAll();
    this.signalProcess(graceMs);
    this.terminationDone ??= (async () => {
      if (this.procExit) await this.procExit;
      await this.runPromise;
      if (this.killTimer) clearTimeout(this.killTimer);
      await this.cleanup();
    })();
    return this.terminationDone;
  }

  private async cleanup(): Promise<void> {
    await this.statusChain;
    if (this.dir) {
      await rm(this.dir, { recursive: true, force: true }).catch(() => undefined);
      this.dir = undefined;
    }
  }
}

export interface PodInfo {
  namespace: string;
  name: string;
  uid: string;
  ip: string;
  /** The running process, if any. */
  pid: number | undefined;
}

export class LocalKubelet {
  readonly nodeName: string;
  readonly client: KubeRestClient;
  readonly inheritEnv: boolean;
  readonly probeIntervalMs: number;
  readonly readyProbeIntervalMs: number;
  readonly retryMs: number;
  readonly maxGracePeriodSeconds: number | undefined;
  private readonly options: LocalKubeletOptions;
  private readonly imageMap: Map<string, ImageMapping>;
  private readonly commandMap: Map<string, string | string[]>;
  private readonly pods: Reflector;
  private readonly runtimes = new Map<string, PodRuntime | KubeletPod>();
  private readonly finishing = new Set<string>();
  private readonly binding = new Set<string>();
  private readonly pending = new Set<Promise<unknown>>();
  private started = false;
  private stopped = false;
  private logServer: HttpsServer | undefined;
  /** The port of the kubelet API (the `server` option), once started. */
  serverPort: number | undefined;

  constructor(options: LocalKubeletOptions) {
    this.options = options;
    this.nodeName = options.nodeName ?? 'local-node';
    this.inheritEnv = options.inheritEnv ?? true;
    this.probeIntervalMs = options.probeIntervalMs ?? 50;
    this.readyProbeIntervalMs = options.readyProbeIntervalMs ?? 500;
    this.retryMs = options.retryMs ?? 500;
    this.maxGracePeriodSeconds = options.maxGracePeriodSeconds;
    this.imageMap = new Map(Object.entries(options.imageMap ?? {}));
    this.commandMap = new Map(Object.entries(options.commandMap ?? {}));
    this.client = new KubeRestClient(options.api);
    this.pods = new Reflector(this.client, '/api/v1/pods', {
      onAdd: (pod) => this.podEvent(pod, undefined),
      onUpdate: (pod, old) => this.podEvent(pod, old),
      onDelete: (pod) => this.podDeleted(pod),
    });
  }

  /** Lists and starts watching; resolves once the kubelet has seen the current pods (and services). */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('kubelet could not list pods from the API server within 15 s')), 15_000).unref());
    await Promise.race([this.pods.start(), timeout]);
    if (this.options.server) await this.startServer(this.options.server);
    if (this.options.registerNode) await this.registerNode();
  }

  /** The kubelet API's container-log endpoint (see the `server` option). */
  private async startServer(o: NonNullable<LocalKubeletOptions['server']>): Promise<void> {
    const server = createHttpsServer({ cert: o.cert, key: o.key, ca: o.clientCa, requestCert: true, rejectUnauthorized: false });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => this.serveKubeletApi(req, res, o.allowedClients));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.logServer = server;
    this.serverPort = (server.address() as { port: number }).port;
  }

  private serveKubeletApi(req: IncomingMessage, res: ServerResponse, allowed: string[]): void {
    const text = (code: number, body: string): void => {
      res.writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(body);
    };
    const socket = req.socket as TLSSocket;
    if (!socket.authorized) return text(401, 'Unauthorized');
    const cn = socket.getPeerCertificate()?.subject?.CN;
    if (typeof cn !== 'string' || !allowed.includes(cn)) return text(403, `Forbidden (user=${cn ?? ''}, verb=get, resource=nodes, subresource=log)`);
    const url = new URL(req.url ?? '/', 'https://kubelet');
    const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)\/?$/.exec(url.pathname);
    if (req.method !== 'GET' || !m) return text(404, '404 page not found');
    const [namespace, name, container] = m.slice(1).map(decodeURIComponent) as [string, string, string];
    const runtime = this.runtimeByName(namespace, name);
    if (!runtime) return text(404, `pod "${name}" in namespace "${namespace}" not found on node "${this.nodeName}"`);
    const known = [...(runtime.pod.spec?.initContainers ?? []), ...(runtime.pod.spec?.containers ?? [])].some((c: KubeObject) => c.name === container);
    if (!known) return text(404, `container "${container}" in pod "${name}" is not available`);
    const tailLines = url.searchParams.get('tailLines');
    const limitBytes = url.searchParams.get('limitBytes');
    const shape = (all: string): string => {
      let out = all;
      if (tailLines !== null) {
        const lines = out.split('\n');
        if (lines[lines.length - 1] === '') lines.pop();
        const n = Math.max(0, Number(tailLines));
        out = lines.length === 0 ? '' : lines.slice(Math.max(0, lines.length - n)).join('\n') + (n > 0 ? '\n' : '');
      }
      if (limitBytes !== null && Number(limitBytes) > 0) out = Buffer.from(out).subarray(0, Number(limitBytes)).toString();
      return out;
    };
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-cache, private' });
    let sent = runtime.logs.get(container) ?? '';
    res.write(shape(sent));
    if (url.searchParams.get('follow') !== 'true') {
      res.end();
      return;
    }
    // follow: what the container writes from now on, until the pod is gone (or the client leaves)
    const timer = setInterval(() => {
      const now = this.runtimeByName(namespace, name);
      if (!now || this.stopped) {
        clearInterval(timer);
        res.end();
        return;
      }
      const all = now.logs.get(container) ?? '';
      if (all !== sent) {
        res.write(all.startsWith(sent) ? all.slice(sent.length) : all);
        sent = all;
      }
    }, 200);
    res.on('close', () => clearInterval(timer));
  }

  private heartbeat: NodeJS.Timeout | undefined;

  /** Creates (or takes over) the Node object, marks it Ready and starts the Lease heartbeat. */
  private async registerNode(): Promise<void> {
    const now = nowTimestamp();
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: this.nodeName, labels: { 'kubernetes.io/hostname': this.nodeName, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' } },
      spec: {},
    };
    await this.client.create('/api/v1/nodes', node).catch((e: unknown) => {
      if (!(e instanceof KubeRequestError && e.code === 409)) throw e;
    });
    const capacity = { cpu: '2', memory: '24Gi', pods: '250', 'ephemeral-storage': '100Gi' };
    const condition = (type: string, status: string, reason: string, message: string) => ({ type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: now });
    await this.client.patch(resourcePath('v1', 'nodes', undefined, this.nodeName, 'status'), {
      status: {
        capacity,
        allocatable: capacity,
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: this.nodeName }],
        ...(this.serverPort ? { daemonEndpoints: { kubeletEndpoint: { Port: this.serverPort } } } : {}),
        conditions: [
          condition('Ready', 'True', 'KubeletReady', 'LocalKubelet is posting ready status'),
          condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', ''),
          condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', ''),
          condition('PIDPressure', 'False', 'KubeletHasSufficientPID', ''),
        ],
        nodeInfo: { architecture: 'amd64', operatingSystem: 'linux', kubeletVersion: 'local', containerRuntimeVersion: 'local://1', kernelVersion: '', osImage: '', kubeProxyVersion: '', machineID: '', systemUUID: '', bootID: '' },
      },
    }, 'strategic');
    // kube-apiserver's TaintNodesByCondition admission taints a new Node `node.kubernetes.io/not-ready:NoSchedule`;
    // the node lifecycle controller (not run here, docs/cluster.md) lifts it once the node reports Ready. Lift it
    // as that controller would, so that kube-scheduler places pods here.
    const registered = await this.client.get(resourcePath('v1', 'nodes', undefined, this.nodeName));
    const taints: KubeObject[] = registered.spec?.taints ?? [];
    const kept = taints.filter((t) => t.key !== 'node.kubernetes.io/not-ready');
    if (kept.length !== taints.length) await this.client.patch(resourcePath('v1', 'nodes', undefined, this.nodeName), { spec: { taints: kept.length > 0 ? kept : null } }, 'merge');
    const renew = async (): Promise<void> => {
      const path = resourcePath('coordination.k8s.io/v1', 'leases', 'kube-node-lease', this.nodeName);
      const spec = { holderIdentity: this.nodeName, leaseDurationSeconds: 40, renewTime: new Date().toISOString().replace(/Z$/, '000Z') };
      try {
        await this.client.patch(path, { spec }, 'merge');
      } catch (e) {
        if (!(e instanceof KubeRequestError && e.code === 404)) return;
        await this.client
          .create(resourcePath('coordination.k8s.io/v1', 'leases', 'kube-node-lease'), { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.nodeName }, spec })
          .catch(() => undefined);
      }
    };
    await renew();
    this.heartbeat = setInterval(() => this.track(renew()), 10_000);
    this.heartbeat.unref();
  }

  /** Stops watching and kills every pod process (SIGTERM, then SIGKILL after stopGraceMs). Leaves the API alone. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.heartbeat);
    await this.pods.stop();
    const graceMs = this.options.stopGraceMs ?? 2000;
    await Promise.all([...this.runtimes.values()].map((r) => r.abandon(graceMs)));
    this.runtimes.clear();
    await Promise.allSettled([...this.pending]);
    this.client.close();
    this.logServer?.closeAllConnections();
    await new Promise<void>((resolve) => (this.logServer ? this.logServer.close(() => resolve()) : resolve()));
  }

  /** Adds or replaces an image mapping at run time. */
  setImage(image: string, mapping: ImageMapping): void {
    this.imageMap.set(image, mapping);
  }

  /** Adds or replaces a command path rewrite at run time. */
  setCommand(path: string, target: string | string[]): void {
    this.commandMap.set(path, target);
  }

  /** The output a pod's container has written so far (stdout and stderr interleaved). */
  logs(namespace: string, name: string, container?: string): string | undefined {
    const runtime = this.runtimeByName(namespace, name);
    if (!runtime) return undefined;
    const containerName = container ?? runtime.pod.spec?.containers?.find((c: KubeObject) => c.name === 'function')?.name ?? runtime.pod.spec?.containers?.[0]?.name;
    return runtime.logs.get(containerName) ?? '';
  }

  /** Pods this kubelet currently runs. */
  podInfos(): PodInfo[] {
    return [...this.runtimes.values()].map((r) => ({ namespace: r.namespace, name: r.name, uid: r.uid, ip: r.ip, pid: r.pid }));
  }

  /** PIDs of live pod processes (each is also its process group id). */
  pids(): number[] {
    return this.podInfos()
      .map((p) => p.pid)
      .filter((p): p is number => p !== undefined);
  }

  // ------------------------------------------------------------------------------------------------ internals used by PodRuntime

  mappingFor(image: string): ImageMapping | undefined {
    const exact = this.imageMap.get(image);
    if (exact) return exact;
    let best: { len: number; mapping: ImageMapping } | undefined;
    for (const [pattern, mapping] of this.imageMap) {
      if (pattern.endsWith('*') && imageMatches(pattern, image) && (!best || pattern.length > best.len)) best = { len: pattern.length, mapping };
    }
    if (best) return best.mapping;
    return this.options.pullAnyImage ? {} : undefined;
  }

  /** Every image of the pod is in imageMap (exactly or by a `*` pattern; pullAnyImage does not count). */
  private allImagesMapped(pod: KubeObject): boolean {
    const images = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((c: KubeObject) => String(c.image ?? ''));
    return images.length > 0 && images.every((image) => this.imageMap.has(image) || [...this.imageMap.keys()].some((k) => k.endsWith('*') && imageMatches(k, image)));
  }

  /** Returns an error message when the image cannot be "pulled". */
  async pull(image: string, pod: KubeObject): Promise<string | undefined> {
    if (!this.mappingFor(image)) {
      return `Failed to pull image "${image}": rpc error: code = NotFound desc = failed to pull and unpack image "${image}": not found in the local kubelet's imageMap`;
    }
    const mapping = this.mappingFor(image);
    if (mapping !== 'skip' && mapping?.pullError) return `Failed to pull image "${image}": ${mapping.pullError}`;
    try {
      await this.options.onPullImage?.(image, pod);
    } catch (e) {
      return `Failed to pull image "${image}": ${(e as Error).message}`;
    }
    return undefined;
  }

  rewrite(tokens: string[], image: string): string[] {
    const mapping = this.mappingFor(image);
    const local = mapping && mapping !== 'skip' ? (mapping.commandMap ?? {}) : {};
    const out: string[] = [];
    for (const token of tokens) {
      const target = local[token] ?? this.commandMap.get(token);
      if (target === undefined) out.push(token);
      else if (Array.isArray(target)) out.push(...target);
      else out.push(target);
    }
    return out;
  }

  argvFor(spec: KubeObject, env: Record<string, string>): string[] {
    const mapping = this.mappingFor(spec.image);
    const entry = mapping && mapping !== 'skip' ? mapping : {};
    const hasCommand = Array.isArray(spec.command) && spec.command.length > 0;
    const command: string[] = hasCommand ? spec.command.map(String) : (entry.command ?? []);
    const args: string[] = Array.isArray(spec.args) ? spec.args.map(String) : hasCommand ? [] : (entry.args ?? []);
    const argv = [...command, ...args].map((t) => expandVars(t, env));
    if (argv.length === 0) throw new Error('failed to generate container spec: no command specified');
    return this.rewrite(argv, spec.image);
  }

  backoff(restartCount: number): number {
    const base = this.options.restartBackoffMs ?? 200;
    const max = this.options.maxRestartBackoffMs ?? 5000;
    return Math.min(max, base * 2 ** Math.max(0, restartCount - 1));
  }

  emitLog(runtime: PodRuntime, container: string, chunk: string): void {
    this.options.onLog?.({ namespace: runtime.namespace, name: runtime.name }, container, chunk);
  }

  // ------------------------------------------------------------------------------------------------ pod events

  private track<T>(p: Promise<T>): void {
    const tracked = p.catch(() => undefined).finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  private runtimeByName(namespace: string, name: string): PodRuntime | KubeletPod | undefined {
    for (const r of this.runtimes.values()) if (r.namespace === namespace && r.name === name) return r;
    return undefined;
  }

  private podEvent(pod: KubeObject, old: KubeObject | undefined): void {
    if (this.stopped) return;
    const uid: string = pod.metadata?.uid;
    if (old && old.metadata?.uid !== uid) this.abandonUid(old.metadata?.uid);
    const nodeName = pod.spec?.nodeName;
    if (!nodeName) {
      const gated = Array.isArray(pod.spec?.schedulingGates) && pod.spec.schedulingGates.length > 0;
      if (this.options.schedule !== false && !pod.metadata?.deletionTimestamp && !gated && !this.binding.has(uid)) {
        this.binding.add(uid);
        this.track(
          this.client
            .create(resourcePath('v1', 'pods', pod.metadata.namespace, pod.metadata.name, 'binding'), {
              apiVersion: 'v1',
              kind: 'Binding',
              metadata: { name: pod.metadata.name, namespace: pod.metadata.namespace, uid },
              target: { apiVersion: 'v1', kind: 'Node', name: this.nodeName },
            })
            .catch(() => this.binding.delete(uid)),
        );
      }
      return;
    }
    if (nodeName !== this.nodeName) return;
    this.binding.delete(uid);
    let runtime = this.runtimes.get(uid);
    if (runtime) runtime.pod = pod;
    if (pod.metadata?.deletionTimestamp) {
      const grace = Number(pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30);
      if (runtime) {
        this.track(runtime.terminate(grace));
      } else if (!this.finishing.has(uid)) {
        // Nothing runs for it here: finish the deletion at once.
        this.finishing.add(uid);
        this.track(
          this.client
            .delete(resourcePath('v1', 'pods', pod.metadata.namespace, pod.metadata.name), { gracePeriodSeconds: 0, preconditions: { uid } })
            .catch(() => undefined),
        );
      }
      return;
    }
    const phase = pod.status?.phase;
    if (runtime || phase === 'Succeeded' || phase === 'Failed') return;
    const containers = this.options.runtime;
    runtime =
      containers && containers !== 'process' && !this.allImagesMapped(pod)
        ? containers.kubeletPod(pod, this.client, (container, chunk) => this.options.onLog?.({ namespace: pod.metadata.namespace, name: pod.metadata.name }, container, chunk))
        : new PodRuntime(this, pod, allocateLoopbackAddress(this.options.podIpPrefix ?? DEFAULT_POD_IP_PREFIX));
    this.runtimes.set(uid, runtime);
    runtime.start();
  }

  private abandonUid(uid: string | undefined): void {
    if (!uid) return;
    const runtime = this.runtimes.get(uid);
    if (!runtime) return;
    this.runtimes.delete(uid);
    this.track(runtime.abandon(Math.min(2000, (runtime.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000)));
  }

  private podDeleted(pod: KubeObject): void {
    if (this.stopped) return;
    const uid = pod.metadata?.uid;
    this.binding.delete(uid);
    this.finishing.delete(uid);
    this.abandonUid(uid);
  }
}
