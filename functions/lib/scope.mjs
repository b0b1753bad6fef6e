// Scope of the built-in Kubernetes kinds, keyed by "group/Kind" (core group is "").
// Unknown kinds (custom resources) are treated as namespaced when they carry a metadata.namespace
// field, as the catalog functions do.
import {at, meta} from './krm.mjs'

const NAMESPACED = new Set([
  '/Binding', '/ConfigMap', '/Endpoints', '/Event', '/LimitRange', '/PersistentVolumeClaim', '/Pod',
  '/PodTemplate', '/ReplicationController', '/ResourceQuota', '/Secret', '/Service', '/ServiceAccount',
  'apps/ControllerRevision', 'apps/DaemonSet', 'apps/Deployment', 'apps/ReplicaSet', 'apps/StatefulSet',
  'extensions/DaemonSet', 'extensions/Deployment', 'extensions/Ingress', 'extensions/NetworkPolicy',
  'extensions/ReplicaSet',
  'autoscaling/HorizontalPodAutoscaler', 'batch/CronJob', 'batch/Job',
  'authorization.k8s.io/LocalSubjectAccessReview',
  'coordination.k8s.io/Lease', 'discovery.k8s.io/EndpointSlice', 'events.k8s.io/Event',
  'networking.k8s.io/Ingress', 'networking.k8s.io/NetworkPolicy', 'policy/PodDisruptionBudget',
  'rbac.authorization.k8s.io/Role', 'rbac.authorization.k8s.io/RoleBinding',
  'storage.k8s.io/CSIStorageCapacity',
  'resource.k8s.io/ResourceClaim', 'resource.k8s.io/ResourceClaimTemplate', 'resource.k8s.io/PodSchedulingContext',
])

const CLUSTER_SCOPED = new Set([
  '/ComponentStatus', '/Namespace', '/Node', '/PersistentVolume',
  'admissionregistration.k8s.io/MutatingWebhookConfiguration',
  'admissionregistration.k8s.io/ValidatingWebhookConfiguration',
  'admissionregistration.k8s.io/ValidatingAdmissionPolicy',
  'admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding',
  'admissionregistration.k8s.io/MutatingAdmissionPolicy',
  'admissionregistration.k8s.io/MutatingAdmissionPolicyBinding',
  'apiextensions.k8s.io/CustomResourceDefinition', 'apiregistration.k8s.io/APIService',
  'authentication.k8s.io/TokenReview', 'authentication.k8s.io/SelfSubjectReview',
  'authorization.k8s.io/SelfSubjectAccessReview', 'authorization.k8s.io/SelfSubjectRulesReview',
  'authorization.k8s.io/SubjectAccessReview',
  'certificates.k8s.io/CertificateSigningRequest', 'certificates.k8s.io/ClusterTrustBundle',
  'flowcontrol.apiserver.k8s.io/FlowSchema', 'flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration',
  'internal.apiserver.k8s.io/StorageVersion',
  'networking.k8s.io/IngressClass', 'networking.k8s.io/IPAddress', 'networking.k8s.io/ServiceCIDR',
  'node.k8s.io/RuntimeClass', 'policy/PodSecurityPolicy', 'extensions/PodSecurityPolicy',
  'rbac.authorization.k8s.io/ClusterRole', 'rbac.authorization.k8s.io/ClusterRoleBinding',
  'resource.k8s.io/DeviceClass', 'resource.k8s.io/ResourceSlice',
  'scheduling.k8s.io/PriorityClass',
  'storage.k8s.io/CSIDriver', 'storage.k8s.io/CSINode', 'storage.k8s.io/StorageClass',
  'storage.k8s.io/VolumeAttachment', 'storage.k8s.io/VolumeAttributesClass',
  'storagemigration.k8s.io/StorageVersionMigration',
])

/** true: namespaced, false: cluster-scoped. */
export function isNamespaced(item) {
  const {group, kind} = meta(item)
  const key = `${group}/${kind}`
  if (NAMESPACED.has(key)) return true
  if (CLUSTER_SCOPED.has(key)) return false
  return at(item, 'metadata', 'namespace') !== undefined
}
