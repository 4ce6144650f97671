import { Errors, FieldErrors, type StatusCause } from '../../api/errors.js';
import { createServiceAccountToken } from '../serviceaccount-token.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { joinHostPort, parseIp, validateIp, validateNonSpecialIp } from '../../api/ip.js';
import {
  checkConfigMapKey,
  checkDns1123Label,
  checkDns1123Subdomain,
  checkQualifiedName,
} from '../../api/validation.js';
import { ageOf, col, field, num, orNone, str } from '../printers.js';
import type { KindInfo, StrategyContext } from '../types.js';
import { bindPod, evictPod } from '../pod-subresources.js';
import {
  defaultPodSpec,
  defaultRequestsFromLimits,
  MIRROR_POD_ANNOTATION,
  qosClass,
  validateEphemeralContainersUpdate,
  validatePodSpec,
  withEphemeralContainers,
} from './pod-spec.js';
import { podIP, podRestarts, podRow } from '../pod-printer.js';
import { coreEventColumns } from './events.js';
import { admitPodPriority, keepPodPriority } from './scheduling.js';
import { accessModesString, claimClass, volumeClass } from '../../api/volumes.js';
import {
  defaultClaimStorageClass,
  quantityColumn,
  validateClaim,
  validateClaimUpdate,
  validateVolume,
  validateVolumeUpdate,
  volumePhaseColumn,
} from './storage.js';

type Obj = Record<string, unknown>;

function spec(obj: KubeObject): Obj {
  if (!isPlainObject(obj.spec)) obj.spec = {};
  return obj.spec as Obj;
}

/** The tolerations DefaultTolerationSeconds admission adds to every pod: 300 s for not-ready and unreachable. */
function addDefaultTolerations(podSpec: Obj): void {
  const tolerations = Array.isArray(podSpec.tolerations) ? (podSpec.tolerations as Obj[]) : [];
  for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
    const covered = tolerations.some(
      (t) =>
        (t.key === key || (t.key === undefined && t.operator === 'Exists')) &&
        (t.effect === undefined || t.effect === 'NoExecute' || t.effect === ''),
    );
    if (!covered) tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
  }
  podSpec.tolerations = tolerations;
}

function validateKeyedData(
  obj: KubeObject,
  fieldName: 'data' | 'binaryData' | 'stringData',
  base64: boolean,
): StatusCause[] {
  const data = obj[fieldName];
  if (data === undefined || data === null) return [];
  if (!isPlainObject(data))
    return [FieldErrors.invalid(fieldName, data, 'must be a map of string keys to string values')];
  const causes: StatusCause[] = [];
  for (const [key, value] of Object.entries(data)) {
    for (const p of checkConfigMapKey(key)) causes.push(FieldErrors.invalid(fieldName, key, p));
    if (typeof value !== 'string') causes.push(FieldErrors.invalid(`${fieldName}[${key}]`, value, 'must be a string'));
    else if (base64 && !/^[A-Za-z0-9+/]*={0,2}$/.test(value))
      causes.push(FieldErrors.invalid(`${fieldName}[${key}]`, '<secret contents redacted>', 'must be base64 encoded'));
  }
  return causes;
}

/** core.MaxSecretSize: what a ConfigMap's or a Secret's data may hold in all, in bytes. */
const MAX_SECRET_SIZE = 1024 * 1024;

/** The bytes the values of a data map hold: UTF-8 text, or (base64) what the text decodes to. */
function dataBytes(data: unknown, base64: boolean): number {
  if (!isPlainObject(data)) return 0;
  let total = 0;
  for (const value of Object.values(data)) {
    if (typeof value !== 'string') continue;
    if (!base64) total += Buffer.byteLength(value);
    else total += (value.length / 4) * 3 - (value.endsWith('==') ? 2 : value.endsWith('=') ? 1 : 0);
  }
  return total;
}

function dataCount(obj: KubeObject): number {
  const count = (v: unknown): number => (isPlainObject(v) ? Object.keys(v).length : 0);
  return count(obj.data) + count(obj.binaryData);
}

/** The pod STATUS column (kubectl's printPod): see podRow in ../pod-printer.ts. */
export function podStatusReason(pod: KubeObject): { reason: string; ready: number; total: number; restarts: number } {
  const { reason, ready, total, restarts } = podRow(pod);
  return { reason, ready, total, restarts };
}

const namespaces: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Namespace',
  resource: 'namespaces',
  singular: 'namespace',
  namespaced: false,
  shortNames: ['ns'],
  status: true,
  nameRule: 'label',
  // Namespaces are deleted one by one (the namespace controller empties each): no deletecollection.
  verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
  selectableFields: { 'status.phase': (o) => str(o, 'status.phase') },
  strategy: {
    prepareForCreate(obj) {
      const s = spec(obj);
      s.finalizers = ['kubernetes'];
      obj.status = { phase: 'Active' };
    },
    defaults(obj) {
      obj.metadata.labels = { ...(obj.metadata.labels ?? {}), 'kubernetes.io/metadata.name': obj.metadata.name ?? '' };
    },
    prepareForUpdate(next, old) {
      next.spec = old.spec;
    },
    specFinalizers(obj) {
      const finalizers = field(obj, 'spec.finalizers');
      return Array.isArray(finalizers) ? (finalizers as string[]) : [];
    },
    prepareForDelete(obj) {
      obj.status = { ...(isPlainObject(obj.status) ? obj.status : {}), phase: 'Terminating' };
    },
  },
  extraSubresources: [{ name: 'finalize', kind: 'Namespace', verbs: ['update'] }],
  columns: [col('Status', (o) => str(o, 'status.phase'), { description: 'The status of the namespace' })],
};

const pods: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Pod',
  resource: 'pods',
  singular: 'pod',
  namespaced: true,
  shareParts: true,
  shortNames: ['po'],
  categories: ['all'],
  status: true,
  selectableFields: {
    'spec.nodeName': (o) => str(o, 'spec.nodeName'),
    'spec.restartPolicy': (o) => str(o, 'spec.restartPolicy'),
    'spec.schedulerName': (o) => str(o, 'spec.schedulerName'),
    'spec.serviceAccountName': (o) => str(o, 'spec.serviceAccountName'),
    'spec.hostNetwork': (o) => String(field(o, 'spec.hostNetwork') === true),
    'status.phase': (o) => str(o, 'status.phase'),
    'status.podIP': (o) => str(o, 'status.podIP'),
    'status.nominatedNodeName': (o) => str(o, 'status.nominatedNodeName'),
  },
  indexedFields: ['spec.nodeName'],
  extraSubresources: [
    { name: 'binding', kind: 'Binding', verbs: ['create'], create: bindPod },
    { name: 'ephemeralcontainers', kind: 'Pod', verbs: ['get', 'patch', 'update'] },
    { name: 'eviction', kind: 'Eviction', group: 'policy', version: 'v1', verbs: ['create'], create: evictPod },
    { name: 'attach', kind: 'PodAttachOptions', verbs: ['create', 'get'] },
    { name: 'exec', kind: 'PodExecOptions', verbs: ['create', 'get'] },
    { name: 'log', kind: 'Pod', verbs: ['get'] },
    { name: 'portforward', kind: 'PodPortForwardOptions', verbs: ['create', 'get'] },
    { name: 'proxy', kind: 'PodProxyOptions', verbs: ['create', 'delete', 'get', 'patch', 'update'] },
  ],
  strategy: {
    defaults(obj) {
      const s = spec(obj);
      defaultPodSpec(s);
      defaultRequestsFromLimits(s);
      if (s.serviceAccountName === undefined) s.serviceAccountName = s.serviceAccount ?? 'default';
      s.serviceAccount = s.serviceAccountName;
      if (s.enableServiceLinks === undefined) s.enableServiceLinks = true;
      addDefaultTolerations(s);
    },
    prepareForCreate(obj, ctx) {
      // Priority admission: spec.priority and preemptionPolicy come from the PriorityClass, not from defaults.
      admitPodPriority(obj, ctx);
      obj.status = { phase: 'Pending', qosClass: qosClass(spec(obj)) };
    },
    prepareForUpdate: keepPodPriority,
    // pods/status resets only spec, deletionTimestamp and ownerReferences (podStatusStrategy): labels, annotations
    // and finalizers sent with a status write are kept, so a kubelet can label a pod as it reports on it.
    statusMetadata: ['labels', 'annotations', 'finalizers'],
    // ValidatePodStatusUpdate: ObjectMeta update rules and the status, not the spec.
    statusValidation: 'metadata',
    validate(obj) {
      return validatePodSpec(obj.spec, 'spec');
    },
    // ValidatePodCreate: ephemeral containers come only through pods/ephemeralcontainers.
    validateCreate(obj) {
      const list = isPlainObject(obj.spec) ? obj.spec.ephemeralContainers : undefined;
      return Array.isArray(list) && list.length > 0
        ? [FieldErrors.forbidden('spec.ephemeralContainers', 'cannot be set on create')]
        : [];
    },
    subresources: { ephemeralcontainers: withEphemeralContainers },
    validateSubresourceUpdate: {
      ephemeralcontainers: (next, old) =>
        old.metadata.annotations?.[MIRROR_POD_ANNOTATION] !== undefined
          ? [FieldErrors.forbidden('', 'static pods do not support ephemeral containers')]
          : validateEphemeralContainersUpdate(next.spec, old.spec),
    },
    validateUpdate(next, old) {
      // A status write keeps the stored spec itself, and most updates (labels, annotations, finalizers) leave it
      // as it was: a walk that allocates nothing, where the check below copies both specs.
      if (next.spec === old.spec || deepEqual(next.spec, old.spec)) return [];
      // Pod spec is immutable but for a few fields (image, activeDeadlineSeconds, tolerations additions).
      const strip = (s: unknown): unknown => {
        if (!isPlainObject(s)) return s;
        const {
          containers,
          initContainers,
          activeDeadlineSeconds: _a,
          tolerations: _t,
          terminationGracePeriodSeconds: _g,
          ...rest
        } = s;
        const noImages = (list: unknown): unknown =>
          Array.isArray(list) ? list.map((c) => (isPlainObject(c) ? { ...c, image: undefined } : c)) : list;
        return { ...rest, containers: noImages(containers), initContainers: noImages(initContainers) };
      };
      // Compared as values, whatever order the keys come in (kubectl's YAML round trip sorts them).
      if (!deepEqual(strip(next.spec), strip(old.spec))) {
        return [
          FieldErrors.forbidden(
            'spec',
            'pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
          ),
        ];
      }
      return [];
    },
    gracePeriodSeconds(pod, requested) {
      const phase = str(pod, 'status.phase');
      if (!str(pod, 'spec.nodeName') || phase === 'Succeeded' || phase === 'Failed') return 0;
      return requested ?? num(pod, 'spec.terminationGracePeriodSeconds');
    },
  },
  columns: [
    col(
      'Ready',
      (o) => {
        const s = podRow(o);
        return `${s.ready}/${s.total}`;
      },
      { description: 'The aggregate readiness state of this pod for accepting traffic.' },
    ),
    col('Status', (o) => podRow(o).reason, { description: 'The aggregate status of the containers in this pod.' }),
    col('Restarts', (o, now) => podRestarts(o, now), {
      description:
        'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.',
    }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col('IP', (o) => podIP(o), {
      priority: 1,
      description: 'IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.',
    }),
    col('Node', (o) => orNone(str(o, 'spec.nodeName')), {
      priority: 1,
      description: 'NodeName is a request to schedule this pod onto a specific node.',
    }),
    col('Nominated Node', (o) => orNone(str(o, 'status.nominatedNodeName')), {
      priority: 1,
      description: 'nominatedNodeName is set only when this pod preempts other pods on the node.',
    }),
    col(
      'Readiness Gates',
      (o) => {
        const gates = field(o, 'spec.readinessGates');
        if (!Array.isArray(gates) || gates.length === 0) return '<none>';
        const conditions = (field(o, 'status.conditions') as Obj[] | undefined) ?? [];
        const ok = gates.filter((g) =>
          conditions.some((c) => c.type === (g as Obj).conditionType && c.status === 'True'),
        ).length;
        return `${ok}/${gates.length}`;
      },
      { priority: 1, description: 'If specified, all readiness gates will be evaluated for pod readiness.' },
    ),
  ],
  noAge: true,
};

const NODE_PORT_TYPES = new Set(['NodePort', 'LoadBalancer']);

function needsNodePorts(s: Obj): boolean {
  return s.type === 'NodePort' || (s.type === 'LoadBalancer' && s.allocateLoadBalancerNodePorts !== false);
}

function allocateServiceIPs(obj: KubeObject, ctx: StrategyContext): void {
  const s = spec(obj);
  if (s.type === 'ExternalName') return;
  if (s.clusterIP === undefined || s.clusterIP === '') s.clusterIP = ctx.allocateClusterIP();
  if (s.clusterIPs === undefined) s.clusterIPs = [s.clusterIP];
}

/**
 * The node ports a NodePort or LoadBalancer Service needs, as kube-apiserver's REST layer allocates them: a port the
 * client names must be in --service-node-port-range and free (its own, on an update, stay its own); a port without
 * one gets a free one, shared by the ports of one number that differ in protocol. `old` is the stored Service on
 * an update. A LoadBalancer with externalTrafficPolicy Local also gets a health check node port.
 */
function allocateNodePorts(obj: KubeObject, old: KubeObject | undefined, ctx: StrategyContext): void {
  const s = spec(obj);
  const ports = Array.isArray(s.ports) ? (s.ports as Obj[]) : [];
  const own = new Set(old ? nodePortsHeld(old) : []);
  const [low, high] = ctx.nodePorts.range;
  const causes: StatusCause[] = [];
  const check = (port: number, at: string): void => {
    if (port < low || port > high)
      causes.push(
        FieldErrors.invalid(
          at,
          port,
          `provided port is not in the valid range. The range of valid ports is ${low}-${high}`,
        ),
      );
    else if (ctx.nodePorts.isAllocated(port) && !own.has(port))
      causes.push(FieldErrors.invalid(at, port, 'provided port is already allocated'));
  };
  const taken = new Set<number>();
  ports.forEach((p, i) => {
    if (typeof p.nodePort === 'number' && p.nodePort !== 0) {
      if (!taken.has(p.nodePort)) check(p.nodePort, `spec.ports[${i}].nodePort`);
      taken.add(p.nodePort);
    }
  });
  if (needsNodePorts(s)) {
    // Patched in from the stored Service by port name when the client left them out (patchAllocatedValues).
    const previous = old ? ((spec(old).ports as Obj[] | undefined) ?? []) : [];
    for (const p of ports) {
      if (typeof p.nodePort === 'number' && p.nodePort !== 0) continue;
      const before = previous.find((q) => (q.name ?? '') === (p.name ?? ''))?.nodePort;
      if (typeof before === 'number' && !taken.has(before)) {
        p.nodePort = before;
        taken.add(before);
      }
    }
    for (const p of ports) {
      if (typeof p.nodePort === 'number' && p.nodePort !== 0) continue;
      const sibling = ports.find(
        (q) => q !== p && q.port === p.port && typeof q.nodePort === 'number' && q.nodePort !== 0,
      );
      const port = typeof sibling?.nodePort === 'number' ? sibling.nodePort : ctx.nodePorts.allocate(taken);
      p.nodePort = port;
      taken.add(port);
    }
  }
  if (s.type === 'LoadBalancer' && s.externalTrafficPolicy === 'Local') {
    const held = old ? spec(old).healthCheckNodePort : undefined;
    if (typeof s.healthCheckNodePort === 'number' && s.healthCheckNodePort !== 0) {
      if (s.healthCheckNodePort !== held) check(s.healthCheckNodePort, 'spec.healthCheckNodePort');
    } else s.healthCheckNodePort = typeof held === 'number' ? held : ctx.nodePorts.allocate(taken);
  }
  if (causes.length > 0) throw Errors.invalid('', 'Service', obj.metadata.name ?? '', causes);
}

function nodePortsHeld(svc: KubeObject): number[] {
  const s = spec(svc);
  const out = ((s.ports as Obj[] | undefined) ?? [])
    .map((p) => p.nodePort)
    .filter((n): n is number => typeof n === 'number');
  if (typeof s.healthCheckNodePort === 'number') out.push(s.healthCheckNodePort);
  return out;
}

/**
 * dropTypeDependentFields: a Service that stops being NodePort or LoadBalancer gives up the node ports it did not
 * change in the same update, one that stops being a Local LoadBalancer its health check port.
 */
function dropTypeDependentFields(next: KubeObject, old: KubeObject): void {
  const s = spec(next);
  const o = spec(old);
  if (NODE_PORT_TYPES.has(String(o.type)) && !needsNodePorts(s)) {
    const before = (o.ports as Obj[] | undefined) ?? [];
    for (const p of (s.ports as Obj[] | undefined) ?? []) {
      const same = before.find((q) => q.port === p.port && (q.protocol ?? 'TCP') === (p.protocol ?? 'TCP'));
      if (same && same.nodePort === p.nodePort) delete p.nodePort;
    }
  }
  if (
    !(s.type === 'LoadBalancer' && s.externalTrafficPolicy === 'Local') &&
    s.healthCheckNodePort === o.healthCheckNodePort
  )
    delete s.healthCheckNodePort;
  if (s.type !== 'LoadBalancer' && s.allocateLoadBalancerNodePorts === o.allocateLoadBalancerNodePorts)
    delete s.allocateLoadBalancerNodePorts;
  const external =
    NODE_PORT_TYPES.has(String(s.type)) ||
    (s.type === 'ClusterIP' && Array.isArray(s.externalIPs) && s.externalIPs.length > 0);
  if (!external && s.externalTrafficPolicy === o.externalTrafficPolicy) delete s.externalTrafficPolicy;
}

const SERVICE_TYPES = ['ClusterIP', 'ExternalName', 'LoadBalancer', 'NodePort'];

function validateService(obj: KubeObject): StatusCause[] {
  const s = isPlainObject(obj.spec) ? obj.spec : {};
  const causes: StatusCause[] = [];
  if (!SERVICE_TYPES.includes(String(s.type)))
    causes.push(FieldErrors.notSupported('spec.type', s.type, SERVICE_TYPES));
  const ports = Array.isArray(s.ports) ? (s.ports as Obj[]) : [];
  if (s.type !== 'ExternalName' && s.clusterIP !== 'None' && ports.length === 0)
    causes.push(FieldErrors.required('spec.ports', ''));
  const seen = new Map<string, number>();
  ports.forEach((p, i) => {
    if (p.nodePort === undefined || p.nodePort === 0) return;
    if (s.type === 'ClusterIP')
      causes.push(FieldErrors.forbidden(`spec.ports[${i}].nodePort`, "may not be used when `type` is 'ClusterIP'"));
    const key = `${String(p.nodePort)}/${String(p.protocol ?? 'TCP')}`;
    if (seen.has(key)) causes.push(FieldErrors.duplicate(`spec.ports[${i}].nodePort`, p.nodePort));
    seen.set(key, i);
  });
  // ExternallyAccessible: NodePort, LoadBalancer, or ClusterIP with external IPs.
  const external =
    NODE_PORT_TYPES.has(String(s.type)) ||
    (s.type === 'ClusterIP' && Array.isArray(s.externalIPs) && s.externalIPs.length > 0);
  if (s.externalTrafficPolicy !== undefined && !external)
    causes.push(
      FieldErrors.invalid(
        'spec.externalTrafficPolicy',
        s.externalTrafficPolicy,
        'may only be set for externally-accessible services',
      ),
    );
  return causes;
}

const services: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Service',
  resource: 'services',
  singular: 'service',
  namespaced: true,
  shortNames: ['svc'],
  categories: ['all'],
  status: true,
  nameRule: 'dns1035',
  extraSubresources: [
    { name: 'proxy', kind: 'ServiceProxyOptions', verbs: ['create', 'delete', 'get', 'patch', 'update'] },
  ],
  strategy: {
    defaults(obj) {
      const s = spec(obj);
      s.type ??= 'ClusterIP';
      s.sessionAffinity ??= 'None';
      if (s.sessionAffinity === 'ClientIP') {
        const config = (
          isPlainObject(s.sessionAffinityConfig) ? s.sessionAffinityConfig : (s.sessionAffinityConfig = {})
        ) as Obj;
        const clientIP = (isPlainObject(config.clientIP) ? config.clientIP : (config.clientIP = {})) as Obj;
        clientIP.timeoutSeconds ??= 10800;
      }
      if (s.type !== 'ExternalName') {
        s.ipFamilies ??= ['IPv4'];
        s.ipFamilyPolicy ??= 'SingleStack';
        s.internalTrafficPolicy ??= 'Cluster';
      }
      const external =
        NODE_PORT_TYPES.has(String(s.type)) ||
        (s.type === 'ClusterIP' && Array.isArray(s.externalIPs) && s.externalIPs.length > 0);
      if (external) s.externalTrafficPolicy ??= 'Cluster';
      if (s.type === 'LoadBalancer') s.allocateLoadBalancerNodePorts ??= true;
      if (Array.isArray(s.ports)) {
        for (const p of s.ports as Obj[]) {
          p.protocol ??= 'TCP';
          p.targetPort ??= p.port;
        }
      }
    },
    prepareForCreate(obj, ctx) {
      allocateServiceIPs(obj, ctx);
      allocateNodePorts(obj, undefined, ctx);
      obj.status = { loadBalancer: {} };
    },
    prepareForUpdate(next, old, ctx) {
      const s = spec(next);
      const o = spec(old);
      if (s.clusterIP === undefined || s.clusterIP === '') s.clusterIP = o.clusterIP;
      if (s.clusterIPs === undefined) s.clusterIPs = o.clusterIPs;
      dropTypeDependentFields(next, old);
      allocateNodePorts(next, old, ctx);
    },
    validate: validateService,
    validateUpdate(next, old) {
      const a = field(next, 'spec.clusterIP');
      const b = field(old, 'spec.clusterIP');
      return a !== b ? [FieldErrors.invalid('spec.clusterIP', a, 'field is immutable')] : [];
    },
  },
  columns: [
    col('Type', (o) => str(o, 'spec.type'), { description: 'The type of the service.' }),
    col('Cluster-IP', (o) => orNone(str(o, 'spec.clusterIP')), { description: 'The cluster IP of the service.' }),
    col(
      'External-IP',
      (o) => {
        const type = str(o, 'spec.type');
        const external = field(o, 'spec.externalIPs');
        if (type === 'ExternalName') return str(o, 'spec.externalName');
        if (Array.isArray(external) && external.length > 0) return external.join(',');
        if (type === 'LoadBalancer') {
          const ingress = field(o, 'status.loadBalancer.ingress');
          return Array.isArray(ingress) && ingress.length > 0
            ? ingress.map((i) => (i as Obj).ip ?? (i as Obj).hostname).join(',')
            : '<pending>';
        }
        return '<none>';
      },
      { description: 'The external IP of the service.' },
    ),
    col(
      'Port(s)',
      (o) => {
        const ports = field(o, 'spec.ports');
        if (!Array.isArray(ports) || ports.length === 0) return '<none>';
        return (ports as Obj[])
          .map((p) => `${String(p.port)}${p.nodePort ? `:${String(p.nodePort)}` : ''}/${String(p.protocol ?? 'TCP')}`)
          .join(',');
      },
      { description: 'The ports of the service.' },
    ),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col(
      'Selector',
      (o) => {
        const sel = field(o, 'spec.selector');
        return isPlainObject(sel) && Object.keys(sel).length > 0
          ? Object.entries(sel)
              .map(([k, v]) => `${k}=${String(v)}`)
              .join(',')
          : '<none>';
      },
      { priority: 1, description: 'Route service traffic to pods with label keys and values matching this selector.' },
    ),
  ],
  noAge: true,
};

const configmaps: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'ConfigMap',
  resource: 'configmaps',
  singular: 'configmap',
  namespaced: true,
  shortNames: ['cm'],
  strategy: {
    validate(obj) {
      const causes = [...validateKeyedData(obj, 'data', false), ...validateKeyedData(obj, 'binaryData', true)];
      // ValidateConfigMap: data and binaryData together; the error's path is the whole object's, which Go prints "[]".
      if (dataBytes(obj.data, false) + dataBytes(obj.binaryData, true) > MAX_SECRET_SIZE)
        causes.push(FieldErrors.tooLong('[]', MAX_SECRET_SIZE));
      if (obj.immutable !== undefined && typeof obj.immutable !== 'boolean')
        causes.push(FieldErrors.invalid('immutable', obj.immutable, 'must be a boolean'));
      return causes;
    },
    validateUpdate(next, old) {
      if (
        old.immutable === true &&
        (JSON.stringify(next.data) !== JSON.stringify(old.data) ||
          JSON.stringify(next.binaryData) !== JSON.stringify(old.binaryData) ||
          next.immutable !== true)
      ) {
        return [FieldErrors.forbidden('data', 'field is immutable when `immutable` is set')];
      }
      return [];
    },
  },
  columns: [
    col('Data', (o) => dataCount(o), { type: 'integer', description: 'Data contains the configuration data.' }),
  ],
};

function foldStringData(obj: KubeObject): void {
  const stringData = obj.stringData;
  if (isPlainObject(stringData)) {
    const data: Obj = isPlainObject(obj.data) ? { ...obj.data } : {};
    for (const [k, v] of Object.entries(stringData)) data[k] = Buffer.from(String(v), 'utf8').toString('base64');
    obj.data = data;
  }
  delete obj.stringData;
}

const secrets: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Secret',
  resource: 'secrets',
  singular: 'secret',
  namespaced: true,
  selectableFields: { type: (o) => str(o, 'type') },
  strategy: {
    defaults(obj) {
      obj.type ??= 'Opaque';
      foldStringData(obj);
    },
    validate(obj) {
      const causes = validateKeyedData(obj, 'data', true);
      // ValidateSecret: the decoded bytes of data (stringData is folded into it by now).
      if (dataBytes(obj.data, true) > MAX_SECRET_SIZE) causes.push(FieldErrors.tooLong('data', MAX_SECRET_SIZE));
      return causes;
    },
    validateUpdate(next, old) {
      const causes: StatusCause[] = [];
      if (next.type !== old.type) causes.push(FieldErrors.invalid('type', next.type, 'field is immutable'));
      if (old.immutable === true && JSON.stringify(next.data) !== JSON.stringify(old.data))
        causes.push(FieldErrors.forbidden('data', 'field is immutable when `immutable` is set'));
      return causes;
    },
  },
  columns: [
    col('Type', (o) => str(o, 'type'), { description: 'The type of the secret' }),
    col('Data', (o) => dataCount(o), { type: 'integer', description: 'The number of entries in the secret' }),
  ],
};

const serviceaccounts: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'ServiceAccount',
  resource: 'serviceaccounts',
  singular: 'serviceaccount',
  namespaced: true,
  shortNames: ['sa'],
  extraSubresources: [
    {
      name: 'token',
      kind: 'TokenRequest',
      group: 'authentication.k8s.io',
      version: 'v1',
      verbs: ['create'],
      create: createServiceAccountToken,
    },
  ],
  columns: [
    col('Secrets', (o) => (Array.isArray(o.secrets) ? o.secrets.length : 0), {
      type: 'integer',
      description:
        'Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.',
    }),
  ],
};

const PORT_PROTOCOLS = ['SCTP', 'TCP', 'UDP'];

/** validateEndpointPort: a name (required when there are several), a port number, a protocol. */
function validateEndpointPort(port: unknown, at: string, requireName: boolean): StatusCause[] {
  if (!isPlainObject(port)) return [FieldErrors.invalid(at, port, 'must be an object')];
  const causes: StatusCause[] = [];
  const name = typeof port.name === 'string' ? port.name : '';
  if (requireName && name === '') causes.push(FieldErrors.required(`${at}.name`, ''));
  else if (name !== '')
    for (const p of checkDns1123Label(name)) causes.push(FieldErrors.invalid(`${at}.name`, name, p));
  const number = typeof port.port === 'number' ? port.port : 0;
  if (!Number.isInteger(number) || number < 1 || number > 65535)
    causes.push(FieldErrors.invalid(`${at}.port`, number, 'must be between 1 and 65535, inclusive'));
  if (port.protocol === undefined || port.protocol === '') causes.push(FieldErrors.required(`${at}.protocol`, ''));
  else if (!PORT_PROTOCOLS.includes(String(port.protocol)))
    causes.push(FieldErrors.notSupported(`${at}.protocol`, port.protocol, PORT_PROTOCOLS));
  if (typeof port.appProtocol === 'string')
    for (const p of checkQualifiedName(port.appProtocol))
      causes.push(FieldErrors.invalid(`${at}.appProtocol`, port.appProtocol, p));
  return causes;
}

/** validateEndpointAddress: an IP that is not special (ValidateNonSpecialIP), a DNS label hostname, a node name. */
export function validateEndpointAddress(address: unknown, at: string): StatusCause[] {
  if (!isPlainObject(address)) return [FieldErrors.invalid(at, address, 'must be an object')];
  const ip = typeof address.ip === 'string' ? address.ip : '';
  const parsed = parseIp(ip);
  const causes: StatusCause[] = parsed ? [] : validateIp(ip, `${at}.ip`);
  if (typeof address.hostname === 'string' && address.hostname !== '')
    for (const p of checkDns1123Label(address.hostname))
      causes.push(FieldErrors.invalid(`${at}.hostname`, address.hostname, p));
  if (typeof address.nodeName === 'string')
    for (const p of checkDns1123Subdomain(address.nodeName))
      causes.push(FieldErrors.invalid(`${at}.nodeName`, address.nodeName, p));
  causes.push(...validateNonSpecialIp(ip, `${at}.ip`, parsed));
  return causes;
}

/** ValidateEndpoints: each subset has addresses (ready or not), each valid, and valid ports. */
function validateEndpoints(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const subsets = Array.isArray(obj.subsets) ? obj.subsets : [];
  subsets.forEach((subset, i) => {
    const at = `subsets[${i}]`;
    if (!isPlainObject(subset)) return causes.push(FieldErrors.invalid(at, subset, 'must be an object'));
    const ready = Array.isArray(subset.addresses) ? subset.addresses : [];
    const notReady = Array.isArray(subset.notReadyAddresses) ? subset.notReadyAddresses : [];
    if (ready.length === 0 && notReady.length === 0)
      causes.push(FieldErrors.required(at, 'must specify `addresses` or `notReadyAddresses`'));
    ready.forEach((a, j) => causes.push(...validateEndpointAddress(a, `${at}.addresses[${j}]`)));
    notReady.forEach((a, j) => causes.push(...validateEndpointAddress(a, `${at}.notReadyAddresses[${j}]`)));
    const ports = Array.isArray(subset.ports) ? subset.ports : [];
    ports.forEach((p, j) => causes.push(...validateEndpointPort(p, `${at}.ports[${j}]`, ports.length > 1)));
    return undefined;
  });
  return causes;
}

/**
 * kubectl's formatEndpoints: `ip:port` for every port of every subset (ports first, then addresses), the first three
 * and "+ N more...", bare IPs for a subset without ports (headless); `<none>` without subsets.
 */
export function formatEndpoints(o: KubeObject): string {
  const subsets = Array.isArray(o.subsets) ? (o.subsets as Obj[]) : [];
  if (subsets.length === 0) return '<none>';
  const max = 3;
  const list: string[] = [];
  let count = 0;
  for (const s of subsets) {
    const addresses = Array.isArray(s.addresses) ? (s.addresses as Obj[]) : [];
    const ports = Array.isArray(s.ports) ? (s.ports as Obj[]) : [];
    if (ports.length === 0) {
      count += addresses.length;
      for (const a of addresses) if (list.length < max) list.push(String(a.ip));
      continue;
    }
    for (const p of ports) {
      count += addresses.length;
      for (const a of addresses) if (list.length < max) list.push(joinHostPort(String(a.ip), Number(p.port ?? 0)));
    }
  }
  return count > max ? `${list.join(',')} + ${count - max} more...` : list.join(',');
}

const endpoints: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Endpoints',
  resource: 'endpoints',
  singular: 'endpoints',
  namespaced: true,
  shortNames: ['ep'],
  strategy: {
    // SetDefaults_EndpointPort: a port's protocol is TCP unless it says otherwise.
    defaults(obj) {
      for (const subset of Array.isArray(obj.subsets) ? obj.subsets : [])
        if (isPlainObject(subset) && Array.isArray(subset.ports))
          for (const p of subset.ports)
            if (isPlainObject(p) && (p.protocol === undefined || p.protocol === '')) p.protocol = 'TCP';
    },
    validate: validateEndpoints,
  },
  columns: [col('Endpoints', formatEndpoints, { description: 'Endpoints is the list of endpoints.' })],
};

/** v1 Binding: POST .../bindings binds the pod its name names, as pods/NAME/binding does. */
const bindings: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Binding',
  resource: 'bindings',
  singular: 'binding',
  namespaced: true,
  verbs: ['create'],
  act(api, namespace, obj, options) {
    const pods = api.registry.lookup('', 'v1', 'pods')!;
    return bindPod(api, pods, namespace, obj.metadata.name ?? '', obj, options);
  },
};

/** The components kube-apiserver probes for ComponentStatus, in the order it lists them. */
const COMPONENTS = ['scheduler', 'controller-manager', 'etcd-0'];

/**
 * v1 ComponentStatus (deprecated since 1.19, still served): the scheduler, the controller manager and etcd, which in
 * one process are as healthy as the server answering.
 */
const componentstatuses: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'ComponentStatus',
  resource: 'componentstatuses',
  singular: 'componentstatus',
  namespaced: false,
  shortNames: ['cs'],
  verbs: ['get', 'list'],
  deprecated: 'v1 ComponentStatus is deprecated in v1.19+',
  computed: () =>
    COMPONENTS.map((name) => ({
      kind: 'ComponentStatus',
      apiVersion: 'v1',
      // A computed object has no creation time; Go's zero metav1.Time serialises as null.
      metadata: { name, creationTimestamp: null as unknown as string },
      conditions: [{ type: 'Healthy', status: 'True', message: 'ok' }],
    })),
  columns: [
    col('Status', (o) => componentCondition(o, (c) => (c.status === 'True' ? 'Healthy' : 'Unhealthy'), 'Unknown'), {
      description: 'Status of the component conditions',
    }),
    col('Message', (o) => componentCondition(o, (c) => String(c.message ?? ''), ''), {
      description: 'Message of the component conditions',
    }),
    col('Error', (o) => componentCondition(o, (c) => String(c.error ?? ''), ''), {
      description: 'Error of the component conditions',
    }),
  ],
  noAge: true,
};

/** printComponentStatus: what the Healthy condition says. */
function componentCondition(o: KubeObject, pick: (c: Obj) => string, none: string): string {
  const conditions = Array.isArray(o.conditions) ? (o.conditions as Obj[]) : [];
  const healthy = conditions.find((c) => c.type === 'Healthy');
  return healthy ? pick(healthy) : none;
}

const accessModes = (o: KubeObject, path: string): string => {
  // GetAccessModesAsString: RWO, ROX, RWX, RWOP in that order, each once.
  return accessModesString(field(o, path));
};

const persistentvolumeclaims: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'PersistentVolumeClaim',
  resource: 'persistentvolumeclaims',
  singular: 'persistentvolumeclaim',
  namespaced: true,
  shortNames: ['pvc'],
  status: true,
  strategy: {
    defaults(obj) {
      spec(obj).volumeMode ??= 'Filesystem';
    },
    prepareForCreate(obj, ctx) {
      defaultClaimStorageClass(obj, ctx);
      obj.status = { phase: 'Pending' };
    },
    validate: validateClaim,
    validateUpdate: validateClaimUpdate,
  },
  columns: [
    col('Status', volumePhaseColumn, { description: 'The phase of the claim.' }),
    col('Volume', (o) => str(o, 'spec.volumeName'), { description: 'The volume bound to the claim.' }),
    // Capacity and access modes are the bound volume's, shown once the claim names one.
    col('Capacity', (o) => (str(o, 'spec.volumeName') ? quantityColumn(field(o, 'status.capacity.storage')) : ''), {
      description: 'The capacity of the bound volume.',
    }),
    col('Access Modes', (o) => (str(o, 'spec.volumeName') ? accessModes(o, 'status.accessModes') : ''), {
      description: 'The access modes of the bound volume.',
    }),
    col('StorageClass', (o) => claimClass(o), {
      description: 'The storage class of the claim.',
    }),
    col('VolumeAttributesClass', (o) => str(o, 'spec.volumeAttributesClassName', '<unset>'), {
      description: 'The volume attributes class of the claim.',
    }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col('VolumeMode', (o) => str(o, 'spec.volumeMode'), { priority: 1, description: 'The volume mode of the claim.' }),
  ],
  noAge: true,
};

const persistentvolumes: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'PersistentVolume',
  resource: 'persistentvolumes',
  singular: 'persistentvolume',
  namespaced: false,
  shortNames: ['pv'],
  status: true,
  strategy: {
    defaults(obj) {
      const s = spec(obj);
      s.persistentVolumeReclaimPolicy ??= 'Retain';
      s.volumeMode ??= 'Filesystem';
    },
    prepareForCreate(obj) {
      obj.status = { phase: 'Pending' };
    },
    validate: validateVolume,
    validateUpdate: validateVolumeUpdate,
  },
  columns: [
    col('Capacity', (o) => quantityColumn(field(o, 'spec.capacity.storage')), {
      description: 'The capacity of the volume.',
    }),
    col('Access Modes', (o) => accessModes(o, 'spec.accessModes'), { description: 'The access modes of the volume.' }),
    col('Reclaim Policy', (o) => str(o, 'spec.persistentVolumeReclaimPolicy'), {
      description: 'What happens to the volume when released.',
    }),
    col('Status', volumePhaseColumn, { description: 'The phase of the volume.' }),
    col(
      'Claim',
      (o) => {
        const ref = field(o, 'spec.claimRef');
        return isPlainObject(ref) ? `${String(ref.namespace)}/${String(ref.name)}` : '';
      },
      { description: 'The claim bound to the volume.' },
    ),
    col('StorageClass', (o) => volumeClass(o), { description: 'The storage class of the volume.' }),
    col('VolumeAttributesClass', (o) => str(o, 'spec.volumeAttributesClassName', '<unset>'), {
      description: 'The volume attributes class.',
    }),
    col('Reason', (o) => str(o, 'status.reason'), { description: 'Why the volume is in this phase.' }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col('VolumeMode', (o) => str(o, 'spec.volumeMode'), { priority: 1, description: 'The volume mode.' }),
  ],
  noAge: true,
};

const nodes: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Node',
  resource: 'nodes',
  singular: 'node',
  namespaced: false,
  shortNames: ['no'],
  status: true,
  selectableFields: { 'spec.unschedulable': (o) => String(field(o, 'spec.unschedulable') === true) },
  strategy: { keepsStatusOnCreate: true },
  columns: [
    col(
      'Status',
      (o) => {
        const conditions = (field(o, 'status.conditions') as Obj[] | undefined) ?? [];
        const ready = conditions.find((c) => c.type === 'Ready');
        // kubectl's printNode: Ready when True, NotReady for False and Unknown alike; Unknown only without the condition.
        const parts = [ready ? (ready.status === 'True' ? 'Ready' : 'NotReady') : 'Unknown'];
        if (field(o, 'spec.unschedulable') === true) parts.push('SchedulingDisabled');
        return parts.join(',');
      },
      { description: 'The status of the node' },
    ),
    col(
      'Roles',
      (o) => {
        const roles = Object.keys(o.metadata.labels ?? {})
          .filter((l) => l.startsWith('node-role.kubernetes.io/'))
          .map((l) => l.slice('node-role.kubernetes.io/'.length))
          .filter((r) => r !== '');
        const legacy = o.metadata.labels?.['kubernetes.io/role'];
        if (legacy) roles.push(legacy);
        return roles.length ? roles.sort().join(',') : '<none>';
      },
      { description: 'The roles of the node' },
    ),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
    col('Version', (o) => str(o, 'status.nodeInfo.kubeletVersion'), {
      description: 'Kubelet Version reported by the node.',
    }),
    col(
      'Internal-IP',
      (o) => {
        const addresses = (field(o, 'status.addresses') as Obj[] | undefined) ?? [];
        return String(addresses.find((a) => a.type === 'InternalIP')?.address ?? '<none>');
      },
      {
        priority: 1,
        description: 'List of addresses reachable to the node. Queried from cloud provider, if available.',
      },
    ),
    col(
      'External-IP',
      (o) => {
        const addresses = (field(o, 'status.addresses') as Obj[] | undefined) ?? [];
        return String(addresses.find((a) => a.type === 'ExternalIP')?.address ?? '<none>');
      },
      {
        priority: 1,
        description: 'List of addresses reachable to the node. Queried from cloud provider, if available.',
      },
    ),
    col('OS-Image', (o) => str(o, 'status.nodeInfo.osImage', '<unknown>'), {
      priority: 1,
      description: 'OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).',
    }),
    col('Kernel-Version', (o) => str(o, 'status.nodeInfo.kernelVersion', '<unknown>'), {
      priority: 1,
      description: "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
    }),
    col('Container-Runtime', (o) => str(o, 'status.nodeInfo.containerRuntimeVersion', '<unknown>'), {
      priority: 1,
      description:
        'Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).',
    }),
  ],
  noAge: true,
};

function involved(path: string): (o: KubeObject) => string {
  return (o) => str(o, `involvedObject.${path}`);
}

const events: KindInfo = {
  group: '',
  version: 'v1',
  kind: 'Event',
  resource: 'events',
  singular: 'event',
  namespaced: true,
  shortNames: ['ev'],
  shareParts: true,
  selectableFields: {
    'involvedObject.kind': involved('kind'),
    'involvedObject.namespace': involved('namespace'),
    'involvedObject.name': involved('name'),
    'involvedObject.uid': involved('uid'),
    'involvedObject.apiVersion': involved('apiVersion'),
    'involvedObject.resourceVersion': involved('resourceVersion'),
    'involvedObject.fieldPath': involved('fieldPath'),
    reason: (o) => str(o, 'reason'),
    reportingComponent: (o) => str(o, 'reportingComponent'),
    source: (o) => str(o, 'source.component') || str(o, 'reportingComponent'),
    type: (o) => str(o, 'type'),
  },
  indexedFields: ['involvedObject.uid'],
  columns: coreEventColumns,
  noAge: true,
  noName: true,
};

export const coreKinds: KindInfo[] = [
  bindings,
  componentstatuses,
  namespaces,
  nodes,
  pods,
  services,
  endpoints,
  configmaps,
  secrets,
  serviceaccounts,
  persistentvolumeclaims,
  persistentvolumes,
  events,
];
