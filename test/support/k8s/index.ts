/** The Kubernetes test bed: see README.md in this directory. */
export { startTestBed, kubeconfigYaml } from './testbed.js';
export type { TestBed, TestBedOptions } from './testbed.js';
export { TestApiServer } from './server.js';
export type { TestApiServerOptions, RequestRecord, DropWatchesOptions, PodLogProvider } from './server.js';
export { LocalKubelet, expandVars } from './kubelet.js';
export type { LocalKubeletOptions, ImageEntry, ImageMapping, PodInfo } from './kubelet.js';
export { ObjectRegistry, PATCH_TYPES } from './registry.js';
export type { RegistryOptions, StoreEvent, WriteResult, DeleteOptions, ListOptions, WatchOptions } from './registry.js';
export { FaultInjector } from './faults.js';
export type { FailureRule, LatencyRule, FaultHandle, Verb } from './faults.js';
export { KubeRestClient, KubeRequestError, resourcePath } from './client.js';
export type { ClusterEndpoint, RawResponse, WatchHandle } from './client.js';
export { Reflector } from './reflector.js';
export { runKubectl, KubectlStream, kubectlAvailable, KUBECTL_PATH } from './kubectl.js';
export type { KubectlResult, KubectlTarget } from './kubectl.js';
export { ApiError } from './status.js';
export type { KubeObject, StatusObject } from './status.js';
export { allocateLoopbackAddress, DEFAULT_POD_IP_PREFIX } from './loopback.js';
