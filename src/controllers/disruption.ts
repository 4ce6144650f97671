import { rfc3339 } from '../clock/clock.js';
import { ApiError, ignoreNotFound } from '../api/errors.js';
import { goLabelSelectorString, selectorFromObject, LabelSelector } from '../api/selectors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject, type OwnerReference } from '../api/types.js';
import { Resources, type Gvr } from '../client/client.js';
import { cacheKey, type CacheIndex } from '../client/informer.js';
import {
  conditionsAreUpToDate,
  orderedStatus,
  pdbSpec,
  pdbStatus,
  scaledIntOrPercent,
  setCondition,
  withDisruptionAllowedCondition,
  DISRUPTION_ALLOWED,
  SYNC_FAILED,
  type PdbStatus,
} from '../api/pdb.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import type { EventType } from '../runtime/events.js';
import { controllerOf } from './controller-ref.js';
import { isPodReady, isTerminal, isTerminating, podCondition, setPodCondition } from '../api/pod-util.js';

type Obj = Record<string, unknown>;

const PDBS: Gvr = { group: 'policy', version: 'v1', resource: 'poddisruptionbudgets' };

/**
 * How long a pod the eviction subresource listed in status.disruptedPods is counted as gone while it is not yet
 * being deleted (DeletionTimeout); also how long a DisruptionTarget condition may stay on a pod that is not
 * being deleted before it is turned False (stalePodDisruptionTimeout).
 */
export const DELETION_TIMEOUT_MS = 120_000;

/** A pod's controller and the replicas it wants (controllerAndScale). */
export interface ControllerScale {
  uid: string;
  replicas: number;
}

/** Finds the scale of a pod's controller; undefined when it is not found, throws when it cannot have one. */
export type ScaleFinder = (ref: OwnerReference, namespace: string) => ControllerScale | undefined;

export interface PdbEvent {
  object: KubeObject;
  type: EventType;
  reason: string;
  message: string;
}

export interface PdbPlan {
  /** The status to write, or undefined when the stored one is current. */
  status?: PdbStatus;
  /** When a pod in disruptedPods is due to be forgotten: look again then. */
  recheckAfterMs?: number;
  events: PdbEvent[];
}

/** What a sync needs of the pods a budget selects, kept up to date from pod events (no pod list is walked). */
export interface BudgetPods {
  readonly count: number;
  /** Ready and not being deleted. */
  readonly healthy: number;
  /** Without a controller. */
  readonly unmanaged: number;
  /** Each controller of the pods once, with the name of one of its pods. */
  controllers(): Iterable<{ ref: OwnerReference; pod: string }>;
  /** A selected pod, by name. */
  pod(name: string): KubeObject | undefined;
}

/**
 * getExpectedScale: the sum of the scales of the controllers of the pods. When a percentage or maxUnavailable is
 * used, the budget is relative to what the controllers want, not to the pods that happen to exist. Pods without a
 * controller are unmanaged (reported, not counted); a controller no finder knows is an error.
 */
function expectedScale(pdb: KubeObject, pods: BudgetPods, findScale: ScaleFinder): number {
  const scales = new Map<string, number>();
  for (const { ref, pod } of pods.controllers()) {
    const found = findScale(ref, pdb.metadata.namespace!);
    if (!found) throw new Error(`found no controllers for pod "${pod}"`);
    scales.set(found.uid, found.replicas);
  }
  let expected = 0;
  for (const n of scales.values()) expected += n;
  return expected;
}

/**
 * getExpectedPodCount. Worked examples, a Deployment of 4 replicas whose 4 pods exist:
 *   minAvailable 3      → expected 4 (the pods found), desired 3
 *   minAvailable 50%    → expected 4 (the Deployment's scale), desired ceil(2) = 2
 *   maxUnavailable 1    → expected 4, desired 4 - 1 = 3
 *   maxUnavailable 30%  → expected 4, desired 4 - ceil(1.2) = 2
 */
function expectedPodCount(
  pdb: KubeObject,
  pods: BudgetPods,
  findScale: ScaleFinder,
): { expected: number; desired: number; scaled: boolean } {
  const spec = pdbSpec(pdb);
  if (spec.maxUnavailable !== undefined && spec.maxUnavailable !== null) {
    const expected = expectedScale(pdb, pods, findScale);
    return {
      expected,
      desired: Math.max(0, expected - scaledIntOrPercent(spec.maxUnavailable, expected)),
      scaled: true,
    };
  }
  if (spec.minAvailable !== undefined && spec.minAvailable !== null) {
    if (typeof spec.minAvailable === 'number')
      return { expected: pods.count, desired: spec.minAvailable, scaled: false };
    const expected = expectedScale(pdb, pods, findScale);
    return { expected, desired: scaledIntOrPercent(spec.minAvailable, expected), scaled: true };
  }
  return { expected: 0, desired: 0, scaled: false };
}

/**
 * The disruption controller's sync of one budget (trySync + updatePdbStatus), pure: the pods its selector
 * matches, the scales of their controllers and the time give the status. Pods in status.disruptedPods are
 * counted as gone until they are being deleted or two minutes have passed; disruptions are allowed only while
 * expected pods exist and more are healthy (Ready, not being deleted) than desired. Throws when the expected
 * count cannot be computed (the caller writes the fail-safe status).
 */
export function planPdb(pdb: KubeObject, pods: BudgetPods, findScale: ScaleFinder, now: number): PdbPlan {
  const events: PdbEvent[] = [];
  if (pods.count === 0)
    events.push({ object: pdb, type: 'Normal', reason: 'NoPods', message: 'No matching pods found' });
  let counts: ReturnType<typeof expectedPodCount>;
  try {
    counts = expectedPodCount(pdb, pods, findScale);
  } catch (err) {
    throw Object.assign(err instanceof Error ? err : new Error(String(err)), {
      events: [
        ...events,
        {
          object: pdb,
          type: 'Warning',
          reason: 'CalculateExpectedPodCountFailed',
          message: `Failed to calculate the number of expected pods: ${err instanceof Error ? err.message : String(err)}`,
        },
      ],
    });
  }
  if (counts.scaled && pods.unmanaged > 0) {
    events.push({
      object: pdb,
      type: 'Warning',
      reason: 'UnmanagedPods',
      message: `Pods selected by this PodDisruptionBudget (selector: ${goLabelSelectorString(pdbSpec(pdb).selector)}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an integer value.`,
    });
  }

  const stored = pdbStatus(pdb);
  const disrupted: Record<string, string> = {};
  let recheckAt: number | undefined;
  let currentHealthy = pods.healthy;
  for (const [name, at] of Object.entries(stored.disruptedPods ?? {})) {
    const pod = pods.pod(name);
    // Entries of pods gone, no longer selected or already being deleted are dropped.
    if (!pod || isTerminating(pod)) continue;
    const expectedDeletion = Date.parse(at) + DELETION_TIMEOUT_MS;
    if (expectedDeletion < now) {
      // kube-controller-manager names the namespace twice in this message.
      events.push({
        object: pod,
        type: 'Warning',
        reason: 'NotDeleted',
        message: `Pod was expected by PDB ${pdb.metadata.namespace}/${pdb.metadata.namespace} to be deleted but it wasn't`,
      });
      continue;
    }
    disrupted[name] = at;
    if (recheckAt === undefined || expectedDeletion < recheckAt) recheckAt = expectedDeletion;
    // A pod an eviction was granted for counts as gone (at the deadline itself it counts again).
    if (expectedDeletion > now && isPodReady(pod)) currentHealthy--;
  }
  let disruptionsAllowed = currentHealthy - counts.desired;
  if (counts.expected <= 0 || disruptionsAllowed <= 0) disruptionsAllowed = 0;

  const generation = pdb.metadata.generation ?? 0;
  const plan: PdbPlan = { events };
  // Just past the deadline, when the entry is due (at the deadline itself it is kept, and a virtual clock would not move).
  if (recheckAt !== undefined) plan.recheckAfterMs = recheckAt - now + 1;
  const unchanged =
    stored.currentHealthy === currentHealthy &&
    stored.desiredHealthy === counts.desired &&
    stored.expectedPods === counts.expected &&
    stored.disruptionsAllowed === disruptionsAllowed &&
    deepEqual(stored.disruptedPods ?? {}, disrupted) &&
    (stored.observedGeneration ?? 0) === generation &&
    conditionsAreUpToDate(pdb, stored);
  if (!unchanged) {
    const next: PdbStatus = {
      observedGeneration: generation,
      disruptedPods: disrupted,
      disruptionsAllowed,
      currentHealthy,
      desiredHealthy: counts.desired,
      expectedPods: counts.expected,
    };
    if (stored.conditions) next.conditions = stored.conditions;
    plan.status = orderedStatus(withDisruptionAllowedCondition(next, rfc3339(now)));
  }
  return plan;
}

/** failSafe: when the status cannot be computed, no disruption is allowed and the condition says why. */
export function failSafeStatus(pdb: KubeObject, error: string, now: number): PdbStatus {
  const stored = pdbStatus(pdb);
  const conditions = setCondition(
    stored.conditions,
    {
      type: DISRUPTION_ALLOWED,
      status: 'False',
      observedGeneration: stored.observedGeneration,
      reason: SYNC_FAILED,
      message: error,
    },
    rfc3339(now),
  );
  return orderedStatus({ ...stored, disruptionsAllowed: 0, conditions });
}

/**
 * getScaleController: owners other than a ReplicaSet or StatefulSet are asked for their scale subresource (a custom
 * resource with one counts its spec replicas). Jobs, DaemonSets and the like have none: kube-controller-manager's
 * error. Undefined when the owner is gone or is another object of the same name.
 */
async function scaleOfOwner(
  ctx: ControllerContext,
  ref: OwnerReference,
  namespace: string,
): Promise<ControllerScale | Error | undefined> {
  const info = ctx.resources.byKind(ref.apiVersion, ref.kind);
  if (!info) return new Error(`no matches for kind "${ref.kind}" in version "${ref.apiVersion}"`);
  const noScale = new Error(
    `${info.gvr.group ? `${info.gvr.resource}.${info.gvr.group}` : info.gvr.resource} does not implement the scale subresource`,
  );
  if (!ctx.client.getScale) return noScale;
  try {
    const scale = await ctx.client.getScale(info.gvr, namespace, ref.name);
    if (scale.metadata.uid !== ref.uid) return undefined;
    const replicas = isPlainObject(scale.spec) && typeof scale.spec.replicas === 'number' ? scale.spec.replicas : 0;
    return { uid: ref.uid, replicas };
  } catch (err) {
    // A 404 naming the object: the owner is gone; without a name: the kind has no scale subresource.
    if (err instanceof ApiError && err.code === 404) return err.details?.name !== undefined ? undefined : noScale;
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** Whether the budget is relative to its controllers' scale (maxUnavailable, or a percentage). */
function needsScale(pdb: KubeObject): boolean {
  const spec = pdbSpec(pdb);
  return (spec.maxUnavailable !== undefined && spec.maxUnavailable !== null) || typeof spec.minAvailable === 'string';
}

const groupOf = (apiVersion: string): string =>
  apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';

/** What a budget's status takes from one pod. */
interface PodFacts {
  name: string;
  ready: boolean;
  terminating: boolean;
  ref: OwnerReference | undefined;
}

function factsOf(pod: KubeObject): PodFacts {
  return { name: pod.metadata.name!, ready: isPodReady(pod), terminating: isTerminating(pod), ref: controllerOf(pod) };
}

function sameFacts(a: PodFacts, b: PodFacts): boolean {
  return a.ready === b.ready && a.terminating === b.terminating && a.ref?.uid === b.ref?.uid;
}

/** One budget's pods and the counts a sync reads, changed pod by pod. */
class BudgetEntry {
  readonly pods = new Map<string, PodFacts>();
  healthy = 0;
  unmanaged = 0;
  /** Controller uid → its reference and how many of the pods it controls. */
  readonly controllers = new Map<string, { ref: OwnerReference; pods: Map<string, true> }>();

  constructor(
    readonly namespace: string,
    readonly selectorSpec: unknown,
    readonly selector: LabelSelector,
  ) {}

  add(key: string, facts: PodFacts): void {
    this.pods.set(key, facts);
    this.count(facts, 1);
  }

  remove(key: string): void {
    const facts = this.pods.get(key);
    if (!facts) return;
    this.pods.delete(key);
    this.count(facts, -1);
  }

  private count(facts: PodFacts, sign: 1 | -1): void {
    if (facts.ready && !facts.terminating) this.healthy += sign;
    if (!facts.ref) {
      this.unmanaged += sign;
      return;
    }
    let c = this.controllers.get(facts.ref.uid);
    if (!c) this.controllers.set(facts.ref.uid, (c = { ref: facts.ref, pods: new Map() }));
    if (sign > 0) c.pods.set(facts.name, true);
    else if (c.pods.delete(facts.name) && c.pods.size === 0) this.controllers.delete(facts.ref.uid);
  }
}

/**
 * Which budgets cover which pods, and each budget's counts, kept up to date so that neither a pod event nor a
 * budget sync walks a list of pods: an index of the pod informer (addCacheIndex), which matches a pod against the
 * budgets of its namespace when it appears or its labels change, while budget events match a namespace's pods once
 * when a budget appears or its selector changes; a sync reads counts (and the few pods in disruptedPods).
 * `budgetsChanged` is told the budgets whose pods or counts a pod change moved, `multipleBudgets` of a pod that
 * came to be covered by more than one (kube's MultiplePodDisruptionBudgets warning names the first).
 */
class BudgetIndex implements CacheIndex {
  private readonly budgets = new Map<string, BudgetEntry>();
  private readonly byNamespace = new Map<string, Set<string>>();
  private readonly ofPod = new Map<string, Set<string>>();

  constructor(
    private readonly budgetsChanged: (budgetKeys: Iterable<string>) => void,
    private readonly multipleBudgets: (pod: KubeObject, chosen: string) => void,
  ) {}

  changed(key: string, old: KubeObject | undefined, pod: KubeObject | undefined): void {
    const obj = (pod ?? old)!;
    // Namespaces without budgets (most pods) cost one lookup.
    if (!this.covers(obj.metadata.namespace!, key)) return;
    if (pod && old && sameLabels(old, pod)) {
      this.budgetsChanged(this.podUpdated(key, pod));
      return;
    }
    const { before, after } = this.podChanged(key, pod);
    this.budgetsChanged(before);
    this.budgetsChanged(after);
    if (pod && after.length > 1 && !deepEqual(before, after)) this.multipleBudgets(pod, after[0]!);
  }

  /** Records a budget, matching its namespace's pods when it is new or its selector changed. */
  setBudget(pdb: KubeObject, namespacePods: () => readonly KubeObject[]): void {
    const key = cacheKey(pdb);
    const spec = pdbSpec(pdb).selector;
    const existing = this.budgets.get(key);
    if (existing && deepEqual(existing.selectorSpec, spec)) return;
    if (existing) this.removeBudget(key);
    const namespace = pdb.metadata.namespace!;
    const entry = new BudgetEntry(namespace, spec, parseSelector(spec));
    this.budgets.set(key, entry);
    let keys = this.byNamespace.get(namespace);
    if (!keys) this.byNamespace.set(namespace, (keys = new Set()));
    keys.add(key);
    for (const pod of namespacePods())
      if (entry.selector.matches(pod.metadata.labels)) this.link(key, cacheKey(pod), factsOf(pod));
  }

  removeBudget(key: string): void {
    const entry = this.budgets.get(key);
    if (!entry) return;
    for (const pod of [...entry.pods.keys()]) this.unlink(key, pod);
    this.budgets.delete(key);
    const keys = this.byNamespace.get(entry.namespace);
    keys?.delete(key);
    if (keys?.size === 0) this.byNamespace.delete(entry.namespace);
  }

  /** Whether a pod could be covered: its namespace has budgets, or it was covered before. */
  private covers(namespace: string, podKey: string): boolean {
    return this.byNamespace.has(namespace) || this.ofPod.has(podKey);
  }

  /** Matches a pod again (undefined: it is gone); returns the budgets that covered it before and after. */
  private podChanged(key: string, pod: KubeObject | undefined): { before: string[]; after: string[] } {
    const before = [...(this.ofPod.get(key) ?? [])];
    for (const b of before) this.unlink(b, key);
    if (pod) {
      const facts = factsOf(pod);
      for (const b of this.byNamespace.get(pod.metadata.namespace!) ?? [])
        if (this.budgets.get(b)!.selector.matches(pod.metadata.labels)) this.link(b, key, facts);
    }
    return { before, after: [...(this.ofPod.get(key) ?? [])] };
  }

  /** A covered pod whose labels did not change: returns the budgets to sync when what they count changed. */
  private podUpdated(key: string, pod: KubeObject): ReadonlySet<string> {
    const budgets = this.ofPod.get(key);
    if (!budgets) return EMPTY;
    const facts = factsOf(pod);
    const first = this.budgets.get(budgets.values().next().value!)!;
    const old = first.pods.get(key);
    if (old && sameFacts(old, facts)) return EMPTY;
    for (const b of budgets) {
      const entry = this.budgets.get(b)!;
      entry.remove(key);
      entry.add(key, facts);
    }
    return budgets;
  }

  entry(budgetKey: string): BudgetEntry | undefined {
    return this.budgets.get(budgetKey);
  }

  private link(budget: string, pod: string, facts: PodFacts): void {
    this.budgets.get(budget)!.add(pod, facts);
    let set = this.ofPod.get(pod);
    if (!set) this.ofPod.set(pod, (set = new Set()));
    set.add(budget);
  }

  private unlink(budget: string, pod: string): void {
    this.budgets.get(budget)?.remove(pod);
    const set = this.ofPod.get(pod);
    set?.delete(budget);
    if (set?.size === 0) this.ofPod.delete(pod);
  }
}

const EMPTY: ReadonlySet<string> = new Set();

/** metav1.LabelSelectorAsSelector: nil matches nothing, {} everything, an invalid selector nothing. */
function parseSelector(spec: unknown): LabelSelector {
  try {
    return selectorFromObject(spec);
  } catch {
    return LabelSelector.nothing();
  }
}

function sameLabels(a: KubeObject, b: KubeObject): boolean {
  const x = a.metadata.labels ?? {};
  const y = b.metadata.labels ?? {};
  if (x === y) return true;
  const keys = Object.keys(x);
  if (keys.length !== Object.keys(y).length) return false;
  for (const k of keys) if (x[k] !== y[k]) return false;
  return true;
}

/** nonTerminatingPodHasStaleDisruptionCondition: how long until the pod's DisruptionTarget=True is stale, if it can be. */
function staleDisruptionIn(pod: KubeObject, now: number): number | undefined {
  if (isTerminating(pod) || isTerminal(pod)) return undefined;
  const cond = podCondition(pod, 'DisruptionTarget');
  // The kubelet's own condition may stay long before the pod terminates: never stale.
  if (cond?.status !== 'True' || cond.reason === 'TerminationByKubelet') return undefined;
  return Math.max(0, Date.parse(String(cond.lastTransitionTime ?? '')) + DELETION_TIMEOUT_MS - now || 0);
}

/**
 * The disruption controller (kube-controller-manager's disruption.go): keeps each PodDisruptionBudget's status
 * (expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed, disruptedPods, observedGeneration and the
 * DisruptionAllowed condition) in step with the pods it selects, which the eviction subresource reads to allow or
 * refuse an eviction; and turns a DisruptionTarget condition that no deletion followed within two minutes False.
 */
export function disruptionController(ctx: ControllerContext): Controller {
  const pods = ctx.informers.for(Resources.pods);
  const pdbs = ctx.informers.for(PDBS);
  const replicaSets = ctx.informers.for(Resources.replicasets);
  const deployments = ctx.informers.for(Resources.deployments);
  const statefulSets = ctx.informers.for(Resources.statefulsets);
  const recorder = ctx.recorder('controllermanager');
  const loop = new ReconcileLoop('disruption', ctx, reconcile);
  const staleLoop = new ReconcileLoop('disruption-stale-pods', ctx, clearStaleCondition);
  const index = new BudgetIndex(
    (budgetKeys) => {
      for (const k of budgetKeys) loop.queue.add(k);
    },
    (pod, chosen) =>
      recorder.event(
        pod,
        'Warning',
        'MultiplePodDisruptionBudgets',
        `Pod "${pod.metadata.namespace}"/"${pod.metadata.name}" matches multiple PodDisruptionBudgets.  Chose "${chosen.slice(chosen.indexOf('/') + 1)}" arbitrarily.`,
      ),
  );
  pods.addCacheIndex(index);

  pdbs.addEventHandler({
    add: (pdb) => {
      index.setBudget(pdb, () => pods.listNamespace(pdb.metadata.namespace!));
      loop.queue.add(cacheKey(pdb));
    },
    update: (_old, pdb) => {
      index.setBudget(pdb, () => pods.listNamespace(pdb.metadata.namespace!));
      loop.queue.add(cacheKey(pdb));
    },
    delete: (pdb) => index.removeBudget(cacheKey(pdb)),
  });

  /** A pod whose DisruptionTarget=True no deletion follows is looked at again when it goes stale. */
  const watchStale = (pod: KubeObject): void => {
    const wait = staleDisruptionIn(pod, ctx.clock.now());
    if (wait !== undefined) staleLoop.queue.addAfter(cacheKey(pod), wait);
  };
  pods.addEventHandler({ add: watchStale, update: (_old, pod) => watchStale(pod) });

  /** The finders of disruption.go, in its order: a Deployment through its ReplicaSet, a lone ReplicaSet, a StatefulSet, any scale. */
  const findScale: ScaleFinder = (ref, namespace) => {
    const group = groupOf(ref.apiVersion);
    if (ref.kind === 'ReplicaSet' && (group === 'apps' || group === 'extensions')) {
      const rs = replicaSets.get(namespace, ref.name);
      if (!rs || rs.metadata.uid !== ref.uid) return undefined;
      const owner = controllerOf(rs);
      const d =
        owner && owner.kind === 'Deployment' && ['apps', 'extensions'].includes(groupOf(owner.apiVersion))
          ? deployments.get(namespace, owner.name)
          : undefined;
      if (d && d.metadata.uid === owner!.uid) return { uid: d.metadata.uid, replicas: replicasOf(d) };
      // A ReplicaSet whose Deployment is not found still has a scale of its own (getScaleController).
      return { uid: rs.metadata.uid, replicas: replicasOf(rs) };
    }
    if (ref.kind === 'StatefulSet' && group === 'apps') {
      const ss = statefulSets.get(namespace, ref.name);
      return ss && ss.metadata.uid === ref.uid ? { uid: ss.metadata.uid, replicas: replicasOf(ss) } : undefined;
    }
    const other = otherScales.get(ref.uid);
    if (other instanceof Error) throw other;
    return other;
  };
  /** Scales of the other owners, read before each sync that needs them (planPdb itself is synchronous). */
  const otherScales = new Map<string, ControllerScale | Error | undefined>();
  const fromInformers = (ref: OwnerReference): boolean => {
    const group = groupOf(ref.apiVersion);
    return (
      (ref.kind === 'ReplicaSet' && (group === 'apps' || group === 'extensions')) ||
      (ref.kind === 'StatefulSet' && group === 'apps')
    );
  };

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const pdb = pdbs.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pdb) return;
    const entry = index.entry(key);
    const budgetPods: BudgetPods = {
      count: entry?.pods.size ?? 0,
      healthy: entry?.healthy ?? 0,
      unmanaged: entry?.unmanaged ?? 0,
      *controllers() {
        for (const c of entry?.controllers.values() ?? []) yield { ref: c.ref, pod: c.pods.keys().next().value! };
      },
      pod: (name) =>
        entry?.pods.has(`${pdb.metadata.namespace}/${name}`) ? pods.get(pdb.metadata.namespace, name) : undefined,
    };
    otherScales.clear();
    if (needsScale(pdb)) {
      for (const c of entry?.controllers.values() ?? [])
        if (!fromInformers(c.ref)) otherScales.set(c.ref.uid, await scaleOfOwner(ctx, c.ref, pdb.metadata.namespace!));
    }
    const now = ctx.clock.now();
    let plan: PdbPlan;
    try {
      plan = planPdb(pdb, budgetPods, findScale, now);
    } catch (err) {
      for (const e of (err as { events?: PdbEvent[] }).events ?? [])
        recorder.event(e.object, e.type, e.reason, e.message);
      const message = err instanceof Error ? err.message : String(err);
      ctx.log('warn', `disruption: failed to sync PDB ${key}: ${message}`);
      await ctx.client.updateStatus(PDBS, { ...pdb, status: failSafeStatus(pdb, message, now) as unknown as Obj });
      return;
    }
    for (const e of plan.events) recorder.event(e.object, e.type, e.reason, e.message);
    if (plan.status) await ctx.client.updateStatus(PDBS, { ...pdb, status: plan.status as unknown as Obj });
    return plan.recheckAfterMs !== undefined ? { requeueAfterMs: plan.recheckAfterMs } : undefined;
  }

  /** syncStalePodDisruption: a DisruptionTarget=True two minutes old on a pod nobody is deleting goes False. */
  async function clearStaleCondition(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const pod = pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod) return;
    const wait = staleDisruptionIn(pod, ctx.clock.now());
    if (wait === undefined) return;
    if (wait > 0) return { requeueAfterMs: wait };
    const status = deepCopy(isPlainObject(pod.status) ? pod.status : {}) as Obj;
    setPodCondition(status, { type: 'DisruptionTarget', status: 'False' }, rfc3339(ctx.clock.now()));
    await ignoreNotFound(ctx.client.updateStatus(Resources.pods, { ...pod, status }));
  }

  return {
    name: 'disruption',
    start: async () => {
      loop.start();
      staleLoop.start();
    },
    stop: () => {
      loop.stop();
      staleLoop.stop();
    },
  };
}

function replicasOf(obj: KubeObject): number {
  const r = isPlainObject(obj.spec) ? obj.spec.replicas : undefined;
  return typeof r === 'number' ? r : 1;
}
