/**
 * The object store and the write semantics of kube-apiserver (registry.Store + etcd3 storage):
 * one global resourceVersion, create/update/patch/delete with preconditions, graceful pod deletion,
 * finalizers, namespace termination, and a bounded event history for watches.
 */
import { randomUUID } from 'node:crypto';
import type { JsonPatchOperation } from './patch.js';
import {
  applyJsonPatch,
  applyMergePatch,
  applyStrategicMergePatch,
  decodeJsonPatch,
  deepClone,
  deepEqual,
  isPlainObject,
  JsonPatchApplyError,
  JsonPatchDecodeError,
  PatchApplyError,
} from './patch.js';
import type { DefaultingContext, ResourceType } from './resources.js';
import { apiVersionOf, RESOURCE_TYPES, resourceTypeByName, validateObjectMeta } from './resources.js';
import type { FieldSelector, LabelSelector } from './selectors.js';
import { checkFieldSelector, matchFields, matchLabels } from './selectors.js';
import type { KubeObject } from './status.js';
import {
  alreadyExists,
  ApiError,
  badRequest,
  conflict,
  expired,
  forbidden,
  internalError,
  invalid,
  notFound,
  STALE_OBJECT_MESSAGE,
  unsupportedMediaType,
} from './status.js';

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  rv: number;
  type: EventType;
  rt: ResourceType;
  /** The object after the change (for DELETED: its last state, with the deletion's resourceVersion). */
  object: KubeObject;
  /** The object before the change (MODIFIED and DELETED). */
  old?: KubeObject;
}

export interface WriteOptions {
  dryRun?: boolean;
}

export interface DeleteOptions extends WriteOptions {
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: string;
}

export interface ListOptions {
  labelSelector?: LabelSelector;
  fieldSelector?: FieldSelector;
  limit?: number;
  continue?: string;
}

export interface WatchOptions {
  namespace?: string;
  name?: string;
  labelSelector?: LabelSelector;
  fieldSelector?: FieldSelector;
  resourceVersion?: string;
}

export interface WriteResult {
  object: KubeObject;
  /** 200 or 201 */
  code: number;
}

export const PATCH_TYPES = {
  json: 'application/json-patch+json',
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;

const NAME_SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

export function nowTimestamp(offsetSeconds = 0): string {
  return new Date(Math.floor(Date.now() / 1000) * 1000 + offsetSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function meta(o: KubeObject): KubeObject {
  if (!isPlainObject(o.metadata)) o.metadata = {};
  return o.metadata as KubeObject;
}

export interface RegistryOptions {
  /** How many events the watch history keeps; older resourceVersions get 410 Expired. Default 1000. */
  historyLimit?: number;
  /** The first resourceVersion handed out. Default 1000. */
  initialResourceVersion?: number;
  /** Namespaces that exist from the start. Default: default, kube-system, kube-public, kube-node-lease. */
  namespaces?: string[];
}

type Listener = (event: StoreEvent) => void;

export class ObjectRegistry {
  private rv: number;
  private readonly objects = new Map<string, KubeObject>();
  private history: StoreEvent[] = [];
  /** The highest resourceVersion whose event is no longer in the history. */
  private compactedRv: number;
  private readonly historyLimit: number;
  private readonly listeners = new Set<Listener>();
  private clusterIpCounter = 10;
  private nodePortCounter = 30000;
  private readonly terminatingNamespaces = new Set<string>();
  private readonly defaulting: DefaultingContext;

  constructor(options: RegistryOptions = {}) {
    this.rv = options.initialResourceVersion ?? 1000;
    this.compactedRv = this.rv;
    this.historyLimit = options.historyLimit ?? 1000;
    this.defaulting = {
      allocateClusterIP: () => {
        const n = this.clusterIpCounter++;
        return `10.96.${Math.floor(n / 256) % 256}.${n % 256}`;
      },
      allocateNodePort: () => this.nodePortCounter++,
    };
    for (const ns of options.namespaces ?? ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
      this.create('namespaces', undefined, { metadata: { name: ns } });
    }
  }

  /** The current (latest) global resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** The oldest resourceVersion a watch can still resume from. */
  get oldestResourceVersion(): string {
    return String(this.compactedRv);
  }

  /** Drops the watch history, so that resuming a watch from any earlier resourceVersion gets 410 Expired. */
  compact(): void {
    this.history = [];
    this.compactedRv = this.rv;
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // ------------------------------------------------------------------------------------------------ storage

  private key(rt: ResourceType, namespace: string | undefined, name: string): string {
    return `${rt.group}/${rt.resource}/${rt.namespaced ? (namespace ?? '') : ''}/${name}`;
  }

  private emit(event: StoreEvent): void {
    this.history.push(event);
    if (this.history.length > this.historyLimit) {
      const dropped = this.history.splice(0, this.history.length - this.historyLimit);
      this.compactedRv = dropped[dropped.length - 1]!.rv;
    }
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch {
        // A broken watcher must not break writes.
      }
    }
  }

  private persist(rt: ResourceType, object: KubeObject, type: 'ADDED' | 'MODIFIED', old?: KubeObject): KubeObject {
    this.rv += 1;
    meta(object).resourceVersion = String(this.rv);
    const stored = deepClone(object);
    this.objects.set(this.key(rt, stored.metadata.namespace, stored.metadata.name), stored);
    this.emit({ rv: this.rv, type, rt, object: deepClone(stored), old });
    return deepClone(stored);
  }

  private removeStored(rt: ResourceType, current: KubeObject): KubeObject {
    this.rv += 1;
    const final = deepClone(current);
    final.metadata.resourceVersion = String(this.rv);
    this.objects.delete(this.key(rt, current.metadata.namespace, current.metadata.name));
    this.emit({ rv: this.rv, type: 'DELETED', rt, object: deepClone(final), old: deepClone(current) });
    if (rt.namespaced && this.terminatingNamespaces.has(current.metadata.namespace)) setImmediate(() => this.finishNamespace(current.metadata.namespace));
    return final;
  }

  private withTypeMeta(rt: ResourceType, o: KubeObject): KubeObject {
    const { kind: _k, apiVersion: _a, ...rest } = o;
    void _k;
    void _a;
    return { kind: rt.kind, apiVersion: apiVersionOf(rt), ...rest };
  }

  private type(rt: ResourceType | string): ResourceType {
    return typeof rt === 'string' ? resourceTypeByName(rt) : rt;
  }

  private fieldsOf(rt: ResourceType, o: KubeObject): Record<string, string> {
    const fields: Record<string, string> = { 'metadata.name': String(o.metadata?.name ?? '') };
    if (rt.namespaced) fields['metadata.namespace'] = String(o.metadata?.namespace ?? '');
    for (const [label, get] of Object.entries(rt.fieldLabels)) fields[label] = get(o);
    return fields;
  }

  private supportedFields(rt: ResourceType): string[] {
    return ['metadata.name', ...(rt.namespaced ? ['metadata.namespace'] : []), ...Object.keys(rt.fieldLabels)];
  }

  matches(rt: ResourceType, o: KubeObject, labelSelector: LabelSelector = [], fieldSelector: FieldSelector = []): boolean {
    return matchLabels(labelSelector, o.metadata?.labels) && matchFields(fieldSelector, this.fieldsOf(rt, o));
  }

  private requireNamespace(rt: ResourceType, namespace: string | undefined, name: string, creating: boolean): void {
    if (!rt.namespaced) return;
    if (!namespace) throw badRequest('the server could not find the requested resource: namespace is required');
    const ns = this.objects.get(this.key(this.type('namespaces'), undefined, namespace));
    if (!ns) throw notFound('namespaces', namespace);
    if (creating && ns.metadata.deletionTimestamp) {
      throw forbidden(rt.resource, name, `unable to create new content in namespace ${namespace} because it is being terminated`, rt.group);
    }
  }

  // ------------------------------------------------------------------------------------------------ reads

  get(resource: ResourceType | string, namespace: string | undefined, name: string): KubeObject {
    const rt = this.type(resource);
    const found = this.objects.get(this.key(rt, namespace, name));
    if (!found) throw notFound(rt.resource, name, rt.group);
    return this.withTypeMeta(rt, deepClone(found));
  }

  /** Like get, but undefined instead of a 404. */
  find(resource: ResourceType | string, namespace: string | undefined, name: string): KubeObject | undefined {
    const rt = this.type(resource);
    const found = this.objects.get(this.key(rt, namespace, name));
    return found ? this.withTypeMeta(rt, deepClone(found)) : undefined;
  }

  /** A list as the API returns it: items without kind/apiVersion, metadata.resourceVersion, continue tokens. */
  list(resource: ResourceType | string, namespace: string | undefined, options: ListOptions = {}): KubeObject {
    const rt = this.type(resource);
    if (options.fieldSelector) checkFieldSelector(options.fieldSelector, this.supportedFields(rt));
    const prefix = `${rt.group}/${rt.resource}/${rt.namespaced && namespace ? `${namespace}/` : ''}`;
    let start = '';
    let listRv = this.rv;
    if (options.continue) {
      try {
        const token = JSON.parse(Buffer.from(options.continue, 'base64').toString('utf8')) as { rv: number; start: string };
        if (typeof token.start !== 'string' || typeof token.rv !== 'number') throw new Error('bad token');
        start = token.start;
        listRv = token.rv;
      } catch {
        throw badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
      }
    }
    const keys = [...this.objects.keys()].filter((k) => k.startsWith(prefix) && (!start || k > start)).sort();
    const items: KubeObject[] = [];
    let nextStart: string | undefined;
    let remaining = 0;
    for (const k of keys) {
      const o = this.objects.get(k)!;
      if (!this.matches(rt, o, options.labelSelector, options.fieldSelector)) continue;
      if (options.limit && options.limit > 0 && items.length >= options.limit) {
        remaining++;
        continue;
      }
      const { kind: _k, apiVersion: _a, ...item } = deepClone(o);
      void _k;
      void _a;
      items.push(item);
      nextStart = k;
    }
    const listMeta: KubeObject = { resourceVersion: String(listRv) };
    if (remaining > 0 && nextStart) {
      listMeta.continue = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: listRv, start: nextStart }), 'utf8').toString('base64');
      if (!options.labelSelector?.length && !options.fieldSelector?.length) listMeta.remainingItemCount = remaining;
    }
    return { kind: rt.listKind, apiVersion: apiVersionOf(rt), metadata: listMeta, items };
  }

  // ------------------------------------------------------------------------------------------------ create

  private checkBody(rt: ResourceType, body: unknown): KubeObject {
    if (!isPlainObject(body)) throw badRequest(`Object 'Kind' is missing in '${JSON.stringify(body)}'`);
    if (body.kind !== undefined && body.kind !== rt.kind) {
      throw badRequest(`${String(body.kind)} in version "${rt.version}" cannot be handled as a ${rt.kind}: the object provided is unrecognized (${String(body.kind)})`);
    }
    if (body.apiVersion !== undefined && body.apiVersion !== apiVersionOf(rt)) {
      throw badRequest(`the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersionOf(rt)})`);
    }
    const o = deepClone(body);
    meta(o);
    return o;
  }

  private generateName(base: string): string {
    const prefix = base.length > 58 ? base.slice(0, 58) : base;
    let suffix = '';
    for (let i = 0; i < 5; i++) suffix += NAME_SUFFIX_CHARS[Math.floor(Math.random() * NAME_SUFFIX_CHARS.length)];
    return prefix + suffix;
  }

  create(resource: ResourceType | string, namespace: string | undefined, body: unknown, options: WriteOptions = {}): WriteResult {
    const rt = this.type(resource);
    const o = this.checkBody(rt, body);
    const m = meta(o);
    if (rt.namespaced) {
      if (m.namespace && namespace && m.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      m.namespace = namespace ?? m.namespace;
    } else {
      delete m.namespace;
    }
    if (!m.name && m.generateName) m.name = this.generateName(String(m.generateName));
    const name = String(m.name ?? '');
    if (m.resourceVersion !== undefined && m.resourceVersion !== '') throw internalError('resourceVersion should not be set on objects to be created');
    if (name) this.requireNamespace(rt, m.namespace, name, true);
    delete m.resourceVersion;
    delete m.deletionTimestamp;
    delete m.deletionGracePeriodSeconds;
    delete m.managedFields;
    delete m.selfLink;
    m.uid = randomUUID();
    m.creationTimestamp = nowTimestamp();
    rt.prepareForCreate(o, this.defaulting);
    rt.applyDefaults(o);
    const errors = [...validateObjectMeta(rt, o), ...rt.validate(o)];
    if (errors.length > 0) throw invalid(rt.kind, name, errors, rt.group);
    if (this.objects.has(this.key(rt, m.namespace, name))) throw alreadyExists(rt.resource, name, rt.group);
    if (options.dryRun) return { object: this.withTypeMeta(rt, o), code: 201 };
    const stored = this.persist(rt, this.withTypeMeta(rt, o), 'ADDED');
    return { object: stored, code: 201 };
  }

  // ------------------------------------------------------------------------------------------------ update

  /** PUT of the main resource or of `/status`. */
  update(resource: ResourceType | string, namespace: string | undefined, name: string, body: unknown, options: WriteOptions & { subresource?: string } = {}): WriteResult {
    const rt = this.type(resource);
    const o = this.checkBody(rt, body);
    const m = meta(o);
    if (m.name !== undefined && m.name !== name) throw badRequest(`the name of the object (${String(m.name)}) does not match the name on the URL (${name})`);
    if (rt.namespaced && m.namespace && namespace && m.namespace !== namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    const current = this.objects.get(this.key(rt, namespace, name));
    if (!current) {
      if (rt.allowCreateOnUpdate && !options.subresource) {
        delete m.resourceVersion;
        return this.create(rt, namespace, { ...o, metadata: { ...m, name } }, options);
      }
      throw notFound(rt.resource, name, rt.group);
    }
    if (m.resourceVersion !== undefined && m.resourceVersion !== '' && String(m.resourceVersion) !== current.metadata.resourceVersion) {
      throw conflict(rt.resource, name, STALE_OBJECT_MESSAGE, rt.group);
    }
    m.name = name;
    if (rt.namespaced) m.namespace = namespace;
    return this.commit(rt, current, o, options);
  }

  /** Applies a new desired state to a stored object: the shared tail of update and patch. */
  private commit(rt: ResourceType, current: KubeObject, candidate: KubeObject, options: WriteOptions & { subresource?: string }): WriteResult {
    const name = current.metadata.name as string;
    const cm = meta(candidate);
    if (cm.uid !== undefined && cm.uid !== '' && cm.uid !== current.metadata.uid) {
      throw conflict(rt.resource, name, `Precondition failed: UID in precondition: ${String(cm.uid)}, UID in object meta: ${String(current.metadata.uid)}`, rt.group);
    }
    let next: KubeObject;
    if (options.subresource === 'status') {
      next = deepClone(current);
      if (candidate.status === undefined) delete next.status;
      else next.status = deepClone(candidate.status);
    } else {
      next = candidate;
      const nm = meta(next);
      const cur = current.metadata as KubeObject;
      for (const field of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'namespace', 'name']) {
        if (cur[field] === undefined) delete nm[field];
        else nm[field] = cur[field];
      }
      if (nm.generateName === undefined && cur.generateName !== undefined) nm.generateName = cur.generateName;
      delete nm.managedFields;
      delete nm.selfLink;
      if (rt.hasStatus) {
        if (current.status === undefined) delete next.status;
        else next.status = deepClone(current.status);
      }
      rt.prepareForUpdate(next, current);
    }
    next = this.withTypeMeta(rt, next);
    rt.applyDefaults(next);
    const errors = [...validateObjectMeta(rt, next), ...rt.validate(next)];
    if (options.subresource !== 'status') errors.push(...rt.validateUpdate(next, current));
    if (current.metadata.deletionTimestamp) {
      const before: string[] = Array.isArray(current.metadata.finalizers) ? current.metadata.finalizers : [];
      const after: string[] = Array.isArray(next.metadata.finalizers) ? next.metadata.finalizers : [];
      const added = after.filter((f) => !before.includes(f));
      if (added.length > 0) {
        errors.push({
          type: 'FieldValueForbidden',
          field: 'metadata.finalizers',
          detail: `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(', ')}}`,
        });
      }
    }
    if (errors.length > 0) throw invalid(rt.kind, name, errors, rt.group);
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    const currentTyped = this.withTypeMeta(rt, current);
    if (deepEqual(next, currentTyped)) return { object: deepClone(currentTyped), code: 200 };
    if (options.dryRun) return { object: next, code: 200 };
    const stored = this.persist(rt, next, 'MODIFIED', deepClone(currentTyped));
    if (this.readyToRemove(stored)) return { object: this.withTypeMeta(rt, this.removeStored(rt, stored)), code: 200 };
    return { object: stored, code: 200 };
  }

  private readyToRemove(o: KubeObject): boolean {
    const m = o.metadata as KubeObject;
    if (!m.deletionTimestamp) return false;
    if (Array.isArray(m.finalizers) && m.finalizers.length > 0) return false;
    return !m.deletionGracePeriodSeconds;
  }

  // ------------------------------------------------------------------------------------------------ patch

  patch(
    resource: ResourceType | string,
    namespace: string | undefined,
    name: string,
    contentType: string,
    body: unknown,
    options: WriteOptions & { subresource?: string } = {},
  ): WriteResult {
    const rt = this.type(resource);
    const type = contentType.split(';')[0]!.trim().toLowerCase();
    if (![PATCH_TYPES.json, PATCH_TYPES.merge, PATCH_TYPES.strategic].includes(type as never)) {
      throw unsupportedMediaType([PATCH_TYPES.json, PATCH_TYPES.merge, PATCH_TYPES.strategic]);
    }
    const current = this.objects.get(this.key(rt, namespace, name));
    if (!current) throw notFound(rt.resource, name, rt.group);
    const original = this.withTypeMeta(rt, deepClone(current));
    let patched: unknown;
    try {
      if (type === PATCH_TYPES.json) {
        let ops: JsonPatchOperation[];
        try {
          ops = decodeJsonPatch(body);
        } catch (e) {
          throw badRequest((e as Error).message);
        }
        patched = applyJsonPatch(original, ops);
      } else {
        if (!isPlainObject(body)) throw badRequest('error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}');
        patched = type === PATCH_TYPES.merge ? applyMergePatch(original, body) : applyStrategicMergePatch(original, body, rt.strategy);
      }
    } catch (e) {
      if (e instanceof ApiError) throw e;
      if (e instanceof JsonPatchDecodeError) throw badRequest(e.message);
      if (e instanceof JsonPatchApplyError || e instanceof PatchApplyError) throw new ApiError(422, 'Invalid', e.message);
      throw e;
    }
    if (!isPlainObject(patched)) throw new ApiError(422, 'Invalid', 'the patched object is not a JSON object');
    const pm = meta(patched);
    if (pm.resourceVersion !== undefined && pm.resourceVersion !== null && String(pm.resourceVersion) !== current.metadata.resourceVersion) {
      throw conflict(rt.resource, name, STALE_OBJECT_MESSAGE, rt.group);
    }
    if (pm.name !== name) throw badRequest(`the name of the object (${String(pm.name)}) does not match the name on the URL (${name})`);
    if (patched.kind !== rt.kind || patched.apiVersion !== apiVersionOf(rt)) throw badRequest('the patch must not change kind or apiVersion');
    return this.commit(rt, current, patched, options);
  }

  // ------------------------------------------------------------------------------------------------ delete

  delete(resource: ResourceType | string, namespace: string | undefined, name: string, options: DeleteOptions = {}): WriteResult {
    const rt = this.type(resource);
    const current = this.objects.get(this.key(rt, namespace, name));
    if (!current) throw notFound(rt.resource, name, rt.group);
    const pre = options.preconditions ?? {};
    if (pre.uid && pre.uid !== current.metadata.uid) {
      throw conflict(rt.resource, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${String(current.metadata.uid)}`, rt.group);
    }
    if (pre.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion) {
      throw conflict(
        rt.resource,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${String(current.metadata.resourceVersion)}`,
        rt.group,
      );
    }
    const typed = this.withTypeMeta(rt, deepClone(current));
    const finalizers: string[] = Array.isArray(current.metadata.finalizers) ? current.metadata.finalizers : [];

    if (rt.resource === 'namespaces') return this.deleteNamespace(rt, typed, options);

    let grace = 0;
    if (rt.gracefulDeletion) {
      grace = options.gracePeriodSeconds ?? current.spec?.terminationGracePeriodSeconds ?? 30;
      if (grace < 0) grace = 1;
      const phase = current.status?.phase;
      if (!current.spec?.nodeName || phase === 'Succeeded' || phase === 'Failed') grace = 0;
    }
    if (grace > 0 || finalizers.length > 0) {
      const next = deepClone(typed);
      const nm = next.metadata as KubeObject;
      const already = nm.deletionTimestamp !== undefined;
      const currentGrace: number = nm.deletionGracePeriodSeconds ?? 0;
      if (already) {
        // A second DELETE may only shorten the grace period.
        if (grace >= currentGrace || !rt.gracefulDeletion) return { object: typed, code: 200 };
      }
      nm.deletionTimestamp = nowTimestamp(grace);
      nm.deletionGracePeriodSeconds = grace;
      if (options.dryRun) return { object: next, code: 200 };
      const stored = this.persist(rt, next, 'MODIFIED', typed);
      if (this.readyToRemove(stored)) return this.deletedResult(rt, this.removeStored(rt, stored));
      return { object: stored, code: 200 };
    }
    if (options.dryRun) return this.deletedResult(rt, typed);
    return this.deletedResult(rt, this.removeStored(rt, typed));
  }

  private deletedResult(rt: ResourceType, final: KubeObject): WriteResult {
    if (rt.returnDeletedObject) return { object: this.withTypeMeta(rt, final), code: 200 };
    const details: KubeObject = { name: final.metadata.name };
    if (rt.group) details.group = rt.group;
    details.kind = rt.resource;
    details.uid = final.metadata.uid;
    return { object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details }, code: 200 };
  }

  deleteCollection(resource: ResourceType | string, namespace: string | undefined, listOptions: ListOptions, options: DeleteOptions = {}): KubeObject {
    const rt = this.type(resource);
    const { items } = this.list(rt, namespace, { labelSelector: listOptions.labelSelector, fieldSelector: listOptions.fieldSelector });
    const deleted: KubeObject[] = [];
    for (const item of items as KubeObject[]) {
      try {
        const result = this.delete(rt, item.metadata.namespace, item.metadata.name, options);
        const o = result.object.kind === 'Status' ? item : result.object;
        const { kind: _k, apiVersion: _a, ...rest } = o;
        void _k;
        void _a;
        deleted.push(rest);
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    }
    return { kind: rt.listKind, apiVersion: apiVersionOf(rt), metadata: { resourceVersion: this.resourceVersion }, items: deleted };
  }

  private deleteNamespace(rt: ResourceType, typed: KubeObject, options: DeleteOptions): WriteResult {
    const name = typed.metadata.name as string;
    if (typed.metadata.deletionTimestamp) return { object: typed, code: 200 };
    const next = deepClone(typed);
    next.metadata.deletionTimestamp = nowTimestamp();
    next.metadata.deletionGracePeriodSeconds = 0;
    next.status = { ...(next.status ?? {}), phase: 'Terminating' };
    if (options.dryRun) return { object: next, code: 200 };
    const stored = this.persist(rt, next, 'MODIFIED', typed);
    this.terminatingNamespaces.add(name);
    setImmediate(() => this.drainNamespace(name));
    return { object: stored, code: 200 };
  }

  /** The namespace controller: delete everything in a terminating namespace, then the namespace itself. */
  private drainNamespace(namespace: string): void {
    for (const rt of RESOURCE_TYPES) {
      if (!rt.namespaced) continue;
      const { items } = this.list(rt, namespace);
      for (const item of items as KubeObject[]) {
        if (item.metadata.deletionTimestamp) continue;
        try {
          this.delete(rt, namespace, item.metadata.name);
        } catch {
          // already gone
        }
      }
    }
    this.finishNamespace(namespace);
  }

  private finishNamespace(namespace: string): void {
    if (!this.terminatingNamespaces.has(namespace)) return;
    for (const rt of RESOURCE_TYPES) {
      if (rt.namespaced && (this.list(rt, namespace).items as KubeObject[]).length > 0) return;
    }
    this.terminatingNamespaces.delete(namespace);
    const nsType = this.type('namespaces');
    const current = this.objects.get(this.key(nsType, undefined, namespace));
    if (!current) return;
    const finalizers: string[] = current.metadata.finalizers ?? [];
    if (finalizers.length > 0) return; // metadata finalizers still block; a later update removes it.
    this.removeStored(nsType, this.withTypeMeta(nsType, current));
  }

  // ------------------------------------------------------------------------------------------------ pods/binding

  bind(namespace: string, name: string, body: unknown): KubeObject {
    const rt = this.type('pods');
    if (!isPlainObject(body) || !isPlainObject(body.target) || !body.target.name) throw invalid('Binding', name, [{ type: 'FieldValueRequired', field: 'target.name' }]);
    const current = this.objects.get(this.key(rt, namespace, name));
    if (!current) throw notFound('pods', name);
    if (current.metadata.deletionTimestamp) throw conflict('pods/binding', name, `pod ${name} is being deleted, cannot be assigned to a host`);
    if (current.spec?.nodeName) throw conflict('pods/binding', name, `pod ${name} is already assigned to node "${String(current.spec.nodeName)}"`);
    const typed = this.withTypeMeta(rt, deepClone(current));
    const next = deepClone(typed);
    next.spec.nodeName = String(body.target.name);
    const conditions: KubeObject[] = Array.isArray(next.status?.conditions) ? next.status.conditions.filter((c: KubeObject) => c.type !== 'PodScheduled') : [];
    conditions.push({ type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: nowTimestamp() });
    next.status = { ...(next.status ?? {}), conditions };
    this.persist(rt, next, 'MODIFIED', typed);
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 };
  }

  // ------------------------------------------------------------------------------------------------ watch

  /**
   * Starts a watch. Replays history (or synthetic ADDED events for a watch without resourceVersion) synchronously
   * through `send`, then delivers live events until the returned function is called.
   * Throws a 410 ApiError when the resourceVersion is older than the retained history.
   */
  watch(resource: ResourceType | string, options: WatchOptions, send: (type: EventType, object: KubeObject) => void): () => void {
    const rt = this.type(resource);
    if (options.fieldSelector) checkFieldSelector(options.fieldSelector, this.supportedFields(rt));
    const inScope = (o: KubeObject): boolean =>
      (!rt.namespaced || !options.namespace || o.metadata?.namespace === options.namespace) && (!options.name || o.metadata?.name === options.name);
    const matchesSel = (o: KubeObject | undefined): boolean => !!o && inScope(o) && this.matches(rt, o, options.labelSelector, options.fieldSelector);
    const deliver = (event: StoreEvent): void => {
      if (event.rt !== rt) return;
      const now = matchesSel(event.object);
      if (event.type === 'ADDED') {
        if (now) send('ADDED', this.withTypeMeta(rt, deepClone(event.object)));
        return;
      }
      if (event.type === 'DELETED') {
        if (matchesSel(event.old) || now) send('DELETED', this.withTypeMeta(rt, deepClone(event.object)));
        return;
      }
      const before = matchesSel(event.old);
      if (before && now) send('MODIFIED', this.withTypeMeta(rt, deepClone(event.object)));
      else if (!before && now) send('ADDED', this.withTypeMeta(rt, deepClone(event.object)));
      else if (before && !now) send('DELETED', this.withTypeMeta(rt, deepClone(event.object)));
    };
    const rvParam = options.resourceVersion;
    if (rvParam === undefined || rvParam === '' || rvParam === '0') {
      const { items } = this.list(rt, options.namespace, { labelSelector: options.labelSelector, fieldSelector: options.fieldSelector });
      for (const item of items as KubeObject[]) if (inScope(item)) send('ADDED', this.withTypeMeta(rt, item));
    } else {
      const from = Number(rvParam);
      if (!Number.isInteger(from) || from < 0) throw badRequest(`invalid resource version: "${rvParam}"`);
      if (from < this.compactedRv) {
        const oldest = this.history.length > 0 ? this.history[0]!.rv : this.rv + 1;
        throw expired(`too old resource version: ${from} (${oldest})`);
      }
      for (const event of this.history) if (event.rv > from) deliver(event);
    }
    return this.subscribe(deliver);
  }
}
