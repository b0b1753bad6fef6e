/**
 * A small Kubernetes REST client over node:http(s), used by the local kubelet (and handy in tests that want raw
 * HTTP). It talks to any API server given a URL, an optional bearer token and an optional CA.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { KubeObject } from './status.js';

export interface ClusterEndpoint {
  url: string;
  token?: string;
  /** PEM CA bundle for https. */
  ca?: string;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  accept?: string;
  /** Abort after this many ms. Default 30000. */
  timeoutMs?: number;
}

export interface RawResponse {
  code: number;
  headers: IncomingMessage['headers'];
  text: string;
  /** The parsed JSON body, when the body is JSON. */
  body: KubeObject | undefined;
}

/** A non-2xx answer; `status` is the Status object the server sent. */
export class KubeRequestError extends Error {
  readonly code: number;
  readonly status: KubeObject | undefined;
  constructor(code: number, status: KubeObject | undefined, fallback: string) {
    super(status?.message ? String(status.message) : fallback);
    this.name = 'KubeRequestError';
    this.code = code;
    this.status = status;
  }
  get reason(): string | undefined {
    return this.status?.reason as string | undefined;
  }
}

export interface WatchEventHandler {
  (type: string, object: KubeObject): void;
}

export interface WatchHandle {
  stop(): void;
  /** Resolves when the stream ends (by the server, by stop(), or by an error, which it carries). */
  done: Promise<Error | undefined>;
}

/** Builds `/api/v1/namespaces/ns/pods/name/status` style paths. */
export function resourcePath(apiVersion: string, resource: string, namespace?: string, name?: string, subresource?: string): string {
  let path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  if (namespace) path += `/namespaces/${encodeURIComponent(namespace)}`;
  path += `/${resource}`;
  if (name) path += `/${encodeURIComponent(name)}`;
  if (subresource) path += `/${subresource}`;
  return path;
}

export class KubeRestClient {
  readonly endpoint: ClusterEndpoint;
  private readonly agent: HttpAgent | HttpsAgent;
  private readonly https: boolean;
  private readonly open = new Set<ClientRequest>();

  constructor(endpoint: ClusterEndpoint) {
    this.endpoint = endpoint;
    this.https = endpoint.url.startsWith('https:');
    this.agent = this.https ? new HttpsAgent({ keepAlive: true, ca: endpoint.ca }) : new HttpAgent({ keepAlive: true });
  }

  private start(method: string, path: string, options: RequestOptions): { req: ClientRequest; payload: Buffer | undefined } {
    const url = new URL(path, this.endpoint.url);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string | number> = { Accept: options.accept ?? 'application/json' };
    if (this.endpoint.token) headers.Authorization = `Bearer ${this.endpoint.token}`;
    let payload: Buffer | undefined;
    if (options.body !== undefined) {
      payload = Buffer.from(typeof options.body === 'string' ? options.body : JSON.stringify(options.body));
      headers['Content-Type'] = options.contentType ?? 'application/json';
      headers['Content-Length'] = payload.length;
    }
    const requestFn = this.https ? httpsRequest : httpRequest;
    const req = requestFn(url, { method, headers, agent: this.agent });
    this.open.add(req);
    req.on('close', () => this.open.delete(req));
    return { req, payload };
  }

  /** Sends a request and returns the raw answer, whatever its status code. */
  raw(method: string, path: string, options: RequestOptions = {}): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const { req, payload } = this.start(method, path, options);
      req.setTimeout(options.timeoutMs ?? 30_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: KubeObject | undefined;
          try {
            body = text ? (JSON.parse(text) as KubeObject) : undefined;
          } catch {
            body = undefined;
          }
          resolve({ code: res.statusCode ?? 0, headers: res.headers, text, body });
        });
      });
      req.end(payload);
    });
  }

  /** Sends a request; resolves with the JSON body of a 2xx answer, rejects with KubeRequestError otherwise. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<KubeObject> {
    const res = await this.raw(method, path, options);
    if (res.code < 200 || res.code > 299) throw new KubeRequestError(res.code, res.body, `${method} ${path}: HTTP ${res.code} ${res.text.slice(0, 200)}`);
    return res.body ?? {};
  }

  get(path: string, query?: RequestOptions['query']): Promise<KubeObject> {
    return this.request('GET', path, { query });
  }

  create(path: string, body: unknown): Promise<KubeObject> {
    return this.request('POST', path, { body });
  }

  replace(path: string, body: unknown): Promise<KubeObject> {
    return this.request('PUT', path, { body });
  }

  patch(path: string, body: unknown, type: 'merge' | 'strategic' | 'json' = 'merge'): Promise<KubeObject> {
    const contentType = { merge: 'application/merge-patch+json', strategic: 'application/strategic-merge-patch+json', json: 'application/json-patch+json' }[type];
    return this.request('PATCH', path, { body, contentType });
  }

  delete(path: string, options?: KubeObject): Promise<KubeObject> {
    return this.request('DELETE', path, options ? { body: { kind: 'DeleteOptions', apiVersion: 'v1', ...options } } : {});
  }

  /** Opens a watch stream (`?watch=true`), calling `onEvent` for every event line. */
  watch(path: string, query: Record<string, string | number | boolean | undefined>, onEvent: WatchEventHandler): WatchHandle {
    let stopped = false;
    let resolveDone!: (e: Error | undefined) => void;
    const done = new Promise<Error | undefined>((r) => (resolveDone = r));
    let settled = false;
    const finish = (e: Error | undefined): void => {
      if (settled) return;
      settled = true;
      resolveDone(e);
    };
    const { req } = this.start('GET', path, { query: { ...query, watch: 'true' } });
    req.on('error', (e) => finish(stopped ? undefined : e));
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let status: KubeObject | undefined;
          try {
            status = JSON.parse(Buffer.concat(chunks).toString('utf8')) as KubeObject;
          } catch {
            status = undefined;
          }
          finish(new KubeRequestError(res.statusCode ?? 0, status, `watch ${path}: HTTP ${res.statusCode}`));
        });
        return;
      }
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line || stopped) continue;
          try {
            const event = JSON.parse(line) as { type: string; object: KubeObject };
            onEvent(event.type, event.object);
          } catch {
            // ignore malformed lines
          }
        }
      });
      res.on('end', () => finish(undefined));
      res.on('close', () => finish(undefined));
      res.on('error', (e) => finish(stopped ? undefined : e));
    });
    req.end();
    return {
      stop: () => {
        stopped = true;
        req.destroy();
        finish(undefined);
      },
      done,
    };
  }

  /** Aborts open requests and closes pooled connections. */
  close(): void {
    for (const req of this.open) req.destroy();
    this.open.clear();
    this.agent.destroy();
  }
}
