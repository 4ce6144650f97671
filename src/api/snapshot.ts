import { yaml } from './yaml.js';
import { isPlainObject, type KubeObject } from './types.js';

/**
 * The snapshot file of `sim snapshot export` and `sim serve --snapshot`: a YAML stream whose first document is a
 * header (kind Snapshot) and whose other documents are the cluster's objects, each as a restore needs it. What is
 * dropped, what is skipped and how owners are linked again are decided here, in one place, and documented in the
 * README's "Snapshots" section.
 */
type Obj = Record<string, unknown>;

export const SNAPSHOT_API_VERSION = 'kube-sim.dev/v1alpha1';
export const SNAPSHOT_KIND = 'Snapshot';

export interface SnapshotHeader {
  apiVersion: typeof SNAPSHOT_API_VERSION;
  kind: typeof SNAPSHOT_KIND;
  /** When the snapshot was read (RFC 3339): a booted cluster's virtual clock starts here. */
  time: string;
  source: { server: string; context?: string; version?: string; namespaces?: string[] };
  /** How many objects follow. */
  objects: number;
  /** Fields removed from every object (the source's own), for the reader. */
  dropped: string[];
  /** What was left out and why: whole resources, or `objects` of one (kube-root-ca.crt in every namespace). */
  skipped?: SkippedEntry[];
}

export interface SkippedEntry {
  resource: string;
  objects?: number;
  why: string;
}

export interface Snapshot {
  header: SnapshotHeader;
  objects: KubeObject[];
}

/**
 * What belongs to the source cluster and is removed: identities and versions the target hands out anew. Kept on
 * purpose: creationTimestamp (ages, the order ReplicaSets delete pods in, CronJob and Job times), generation (so that
 * status.observedGeneration still matches and no controller writes again), labels and annotations (the Deployment
 * revision, last-applied-configuration for a later kubectl apply), finalizers, deletionTimestamp, and status.
 */
export const DROPPED_FIELDS = [
  'metadata.uid',
  'metadata.resourceVersion',
  'metadata.selfLink',
  'metadata.managedFields (kept with --keep-managed-fields)',
  'metadata.ownerReferences[].uid (linked again by kind, namespace and name)',
  'spec.claimRef.uid and spec.claimRef.resourceVersion of PersistentVolumes (linked again by name)',
];

/**
 * Resources a snapshot leaves out, by `resource.group`, and why: what the target cluster makes itself, or what only
 * has meaning in the source.
 */
export const SKIPPED_RESOURCES: Readonly<Record<string, string>> = {
  events: "the source's history, not its state",
  'events.events.k8s.io': "the source's history, not its state",
  endpoints: "made from Services and pods by the target's controllers",
  'endpointslices.discovery.k8s.io': "made from Services and pods by the target's controllers",
  'leases.coordination.k8s.io': "heartbeats and leader elections of the source's kubelets and controllers",
  'apiservices.apiregistration.k8s.io': "the target's aggregator registers its own",
  componentstatuses: 'not stored objects',
  'nodes.metrics.k8s.io': "the source's usage, not stored objects",
  'pods.metrics.k8s.io': "the source's usage, not stored objects",
  'csinodes.storage.k8s.io': "written by the source's kubelets",
  'volumeattachments.storage.k8s.io': "the source's attach/detach state",
  'certificatesigningrequests.certificates.k8s.io': "requests signed by the source's CA",
  'mutatingwebhookconfigurations.admissionregistration.k8s.io':
    'their servers run in the source cluster: in the target every call would fail (and refuse writes with failurePolicy Fail)',
  'validatingwebhookconfigurations.admissionregistration.k8s.io':
    'their servers run in the source cluster: in the target every call would fail (and refuse writes with failurePolicy Fail)',
};

export const SECRETS_SKIPPED = 'left out unless --include-secrets';

/** `resource.group` (core: the resource alone), as kube-apiserver names group resources. */
export function groupResource(group: string, resource: string): string {
  return group === '' ? resource : `${resource}.${group}`;
}

/**
 * Why one object is left out even though its resource is exported: what every cluster makes for itself. Undefined:
 * exported.
 */
export function skippedObject(groupRes: string, obj: KubeObject): string | undefined {
  const { name, namespace, labels, annotations } = obj.metadata;
  switch (groupRes) {
    case 'services':
      if (namespace === 'default' && name === 'kubernetes') return "the target's API server Service";
      return undefined;
    case 'configmaps':
      if (name === 'kube-root-ca.crt') return "the target's CA, published in every namespace";
      return undefined;
    case 'secrets':
      if (obj.type === 'kubernetes.io/service-account-token') return "tokens signed by the source's key";
      return undefined;
    case 'clusterroles.rbac.authorization.k8s.io':
    case 'clusterrolebindings.rbac.authorization.k8s.io':
    case 'roles.rbac.authorization.k8s.io':
    case 'rolebindings.rbac.authorization.k8s.io':
      if (labels?.['kubernetes.io/bootstrapping'] === 'rbac-defaults') return "the target's bootstrap RBAC";
      return undefined;
    case 'priorityclasses.scheduling.k8s.io':
      if (name === 'system-node-critical' || name === 'system-cluster-critical')
        return "the target's system PriorityClasses";
      return undefined;
    case 'flowschemas.flowcontrol.apiserver.k8s.io':
    case 'prioritylevelconfigurations.flowcontrol.apiserver.k8s.io':
      if (annotations?.['apf.kubernetes.io/autoupdate-spec'] === 'true') return "the target's flow-control defaults";
      return undefined;
    default:
      return undefined;
  }
}

/** The object as a snapshot keeps it: DROPPED_FIELDS removed (a copy; the input is not changed). */
export function forSnapshot(obj: KubeObject, options: { keepManagedFields?: boolean } = {}): KubeObject {
  const { uid: _uid, resourceVersion: _rv, selfLink: _self, managedFields, ...meta } = obj.metadata as Obj;
  if (options.keepManagedFields && managedFields !== undefined) meta.managedFields = managedFields;
  if (Array.isArray(meta.ownerReferences))
    meta.ownerReferences = (meta.ownerReferences as unknown[]).map((ref) => {
      if (!isPlainObject(ref)) return ref;
      const { uid: _u, ...rest } = ref;
      return rest;
    });
  const out: KubeObject = { ...obj, metadata: meta as KubeObject['metadata'] };
  if (obj.kind === 'PersistentVolume' && isPlainObject(obj.spec) && isPlainObject(obj.spec.claimRef)) {
    const { uid: _u, resourceVersion: _r, ...claimRef } = obj.spec.claimRef;
    out.spec = { ...obj.spec, claimRef };
  }
  return out;
}

/** Kinds that must be there before others: CRDs define kinds, namespaces hold objects. */
const FIRST_KINDS = ['apiextensions.k8s.io/CustomResourceDefinition', '/Namespace'];

function groupOf(apiVersion: string | undefined): string {
  const slash = (apiVersion ?? '').indexOf('/');
  return slash < 0 ? '' : apiVersion!.slice(0, slash);
}

function rank(obj: KubeObject): number {
  const i = FIRST_KINDS.indexOf(`${groupOf(obj.apiVersion)}/${obj.kind}`);
  return i < 0 ? FIRST_KINDS.length : i;
}

/** The order of a snapshot's objects: CRDs, namespaces, then by group, kind, namespace and name (stable files). */
export function snapshotOrder(a: KubeObject, b: KubeObject): number {
  return (
    rank(a) - rank(b) ||
    compare(groupOf(a.apiVersion), groupOf(b.apiVersion)) ||
    compare(a.kind ?? '', b.kind ?? '') ||
    compare(a.metadata.namespace ?? '', b.metadata.namespace ?? '') ||
    compare(a.metadata.name ?? '', b.metadata.name ?? '')
  );
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export class SnapshotError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SnapshotError';
  }
}

/**
 * The documents of a YAML stream. A document that is one JSON value (`sim snapshot export -o json` writes each
 * object so) is read with JSON.parse, far faster than a YAML parser (BENCHMARKS.md); any other is YAML.
 * Documents are split at lines starting with `---`, which inside a document can only be a block scalar's content,
 * and those are indented.
 */
export function yamlDocuments(text: string, origin: string): unknown[] {
  const docs: unknown[] = [];
  const lines = text.split('\n');
  let start = 0;
  let index = 0;
  const flush = (end: number, firstLine?: string): void => {
    const piece = [firstLine ?? '', ...lines.slice(start, end)].join('\n');
    const trimmed = piece.trim();
    index++;
    if (trimmed === '' || /^(#.*\n?)*$/.test(trimmed)) return;
    if (trimmed.startsWith('{')) {
      try {
        docs.push(JSON.parse(trimmed));
        return;
      } catch {
        // YAML flow mapping, not JSON: the YAML parser reads it
      }
    }
    try {
      docs.push(yaml().parse(piece, { maxAliasCount: 100 }));
    } catch (err) {
      throw new SnapshotError(`${origin}: document ${index}: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  let pendingFirst: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('---') && (line.length === 3 || line[3] === ' ' || line[3] === '\t' || line[3] === '\r')) {
      flush(i, pendingFirst);
      start = i + 1;
      pendingFirst = line.slice(3);
    } else if (line === '...' || line === '...\r') {
      flush(i, pendingFirst);
      start = i + 1;
      pendingFirst = undefined;
    }
  }
  flush(lines.length, pendingFirst);
  return docs;
}

/**
 * Reads a snapshot file's text: the header, then the objects (a `kind: List` document is unpacked, so
 * `kubectl get … -o yaml` output is a snapshot too, without a header: its time is then unknown). Throws a
 * SnapshotError saying what is wrong and where.
 */
export function parseSnapshot(text: string, origin: string): Snapshot {
  const docs = yamlDocuments(text, origin);
  let header: SnapshotHeader | undefined;
  const objects: KubeObject[] = [];
  const add = (value: unknown, where: string): void => {
    if (!isPlainObject(value)) throw new SnapshotError(`${origin}: ${where}: not an object`);
    if (value.kind === SNAPSHOT_KIND && value.apiVersion === SNAPSHOT_API_VERSION) {
      if (header) throw new SnapshotError(`${origin}: ${where}: a second Snapshot header`);
      header = value as unknown as SnapshotHeader;
      return;
    }
    if (typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items)) {
      value.items.forEach((item, i) => add(item, `${where}, item ${i + 1}`));
      return;
    }
    if (typeof value.apiVersion !== 'string' || typeof value.kind !== 'string')
      throw new SnapshotError(`${origin}: ${where}: an object needs apiVersion and kind`);
    if (!isPlainObject(value.metadata) || typeof value.metadata.name !== 'string' || value.metadata.name === '')
      throw new SnapshotError(`${origin}: ${where}: ${value.kind} without metadata.name`);
    objects.push(value as unknown as KubeObject);
  };
  docs.forEach((doc, i) => {
    if (doc !== null && doc !== undefined) add(doc, `document ${i + 1}`);
  });
  if (header && (typeof header.time !== 'string' || Number.isNaN(Date.parse(header.time))))
    throw new SnapshotError(`${origin}: the Snapshot header's time is not an RFC 3339 time`);
  return {
    header: header ?? {
      apiVersion: SNAPSHOT_API_VERSION,
      kind: SNAPSHOT_KIND,
      time: '',
      source: { server: origin },
      objects: objects.length,
      dropped: [],
    },
    objects,
  };
}

function identity(group: string, kind: string, namespace: string | undefined, name: string): string {
  return `${group}/${kind}/${namespace ?? ''}/${name}`;
}

/**
 * Gives every object a new uid and points owner references (and PersistentVolumes' claimRefs) at their owners'
 * new uids: by the source uid when the file still has it (a `kubectl get -o yaml` List), else by the owner's kind,
 * namespace and name. A reference to an owner the snapshot does not hold is removed (its garbage collector would
 * otherwise delete the dependent at once) and said in `notes`. Works on copies.
 */
export function relinkOwners(
  objects: readonly KubeObject[],
  newUid: () => string,
): { objects: KubeObject[]; notes: string[] } {
  const byIdentity = new Map<string, string>();
  const bySourceUid = new Map<string, string>();
  const withUids = objects.map((obj) => {
    const uid = newUid();
    const { name, namespace } = obj.metadata;
    byIdentity.set(identity(groupOf(obj.apiVersion), obj.kind!, namespace, name!), uid);
    if (typeof obj.metadata.uid === 'string') bySourceUid.set(obj.metadata.uid, uid);
    const copy: KubeObject = { ...obj, metadata: { ...obj.metadata, uid } };
    return copy;
  });
  const dangling = new Map<string, { count: number; example: string }>();
  const out = withUids.map((obj) => {
    const refs = obj.metadata.ownerReferences;
    let next: KubeObject = obj;
    if (Array.isArray(refs) && refs.length > 0) {
      const kept: Obj[] = [];
      for (const ref of refs as unknown as Obj[]) {
        const group = groupOf(String(ref.apiVersion ?? ''));
        const name = String(ref.name ?? '');
        const kind = String(ref.kind ?? '');
        const uid =
          (typeof ref.uid === 'string' ? bySourceUid.get(ref.uid) : undefined) ??
          byIdentity.get(identity(group, kind, obj.metadata.namespace, name)) ??
          byIdentity.get(identity(group, kind, undefined, name));
        if (uid === undefined) {
          const seen = dangling.get(kind);
          if (seen) seen.count++;
          else dangling.set(kind, { count: 1, example: name });
          continue;
        }
        kept.push({ ...ref, uid });
      }
      const metadata = { ...obj.metadata, ownerReferences: kept as unknown as typeof obj.metadata.ownerReferences };
      if (kept.length === 0) delete metadata.ownerReferences;
      next = { ...obj, metadata };
    }
    if (obj.kind === 'PersistentVolume' && isPlainObject(obj.spec) && isPlainObject(obj.spec.claimRef)) {
      const claim = obj.spec.claimRef;
      const uid =
        (typeof claim.uid === 'string' ? bySourceUid.get(claim.uid) : undefined) ??
        byIdentity.get(identity('', 'PersistentVolumeClaim', String(claim.namespace ?? ''), String(claim.name ?? '')));
      const { uid: _u, resourceVersion: _r, ...rest } = claim;
      next = { ...next, spec: { ...obj.spec, claimRef: uid === undefined ? rest : { ...rest, uid } } };
    }
    return next;
  });
  const notes = [...dangling].map(
    ([kind, { count, example }]) =>
      `removed ${count} owner reference${count === 1 ? '' : 's'} to ${kind} objects the snapshot does not hold (${example}${count > 1 ? ', …' : ''})`,
  );
  return { objects: out, notes };
}
