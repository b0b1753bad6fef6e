/**
 * TestApiServer: an in-process Kubernetes API server for tests (HTTP on 127.0.0.1, optional HTTPS + bearer token).
 * JSON only. Serves discovery, core/v1 (namespaces, pods (+status, binding, log), services, endpoints, configmaps,
 * secrets, events) and coordination.k8s.io/v1 leases, with watch, Table output and fault injection.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import type { FailureRule, FaultHandle, LatencyRule, RequestInfo, Verb } from './faults.js';
import { FaultInjector } from './faults.js';
import type { DeleteOptions, EventType, RegistryOptions } from './registry.js';
import { ObjectRegistry } from './registry.js';
import type { ResourceType } from './resources.js';
import { apiVersionOf, findResourceType, RESOURCE_TYPES } from './resources.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import type { KubeObject } from './status.js';
import { ApiError, badRequest, methodNotAllowed, unauthorized, unsupportedMediaType } from './status.js';
import type { TlsMaterial } from './tls.js';
import { testTlsMaterial } from './tls.js';

export interface TestApiServerOptions extends RegistryOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** Serve HTTPS: `true` makes a throwaway CA and certificate with openssl; or pass your own PEMs. */
  tls?: boolean | TlsMaterial;
  /** Require `Authorization: Bearer <token>` on every request (kubectl only sends it over HTTPS). */
  token?: string;
  /** Interval of BOOKMARK events on watches with allowWatchBookmarks=true. Default 5000 ms. */
  bookmarkIntervalMs?: number;
  /** Server-side cap on a watch's lifetime when the client sends no timeoutSeconds. Default 1800 s. */
  defaultWatchTimeoutSeconds?: number;
  /** How many requests `requests` keeps. Default 2000. */
  requestLogLimit?: number;
  /** Reported by /version. Default 1.32. */
  version?: { major: string; minor: string };
}

/** One request as the server saw it (for assertions such as "kubectl sent a merge patch"). */
export interface RequestRecord {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType?: string;
  accept?: string;
  verb?: Verb;
  /** `pods`, `pods/status`, ... for resource requests. */
  resource?: string;
  namespace?: string;
  name?: string;
  /** The HTTP status answered (for watches: 200 once the stream started). */
  code?: number;
}

export interface DropWatchesOptions {
  resource?: string;
  namespace?: string;
  /** `end` finishes the chunked response cleanly (default); `destroy` resets the TCP connection. */
  mode?: 'end' | 'destroy';
}

/** Supplies `GET .../pods/{name}/log` (the local kubelet registers one). */
export type PodLogProvider = (namespace: string, name: string, container: string | undefined) => string | undefined;

interface ActiveWatch {
  rt: ResourceType;
  namespace?: string;
  res: ServerResponse;
  close(mode: 'end' | 'destroy'): void;
}

interface Route {
  rt: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
  watchPrefix: boolean;
}

const MAX_BODY_BYTES = 3 * 1024 * 1024;
const JSON_HEADERS = { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' };

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class TestApiServer {
  /** The object store; use it for in-process setup and assertions without HTTP. */
  readonly registry: ObjectRegistry;
  readonly faults = new FaultInjector();
  /** The most recent requests, oldest first. */
  readonly requests: RequestRecord[] = [];
  readonly token: string | undefined;
  /** PEM of the CA when serving HTTPS. */
  readonly caPem: string | undefined;

  private readonly server: Server;
  private readonly watches = new Set<ActiveWatch>();
  private readonly options: TestApiServerOptions;
  private logProvider: PodLogProvider | undefined;
  private stopped = false;
  private baseUrl = '';

  private constructor(options: TestApiServerOptions, tls: TlsMaterial | undefined) {
    this.options = options;
    this.registry = new ObjectRegistry(options);
    this.token = options.token;
    this.caPem = tls?.ca;
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      this.handle(req, res).catch((e: unknown) => this.sendError(res, e));
    };
    this.server = tls ? createHttpsServer({ cert: tls.cert, key: tls.key }, handler) : createHttpServer(handler);
    this.server.keepAliveTimeout = 30_000;
  }

  /** Starts a server on 127.0.0.1 and a free port. */
  static async start(options: TestApiServerOptions = {}): Promise<TestApiServer> {
    const tls = options.tls === true ? await testTlsMaterial() : options.tls || undefined;
    const api = new TestApiServer(options, tls);
    const host = options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      api.server.once('error', reject);
      api.server.listen(options.port ?? 0, host, () => {
        api.server.off('error', reject);
        resolve();
      });
    });
    const { port } = api.server.address() as AddressInfo;
    api.baseUrl = `${tls ? 'https' : 'http'}://${host}:${port}`;
    return api;
  }

  /** e.g. `http://127.0.0.1:41234` */
  get url(): string {
    return this.baseUrl;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get isTls(): boolean {
    return this.caPem !== undefined;
  }

  /** Fails the next `times` (default 1) matching requests with a Status of the given code. */
  failNext(rule: FailureRule): FaultHandle {
    return this.faults.failNext(rule);
  }

  /** Delays matching requests. */
  addLatency(rule: LatencyRule): FaultHandle {
    return this.faults.addLatency(rule);
  }

  /** Closes open watch connections (all, or those for one resource/namespace). Returns how many were closed. */
  dropWatches(options: DropWatchesOptions = {}): number {
    let n = 0;
    for (const w of [...this.watches]) {
      if (options.resource && w.rt.resource !== options.resource) continue;
      if (options.namespace && w.namespace !== options.namespace) continue;
      w.close(options.mode ?? 'end');
      n++;
    }
    return n;
  }

  /** How many watch connections are open (optionally for one resource). */
  activeWatchCount(resource?: string): number {
    return [...this.watches].filter((w) => !resource || w.rt.resource === resource).length;
  }

  /** Drops the watch history: resuming any older watch then gets a 410 Expired ERROR event. */
  compact(): void {
    this.registry.compact();
  }

  setPodLogProvider(provider: PodLogProvider | undefined): void {
    this.logProvider = provider;
  }

  /** Requests matching a filter, e.g. `api.requestsFor({verb: 'patch', resource: 'pods'})`. */
  requestsFor(filter: Partial<Pick<RequestRecord, 'verb' | 'resource' | 'namespace' | 'name' | 'method'>>): RequestRecord[] {
    return this.requests.filter((r) => Object.entries(filter).every(([k, v]) => v === undefined || r[k as keyof RequestRecord] === v));
  }

  /**
   * Resolves with the object once `predicate` holds for it (checked now and on every change), or rejects after
   * `timeoutMs`. `predicate` receives undefined while the object does not exist.
   */
  waitFor(
    resource: string,
    namespace: string | undefined,
    name: string,
    predicate: (o: KubeObject | undefined) => boolean,
    timeoutMs = 20_000,
  ): Promise<KubeObject | undefined> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const o = this.registry.find(resource, namespace, name);
        if (!predicate(o)) return false;
        cleanup();
        resolve(o);
        return true;
      };
      const unsubscribe = this.registry.subscribe(() => {
        check();
      });
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${resource} ${namespace ? `${namespace}/` : ''}${name}`));
      }, timeoutMs);
      const cleanup = (): void => {
        unsubscribe();
        clearTimeout(timer);
      };
      check();
    });
  }

  /** Closes every connection and watch. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const w of [...this.watches]) w.close('end');
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // ------------------------------------------------------------------------------------------------ plumbing

  private record(entry: RequestRecord): RequestRecord {
    this.requests.push(entry);
    const limit = this.options.requestLogLimit ?? 2000;
    if (this.requests.length > limit) this.requests.splice(0, this.requests.length - limit);
    return entry;
  }

  private send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.headersSent) {
      res.end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(code, { ...JSON_HEADERS, ...headers, 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private sendError(res: ServerResponse, e: unknown): void {
    const error = e instanceof ApiError ? e : new ApiError(500, 'InternalError', `Internal error occurred: ${(e as Error)?.message ?? String(e)}`);
    this.send(res, error.code, error.toStatus(), error.headers);
  }

  private async readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) throw new ApiError(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728');
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  private decodeBody(raw: Buffer, contentType: string | undefined, forPatch: boolean): unknown {
    const type = (contentType ?? 'application/json').split(';')[0]!.trim().toLowerCase();
    const text = raw.toString('utf8');
    const jsonLike = forPatch ? ['application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json'] : ['application/json', ''];
    if (jsonLike.includes(type) || (!forPatch && type === '*/*')) {
      try {
        return JSON.parse(text);
      } catch (e) {
        throw badRequest(`couldn't get version/kind; json parse error: ${(e as Error).message}`);
      }
    }
    if (!forPatch && (type === 'application/yaml' || type === 'application/x-yaml' || type === 'text/yaml')) {
      try {
        return parseYaml(text);
      } catch (e) {
        throw badRequest(`yaml: ${(e as Error).message}`);
      }
    }
    if (forPatch) throw unsupportedMediaType(['application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json']);
    throw unsupportedMediaType(['application/json', 'application/yaml']);
  }

  private authorized(req: IncomingMessage): boolean {
    if (!this.token) return true;
    return req.headers.authorization === `Bearer ${this.token}`;
  }

  // ------------------------------------------------------------------------------------------------ routing

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const query = Object.fromEntries(url.searchParams.entries());
    const method = (req.method ?? 'GET').toUpperCase();
    const entry = this.record({
      method,
      path: url.pathname,
      query,
      contentType: req.headers['content-type'],
      accept: req.headers.accept,
    });
    res.on('finish', () => {
      entry.code ??= res.statusCode;
    });
    if (!this.authorized(req)) {
      entry.code = 401;
      this.sendError(res, unauthorized());
      return;
    }
    const segments = url.pathname.split('/').filter((s) => s !== '');
    if (await this.handleDiscovery(method, url.pathname, segments, res)) return;

    let group: string;
    let version: string;
    let rest: string[];
    if (segments[0] === 'api' && segments[1] === 'v1') {
      group = '';
      version = 'v1';
      rest = segments.slice(2);
    } else if (segments[0] === 'apis' && segments.length >= 3) {
      group = segments[1]!;
      version = segments[2]!;
      rest = segments.slice(3);
    } else {
      throw new ApiError(404, 'NotFound', 'the server could not find the requested resource', {});
    }
    const route = this.parseRoute(group, version, rest);
    if (!route) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource', {});
    const verb = this.verbFor(method, route, query);
    const info: RequestInfo = {
      verb,
      resource: route.subresource ? `${route.rt.resource}/${route.subresource}` : route.rt.resource,
      namespace: route.namespace,
      name: route.name,
    };
    Object.assign(entry, info);
    const fault = this.faults.take(info);
    if (fault.delayMs > 0) await sleep(fault.delayMs);
    if (fault.error) throw fault.error;
    await this.dispatch(req, res, route, verb, query, entry);
  }

  private parseRoute(group: string, version: string, segments: string[]): Route | undefined {
    let rest = segments;
    let watchPrefix = false;
    if (rest[0] === 'watch') {
      watchPrefix = true;
      rest = rest.slice(1);
    }
    if (rest.length === 0) return undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      const rt = findResourceType(group, version, rest[2]!);
      if (rt && rt.namespaced) {
        if (rest.length > 5) return undefined;
        const route: Route = { rt, namespace: rest[1], name: rest[3], subresource: rest[4], watchPrefix };
        if (route.subresource && !rt.subresources.includes(route.subresource)) return undefined;
        return route;
      }
    }
    const rt = findResourceType(group, version, rest[0]!);
    if (!rt || rest.length > 3) return undefined;
    if (rt.namespaced && rest.length > 1) return undefined;
    const route: Route = { rt, name: rest[1], subresource: rest[2], watchPrefix };
    if (route.subresource && !rt.subresources.includes(route.subresource)) return undefined;
    return route;
  }

  private verbFor(method: string, route: Route, query: Record<string, string>): Verb {
    const watch = route.watchPrefix || query.watch === 'true' || query.watch === '1';
    switch (method) {
      case 'GET':
        if (watch) return 'watch';
        return route.name ? 'get' : 'list';
      case 'POST':
        return 'create';
      case 'PUT':
        return 'update';
      case 'PATCH':
        return 'patch';
      case 'DELETE':
        return route.name ? 'delete' : 'deletecollection';
      default:
        throw methodNotAllowed();
    }
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse, route: Route, verb: Verb, query: Record<string, string>, entry: RequestRecord): Promise<void> {
    const { rt, namespace, name, subresource } = route;
    const dryRun = query.dryRun === 'All';
    if (subresource === 'log') {
      if (verb !== 'get') throw methodNotAllowed();
      this.servePodLog(res, namespace!, name!, query);
      return;
    }
    if (subresource === 'binding') {
      if (verb !== 'create') throw methodNotAllowed();
      const body = this.decodeBody(await this.readBody(req), req.headers['content-type'], false);
      this.send(res, 201, this.registry.bind(namespace!, name!, body));
      return;
    }
    switch (verb) {
      case 'get': {
        const o = this.registry.get(rt, namespace, name!);
        this.send(res, 200, this.wantsTable(req) ? this.toTable(rt, [o], query, o.metadata.resourceVersion) : o);
        return;
      }
      case 'list': {
        const list = this.registry.list(rt, namespace, {
          labelSelector: parseLabelSelector(query.labelSelector),
          fieldSelector: parseFieldSelector(query.fieldSelector),
          limit: query.limit ? Number(query.limit) : undefined,
          continue: query.continue || undefined,
        });
        if (this.wantsTable(req)) {
          const items = (list.items as KubeObject[]).map((i) => ({ kind: rt.kind, apiVersion: apiVersionOf(rt), ...i }));
          const table = this.toTable(rt, items, query, list.metadata.resourceVersion);
          if (list.metadata.continue) table.metadata.continue = list.metadata.continue;
          if (list.metadata.remainingItemCount !== undefined) table.metadata.remainingItemCount = list.metadata.remainingItemCount;
          this.send(res, 200, table);
        } else {
          this.send(res, 200, list);
        }
        return;
      }
      case 'watch':
        this.serveWatch(req, res, route, query, entry);
        return;
      case 'create': {
        if (name) throw methodNotAllowed();
        const body = this.decodeBody(await this.readBody(req), req.headers['content-type'], false);
        const result = this.registry.create(rt, namespace, body, { dryRun });
        this.send(res, result.code, result.object);
        return;
      }
      case 'update': {
        if (!name) throw methodNotAllowed();
        const body = this.decodeBody(await this.readBody(req), req.headers['content-type'], false);
        const result = this.registry.update(rt, namespace, name, body, { dryRun, subresource });
        this.send(res, result.code, result.object);
        return;
      }
      case 'patch': {
        if (!name) throw methodNotAllowed();
        const contentType = req.headers['content-type'] ?? '';
        const raw = await this.readBody(req);
        const body = this.decodeBody(raw, contentType, true);
        const result = this.registry.patch(rt, namespace, name, contentType, body, { dryRun, subresource });
        this.send(res, result.code, result.object);
        return;
      }
      case 'delete': {
        if (subresource) throw methodNotAllowed();
        const options = await this.deleteOptions(req, query);
        const result = this.registry.delete(rt, namespace, name!, options);
        this.send(res, result.code, result.object);
        return;
      }
      case 'deletecollection': {
        if (rt.resource === 'namespaces') throw methodNotAllowed();
        const options = await this.deleteOptions(req, query);
        const list = this.registry.deleteCollection(
          rt,
          namespace,
          { labelSelector: parseLabelSelector(query.labelSelector), fieldSelector: parseFieldSelector(query.fieldSelector) },
          options,
        );
        this.send(res, 200, list);
        return;
      }
    }
  }

  private async deleteOptions(req: IncomingMessage, query: Record<string, string>): Promise<DeleteOptions> {
    const raw = await this.readBody(req);
    let body: KubeObject = {};
    if (raw.length > 0) {
      const decoded = this.decodeBody(raw, req.headers['content-type'], false);
      if (decoded && typeof decoded === 'object') body = decoded as KubeObject;
    }
    const options: DeleteOptions = {};
    const grace = body.gracePeriodSeconds ?? (query.gracePeriodSeconds !== undefined ? Number(query.gracePeriodSeconds) : undefined);
    if (grace !== undefined && grace !== null) {
      if (!Number.isInteger(Number(grace))) throw badRequest(`invalid gracePeriodSeconds: ${String(grace)}`);
      options.gracePeriodSeconds = Number(grace);
    }
    if (body.preconditions) options.preconditions = body.preconditions;
    options.propagationPolicy = body.propagationPolicy ?? query.propagationPolicy;
    const dryRun = body.dryRun ?? (query.dryRun ? [query.dryRun] : []);
    options.dryRun = Array.isArray(dryRun) && dryRun.includes('All');
    return options;
  }

  private servePodLog(res: ServerResponse, namespace: string, name: string, query: Record<string, string>): void {
    const pod = this.registry.get('pods', namespace, name);
    const text = this.logProvider?.(namespace, name, query.container);
    if (text === undefined) {
      const container = query.container ?? pod.spec?.containers?.[0]?.name ?? '';
      throw badRequest(`container "${container}" in pod "${name}" is waiting to start: no logs available`);
    }
    let out = text;
    if (query.tailLines !== undefined) {
      const lines = out.split('\n');
      if (lines[lines.length - 1] === '') lines.pop();
      out = lines.slice(Math.max(0, lines.length - Number(query.tailLines))).join('\n') + (lines.length > 0 ? '\n' : '');
    }
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-cache, private' });
    res.end(out);
  }

  // ------------------------------------------------------------------------------------------------ watch

  private serveWatch(req: IncomingMessage, res: ServerResponse, route: Route, query: Record<string, string>, entry: RequestRecord): void {
    const { rt, namespace, name } = route;
    const labelSelector = parseLabelSelector(query.labelSelector);
    const fieldSelector = parseFieldSelector(query.fieldSelector);
    const table = this.wantsTable(req);
    res.writeHead(200, { ...JSON_HEADERS, 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    entry.code = 200;
    let closed = false;
    let firstTable = true;
    const write = (type: EventType | 'ERROR' | 'BOOKMARK', object: KubeObject): void => {
      if (closed) return;
      let payload = object;
      if (table && (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')) {
        payload = this.toTable(rt, [object], query, object.metadata?.resourceVersion, !firstTable);
        firstTable = false;
      }
      res.write(`${JSON.stringify({ type, object: payload })}\n`);
    };
    const timers: NodeJS.Timeout[] = [];
    let cancel: (() => void) | undefined;
    const watch: ActiveWatch = {
      rt,
      namespace,
      res,
      close: (mode) => {
        if (closed) return;
        closed = true;
        cancel?.();
        for (const t of timers) clearTimeout(t);
        this.watches.delete(watch);
        if (mode === 'destroy') res.socket?.destroy();
        else res.end();
      },
    };
    try {
      cancel = this.registry.watch(rt, { namespace, name, labelSelector, fieldSelector, resourceVersion: query.resourceVersion }, write);
    } catch (e) {
      if (e instanceof ApiError) {
        write('ERROR', e.toStatus());
        closed = true;
        res.end();
        return;
      }
      throw e;
    }
    this.watches.add(watch);
    res.on('close', () => watch.close('end'));
    const timeoutSeconds = query.timeoutSeconds !== undefined ? Number(query.timeoutSeconds) : (this.options.defaultWatchTimeoutSeconds ?? 1800);
    if (Number.isFinite(timeoutSeconds) && timeoutSeconds > 0) timers.push(setTimeout(() => watch.close('end'), timeoutSeconds * 1000));
    if (query.allowWatchBookmarks === 'true') {
      const interval = this.options.bookmarkIntervalMs ?? 5000;
      const tick = (): void => {
        write('BOOKMARK', { kind: rt.kind, apiVersion: apiVersionOf(rt), metadata: { resourceVersion: this.registry.resourceVersion } });
        timers.push(setTimeout(tick, interval));
      };
      timers.push(setTimeout(tick, interval));
    }
  }

  // ------------------------------------------------------------------------------------------------ tables

  private wantsTable(req: IncomingMessage): boolean {
    return /as=Table/.test(req.headers.accept ?? '');
  }

  private toTable(rt: ResourceType, items: KubeObject[], query: Record<string, string>, resourceVersion: string | undefined, omitColumns = false): KubeObject {
    const now = Date.now();
    const include = query.includeObject ?? 'Metadata';
    const rows = items.map((o) => {
      const row: KubeObject = { cells: rt.table.cells(o, now) };
      if (include === 'Object') row.object = o;
      else if (include === 'Metadata') row.object = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
      return row;
    });
    const table: KubeObject = { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: resourceVersion ?? this.registry.resourceVersion } };
    if (!omitColumns) table.columnDefinitions = rt.table.columns.map((c) => ({ format: '', ...c }));
    table.rows = rows;
    return table;
  }

  // ------------------------------------------------------------------------------------------------ discovery

  private async handleDiscovery(method: string, path: string, segments: string[], res: ServerResponse): Promise<boolean> {
    if (method !== 'GET') return false;
    const addr = `${this.options.host ?? '127.0.0.1'}:${this.port}`;
    if (path === '/version' || path === '/version/') {
      const v = this.options.version ?? { major: '1', minor: '32' };
      this.send(res, 200, {
        major: v.major,
        minor: v.minor,
        gitVersion: `v${v.major}.${v.minor}.0-fnr-test`,
        gitCommit: '0000000000000000000000000000000000000000',
        gitTreeState: 'clean',
        buildDate: '2025-01-01T00:00:00Z',
        goVersion: 'go1.23.0',
        compiler: 'gc',
        platform: 'linux/amd64',
      });
      return true;
    }
    if (['/healthz', '/livez', '/readyz'].includes(path)) {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('ok');
      return true;
    }
    if (path === '/api' || path === '/api/') {
      this.send(res, 200, { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: addr }] });
      return true;
    }
    const groups = [...new Set(RESOURCE_TYPES.filter((r) => r.group).map((r) => `${r.group}/${r.version}`))].map((gv) => {
      const [name, version] = gv.split('/') as [string, string];
      const versionEntry = { groupVersion: gv, version };
      return { name, versions: [versionEntry], preferredVersion: versionEntry };
    });
    if (path === '/apis' || path === '/apis/') {
      this.send(res, 200, { kind: 'APIGroupList', apiVersion: 'v1', groups });
      return true;
    }
    if (segments[0] === 'apis' && segments.length === 2) {
      const group = groups.find((g) => g.name === segments[1]);
      if (!group) return false;
      this.send(res, 200, { kind: 'APIGroup', apiVersion: 'v1', ...group });
      return true;
    }
    let gv: { group: string; version: string } | undefined;
    if (segments.length === 2 && segments[0] === 'api' && segments[1] === 'v1') gv = { group: '', version: 'v1' };
    if (segments.length === 3 && segments[0] === 'apis') gv = { group: segments[1]!, version: segments[2]! };
    if (!gv) return false;
    const types = RESOURCE_TYPES.filter((r) => r.group === gv!.group && r.version === gv!.version);
    if (types.length === 0) return false;
    const resources: KubeObject[] = [];
    for (const rt of types) {
      const verbs = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'].filter((v) => !(rt.resource === 'namespaces' && v === 'deletecollection'));
      const entry: KubeObject = { name: rt.resource, singularName: rt.singular, namespaced: rt.namespaced, kind: rt.kind, verbs };
      if (rt.shortNames.length > 0) entry.shortNames = rt.shortNames;
      if (rt.categories.length > 0) entry.categories = rt.categories;
      resources.push(entry);
      for (const sub of rt.subresources) {
        const subVerbs = sub === 'binding' ? ['create'] : sub === 'log' ? ['get'] : ['get', 'patch', 'update'];
        resources.push({ name: `${rt.resource}/${sub}`, singularName: '', namespaced: rt.namespaced, kind: sub === 'binding' ? 'Binding' : rt.kind, verbs: subVerbs });
      }
    }
    this.send(res, 200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: gv.group ? `${gv.group}/${gv.version}` : gv.version, resources });
    return true;
  }
}
