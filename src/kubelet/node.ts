import { readFileSync } from 'node:fs';
import { yaml } from '../api/yaml.js';
import { rfc3339 } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { KUBERNETES_VERSION } from '../api/version.js';

/**
 * What a simulated node looks like: its Node object at registration and the status its kubelet reports.
 * A profile (`sim serve --node-profile FILE`, a partial Node manifest) changes labels, annotations, taints and
 * capacity; `--node-capacity cpu=8,memory=32Gi` changes capacity alone.
 */
type Obj = Record<string, unknown>;

export const DEFAULT_CAPACITY: Record<string, string> = {
  cpu: '4',
  'ephemeral-storage': '100Gi',
  'hugepages-1Gi': '0',
  'hugepages-2Mi': '0',
  memory: '16Gi',
  pods: '110',
};

export const ZONES = ['zone-a', 'zone-b', 'zone-c'];
export const REGION = 'region-1';

export interface NodeProfile {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  taints: Obj[];
  capacity: Record<string, string>;
  /** Defaults to capacity. */
  allocatable?: Record<string, string>;
}

export function defaultProfile(): NodeProfile {
  return { labels: {}, annotations: {}, taints: [], capacity: { ...DEFAULT_CAPACITY } };
}

/** "cpu=8,memory=32Gi,pods=250" → capacity overrides. */
export function parseCapacity(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`--node-capacity: expected name=quantity, got "${part}"`);
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

/** A profile file: a partial Node manifest (metadata.labels/annotations, spec.taints, status.capacity/allocatable). */
export function loadNodeProfile(path: string, base: NodeProfile = defaultProfile()): NodeProfile {
  const doc: unknown = yaml().parse(readFileSync(path, 'utf8'));
  if (!isPlainObject(doc)) throw new Error(`${path}: a node profile is a (partial) Node manifest`);
  const meta = isPlainObject(doc.metadata) ? doc.metadata : {};
  const spec = isPlainObject(doc.spec) ? doc.spec : {};
  const status = isPlainObject(doc.status) ? doc.status : {};
  const strings = (v: unknown): Record<string, string> =>
    isPlainObject(v) ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, String(x)])) : {};
  const profile: NodeProfile = {
    labels: { ...base.labels, ...strings(meta.labels) },
    annotations: { ...base.annotations, ...strings(meta.annotations) },
    taints: Array.isArray(spec.taints) ? (spec.taints.filter(isPlainObject) as Obj[]) : base.taints,
    capacity: { ...base.capacity, ...strings(status.capacity) },
  };
  const allocatable = strings(status.allocatable);
  if (Object.keys(allocatable).length > 0) profile.allocatable = { ...profile.capacity, ...allocatable };
  return profile;
}

/** The nth node's internal address: 172.18.0.2, 172.18.0.3, … (as kind's docker network hands them out). */
export function nodeIP(index: number): string {
  const n = index + 2;
  return `172.18.${(n >> 8) & 255}.${n & 255}`;
}

/** The labels every kubelet puts on its Node. */
export function nodeLabels(name: string, index: number, profile: NodeProfile): Record<string, string> {
  return {
    'beta.kubernetes.io/arch': 'amd64',
    'beta.kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    'kubernetes.io/hostname': name,
    'kubernetes.io/os': 'linux',
    'topology.kubernetes.io/region': REGION,
    'topology.kubernetes.io/zone': ZONES[index % ZONES.length]!,
    ...profile.labels,
  };
}

/** The Node a kubelet registers (`sim serve --nodes N` creates node-1 … node-N). */
export function nodeManifest(name: string, index: number, profile: NodeProfile): KubeObject {
  const spec: Obj = { providerID: `kube-sim://${name}` };
  if (profile.taints.length > 0) spec.taints = profile.taints;
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: nodeLabels(name, index, profile),
      annotations: {
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        ...profile.annotations,
      },
    },
    spec,
  };
}

function hex(random: SeededRandom, bytes: number): string {
  let out = '';
  for (let i = 0; i < bytes; i += 4) out += random.nextUint32().toString(16).padStart(8, '0');
  return out.slice(0, bytes * 2);
}

export interface NodeConditionSpec {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** The four conditions a healthy kubelet reports. */
export const HEALTHY_CONDITIONS: NodeConditionSpec[] = [
  {
    type: 'MemoryPressure',
    status: 'False',
    reason: 'KubeletHasSufficientMemory',
    message: 'kubelet has sufficient memory available',
  },
  {
    type: 'DiskPressure',
    status: 'False',
    reason: 'KubeletHasNoDiskPressure',
    message: 'kubelet has no disk pressure',
  },
  {
    type: 'PIDPressure',
    status: 'False',
    reason: 'KubeletHasSufficientPID',
    message: 'kubelet has sufficient PID available',
  },
  { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' },
];

/**
 * The node status the kubelet posts: conditions (heartbeat now; a transition time kept unless the status
 * changed), addresses, capacity, nodeInfo. Capacity already on the Node (from a manifest) is kept.
 */
export function nodeStatus(
  node: KubeObject,
  ip: string,
  profile: NodeProfile,
  now: number,
  random: SeededRandom,
  kubeletPort = 10250,
): Obj {
  const current = isPlainObject(node.status) ? node.status : {};
  const at = rfc3339(now);
  const previous = new Map(
    (Array.isArray(current.conditions) ? (current.conditions as Obj[]) : []).map((c) => [String(c.type), c]),
  );
  const conditions = HEALTHY_CONDITIONS.map((c) => {
    const old = previous.get(c.type);
    return {
      type: c.type,
      status: c.status,
      lastHeartbeatTime: at,
      lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime : at,
      reason: c.reason,
      message: c.message,
    };
  });
  const capacity =
    isPlainObject(current.capacity) && Object.keys(current.capacity).length > 0
      ? { ...profile.capacity, ...current.capacity }
      : { ...profile.capacity };
  const allocatable =
    isPlainObject(current.allocatable) && Object.keys(current.allocatable).length > 0
      ? { ...capacity, ...current.allocatable }
      : { ...(profile.allocatable ?? capacity) };
  const info = isPlainObject(current.nodeInfo) ? current.nodeInfo : {};
  const name = node.metadata.name ?? '';
  return {
    ...current,
    addresses: kept(
      [
        { type: 'InternalIP', address: ip },
        { type: 'Hostname', address: name },
      ],
      current.addresses,
    ),
    allocatable: kept(allocatable, current.allocatable),
    capacity: kept(capacity, current.capacity),
    conditions,
    daemonEndpoints: kept({ kubeletEndpoint: { Port: kubeletPort } }, current.daemonEndpoints),
    nodeInfo: kept(
      {
        architecture: 'amd64',
        bootID: typeof info.bootID === 'string' ? info.bootID : random.uuid(),
        containerRuntimeVersion: 'containerd://1.7.24',
        kernelVersion: '6.8.0-kube-sim',
        kubeProxyVersion: KUBERNETES_VERSION.gitVersion,
        kubeletVersion: KUBERNETES_VERSION.gitVersion,
        machineID: typeof info.machineID === 'string' ? info.machineID : hex(random, 16),
        operatingSystem: 'linux',
        osImage: 'kube-sim simulated node',
        systemUUID: typeof info.systemUUID === 'string' ? info.systemUUID : random.uuid(),
      },
      current.nodeInfo,
    ),
  };
}

/**
 * The stored value when the computed one equals it: a report that changes only heartbeat times then shares the
 * rest with the stored Node, which the store's write neither copies nor walks again.
 */
function kept<T>(computed: T, stored: unknown): T {
  return deepEqual(computed, stored) ? (stored as T) : computed;
}
