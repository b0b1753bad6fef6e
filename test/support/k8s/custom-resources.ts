/**
 * Custom resources for the test API server: register a group/version/plural/kind (or a whole apiextensions.k8s.io/v1
 * CustomResourceDefinition object, e.g. one read from manifests/) and every TestApiServer in the process serves it
 * like kube-apiserver serves a CRD's objects: CRUD, list/watch with resourceVersion, label and field selectors
 * (metadata.name, metadata.namespace), 404/409/422, `status` as a subresource, discovery under
 * /apis/<group>/<version>, Table output with the CRD's printer columns (so `kubectl get` prints them), and
 * `metadata.generation` (1 on create, +1 whenever anything but metadata and status changes).
 *
 * From the CRD's openAPIV3Schema it applies `default`s and checks `type`, `required`, `minLength`, `minItems`,
 * `enum` and `format: duration` (a 422 Invalid names the field, as kube-apiserver's), and the CEL rules
 * (x-kubernetes-validations) written in the subset fnr's CRDs use: `has(self.a.b)` presence tests combined with
 * `!`, `&&`, `||` and parentheses (a rule outside that subset makes registration throw, so an unmodelled rule is
 * never silently skipped). Not modelled: pruning of unknown fields, conversion, cluster-scoped defaulting of
 * `x-kubernetes-*` extensions other than preserve-unknown-fields and int-or-string.
 */
import { deepEqual, isPlainObject } from './patch.js';
import type { ResourceType, TableColumn } from './resources.js';
import { AGE_COLUMN, findResourceType, humanDuration, NAME_COLUMN, registerResourceType, RESOURCE_TYPES, simpleType } from './resources.js';
import type { FieldError, KubeObject } from './status.js';

export interface PrinterColumn {
  name: string;
  jsonPath: string;
  type?: TableColumn['type'];
  description?: string;
  priority?: number;
}

export interface CustomResourceOptions {
  group: string;
  version: string;
  /** Plural resource name, e.g. `functionconfigs`. */
  plural: string;
  kind: string;
  singular?: string;
  listKind?: string;
  /** Default true. */
  namespaced?: boolean;
  shortNames?: string[];
  categories?: string[];
  /** `status` is a subresource (default true, as with `subresources: {status: {}}`). */
  statusSubresource?: boolean;
  printerColumns?: PrinterColumn[];
  /** The version's openAPIV3Schema (defaults and basic validation; see the module comment). */
  schema?: KubeObject;
  /** Extra validation, e.g. what a CEL rule would check. */
  validate?: (obj: KubeObject) => FieldError[];
}

type Schema = Record<string, unknown>;

/** Reads `.a.b[0].c`-style JSON paths (what CRD printer columns use). */
function jsonPathValue(obj: unknown, jsonPath: string): unknown {
  let cur: unknown = obj;
  for (const part of jsonPath.replace(/^\./, '').split(/\.|\[(\d+)\]/).filter((p) => p !== undefined && p !== '')) {
    if (cur === null || cur === undefined) return undefined;
    cur = /^\d+$/.test(part) && Array.isArray(cur) ? cur[Number(part)] : (cur as KubeObject)[part];
  }
  return cur;
}

const GO_DURATION = /^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$|^0$/;

function typeMatches(value: unknown, type: string): boolean {
  switch (type) {
    case 'object':
      return isPlainObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    default:
      return true;
  }
}

/** Applies `default`s of object properties, in place (kube-apiserver defaults on every read and write). */
export function applySchemaDefaults(value: unknown, schema: Schema | undefined): void {
  if (!schema) return;
  if (isPlainObject(value) && isPlainObject(schema.properties)) {
    for (const [key, sub] of Object.entries(schema.properties as Record<string, Schema>)) {
      if (value[key] === undefined && sub.default !== undefined) value[key] = structuredClone(sub.default);
      applySchemaDefaults(value[key], sub);
    }
  }
  if (Array.isArray(value) && isPlainObject(schema.items)) for (const item of value) applySchemaDefaults(item, schema.items as Schema);
}

/** Basic structural validation against an openAPIV3Schema; field paths as kube-apiserver prints them. */
export function validateAgainstSchema(value: unknown, schema: Schema | undefined, field: string): FieldError[] {
  if (!schema || value === undefined) return [];
  const errs: FieldError[] = [];
  const type = schema.type as string | undefined;
  if (value === null) {
    if (schema.nullable !== true && type) errs.push({ type: 'FieldValueInvalid', field, value: 'null', detail: `${field} in body must be of type ${type}: "null"` });
    return errs;
  }
  const intOrString = schema['x-kubernetes-int-or-string'] === true;
  if (type && !intOrString && !typeMatches(value, type)) {
    const got = Array.isArray(value) ? 'array' : typeof value === 'number' ? (Number.isInteger(value) ? 'integer' : 'number') : typeof value;
    errs.push({ type: 'FieldValueInvalid', field, value: got, detail: `${field} in body must be of type ${type}: "${got}"` });
    return errs;
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => deepEqual(e, value))) {
    errs.push({ type: 'FieldValueNotSupported', field, value, detail: `supported values: ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}` });
  }
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) {
      errs.push({ type: 'FieldValueInvalid', field, value, detail: `${field} in body should be at least ${schema.minLength} chars long` });
    }
    if (schema.format === 'duration' && !GO_DURATION.test(value)) {
      errs.push({ type: 'FieldValueInvalid', field, value, detail: `${field} in body must be of type duration: "${value}"` });
    }
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) {
      errs.push({ type: 'FieldValueInvalid', field, value: value.length, detail: `${field} in body should have at least ${schema.minItems} items` });
    }
    if (isPlainObject(schema.items)) value.forEach((item, i) => errs.push(...validateAgainstSchema(item, schema.items as Schema, `${field}[${i}]`)));
  }
  if (isPlainObject(value)) {
    for (const key of Array.isArray(schema.required) ? (schema.required as string[]) : []) {
      if (value[key] === undefined) errs.push({ type: 'FieldValueRequired', field: field ? `${field}.${key}` : key, detail: 'Required value' });
    }
    if (isPlainObject(schema.properties)) {
      for (const [key, sub] of Object.entries(schema.properties as Record<string, Schema>)) {
        if (key === 'metadata' && !field) continue;
        errs.push(...validateAgainstSchema(value[key], sub, field ? `${field}.${key}` : key));
      }
    }
  }
  return errs;
}

// ------------------------------------------------------------------------------------------ CEL (a subset)

type CelExpr = { op: 'has'; path: string[] } | { op: 'not'; arg: CelExpr } | { op: 'and' | 'or'; args: CelExpr[] };

/** Parses a rule of the subset (has(self.x.y), !, &&, ||, parentheses); throws on anything else. */
export function parseCelSubset(rule: string): CelExpr {
  rule = rule.trim();
  const tokens = rule.match(/\s*(has\(\s*self(?:\.[A-Za-z_][A-Za-z0-9_]*)+\s*\)|&&|\|\||!|\(|\))/gy);
  if (!tokens || tokens.join('').length !== rule.length || rule.trim() === '') throw new Error(`CEL rule outside the modelled subset: ${JSON.stringify(rule)}`);
  const list = tokens.map((t) => t.trim());
  let i = 0;
  const fail = (): never => {
    throw new Error(`CEL rule outside the modelled subset: ${JSON.stringify(rule)}`);
  };
  const primary = (): CelExpr => {
    const t = list[i++];
    if (t === undefined) return fail();
    if (t === '!') return { op: 'not', arg: primary() };
    if (t === '(') {
      const e = or();
      if (list[i++] !== ')') fail();
      return e;
    }
    const m = /^has\(\s*self((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*\)$/.exec(t);
    if (!m) return fail();
    return { op: 'has', path: m[1]!.slice(1).split('.') };
  };
  const and = (): CelExpr => {
    const args = [primary()];
    while (list[i] === '&&') {
      i++;
      args.push(primary());
    }
    return args.length === 1 ? args[0]! : { op: 'and', args };
  };
  const or = (): CelExpr => {
    const args = [and()];
    while (list[i] === '||') {
      i++;
      args.push(and());
    }
    return args.length === 1 ? args[0]! : { op: 'or', args };
  };
  const e = or();
  if (i !== list.length) fail();
  return e;
}

function evalCel(e: CelExpr, self: unknown): boolean {
  switch (e.op) {
    case 'has': {
      let cur = self;
      for (const p of e.path) {
        if (!isPlainObject(cur) || cur[p] === undefined || cur[p] === null) return false;
        cur = cur[p];
      }
      return true;
    }
    case 'not':
      return !evalCel(e.arg, self);
    case 'and':
      return e.args.every((a) => evalCel(a, self));
    case 'or':
      return e.args.some((a) => evalCel(a, self));
  }
}

interface CelRule {
  /** Where the rule sits (field path, '' for the root). */
  field: string;
  rule: CelExpr;
  text: string;
  message?: string;
}

/** Every x-kubernetes-validations rule of a schema, with the field it applies to (object properties only). */
function collectCelRules(schema: Schema | undefined, field: string, out: CelRule[] = []): CelRule[] {
  if (!schema) return out;
  for (const v of Array.isArray(schema['x-kubernetes-validations']) ? (schema['x-kubernetes-validations'] as Schema[]) : []) {
    out.push({ field, rule: parseCelSubset(String(v.rule)), text: String(v.rule), ...(typeof v.message === 'string' ? { message: v.message } : {}) });
  }
  if (isPlainObject(schema.properties)) {
    for (const [key, sub] of Object.entries(schema.properties as Record<string, Schema>)) collectCelRules(sub, field ? `${field}.${key}` : key, out);
  }
  return out;
}

/** Checks the rules as kube-apiserver does: a rule on a field that is absent is not evaluated. */
function validateCelRules(o: KubeObject, rules: readonly CelRule[]): FieldError[] {
  const errs: FieldError[] = [];
  for (const r of rules) {
    const value = r.field === '' ? o : jsonPathValue(o, r.field);
    if (value === undefined || value === null) continue;
    if (!evalCel(r.rule, value)) {
      // kube-apiserver v1.37 omits the value of an object that fails a CEL rule: `spec: Invalid value: <message>`
      // (older releases printed `"object"`); test/cluster/function-config-crd.test.ts checks the real text.
      errs.push({ type: 'FieldValueInvalid', field: r.field, omitValue: true, detail: r.message ?? `failed rule: ${r.text}` });
    }
  }
  return errs;
}

/**
 * Takes a registered custom resource type away from every test API server of this process (to test a cluster
 * without the CRD); returns a function that puts it back.
 */
export function unregisterCustomResource(group: string, version: string, plural: string): () => void {
  const existing = findResourceType(group, version, plural);
  if (!existing) return () => {};
  const types = RESOURCE_TYPES as ResourceType[];
  types.splice(types.indexOf(existing), 1);
  return () => {
    if (!findResourceType(group, version, plural)) types.push(existing);
  };
}

/**
 * Registrations are process-wide (every test API server of the process serves them), as a CRD is cluster-wide.
 * A test file that registers custom resources scopes them to itself: call this in `before` and the function it
 * returns in `after`, which takes away every resource type registered since, so a later suite's "cluster" has no
 * CRD it did not install (fnr serve's --function-config-source=auto reads discovery).
 */
export function customResourceScope(): () => void {
  const before = new Set(RESOURCE_TYPES);
  return () => {
    const types = RESOURCE_TYPES as ResourceType[];
    for (let i = types.length - 1; i >= 0; i--) if (!before.has(types[i]!)) types.splice(i, 1);
  };
}

function withoutMetaAndStatus(o: KubeObject): KubeObject {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = o;
  return rest;
}

/** Registers a custom resource type on every test API server of this process; returns its ResourceType. */
export function registerCustomResource(options: CustomResourceOptions): ResourceType {
  const existing = findResourceType(options.group, options.version, options.plural);
  if (existing) return existing;
  const columns = options.printerColumns ?? [];
  const schema = options.schema as Schema | undefined;
  const status = options.statusSubresource ?? true;
  const celRules = collectCelRules(schema, '');
  const rt = simpleType({
    group: options.group,
    version: options.version,
    resource: options.plural,
    singular: options.singular ?? options.kind.toLowerCase(),
    kind: options.kind,
    listKind: options.listKind ?? `${options.kind}List`,
    namespaced: options.namespaced ?? true,
    shortNames: options.shortNames ?? [],
    categories: options.categories ?? [],
    nameRule: 'subdomain',
    subresources: status ? ['status'] : [],
    hasStatus: status,
    allowCreateOnUpdate: false,
    // apiextensions-apiserver's store returns the deleted object, as for pods.
    returnDeletedObject: true,
    prepareForCreate(o) {
      o.metadata.generation = 1;
      if (status) delete o.status;
    },
    prepareForUpdate(o, old) {
      const gen = Number(old.metadata?.generation ?? 1);
      o.metadata.generation = deepEqual(withoutMetaAndStatus(o), withoutMetaAndStatus(old)) ? gen : gen + 1;
    },
    applyDefaults(o) {
      applySchemaDefaults(o, schema);
    },
    validate(o) {
      const structural = validateAgainstSchema(o, schema, '');
      // kube-apiserver runs CEL rules only on objects that pass the structural schema.
      return [...structural, ...(structural.length === 0 ? validateCelRules(o, celRules) : []), ...(options.validate?.(o) ?? [])];
    },
    table: {
      columns: [
        NAME_COLUMN,
        ...columns.map((c) => ({ name: c.name, type: c.type ?? 'string', description: c.description ?? '', priority: c.priority ?? 0 })),
        AGE_COLUMN,
      ],
      cells(o, now) {
        const ts = Date.parse(String(o.metadata?.creationTimestamp ?? ''));
        return [
          String(o.metadata?.name ?? ''),
          ...columns.map((c) => {
            const v = jsonPathValue(o, c.jsonPath);
            return v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : v;
          }),
          Number.isNaN(ts) ? '<unknown>' : humanDuration(now - ts),
        ];
      },
    },
  });
  return registerResourceType(rt);
}

/**
 * Registers the served versions of an apiextensions.k8s.io/v1 CustomResourceDefinition object (as parsed from YAML).
 * `validate` adds checks the CRD's CEL rules would make. Returns the registered types, one per served version.
 */
export function registerCrd(crd: KubeObject, validate?: (obj: KubeObject) => FieldError[]): ResourceType[] {
  if (crd.kind !== 'CustomResourceDefinition') throw new Error(`not a CustomResourceDefinition: ${String(crd.kind)}`);
  const spec = crd.spec as KubeObject;
  const names = spec.names as KubeObject;
  const versions = (spec.versions as KubeObject[]).filter((v) => v.served !== false);
  return versions.map((v) =>
    registerCustomResource({
      group: spec.group,
      version: v.name,
      plural: names.plural,
      kind: names.kind,
      singular: names.singular,
      listKind: names.listKind,
      namespaced: spec.scope !== 'Cluster',
      shortNames: names.shortNames,
      categories: names.categories,
      statusSubresource: isPlainObject(v.subresources) && v.subresources.status !== undefined,
      printerColumns: (v.additionalPrinterColumns as KubeObject[] | undefined)?.map((c) => ({
        name: c.name,
        jsonPath: c.jsonPath,
        type: c.type,
        description: c.description,
        priority: c.priority,
      })),
      schema: (v.schema as KubeObject | undefined)?.openAPIV3Schema,
      validate,
    }),
  );
}
