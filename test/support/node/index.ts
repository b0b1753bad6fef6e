export { ImageStore, ImagePullError, type PulledImage, unpackLayer } from './images.js';
export { createPodNetwork, removePodNetwork, liveNetworks, networkWithAddress, type PodNetwork } from './network.js';
export { NodePod, type PodHost } from './pod.js';
export { findRunc, findStaticBusybox, nodeUnavailableReason, runcUnavailableReason } from './runc.js';
export { RuncRuntime, type KubeletPod, type RuncRuntimeOptions } from './runtime.js';
export { ContainerConfigError, containerArgv, expandVars, resolveCapabilities, resolveUser, runtimeSpec } from './spec.js';
export { TestDnsServer } from './dns.js';
