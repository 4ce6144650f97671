import { rfc3339 } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import { relinkOwners, SnapshotError, type Snapshot } from '../api/snapshot.js';
import type { GenericStore } from '../registry/generic-store.js';
import type { Registry } from '../registry/registry.js';
import { resourceKey, type KindInfo } from '../registry/types.js';
import type { MemoryStore } from '../storage/memory-store.js';

/** What a snapshot's nodes were when it was taken: a node that was not Ready starts with its kubelet failed. */
export type RestoredNodes = ReadonlyMap<string, { ready: boolean }>;

export interface Restored {
  /** Things worth telling the user (kinds this server does not serve, owner references removed). */
  notes: string[];
  nodes: RestoredNodes;
  /** Namespaces the objects are in but the snapshot does not hold: made before the cluster serves. */
  missingNamespaces: string[];
}

const CRD = 'apiextensions.k8s.io/v1/CustomResourceDefinition';

function ready(node: KubeObject): boolean {
  const conditions = isPlainObject(node.status) && Array.isArray(node.status.conditions) ? node.status.conditions : [];
  return conditions.some((c) => isPlainObject(c) && c.type === 'Ready' && c.status === 'True');
}

/**
 * Loads a snapshot's objects into an empty store, before any controller or kubelet starts, as `--data` restores
 * a cluster: each object gets a new uid (owner references follow, api/snapshot.ts) and a resourceVersion, keeps
 * its status, and is checked as a create would check it. CRDs go first (loading one serves its kind). The store
 * was made with its revision at `snapshot.objects.length`, the last resourceVersion handed out here.
 */
export async function restoreSnapshot(
  snapshot: Snapshot,
  parts: { store: MemoryStore; registry: Registry; api: GenericStore; random: SeededRandom; now: number },
): Promise<Restored> {
  const { store, registry, api, random } = parts;
  const { objects, notes } = relinkOwners(snapshot.objects, () => random.uuid());
  const createdAt = rfc3339(parts.now);
  const crdsFirst = [...objects.filter((o) => `${o.apiVersion}/${o.kind}` === CRD)];
  const rest = objects.filter((o) => `${o.apiVersion}/${o.kind}` !== CRD);
  const unserved = new Map<string, number>();
  const seen = new Set<string>();
  const namespaces = new Set<string>();
  const used = new Set<string>();
  const nodes = new Map<string, { ready: boolean }>();
  let revision = 0;
  const prepare = async (obj: KubeObject): Promise<{ info: KindInfo; stored: KubeObject } | undefined> => {
    const info = registry.byGroupVersionKind(obj.apiVersion!, obj.kind!);
    if (!info || info.ephemeral || info.act) {
      const what = `${obj.kind} (${obj.apiVersion})`;
      unserved.set(what, (unserved.get(what) ?? 0) + 1);
      return undefined;
    }
    const metadata = { ...obj.metadata };
    if (info.namespaced) metadata.namespace ??= 'default';
    else delete metadata.namespace;
    const where = `${obj.kind} ${metadata.namespace ? `${metadata.namespace}/` : ''}${metadata.name}`;
    const key = `${resourceKey(info)}/${metadata.namespace ?? ''}/${metadata.name}`;
    if (seen.has(key)) throw new SnapshotError(`the snapshot holds ${where} twice`);
    seen.add(key);
    metadata.resourceVersion = String(++revision);
    metadata.creationTimestamp ??= createdAt;
    if (info.generation) metadata.generation ??= 1;
    else delete metadata.generation;
    const prepared: KubeObject = { ...obj, metadata };
    if (!info.status) delete prepared.status;
    let stored: KubeObject;
    try {
      stored = await api.restoredForm(info, prepared);
    } catch (err) {
      throw new SnapshotError(`${where}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (metadata.namespace !== undefined) used.add(metadata.namespace);
    if (obj.kind === 'Namespace' && obj.apiVersion === 'v1') namespaces.add(metadata.name!);
    if (obj.kind === 'Node' && obj.apiVersion === 'v1') nodes.set(metadata.name!, { ready: ready(obj) });
    return { info, stored };
  };
  // CRDs one at a time: loading one registers the kinds of the objects that follow.
  for (const crd of crdsFirst) {
    const done = await prepare(crd);
    if (done) store.load(resourceKey(done.info), [done.stored]);
  }
  const byTable = new Map<string, KubeObject[]>();
  for (const obj of rest) {
    const done = await prepare(obj);
    if (!done) continue;
    const table = resourceKey(done.info);
    let list = byTable.get(table);
    if (!list) byTable.set(table, (list = []));
    list.push(done.stored);
  }
  for (const [table, list] of byTable) store.load(table, list);
  if (unserved.size > 0)
    notes.push(
      `left out objects of kinds this server does not serve: ${[...unserved].map(([k, n]) => `${n} ${k}`).join(', ')}`,
    );
  return { notes, nodes, missingNamespaces: [...used].filter((n) => !namespaces.has(n)).sort() };
}
