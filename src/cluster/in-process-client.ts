import { Errors } from '../api/errors.js';
import type { PatchType } from '../api/patch.js';
import type { KubeObject, DeleteOptions, KubeList } from '../api/types.js';
import type { Cluster } from './cluster.js';
import { scaleOf, writeScale } from '../registry/scale.js';
import type { KindInfo } from '../registry/types.js';
import type { StoreEvent, WatchEventType } from '../storage/watch.js';
import {
  Resources,
  type Gvr,
  type KubeClient,
  type ListOptions,
  type WatchEventHandler,
  type WatchHandle,
  type WatchOptions,
} from '../client/client.js';

/** In-process writers hand their bodies over: they do not change an object once they have written it. */
const HAND_OVER = { handOver: true } as const;

/** Who the in-process controllers are to an authorizer: kube-controller-manager's user. */
const CONTROLLERS = { username: 'system:kube-controller-manager', groups: ['system:authenticated'] };

/**
 * The client for controllers running inside the simulator: the same generic store the HTTP server uses, so
 * validation, defaults, optimistic locking and watch semantics are identical. Watch events are delivered
 * asynchronously and in order, as they would arrive over a connection.
 */
export class InProcessClient implements KubeClient {
  private pendingDeliveries = 0;
  /** Kinds by the Gvr objects callers pass (constants such as Resources.pods): no key string built per call. */
  private kinds = new WeakMap<Gvr, KindInfo>();

  constructor(private readonly cluster: Cluster) {
    cluster.virtualClock?.addIdleCheck(() => this.pendingDeliveries === 0);
    cluster.registry.onChange(() => (this.kinds = new WeakMap()));
  }

  private kind(gvr: Gvr): KindInfo {
    let info = this.kinds.get(gvr);
    if (info) return info;
    info = this.cluster.registry.lookup(gvr.group, gvr.version, gvr.resource);
    if (!info) throw Errors.pathNotFound();
    this.kinds.set(gvr, info);
    return info;
  }

  async get(gvr: Gvr, namespace: string | undefined, name: string): Promise<KubeObject> {
    return this.cluster.api.read(this.kind(gvr), namespace, name);
  }

  async list(gvr: Gvr, namespace: string | undefined, options: ListOptions = {}): Promise<KubeList> {
    return this.cluster.api.readList(this.kind(gvr), namespace, options);
  }

  async create(gvr: Gvr, namespace: string | undefined, obj: KubeObject): Promise<KubeObject> {
    const info = this.kind(gvr);
    // A review (SubjectAccessReview…) is answered by the authorizer the API server has, as over HTTP.
    const authorizer = info.ephemeral ? this.cluster.authorizer : undefined;
    if (authorizer)
      return this.cluster.api.create(info, namespace, obj, { requester: { user: CONTROLLERS, authorizer } });
    return this.cluster.api.create(info, namespace, obj);
  }

  /** The body is handed over (WriteOptions.handOver): the caller does not change it once written. */
  async update(gvr: Gvr, obj: KubeObject): Promise<KubeObject> {
    return this.cluster.api.update(this.kind(gvr), obj.metadata.namespace, obj.metadata.name!, obj, HAND_OVER);
  }

  async updateStatus(gvr: Gvr, obj: KubeObject): Promise<KubeObject> {
    return this.updateThrough(gvr, obj, 'status');
  }

  async finalizeNamespace(obj: KubeObject): Promise<KubeObject> {
    return this.updateThrough(Resources.namespaces, obj, 'finalize');
  }

  async updateApproval(obj: KubeObject): Promise<KubeObject> {
    return this.updateThrough(Resources.certificatesigningrequests, obj, 'approval');
  }

  /** A PUT through one of the kind's subresources (status, a namespace's finalize, a CSR's approval), handed over. */
  private updateThrough(gvr: Gvr, obj: KubeObject, subresource: string): Promise<KubeObject> {
    return Promise.resolve(
      this.cluster.api.update(this.kind(gvr), obj.metadata.namespace, obj.metadata.name!, obj, {
        subresource,
        handOver: true,
      }),
    );
  }

  async patch(
    gvr: Gvr,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    patch: unknown,
    subresource?: 'status',
  ): Promise<KubeObject> {
    return this.cluster.api.patch(this.kind(gvr), namespace, name, type, patch, subresource ? { subresource } : {});
  }

  async delete(gvr: Gvr, namespace: string | undefined, name: string, options: DeleteOptions = {}): Promise<void> {
    await this.cluster.api.delete(this.kind(gvr), namespace, name, options);
  }

  async createSubresource(
    gvr: Gvr,
    namespace: string | undefined,
    name: string,
    subresource: string,
    body: unknown,
  ): Promise<unknown> {
    const info = this.kind(gvr);
    const handler = info.extraSubresources?.find((s) => s.name === subresource)?.create;
    if (!handler) throw Errors.pathNotFound();
    return handler(this.cluster.api, info, namespace, name, body, {});
  }

  async getScale(gvr: Gvr, namespace: string | undefined, name: string): Promise<KubeObject> {
    const info = this.scalable(gvr);
    return scaleOf(info, await this.cluster.api.read(info, namespace, name));
  }

  async updateScale(gvr: Gvr, scale: KubeObject): Promise<KubeObject> {
    return writeScale(
      this.cluster.api,
      this.scalable(gvr),
      scale.metadata.namespace,
      scale.metadata.name!,
      () => scale,
      true,
      {},
    );
  }

  private scalable(gvr: Gvr): KindInfo {
    const info = this.kind(gvr);
    if (!info.scale) throw Errors.pathNotFound();
    return info;
  }

  watch(
    gvr: Gvr,
    namespace: string | undefined,
    options: WatchOptions,
    onEvent: WatchEventHandler,
    onClose: (error?: Error) => void,
  ): WatchHandle {
    const queue: Array<[WatchEventType, KubeObject]> = [];
    let closed = false;
    let scheduled = false;
    const flush = (): void => {
      scheduled = false;
      const batch = queue.splice(0);
      this.pendingDeliveries -= batch.length;
      for (const [type, object] of batch) {
        if (closed) continue;
        if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' || type === 'BOOKMARK') onEvent(type, object);
      }
    };
    const sink = {
      send: (type: WatchEventType, event: StoreEvent): boolean => {
        if (closed) return false;
        queue.push([type, event.objectFor(type)]);
        this.pendingDeliveries++;
        if (!scheduled) {
          scheduled = true;
          queueMicrotask(flush);
        }
        return true;
      },
      close: (): void => {
        if (closed) return;
        closed = true;
        this.pendingDeliveries -= queue.length;
        queue.length = 0;
        queueMicrotask(() => onClose());
      },
    };
    try {
      const { watch } = this.cluster.api.watch(this.kind(gvr), namespace, options, sink);
      return { stop: () => watch.stop() };
    } catch (err) {
      closed = true;
      queueMicrotask(() => onClose(err as Error));
      return { stop: () => undefined };
    }
  }
}
