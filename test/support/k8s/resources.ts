/**
 * The resource types the test API server serves, with the per-type behaviour of kube-apiserver's registry
 * strategies: defaults, validation, status handling, field selectors, strategic-merge keys and table columns.
 */
import type { ListStrategy, StrategyLookup } from './patch.js';
import { deepEqual, isPlainObject } from './patch.js';
import type { FieldError, KubeObject } from './status.js';
import { badRequest } from './status.js';
import type { NameRule } from './validation.js';
import { isDns1123Label, isQualifiedName, validateAnnotations, validateLabels, validateName } from './validation.js';

export interface TableColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  format?: string;
  description: string;
  priority: number;
}

export interface TableDefinition {
  columns: TableColumn[];
  cells(obj: KubeObject, now: number): unknown[];
}

export interface DefaultingContext {
  /** Allocates a ClusterIP for a new Service. */
  allocateClusterIP(): string;
  allocateNodePort(): number;
}

export interface ResourceType {
  group: string;
  version: string;
  /** Plural resource name, e.g. `pods`. */
  resource: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  nameRule: NameRule;
  subresources: string[];
  /** Whether `status` is a separate subresource (the main resource then ignores status changes). */
  hasStatus: boolean;
  /** DELETE returns the object (true) or a Status with details (false), like registry.Store.ReturnDeletedObject. */
  returnDeletedObject: boolean;
  /** PUT of a missing object creates it (registry.Store AllowCreateOnUpdate). */
  allowCreateOnUpdate: boolean;
  /** Pods: DELETE sets deletionTimestamp and waits for the kubelet instead of removing at once. */
  gracefulDeletion: boolean;
  /** Field selector labels the type supports, besides metadata.name and metadata.namespace. */
  fieldLabels: Record<string, (obj: KubeObject) => string>;
  strategy: StrategyLookup;
  /** Resets fields on create (status) and fills server-assigned values. */
  prepareForCreate(obj: KubeObject, ctx: DefaultingContext): void;
  /** Carries fields over from the stored object on update of the main resource. */
  prepareForUpdate(obj: KubeObject, old: KubeObject): void;
  /** Defaults applied to every object written (create and update), like the scheme's defaulting functions. */
  applyDefaults(obj: KubeObject): void;
  validate(obj: KubeObject): FieldError[];
  validateUpdate(obj: KubeObject, old: KubeObject): FieldError[];
  table: TableDefinition;
}

export function apiVersionOf(rt: { group: string; version: string }): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

// ---------------------------------------------------------------------------------------------------------------
// helpers

function obj(value: unknown): KubeObject {
  return isPlainObject(value) ? value : {};
}

function arr(value: unknown): KubeObject[] {
  return Array.isArray(value) ? (value.filter((v) => isPlainObject(v)) as KubeObject[]) : [];
}

function str(value: unknown): string {
  return value === undefined || value === null ? '' : String(value);
}

/** duration.HumanDuration from k8s.io/apimachinery, which kubectl shows in the AGE column. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const days = Math.floor(hours / 24) % 365;
    return days === 0 ? `${Math.floor(hours / 24 / 365)}y` : `${Math.floor(hours / 24 / 365)}y${days}d`;
  }
  return `${Math.floor(hours / 24 / 365)}y`;
}

function age(o: KubeObject, now: number): string {
  const ts = Date.parse(str(o.metadata?.creationTimestamp));
  return Number.isNaN(ts) ? '<unknown>' : humanDuration(now - ts);
}

export const NAME_COLUMN: TableColumn = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace. Cannot be updated.',
  priority: 0,
};
export const AGE_COLUMN: TableColumn = {
  name: 'Age',
  type: 'string',
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
  priority: 0,
};

function strategies(table: Record<string, ListStrategy>): StrategyLookup {
  const common: Record<string, ListStrategy> = {
    'metadata.finalizers': { strategy: 'merge' },
    'metadata.ownerReferences': { strategy: 'merge', mergeKey: 'uid' },
  };
  return (path) => table[path] ?? common[path];
}

function noErrors(): FieldError[] {
  return [];
}

function validateDataKeys(data: unknown, field: string): FieldError[] {
  const errs: FieldError[] = [];
  for (const key of Object.keys(obj(data))) {
    if (!/^[-._a-zA-Z0-9]+$/.test(key) || key.length > 253) {
      errs.push({
        type: 'FieldValueInvalid',
        field,
        value: key,
        detail: "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
      });
    }
  }
  return errs;
}

// ---------------------------------------------------------------------------------------------------------------
// pods

const CONTAINER_LISTS = ['spec.containers', 'spec.initContainers', 'spec.ephemeralContainers'];
const podStrategies: Record<string, ListStrategy> = {
  'spec.volumes': { strategy: 'merge', mergeKey: 'name' },
  'spec.imagePullSecrets': { strategy: 'merge', mergeKey: 'name' },
  'spec.hostAliases': { strategy: 'merge', mergeKey: 'ip' },
  'spec.topologySpreadConstraints': { strategy: 'merge', mergeKey: 'topologyKey' },
  'spec.schedulingGates': { strategy: 'merge', mergeKey: 'name' },
  'spec.resourceClaims': { strategy: 'merge', mergeKey: 'name' },
  'status.conditions': { strategy: 'merge', mergeKey: 'type' },
  'status.podIPs': { strategy: 'merge', mergeKey: 'ip' },
  'status.hostIPs': { strategy: 'merge', mergeKey: 'ip' },
  'status.resourceClaimStatuses': { strategy: 'merge', mergeKey: 'name' },
};
for (const list of CONTAINER_LISTS) {
  podStrategies[list] = { strategy: 'merge', mergeKey: 'name' };
  podStrategies[`${list}[].ports`] = { strategy: 'merge', mergeKey: 'containerPort' };
  podStrategies[`${list}[].env`] = { strategy: 'merge', mergeKey: 'name' };
  podStrategies[`${list}[].volumeMounts`] = { strategy: 'merge', mergeKey: 'mountPath' };
  podStrategies[`${list}[].volumeDevices`] = { strategy: 'merge', mergeKey: 'devicePath' };
}

function defaultProbe(probe: unknown): void {
  if (!isPlainObject(probe)) return;
  probe.timeoutSeconds ??= 1;
  probe.periodSeconds ??= 10;
  probe.successThreshold ??= 1;
  probe.failureThreshold ??= 3;
  if (isPlainObject(probe.httpGet)) probe.httpGet.scheme ??= 'HTTP';
  if (isPlainObject(probe.grpc)) probe.grpc.service ??= '';
}

function imageTag(image: string): string | undefined {
  const lastSlash = image.lastIndexOf('/');
  const tail = image.slice(lastSlash + 1);
  if (tail.includes('@')) return '@digest';
  const colon = tail.indexOf(':');
  return colon >= 0 ? tail.slice(colon + 1) : undefined;
}

function defaultContainer(c: KubeObject): void {
  c.terminationMessagePath ??= '/dev/termination-log';
  c.terminationMessagePolicy ??= 'File';
  if (c.imagePullPolicy === undefined && typeof c.image === 'string') {
    const tag = imageTag(c.image);
    c.imagePullPolicy = tag === undefined || tag === 'latest' ? 'Always' : 'IfNotPresent';
  }
  c.resources ??= {};
  for (const port of arr(c.ports)) port.protocol ??= 'TCP';
  for (const env of arr(c.env)) {
    if (isPlainObject(env.valueFrom) && isPlainObject(env.valueFrom.fieldRef)) env.valueFrom.fieldRef.apiVersion ??= 'v1';
  }
  defaultProbe(c.readinessProbe);
  defaultProbe(c.livenessProbe);
  defaultProbe(c.startupProbe);
}

function qosClass(spec: KubeObject): string {
  const containers = [...arr(spec.containers), ...arr(spec.initContainers)];
  let any = false;
  let guaranteed = containers.length > 0;
  for (const c of containers) {
    const requests = obj(obj(c.resources).requests);
    const limits = obj(obj(c.resources).limits);
    if (Object.keys(requests).length > 0 || Object.keys(limits).length > 0) any = true;
    for (const r of ['cpu', 'memory']) {
      if (limits[r] === undefined) guaranteed = false;
      else if (requests[r] !== undefined && requests[r] !== limits[r]) guaranteed = false;
    }
  }
  if (!any) return 'BestEffort';
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

function validateContainers(list: unknown, field: string, required: boolean): FieldError[] {
  const errs: FieldError[] = [];
  const containers = Array.isArray(list) ? list : [];
  if (required && containers.length === 0) errs.push({ type: 'FieldValueRequired', field });
  const seen = new Set<string>();
  containers.forEach((c: unknown, i) => {
    const f = `${field}[${i}]`;
    const container = obj(c);
    if (!container.name) errs.push({ type: 'FieldValueRequired', field: `${f}.name` });
    else {
      for (const detail of isDns1123Label(String(container.name))) errs.push({ type: 'FieldValueInvalid', field: `${f}.name`, value: container.name, detail });
      if (seen.has(container.name)) errs.push({ type: 'FieldValueDuplicate', field: `${f}.name`, value: container.name });
      seen.add(container.name);
    }
    if (!container.image || String(container.image).trim() === '') errs.push({ type: 'FieldValueRequired', field: `${f}.image` });
    arr(container.ports).forEach((p, j) => {
      const port = p.containerPort;
      if (!Number.isInteger(port) || port < 1 || port > 65535) {
        errs.push({ type: 'FieldValueInvalid', field: `${f}.ports[${j}].containerPort`, value: port, detail: 'must be between 1 and 65535, inclusive' });
      }
    });
    arr(container.env).forEach((e, j) => {
      if (!e.name) errs.push({ type: 'FieldValueRequired', field: `${f}.env[${j}].name` });
    });
  });
  return errs;
}

const POD_MUTABLE_MESSAGE =
  'pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)';

function podStatusText(pod: KubeObject): string {
  const status = obj(pod.status);
  let reason = str(status.reason) || str(status.phase);
  let initializing = false;
  const initStatuses = arr(status.initContainerStatuses);
  const initCount = arr(obj(pod.spec).initContainers).length;
  for (let i = 0; i < initStatuses.length; i++) {
    const cs = initStatuses[i]!;
    const state = obj(cs.state);
    if (state.terminated && state.terminated.exitCode === 0) continue;
    if (state.terminated) {
      reason = state.terminated.reason ? `Init:${state.terminated.reason}` : `Init:ExitCode:${state.terminated.exitCode}`;
    } else if (state.waiting && state.waiting.reason && state.waiting.reason !== 'PodInitializing') {
      reason = `Init:${state.waiting.reason}`;
    } else {
      reason = `Init:${i}/${initCount}`;
    }
    initializing = true;
    break;
  }
  if (!initializing) {
    let hasRunning = false;
    const statuses = arr(status.containerStatuses);
    for (let i = statuses.length - 1; i >= 0; i--) {
      const state = obj(statuses[i]!.state);
      if (state.waiting && state.waiting.reason) reason = state.waiting.reason;
      else if (state.terminated && state.terminated.reason) reason = state.terminated.reason;
      else if (state.terminated) reason = state.terminated.signal ? `Signal:${state.terminated.signal}` : `ExitCode:${state.terminated.exitCode}`;
      else if (state.running && statuses[i]!.ready) hasRunning = true;
    }
    if (reason === 'Completed' && hasRunning) reason = 'Running';
  }
  if (pod.metadata?.deletionTimestamp) reason = status.reason === 'NodeLost' ? 'Unknown' : 'Terminating';
  return reason;
}

const pods: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'pods',
  singular: 'pod',
  kind: 'Pod',
  listKind: 'PodList',
  namespaced: true,
  shortNames: ['po'],
  categories: ['all'],
  nameRule: 'subdomain',
  subresources: ['status', 'binding', 'log'],
  hasStatus: true,
  returnDeletedObject: true,
  allowCreateOnUpdate: false,
  gracefulDeletion: true,
  fieldLabels: {
    'spec.nodeName': (o) => str(o.spec?.nodeName),
    'spec.restartPolicy': (o) => str(o.spec?.restartPolicy),
    'spec.schedulerName': (o) => str(o.spec?.schedulerName),
    'spec.serviceAccountName': (o) => str(o.spec?.serviceAccountName),
    'spec.hostNetwork': (o) => String(o.spec?.hostNetwork === true),
    'status.phase': (o) => str(o.status?.phase),
    'status.podIP': (o) => str(o.status?.podIP),
    'status.nominatedNodeName': (o) => str(o.status?.nominatedNodeName),
  },
  strategy: strategies(podStrategies),
  prepareForCreate(pod) {
    const spec = obj(pod.spec);
    pod.status = { phase: 'Pending', qosClass: qosClass(spec) };
    // Admission plugins: ServiceAccount and DefaultTolerationSeconds.
    if (isPlainObject(pod.spec)) {
      pod.spec.serviceAccountName ??= pod.spec.serviceAccount ?? 'default';
      pod.spec.serviceAccount = pod.spec.serviceAccountName;
      const tolerations: KubeObject[] = Array.isArray(pod.spec.tolerations) ? pod.spec.tolerations : [];
      for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
        if (!tolerations.some((t) => t.key === key)) tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
      }
      pod.spec.tolerations = tolerations;
    }
  },
  prepareForUpdate() {},
  applyDefaults(pod) {
    if (!isPlainObject(pod.spec)) return;
    const spec = pod.spec;
    spec.restartPolicy ??= 'Always';
    spec.terminationGracePeriodSeconds ??= 30;
    spec.dnsPolicy ??= 'ClusterFirst';
    spec.schedulerName ??= 'default-scheduler';
    spec.securityContext ??= {};
    spec.enableServiceLinks ??= true;
    spec.priority ??= 0;
    spec.preemptionPolicy ??= 'PreemptLowerPriority';
    for (const list of ['containers', 'initContainers', 'ephemeralContainers']) for (const c of arr(spec[list])) defaultContainer(c);
    for (const v of arr(spec.volumes)) {
      if (isPlainObject(v.configMap)) v.configMap.defaultMode ??= 420;
      if (isPlainObject(v.secret)) v.secret.defaultMode ??= 420;
    }
  },
  validate(pod) {
    const spec = obj(pod.spec);
    const errs = [...validateContainers(spec.containers, 'spec.containers', true), ...validateContainers(spec.initContainers, 'spec.initContainers', false)];
    if (spec.restartPolicy !== undefined && !['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy)) {
      errs.push({ type: 'FieldValueNotSupported', field: 'spec.restartPolicy', value: spec.restartPolicy, detail: 'supported values: "Always", "OnFailure", "Never"' });
    }
    const volumes = new Set<string>();
    arr(spec.volumes).forEach((v, i) => {
      if (!v.name) errs.push({ type: 'FieldValueRequired', field: `spec.volumes[${i}].name` });
      else if (volumes.has(v.name)) errs.push({ type: 'FieldValueDuplicate', field: `spec.volumes[${i}].name`, value: v.name });
      volumes.add(v.name);
    });
    return errs;
  },
  validateUpdate(pod, old) {
    const normalise = (p: KubeObject, images: KubeObject): KubeObject => {
      const spec = JSON.parse(JSON.stringify(obj(p.spec))) as KubeObject;
      for (const list of ['containers', 'initContainers']) {
        const srcList = arr(obj(images.spec)[list]);
        arr(spec[list]).forEach((c, i) => {
          if (srcList[i]) c.image = srcList[i]!.image;
        });
      }
      delete spec.activeDeadlineSeconds;
      delete spec.tolerations;
      delete spec.terminationGracePeriodSeconds;
      return spec;
    };
    const errs: FieldError[] = [];
    if (!deepEqual(normalise(pod, pod), normalise(old, pod))) errs.push({ type: 'FieldValueForbidden', field: 'spec', detail: POD_MUTABLE_MESSAGE });
    const oldTolerations = arr(obj(old.spec).tolerations);
    const newTolerations = arr(obj(pod.spec).tolerations);
    if (!oldTolerations.every((t) => newTolerations.some((n) => deepEqual(n, t)))) {
      errs.push({ type: 'FieldValueForbidden', field: 'spec.tolerations', detail: 'existing toleration can not be modified except its tolerationSeconds' });
    }
    return errs;
  },
  table: {
    columns: [
      NAME_COLUMN,
      { name: 'Ready', type: 'string', description: 'The aggregate readiness state of this pod for accepting traffic.', priority: 0 },
      { name: 'Status', type: 'string', description: 'The aggregate status of the containers in this pod.', priority: 0 },
      { name: 'Restarts', type: 'string', description: 'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.', priority: 0 },
      AGE_COLUMN,
      { name: 'IP', type: 'string', description: 'IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.', priority: 1 },
      { name: 'Node', type: 'string', description: 'NodeName is a request to schedule this pod onto a specific node.', priority: 1 },
      { name: 'Nominated Node', type: 'string', description: 'nominatedNodeName is set only when this pod preempts other pods on the node.', priority: 1 },
      { name: 'Readiness Gates', type: 'string', description: 'If specified, all readiness gates will be evaluated for pod readiness.', priority: 1 },
    ],
    cells(pod, now) {
      const statuses = arr(pod.status?.containerStatuses);
      const total = arr(pod.spec?.containers).length;
      const ready = statuses.filter((s) => s.ready === true).length;
      const restarts = statuses.reduce((n, s) => n + (Number(s.restartCount) || 0), 0);
      return [
        str(pod.metadata?.name),
        `${ready}/${total}`,
        podStatusText(pod),
        String(restarts),
        age(pod, now),
        str(pod.status?.podIP) || '<none>',
        str(pod.spec?.nodeName) || '<none>',
        str(pod.status?.nominatedNodeName) || '<none>',
        '<none>',
      ];
    },
  },
};

// ---------------------------------------------------------------------------------------------------------------
// services

const services: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'services',
  singular: 'service',
  kind: 'Service',
  listKind: 'ServiceList',
  namespaced: true,
  shortNames: ['svc'],
  categories: ['all'],
  nameRule: 'dns1035',
  subresources: ['status'],
  hasStatus: true,
  returnDeletedObject: true,
  allowCreateOnUpdate: false,
  gracefulDeletion: false,
  fieldLabels: {
    'spec.clusterIP': (o) => str(o.spec?.clusterIP),
    'spec.type': (o) => str(o.spec?.type),
  },
  strategy: strategies({ 'spec.ports': { strategy: 'merge', mergeKey: 'port' }, 'status.conditions': { strategy: 'merge', mergeKey: 'type' } }),
  prepareForCreate(svc, ctx) {
    svc.status = { loadBalancer: {} };
    if (!isPlainObject(svc.spec)) return;
    const spec = svc.spec;
    if (spec.type === 'ExternalName') return;
    if (!spec.clusterIP) {
      const fromList = Array.isArray(spec.clusterIPs) ? spec.clusterIPs[0] : undefined;
      spec.clusterIP = fromList || ctx.allocateClusterIP();
    }
    spec.clusterIPs = [spec.clusterIP];
    if (spec.type === 'NodePort' || spec.type === 'LoadBalancer') {
      for (const port of arr(spec.ports)) port.nodePort ??= ctx.allocateNodePort();
    }
  },
  prepareForUpdate(svc, old) {
    const oldSpec = obj(old.spec);
    if (!isPlainObject(svc.spec)) return;
    // The apiserver fills in allocated values a client left out of an update.
    if (!svc.spec.clusterIP && oldSpec.clusterIP) svc.spec.clusterIP = oldSpec.clusterIP;
    if (!svc.spec.clusterIPs && oldSpec.clusterIPs) svc.spec.clusterIPs = oldSpec.clusterIPs;
    const oldPorts = arr(oldSpec.ports);
    for (const port of arr(svc.spec.ports)) {
      if (port.nodePort === undefined) {
        const match = oldPorts.find((p) => p.port === port.port && p.nodePort !== undefined);
        if (match) port.nodePort = match.nodePort;
      }
    }
  },
  applyDefaults(svc) {
    if (!isPlainObject(svc.spec)) return;
    const spec = svc.spec;
    spec.type ??= 'ClusterIP';
    if (spec.type === 'ExternalName') return;
    spec.sessionAffinity ??= 'None';
    spec.ipFamilies ??= ['IPv4'];
    spec.ipFamilyPolicy ??= 'SingleStack';
    spec.internalTrafficPolicy ??= 'Cluster';
    if (spec.type === 'NodePort' || spec.type === 'LoadBalancer') spec.externalTrafficPolicy ??= 'Cluster';
    for (const port of arr(spec.ports)) {
      port.protocol ??= 'TCP';
      port.targetPort ??= port.port;
    }
  },
  validate(svc) {
    const spec = obj(svc.spec);
    const errs: FieldError[] = [];
    const type = spec.type ?? 'ClusterIP';
    if (!['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'].includes(type)) {
      errs.push({ type: 'FieldValueNotSupported', field: 'spec.type', value: type, detail: 'supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"' });
    }
    const ports = arr(spec.ports);
    if (type !== 'ExternalName' && spec.clusterIP !== 'None' && ports.length === 0) errs.push({ type: 'FieldValueRequired', field: 'spec.ports' });
    const names = new Set<string>();
    ports.forEach((p, i) => {
      const f = `spec.ports[${i}]`;
      if (ports.length > 1 && !p.name) errs.push({ type: 'FieldValueRequired', field: `${f}.name` });
      if (p.name) {
        for (const detail of isDns1123Label(String(p.name))) errs.push({ type: 'FieldValueInvalid', field: `${f}.name`, value: p.name, detail });
        if (names.has(p.name)) errs.push({ type: 'FieldValueDuplicate', field: `${f}.name`, value: p.name });
        names.add(p.name);
      }
      if (!Number.isInteger(p.port) || p.port < 1 || p.port > 65535) {
        errs.push({ type: 'FieldValueInvalid', field: `${f}.port`, value: p.port, detail: 'must be between 1 and 65535, inclusive' });
      }
      if (p.protocol !== undefined && !['TCP', 'UDP', 'SCTP'].includes(p.protocol)) {
        errs.push({ type: 'FieldValueNotSupported', field: `${f}.protocol`, value: p.protocol, detail: 'supported values: "SCTP", "TCP", "UDP"' });
      }
    });
    for (const [key, value] of Object.entries(obj(spec.selector))) {
      for (const e of validateLabels({ [key]: value }, 'spec.selector')) errs.push(e);
    }
    return errs;
  },
  validateUpdate(svc, old) {
    const oldIP = obj(old.spec).clusterIP;
    const newIP = obj(svc.spec).clusterIP;
    if (oldIP && newIP !== oldIP) {
      return [{ type: 'FieldValueInvalid', field: 'spec.clusterIPs[0]', value: newIP ?? '', detail: 'may not change once set' }];
    }
    return [];
  },
  table: {
    columns: [
      NAME_COLUMN,
      { name: 'Type', type: 'string', description: 'type determines how the Service is exposed.', priority: 0 },
      { name: 'Cluster-IP', type: 'string', description: 'clusterIP is the IP address of the service.', priority: 0 },
      { name: 'External-IP', type: 'string', description: 'externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.', priority: 0 },
      { name: 'Port(s)', type: 'string', description: 'The list of ports that are exposed by this service.', priority: 0 },
      AGE_COLUMN,
      { name: 'Selector', type: 'string', description: 'Route service traffic to pods with label keys and values matching this selector.', priority: 1 },
    ],
    cells(svc, now) {
      const spec = obj(svc.spec);
      const ports = arr(spec.ports).map((p) => (p.nodePort ? `${p.port}:${p.nodePort}/${p.protocol ?? 'TCP'}` : `${p.port}/${p.protocol ?? 'TCP'}`));
      const selector = Object.entries(obj(spec.selector)).map(([k, v]) => `${k}=${String(v)}`);
      const external = Array.isArray(spec.externalIPs) && spec.externalIPs.length > 0 ? spec.externalIPs.join(',') : spec.type === 'LoadBalancer' ? '<pending>' : '<none>';
      return [str(svc.metadata?.name), str(spec.type), str(spec.clusterIP) || '<none>', external, ports.join(',') || '<none>', age(svc, now), selector.join(',') || '<none>'];
    },
  },
};

// ---------------------------------------------------------------------------------------------------------------
// the rest of core/v1 and coordination.k8s.io/v1

export function simpleType(
  base: Pick<ResourceType, 'group' | 'version' | 'resource' | 'singular' | 'kind' | 'namespaced' | 'shortNames' | 'nameRule'> & Partial<ResourceType>,
): ResourceType {
  return {
    listKind: `${base.kind}List`,
    categories: [],
    subresources: [],
    hasStatus: false,
    returnDeletedObject: false,
    allowCreateOnUpdate: false,
    gracefulDeletion: false,
    fieldLabels: {},
    strategy: strategies({}),
    prepareForCreate() {},
    prepareForUpdate() {},
    applyDefaults() {},
    validate: noErrors,
    validateUpdate: noErrors,
    table: { columns: [NAME_COLUMN, AGE_COLUMN], cells: (o, now) => [str(o.metadata?.name), age(o, now)] },
    ...base,
  };
}

const namespaces = simpleType({
  group: '',
  version: 'v1',
  resource: 'namespaces',
  singular: 'namespace',
  kind: 'Namespace',
  namespaced: false,
  shortNames: ['ns'],
  nameRule: 'label',
  subresources: ['status'],
  hasStatus: true,
  returnDeletedObject: true,
  fieldLabels: { 'status.phase': (o) => str(o.status?.phase) },
  strategy: strategies({ 'status.conditions': { strategy: 'merge', mergeKey: 'type' } }),
  prepareForCreate(ns) {
    ns.status = { phase: 'Active' };
    ns.spec = { ...obj(ns.spec), finalizers: ['kubernetes'] };
  },
  prepareForUpdate(ns, old) {
    // spec.finalizers only changes through namespaces/finalize, which this server does not serve.
    ns.spec = { ...obj(ns.spec), finalizers: obj(old.spec).finalizers };
  },
  applyDefaults(ns) {
    ns.metadata.labels = { ...obj(ns.metadata.labels), 'kubernetes.io/metadata.name': ns.metadata.name };
  },
  table: {
    columns: [NAME_COLUMN, { name: 'Status', type: 'string', description: 'The status of the namespace', priority: 0 }, AGE_COLUMN],
    cells: (o, now) => [str(o.metadata?.name), str(o.status?.phase), age(o, now)],
  },
});

const configmaps = simpleType({
  group: '',
  version: 'v1',
  resource: 'configmaps',
  singular: 'configmap',
  kind: 'ConfigMap',
  namespaced: true,
  shortNames: ['cm'],
  nameRule: 'subdomain',
  validate: (cm) => [...validateDataKeys(cm.data, 'data'), ...validateDataKeys(cm.binaryData, 'binaryData')],
  table: {
    columns: [NAME_COLUMN, { name: 'Data', type: 'string', description: 'Data contains the configuration data.', priority: 0 }, AGE_COLUMN],
    cells: (o, now) => [str(o.metadata?.name), String(Object.keys(obj(o.data)).length + Object.keys(obj(o.binaryData)).length), age(o, now)],
  },
});

function foldStringData(secret: KubeObject): void {
  if (isPlainObject(secret.stringData)) {
    const data = { ...obj(secret.data) };
    for (const [k, v] of Object.entries(secret.stringData)) data[k] = Buffer.from(String(v), 'utf8').toString('base64');
    secret.data = data;
  }
  delete secret.stringData;
}

const secrets = simpleType({
  group: '',
  version: 'v1',
  resource: 'secrets',
  singular: 'secret',
  kind: 'Secret',
  namespaced: true,
  shortNames: [],
  nameRule: 'subdomain',
  fieldLabels: { type: (o) => str(o.type) },
  prepareForCreate: foldStringData,
  prepareForUpdate: (s) => foldStringData(s),
  applyDefaults(secret) {
    foldStringData(secret);
    secret.type ??= 'Opaque';
  },
  validate(secret) {
    const errs = validateDataKeys(secret.data, 'data');
    for (const [k, v] of Object.entries(obj(secret.data))) {
      if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0) {
        errs.push({ type: 'FieldValueInvalid', field: `data[${k}]`, value: v, detail: 'illegal base64 data' });
      }
    }
    if (secret.type === 'kubernetes.io/dockerconfigjson' && obj(secret.data)['.dockerconfigjson'] === undefined) {
      errs.push({ type: 'FieldValueRequired', field: 'data[.dockerconfigjson]' });
    }
    return errs;
  },
  table: {
    columns: [
      NAME_COLUMN,
      { name: 'Type', type: 'string', description: 'The type of the secret', priority: 0 },
      { name: 'Data', type: 'string', description: 'The number of entries in the secret', priority: 0 },
      AGE_COLUMN,
    ],
    cells: (o, now) => [str(o.metadata?.name), str(o.type), String(Object.keys(obj(o.data)).length), age(o, now)],
  },
});

const endpoints = simpleType({
  group: '',
  version: 'v1',
  resource: 'endpoints',
  singular: 'endpoints',
  kind: 'Endpoints',
  namespaced: true,
  shortNames: ['ep'],
  nameRule: 'subdomain',
  allowCreateOnUpdate: true,
  table: {
    columns: [NAME_COLUMN, { name: 'Endpoints', type: 'string', description: 'Endpoints of the service', priority: 0 }, AGE_COLUMN],
    cells(o, now) {
      const list: string[] = [];
      for (const subset of arr(o.subsets)) {
        const ports = arr(subset.ports);
        for (const a of arr(subset.addresses)) {
          if (ports.length === 0) list.push(str(a.ip));
          for (const p of ports) list.push(`${str(a.ip)}:${str(p.port)}`);
        }
      }
      const shown = list.slice(0, 3).join(',') + (list.length > 3 ? ` + ${list.length - 3} more...` : '');
      return [str(o.metadata?.name), shown || '<none>', age(o, now)];
    },
  },
});

const events = simpleType({
  group: '',
  version: 'v1',
  resource: 'events',
  singular: 'event',
  kind: 'Event',
  namespaced: true,
  shortNames: ['ev'],
  nameRule: 'subdomain',
  allowCreateOnUpdate: true,
  fieldLabels: {
    'involvedObject.kind': (o) => str(o.involvedObject?.kind),
    'involvedObject.namespace': (o) => str(o.involvedObject?.namespace),
    'involvedObject.name': (o) => str(o.involvedObject?.name),
    'involvedObject.uid': (o) => str(o.involvedObject?.uid),
    'involvedObject.apiVersion': (o) => str(o.involvedObject?.apiVersion),
    'involvedObject.resourceVersion': (o) => str(o.involvedObject?.resourceVersion),
    'involvedObject.fieldPath': (o) => str(o.involvedObject?.fieldPath),
    reason: (o) => str(o.reason),
    reportingComponent: (o) => str(o.reportingComponent),
    source: (o) => str(o.source?.component),
    type: (o) => str(o.type),
  },
  table: {
    columns: [
      { name: 'Last Seen', type: 'string', description: 'Time when last this event was reported.', priority: 0 },
      { name: 'Type', type: 'string', description: 'Type of this event (Normal, Warning), new types could be added in the future.', priority: 0 },
      { name: 'Reason', type: 'string', description: 'Reason is why the action was taken.', priority: 0 },
      { name: 'Object', type: 'string', description: 'The object that this event is about.', priority: 0 },
      { name: 'Message', type: 'string', description: 'A human-readable description of the status of this operation.', priority: 0 },
    ],
    cells(o, now) {
      const last = Date.parse(str(o.lastTimestamp || o.eventTime || o.metadata?.creationTimestamp));
      const involved = obj(o.involvedObject);
      return [
        Number.isNaN(last) ? '<unknown>' : humanDuration(now - last),
        str(o.type),
        str(o.reason),
        `${str(involved.kind).toLowerCase()}/${str(involved.name)}`,
        str(o.message),
      ];
    },
  },
});

const MICRO_TIME = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(.*)$/;
const MICRO_FRACTION = /^\.(\d{6})(Z|[+-]\d\d:\d\d)$/;

/**
 * A metav1.MicroTime as kube-apiserver decodes it: `time.Parse("2006-01-02T15:04:05.000000Z07:00")`, so exactly six
 * fractional digits (a JavaScript `toISOString()` with three is a 400), stored and returned in UTC.
 */
export function normalizeMicroTime(kind: string, value: unknown): unknown {
  if (value === undefined || value === null) return value;
  const cannot = (detail: string): never => {
    throw badRequest(`${kind} in version "v1" cannot be handled as a ${kind}: ${detail}`);
  };
  if (typeof value !== 'string') return cannot(`json: cannot unmarshal ${typeof value} into Go value of type string`);
  const layout = '"2006-01-02T15:04:05.000000Z07:00"';
  const m = MICRO_TIME.exec(value);
  const seconds = m ? Date.parse(`${m[1]}Z`) : NaN;
  if (!m || Number.isNaN(seconds)) return cannot(`parsing time ${JSON.stringify(value)} as ${layout}: cannot parse ${JSON.stringify(value)} as "2006"`);
  const f = MICRO_FRACTION.exec(m[2]!);
  if (!f) return cannot(`parsing time ${JSON.stringify(value)} as ${layout}: cannot parse ${JSON.stringify(m[2])} as ".000000"`);
  const zone = f[2] === 'Z' ? 0 : (f[2]!.startsWith('-') ? -1 : 1) * (Number(f[2]!.slice(1, 3)) * 60 + Number(f[2]!.slice(4, 6))) * 60_000;
  return `${new Date(seconds - zone).toISOString().slice(0, 19)}.${f[1]}Z`;
}

const leases = simpleType({
  group: 'coordination.k8s.io',
  version: 'v1',
  resource: 'leases',
  singular: 'lease',
  kind: 'Lease',
  namespaced: true,
  shortNames: [],
  nameRule: 'subdomain',
  applyDefaults(lease) {
    if (!isPlainObject(lease.spec)) return;
    for (const field of ['acquireTime', 'renewTime']) {
      if (field in lease.spec) lease.spec[field] = normalizeMicroTime('Lease', lease.spec[field]);
    }
  },
  validate(lease) {
    const spec = obj(lease.spec);
    const errs: FieldError[] = [];
    if (spec.leaseDurationSeconds !== undefined && spec.leaseDurationSeconds !== null && !(Number.isInteger(spec.leaseDurationSeconds) && spec.leaseDurationSeconds > 0)) {
      errs.push({ type: 'FieldValueInvalid', field: 'spec.leaseDurationSeconds', value: spec.leaseDurationSeconds, detail: 'must be greater than 0' });
    }
    if (spec.leaseTransitions !== undefined && spec.leaseTransitions !== null && !(Number.isInteger(spec.leaseTransitions) && spec.leaseTransitions >= 0)) {
      errs.push({ type: 'FieldValueInvalid', field: 'spec.leaseTransitions', value: spec.leaseTransitions, detail: 'must be greater than or equal to 0' });
    }
    return errs;
  },
  table: {
    columns: [NAME_COLUMN, { name: 'Holder', type: 'string', description: 'The holder of the lease', priority: 0 }, AGE_COLUMN],
    cells: (o, now) => [str(o.metadata?.name), str(o.spec?.holderIdentity) || '<none>', age(o, now)],
  },
});

// A ServiceAccount as the API stores it (no token controller: no secrets are added).
const serviceaccounts = simpleType({
  group: '',
  version: 'v1',
  resource: 'serviceaccounts',
  singular: 'serviceaccount',
  kind: 'ServiceAccount',
  namespaced: true,
  shortNames: ['sa'],
  nameRule: 'subdomain',
  table: {
    columns: [NAME_COLUMN, { name: 'Secrets', type: 'string', description: 'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.', priority: 0 }, AGE_COLUMN],
    cells: (o, now) => [str(o.metadata?.name), String(arr(o.secrets).length), age(o, now)],
  },
});

/** Every resource type the server knows, in discovery order. */
export const RESOURCE_TYPES: readonly ResourceType[] = [configmaps, endpoints, events, namespaces, pods, secrets, serviceaccounts, services, leases];

/**
 * Adds a resource type to every server in this process (custom resources: see custom-resources.ts). Registering
 * the same group/version/resource again is a no-op and returns the type already registered.
 */
export function registerResourceType(rt: ResourceType): ResourceType {
  const existing = findResourceType(rt.group, rt.version, rt.resource);
  if (existing) return existing;
  (RESOURCE_TYPES as ResourceType[]).push(rt);
  return rt;
}

export function findResourceType(group: string, version: string, resource: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((r) => r.group === group && r.version === version && r.resource === resource);
}

export function resourceTypeByName(resource: string): ResourceType {
  const byName = RESOURCE_TYPES.find((r) => r.resource === resource || `${r.resource}.${r.group}` === resource || r.kind === resource);
  if (!byName) throw new Error(`unknown resource type: ${resource}`);
  return byName;
}

/** Generic metadata validation shared by every type. */
export function validateObjectMeta(rt: ResourceType, o: KubeObject): FieldError[] {
  const meta = obj(o.metadata);
  const errs: FieldError[] = [];
  if (!meta.name) errs.push({ type: 'FieldValueRequired', field: 'metadata.name', detail: 'name or generateName is required' });
  else errs.push(...validateName(rt.nameRule, String(meta.name)));
  if (rt.namespaced) {
    if (!meta.namespace) errs.push({ type: 'FieldValueRequired', field: 'metadata.namespace' });
  } else if (meta.namespace) {
    errs.push({ type: 'FieldValueForbidden', field: 'metadata.namespace', detail: 'not allowed on this type' });
  }
  errs.push(...validateLabels(meta.labels), ...validateAnnotations(meta.annotations));
  if (meta.finalizers !== undefined) {
    if (!Array.isArray(meta.finalizers)) errs.push({ type: 'FieldValueInvalid', field: 'metadata.finalizers', value: meta.finalizers, detail: 'must be a list' });
    else
      for (const f of meta.finalizers) {
        if (typeof f !== 'string') {
          errs.push({ type: 'FieldValueInvalid', field: 'metadata.finalizers', value: f, detail: 'must be a string' });
        } else if (f.includes('/')) {
          for (const detail of isQualifiedName(f)) errs.push({ type: 'FieldValueInvalid', field: 'metadata.finalizers', value: f, detail });
        } else if (!['kubernetes', 'orphan', 'foregroundDeletion'].includes(f)) {
          errs.push({ type: 'FieldValueInvalid', field: 'metadata.finalizers', value: f, detail: 'name is neither a standard finalizer name nor is it fully qualified' });
        }
      }
  }
  return errs;
}
