import { posix } from 'node:path';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { dataOf, downwardField, type EnvSources } from './pod-env.js';

/**
 * What a container sees of its filesystem: the volumes it mounts, read from the current ConfigMaps and
 * Secrets (a mounted ConfigMap shows its latest data, as the kubelet's sync of configMap volumes does), and the
 * files every container gets (/etc/hostname, /etc/hosts, /etc/resolv.conf). Built when an exec runs.
 */
type Obj = Record<string, unknown>;

export class VirtualFs {
  private readonly files = new Map<string, string>();
  private readonly dirs = new Set<string>(['/']);

  addFile(path: string, content: string): void {
    const p = posix.normalize(path);
    this.files.set(p, content);
    for (let d = posix.dirname(p); ; d = posix.dirname(d)) {
      this.dirs.add(d);
      if (d === '/') break;
    }
  }

  addDir(path: string): void {
    const p = posix.normalize(path);
    for (let d = p; ; d = posix.dirname(d)) {
      this.dirs.add(d);
      if (d === '/') break;
    }
  }

  read(path: string): string | undefined {
    return this.files.get(posix.normalize(path));
  }

  isDir(path: string): boolean {
    return this.dirs.has(posix.normalize(path));
  }

  /** Names directly inside a directory, sorted. */
  list(path: string): string[] {
    const dir = posix.normalize(path);
    const prefix = dir === '/' ? '/' : `${dir}/`;
    const names = new Set<string>();
    for (const p of [...this.files.keys(), ...this.dirs]) {
      if (p !== dir && p.startsWith(prefix)) names.add(p.slice(prefix.length).split('/')[0]!);
    }
    return [...names].sort();
  }
}

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

/** The filesystem of one container of the pod, as of now. */
export function containerFs(pod: KubeObject, container: Obj, sources: EnvSources): VirtualFs {
  const fs = new VirtualFs();
  const name = pod.metadata.name ?? '';
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const hostname = typeof spec.hostname === 'string' && spec.hostname ? spec.hostname : name;
  const status = isPlainObject(pod.status) ? pod.status : {};
  const namespace = pod.metadata.namespace ?? 'default';
  fs.addFile('/etc/hostname', `${hostname}\n`);
  fs.addFile(
    '/etc/hosts',
    `# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n${typeof status.podIP === 'string' ? status.podIP : ''}\t${hostname}\n`,
  );
  fs.addFile(
    '/etc/resolv.conf',
    `search ${namespace}.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n`,
  );
  for (const d of ['/bin', '/dev', '/home', '/proc', '/root', '/tmp', '/usr', '/var']) fs.addDir(d);
  const volumes = new Map(volumesOf(pod).map((v) => [String(v.name), v]));
  for (const mount of Array.isArray(container.volumeMounts)
    ? (container.volumeMounts.filter(isPlainObject) as Obj[])
    : []) {
    const mountPath = String(mount.mountPath ?? '');
    if (!mountPath.startsWith('/')) continue;
    const volume = volumes.get(String(mount.name));
    const files = volume ? volumeSource(volume, pod, sources)?.files() : undefined;
    const subPath = typeof mount.subPath === 'string' && mount.subPath !== '' ? mount.subPath : undefined;
    if (subPath !== undefined) {
      const content = files instanceof Map ? files.get(subPath) : undefined;
      if (content !== undefined) fs.addFile(mountPath, content);
      continue;
    }
    fs.addDir(mountPath);
    if (files === undefined || typeof files === 'string') continue;
    for (const [rel, content] of files) fs.addFile(posix.join(mountPath, rel), content);
  }
  return fs;
}
