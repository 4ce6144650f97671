import { raceTolerant } from '../api/errors.js';
import { allOf, settle, type MaybePromise } from '../api/maybe-async.js';
import { deepEqual, type KubeObject } from '../api/types.js';
import type { GenericStore } from '../registry/generic-store.js';
import { resourceKey, type KindInfo } from '../registry/types.js';

/**
 * The `default/kubernetes` Endpoints and EndpointSlice, kept by the API server as kube-apiserver's endpoint reconciler
 * keeps them: the API server's address and secure port (the Service's targetPort), the Endpoints labelled so the
 * mirroring controller leaves it alone. A change or deletion by anyone else is put back.
 */
export const API_SERVER_ADDRESS = '172.18.0.1';
export const API_SERVER_PORT = 6443;
const NAMESPACE = 'default';
const NAME = 'kubernetes';

export class KubernetesEndpoints {
  private pending = false;

  constructor(
    private readonly api: GenericStore,
    private readonly endpoints: KindInfo,
    private readonly slices: KindInfo,
  ) {
    const keys = new Set([resourceKey(endpoints), resourceKey(slices)]);
    api.store.onChange((key, event) => {
      if (!keys.has(key) || event.object.metadata.name !== NAME || event.object.metadata.namespace !== NAMESPACE)
        return;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      settle(this.reconcile(), () => undefined);
    });
  }

  /** Writes what is not as it should be (on start, and after anyone else's change). */
  reconcile(): MaybePromise<void> {
    const endpoints = this.ensure(this.endpoints, {
      metadata: { labels: { 'endpointslice.kubernetes.io/skip-mirror': 'true' } },
      subsets: [
        {
          addresses: [{ ip: API_SERVER_ADDRESS }],
          ports: [{ name: 'https', port: API_SERVER_PORT, protocol: 'TCP' }],
        },
      ],
    });
    const slices = this.ensure(this.slices, {
      metadata: { labels: { 'kubernetes.io/service-name': NAME } },
      addressType: 'IPv4',
      endpoints: [{ addresses: [API_SERVER_ADDRESS], conditions: { ready: true } }],
      ports: [{ name: 'https', port: API_SERVER_PORT, protocol: 'TCP' }],
    });
    return allOf([endpoints, slices]);
  }

  private ensure(
    info: KindInfo,
    wanted: { metadata: { labels: Record<string, string> } } & Record<string, unknown>,
  ): unknown {
    // The namespace is made before this runs; a cluster whose `default` namespace is gone has no such Service either.
    if (!this.api.store.get('/namespaces', undefined, NAMESPACE)) return undefined;
    const current = this.api.store.get(resourceKey(info), NAMESPACE, NAME);
    // Being deleted (held by a finalizer): made again once it is gone.
    if (current?.metadata.deletionTimestamp) return undefined;
    const { metadata, ...body } = wanted;
    if (current) {
      const same =
        deepEqual(current.metadata.labels ?? {}, metadata.labels) &&
        Object.entries(body).every(([k, v]) => deepEqual((current as Record<string, unknown>)[k], v));
      if (same) return undefined;
    }
    const object: KubeObject = {
      ...(current ?? {}),
      ...body,
      metadata: { ...(current?.metadata ?? {}), name: NAME, namespace: NAMESPACE, labels: metadata.labels },
    } as KubeObject;
    // A write that raced ours: its change brings us back here.
    return raceTolerant(() =>
      current
        ? this.api.update(info, NAMESPACE, NAME, object, { internal: true })
        : this.api.create(info, NAMESPACE, object, { internal: true }),
    );
  }
}
