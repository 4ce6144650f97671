import { parseMilli } from '../api/quantity.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { ContainerFs, FsLayer, type ContainerDisks } from './filesystem.js';
import { dataOf, downwardField, type EnvSources } from './pod-env.js';

/**
 * What a container sees of its filesystem: the volumes it mounts, read from the current ConfigMaps and
 * Secrets (a mounted ConfigMap shows its latest data, as the kubelet's sync of configMap volumes does), emptyDirs,
 * and the files every container gets (/etc/hostname, /etc/hosts, /etc/resolv.conf). Built when an exec runs, over
 * the container's writable layer (filesystem.ts).
 */
type Obj = Record<string, unknown>;

interface VolumeSource {
  /** relative path → content; undefined when the source is missing (and not optional) */
  files(): Map<string, string> | string;
}

function itemsOf(source: Obj, data: Map<string, string>): Map<string, string> {
  const items = Array.isArray(source.items) ? (source.items.filter(isPlainObject) as Obj[]) : undefined;
  if (!items || items.length === 0) return data;
  const out = new Map<string, string>();
  for (const item of items)
    if (data.has(String(item.key))) out.set(String(item.path ?? item.key), data.get(String(item.key))!);
  return out;
}

function keyedSource(kind: 'configMap' | 'secret', source: Obj, namespace: string, sources: EnvSources): VolumeSource {
  return {
    files: () => {
      const name = String(kind === 'secret' ? (source.secretName ?? source.name) : source.name);
      const obj = kind === 'secret' ? sources.secret(namespace, name) : sources.configMap(namespace, name);
      if (!obj)
        return source.optional === true
          ? new Map()
          : `${kind === 'secret' ? 'secret' : 'configmap'} "${name}" not found`;
      const data = dataOf(obj, kind === 'secret');
      const items = Array.isArray(source.items) ? (source.items.filter(isPlainObject) as Obj[]) : [];
      for (const item of items) {
        if (!data.has(String(item.key)) && source.optional !== true) {
          return `configmap references non-existent config key: ${String(item.key)}`;
        }
      }
      return itemsOf(source, data);
    },
  };
}

function downwardSource(source: Obj, pod: KubeObject): VolumeSource {
  return {
    files: () => {
      const out = new Map<string, string>();
      for (const item of Array.isArray(source.items) ? (source.items.filter(isPlainObject) as Obj[]) : []) {
        const ref = isPlainObject(item.fieldRef) ? item.fieldRef : undefined;
        if (ref) out.set(String(item.path), downwardField(pod, String(ref.fieldPath)) ?? '');
      }
      return out;
    },
  };
}

function volumeSource(volume: Obj, pod: KubeObject, sources: EnvSources): VolumeSource | undefined {
  const namespace = pod.metadata.namespace ?? 'default';
  if (isPlainObject(volume.configMap)) return keyedSource('configMap', volume.configMap, namespace, sources);
  if (isPlainObject(volume.secret)) return keyedSource('secret', volume.secret, namespace, sources);
  if (isPlainObject(volume.downwardAPI)) return downwardSource(volume.downwardAPI, pod);
  if (isPlainObject(volume.projected)) {
    const parts: VolumeSource[] = [];
    for (const s of Array.isArray(volume.projected.sources)
      ? (volume.projected.sources.filter(isPlainObject) as Obj[])
      : []) {
      if (isPlainObject(s.configMap)) parts.push(keyedSource('configMap', s.configMap, namespace, sources));
      else if (isPlainObject(s.secret)) parts.push(keyedSource('secret', s.secret, namespace, sources));
      else if (isPlainObject(s.downwardAPI)) parts.push(downwardSource(s.downwardAPI, pod));
    }
    return {
      files: () => {
        const out = new Map<string, string>();
        for (const part of parts) {
          const files = part.files();
          if (typeof files === 'string') return files;
          for (const [k, v] of files) out.set(k, v);
        }
        return out;
      },
    };
  }
  return undefined;
}

function volumesOf(pod: KubeObject): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return Array.isArray(spec.volumes) ? (spec.volumes.filter(isPlainObject) as Obj[]) : [];
}

/** The first volume that cannot be set up (a missing ConfigMap or Secret), as the kubelet's FailedMount says. */
export function volumeError(pod: KubeObject, sources: EnvSources): { volume: string; message: string } | undefined {
  for (const v of volumesOf(pod)) {
    const files = volumeSource(v, pod, sources)?.files();
    if (typeof files === 'string') return { volume: String(v.name), message: files };
  }
  return undefined;
}

/** Where the container's own writes live: the kubelet's disks, and which container instance this is. */
export interface ContainerStorage {
  disks: ContainerDisks;
  /** The container's restart count: a restarted container starts from a fresh writable layer. */
  instance: number;
}

/**
 * The filesystem of one container of the pod, as of now. With `storage`, what the container wrote before (and its
 * pod's emptyDirs) is there; without, it starts empty.
 */
export function containerFs(
  pod: KubeObject,
  container: Obj,
  sources: EnvSources,
  now: () => number = () => 0,
  storage?: ContainerStorage,
): ContainerFs {
  const uid = pod.metadata.uid ?? '';
  const created = storage?.disks.layer(uid, String(container.name ?? ''), storage.instance);
  const root = created?.layer ?? new FsLayer(false);
  const fs = new ContainerFs(root, now);
  if (!created || created.fresh) baseFiles(fs, pod);
  const volumes = new Map(volumesOf(pod).map((v) => [String(v.name), v]));
  for (const mount of Array.isArray(container.volumeMounts)
    ? (container.volumeMounts.filter(isPlainObject) as Obj[])
    : []) {
    const mountPath = String(mount.mountPath ?? '');
    if (!mountPath.startsWith('/')) continue;
    const volume = volumes.get(String(mount.name));
    // A claim's volume is writable storage too; its files are kept as an emptyDir's are, with the pod.
    const claimed = volume && (isPlainObject(volume.persistentVolumeClaim) || isPlainObject(volume.ephemeral));
    if (volume && (isPlainObject(volume.emptyDir) || claimed)) {
      const limit = isPlainObject(volume.emptyDir) ? parseMilli(volume.emptyDir.sizeLimit) : undefined;
      fs.mount(
        mountPath,
        storage
          ? storage.disks.emptyDir(uid, String(volume.name), limit === undefined ? undefined : Math.floor(limit / 1000))
          : new FsLayer(false),
      );
      continue;
    }
    const files = volume ? volumeSource(volume, pod, sources)?.files() : undefined;
    const subPath = typeof mount.subPath === 'string' && mount.subPath !== '' ? mount.subPath : undefined;
    if (subPath !== undefined) {
      const content = files instanceof Map ? files.get(subPath) : undefined;
      if (content !== undefined) fs.mountFile(mountPath, content);
      continue;
    }
    // ConfigMap, Secret, downward API and projected volumes are read-only, as the kubelet mounts them.
    const layer = new FsLayer(true);
    if (files instanceof Map) for (const [rel, content] of files) ContainerFs.fill(layer, rel, content);
    fs.mount(mountPath, layer);
  }
  return fs;
}

/** What every container starts with: the files the kubelet writes for it and the usual directories. */
function baseFiles(fs: ContainerFs, pod: KubeObject): void {
  const name = pod.metadata.name ?? '';
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const hostname = typeof spec.hostname === 'string' && spec.hostname ? spec.hostname : name;
  const status = isPlainObject(pod.status) ? pod.status : {};
  const namespace = pod.metadata.namespace ?? 'default';
  for (const d of ['/bin', '/dev', '/etc', '/home', '/proc', '/root', '/tmp', '/usr', '/var'])
    fs.mkdir(d, { parents: true });
  fs.write('/etc/hostname', `${hostname}\n`);
  fs.write(
    '/etc/hosts',
    `# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${typeof status.podIP === 'string' ? status.podIP : ''}\t${hostname}\n`,
  );
  fs.write(
    '/etc/resolv.conf',
    `search ${namespace}.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n`,
  );
  fs.chmod('/tmp', 0o1777);
}
