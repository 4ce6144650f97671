import { isPlainObject, type KubeObject } from '../api/types.js';
import { parseMilli } from '../api/quantity.js';
import { evaluatePath } from './stages.js';
import { expandVars, type EnvResult } from './actions.js';

/**
 * A container's environment as the kubelet builds it when the container starts (kubelet_pods.go
 * makeEnvironmentVariables): service links, envFrom, env with $(VAR) expansion, ConfigMap and Secret keys,
 * the downward API. A missing ConfigMap, Secret or key that is not optional is an error the container waits on
 * (CreateContainerConfigError), with the kubelet's messages.
 */
type Obj = Record<string, unknown>;

export interface EnvSources {
  configMap(namespace: string, name: string): KubeObject | undefined;
  secret(namespace: string, name: string): KubeObject | undefined;
  /** Services of a namespace, for the docker-link variables (enableServiceLinks). */
  services(namespace: string): readonly KubeObject[];
  /** The node's allocatable resources, for resourceFieldRef limits that are not set. */
  allocatable: Record<string, unknown>;
}

const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Data values of a ConfigMap (data and binaryData) or Secret (base64-decoded data, stringData). */
export function dataOf(obj: KubeObject, secret: boolean): Map<string, string> {
  const out = new Map<string, string>();
  const data = isPlainObject(obj.data) ? obj.data : {};
  for (const [k, v] of Object.entries(data))
    if (typeof v === 'string') out.set(k, secret ? Buffer.from(v, 'base64').toString('utf8') : v);
  if (!secret && isPlainObject(obj.binaryData)) {
    for (const [k, v] of Object.entries(obj.binaryData))
      if (typeof v === 'string') out.set(k, Buffer.from(v, 'base64').toString('utf8'));
  }
  if (secret && isPlainObject(obj.stringData))
    for (const [k, v] of Object.entries(obj.stringData)) if (typeof v === 'string') out.set(k, v);
  return out;
}

/** The downward API: the fields a fieldRef may name. */
export function downwardField(pod: KubeObject, path: string): string | undefined {
  const meta = pod.metadata;
  const labelOrAnnotation = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (labelOrAnnotation)
    return (labelOrAnnotation[1] === 'labels' ? meta.labels : meta.annotations)?.[labelOrAnnotation[2]!] ?? '';
  switch (path) {
    case 'metadata.name':
      return meta.name ?? '';
    case 'metadata.namespace':
      return meta.namespace ?? '';
    case 'metadata.uid':
      return meta.uid ?? '';
    case 'metadata.labels':
    case 'metadata.annotations': {
      const map = (path === 'metadata.labels' ? meta.labels : meta.annotations) ?? {};
      return Object.keys(map)
        .sort()
        .map((k) => `${k}="${map[k]}"`)
        .join('\n');
    }
    case 'spec.nodeName':
    case 'spec.serviceAccountName':
    case 'status.hostIP':
    case 'status.podIP': {
      const v = evaluatePath(pod, `.${path}`)[0];
      return typeof v === 'string' ? v : '';
    }
    case 'status.hostIPs':
    case 'status.podIPs': {
      const ips = evaluatePath(pod, `.${path}[*].ip`);
      return ips.map(String).join(',');
    }
  }
  return undefined;
}

/** resourceFieldRef: a container's request or limit (limits default to the node's allocatable), over a divisor. */
export function resourceField(container: Obj, ref: Obj, allocatable: Record<string, unknown>): string | undefined {
  const resource = typeof ref.resource === 'string' ? ref.resource : '';
  const m = /^(limits|requests)\.(.+)$/.exec(resource);
  if (!m) return undefined;
  const resources = isPlainObject(container.resources) ? container.resources : {};
  const group = isPlainObject(resources[m[1]!]) ? (resources[m[1]!] as Obj) : {};
  let milli = parseMilli(group[m[2]!]);
  if (milli === undefined && m[1] === 'limits') milli = parseMilli(allocatable[m[2]!]);
  if (milli === undefined) milli = 0;
  const divisor = parseMilli(ref.divisor ?? '1') || 1000;
  return String(Math.ceil(milli / divisor));
}

function envName(service: string): string {
  return service.toUpperCase().replace(/-/g, '_');
}

/** The docker-link variables of one Service (FOO_SERVICE_HOST, FOO_PORT_80_TCP_ADDR, …). */
export function serviceEnv(service: KubeObject): Array<[string, string]> {
  const spec = isPlainObject(service.spec) ? service.spec : {};
  const ip = spec.clusterIP;
  if (typeof ip !== 'string' || ip === '' || ip === 'None' || spec.type === 'ExternalName') return [];
  const ports = Array.isArray(spec.ports) ? (spec.ports.filter(isPlainObject) as Obj[]) : [];
  if (ports.length === 0) return [];
  const name = envName(service.metadata.name ?? '');
  const out: Array<[string, string]> = [
    [`${name}_SERVICE_HOST`, ip],
    [`${name}_SERVICE_PORT`, String(ports[0]!.port)],
  ];
  for (const p of ports)
    if (typeof p.name === 'string' && p.name !== '')
      out.push([`${name}_SERVICE_PORT_${envName(p.name)}`, String(p.port)]);
  const first = ports[0]!;
  out.push([`${name}_PORT`, `${String(first.protocol ?? 'TCP').toLowerCase()}://${ip}:${String(first.port)}`]);
  for (const p of ports) {
    const proto = String(p.protocol ?? 'TCP');
    const prefix = `${name}_PORT_${String(p.port)}_${proto.toUpperCase()}`;
    out.push([prefix, `${proto.toLowerCase()}://${ip}:${String(p.port)}`]);
    out.push([`${prefix}_PROTO`, proto.toLowerCase()]);
    out.push([`${prefix}_PORT`, String(p.port)]);
    out.push([`${prefix}_ADDR`, ip]);
  }
  return out;
}

/** Resolves the environment of `container` in `pod` (whose status already carries its IPs). */
export function resolveEnv(pod: KubeObject, container: Obj, sources: EnvSources): EnvResult {
  const namespace = pod.metadata.namespace ?? 'default';
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const env = new Map<string, string>();
  env.set('PATH', IMAGE_PATH);
  env.set('HOSTNAME', typeof spec.hostname === 'string' && spec.hostname ? spec.hostname : (pod.metadata.name ?? ''));

  // Service links: the API server's `kubernetes` Service always; the namespace's Services when enabled.
  const links: Array<[string, string]> = [];
  const kubernetes = sources.services('default').find((s) => s.metadata.name === 'kubernetes');
  if (kubernetes) links.push(...serviceEnv(kubernetes));
  if (spec.enableServiceLinks !== false) {
    for (const svc of sources.services(namespace))
      if (!(namespace === 'default' && svc.metadata.name === 'kubernetes')) links.push(...serviceEnv(svc));
  }
  const linkVars = new Map(links);

  const user = new Map<string, string>();
  const lookup = new Map<string, string>([...linkVars]);
  const configMapData = (name: string, optional: boolean): Map<string, string> | string | undefined => {
    const cm = sources.configMap(namespace, name);
    if (!cm) return optional ? undefined : `configmap "${name}" not found`;
    return dataOf(cm, false);
  };
  const secretData = (name: string, optional: boolean): Map<string, string> | string | undefined => {
    const s = sources.secret(namespace, name);
    if (!s) return optional ? undefined : `secret "${name}" not found`;
    return dataOf(s, true);
  };

  for (const from of Array.isArray(container.envFrom) ? (container.envFrom as unknown[]) : []) {
    if (!isPlainObject(from)) continue;
    const prefix = typeof from.prefix === 'string' ? from.prefix : '';
    const ref = isPlainObject(from.configMapRef)
      ? from.configMapRef
      : isPlainObject(from.secretRef)
        ? from.secretRef
        : undefined;
    if (!ref) continue;
    const data = (isPlainObject(from.configMapRef) ? configMapData : secretData)(
      String(ref.name),
      ref.optional === true,
    );
    if (typeof data === 'string') return { error: data };
    for (const [k, v] of data ?? []) {
      user.set(prefix + k, v);
      lookup.set(prefix + k, v);
    }
  }

  for (const e of Array.isArray(container.env) ? (container.env as unknown[]) : []) {
    if (!isPlainObject(e) || typeof e.name !== 'string') continue;
    let value: string | undefined;
    if (typeof e.value === 'string') value = expandVars(e.value, lookup);
    else if (isPlainObject(e.valueFrom)) {
      const from = e.valueFrom;
      if (isPlainObject(from.configMapKeyRef) || isPlainObject(from.secretKeyRef)) {
        const isSecret = isPlainObject(from.secretKeyRef);
        const ref = (isSecret ? from.secretKeyRef : from.configMapKeyRef) as Obj;
        const optional = ref.optional === true;
        const data = (isSecret ? secretData : configMapData)(String(ref.name), optional);
        if (typeof data === 'string') return { error: data };
        if (data === undefined) continue;
        const key = String(ref.key);
        if (!data.has(key)) {
          if (optional) continue;
          return {
            error: `couldn't find key ${key} in ${isSecret ? 'Secret' : 'ConfigMap'} ${namespace}/${String(ref.name)}`,
          };
        }
        value = data.get(key);
      } else if (isPlainObject(from.fieldRef)) {
        value = downwardField(pod, String(from.fieldRef.fieldPath));
        if (value === undefined) return { error: `unsupported fieldPath: ${String(from.fieldRef.fieldPath)}` };
      } else if (isPlainObject(from.resourceFieldRef)) {
        const ref = from.resourceFieldRef;
        const named = typeof ref.containerName === 'string' && ref.containerName !== '' ? ref.containerName : undefined;
        const target = named
          ? (((Array.isArray(spec.containers) ? spec.containers : []).find(
              (c) => isPlainObject(c) && c.name === named,
            ) as Obj | undefined) ?? container)
          : container;
        value = resourceField(target, ref, sources.allocatable);
      }
    }
    if (value === undefined) value = '';
    user.set(e.name, value);
    lookup.set(e.name, value);
  }

  for (const [k, v] of user) env.set(k, v);
  for (const [k, v] of linkVars) if (!env.has(k)) env.set(k, v);
  if (!env.has('HOME')) env.set('HOME', '/root');
  return { env: [...env] };
}
