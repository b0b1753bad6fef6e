/**
 * Services for the runc node's pods: what kube-proxy and the kubelet's service environment give a pod on a real
 * node, built from the real API server's Services and EndpointSlices (docs/node.md "Services from inside a pod").
 *
 * - **ClusterIP routing.** Inside each pod's network namespace, one iptables `nat OUTPUT` rule per Service port
 *   sends the pod's connections to `clusterIP:port` to a TCP listener of this process on the pod's host address
 *   (the host end of its veth, an address the node created), which connects to a ready endpoint of the Service
 *   (round robin) and copies bytes both ways. The rules live in the pod's namespace and go with it; nothing is
 *   added to the host's own tables, no sysctl changes, no forwarding: the host reaches every endpoint directly
 *   (pods at their /30, the API server on 127.0.0.1), so the pod reaches them through it. This is kube-proxy's old
 *   userspace mode, with the redirect done per pod instead of on the host.
 * - **Cluster DNS.** Pods get `nameserver 10.96.0.10` (kube-dns's usual ClusterIP); a rule in the pod's namespace
 *   sends its UDP queries to a DNS listener of this process on the pod's host address, which answers
 *   `<service>.<namespace>.svc.<domain>` as cluster DNS does: the ClusterIP, or a headless Service's ready endpoint
 *   addresses; any other name NXDOMAIN (nothing is forwarded outside the cluster).
 * - **Service environment.** The variables a kubelet sets from Services (`KUBERNETES_SERVICE_HOST` and the rest of
 *   the master Service's always; the pod's own namespace's unless `enableServiceLinks: false`), which in-cluster
 *   clients (client-go's InClusterConfig, client-node's loadFromCluster) read to find the API server.
 *
 * TCP only (UDP Service ports are not routed). The table is re-read from the API server when a pod network is
 * attached and then every `pollMs` while any is; a Service created while a pod runs is routed within that time.
 */
import dgram from 'node:dgram';
import net from 'node:net';

import type { KubeRestClient } from '../k8s/client.js';
import { answer, parseQuestion } from './dns.js';
import type { PodNetwork } from './network.js';
import { run } from './runc.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** One TCP port of one ClusterIP Service. */
export interface ServicePort {
  namespace: string;
  service: string;
  clusterIP: string;
  port: number;
  name: string;
  /** Ready endpoints, `ip:port`. */
  endpoints: string[];
}

/** The cluster DNS address pods are given (inside SERVICE_CIDR, as kube-dns's usually is; UDP only, so no TCP Service collides). */
export const CLUSTER_DNS_IP = '10.96.0.10';

interface Attached {
  net: PodNetwork;
  /** The pod's DNS listener (UDP, on its host address). */
  dns?: dgram.Socket;
  /** `clusterIP:port` → the listener on the pod's host address that stands for it. */
  listeners: Map<string, net.Server>;
  /** The rule set last written into the namespace. */
  rules: string;
}

export interface ServiceRouterOptions {
  /** How often the table is re-read while a pod network is attached (default 1000 ms). */
  pollMs?: number;
  /**
   * `host:port` of kube-apiserver, the endpoint of the `default/kubernetes` Service when its EndpointSlice lists none:
   * the project's control plane runs kube-apiserver on 127.0.0.1 with `--endpoint-reconciler-type=none`, as
   * EndpointSlices may not hold loopback addresses.
   */
  apiServer?: string;
  /** The cluster domain DNS answers under (default cluster.local). */
  clusterDomain?: string;
}

export class ServiceRouter {
  private table = new Map<string, ServicePort>();
  private services: KubeObject[] = [];
  private slices: KubeObject[] = [];
  private readonly attached = new Map<string, Attached>();
  private readonly sockets = new Set<net.Socket>();
  private readonly turn = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;
  /** The nameserver pods get in /etc/resolv.conf. */
  readonly nameserver = CLUSTER_DNS_IP;

  constructor(
    private readonly client: KubeRestClient,
    private readonly options: ServiceRouterOptions = {},
  ) {}

  /** The table as last read: `clusterIP:port` → port and endpoints. */
  ports(): ServicePort[] {
    return [...this.table.values()];
  }

  /** Routes the Service ClusterIPs from inside this pod network (call once it exists, before the pod starts). */
  async attach(podNet: PodNetwork): Promise<void> {
    await this.serial(async () => {
      if (this.stopped) return;
      this.attached.set(podNet.netns, { net: podNet, listeners: new Map(), rules: '' });
      await this.refreshLocked().catch(() => undefined); // an API server out of reach: a kubelet starts the pod anyway
      if (!this.timer) {
        this.timer = setInterval(() => void this.serial(() => this.refreshLocked()).catch(() => undefined), this.options.pollMs ?? 1000);
        this.timer.unref();
      }
    });
  }

  /** Stops routing for a pod network (before it is removed): its listeners close, open connections end. */
  async detach(podNet: Pick<PodNetwork, 'netns'>): Promise<void> {
    await this.serial(async () => {
      const a = this.attached.get(podNet.netns);
      if (!a) return;
      this.attached.delete(podNet.netns);
      await closeAll(a.listeners.values());
      closeDns(a);
      if (this.attached.size === 0) this.stopTimer();
    });
  }

  /** Closes every listener and connection. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopTimer();
    await this.serial(async () => {
      for (const a of this.attached.values()) {
        await closeAll(a.listeners.values());
        closeDns(a);
      }
      this.attached.clear();
    });
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  /**
   * The environment a kubelet gives a container from Services: the master Service's variables always, and those
   * of every ClusterIP Service of the pod's namespace when `enableServiceLinks` is not false. Read fresh.
   */
  async environment(namespace: string, enableServiceLinks: boolean): Promise<Record<string, string>> {
    await this.serial(() => this.refreshLocked()).catch(() => undefined); // out of reach: the last table read
    const env: Record<string, string> = {};
    for (const s of this.services) {
      const ns = String(s.metadata?.namespace ?? '');
      const name = String(s.metadata?.name ?? '');
      const master = ns === 'default' && name === 'kubernetes';
      if (!master && !(enableServiceLinks && ns === namespace)) continue;
      Object.assign(env, serviceVariables(s));
    }
    return env;
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private serial(fn: () => Promise<void>): Promise<void> {
    const next = this.chain.then(fn);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async refreshLocked(): Promise<void> {
    const [services, slices] = await Promise.all([
      this.client.get('/api/v1/services'),
      this.client.get('/apis/discovery.k8s.io/v1/endpointslices'),
    ]);
    this.services = (services.items ?? []) as KubeObject[];
    this.slices = (slices.items ?? []) as KubeObject[];
    this.table = serviceTable(this.services, this.slices);
    const api = this.options.apiServer;
    if (api) for (const p of this.table.values()) if (p.namespace === 'default' && p.service === 'kubernetes' && p.endpoints.length === 0) p.endpoints = [api];
    for (const a of this.attached.values()) await this.sync(a);
  }

  /** Listeners and rules of one pod network made to match the table. */
  private async sync(a: Attached): Promise<void> {
    for (const [key, server] of a.listeners) {
      if (this.table.has(key)) continue;
      a.listeners.delete(key);
      await closeAll([server]);
    }
    for (const key of this.table.keys()) {
      if (a.listeners.has(key)) continue;
      a.listeners.set(key, await this.listen(a.net.hostIP, key));
    }
    a.dns ??= await this.dnsListener(a.net.hostIP);
    const lines = ['*nat', ':PREROUTING ACCEPT [0:0]', ':INPUT ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ':POSTROUTING ACCEPT [0:0]'];
    lines.push(`-A OUTPUT -d ${CLUSTER_DNS_IP}/32 -p udp -m udp --dport 53 -j DNAT --to-destination ${a.net.hostIP}:${a.dns.address().port}`);
    for (const [key, server] of [...a.listeners].sort(([x], [y]) => x.localeCompare(y))) {
      const p = this.table.get(key)!;
      const local = (server.address() as net.AddressInfo).port;
      lines.push(`-A OUTPUT -d ${p.clusterIP}/32 -p tcp -m tcp --dport ${p.port} -j DNAT --to-destination ${a.net.hostIP}:${local}`);
    }
    lines.push('COMMIT', '');
    const rules = lines.join('\n');
    if (rules === a.rules) return;
    const r = await run('ip', ['netns', 'exec', a.net.netns, 'iptables-restore'], { input: rules });
    // A namespace removed meanwhile (the pod ended) is no error: detach() follows.
    if (r.code !== 0 && this.attached.has(a.net.netns)) throw new Error(`iptables-restore in ${a.net.netns}: ${r.stderr.trim()}`);
    a.rules = rules;
  }

  private dnsListener(hostIP: string): Promise<dgram.Socket> {
    const socket = dgram.createSocket('udp4');
    socket.on('message', (msg, rinfo) => void this.answerDns(socket, msg, rinfo));
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, hostIP, () => {
        socket.off('error', reject);
        socket.on('error', () => undefined);
        resolve(socket);
      });
    });
  }

  /** Cluster DNS for one query; a Service not in the table yet is looked up once more (it may be seconds old). */
  private async answerDns(socket: dgram.Socket, msg: Buffer, rinfo: dgram.RemoteInfo): Promise<void> {
    const q = parseQuestion(msg);
    if (!q) return;
    const suffix = `.svc.${(this.options.clusterDomain ?? 'cluster.local').toLowerCase()}`;
    const parts = q.question.name.endsWith(suffix) ? q.question.name.slice(0, -suffix.length).split('.') : [];
    let found = parts.length === 2 ? this.resolve(parts[1]!, parts[0]!) : undefined;
    let rcode = 0;
    if (parts.length === 2 && found === undefined) {
      try {
        await this.serial(() => this.refreshLocked());
        found = this.resolve(parts[1]!, parts[0]!);
      } catch {
        rcode = 2; // SERVFAIL: the API server did not answer
      }
    }
    if (found === undefined && rcode === 0) rcode = 3;
    try {
      socket.send(answer(msg, q.end, rcode, q.question.type === 1 ? (found ?? []) : [], 5), rinfo.port, rinfo.address);
    } catch {
      // closed meanwhile
    }
  }

  /** A Service's A records as cluster DNS gives them: its ClusterIP, or a headless one's ready endpoints. */
  private resolve(namespace: string, name: string): string[] | undefined {
    const s = this.services.find((x) => x.metadata?.namespace === namespace && x.metadata?.name === name);
    if (!s) return undefined;
    const ip = s.spec?.clusterIP;
    if (typeof ip === 'string' && ip !== '' && ip !== 'None') return [ip];
    const own = this.slices.filter((e) => e.metadata?.namespace === namespace && e.metadata?.labels?.['kubernetes.io/service-name'] === name && e.addressType === 'IPv4');
    return own.flatMap((e) => ((e.endpoints ?? []) as KubeObject[]).filter((ep) => ep.conditions?.ready !== false).flatMap((ep) => (ep.addresses ?? []) as string[]));
  }

  private listen(hostIP: string, key: string): Promise<net.Server> {
    const server = net.createServer((client) => this.forward(client, key));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, hostIP, () => {
        server.off('error', reject);
        resolve(server);
      });
    });
  }

  /** One connection from a pod: to the next ready endpoint, or closed at once when the Service has none. */
  private forward(client: net.Socket, key: string): void {
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    client.on('error', () => undefined);
    const endpoints = this.table.get(key)?.endpoints ?? [];
    if (endpoints.length === 0 || this.stopped) {
      client.destroy();
      return;
    }
    const n = this.turn.get(key) ?? 0;
    this.turn.set(key, n + 1);
    const target = endpoints[n % endpoints.length]!;
    const colon = target.lastIndexOf(':');
    const upstream = net.connect({ host: target.slice(0, colon), port: Number(target.slice(colon + 1)) });
    this.sockets.add(upstream);
    upstream.once('close', () => {
      this.sockets.delete(upstream);
      client.destroy();
    });
    client.once('close', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

function closeDns(a: Attached): void {
  try {
    a.dns?.close();
  } catch {
    // closed already
  }
  a.dns = undefined;
}

async function closeAll(servers: Iterable<net.Server>): Promise<void> {
  await Promise.all([...servers].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
}

/** `clusterIP:port` → TCP port of a ClusterIP Service with its ready endpoints (from the Service's EndpointSlices). */
export function serviceTable(services: KubeObject[], slices: KubeObject[]): Map<string, ServicePort> {
  const table = new Map<string, ServicePort>();
  for (const s of services) {
    const clusterIP = s.spec?.clusterIP;
    if (typeof clusterIP !== 'string' || clusterIP === '' || clusterIP === 'None' || s.spec?.type === 'ExternalName') continue;
    const namespace = String(s.metadata?.namespace ?? '');
    const service = String(s.metadata?.name ?? '');
    const own = slices.filter((e) => e.metadata?.namespace === namespace && e.metadata?.labels?.['kubernetes.io/service-name'] === service);
    for (const p of (s.spec?.ports ?? []) as KubeObject[]) {
      if ((p.protocol ?? 'TCP') !== 'TCP') continue;
      const name = String(p.name ?? '');
      const endpoints: string[] = [];
      for (const slice of own) {
        if (slice.addressType !== 'IPv4') continue;
        const sp = ((slice.ports ?? []) as KubeObject[]).find((x) => String(x.name ?? '') === name && (x.protocol ?? 'TCP') === 'TCP');
        if (!sp || typeof sp.port !== 'number') continue;
        for (const ep of (slice.endpoints ?? []) as KubeObject[]) {
          if (ep.conditions?.ready === false) continue;
          for (const address of (ep.addresses ?? []) as string[]) endpoints.push(`${address}:${sp.port}`);
        }
      }
      table.set(`${clusterIP}:${p.port}`, { namespace, service, clusterIP, port: Number(p.port), name, endpoints: endpoints.sort() });
    }
  }
  return table;
}

/**
 * The variables of one Service, named as a kubelet names them: `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT` (the
 * first port), `<NAME>_SERVICE_PORT_<PORT NAME>` per named port, and the Docker-link style `<NAME>_PORT…` set.
 * Nothing for a Service without a ClusterIP (headless, ExternalName).
 */
export function serviceVariables(s: KubeObject): Record<string, string> {
  const ip = s.spec?.clusterIP;
  if (typeof ip !== 'string' || ip === '' || ip === 'None') return {};
  const up = (x: string): string => x.toUpperCase().replace(/-/g, '_');
  const name = up(String(s.metadata?.name ?? ''));
  const ports = (s.spec?.ports ?? []) as KubeObject[];
  const env: Record<string, string> = { [`${name}_SERVICE_HOST`]: ip };
  if (ports.length === 0) return env;
  const first = ports[0]!;
  env[`${name}_SERVICE_PORT`] = String(first.port);
  env[`${name}_PORT`] = `${String(first.protocol ?? 'TCP').toLowerCase()}://${ip}:${first.port}`;
  for (const p of ports) {
    const proto = String(p.protocol ?? 'TCP');
    if (p.name) env[`${name}_SERVICE_PORT_${up(String(p.name))}`] = String(p.port);
    const prefix = `${name}_PORT_${p.port}_${proto}`;
    env[prefix] = `${proto.toLowerCase()}://${ip}:${p.port}`;
    env[`${prefix}_PROTO`] = proto.toLowerCase();
    env[`${prefix}_PORT`] = String(p.port);
    env[`${prefix}_ADDR`] = ip;
  }
  return env;
}
