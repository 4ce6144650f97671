import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import type { Assertion, Scenario, Step } from './types.js';

/**
 * A recorded trace (`sim record`) is a scenario: it starts from the snapshot taken when the recording began, its
 * steps re-apply the changes users made (apply, patch, scale, delete) at the times they were seen, and it ends
 * with what the source cluster looked like — pods per node, pending pods, when each rollout finished — as
 * expectations, so that `sim replay` reports each place where the simulation diverges as a failed expectation.
 * What controllers and kubelets did is kept in the trace's `recorded` section, for the reader. This file is the
 * pure part: classifying changes and building the scenario from them.
 */
type Obj = Record<string, unknown>;

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change a watch saw. */
export interface SeenChange {
  /** Cluster time it was seen (ms since epoch). */
  at: number;
  type: ChangeType;
  object: KubeObject;
  /** The version before, for MODIFIED (from the recorder's cache). */
  previous?: KubeObject;
}

/** Field managers of the control plane's own components; any other manager is a user (kubectl, helm, a CI job). */
const SYSTEM_MANAGERS = [
  /^kube-controller-manager$/,
  /^kube-scheduler$/,
  /^kubelet$/,
  /^kube-apiserver/,
  /^kube-sim/,
  /^system:/,
  /-controller$/,
];

export function isSystemManager(manager: string): boolean {
  return SYSTEM_MANAGERS.some((re) => re.test(manager));
}

interface ManagedEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  time?: string;
}

function managedFields(obj: KubeObject | undefined): ManagedEntry[] {
  const list = obj?.metadata.managedFields;
  return Array.isArray(list) ? (list as ManagedEntry[]) : [];
}

/**
 * Who made a change: the field managers whose entry the change added or moved (managedFields), or, for a delete,
 * whether the object had a controller (its owner deleted it) or not (a user did). A user change is one whose
 * writer is a manager of no control-plane component and not a status write. Controllers of kube-sim write no
 * managedFields; kube-controller-manager, kube-scheduler and the kubelet write their own names.
 */
export function changedBy(change: SeenChange): { user: boolean; manager: string } {
  const { object, previous, type } = change;
  if (type === 'DELETED') {
    const controlled = (object.metadata.ownerReferences ?? []).some((r) => r.controller === true);
    return controlled
      ? { user: false, manager: 'owner (garbage collector or controller)' }
      : { user: true, manager: 'user' };
  }
  const before = managedFields(previous);
  const moved = managedFields(object).filter(
    (entry) =>
      !before.some(
        (b) =>
          b.manager === entry.manager &&
          b.operation === entry.operation &&
          b.subresource === entry.subresource &&
          b.time === entry.time,
      ),
  );
  const writers = moved.filter((e) => e.subresource !== 'status');
  const user = writers.find((e) => e.manager !== undefined && !isSystemManager(e.manager));
  if (user) return { user: true, manager: user.manager! };
  return { user: false, manager: moved[0]?.manager ?? 'a controller or kubelet (no field manager)' };
}

/** A JSON merge patch (RFC 7386) that turns `from` into `to`: removed fields are null, lists replaced whole. */
export function mergePatch(from: unknown, to: unknown): unknown {
  if (!isPlainObject(from) || !isPlainObject(to)) return to;
  const patch: Obj = {};
  for (const key of Object.keys(from)) if (!(key in to)) patch[key] = null;
  for (const [key, value] of Object.entries(to)) {
    if (deepEqual(from[key], value)) continue;
    patch[key] = mergePatch(from[key], value);
  }
  return patch;
}

/** Annotations controllers keep on the objects users write: not part of a user's change. */
const CONTROLLER_ANNOTATIONS = /^(deployment\.kubernetes\.io\/|kubectl\.kubernetes\.io\/restartedAt$)/;

function userMetadata(obj: KubeObject): Obj {
  const annotations = Object.fromEntries(
    Object.entries(obj.metadata.annotations ?? {}).filter(
      ([k]) => !CONTROLLER_ANNOTATIONS.test(k) || k.endsWith('restartedAt'),
    ),
  );
  const out: Obj = {};
  if (obj.metadata.labels && Object.keys(obj.metadata.labels).length > 0) out.labels = obj.metadata.labels;
  if (Object.keys(annotations).length > 0) out.annotations = annotations;
  return out;
}

/** What a user wrote of an object: everything but status and what the server keeps in metadata. */
function userPart(obj: KubeObject): Obj {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return { metadata: userMetadata(obj), ...rest };
}

/** The manifest an apply step re-creates a user's object from. */
function manifestOf(obj: KubeObject): KubeObject {
  const { metadata: _m, status: _s, apiVersion, kind, ...rest } = obj;
  const metadata: KubeObject['metadata'] = { name: obj.metadata.name };
  if (obj.metadata.namespace !== undefined) metadata.namespace = obj.metadata.namespace;
  Object.assign(metadata, userMetadata(obj));
  return { apiVersion, kind, metadata, ...rest } as KubeObject;
}

function where(obj: KubeObject): string {
  return `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`;
}

/** "1m30s", "250ms": a scenario duration of exactly `ms`. */
export function durationText(ms: number): string {
  if (ms <= 0) return '0s';
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.join('');
}

/** The steps that re-make one user change, or none (a change of nothing a user writes). */
function stepsFor(change: SeenChange, label: string): Step[] {
  const obj = change.object;
  const ref = {
    kind: obj.kind!,
    apiVersion: obj.apiVersion,
    name: obj.metadata.name!,
    ...(obj.metadata.namespace !== undefined ? { namespace: obj.metadata.namespace } : {}),
  };
  if (change.type === 'DELETED') return [{ name: label, delete: ref }];
  if (change.type === 'ADDED' || !change.previous) return [{ name: label, apply: { manifest: manifestOf(obj) } }];
  const patch = mergePatch(userPart(change.previous), userPart(obj)) as Obj;
  if (Object.keys(patch).length === 0) return [];
  const spec = patch.spec;
  const onlyReplicas =
    Object.keys(patch).length === 1 &&
    isPlainObject(spec) &&
    Object.keys(spec).length === 1 &&
    typeof spec.replicas === 'number';
  if (onlyReplicas) return [{ name: label, scale: { ...ref, replicas: spec.replicas as number } }];
  return [{ name: label, patch: { ...ref, type: 'merge', patch } }];
}

interface Rollout {
  change: string;
  deployment: KubeObject;
  generation: number;
  start: number;
  finished?: number;
}

/** A Deployment whose controller has rolled out `generation` to every replica, with no old pod left. */
function rolledOut(d: KubeObject, generation: number): boolean {
  const spec = isPlainObject(d.spec) ? d.spec : {};
  const status = isPlainObject(d.status) ? d.status : {};
  const want = typeof spec.replicas === 'number' ? spec.replicas : 1;
  return (
    Number(status.observedGeneration ?? 0) >= generation &&
    (status.updatedReplicas ?? 0) === want &&
    (status.availableReplicas ?? 0) === want &&
    (status.replicas ?? 0) === want
  );
}

export interface TraceInput {
  source: string;
  /** The snapshot file, as the trace names it (relative to the trace). */
  snapshotFile: string;
  /** When the recording (and its snapshot) began, and ended (ms). */
  start: number;
  end: number;
  changes: readonly SeenChange[];
  /** The source's pods when the recording ended. */
  finalPods: readonly KubeObject[];
  /** At most this many controller changes are listed in `recorded` (the rest are counted). */
  maxListed?: number;
}

export interface Trace extends Scenario {
  recorded: {
    source: string;
    from: string;
    to: string;
    userChanges: number;
    otherChanges: number;
    /** What controllers and kubelets did: "+12.5s MODIFIED Pod shop/web-1 by kubelet". */
    others: string[];
    othersNotListed?: number;
  };
}

/** Builds the trace scenario from what a recording saw. */
export function buildTrace(input: TraceInput): Trace {
  const steps: Step[] = [];
  const others: string[] = [];
  let otherCount = 0;
  let userCount = 0;
  const maxListed = input.maxListed ?? 10_000;
  const rollouts: Rollout[] = [];
  /** Where the scenario's clock is: steps advance it to each change's time. */
  let clock = input.start;
  const markers: Array<{ at: number; name: string }> = [];
  const advanceTo = (at: number): void => {
    // Markers of rollouts that finished before this change come first, as steps of their own.
    for (const marker of markers.filter((m) => m.at <= at).sort((a, b) => a.at - b.at)) {
      if (marker.at > clock) steps.push({ advance: durationText(marker.at - clock) });
      clock = Math.max(clock, marker.at);
      steps.push({ name: marker.name, advance: '0s' });
      markers.splice(markers.indexOf(marker), 1);
    }
    if (at > clock) {
      steps.push({ advance: durationText(at - clock) });
      clock = at;
    }
  };
  for (const change of input.changes) {
    const offset = `+${durationText(change.at - input.start)}`;
    const by = changedBy(change);
    const obj = change.object;
    if (!by.user) {
      otherCount++;
      if (others.length < maxListed) others.push(`${offset} ${change.type} ${where(obj)} by ${by.manager}`);
      if (obj.kind === 'Deployment') {
        for (const r of rollouts)
          if (
            r.finished === undefined &&
            r.deployment.metadata.name === obj.metadata.name &&
            r.deployment.metadata.namespace === obj.metadata.namespace &&
            rolledOut(obj, r.generation)
          ) {
            r.finished = change.at;
            markers.push({
              at: change.at,
              name: `source: ${r.change} rolled out (${durationText(change.at - r.start)})`,
            });
          }
      }
      continue;
    }
    const label = `${offset} ${by.manager}: ${change.type === 'DELETED' ? 'delete' : change.type === 'ADDED' ? 'create' : 'change'} ${where(obj)}`;
    const made = stepsFor(change, `${label} #${userCount + 1}`);
    if (made.length === 0) continue;
    userCount++;
    advanceTo(change.at);
    steps.push(...made);
    const generation = Number(obj.metadata.generation ?? 0);
    const previousGeneration = Number(change.previous?.metadata.generation ?? 0);
    if (obj.kind === 'Deployment' && change.type !== 'DELETED' && generation !== previousGeneration)
      rollouts.push({ change: made[0]!.name!, deployment: obj, generation, start: change.at });
  }
  advanceTo(input.end);
  for (const marker of markers) steps.push({ name: marker.name, advance: '0s' });
  steps.push(...endState(input, rollouts, userObjects(input.changes)));
  return {
    name: `trace of ${input.source} from ${new Date(input.start).toISOString()}`,
    description: `${userCount} user change${userCount === 1 ? '' : 's'} re-applied at their times; ${otherCount} change${otherCount === 1 ? '' : 's'} by controllers and kubelets left to the simulation; the last step compares with how the source ended`,
    snapshot: input.snapshotFile,
    history: { exclude: ['leases', 'events'] },
    steps,
    recorded: {
      source: input.source,
      from: new Date(input.start).toISOString(),
      to: new Date(input.end).toISOString(),
      userChanges: userCount,
      otherChanges: otherCount,
      others,
      ...(otherCount > others.length ? { othersNotListed: otherCount - others.length } : {}),
    },
  };
}

/** The objects users changed, each as the recording last saw it (undefined: deleted). */
function userObjects(changes: readonly SeenChange[]): Map<string, { ref: KubeObject; last: KubeObject | undefined }> {
  const out = new Map<string, { ref: KubeObject; last: KubeObject | undefined }>();
  const id = (o: KubeObject): string => `${o.apiVersion}/${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  for (const change of changes) {
    const k = id(change.object);
    const last = change.type === 'DELETED' ? undefined : change.object;
    if (out.has(k)) out.get(k)!.last = last;
    else if (changedBy(change).user) out.set(k, { ref: change.object, last });
  }
  return out;
}

/**
 * The source's end state as expectations: pods per node, pending pods, each rollout finished when it did, and each
 * object users changed there (or gone) with the generation it ended at (as many spec changes).
 */
function endState(
  input: TraceInput,
  rollouts: readonly Rollout[],
  touched: ReadonlyMap<string, { ref: KubeObject; last: KubeObject | undefined }>,
): Step[] {
  const live = input.finalPods.filter((p) => !p.metadata.deletionTimestamp);
  const perNode = new Map<string, number>();
  let pending = 0;
  for (const pod of live) {
    const node = isPlainObject(pod.spec) && typeof pod.spec.nodeName === 'string' ? pod.spec.nodeName : '';
    if (node) perNode.set(node, (perNode.get(node) ?? 0) + 1);
    const phase = isPlainObject(pod.status) ? pod.status.phase : undefined;
    if (phase === 'Pending' || phase === undefined) pending++;
  }
  const expect: Assertion[] = [
    {
      description: `source: ${pending} pod${pending === 1 ? '' : 's'} pending`,
      count: {
        kind: 'Pod',
        allNamespaces: true,
        where: { '{.status.phase}': 'Pending', '{.metadata.deletionTimestamp}': null },
      },
      equals: pending,
    },
    {
      description: `source: ${live.length} pods`,
      count: { kind: 'Pod', allNamespaces: true, where: { '{.metadata.deletionTimestamp}': null } },
      equals: live.length,
    },
  ];
  for (const [node, n] of [...perNode].sort(([a], [b]) => (a < b ? -1 : 1)))
    expect.push({
      description: `source: ${n} pod${n === 1 ? '' : 's'} on ${node}`,
      count: {
        kind: 'Pod',
        allNamespaces: true,
        where: { '{.spec.nodeName}': node, '{.metadata.deletionTimestamp}': null },
      },
      equals: n,
    });
  for (const { ref, last } of touched.values()) {
    const object = {
      kind: ref.kind!,
      apiVersion: ref.apiVersion,
      name: ref.metadata.name!,
      ...(ref.metadata.namespace !== undefined ? { namespace: ref.metadata.namespace } : {}),
    };
    const generation = last?.metadata.generation;
    expect.push(
      last === undefined
        ? { description: `source: ${where(ref)} was deleted`, object, exists: false }
        : generation === undefined
          ? { description: `source: ${where(ref)} exists`, object }
          : {
              description: `source: ${where(ref)} ended at generation ${generation}`,
              object,
              jsonpath: '{.metadata.generation}',
              equals: generation,
            },
    );
  }
  for (const r of rollouts) {
    const name = r.deployment.metadata.name!;
    const namespace = r.deployment.metadata.namespace;
    const replicas =
      isPlainObject(r.deployment.spec) && typeof r.deployment.spec.replicas === 'number'
        ? r.deployment.spec.replicas
        : 1;
    const done = {
      '{.status.updatedReplicas}': replicas,
      '{.status.availableReplicas}': replicas,
      '{.status.replicas}': replicas,
    };
    expect.push(
      r.finished === undefined
        ? {
            description: `source: ${r.change} had not rolled out when the recording ended`,
            object: { kind: 'Deployment', name, ...(namespace ? { namespace } : {}) },
            jsonpath: '{.status.updatedReplicas}',
            max: replicas - 1,
          }
        : {
            description: `source: ${r.change} rolled out in ${durationText(r.finished - r.start)}`,
            events: { kind: 'Deployment', name, ...(namespace ? { namespace } : {}), where: done },
            during: { from: r.change, to: `source: ${r.change} rolled out (${durationText(r.finished - r.start)})` },
            min: 1,
          },
    );
  }
  return [{ name: 'as the source ended', expect }];
}
