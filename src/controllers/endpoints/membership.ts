import { deepEqual, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import { cacheKey, type CacheIndex, type Informer, type InformerFactory } from '../../client/informer.js';
import { podEndpointsChanged, serviceSelector } from './pods.js';

/**
 * Which pods each Service selects, kept as the pod and Service caches change (informer cache indexes), so that a pod
 * event finds its Services and a Service's sync its pods without listing either. Services are indexed by the first
 * (sorted) `key=value` of their selector: a pod looks up each of its labels, then checks the candidates' whole
 * selectors. A new or changed selector reads the pods of its namespace once.
 */
export class ServiceMembership implements CacheIndex {
  /** Service keys by `namespace\0key=value` (an empty selector, which selects every pod, by `namespace\0`). */
  private readonly index = new Map<string, Set<string>>();
  private readonly selectors = new Map<string, { namespace: string; selector: Record<string, string>; slot: string }>();
  /** Each Service's pods, current versions, by cache key (in the order they joined). */
  private readonly members = new Map<string, Map<string, KubeObject>>();
  /** Each pod's Services. */
  private readonly podServices = new Map<string, readonly string[]>();

  constructor(
    private readonly pods: Informer,
    services: Informer,
  ) {
    services.addCacheIndex({ changed: (key, old, next) => this.serviceChanged(key, old, next) });
    pods.addCacheIndex(this);
  }

  /** The pods a Service (by cache key) selects, as the cache holds them. */
  podsOf(serviceKey: string): Iterable<KubeObject> {
    return this.members.get(serviceKey)?.values() ?? NONE;
  }

  /**
   * Calls `changed` with each Service a pod event concerns — those selecting the pod (selected: true), and on a change
   * of its labels those that selected it before (false); a change that alters neither its endpoint nor its labels
   * concerns none. A deleted pod concerns the Services that selected it (false).
   */
  onPodChanges(pods: Informer, changed: (serviceKey: string, pod: KubeObject, selected: boolean) => void): void {
    pods.addEventHandler({
      add: (pod) => {
        for (const key of this.servicesOf(pod)) changed(key, pod, true);
      },
      update: (old, pod) => {
        if (old.metadata.resourceVersion === pod.metadata.resourceVersion) return;
        const what = podEndpointsChanged(old, pod);
        if (!what.endpoints && !what.labels) return;
        const now = this.servicesOf(pod);
        for (const key of now) changed(key, pod, true);
        if (what.labels) for (const key of this.servicesOf(old)) if (!now.includes(key)) changed(key, pod, false);
      },
      delete: (pod) => {
        for (const key of this.servicesOf(pod)) changed(key, pod, false);
      },
    });
  }

  /** The cache keys of the Services whose selector matches the pod's labels. */
  servicesOf(pod: KubeObject): string[] {
    const namespace = pod.metadata.namespace ?? '';
    const labels = pod.metadata.labels ?? {};
    const out: string[] = [];
    const consider = (slot: string): void => {
      for (const key of this.index.get(slot) ?? EMPTY) {
        const s = this.selectors.get(key);
        if (s && matches(s.selector, labels)) out.push(key);
      }
    };
    consider(`${namespace}\0`);
    for (const k in labels) consider(`${namespace}\0${k}=${labels[k]}`);
    return out;
  }

  /** Pod cache changes: a pod joins the Services its new labels match and leaves those its old labels matched. */
  changed(key: string, old: KubeObject | undefined, next: KubeObject | undefined): void {
    const before = this.podServices.get(key) ?? NO_KEYS;
    if (old && next && deepEqual(old.metadata.labels ?? {}, next.metadata.labels ?? {})) {
      for (const svc of before) this.members.get(svc)?.set(key, next);
      return;
    }
    const after = next ? this.servicesOf(next) : NO_KEYS;
    for (const svc of before) if (!after.includes(svc)) this.members.get(svc)?.delete(key);
    for (const svc of after) {
      let map = this.members.get(svc);
      if (!map) this.members.set(svc, (map = new Map()));
      map.set(key, next!);
    }
    if (after.length > 0) this.podServices.set(key, after);
    else this.podServices.delete(key);
  }

  private serviceChanged(key: string, old: KubeObject | undefined, next: KubeObject | undefined): void {
    const before = old && serviceSelector(old);
    const after = next && serviceSelector(next);
    if (old && next && deepEqual(before, after)) return;
    const current = this.selectors.get(key);
    if (current) {
      this.index.get(current.slot)?.delete(key);
      if (this.index.get(current.slot)?.size === 0) this.index.delete(current.slot);
      this.selectors.delete(key);
    }
    for (const podKey of this.members.get(key)?.keys() ?? NO_KEYS) this.leave(podKey, key);
    this.members.delete(key);
    if (!next || !after) return;
    const namespace = next.metadata.namespace ?? '';
    const first = Object.keys(after).sort()[0];
    const slot = first === undefined ? `${namespace}\0` : `${namespace}\0${first}=${after[first]}`;
    this.selectors.set(key, { namespace, selector: after, slot });
    let set = this.index.get(slot);
    if (!set) this.index.set(slot, (set = new Set()));
    set.add(key);
    const members = new Map<string, KubeObject>();
    for (const pod of this.pods.listNamespace(namespace)) {
      if (!matches(after, pod.metadata.labels ?? {})) continue;
      const podKey = cacheKey(pod);
      members.set(podKey, pod);
      this.podServices.set(podKey, [...(this.podServices.get(podKey) ?? NO_KEYS), key]);
    }
    this.members.set(key, members);
  }

  private leave(podKey: string, serviceKey: string): void {
    const left = (this.podServices.get(podKey) ?? NO_KEYS).filter((k) => k !== serviceKey);
    if (left.length > 0) this.podServices.set(podKey, left);
    else this.podServices.delete(podKey);
  }
}

const NONE: readonly KubeObject[] = [];
const NO_KEYS: readonly string[] = [];
const EMPTY: ReadonlySet<string> = new Set();

/** labels.Set(selector).AsSelector().Matches(labels): every key=value of the selector. */
function matches(selector: Record<string, string>, labels: Readonly<Record<string, string>>): boolean {
  for (const k in selector) if (labels[k] !== selector[k]) return false;
  return true;
}

const shared = new WeakMap<InformerFactory, ServiceMembership>();

/** The membership of a controller manager's informers, one for every controller that asks (made on first use). */
export function serviceMembership(informers: InformerFactory): ServiceMembership {
  let membership = shared.get(informers);
  if (!membership) {
    membership = new ServiceMembership(informers.for(Resources.pods), informers.for(Resources.services));
    shared.set(informers, membership);
  }
  return membership;
}
