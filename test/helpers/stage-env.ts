import { isPlainObject, type KubeObject } from '../../src/api/types.js';
import type { ActionContext } from '../../src/kubelet/actions.js';
import { resolveEnv, type EnvSources } from '../../src/kubelet/pod-env.js';
import { PodIps, podIPFor } from '../../src/kubelet/pod-ips.js';
import type { PodRecord } from '../../src/kubelet/pod-record.js';
import type { PassEnv } from '../../src/kubelet/stage-pass.js';
import { volumeError } from '../../src/kubelet/volumes.js';
import { defaultImageCatalog, Images, parseImageList } from '../../src/kubelet/images.js';
import { MISSING_IMAGES_ANNOTATION } from '../../src/kubelet/pod-worker.js';
import { commandExitAt, DURATION_SETTING, programOf, stopDelayMs } from '../../src/kubelet/programs.js';

/**
 * The world a stage pass sees, without a server: a node (its name, InternalIP, pod CIDR and annotations), the
 * server-wide settings, the ConfigMaps, Secrets and Services a pod's environment reads, a clock reading. Container
 * IDs count up from 1, pod IPs come from the node's /24 (.2 first), so that a pass's output is the same every run.
 */
export interface StageWorld {
  now: number;
  node?: KubeObject;
  settings?: Record<string, string>;
  objects?: KubeObject[];
  /** References no registry has besides the catalog's (`sim serve --missing-images`). */
  missingImages?: string[];
}

const images = new Images(defaultImageCatalog());

export const DEFAULT_NODE: KubeObject = {
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'node-1' },
  spec: { podCIDR: '10.244.0.0/24' },
  status: { addresses: [{ type: 'InternalIP', address: '172.18.0.2' }], allocatable: { cpu: '4', memory: '16Gi' } },
};

type Obj = Record<string, unknown>;

function envSources(world: StageWorld, node: KubeObject): EnvSources {
  const objects = world.objects ?? [];
  const find = (kind: string, ns: string, name: string) =>
    objects.find((o) => o.kind === kind && (o.metadata.namespace ?? 'default') === ns && o.metadata.name === name);
  const status = isPlainObject(node.status) ? node.status : {};
  return {
    configMap: (ns, name) => find('ConfigMap', ns, name),
    secret: (ns, name) => find('Secret', ns, name),
    services: (ns) => objects.filter((o) => o.kind === 'Service' && (o.metadata.namespace ?? 'default') === ns),
    allocatable: isPlainObject(status.allocatable) ? status.allocatable : {},
  };
}

export function stageEnv(world: StageWorld, record: PodRecord): PassEnv {
  const node = world.node ?? DEFAULT_NODE;
  const spec = isPlainObject(node.spec) ? node.spec : {};
  const status = isPlainObject(node.status) ? node.status : {};
  const addresses = Array.isArray(status.addresses) ? (status.addresses as Obj[]) : [];
  const hostIP = String(addresses.find((a) => a.type === 'InternalIP')?.address ?? '');
  const ips = new PodIps(typeof spec.podCIDR === 'string' ? spec.podCIDR : undefined);
  if (record.ip !== undefined) ips.reserve(record.ip);
  const sources = envSources(world, node);
  const setting = (pod: KubeObject, key: string): string | undefined =>
    pod.metadata.annotations?.[key] ?? node.metadata.annotations?.[key] ?? world.settings?.[key];
  let ids = 0;
  return {
    now: world.now,
    setting,
    nodeName: node.metadata.name ?? '',
    hostIP,
    actions: (pod): ActionContext => ({
      now: world.now,
      hostIP,
      podIP: (p) => podIPFor(p, record, ips),
      setting: (k) => setting(pod, k),
      resolveEnv: (p, c) => resolveEnv(p, c, sources),
      volumeError: (p) => volumeError(p, sources),
      containerID: () => `containerd://${String(++ids).padStart(64, '0')}`,
      imageMissing: (image) =>
        images.missing(image, [
          ...(world.missingImages ?? []),
          ...parseImageList(node.metadata.annotations?.[MISSING_IMAGES_ANNOTATION] ?? ''),
          ...parseImageList(pod.metadata.annotations?.[MISSING_IMAGES_ANNOTATION] ?? ''),
        ]),
      pullRetryAt: (image) => record.pullRetryAt(image),
      program: (c) => programOf(c, images),
      command: (container, instance) => record.command(container, instance),
    }),
    stopDelayMs: (pod, since) =>
      stopDelayMs(pod, images, since, setting(pod, DURATION_SETTING) !== undefined, (container, instance) =>
        record.command(container, instance),
      ),
    commandExitAt: (pod) => commandExitAt(pod, (container, instance) => record.command(container, instance)),
  };
}
