import type { Clock } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import type { StatusCause } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import type { NameRule } from '../api/validation.js';
import type { Status } from '../api/errors.js';
import type { GenericStore } from './generic-store.js';
import type { Requester } from '../auth/requester.js';
import type { UserInfo } from '../auth/user.js';
import type { MaybePromise } from '../api/maybe-async.js';
import type { LabelSelector } from '../api/selectors.js';
import type { MemoryStore } from '../storage/memory-store.js';

/** What a strategy may use besides the object: cluster time, the seeded RNG, and allocators. */
export interface StrategyContext {
  clock: Clock;
  random: SeededRandom;
  allocateClusterIP(): string;
  /** Service node ports (kube-apiserver's --service-node-port-range): which are held, and a free one. */
  nodePorts: {
    readonly range: readonly [number, number];
    isAllocated(port: number): boolean;
    /** A free port, not one of `taken` (those the same request chose already). */
    allocate(taken: ReadonlySet<number>): number;
  };
  /**
   * The stored objects of a store table (`group/resource`, e.g. `scheduling.k8s.io/priorityclasses`): what
   * admission plugins read from their informers' listers (PriorityClasses for pods, IngressClasses for ingresses).
   */
  objects(table: string): readonly KubeObject[];
}

/**
 * How one kind differs from the generic store (the apiserver's RESTCreateStrategy/RESTUpdateStrategy):
 * defaults, what create and update reset, validation, and when generation moves. Every method works on a
 * fresh copy the store owns, so it may change it in place; validation must not change anything.
 */
export interface Strategy {
  /** API-server defaulting (SetDefaults_*), run on create and update bodies. */
  defaults?(obj: KubeObject, ctx: StrategyContext): void;
  /** Create-time preparation beyond the generic one (status reset, allocations, the requester's identity). */
  prepareForCreate?(obj: KubeObject, ctx: StrategyContext, requester?: Requester): void;
  /** Update-time preparation: `next` is the incoming object, `old` the stored one. */
  prepareForUpdate?(next: KubeObject, old: KubeObject, ctx: StrategyContext): void;
  validate?(obj: KubeObject): StatusCause[];
  /** The checks of a create only, beyond `validate` (a pod may not be created with ephemeral containers). */
  validateCreate?(obj: KubeObject): StatusCause[];
  validateUpdate?(next: KubeObject, old: KubeObject): StatusCause[];
  /** Whether an update must bump metadata.generation; by default, when spec changed. */
  bumpsGeneration?(next: KubeObject, old: KubeObject): boolean;
  /**
   * Graceful deletion (pods): the grace period a DELETE gets, given the one it asked for. Kinds without it are
   * removed at once (unless finalizers hold them).
   */
  gracePeriodSeconds?(obj: KubeObject, requested: number | undefined): number;
  /** Finalizers kept outside metadata (a namespace's spec.finalizers): they hold a deletion just the same. */
  specFinalizers?(obj: KubeObject): readonly string[];
  /**
   * Metadata a /status write may change too (the rest of the object stays as stored). Kubernetes' status
   * strategies reset spec, not annotations: the deployment controller records `deployment.kubernetes.io/revision`
   * with its status write, which must not bump generation; pods/status keeps labels and finalizers as well.
   */
  statusMetadata?: ReadonlyArray<'annotations' | 'labels' | 'finalizers'>;
  /**
   * What a /status write validates. 'metadata': the metadata it may change and nothing of the spec, which it keeps
   * as stored, as kube-apiserver's status strategies do for most kinds (ValidatePodStatusUpdate,
   * ValidateJobUpdateStatus: ObjectMeta update rules and status; kube-sim checks no status field). Unset: the
   * whole object again, as for custom resources, whose schema covers status too.
   */
  statusValidation?: 'metadata';
  /** With statusValidation 'metadata': the checks of a /status write beyond ObjectMeta's (a CSR's conditions). */
  validateStatusUpdate?(next: KubeObject, old: KubeObject): StatusCause[];
  /** Status sent on create is kept (nodes: a kubelet registers its Node with its status). */
  keepsStatusOnCreate?: boolean;
  /**
   * Subresources beyond status through which an update changes part of the object (a CSR's approval: its
   * conditions): the object to store, made of the incoming `next` and the stored `old`; it is then validated as an
   * update.
   */
  subresources?: Record<string, (next: KubeObject, old: KubeObject, ctx: StrategyContext) => KubeObject>;
  /**
   * The update checks of a write through one of `subresources`, in place of validateUpdate (pods/ephemeralcontainers
   * may add what a pod update may not); unset: validateUpdate's.
   */
  validateSubresourceUpdate?: Record<string, (next: KubeObject, old: KubeObject) => StatusCause[]>;
  /** Called on the copy that records the start of a deletion (a namespace turns Terminating). */
  prepareForDelete?(obj: KubeObject): void;
  /** Refuses a DELETE by throwing (system PriorityClasses); a DELETE of a collection does not ask, as in Go. */
  beforeDelete?(obj: KubeObject): void;
  /** Finalizers the server adds when a deletion starts (a CRD's customresourcecleanup). */
  finalizersOnDelete?(obj: KubeObject): readonly string[];
}

export type AdmissionOperation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

/**
 * One request as admission sees it (k8s.io/apiserver's admission.Attributes): what is asked of which resource, the
 * object about to be stored and the stored one. The store makes one per write and hands it down the chain.
 */
export interface AdmissionRequest {
  /** The kind the request addresses (its group, version, kind and resource). */
  readonly info: KindInfo;
  readonly operation: AdmissionOperation;
  /** '' for the resource itself; 'status', 'scale', 'exec' … for a subresource. */
  readonly subresource: string;
  readonly namespace: string | undefined;
  /** The name the request names: '' for a create that asks for a generated one. */
  readonly name: string;
  /**
   * The object to store (CREATE, UPDATE) or a CONNECT's options; undefined for a DELETE. Mutating plugins change it
   * in place (it is the write's own copy); mutating webhooks hand theirs in through `replace`.
   */
  obj: KubeObject | undefined;
  /** The stored object (UPDATE, DELETE). */
  readonly old: KubeObject | undefined;
  readonly dryRun: boolean;
  /** The request's CreateOptions, UpdateOptions or DeleteOptions, as webhooks receive them; null for a CONNECT. */
  readonly options: Record<string, unknown> | null;
  /** Who asks: the authenticated user, or undefined for the server's own components (and every client without --auth). */
  readonly user: UserInfo | undefined;
  readonly requester: Requester | undefined;
  /** Takes a mutating webhook's result as the object to store: decoded as a request body of the kind, defaulted again. */
  replace(obj: unknown): void;
  /** A warning for the client, sent as a `Warning: 299` header. */
  warn(text: string): void;
  /** An audit annotation (key → value) recorded with the request. */
  annotate(key: string, value: string): void;
  /** State mutating plugins keep across the rounds of the chain (admission.ReinvocationContext). */
  readonly reinvocation: {
    /** 0 on the first pass, 1 on the pass that reinvokes plugins after a webhook changed the object. */
    round: 0 | 1;
    /** A webhook changed the object: the chain runs once more. */
    shouldReinvoke: boolean;
    readonly values: Map<string, unknown>;
  };
}

/**
 * An admission plugin of kube-apiserver's chain. `admit` (mutating) runs after defaulting and before the strategy's
 * create/update preparation; `validate` runs after validation, just before the object is stored, and refuses by
 * throwing the Status to answer. What `validate` returns runs once the write is stored (quota admission charges the
 * quota then). Either may answer with a promise (webhooks): the write waits for it; the plugins after the last one
 * that waited and the write itself run in one synchronous step, so nothing comes between their checks and the write.
 */
export interface AdmissionPlugin {
  /** Its name in kube-apiserver's order (--enable-admission-plugins): where the chain puts it. */
  readonly name: string;
  /** The operations it looks at (admission.Handler's Handles); CREATE and UPDATE when unset. */
  readonly operations?: readonly AdmissionOperation[];
  admit?(request: AdmissionRequest): MaybePromise<void>;
  validate?(request: AdmissionRequest): MaybePromise<(() => void) | undefined | void>;
}

export interface ScaleSubresource {
  specReplicasPath: string;
  statusReplicasPath: string;
}

export interface TableColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  format?: string;
  description: string;
  priority?: number;
  cell(obj: KubeObject, now: number): string | number | boolean;
}

export interface KindInfo {
  group: string;
  version: string;
  kind: string;
  /** Plural lower-case resource name, as in the URL. */
  resource: string;
  singular: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  /** Status subresource: main-resource writes keep the stored status, /status writes keep everything else. */
  status?: boolean;
  /** metadata.generation is kept (1 on create, +1 when the strategy says the spec changed). */
  generation?: boolean;
  scale?: ScaleSubresource;
  nameRule?: NameRule;
  /** Field selectors this kind supports beyond metadata.name and metadata.namespace. */
  selectableFields?: Record<string, (obj: KubeObject) => string | undefined>;
  /** Of those, the ones worth an index (asked on hot paths, e.g. spec.nodeName). */
  indexedFields?: string[];
  /**
   * Its stored objects share the parts they have alike (src/storage/compact.ts): worth its CPU only for kinds a
   * cluster holds by the hundred thousand and whose objects repeat each other, Pods and
   * Events; every other kind's objects only get their strings flattened.
   */
  shareParts?: boolean;
  strategy?: Strategy;
  /** Columns after NAME for `kubectl get`; AGE is appended unless `noAge`. */
  columns?: TableColumn[];
  noAge?: boolean;
  /** The columns replace NAME too (events lead with LAST SEEN). */
  noName?: boolean;
  /** The order its printer sorts table rows in (FlowSchemas: by matching precedence, then name); unset: as listed. */
  tableOrder?(a: KubeObject, b: KubeObject): number;
  /** Subresources beyond status and scale (pods/log, pods/exec, pods/eviction, pods/binding …). */
  extraSubresources?: ExtraSubresource[];
  /** Verbs other than the standard set (e.g. events cannot be watched? they can; bindings are create-only). */
  verbs?: string[];
  /**
   * Create-only kinds that are never stored (SelfSubjectAccessReview, SelfSubjectReview …): the answer to a POST,
   * computed from the decoded request object.
   */
  ephemeral?(obj: KubeObject, ctx: StrategyContext, requester?: Requester): KubeObject;
  /**
   * Create-only kinds that act on another stored object and are never stored themselves (v1 Binding binds the pod
   * its name names): what a POST does, answered with the Status it returns.
   */
  act?(
    api: GenericStore,
    namespace: string | undefined,
    obj: KubeObject,
    options: { dryRun?: boolean },
  ): MaybePromise<Status>;
  /**
   * Read-only kinds computed on each read instead of stored (v1 ComponentStatus: the control plane's components as
   * probed now; metrics.k8s.io from the pods' state): the objects a read asks for, from the stored objects it names.
   * A GET (`read.name` set) answers the one object, or throws its own Status (404 of the object it is computed
   * from); none is the kind's 404.
   */
  computed?(ctx: StrategyContext, read: ComputedRead): KubeObject[];
  /** Every request on the kind is answered with this warning (`v1 ComponentStatus is deprecated in v1.19+`). */
  deprecated?: string;
  /**
   * Served from another kind's storage (events.k8s.io/v1 Event is stored as core/v1 Event): the stored kind's
   * group and resource, and the conversions each object goes through on the way in and out.
   */
  storage?: {
    group: string;
    resource: string;
    toStorage(obj: KubeObject): KubeObject;
    fromStorage(obj: KubeObject): KubeObject;
  };
  /**
   * Conversion that calls out (a CRD's conversion webhook), for every version of its kind: stored objects come back
   * in this kind's version through it (one call for all that need it), and objects written through this kind go to
   * the storage version through it. Unset: `storage`'s synchronous conversions, or none.
   */
  conversion?: {
    /** `list`: the objects of one list, which errors name as the list kind. */
    fromStorage(objs: readonly KubeObject[], list?: boolean): MaybePromise<KubeObject[]>;
    toStorage(obj: KubeObject): MaybePromise<KubeObject>;
  };
  /** Applied to every object read (get, list, watch, and the current object of an update): custom resources' defaults. */
  onRead?(obj: KubeObject): KubeObject;
  /**
   * Kinds with a schema of their own instead of a built-in one (custom resources): the OpenAPI v3 schema published
   * for the kind, the pruning of undeclared fields (returning their paths) that field validation reports, and the
   * type server-side apply walks (api/schema's table); `strategicMergePatch: false` refuses strategic merge patches.
   */
  schema?: {
    openapi: Record<string, unknown>;
    pruneUnknownFields(obj: KubeObject): string[];
    typeName?: string;
    strategicMergePatch?: boolean;
  };
}

/** What a read of a computed kind asks for, and the store it is computed from. */
export interface ComputedRead {
  namespace: string | undefined;
  /** A GET's name; unset for a LIST. */
  name?: string;
  /** A LIST's label selector (the generic store filters by it again, and by the field selector). */
  label: LabelSelector;
  store: Pick<MemoryStore, 'get' | 'list'>;
}

/**
 * A subresource served beside the object. `create` handles POST for subresources that are verbs on the object
 * (pods/binding, pods/eviction): it gets the generic store and answers the Status to send with a 201.
 */
export interface ExtraSubresource {
  name: string;
  kind: string;
  group?: string;
  version?: string;
  verbs: string[];
  create?(
    api: GenericStore,
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: { dryRun?: boolean },
  ): MaybePromise<Status | KubeObject>;
}

export function groupVersion(info: Pick<KindInfo, 'group' | 'version'>): string {
  return info.group ? `${info.group}/${info.version}` : info.version;
}

/** The store table of a kind: its own, or the one it shares (KindInfo.storage). */
export function resourceKey(info: Pick<KindInfo, 'group' | 'resource' | 'storage'>): string {
  let key = resourceKeys.get(info);
  if (key === undefined) {
    key = info.storage ? `${info.storage.group}/${info.storage.resource}` : `${info.group}/${info.resource}`;
    resourceKeys.set(info, key);
  }
  return key;
}

/** Every write asks for its kind's table key: built and hashed once per kind, not per call. */
const resourceKeys = new WeakMap<object, string>();
