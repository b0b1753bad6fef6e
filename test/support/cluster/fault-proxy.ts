/**
 * A fault-injecting HTTPS reverse proxy in front of the real kube-apiserver (docs/cluster.md): a client given
 * `proxy.kubeconfigFor(token)` talks to kube-apiserver through it (HTTP/1.1, the proxy's own certificate; the
 * bearer token is passed on, so the apiserver authenticates and authorizes the client itself). Per request the
 * proxy can
 *   - answer with a Status of any code instead of forwarding (`failNext`: 5xx, 429 with Retry-After, 409, 410),
 *   - delay it (`addLatency`),
 * and for the watches it is streaming it can
 *   - close them cleanly (`dropWatches({mode: 'end'})`, the chunked stream ends) or reset the connection
 *     (`mode: 'destroy'`),
 *   - end them as kube-apiserver does when a watch's resource version has been compacted away (`expireWatches`:
 *     an ERROR event carrying a 410 Expired Status, then the end of the stream).
 * The rules and their matching are in ../k8s/faults.ts. `requests` logs what went through (verb, resource, namespace, name, code, injected or not), `received`
 * every request, discovery and /version included.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { FaultInjector, type FailureRule, type FaultHandle, type LatencyRule, type RequestInfo, type RequestMatch, type Verb } from '../k8s/faults.js';
import { failureStatus } from '../k8s/status.js';
import { testTlsMaterial } from '../k8s/tls.js';

export interface ProxiedRequest extends RequestInfo {
  method: string;
  path: string;
  watch: boolean;
  /** Response code (the injected one for an injected failure); undefined while a watch streams. */
  code?: number;
  injected: boolean;
}

interface LiveWatch {
  info: RequestInfo;
  res: ServerResponse;
  upstream: IncomingMessage | undefined;
  close(): void;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host', 'accept-encoding']);

/** verb/resource/namespace/name of a Kubernetes API request (as kube-apiserver's RequestInfo resolver does). */
export function requestInfo(method: string, url: URL): (RequestInfo & { watch: boolean }) | undefined {
  let segs = url.pathname.split('/').filter((s) => s !== '');
  if (segs[0] === 'api') segs = segs.slice(2);
  else if (segs[0] === 'apis') segs = segs.slice(3);
  else return undefined;
  let watch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
  if (segs[0] === 'watch') {
    watch = true;
    segs = segs.slice(1);
  }
  let namespace: string | undefined;
  if (segs[0] === 'namespaces' && segs.length >= 3) {
    namespace = segs[1];
    segs = segs.slice(2);
  }
  const [res, name, sub] = segs;
  if (!res) return undefined;
  if (res === 'namespaces' && name && !namespace) namespace = name;
  const resource = sub ? `${res}/${sub}` : res;
  const collection = name === undefined;
  const m = method.toUpperCase();
  const verb: Verb =
    m === 'GET' ? (watch ? 'watch' : collection ? 'list' : 'get')
    : m === 'POST' ? 'create'
    : m === 'PUT' ? 'update'
    : m === 'PATCH' ? 'patch'
    : m === 'DELETE' ? (collection ? 'deletecollection' : 'delete')
    : 'get';
  return { verb, resource, ...(namespace !== undefined ? { namespace } : {}), ...(name !== undefined ? { name } : {}), watch };
}

function matches(rule: RequestMatch & { mode?: unknown }, info: RequestInfo): boolean {
  if (rule.resource !== undefined && rule.resource !== '*' && rule.resource !== info.resource) return false;
  if (rule.namespace !== undefined && rule.namespace !== info.namespace) return false;
  if (rule.name !== undefined && rule.name !== info.name) return false;
  return true;
}

export class FaultProxy {
  readonly faults = new FaultInjector();
  readonly requests: ProxiedRequest[] = [];
  /** Every request that reached the proxy, `METHOD path?query`, API resource or not (discovery, /version, ...). */
  readonly received: string[] = [];
  private readonly watches = new Set<LiveWatch>();
  private readonly agent: https.Agent;

  private constructor(
    private readonly server: https.Server,
    /** The proxy's URL (https://127.0.0.1:port). */
    readonly url: string,
    /** PEM of the CA that signed the proxy's certificate (for a kubeconfig). */
    readonly caPem: string,
    private readonly upstream: URL,
    upstreamCa: string,
  ) {
    this.agent = new https.Agent({ keepAlive: true, ca: upstreamCa });
  }

  /** Starts the proxy on 127.0.0.1 and a free port, forwarding to `upstreamUrl` (whose serving cert `upstreamCa` signed). */
  static async start(upstreamUrl: string, upstreamCa: string): Promise<FaultProxy> {
    const tls = await testTlsMaterial();
    const server = https.createServer({ key: tls.key, cert: tls.cert });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const proxy = new FaultProxy(server, `https://127.0.0.1:${port}`, tls.ca, new URL(upstreamUrl), upstreamCa);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void proxy.handle(req, res));
    return proxy;
  }

  /** A kubeconfig (JSON) for `token` through the proxy. */
  kubeconfigFor(token: string, namespace = 'default'): string {
    return JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'fault-proxy', cluster: { server: this.url, 'certificate-authority-data': Buffer.from(this.caPem).toString('base64') } }],
      users: [{ name: 'fault-proxy', user: { token } }],
      contexts: [{ name: 'fault-proxy', context: { cluster: 'fault-proxy', user: 'fault-proxy', namespace } }],
      'current-context': 'fault-proxy',
    }, null, 2);
  }

  failNext(rule: FailureRule): FaultHandle {
    return this.faults.failNext(rule);
  }

  addLatency(rule: LatencyRule): FaultHandle {
    return this.faults.addLatency(rule);
  }

  /** The requests that matched (all when no match is given). */
  requestsFor(match: RequestMatch = {}): ProxiedRequest[] {
    return this.requests.filter((r) => {
      if (match.verb !== undefined && !(Array.isArray(match.verb) ? match.verb : [match.verb]).includes(r.verb)) return false;
      return matches(match, r);
    });
  }

  /** How many watches matching `match` are streaming now. */
  liveWatches(match: RequestMatch = {}): number {
    return [...this.watches].filter((w) => matches(match, w.info)).length;
  }

  /** Ends the matching watches: `end` closes the stream cleanly, `destroy` resets the connection. Returns how many. */
  dropWatches(match: RequestMatch & { mode?: 'end' | 'destroy' } = {}): number {
    let n = 0;
    for (const w of [...this.watches]) {
      if (!matches(match, w.info)) continue;
      n++;
      w.upstream?.destroy();
      if (match.mode === 'destroy') w.res.socket?.destroy();
      else w.res.end();
      w.close();
    }
    return n;
  }

  /**
   * Ends the matching watches as kube-apiserver ends a watch whose resource version was compacted: an ERROR
   * event with a 410 Expired Status, then the end of the stream. The client must list again. Returns how many.
   */
  expireWatches(match: RequestMatch = {}): number {
    let n = 0;
    for (const w of [...this.watches]) {
      if (!matches(match, w.info)) continue;
      n++;
      w.upstream?.destroy();
      const status = failureStatus(410, 'Expired', 'too old resource version: 1 (2)');
      w.res.end(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
      w.close();
    }
    return n;
  }

  async stop(): Promise<void> {
    this.dropWatches({ mode: 'destroy' });
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.agent.destroy();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://proxy');
    const info = requestInfo(req.method ?? 'GET', url);
    const entry: ProxiedRequest | undefined = info ? { ...info, method: req.method ?? 'GET', path: url.pathname + url.search, injected: false } : undefined;
    this.received.push(`${req.method ?? 'GET'} ${url.pathname}${url.search}`);
    if (entry) this.requests.push(entry);
    if (info) {
      const { delayMs, error } = this.faults.take(info);
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      if (error) {
        req.resume();
        entry!.code = error.code;
        entry!.injected = true;
        res.writeHead(error.code, { 'content-type': 'application/json', ...error.headers });
        res.end(JSON.stringify(error.toStatus()));
        return;
      }
    }
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP_BY_HOP.has(k.toLowerCase())) headers[k] = v;
    const upstreamReq = https.request({
      protocol: 'https:',
      hostname: this.upstream.hostname,
      port: this.upstream.port,
      method: req.method,
      path: req.url,
      headers,
      agent: entry?.watch ? false : this.agent,
      ca: entry?.watch ? (this.agent.options.ca as string) : undefined,
    });
    let watch: LiveWatch | undefined;
    upstreamReq.on('response', (up) => {
      if (entry) entry.code = up.statusCode;
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !HOP_BY_HOP.has(k.toLowerCase())) out[k] = v;
      res.writeHead(up.statusCode ?? 502, out);
      if (entry?.watch && up.statusCode === 200) {
        watch = { info: entry, res, upstream: up, close: () => this.watches.delete(watch!) };
        this.watches.add(watch);
        res.flushHeaders();
      }
      up.on('data', (chunk: Buffer) => {
        if (!res.writableEnded) res.write(chunk);
      });
      up.on('end', () => {
        watch?.close();
        if (!res.writableEnded) res.end();
      });
      up.on('error', () => {
        watch?.close();
        if (!res.writableEnded) res.destroy();
      });
    });
    upstreamReq.on('error', (err) => {
      watch?.close();
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (entry) entry.code = 502;
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify(failureStatus(502, 'ServiceUnavailable', `fault proxy: upstream ${err.message}`)));
    });
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
      watch?.close();
    });
    req.pipe(upstreamReq);
  }
}
