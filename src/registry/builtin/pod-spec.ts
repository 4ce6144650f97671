import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1123Label } from '../../api/validation.js';

type Obj = Record<string, unknown>;

function setDefault(obj: Obj, key: string, value: unknown): void {
  if (obj[key] === undefined || obj[key] === null) obj[key] = value;
}

/** SetDefaults for a PodSpec and its containers, as kube-apiserver applies them to pods and pod templates. */
export function defaultPodSpec(spec: Obj): void {
  setDefault(spec, 'restartPolicy', 'Always');
  setDefault(spec, 'terminationGracePeriodSeconds', 30);
  setDefault(spec, 'dnsPolicy', 'ClusterFirst');
  setDefault(spec, 'securityContext', {});
  setDefault(spec, 'schedulerName', 'default-scheduler');
  for (const list of ['initContainers', 'containers', 'ephemeralContainers']) {
    const containers = spec[list];
    if (Array.isArray(containers)) for (const c of containers) if (isPlainObject(c)) defaultContainer(c);
  }
  const volumes = spec.volumes;
  if (Array.isArray(volumes)) {
    for (const v of volumes) {
      if (!isPlainObject(v)) continue;
      for (const source of ['configMap', 'secret']) {
        const s = v[source];
        if (isPlainObject(s)) setDefault(s, 'defaultMode', 420);
      }
      if (!Object.keys(v).some((k) => k !== 'name')) v.emptyDir = {};
    }
  }
}

/**
 * SetDefaults_Pod: a container's limits are its requests where it asks for nothing itself. Pods only, not templates
 * (a Deployment's template keeps what was written), and before admission, so LimitRanger and quota see the result.
 */
export function defaultRequestsFromLimits(spec: Obj): void {
  for (const list of ['initContainers', 'containers']) {
    const containers = spec[list];
    if (!Array.isArray(containers)) continue;
    for (const c of containers) {
      const resources = isPlainObject(c) && isPlainObject(c.resources) ? c.resources : undefined;
      if (!resources || !isPlainObject(resources.limits)) continue;
      const requests: Obj = isPlainObject(resources.requests) ? resources.requests : {};
      const missing = Object.keys(resources.limits).filter((k) => requests[k] === undefined);
      if (missing.length === 0) continue;
      const filled: Obj = { ...requests };
      for (const k of missing) filled[k] = resources.limits[k];
      resources.requests = filled;
    }
  }
}

function defaultContainer(c: Obj): void {
  setDefault(c, 'terminationMessagePath', '/dev/termination-log');
  setDefault(c, 'terminationMessagePolicy', 'File');
  setDefault(c, 'resources', {});
  if (c.imagePullPolicy === undefined && typeof c.image === 'string') {
    const tagged = /:[^/]+$/.test(c.image) && !c.image.endsWith(':latest');
    c.imagePullPolicy = tagged || c.image.includes('@') ? 'IfNotPresent' : 'Always';
  }
  const ports = c.ports;
  if (Array.isArray(ports)) for (const p of ports) if (isPlainObject(p)) setDefault(p, 'protocol', 'TCP');
  const env = c.env;
  if (Array.isArray(env)) {
    for (const e of env) {
      const fieldRef = isPlainObject(e) && isPlainObject(e.valueFrom) ? e.valueFrom.fieldRef : undefined;
      if (isPlainObject(fieldRef)) setDefault(fieldRef, 'apiVersion', 'v1');
    }
  }
}

/** The checks kube-apiserver makes on every PodSpec (a subset of ValidatePodSpec, with its messages). */
export function validatePodSpec(spec: unknown, path: string, allowedRestartPolicies?: string[]): StatusCause[] {
  if (!isPlainObject(spec)) return [FieldErrors.required(path, '')];
  const causes: StatusCause[] = [];
  const containers = spec.containers;
  if (!Array.isArray(containers) || containers.length === 0) {
    causes.push(FieldErrors.required(`${path}.containers`, ''));
  }
  const names = new Set<string>();
  for (const list of ['initContainers', 'containers']) {
    const items = spec[list];
    if (items === undefined) continue;
    if (!Array.isArray(items)) {
      causes.push(FieldErrors.invalid(`${path}.${list}`, items, 'must be a list'));
      continue;
    }
    items.forEach((c, i) => {
      const at = `${path}.${list}[${i}]`;
      if (!isPlainObject(c)) return causes.push(FieldErrors.invalid(at, c, 'must be an object'));
      const name = c.name;
      if (typeof name !== 'string' || name === '') causes.push(FieldErrors.required(`${at}.name`, ''));
      else {
        for (const p of checkDns1123Label(name)) causes.push(FieldErrors.invalid(`${at}.name`, name, p));
        if (names.has(name)) causes.push(FieldErrors.duplicate(`${at}.name`, name));
        names.add(name);
      }
      if (typeof c.image !== 'string' || c.image.trim() === '') causes.push(FieldErrors.required(`${at}.image`, ''));
      return undefined;
    });
  }
  causes.push(...validateEphemeralContainers(spec.ephemeralContainers, names, `${path}.ephemeralContainers`));
  const policy = spec.restartPolicy;
  const allowed = allowedRestartPolicies ?? ['Always', 'OnFailure', 'Never'];
  if (policy !== undefined && !allowed.includes(String(policy)))
    causes.push(FieldErrors.notSupported(`${path}.restartPolicy`, policy, allowed));
  const grace = spec.terminationGracePeriodSeconds;
  if (grace !== undefined && (typeof grace !== 'number' || grace < 0)) {
    causes.push(
      FieldErrors.invalid(`${path}.terminationGracePeriodSeconds`, grace, 'must be greater than or equal to 0'),
    );
  }
  return causes;
}

/**
 * The fields of an ephemeral container that must stay unset (validateEphemeralContainers' allow list, in the
 * order of EphemeralContainerCommon's fields): an ephemeral container serves no traffic and reserves nothing.
 */
const FORBIDDEN_EPHEMERAL_FIELDS = [
  'ports',
  'resources',
  'resizePolicy',
  'restartPolicy',
  'livenessProbe',
  'readinessProbe',
  'startupProbe',
  'lifecycle',
] as const;

/** Set as Go sees it: anything but its zero value (an empty `resources: {}` is the zero ResourceRequirements). */
function isSet(field: string, value: unknown): boolean {
  if (value === undefined || value === null || value === '') return false;
  if (field === 'resources' && isPlainObject(value))
    return Object.values(value).some((v) => v !== undefined && v !== null);
  return true;
}

/**
 * validateEphemeralContainers: a name and image as any container's, a name unique across all the pod's containers,
 * a target that is one of its containers or init containers, none of the fields of a serving container, and no
 * volume subPath. `names` holds the names of the containers and init containers.
 */
function validateEphemeralContainers(list: unknown, names: ReadonlySet<string>, path: string): StatusCause[] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) return [FieldErrors.invalid(path, list, 'must be a list')];
  const causes: StatusCause[] = [];
  const all = new Set(names);
  list.forEach((c, i) => {
    const at = `${path}[${i}]`;
    if (!isPlainObject(c)) return causes.push(FieldErrors.invalid(at, c, 'must be an object'));
    const name = c.name;
    if (typeof name !== 'string' || name === '') causes.push(FieldErrors.required(`${at}.name`, ''));
    else for (const p of checkDns1123Label(name)) causes.push(FieldErrors.invalid(`${at}.name`, name, p));
    if (typeof c.image !== 'string' || c.image.trim() === '') causes.push(FieldErrors.required(`${at}.image`, ''));
    if (typeof name === 'string' && name !== '') {
      if (all.has(name)) causes.push(FieldErrors.duplicate(`${at}.name`, name));
      else all.add(name);
    }
    const target = c.targetContainerName;
    if (typeof target === 'string' && target !== '' && !names.has(target))
      causes.push(FieldErrors.notFound(`${at}.targetContainerName`, target));
    for (const field of FORBIDDEN_EPHEMERAL_FIELDS)
      if (isSet(field, c[field]))
        causes.push(FieldErrors.forbidden(`${at}.${field}`, 'cannot be set for an Ephemeral Container'));
    const mounts = Array.isArray(c.volumeMounts) ? c.volumeMounts : [];
    mounts.forEach((m, j) => {
      if (!isPlainObject(m)) return;
      for (const field of ['subPath', 'subPathExpr'])
        if (typeof m[field] === 'string' && m[field] !== '')
          causes.push(
            FieldErrors.forbidden(`${at}.volumeMounts[${j}].${field}`, 'cannot be set for an Ephemeral Container'),
          );
    });
    return undefined;
  });
  return causes;
}

/**
 * ValidatePodEphemeralContainersUpdate's second part: the ephemeral containers a pod has stay, each exactly as it
 * is (a patch may reorder them). kube-apiserver appends a diff of the two containers to "may not be changed".
 */
export function validateEphemeralContainersUpdate(next: unknown, old: unknown): StatusCause[] {
  const listOf = (spec: unknown): Obj[] =>
    isPlainObject(spec) && Array.isArray(spec.ephemeralContainers)
      ? (spec.ephemeralContainers as unknown[]).filter(isPlainObject)
      : [];
  const byName = new Map(listOf(next).map((c) => [c.name, c]));
  const causes: StatusCause[] = [];
  for (const before of listOf(old)) {
    const after = byName.get(before.name);
    const name = JSON.stringify(String(before.name));
    if (!after)
      causes.push(
        FieldErrors.forbidden('spec.ephemeralContainers', `existing ephemeral containers ${name} may not be removed\n`),
      );
    else if (!deepEqual(after, before))
      causes.push(
        FieldErrors.forbidden('spec.ephemeralContainers', `existing ephemeral containers ${name} may not be changed\n`),
      );
  }
  return causes;
}

/** Marks a static pod's mirror (kubelet's kubernetes.io/config.mirror), which takes no ephemeral containers. */
export const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/**
 * pods/ephemeralcontainers (dropNonEphemeralContainerUpdates): the stored pod with the ephemeral containers sent,
 * defaulted as a pod's containers are; every other change, metadata included, is dropped.
 */
export function withEphemeralContainers(next: KubeObject, old: KubeObject): KubeObject {
  const spec: Obj = { ...(isPlainObject(old.spec) ? old.spec : {}) };
  const list = isPlainObject(next.spec) ? next.spec.ephemeralContainers : undefined;
  if (list === undefined || list === null) delete spec.ephemeralContainers;
  else {
    const copied = deepCopy(list);
    if (Array.isArray(copied)) for (const c of copied) if (isPlainObject(c)) defaultContainer(c);
    spec.ephemeralContainers = copied;
  }
  return { ...old, metadata: { ...old.metadata }, spec };
}

/** The QoS class a pod's requests and limits put it in (kubelet's qos.GetPodQOS, simplified to cpu/memory). */
export function qosClass(spec: Obj): 'Guaranteed' | 'Burstable' | 'BestEffort' {
  const containers = [
    ...(Array.isArray(spec.containers) ? spec.containers : []),
    ...(Array.isArray(spec.initContainers) ? spec.initContainers : []),
  ];
  let any = false;
  let guaranteed = containers.length > 0;
  for (const c of containers) {
    const resources = isPlainObject(c) && isPlainObject(c.resources) ? c.resources : {};
    const requests = isPlainObject(resources.requests) ? resources.requests : {};
    const limits = isPlainObject(resources.limits) ? resources.limits : {};
    if (Object.keys(requests).length > 0 || Object.keys(limits).length > 0) any = true;
    for (const r of ['cpu', 'memory']) {
      const limit = limits[r];
      const request = requests[r] ?? limit;
      if (limit === undefined || String(request) !== String(limit)) guaranteed = false;
    }
  }
  if (!any) return 'BestEffort';
  return guaranteed ? 'Guaranteed' : 'Burstable';
}
