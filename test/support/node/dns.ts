/**
 * A small DNS server for tests (node:dgram, UDP on 127.0.0.1 and a free port) that answers A queries for
 * `<service>.<namespace>.svc.<domain>` with the ready addresses of the Service's endpoints, read from the API
 * server (EndpointSlices labelled kubernetes.io/service-name, else the Endpoints object). ClusterIPs are not
 * routable here, so this stands in for cluster DNS plus kube-proxy: the name resolves straight to the pod IPs.
 * Other names get NXDOMAIN; AAAA and other types of a known name get an empty NOERROR answer.
 */
import dgram from 'node:dgram';

import { KubeRequestError, type KubeRestClient } from '../k8s/client.js';

type KubeObject = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface DnsQuestion {
  name: string;
  type: number;
}

/** Parses the first question of a DNS message (no compression in questions, as resolvers send them). */
export function parseQuestion(msg: Buffer): { id: number; question: DnsQuestion; end: number } | undefined {
  if (msg.length < 12 || msg.readUInt16BE(4) < 1) return undefined;
  let off = 12;
  const labels: string[] = [];
  for (;;) {
    if (off >= msg.length) return undefined;
    const len = msg[off]!;
    if (len === 0) {
      off++;
      break;
    }
    if (len > 63 || off + 1 + len > msg.length) return undefined;
    labels.push(msg.subarray(off + 1, off + 1 + len).toString('latin1'));
    off += 1 + len;
  }
  if (off + 4 > msg.length) return undefined;
  return { id: msg.readUInt16BE(0), question: { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(off) }, end: off + 4 };
}

/** A response to `query` (its first question ends at `end`): `rcode`, and one A record per address. */
export function answer(query: Buffer, end: number, rcode: number, addresses: string[], ttl: number): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0);
  const rd = query.readUInt16BE(2) & 0x0100;
  header.writeUInt16BE(0x8000 | 0x0400 | rd | rcode, 2); // QR, AA, RD copied
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(addresses.length, 6);
  const question = query.subarray(12, end);
  const records = addresses.map((ip) => {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
    rr.writeUInt16BE(1, 2); // A
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(ttl, 6);
    rr.writeUInt16BE(4, 10);
    ip.split('.').forEach((p, i) => rr.writeUInt8(Number(p), 12 + i));
    return rr;
  });
  return Buffer.concat([header, question, ...records]);
}

export class TestDnsServer {
  /** Names asked, in order (for tests). */
  readonly queries: string[] = [];

  private constructor(
    private readonly socket: dgram.Socket,
    private readonly client: KubeRestClient,
    readonly domain: string,
  ) {}

  get port(): number {
    return this.socket.address().port;
  }

  /** `127.0.0.1:<port>`, as dns.Resolver.setServers and FNR_DNS_SERVER take it. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  static async start(client: KubeRestClient, options: { domain?: string } = {}): Promise<TestDnsServer> {
    const socket = dgram.createSocket('udp4');
    const server = new TestDnsServer(socket, client, (options.domain ?? 'cluster.local').toLowerCase());
    socket.on('message', (msg, rinfo) => void server.handle(msg, rinfo));
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => resolve());
    });
    return server;
  }

  /** Ready endpoint addresses of a Service. */
  async addresses(namespace: string, service: string): Promise<string[] | undefined> {
    try {
      const slices = await this.client.get(
        `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/endpointslices?labelSelector=${encodeURIComponent(`kubernetes.io/service-name=${service}`)}`,
      );
      const items = (slices.items ?? []) as KubeObject[];
      if (items.length > 0) {
        const out: string[] = [];
        for (const s of items) {
          if (s.addressType !== 'IPv4') continue;
          for (const e of (s.endpoints ?? []) as KubeObject[]) if (e.conditions?.ready !== false) out.push(...((e.addresses ?? []) as string[]));
        }
        return out;
      }
    } catch (e) {
      if (!(e instanceof KubeRequestError && e.code === 404)) throw e;
    }
    try {
      const ep = await this.client.get(`/api/v1/namespaces/${encodeURIComponent(namespace)}/endpoints/${encodeURIComponent(service)}`);
      return ((ep.subsets ?? []) as KubeObject[]).flatMap((s) => ((s.addresses ?? []) as KubeObject[]).map((a) => String(a.ip)));
    } catch (e) {
      if (e instanceof KubeRequestError && e.code === 404) return undefined;
      throw e;
    }
  }

  private async handle(msg: Buffer, rinfo: dgram.RemoteInfo): Promise<void> {
    const q = parseQuestion(msg);
    if (!q) return;
    this.queries.push(q.question.name);
    const suffix = `.svc.${this.domain}`;
    let rcode = 3;
    let addrs: string[] = [];
    if (q.question.name.endsWith(suffix)) {
      const parts = q.question.name.slice(0, -suffix.length).split('.');
      if (parts.length === 2) {
        try {
          const found = await this.addresses(parts[1]!, parts[0]!);
          if (found !== undefined) {
            rcode = 0;
            addrs = q.question.type === 1 ? found : [];
          }
        } catch {
          rcode = 2; // SERVFAIL: the API server did not answer
        }
      }
    }
    try {
      this.socket.send(answer(msg, q.end, rcode, addrs, 0), rinfo.port, rinfo.address);
    } catch {
      // closed meanwhile
    }
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => {
      try {
        this.socket.close(() => resolve());
      } catch {
        resolve();
      }
    });
  }
}
