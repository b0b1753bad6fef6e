/**
 * List-then-watch cache of one resource collection (what client-go calls a reflector + informer): lists, watches
 * from the list's resourceVersion, resumes after a closed stream and relists after 410 Expired.
 */
import type { KubeRestClient } from './client.js';
import type { KubeObject } from './status.js';

export interface ReflectorHandlers {
  onAdd?(object: KubeObject): void;
  onUpdate?(object: KubeObject, old: KubeObject): void;
  onDelete?(object: KubeObject): void;
}

export interface ReflectorOptions extends ReflectorHandlers {
  labelSelector?: string;
  fieldSelector?: string;
  /** Delay before retrying after an error; default 200 ms, doubling up to 2 s. */
  retryMs?: number;
}

function keyOf(o: KubeObject): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

export class Reflector {
  readonly cache = new Map<string, KubeObject>();
  private resourceVersion = '';
  private stopped = false;
  private current: { stop(): void } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;
  private synced!: () => void;
  private readonly hasSynced: Promise<void>;
  /** The last error seen (for debugging). */
  lastError: Error | undefined;

  constructor(
    private readonly client: KubeRestClient,
    /** The collection path, e.g. `/api/v1/pods` or `/api/v1/namespaces/x/services`. */
    private readonly path: string,
    private readonly options: ReflectorOptions = {},
  ) {
    this.hasSynced = new Promise((resolve) => (this.synced = resolve));
  }

  /** Starts the loop; resolves once the first list has been applied. */
  start(): Promise<void> {
    this.loop ??= this.run();
    return this.hasSynced;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.stop();
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    await this.loop;
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.cache.get(`${namespace ?? ''}/${name}`);
  }

  list(): KubeObject[] {
    return [...this.cache.values()];
  }

  private wake: (() => void) | undefined;

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }

  private async run(): Promise<void> {
    let backoff = this.options.retryMs ?? 200;
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        this.synced();
        const error = await this.watchOnce();
        if (error) throw error;
        backoff = this.options.retryMs ?? 200;
        // A stream the server closed: resume from the last resourceVersion (after a breath, never a hot loop).
        if (!this.stopped) await this.sleep(10);
      } catch (e) {
        if (this.stopped) break;
        this.lastError = e as Error;
        await this.sleep(backoff);
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  private async relist(): Promise<void> {
    const list = await this.client.get(this.path, { labelSelector: this.options.labelSelector, fieldSelector: this.options.fieldSelector });
    if (this.stopped) return;
    const items: KubeObject[] = Array.isArray(list.items) ? list.items : [];
    const kind = typeof list.kind === 'string' ? list.kind.replace(/List$/, '') : undefined;
    const apiVersion = list.apiVersion;
    const seen = new Set<string>();
    for (const raw of items) {
      const item: KubeObject = { kind, apiVersion, ...raw };
      const key = keyOf(item);
      seen.add(key);
      const old = this.cache.get(key);
      this.cache.set(key, item);
      if (!old) this.options.onAdd?.(item);
      else if (old.metadata?.resourceVersion !== item.metadata?.resourceVersion) this.options.onUpdate?.(item, old);
    }
    for (const [key, old] of [...this.cache]) {
      if (!seen.has(key)) {
        this.cache.delete(key);
        this.options.onDelete?.(old);
      }
    }
    this.resourceVersion = String(list.metadata?.resourceVersion ?? '');
  }

  /** Watches until the stream ends; returns an error to back off on, or undefined to resume at once. */
  private async watchOnce(): Promise<Error | undefined> {
    let expired = false;
    const handle = this.client.watch(
      this.path,
      {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        labelSelector: this.options.labelSelector,
        fieldSelector: this.options.fieldSelector,
      },
      (type, object) => {
        if (this.stopped) return;
        if (type === 'ERROR') {
          if (object.code === 410) expired = true;
          return;
        }
        const rv = object.metadata?.resourceVersion;
        if (type === 'BOOKMARK') {
          if (rv) this.resourceVersion = String(rv);
          return;
        }
        const key = keyOf(object);
        const old = this.cache.get(key);
        if (type === 'DELETED') {
          this.cache.delete(key);
          this.options.onDelete?.(object);
        } else {
          this.cache.set(key, object);
          if (old) this.options.onUpdate?.(object, old);
          else this.options.onAdd?.(object);
        }
        if (rv) this.resourceVersion = String(rv);
      },
    );
    this.current = handle;
    const error = await handle.done;
    this.current = undefined;
    if (expired) {
      this.resourceVersion = '';
      return undefined;
    }
    return error;
  }
}
