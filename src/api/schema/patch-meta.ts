/**
 * How lists, maps and structs of the built-in types merge: Kubernetes' `patchStrategy`/`patchMergeKey` struct tags
 * (strategic merge patch) and `+listType`/`+listMapKey`/`+mapType`/`+structType` markers (server-side apply and the
 * OpenAPI `x-kubernetes-*` extensions), as declared in k8s.io/api and k8s.io/apimachinery types.go (1.32).
 * Written by hand here: the npm packages the schemas are generated from do not carry them. This is the ONE source
 * of merge keys: strategic merge patch, server-side apply and the OpenAPI documents all read it.
 */
export interface FieldPatchMeta {
  /** The patchStrategy tag: "merge", "retainKeys", "merge,retainKeys" or "replace". */
  strategy?: string;
  /** The patchMergeKey tag. */
  key?: string;
  /** +listType: how server-side apply identifies list elements. */
  list?: 'atomic' | 'set' | 'map';
  /** +listMapKey (for list: map). */
  mapKeys?: string[];
  /** +mapType=atomic on a map field: replaced whole. */
  mapType?: 'atomic' | 'granular';
}

const atomic: FieldPatchMeta = { list: 'atomic' };
const set: FieldPatchMeta = { list: 'set' };
const mergeBy = (key: string, mapKeys: string[] = [key], strategy = 'merge'): FieldPatchMeta => ({
  strategy,
  key,
  list: 'map',
  mapKeys,
});
/** Lists that merge by key for strategic merge patch but are atomic for server-side apply. */
const mergeAtomic = (key: string): FieldPatchMeta => ({ strategy: 'merge', key, list: 'atomic' });
const conditions = mergeBy('type');

const CORE = 'io.k8s.api.core.v1.';
const META = 'io.k8s.apimachinery.pkg.apis.meta.v1.';

const containerLists: Record<string, FieldPatchMeta> = {
  command: atomic,
  args: atomic,
  ports: mergeBy('containerPort', ['containerPort', 'protocol']),
  envFrom: atomic,
  env: mergeBy('name'),
  volumeMounts: mergeBy('mountPath'),
  volumeDevices: mergeBy('devicePath'),
  resizePolicy: atomic,
};

export const PATCH_META: Readonly<Record<string, Readonly<Record<string, FieldPatchMeta>>>> = {
  [`${META}ObjectMeta`]: {
    finalizers: { strategy: 'merge', list: 'set' },
    ownerReferences: mergeBy('uid'),
    managedFields: atomic,
  },
  [`${META}LabelSelector`]: { matchExpressions: atomic },
  [`${META}LabelSelectorRequirement`]: { values: atomic },
  [`${META}StatusDetails`]: { causes: atomic },
  [`${META}DeleteOptions`]: { dryRun: atomic },

  [`${CORE}PodSpec`]: {
    volumes: mergeBy('name', ['name'], 'merge,retainKeys'),
    initContainers: mergeBy('name'),
    containers: mergeBy('name'),
    ephemeralContainers: mergeBy('name'),
    nodeSelector: { mapType: 'atomic' },
    imagePullSecrets: mergeBy('name'),
    tolerations: atomic,
    hostAliases: mergeBy('ip'),
    readinessGates: atomic,
    topologySpreadConstraints: mergeBy('topologyKey', ['topologyKey', 'whenUnsatisfiable']),
    schedulingGates: mergeBy('name'),
    resourceClaims: mergeBy('name', ['name'], 'merge,retainKeys'),
  },
  [`${CORE}PodSecurityContext`]: { supplementalGroups: atomic, sysctls: atomic },
  [`${CORE}Container`]: containerLists,
  [`${CORE}EphemeralContainer`]: containerLists,
  [`${CORE}Capabilities`]: { add: atomic, drop: atomic },
  [`${CORE}ResourceRequirements`]: { claims: { list: 'map', mapKeys: ['name'] } },
  [`${CORE}ExecAction`]: { command: atomic },
  [`${CORE}HTTPGetAction`]: { httpHeaders: atomic },
  [`${CORE}PodDNSConfig`]: { nameservers: atomic, searches: atomic, options: atomic },
  [`${CORE}HostAlias`]: { hostnames: atomic },
  [`${CORE}NodeSelector`]: { nodeSelectorTerms: atomic },
  [`${CORE}NodeSelectorTerm`]: { matchExpressions: atomic, matchFields: atomic },
  [`${CORE}NodeSelectorRequirement`]: { values: atomic },
  [`${CORE}NodeAffinity`]: { preferredDuringSchedulingIgnoredDuringExecution: atomic },
  [`${CORE}PodAffinity`]: {
    requiredDuringSchedulingIgnoredDuringExecution: atomic,
    preferredDuringSchedulingIgnoredDuringExecution: atomic,
  },
  [`${CORE}PodAntiAffinity`]: {
    requiredDuringSchedulingIgnoredDuringExecution: atomic,
    preferredDuringSchedulingIgnoredDuringExecution: atomic,
  },
  [`${CORE}PodAffinityTerm`]: { namespaces: atomic, matchLabelKeys: atomic, mismatchLabelKeys: atomic },
  [`${CORE}TopologySpreadConstraint`]: { matchLabelKeys: atomic },
  [`${CORE}PodStatus`]: {
    conditions,
    podIPs: mergeBy('ip'),
    hostIPs: mergeAtomic('ip'),
    initContainerStatuses: atomic,
    containerStatuses: atomic,
    ephemeralContainerStatuses: atomic,
    resourceClaimStatuses: mergeBy('name', ['name'], 'merge,retainKeys'),
  },
  [`${CORE}ContainerStatus`]: {
    volumeMounts: mergeAtomic('mountPath'),
    allocatedResourcesStatus: { list: 'map', mapKeys: ['name'] },
  },
  [`${CORE}ConfigMapVolumeSource`]: { items: atomic },
  [`${CORE}SecretVolumeSource`]: { items: atomic },
  [`${CORE}DownwardAPIVolumeSource`]: { items: atomic },
  [`${CORE}DownwardAPIProjection`]: { items: atomic },
  [`${CORE}ConfigMapProjection`]: { items: atomic },
  [`${CORE}SecretProjection`]: { items: atomic },
  [`${CORE}ProjectedVolumeSource`]: { sources: atomic },
  [`${CORE}ServiceSpec`]: {
    ports: mergeBy('port', ['port', 'protocol']),
    selector: { mapType: 'atomic' },
    clusterIPs: atomic,
    externalIPs: atomic,
    loadBalancerSourceRanges: atomic,
    ipFamilies: atomic,
  },
  [`${CORE}ServiceStatus`]: { conditions },
  [`${CORE}LoadBalancerStatus`]: { ingress: atomic },
  [`${CORE}LoadBalancerIngress`]: { ports: atomic },
  [`${CORE}Endpoints`]: { subsets: atomic },
  [`${CORE}EndpointSubset`]: { addresses: atomic, notReadyAddresses: atomic, ports: atomic },
  [`${CORE}ServiceAccount`]: { secrets: mergeBy('name'), imagePullSecrets: atomic },
  [`${CORE}NamespaceSpec`]: { finalizers: atomic },
  [`${CORE}NamespaceStatus`]: { conditions },
  [`${CORE}NodeSpec`]: { podCIDRs: { strategy: 'merge', list: 'set' }, taints: atomic },
  [`${CORE}NodeStatus`]: {
    conditions,
    addresses: mergeBy('type'),
    volumesInUse: atomic,
    volumesAttached: atomic,
    images: atomic,
  },
  [`${CORE}ContainerImage`]: { names: atomic },
  [`${CORE}PersistentVolumeClaimSpec`]: { accessModes: atomic },
  [`${CORE}PersistentVolumeClaimStatus`]: {
    accessModes: atomic,
    conditions,
    allocatedResourceStatuses: { mapType: 'granular' },
  },
  [`${CORE}PersistentVolumeSpec`]: { accessModes: atomic, mountOptions: atomic },
  [`${CORE}ReplicationControllerStatus`]: { conditions },
  [`${CORE}LimitRangeSpec`]: { limits: atomic },
  [`${CORE}ResourceQuotaSpec`]: {},
  [`${CORE}ScopeSelector`]: { matchExpressions: atomic },
  [`${CORE}ScopedResourceSelectorRequirement`]: { values: atomic },

  'io.k8s.api.apps.v1.DeploymentSpec': { strategy: { strategy: 'retainKeys' } },
  'io.k8s.api.apps.v1.DeploymentStatus': { conditions },
  'io.k8s.api.apps.v1.ReplicaSetStatus': { conditions },
  'io.k8s.api.apps.v1.StatefulSetSpec': { volumeClaimTemplates: atomic },
  'io.k8s.api.apps.v1.StatefulSetStatus': { conditions },
  'io.k8s.api.apps.v1.DaemonSetStatus': { conditions },

  'io.k8s.api.batch.v1.JobStatus': { conditions: mergeAtomic('type') },
  'io.k8s.api.batch.v1.PodFailurePolicy': { rules: atomic },
  'io.k8s.api.batch.v1.PodFailurePolicyRule': { onPodConditions: atomic },
  'io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement': { values: set },
  'io.k8s.api.batch.v1.SuccessPolicy': { rules: atomic },
  'io.k8s.api.batch.v1.CronJobStatus': { active: atomic },

  'io.k8s.api.rbac.v1.Role': { rules: atomic },
  'io.k8s.api.rbac.v1.ClusterRole': { rules: atomic },
  'io.k8s.api.rbac.v1.PolicyRule': {
    verbs: atomic,
    apiGroups: atomic,
    resources: atomic,
    resourceNames: atomic,
    nonResourceURLs: atomic,
  },
  'io.k8s.api.rbac.v1.RoleBinding': { subjects: atomic },
  'io.k8s.api.rbac.v1.ClusterRoleBinding': { subjects: atomic },
  'io.k8s.api.rbac.v1.AggregationRule': { clusterRoleSelectors: atomic },

  'io.k8s.api.policy.v1.PodDisruptionBudgetStatus': { conditions },
  'io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec': { metrics: atomic },
  'io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus': { conditions, currentMetrics: atomic },
};

/** Types serialised and applied as one value (`+structType=atomic`): references and selectors. */
export const ATOMIC_STRUCTS: ReadonlySet<string> = new Set([
  `${META}LabelSelector`,
  `${META}OwnerReference`,
  `${CORE}LocalObjectReference`,
  `${CORE}ObjectReference`,
  `${CORE}TypedLocalObjectReference`,
  `${CORE}ConfigMapKeySelector`,
  `${CORE}SecretKeySelector`,
  `${CORE}ObjectFieldSelector`,
  `${CORE}ResourceFieldSelector`,
  `${CORE}NodeSelector`,
  `${CORE}TopologySelectorTerm`,
  'io.k8s.api.rbac.v1.RoleRef',
]);

export function patchMetaOf(typeName: string, field: string): FieldPatchMeta | undefined {
  return PATCH_META[typeName]?.[field];
}
