import type { PatchType } from '../api/patch.js';
import type { KubeObject, DeleteOptions, KubeList } from '../api/types.js';

/** A resource as the API addresses it. */
export interface Gvr {
  group: string;
  version: string;
  resource: string;
}

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
}

export interface WatchOptions {
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
}

export type WatchEventHandler = (type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK', object: KubeObject) => void;

export interface WatchHandle {
  stop(): void;
}

/**
 * The one client interface controllers use. The in-process implementation calls the generic store; an HTTP
 * one talks to any API server. Errors are ApiErrors carrying the Status the server would send.
 */
export interface KubeClient {
  get(gvr: Gvr, namespace: string | undefined, name: string): Promise<KubeObject>;
  list(gvr: Gvr, namespace: string | undefined, options?: ListOptions): Promise<KubeList>;
  create(gvr: Gvr, namespace: string | undefined, obj: KubeObject): Promise<KubeObject>;
  update(gvr: Gvr, obj: KubeObject): Promise<KubeObject>;
  updateStatus(gvr: Gvr, obj: KubeObject): Promise<KubeObject>;
  /** PUT of a namespace's /finalize subresource. */
  finalizeNamespace(obj: KubeObject): Promise<KubeObject>;
  /** PUT of a CertificateSigningRequest's /approval subresource (client-go's UpdateApproval). */
  updateApproval(obj: KubeObject): Promise<KubeObject>;
  patch(
    gvr: Gvr,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    patch: unknown,
    subresource?: 'status',
  ): Promise<KubeObject>;
  delete(gvr: Gvr, namespace: string | undefined, name: string, options?: DeleteOptions): Promise<void>;
  /**
   * POST to a subresource that acts on the object (pods/NAME/binding, pods/NAME/eviction); resolves to the
   * Status the server answers. Optional so that clients written before it still compile; the scheduler,
   * kubelets and node lifecycle controller need it.
   */
  createSubresource?(
    gvr: Gvr,
    namespace: string | undefined,
    name: string,
    subresource: string,
    body: unknown,
  ): Promise<unknown>;
  /**
   * GET and PUT of a resource's autoscaling/v1 Scale subresource (client-go's scale client, which the HPA controller
   * uses on any kind that has one). Optional, as createSubresource is.
   */
  getScale?(gvr: Gvr, namespace: string | undefined, name: string): Promise<KubeObject>;
  updateScale?(gvr: Gvr, scale: KubeObject): Promise<KubeObject>;
  /** Starts a watch; `onClose` runs once when it ends, with the error (a 410 Expired Status) if it failed. */
  watch(
    gvr: Gvr,
    namespace: string | undefined,
    options: WatchOptions,
    onEvent: WatchEventHandler,
    onClose: (error?: Error) => void,
  ): WatchHandle;
}

export const Resources = {
  namespaces: { group: '', version: 'v1', resource: 'namespaces' },
  nodes: { group: '', version: 'v1', resource: 'nodes' },
  pods: { group: '', version: 'v1', resource: 'pods' },
  services: { group: '', version: 'v1', resource: 'services' },
  endpoints: { group: '', version: 'v1', resource: 'endpoints' },
  endpointslices: { group: 'discovery.k8s.io', version: 'v1', resource: 'endpointslices' },
  replicationcontrollers: { group: '', version: 'v1', resource: 'replicationcontrollers' },
  configmaps: { group: '', version: 'v1', resource: 'configmaps' },
  secrets: { group: '', version: 'v1', resource: 'secrets' },
  serviceaccounts: { group: '', version: 'v1', resource: 'serviceaccounts' },
  persistentvolumeclaims: { group: '', version: 'v1', resource: 'persistentvolumeclaims' },
  persistentvolumes: { group: '', version: 'v1', resource: 'persistentvolumes' },
  resourcequotas: { group: '', version: 'v1', resource: 'resourcequotas' },
  limitranges: { group: '', version: 'v1', resource: 'limitranges' },
  events: { group: '', version: 'v1', resource: 'events' },
  deployments: { group: 'apps', version: 'v1', resource: 'deployments' },
  replicasets: { group: 'apps', version: 'v1', resource: 'replicasets' },
  statefulsets: { group: 'apps', version: 'v1', resource: 'statefulsets' },
  daemonsets: { group: 'apps', version: 'v1', resource: 'daemonsets' },
  controllerrevisions: { group: 'apps', version: 'v1', resource: 'controllerrevisions' },
  jobs: { group: 'batch', version: 'v1', resource: 'jobs' },
  cronjobs: { group: 'batch', version: 'v1', resource: 'cronjobs' },
  leases: { group: 'coordination.k8s.io', version: 'v1', resource: 'leases' },
  storageclasses: { group: 'storage.k8s.io', version: 'v1', resource: 'storageclasses' },
  certificatesigningrequests: { group: 'certificates.k8s.io', version: 'v1', resource: 'certificatesigningrequests' },
  subjectaccessreviews: { group: 'authorization.k8s.io', version: 'v1', resource: 'subjectaccessreviews' },
} as const satisfies Record<string, Gvr>;
