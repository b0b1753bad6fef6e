/**
 * The three patch formats kube-apiserver accepts for built-in types:
 * JSON merge patch (RFC 7386), strategic merge patch, and JSON patch (RFC 6902).
 */
import type { KubeObject } from './status.js';

export function isPlainObject(value: unknown): value is KubeObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function deepClone<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => deepEqual(v, b[i]));
  }
  if (isPlainObject(a)) {
    if (!isPlainObject(b)) return false;
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------------
// RFC 7386 JSON merge patch

export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return deepClone(patch);
  const result: KubeObject = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------------------------
// Strategic merge patch

/** How a list field merges: by a key (maps), as a set (primitives), or replaced wholesale (the default). */
export interface ListStrategy {
  mergeKey?: string;
  strategy: 'merge' | 'replace';
  /** `$retainKeys` is honoured for maps that declare `patchStrategy: retainKeys` (e.g. volumes). */
}

/** Looks up the strategy for a list at a path such as `spec.containers` or `spec.containers[].env`. */
export type StrategyLookup = (path: string) => ListStrategy | undefined;

export class PatchApplyError extends Error {}

const DIRECTIVE_PATCH = '$patch';
const DIRECTIVE_RETAIN_KEYS = '$retainKeys';
const PREFIX_SET_ORDER = '$setElementOrder/';
const PREFIX_DELETE_PRIMITIVE = '$deleteFromPrimitiveList/';

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** Removes every `$`-directive from a value that is inserted as new content. */
function stripDirectives(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.filter((v) => !(isPlainObject(v) && v[DIRECTIVE_PATCH] === 'replace' && Object.keys(v).length === 1)).map(stripDirectives);
  }
  if (!isPlainObject(value)) return value;
  const out: KubeObject = {};
  for (const [k, v] of Object.entries(value)) {
    if (k.startsWith('$')) continue;
    if (v === null) continue;
    out[k] = stripDirectives(v);
  }
  return out;
}

export function applyStrategicMergePatch(original: unknown, patch: unknown, lookup: StrategyLookup, path = ''): unknown {
  if (!isPlainObject(patch)) return deepClone(patch);
  const directive = patch[DIRECTIVE_PATCH];
  if (directive === 'replace') return stripDirectives(patch);
  if (directive === 'delete') return undefined;
  if (directive !== undefined && directive !== 'merge') throw new PatchApplyError(`Unknown patch type: ${String(directive)} in map: ${JSON.stringify(patch)}`);
  const result: KubeObject = isPlainObject(original) ? { ...original } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key === DIRECTIVE_PATCH || key === DIRECTIVE_RETAIN_KEYS || key.startsWith(PREFIX_SET_ORDER)) continue;
    if (key.startsWith(PREFIX_DELETE_PRIMITIVE)) {
      const field = key.slice(PREFIX_DELETE_PRIMITIVE.length);
      if (!Array.isArray(value)) throw new PatchApplyError(`${key} must be a list`);
      const current = result[field];
      if (Array.isArray(current)) {
        const kept = current.filter((v) => !value.some((d) => deepEqual(d, v)));
        if (kept.length > 0) result[field] = kept;
        else delete result[field];
      }
      continue;
    }
    if (value === null) {
      delete result[key];
      continue;
    }
    const childPath = join(path, key);
    if (Array.isArray(value)) {
      result[key] = mergeList(result[key], value, lookup, childPath);
    } else if (isPlainObject(value)) {
      const merged = applyStrategicMergePatch(result[key], value, lookup, childPath);
      if (merged === undefined) delete result[key];
      else result[key] = merged;
    } else {
      result[key] = value;
    }
  }
  const retain = patch[DIRECTIVE_RETAIN_KEYS];
  if (Array.isArray(retain)) {
    for (const key of Object.keys(result)) if (!retain.includes(key)) delete result[key];
  }
  return result;
}

function mergeList(original: unknown, patchList: unknown[], lookup: StrategyLookup, path: string): unknown[] {
  const replaceMarker = patchList.findIndex((v) => isPlainObject(v) && v[DIRECTIVE_PATCH] === 'replace');
  const strategy = lookup(path);
  if (replaceMarker >= 0 || !strategy || strategy.strategy === 'replace') {
    return stripDirectives(patchList.filter((_, i) => i !== replaceMarker)) as unknown[];
  }
  const current = Array.isArray(original) ? [...original] : [];
  if (!strategy.mergeKey) {
    // A set of primitives (e.g. metadata.finalizers): union, keeping the original order.
    for (const item of patchList) if (!current.some((c) => deepEqual(c, item))) current.push(deepClone(item));
    return current;
  }
  const key = strategy.mergeKey;
  const itemPath = `${path}[]`;
  for (const item of patchList) {
    if (!isPlainObject(item)) throw new PatchApplyError(`expected a map in list ${path} with merge key ${key}, got ${JSON.stringify(item)}`);
    if (!(key in item)) throw new PatchApplyError(`map: ${JSON.stringify(item)} does not contain declared merge key: ${key}`);
    const index = current.findIndex((c) => isPlainObject(c) && deepEqual(c[key], item[key]));
    if (item[DIRECTIVE_PATCH] === 'delete') {
      if (index >= 0) {
        // Remove every element with that key, as the Go implementation does.
        for (let i = current.length - 1; i >= 0; i--) {
          const c = current[i];
          if (isPlainObject(c) && deepEqual(c[key], item[key])) current.splice(i, 1);
        }
      }
      continue;
    }
    if (index >= 0) current[index] = applyStrategicMergePatch(current[index], item, lookup, itemPath);
    else current.push(stripDirectives(applyStrategicMergePatch({}, item, lookup, itemPath)));
  }
  return current;
}

// ---------------------------------------------------------------------------------------------------------------
// RFC 6902 JSON patch

export interface JsonPatchOperation {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
}

/** A JSON patch that cannot be decoded (400 in kube-apiserver). */
export class JsonPatchDecodeError extends Error {}
/** A JSON patch that decodes but does not apply (422 in kube-apiserver). */
export class JsonPatchApplyError extends Error {}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new JsonPatchApplyError(`invalid JSON pointer: "${pointer}"`);
  return pointer
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function arrayIndex(token: string, length: number, forAdd: boolean, path: string): number {
  if (forAdd && token === '-') return length;
  if (!/^(0|[1-9][0-9]*)$/.test(token)) throw new JsonPatchApplyError(`invalid array index "${token}" in path ${path}`);
  const n = Number(token);
  if (forAdd ? n > length : n >= length) throw new JsonPatchApplyError(`array index out of bounds: ${n} in path ${path}`);
  return n;
}

/** Walks to the parent container of a pointer. */
function resolveParent(doc: unknown, tokens: string[], path: string, opName: string): unknown {
  let node = doc;
  for (let i = 0; i < tokens.length - 1; i++) {
    const token = tokens[i]!;
    if (Array.isArray(node)) {
      node = node[arrayIndex(token, node.length, false, path)];
    } else if (isPlainObject(node)) {
      if (!(token in node)) throw new JsonPatchApplyError(`${opName} operation does not apply: doc is missing path: "${path}"`);
      node = node[token];
    } else {
      throw new JsonPatchApplyError(`${opName} operation does not apply: doc is missing path: "${path}"`);
    }
  }
  return node;
}

function getAt(doc: unknown, path: string, opName: string): unknown {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return doc;
  const parent = resolveParent(doc, tokens, path, opName);
  const last = tokens[tokens.length - 1]!;
  if (Array.isArray(parent)) return parent[arrayIndex(last, parent.length, false, path)];
  if (isPlainObject(parent) && last in parent) return parent[last];
  throw new JsonPatchApplyError(`${opName} operation does not apply: doc is missing path: "${path}"`);
}

function removeAt(doc: unknown, path: string, opName: string): unknown {
  const tokens = parsePointer(path);
  if (tokens.length === 0) throw new JsonPatchApplyError(`${opName} operation does not apply: cannot remove the document root`);
  const parent = resolveParent(doc, tokens, path, opName);
  const last = tokens[tokens.length - 1]!;
  if (Array.isArray(parent)) {
    const i = arrayIndex(last, parent.length, false, path);
    return parent.splice(i, 1)[0];
  }
  if (isPlainObject(parent) && last in parent) {
    const old = parent[last];
    delete parent[last];
    return old;
  }
  throw new JsonPatchApplyError(`${opName} operation does not apply: doc is missing key: ${path}`);
}

function addAt(doc: unknown, path: string, value: unknown, opName: string, replace: boolean): unknown {
  const tokens = parsePointer(path);
  if (tokens.length === 0) return value;
  const parent = resolveParent(doc, tokens, path, opName);
  const last = tokens[tokens.length - 1]!;
  if (Array.isArray(parent)) {
    const i = arrayIndex(last, parent.length, !replace, path);
    if (replace) parent[i] = value;
    else parent.splice(i, 0, value);
  } else if (isPlainObject(parent)) {
    if (replace && !(last in parent)) throw new JsonPatchApplyError(`replace operation does not apply: doc is missing key: ${path}`);
    parent[last] = value;
  } else {
    throw new JsonPatchApplyError(`${opName} operation does not apply: doc is missing path: "${path}"`);
  }
  return doc;
}

export function decodeJsonPatch(body: unknown): JsonPatchOperation[] {
  if (!Array.isArray(body)) throw new JsonPatchDecodeError('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  for (const op of body) {
    if (!isPlainObject(op) || typeof op.op !== 'string') throw new JsonPatchDecodeError('Unexpected kind: <nil>');
    if (!['add', 'remove', 'replace', 'move', 'copy', 'test'].includes(op.op)) throw new JsonPatchDecodeError(`Unexpected kind: ${op.op}`);
    if (typeof op.path !== 'string') throw new JsonPatchDecodeError(`${op.op} operation missing path`);
  }
  return body as JsonPatchOperation[];
}

export function applyJsonPatch(document: unknown, ops: JsonPatchOperation[]): unknown {
  let doc = deepClone(document);
  for (const op of ops) {
    switch (op.op) {
      case 'add':
        if (!('value' in op)) throw new JsonPatchApplyError('add operation missing value');
        doc = addAt(doc, op.path, deepClone(op.value), 'add', false);
        break;
      case 'remove':
        removeAt(doc, op.path, 'remove');
        break;
      case 'replace':
        if (!('value' in op)) throw new JsonPatchApplyError('replace operation missing value');
        doc = addAt(doc, op.path, deepClone(op.value), 'replace', true);
        break;
      case 'move': {
        if (typeof op.from !== 'string') throw new JsonPatchApplyError('move operation missing from');
        const value = removeAt(doc, op.from, 'move');
        doc = addAt(doc, op.path, value, 'move', false);
        break;
      }
      case 'copy': {
        if (typeof op.from !== 'string') throw new JsonPatchApplyError('copy operation missing from');
        const value = deepClone(getAt(doc, op.from, 'copy'));
        doc = addAt(doc, op.path, value, 'copy', false);
        break;
      }
      case 'test': {
        let actual: unknown;
        try {
          actual = getAt(doc, op.path, 'test');
        } catch {
          actual = undefined;
        }
        if (!deepEqual(actual, op.value ?? null) && !(actual === undefined && op.value === null)) {
          throw new JsonPatchApplyError(`testing value ${op.path} failed: test failed`);
        }
        break;
      }
      default:
        throw new JsonPatchApplyError(`Unexpected kind: ${op.op}`);
    }
  }
  return doc;
}
