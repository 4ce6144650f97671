import { goJsonType } from '../api/go-json.js';
import { rfc3339 } from '../clock/clock.js';
import { ApiError, Errors, FieldErrors, orderedDetails, type StatusCause, type Status } from '../api/errors.js';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch, type PatchType } from '../api/patch.js';
import { LabelSelector, parseFieldSelector, parseLabelSelector } from '../api/selectors.js';
import {
  deepCopy,
  deepEqual,
  isPlainObject,
  type DeleteOptions,
  type KubeList,
  type KubeObject,
  type Preconditions,
} from '../api/types.js';
import { validateObjectMeta } from '../api/validation.js';
import { applyAfterClientSideApply } from '../api/last-applied.js';
import { managedFieldsAfterUpdate, type WriteContext } from '../api/managed-fields.js';
import {
  pruneUnknownFields,
  strictDecodingMessage,
  typeMismatch,
  validateFields,
  type FieldValidation,
} from '../api/schema/field-validation.js';
import { schemaNameForKind } from '../api/schema/schema.js';
import { eachInOrder, sync, then, type MaybePromise } from '../api/maybe-async.js';
import type { MemoryStore, StoreWrites } from '../storage/memory-store.js';
import { StoreEvent, type Watch, type WatchFilter, type WatchSink } from '../storage/watch.js';
import { fieldsOf, type Registry } from './registry.js';
import type { Requester } from '../auth/requester.js';
import { AdmissionChain, Attributes } from './admission/chain.js';
import {
  groupVersion,
  resourceKey,
  type AdmissionOperation,
  type AdmissionRequest,
  type ExtraSubresource,
  type KindInfo,
  type Strategy,
  type StrategyContext,
} from './types.js';

export interface ListQuery {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
}

export interface WriteOptions {
  dryRun?: boolean;
  /**
   * status: only status changes; finalize: only a namespace's spec.finalizers change; another name: what the kind's
   * strategy lets a write through that subresource change (Strategy.subresources: a CSR's approval).
   */
  subresource?: string;
  /** Who makes the change: recorded in metadata.managedFields (no bookkeeping when unset, e.g. in-process writers). */
  fieldManager?: string;
  /** What to do with fields the kind's schema does not declare; unset: keep them (in-process writers). */
  fieldValidation?: FieldValidation;
  /** Server-side apply: take over fields other managers own instead of failing with a conflict. */
  force?: boolean;
  /** Filled in: warnings for the client (Warn field validation), sent as `Warning: 299` headers. */
  warnings?: string[];
  /** Filled in: the audit annotations admission recorded (webhooks', policies'). */
  auditAnnotations?: Record<string, string>;
  /** Filled in by a server-side apply that created the object (answered 201). */
  created?: boolean;
  /** The subresource a managedFields entry records for a write through it (scale); status is `subresource`. */
  managedSubresource?: string;
  /**
   * How admission sees a write through a subresource that shows another object (scale: an autoscaling/v1 Scale): the
   * view of an object, and the object a (possibly patched) view makes of the object to store.
   */
  admissionView?: {
    subresource: string;
    of(obj: KubeObject): KubeObject;
    apply(view: KubeObject, obj: KubeObject): KubeObject;
  };
  /** The body was decoded for this request alone (HTTP): the store keeps it as the new object instead of a copy. */
  takeBody?: boolean;
  /**
   * An in-process writer hands its update's body over (the in-process client's writes): the parts it made are kept,
   * not copied, since it changes them no more; its root and metadata, which the store stamps, are copied. Taken
   * as it is only where nothing changes it in place after decoding (a /status write's status; an update of a kind
   * without defaults, preparation or conversion); elsewhere copied as any body is. Stored objects are frozen with
   * KUBE_SIM_FREEZE_OBJECTS=1, handed-over parts with them: a writer that changed one later would throw in tests.
   */
  handOver?: boolean;
  /** Who sent the request, with --auth (access reviews answer for them). */
  requester?: Requester;
  /**
   * A write the API server makes on its own behalf, past admission, as kube-apiserver's registry writes directly (a
   * binding's, an eviction's delete, the CRD finalizer's cleanup, the bootstrap objects): it never waits.
   */
  internal?: boolean;
}

export interface DeleteResult {
  /** The object, when it is only marked for deletion (202), or a Success Status once it is gone (200). */
  body: KubeObject | Status;
  gone: boolean;
}

/** A delete's options beyond metav1.DeleteOptions: who asks, and where its warnings go. */
export interface DeleteRequestOptions extends DeleteOptions {
  requester?: Requester;
  /** Filled in: warnings for the client, sent as `Warning: 299` headers. */
  warnings?: string[];
  auditAnnotations?: Record<string, string>;
  /** As WriteOptions.internal: past admission. */
  internal?: boolean;
}

export interface WatchQuery extends ListQuery {
  resourceVersion?: string;
  sendInitialEvents?: boolean;
}

const NAMESPACES = '/namespaces';
/** How often an update whose admission waited starts again when others keep writing the object meanwhile. */
const MAX_UPDATE_ATTEMPTS = 16;
const ORPHAN_FINALIZER = 'orphan';
const FOREGROUND_FINALIZER = 'foregroundDeletion';

/**
 * The generic REST store (k8s.io/apiserver's registry/generic/registry.Store): the verbs every kind shares,
 * with a kind's strategy deciding defaults, validation, status handling and generation. Both the HTTP server
 * and in-process clients come through here, so they see the same rules.
 */
export class GenericStore {
  /** kube-apiserver's admission chain (the cluster registers its plugins): every write of a client goes through it. */
  readonly admission = new AdmissionChain();

  constructor(
    readonly store: MemoryStore,
    readonly registry: Registry,
    readonly ctx: StrategyContext,
    /** Where writes go: the store itself, or etcd with the store as its watch cache (storage/etcd-store.ts). */
    readonly writes: StoreWrites = store,
  ) {}

  /**
   * An object as the kind serves it, for a server's own components, which never read through a conversion that
   * calls out: a custom resource whose CRD converts with a webhook is read with `read`.
   */
  get(info: KindInfo, namespace: string | undefined, name: string): KubeObject {
    return sync(this.read(info, namespace, name));
  }

  /** A list as `get` reads objects: synchronously, and never through a conversion webhook. */
  list(info: KindInfo, namespace: string | undefined, query: ListQuery): KubeList {
    return sync(this.readList(info, namespace, query));
  }

  /** GET of one object: at once, or once its CRD's conversion webhook has converted it. */
  read(info: KindInfo, namespace: string | undefined, name: string): MaybePromise<KubeObject> {
    if (info.computed) {
      const read = { namespace: scoped(info, namespace), name, label: LabelSelector.everything(), store: this.store };
      const found = info.computed(this.ctx, read).find((o) => o.metadata.name === name);
      if (!found) throw Errors.notFound(info, name);
      return found;
    }
    const obj = this.store.get(resourceKey(info), scoped(info, namespace), name);
    if (!obj) throw Errors.notFound(info, name);
    return fromStorage(info, obj);
  }

  /** LIST: at once, or once a conversion webhook has converted the objects not in the version asked for. */
  readList(info: KindInfo, namespace: string | undefined, query: ListQuery): MaybePromise<KubeList> {
    const label = parseLabelSelector(query.labelSelector);
    const field = parseFieldSelector(query.fieldSelector, this.registry.supportedFields(info));
    if (info.computed) {
      const fields = fieldsOf(info);
      // Go's List of a computed kind answers an empty ListMeta: no resourceVersion.
      return {
        apiVersion: groupVersion(info),
        kind: `${info.kind}List`,
        metadata: {} as KubeList['metadata'],
        items: info
          .computed(this.ctx, { namespace: scoped(info, namespace), label, store: this.store })
          .filter((o) => label.matches(o.metadata.labels) && field.matches(fields(o))),
      };
    }
    const token = query.continue ? decodeContinue(query.continue) : undefined;
    const result = this.store.list(resourceKey(info), {
      namespace: scoped(info, namespace),
      label,
      field,
      limit: query.limit,
      after: token?.after,
    });
    const revision = token?.revision ?? result.revision;
    return then(allFromStorage(info, result.items), (items) => {
      const list: KubeList = {
        apiVersion: groupVersion(info),
        kind: `${info.kind}List`,
        metadata: { resourceVersion: String(revision) },
        items,
      };
      if (result.continueAfter !== undefined) {
        list.metadata.continue = encodeContinue(revision, result.continueAfter);
        list.metadata.remainingItemCount = result.remaining;
      }
      return list;
    });
  }

  create(
    info: KindInfo,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions = {},
  ): MaybePromise<KubeObject> {
    const obj = this.decodeBody(info, namespace, body, options.takeBody);
    this.checkFields(info, obj, options);
    if (info.ephemeral) return info.ephemeral(obj, this.ctx, options.requester);
    if (info.act)
      return info.act(this, namespace, obj, {
        dryRun: options.dryRun,
      }) as MaybePromise<unknown> as MaybePromise<KubeObject>;
    return this.createDecoded(info, obj, options);
  }

  /**
   * A create: defaults, the mutating admission plugins (which see the object before its name is generated, as in
   * kube-apiserver), the strategy's preparation and validation, the validating plugins, then the store.
   */
  private createDecoded(
    info: KindInfo,
    obj: KubeObject,
    options: WriteOptions,
    managedFields?: (obj: KubeObject) => unknown[],
  ): MaybePromise<KubeObject> {
    if (info.namespaced) this.checkNamespaceAcceptsContent(info, obj);
    info.strategy?.defaults?.(obj, this.ctx);
    const namespace = obj.metadata.namespace;
    const request = this.admissionRequest(
      info,
      'CREATE',
      namespace,
      obj.metadata.name ?? '',
      obj,
      undefined,
      options,
      (patched) => {
        const decoded = this.decodeBody(info, namespace, patched, true);
        info.strategy?.defaults?.(decoded, this.ctx);
        return decoded;
      },
    );
    if (!request) return this.createAdmitted(info, obj, options, managedFields, undefined);
    return then(this.admission.admit(request), () =>
      this.createAdmitted(info, request.obj!, options, managedFields, request),
    );
  }

  private createAdmitted(
    info: KindInfo,
    obj: KubeObject,
    options: WriteOptions,
    managedFields: ((obj: KubeObject) => unknown[]) | undefined,
    request: AdmissionRequest | undefined,
  ): MaybePromise<KubeObject> {
    const meta = obj.metadata;
    if (!meta.name && meta.generateName) {
      // names.SimpleNameGenerator: the base is cut to 58 characters so the name fits 63. A generated name that is
      // taken is drawn again, up to 7 times, as kube-apiserver does since RetryGenerateName (GA in 1.32): with 5
      // characters of 27, a namespace of a few thousand pods of one ReplicaSet would otherwise see collisions.
      const base = meta.generateName.slice(0, 58);
      for (let attempt = 0; attempt < 8; attempt++) {
        meta.name = `${base}${this.ctx.random.alphanumeric(5)}`;
        if (!this.store.get(resourceKey(info), scoped(info, meta.namespace), meta.name)) break;
      }
    }
    const now = this.ctx.clock.now();
    meta.uid = this.ctx.random.uuid();
    meta.creationTimestamp = rfc3339(now);
    delete meta.resourceVersion;
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    delete meta.selfLink;
    if (info.status && !info.strategy?.keepsStatusOnCreate) delete obj.status;
    info.strategy?.prepareForCreate?.(obj, this.ctx, options.requester);
    if (hasGeneration(info)) meta.generation = 1;
    else delete meta.generation;
    if (managedFields) setManagedFields(obj, managedFields(obj));
    else if (options.fieldManager)
      setManagedFields(
        obj,
        managedFieldsAfterUpdate(undefined, obj, meta.managedFields, this.writeContext(info, options)),
      );
    this.validate(info, obj);
    options.requester?.admit?.(info, obj, undefined);
    return then(toStorage(info, obj), (stored) => {
      const store = (commits: Array<() => void> | undefined): MaybePromise<KubeObject> => {
        if (options.dryRun) return obj;
        return then(this.writes.create(resourceKey(info), stored), (created) => {
          if (commits) for (const commit of commits) commit();
          return fromStorage(info, created);
        });
      };
      return request ? then(this.admission.validate(request), store) : store(undefined);
    });
  }

  /**
   * An object restored from a snapshot, as it will be stored: checked as a create would check it (ObjectMeta, the
   * kind's own rules), in its storage form, its uid, resourceVersion and status kept. Throws the 422 a create gets.
   */
  restoredForm(info: KindInfo, obj: KubeObject): MaybePromise<KubeObject> {
    this.validate(info, obj);
    return toStorage(info, obj);
  }

  /**
   * The admission attributes of a client's write, or undefined for the server's own (WriteOptions.internal) and
   * when no plugin is registered.
   */
  private admissionRequest(
    info: KindInfo,
    operation: AdmissionOperation,
    namespace: string | undefined,
    name: string,
    obj: KubeObject | undefined,
    old: KubeObject | undefined,
    options: WriteOptions | DeleteRequestOptions,
    decode: ((patched: unknown) => KubeObject) | undefined,
    subresource = '',
  ): AdmissionRequest | undefined {
    if (options.internal || this.admission.empty) return undefined;
    // A Namespace's own requests carry its name as their namespace, as kube-apiserver's request info parses the path.
    const ns = info.namespaced
      ? namespace
      : info.resource === 'namespaces' && info.group === '' && operation !== 'CREATE'
        ? name
        : undefined;
    return new Attributes(info, operation, subresource, ns, name, obj, old, options, decode);
  }

  /** PUT: replace the object (or its status), optimistic-locked on the body's resourceVersion when it has one. */
  update(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions = {},
  ): MaybePromise<KubeObject> {
    // An in-process /status write: what the store keeps of it, copied but for the parts it holds already (and, handed
    // over, for the writer's own).
    const inProcess = !options.takeBody && options.fieldValidation === undefined;
    const ownPart = options.subresource === 'status' && inProcess;
    const incoming = ownPart
      ? this.decodeBody(
          info,
          namespace,
          statusPart(
            body,
            this.store.get(resourceKey(info), scoped(info, namespace), name),
            info.strategy?.statusMetadata ?? [],
            options.handOver === true,
          ),
          true,
        )
      : inProcess && options.handOver && !options.subresource && takesOver(info)
        ? this.decodeBody(info, namespace, ownRootAndMetadata(body), true)
        : this.decodeBody(info, namespace, body, options.takeBody);
    this.checkFields(info, incoming, options);
    if (incoming.metadata.name !== name) {
      throw Errors.badRequest(
        `the name of the object (${incoming.metadata.name ?? ''}) does not match the name on the URL (${name})`,
      );
    }
    const preconditions: Preconditions = { resourceVersion: incoming.metadata.resourceVersion };
    if (incoming.metadata.uid) preconditions.uid = incoming.metadata.uid;
    // `incoming` is the store's own (a decoded copy, or stored parts that never change) and produce runs once: no second copy.
    return this.writeUpdate(info, namespace, name, preconditions, () => incoming, options);
  }

  patch(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    patch: unknown,
    options: WriteOptions = {},
  ): MaybePromise<KubeObject> {
    if (type === 'apply') return this.apply(info, namespace, name, patch, options);
    if (type === 'strategic' && info.schema?.strategicMergePatch === false) {
      // Custom resources have no patch strategies: kube-apiserver refuses strategic merge patches for them.
      throw new ApiError(
        415,
        'UnsupportedMediaType',
        'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
      );
    }
    const rvInPatch =
      type !== 'json' && isPlainObject(patch) && isPlainObject(patch.metadata)
        ? patch.metadata.resourceVersion
        : undefined;
    const preconditions: Preconditions = typeof rvInPatch === 'string' ? { resourceVersion: rvInPatch } : {};
    const typeName = schemaNameForKind(info.group, info.version, info.kind);
    return this.writeUpdate(
      info,
      namespace,
      name,
      preconditions,
      (current) => {
        const patched = applyPatch(type, current, patch, typeName);
        if (!isPlainObject(patched)) throw Errors.unprocessable('the patched object is not a JSON object');
        const decoded = this.decodeBody(info, namespace, patched);
        this.checkFields(info, decoded, options, current);
        return decoded;
      },
      options,
    );
  }

  /**
   * Server-side apply (application/apply-patch+yaml): merges the applied configuration by the schema's list
   * types, records the manager's Apply entry, removes fields it stopped applying, and fails with 409 on fields
   * other managers own unless forced. Creates the object when it does not exist (options.created tells).
   */
  private apply(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions,
  ): MaybePromise<KubeObject> {
    // kube-apiserver decodes the body into a map with sigs.k8s.io/yaml (so `null` or nothing is an empty one), then
    // its field manager insists on the resource's group, version and kind.
    if (body !== null && body !== undefined && !isPlainObject(body))
      throw Errors.badRequest(
        `error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal ${goJsonType(body)} into Go value of type map[string]interface {}`,
      );
    const config = isPlainObject(body) ? body : {};
    const gvk = appliedGroupVersionKind(config);
    if (gvk !== `${info.group}/${info.version}, Kind=${info.kind}`)
      throw Errors.badRequest(`invalid object type: ${gvk}`);
    const gv = groupVersion(info);
    const applied = this.decodeBody(info, namespace, config);
    if (applied.metadata.name !== undefined && applied.metadata.name !== name) {
      throw Errors.badRequest(
        `the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    applied.metadata.name = name;
    const typeName = schemaNameForKind(info.group, info.version, info.kind);
    const pruneApplied = typeName
      ? (o: KubeObject) => pruneUnknownFields(o, typeName)
      : info.schema?.pruneUnknownFields;
    if (pruneApplied && options.fieldValidation !== undefined) {
      const unknown = pruneApplied(applied);
      if (unknown.length > 0) {
        if (options.fieldValidation === 'Strict') {
          const where = `${applied.metadata.namespace ? `${applied.metadata.namespace}/` : ''}${name}; ${gv}, Kind=${info.kind}`;
          throw Errors.badRequest(
            `failed to create typed patch object (${where}): ${unknown.map((f) => `.${f}: field not declared in schema`).join(', ')}`,
          );
        }
        if (options.fieldValidation === 'Warn')
          (options.warnings ??= []).push(...unknown.map((f) => `unknown field "${f}"`));
      }
    }
    const ctx = this.writeContext(info, { ...options, fieldManager: options.fieldManager ?? 'unknown' });
    const exists = this.store.get(resourceKey(info), scoped(info, namespace), name) !== undefined;
    if (!exists) {
      if (options.subresource) throw Errors.notFound(info, name);
      const result = applyAfterClientSideApply(undefined, applied, config, ctx, options.force === true, info, name);
      return then(
        this.createDecoded(info, result.object, options, () => result.managedFields),
        (created) => {
          options.created = true;
          return created;
        },
      );
    }
    let managed: unknown[] = [];
    return this.writeUpdate(
      info,
      namespace,
      name,
      {},
      (current) => {
        const result = applyAfterClientSideApply(current, applied, config, ctx, options.force === true, info, name);
        managed = result.managedFields;
        return this.decodeBody(info, namespace, result.object);
      },
      { ...options, fieldManager: undefined, applied: () => managed },
    );
  }

  /** Field validation of a decoded body: prunes undeclared fields, failing (Strict) or warning (Warn) about them. */
  private checkFields(info: KindInfo, obj: KubeObject, options: WriteOptions, current?: KubeObject): void {
    if (options.fieldValidation === undefined) return;
    const typeName = schemaNameForKind(info.group, info.version, info.kind);
    const prune = typeName ? (o: KubeObject) => pruneUnknownFields(o, typeName) : info.schema?.pruneUnknownFields;
    if (!prune) return;
    let unknown: string[];
    if (typeName) {
      // One walk prunes and type-checks; a mismatch fails decoding whatever fieldValidation says.
      const found = validateFields(obj, typeName);
      if (found.mismatch && (!current || typeMismatch(current, typeName) !== found.mismatch))
        throw Errors.badRequest(
          `${info.kind} in version "${info.version}" cannot be handled as a ${info.kind}: ${found.mismatch}`,
        );
      unknown = found.unknown;
    } else unknown = prune(obj);
    if (unknown.length === 0) return;
    if (current) {
      // Undeclared fields an in-process writer stored are not the patch's doing.
      const already = new Set(prune(deepCopy(current)));
      unknown = unknown.filter((f) => !already.has(f));
      if (unknown.length === 0) return;
    }
    if (options.fieldValidation === 'Strict')
      throw Errors.badRequest(strictDecodingMessage(info.kind, info.version, unknown));
    if (options.fieldValidation === 'Warn')
      (options.warnings ??= []).push(...unknown.map((f) => `unknown field "${f}"`));
  }

  private writeContext(info: KindInfo, options: WriteOptions): WriteContext {
    return {
      manager: options.fieldManager!,
      apiVersion: groupVersion(info),
      time: rfc3339(this.ctx.clock.now()),
      typeName: schemaNameForKind(info.group, info.version, info.kind) ?? info.schema?.typeName,
      hasStatus: info.status === true,
      subresource: options.subresource === 'status' ? 'status' : options.managedSubresource,
    };
  }

  /**
   * The shared update path: optimistic locking, metadata the client may not change, the strategy's rules, admission,
   * no-op detection, and finishing a deletion when the last finalizer goes. The object is read, prepared and admitted
   * outside the store's guaranteedUpdate, which then only checks that it is still the one read: always so when no
   * admission step waited; otherwise a write that came meanwhile makes it start again from the new object, admission
   * included, as kube-apiserver's GuaranteedUpdate retries on a stale read.
   */
  writeUpdate(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions,
    produce: (current: KubeObject) => KubeObject,
    options: WriteOptions & { applied?: () => unknown[] } = {},
  ): MaybePromise<KubeObject> {
    return this.attemptUpdate(info, scoped(info, namespace), name, preconditions, produce, options, 0);
  }

  private attemptUpdate(
    info: KindInfo,
    ns: string | undefined,
    name: string,
    preconditions: Preconditions,
    produce: (current: KubeObject) => KubeObject,
    options: WriteOptions & { applied?: () => unknown[] },
    attempt: number,
  ): MaybePromise<KubeObject> {
    const key = resourceKey(info);
    const stored = this.store.current(key, ns, name, preconditions);
    return then(fromStorage(info, stored), (current) =>
      this.updateFrom(info, ns, name, preconditions, produce, options, attempt, stored, current),
    );
  }

  private updateFrom(
    info: KindInfo,
    ns: string | undefined,
    name: string,
    preconditions: Preconditions,
    produce: (current: KubeObject) => KubeObject,
    options: WriteOptions & { applied?: () => unknown[] },
    attempt: number,
    stored: KubeObject,
    current: KubeObject,
  ): MaybePromise<KubeObject> {
    const key = resourceKey(info);
    const next = produce(current);
    if (next.metadata.name !== current.metadata.name) {
      throw Errors.badRequest(
        `the name of the object (${next.metadata.name ?? ''}) does not match the name on the URL (${name})`,
      );
    }
    const subresource = options.subresource ?? '';
    const view = options.admissionView;
    const decode = view
      ? (patched: unknown): KubeObject => {
          if (!isPlainObject(patched)) throw Errors.badRequest('the patched object is not a JSON object');
          return patched as KubeObject;
        }
      : (patched: unknown): KubeObject => {
          const decoded = this.decodeBody(info, ns, patched, true);
          if (!subresource) this.resetForUpdate(info, decoded, current);
          return decoded;
        };
    const request =
      subresource === 'finalize'
        ? undefined
        : this.admissionRequest(
            info,
            'UPDATE',
            ns,
            name,
            view ? view.of(next) : next,
            view ? view.of(current) : current,
            options,
            decode,
            view?.subresource ?? subresource,
          );
    /** The object to store once the mutating plugins are done. */
    const afterMutation = (): KubeObject => (view ? view.apply(request!.obj!, next) : request!.obj!);
    /** managedFields, and whether the update is the deletion itself; then the object as the store keeps it. */
    const finish = (prepared: KubeObject): MaybePromise<KubeObject> => {
      if (options.applied) setManagedFields(prepared, options.applied());
      else if (options.fieldManager && options.subresource !== 'finalize') {
        const requested =
          options.subresource === 'status' ? current.metadata.managedFields : next.metadata.managedFields;
        setManagedFields(
          prepared,
          managedFieldsAfterUpdate(current, prepared, requested, this.writeContext(info, options)),
        );
      }
      // The update that empties the finalizers is the deletion itself, not a write first (kube-apiserver's
      // errEmptiedFinalizers): watchers see DELETED of the stored object and no MODIFIED before it.
      return shouldDeleteDuringUpdate(info, prepared) ? stored : toStorage(info, prepared);
    };
    const commit = (storageForm: KubeObject, commits: Array<() => void> | undefined): MaybePromise<KubeObject> => {
      const emptied = storageForm === stored;
      let stale = false;
      const written = this.writes.guaranteedUpdate(
        key,
        ns,
        name,
        preconditions,
        (latest) => {
          // Only after admission or a conversion waited (or another API server wrote first, with etcd) can another
          // write have come in between: start again from it.
          if (latest !== stored) {
            stale = true;
            return latest;
          }
          return storageForm;
        },
        options.dryRun,
      );
      return then(written, ({ object, changed }) => {
        if (stale) {
          if (attempt >= MAX_UPDATE_ATTEMPTS) throw Errors.conflict(info, name);
          return this.attemptUpdate(info, ns, name, preconditions, produce, options, attempt + 1);
        }
        if (emptied && !options.dryRun)
          return then(this.writes.delete(key, ns, name), (gone) => fromStorage(info, gone));
        if (changed && commits && !options.dryRun) for (const c of commits) c();
        return fromStorage(info, object);
      });
    };
    const validated = (prepared: KubeObject): MaybePromise<KubeObject> => {
      if (!subresource) options.requester?.admit?.(info, prepared, current);
      return then(finish(prepared), (storageForm) => {
        if (!request) return commit(storageForm, undefined);
        request.obj = view ? view.of(prepared) : prepared;
        return then(this.admission.validate(request), (commits) => commit(storageForm, commits));
      });
    };
    if (subresource === 'status') {
      const mutated = request ? this.admission.admit(request) : undefined;
      return then(mutated, () => validated(this.prepareStatusUpdate(info, request?.obj ?? next, current)));
    }
    if (subresource === 'finalize') return validated(this.prepareFinalizeUpdate(info, next, current));
    const own = subresource ? info.strategy?.subresources?.[subresource] : undefined;
    if (own) {
      const mutated = request ? this.admission.admit(request) : undefined;
      return then(mutated, () =>
        validated(this.prepareSubresourceUpdate(info, own, request?.obj ?? next, current, subresource!)),
      );
    }
    this.resetForUpdate(info, next, current);
    if (!request) return validated(this.prepareUpdate(info, next, current));
    return then(this.admission.admit(request), () => {
      const obj = afterMutation();
      if (view) this.resetForUpdate(info, obj, current);
      return validated(this.prepareUpdate(info, obj, current));
    });
  }

  /** What an update may not change, and the defaults (rest.BeforeUpdate's first half, before admission). */
  private resetForUpdate(info: KindInfo, next: KubeObject, current: KubeObject): void {
    keepServerOwnedMeta(next, current);
    if (info.status) {
      if (current.status === undefined) delete next.status;
      else next.status = current.status;
    }
    info.strategy?.defaults?.(next, this.ctx);
  }

  private prepareUpdate(info: KindInfo, next: KubeObject, current: KubeObject): KubeObject {
    info.strategy?.prepareForUpdate?.(next, current, this.ctx);
    if (hasGeneration(info)) {
      const bump = info.strategy?.bumpsGeneration
        ? info.strategy.bumpsGeneration(next, current)
        : !deepEqual(next.spec, current.spec);
      next.metadata.generation = (current.metadata.generation ?? 1) + (bump ? 1 : 0);
    }
    this.validate(info, next, current);
    return next;
  }

  /** /status writes: everything but status (and the object's metadata) is kept as stored. */
  private prepareStatusUpdate(info: KindInfo, next: KubeObject, current: KubeObject): KubeObject {
    const result: KubeObject = { ...current, metadata: { ...current.metadata } };
    if (next.status === undefined) delete result.status;
    else result.status = next.status;
    let metadataChanged = false;
    for (const f of info.strategy?.statusMetadata ?? []) {
      const value = next.metadata[f];
      const stored = current.metadata[f];
      // Unchanged, it stays the stored value itself: validated when stored, and shared with the stored version.
      if (value === stored || (value !== undefined && deepEqual(value, stored))) continue;
      metadataChanged = true;
      if (value === undefined) delete result.metadata[f];
      else (result.metadata as Record<string, unknown>)[f] = value;
    }
    if (next.metadata.resourceVersion !== undefined) result.metadata.resourceVersion = current.metadata.resourceVersion;
    this.validate(info, result, current, { metadataChanged });
    return result;
  }

  /** A write through a subresource of the kind's own (a CSR's /approval): what it keeps, validated as an update. */
  private prepareSubresourceUpdate(
    info: KindInfo,
    prepare: NonNullable<Strategy['subresources']>[string],
    next: KubeObject,
    current: KubeObject,
    subresource: string,
  ): KubeObject {
    const result = prepare(next, current, this.ctx);
    result.metadata = { ...result.metadata, resourceVersion: current.metadata.resourceVersion };
    this.validate(info, result, current, undefined, subresource);
    return result;
  }

  /** A namespace's /finalize: only spec.finalizers may change (the namespace controller empties it). */
  private prepareFinalizeUpdate(info: KindInfo, next: KubeObject, current: KubeObject): KubeObject {
    const finalizers = isPlainObject(next.spec) ? next.spec.finalizers : undefined;
    const spec = { ...(isPlainObject(current.spec) ? current.spec : {}) };
    if (Array.isArray(finalizers) && finalizers.length > 0) spec.finalizers = finalizers;
    else delete spec.finalizers;
    const result: KubeObject = { ...current, metadata: { ...current.metadata }, spec };
    this.validate(info, result, current);
    return result;
  }

  /**
   * DELETE: the admission chain sees the stored object (as oldObject), then the object goes at once, or is marked
   * for deletion while finalizers or a grace period hold it.
   */
  delete(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    options: DeleteRequestOptions = {},
    ofCollection = false,
  ): MaybePromise<DeleteResult> {
    const ns = scoped(info, namespace);
    const read = this.read(info, ns, name);
    if (read instanceof Promise)
      return read.then((current) => this.deleteFrom(info, ns, name, current, options, ofCollection));
    return this.deleteFrom(info, ns, name, read, options, ofCollection);
  }

  private deleteFrom(
    info: KindInfo,
    ns: string | undefined,
    name: string,
    current: KubeObject,
    options: DeleteRequestOptions,
    ofCollection: boolean,
  ): MaybePromise<DeleteResult> {
    // Go's DeleteCollection deletes through the generic Store, past REST overrides such as PriorityClass's.
    if (!ofCollection) info.strategy?.beforeDelete?.(current);
    const request = this.admissionRequest(info, 'DELETE', ns, name, undefined, current, options, undefined);
    if (!request) return this.deleteAdmitted(info, ns, name, current, options);
    this.store.current(resourceKey(info), ns, name, options.preconditions ?? {});
    return then(this.admission.admit(request), () =>
      then(this.admission.validate(request), (commits) => {
        // Admission may have waited: the deletion starts from the object as it is now.
        if (this.store.get(resourceKey(info), ns, name) === undefined) throw Errors.notFound(info, name);
        return then(this.read(info, ns, name), (latest) => {
          const result = this.deleteAdmitted(info, ns, name, latest, options);
          if (commits && !options.dryRun) for (const commit of commits) commit();
          return result;
        });
      }),
    );
  }

  private deleteAdmitted(
    info: KindInfo,
    ns: string | undefined,
    name: string,
    current: KubeObject,
    options: DeleteOptions,
  ): MaybePromise<DeleteResult> {
    const key = resourceKey(info);
    const preconditions = options.preconditions ?? {};
    const grace = this.gracePeriodFor(info, current, options);
    const finalizers = this.finalizersAfterDelete(current, options);
    if (!current.metadata.deletionTimestamp)
      for (const f of info.strategy?.finalizersOnDelete?.(current) ?? [])
        if (!finalizers.includes(f)) finalizers.push(f);
    const held = (info.strategy?.specFinalizers?.(current) ?? []).length > 0;
    if (finalizers.length === 0 && grace === 0 && !held) {
      if (options.dryRun) return { body: current, gone: false };
      return then(this.writes.delete(key, ns, name, preconditions), (gone) => ({
        body: successStatus(info, gone),
        gone: true,
      }));
    }
    const now = this.ctx.clock.now();
    const marking = this.writes.guaranteedUpdate(
      key,
      ns,
      name,
      preconditions,
      (latest) => {
        const next: KubeObject = { ...latest, metadata: { ...latest.metadata } };
        if (finalizers.length > 0) next.metadata.finalizers = finalizers;
        else delete next.metadata.finalizers;
        const existing = latest.metadata.deletionGracePeriodSeconds;
        if (!latest.metadata.deletionTimestamp || existing === undefined || grace < existing) {
          next.metadata.deletionTimestamp = rfc3339(now + grace * 1000);
          next.metadata.deletionGracePeriodSeconds = grace;
        }
        info.strategy?.prepareForDelete?.(next);
        return next;
      },
      options.dryRun,
    );
    return then(marking, (marked) => {
      if (!options.dryRun && shouldDeleteDuringUpdate(info, marked.object))
        return then(this.writes.delete(key, ns, name), (gone) => ({ body: successStatus(info, gone), gone: true }));
      return then(fromStorage(info, marked.object), (body) => ({ body, gone: false }));
    });
  }

  /** DELETE of a collection: each listed object through delete (and admission), in order; ones gone meanwhile skipped. */
  deleteCollection(
    info: KindInfo,
    namespace: string | undefined,
    query: ListQuery,
    options: DeleteRequestOptions,
  ): MaybePromise<KubeList> {
    return then(
      this.readList(info, namespace, { labelSelector: query.labelSelector, fieldSelector: query.fieldSelector }),
      (list) => this.deleteListed(info, list, options),
    );
  }

  private deleteListed(info: KindInfo, list: KubeList, options: DeleteRequestOptions): MaybePromise<KubeList> {
    const deleted: KubeObject[] = [];
    const isNotFound = (err: unknown): boolean =>
      err instanceof Error && 'code' in err && (err as { code: number }).code === 404;
    const done = eachInOrder(list.items, (item) => {
      let result: MaybePromise<DeleteResult>;
      try {
        result = this.delete(
          info,
          item.metadata.namespace,
          item.metadata.name!,
          { ...options, preconditions: undefined },
          true,
        );
      } catch (err) {
        if (isNotFound(err)) return;
        throw err;
      }
      const keep = (r: DeleteResult): void => {
        deleted.push(r.gone ? item : (r.body as KubeObject));
      };
      if (!(result instanceof Promise)) return keep(result);
      return result.then(keep, (err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
    });
    return then(done, () => ({ ...list, items: deleted }));
  }

  /**
   * A create through a subresource that is a verb on the object (pods/eviction, pods/binding): the admission chain
   * sees the body (an Eviction, a Binding) as the object of a CREATE of the subresource; mutating webhooks may
   * change it. What comes back is the body to act on.
   */
  admitSubresourceCreate(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    subresource: ExtraSubresource,
    body: unknown,
    options: WriteOptions,
  ): MaybePromise<unknown> {
    if (!isPlainObject(body) || !isPlainObject(body.metadata ?? {})) return body;
    const ns = scoped(info, namespace);
    const decode = (patched: unknown): KubeObject => {
      if (!isPlainObject(patched)) throw Errors.badRequest(`Object '${subresource.kind}' is not a JSON object`);
      return patched as KubeObject;
    };
    const obj = { ...body, metadata: { ...(isPlainObject(body.metadata) ? body.metadata : {}) } } as KubeObject;
    const request = this.admissionRequest(info, 'CREATE', ns, name, obj, undefined, options, decode, subresource.name);
    if (!request) return body;
    return then(this.admission.admit(request), () => then(this.admission.validate(request), () => request.obj));
  }

  /**
   * CONNECT (pods/exec, attach, portforward, proxy): the admission chain sees the request's options object
   * (PodExecOptions …) before the connection is made.
   */
  admitConnect(
    info: KindInfo,
    namespace: string | undefined,
    name: string,
    subresource: string,
    connectOptions: KubeObject,
    requester: Requester | undefined,
  ): MaybePromise<void> {
    const options = requester ? { requester } : {};
    const ns = scoped(info, namespace);
    const request = this.admissionRequest(
      info,
      'CONNECT',
      ns,
      name,
      connectOptions,
      undefined,
      options,
      undefined,
      subresource,
    );
    if (!request) return;
    return then(this.admission.admit(request), () => then(this.admission.validate(request), () => undefined));
  }

  /**
   * Starts a watch with kube-apiserver's resourceVersion semantics: unset or "0" first sends the current
   * objects as ADDED; a version N sends every retained event after N, or 410 Expired when they are gone.
   */
  watch(
    info: KindInfo,
    namespace: string | undefined,
    query: WatchQuery,
    sink: WatchSink,
  ): { watch: Watch; revision: number } {
    const filter: WatchFilter = {
      namespace: scoped(info, namespace),
      label: parseLabelSelector(query.labelSelector),
      field: parseFieldSelector(query.fieldSelector, this.registry.supportedFields(info)),
    };
    const key = resourceKey(info);
    const rv = query.resourceVersion;
    if (info.storage || info.onRead) sink = convertingSink(info, sink);
    const revision = this.store.currentRevision;
    if (rv === undefined || rv === '' || rv === '0' || query.sendInitialEvents) {
      const current = this.store.list(key, { namespace: filter.namespace, label: filter.label, field: filter.field });
      for (const obj of current.items) {
        if (!sink.send('ADDED', new StoreEvent('ADDED', obj, undefined, Number(obj.metadata.resourceVersion)))) {
          sink.close();
          break;
        }
      }
      return { watch: this.store.watch(key, revision, filter, sink), revision };
    }
    const from = Number(rv);
    if (!Number.isSafeInteger(from) || from < 0) throw Errors.badRequest(`invalid resource version: ${rv}`);
    if (from > revision) throw Errors.resourceVersionTooLarge(from, revision);
    return { watch: this.store.watch(key, from, filter, sink), revision };
  }

  private gracePeriodFor(info: KindInfo, current: KubeObject, options: DeleteOptions): number {
    const strategy = info.strategy?.gracePeriodSeconds;
    return strategy ? Math.max(0, strategy(current, options.gracePeriodSeconds)) : 0;
  }

  private finalizersAfterDelete(current: KubeObject, options: DeleteOptions): string[] {
    const finalizers = [...(current.metadata.finalizers ?? [])];
    const policy = options.propagationPolicy ?? (options.orphanDependents === true ? 'Orphan' : undefined);
    const without = (f: string): void => {
      const i = finalizers.indexOf(f);
      if (i >= 0) finalizers.splice(i, 1);
    };
    if (policy === 'Orphan') {
      without(FOREGROUND_FINALIZER);
      if (!finalizers.includes(ORPHAN_FINALIZER)) finalizers.push(ORPHAN_FINALIZER);
    } else if (policy === 'Foreground') {
      without(ORPHAN_FINALIZER);
      if (!finalizers.includes(FOREGROUND_FINALIZER)) finalizers.push(FOREGROUND_FINALIZER);
    } else if (policy === 'Background') {
      without(ORPHAN_FINALIZER);
      without(FOREGROUND_FINALIZER);
    }
    // As in Kubernetes, the finalizer is added whether or not there are dependents: the garbage
    // collector removes it (and the object goes) once dependents are orphaned or gone.
    return finalizers;
  }

  private checkNamespaceAcceptsContent(info: KindInfo, obj: KubeObject): void {
    const ns = obj.metadata.namespace!;
    const namespace = this.store.get(NAMESPACES, undefined, ns);
    if (!namespace) throw Errors.notFound({ group: '', resource: 'namespaces' }, ns);
    if (namespace.metadata.deletionTimestamp) {
      const err = Errors.forbidden(
        info,
        obj.metadata.name ?? '',
        `unable to create new content in namespace ${ns} because it is being terminated`,
      );
      err.details!.causes = [
        { reason: 'NamespaceTerminating', message: `namespace ${ns} is being terminated`, field: 'metadata.namespace' },
      ];
      throw err;
    }
  }

  /**
   * A body of another kind, in apiserver's transformDecodeError words: the decoder makes the body's kind if the
   * scheme has it (then cannot convert it: `converting (v1.Namespace) to (core.ConfigMap): unknown conversion`), or
   * fails to find it (`no kind "Foo" is registered for version "v1" in scheme …`).
   */
  private kindMismatch(info: KindInfo, obj: KubeObject): ApiError {
    const kind = String(obj.kind);
    const apiVersion =
      typeof obj.apiVersion === 'string' && obj.apiVersion !== '' ? obj.apiVersion : groupVersion(info);
    const version = apiVersion.slice(apiVersion.indexOf('/') + 1);
    const body = this.registry.byGroupVersionKind(apiVersion, kind);
    const why =
      body && !body.schema && !info.schema
        ? `converting (${version}.${kind}) to (${internalPackage(info)}.${info.kind}): unknown conversion`
        : `no kind ${JSON.stringify(kind)} is registered for version ${JSON.stringify(apiVersion)} in scheme "pkg/api/legacyscheme/scheme.go:30"`;
    return Errors.badRequest(
      `${kind} in version ${JSON.stringify(version)} cannot be handled as a ${info.kind}: ${why}`,
    );
  }

  /**
   * Checks a request body is an object of this kind and gives it its apiVersion, kind and namespace: on a copy,
   * unless `take` says the caller hands the body over (a freshly decoded request body; no copy to make).
   */
  decodeBody(info: KindInfo, namespace: string | undefined, body: unknown, take = false): KubeObject {
    if (!isPlainObject(body)) throw Errors.badRequest(`Object '${info.kind}' is not a JSON object`);
    const obj = (take ? body : deepCopy(body)) as KubeObject;
    const gv = groupVersion(info);
    if (obj.kind !== undefined && obj.kind !== '' && obj.kind !== info.kind) throw this.kindMismatch(info, obj);
    if (obj.apiVersion !== undefined && obj.apiVersion !== '' && obj.apiVersion !== gv) {
      throw Errors.badRequest(
        `the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${gv})`,
      );
    }
    obj.apiVersion = gv;
    obj.kind = info.kind;
    if (obj.metadata === undefined || obj.metadata === null) obj.metadata = {};
    if (!isPlainObject(obj.metadata)) throw Errors.badRequest('metadata must be an object');
    // These are omitempty in Go's ObjectMeta: an empty one is the same object as none, so writing it is a no-op.
    for (const f of ['labels', 'annotations', 'finalizers', 'ownerReferences'] as const) {
      const v: unknown = obj.metadata[f];
      if (v === null || (Array.isArray(v) && v.length === 0) || (isPlainObject(v) && Object.keys(v).length === 0))
        delete obj.metadata[f];
    }
    if (info.namespaced) {
      const ns = namespace ?? obj.metadata.namespace;
      if (obj.metadata.namespace && namespace && obj.metadata.namespace !== namespace) {
        throw Errors.badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      if (ns) obj.metadata.namespace = ns;
    } else {
      delete obj.metadata.namespace;
    }
    return obj;
  }

  /**
   * The checks of a create or update. A /status write (`statusWrite`) keeps all metadata but statusMetadata as
   * stored: ObjectMeta is checked again only when one of those changed. Its kind's status strategy may validate
   * metadata and status alone (statusValidation: 'metadata'), not the spec the write keeps as stored.
   */
  private validate(
    info: KindInfo,
    obj: KubeObject,
    old?: KubeObject,
    statusWrite?: { metadataChanged: boolean },
    subresource?: string,
  ): void {
    const causes: StatusCause[] =
      !statusWrite || statusWrite.metadataChanged
        ? validateObjectMeta(obj, info.namespaced, info.nameRule ?? 'subdomain')
        : [];
    if (statusWrite && info.strategy?.statusValidation === 'metadata') {
      if (old?.metadata.deletionTimestamp) causes.push(...noNewFinalizers(obj, old));
      if (old) causes.push(...(info.strategy.validateStatusUpdate?.(obj, old) ?? []));
      if (causes.length > 0)
        throw Errors.invalid(info.group, info.kind, obj.metadata.name ?? obj.metadata.generateName ?? '', causes);
      return;
    }
    const own = subresource ? info.strategy?.validateSubresourceUpdate?.[subresource] : undefined;
    if (old) {
      for (const field of ['uid', 'creationTimestamp'] as const) {
        if (old.metadata[field] !== obj.metadata[field])
          causes.push(FieldErrors.invalid(`metadata.${field}`, obj.metadata[field], 'field is immutable'));
      }
      if (old.metadata.deletionTimestamp) causes.push(...noNewFinalizers(obj, old));
      if (!own) causes.push(...(info.strategy?.validateUpdate?.(obj, old) ?? []));
    } else causes.push(...(info.strategy?.validateCreate?.(obj) ?? []));
    causes.push(...(info.strategy?.validate?.(obj) ?? []));
    // As ValidatePodEphemeralContainersUpdate: the object's own checks first, then what the subresource may change.
    if (old && own) causes.push(...own(obj, old));
    if (causes.length > 0)
      throw Errors.invalid(info.group, info.kind, obj.metadata.name ?? obj.metadata.generateName ?? '', causes);
  }
}

/** An object being deleted may lose finalizers but not gain any (ValidateNoNewFinalizers). */
function noNewFinalizers(obj: KubeObject, old: KubeObject): StatusCause[] {
  const had = new Set(old.metadata.finalizers ?? []);
  const added = [...new Set((obj.metadata.finalizers ?? []).filter((f) => !had.has(f)))].sort();
  if (added.length === 0) return [];
  const list = `[]string{${added.map((f) => JSON.stringify(f)).join(', ')}}`;
  return [
    FieldErrors.forbidden(
      'metadata.finalizers',
      `no new finalizers can be added if the object is being deleted, found new finalizers ${list}`,
    ),
  ];
}

/** An applied configuration's GroupVersionKind as Go prints it (`apps/v1, Kind=Deployment`; `/, Kind=` for none). */
function appliedGroupVersionKind(config: Record<string, unknown>): string {
  const apiVersion = typeof config.apiVersion === 'string' ? config.apiVersion : '';
  const kind = typeof config.kind === 'string' ? config.kind : '';
  const parts = apiVersion === '' ? ['', ''] : apiVersion.split('/');
  const [group, version] = parts.length === 1 ? ['', parts[0]] : parts.length === 2 ? parts : ['', ''];
  return `${group}/${version}, Kind=${kind}`;
}

function applyPatch(type: PatchType, current: KubeObject, patch: unknown, typeName: string | undefined): unknown {
  switch (type) {
    case 'json':
      return applyJsonPatch(current, patch);
    case 'merge':
      if (!isPlainObject(patch)) throw Errors.badRequest('merge patch must be a JSON object');
      return applyMergePatch(current, patch);
    case 'strategic':
      return applyStrategicMergePatch(current, patch, typeName);
    case 'apply':
      throw Errors.unsupportedMediaType('application/apply-patch+yaml');
  }
}

/**
 * What a /status write keeps of an in-process body, as the store's own copy (prepareStatusUpdate takes the rest
 * from the stored object): the kubelet and controllers send whole objects read from informers, whose specs need no
 * copy, and whose metadata and status parts that are the stored object's own need none either. decodeBody changes
 * only the top level of metadata; of the rest, only what the kind's status writes keep (statusMetadata) is copied.
 */
function statusPart(
  body: unknown,
  stored: KubeObject | undefined,
  kept: NonNullable<Strategy['statusMetadata']>,
  handedOver: boolean,
): unknown {
  if (!isPlainObject(body)) return body;
  let metadata = body.metadata;
  if (isPlainObject(metadata)) {
    const own: Record<string, unknown> = { ...metadata };
    if (!handedOver) for (const f of kept) if (own[f] !== undefined) own[f] = deepCopy(own[f], stored?.metadata[f]);
    metadata = own;
  }
  const part: Record<string, unknown> = { apiVersion: body.apiVersion, kind: body.kind, metadata };
  if (body.status !== undefined) part.status = handedOver ? body.status : deepCopy(body.status, stored?.status);
  return part;
}

/**
 * Whether an update's body can be kept as it is below its root and metadata: the kind changes nothing in place
 * between decoding and storing it (no defaults, no preparation, no conversion or schema defaults; a Lease).
 */
function takesOver(info: KindInfo): boolean {
  const strategy = info.strategy;
  return (
    strategy?.defaults === undefined &&
    strategy?.prepareForUpdate === undefined &&
    info.storage === undefined &&
    info.conversion === undefined &&
    info.schema === undefined
  );
}

/** A handed-over body with a root and metadata of its own (which decoding and the update change in place). */
function ownRootAndMetadata(body: unknown): unknown {
  if (!isPlainObject(body)) return body;
  const root: Record<string, unknown> = { ...body };
  if (isPlainObject(body.metadata)) root.metadata = { ...body.metadata };
  return root;
}

/** An object of a kind served from another's storage, as the client sees it (and back). */
function fromStorage(info: KindInfo, obj: KubeObject): MaybePromise<KubeObject> {
  if (info.conversion) return then(info.conversion.fromStorage([obj]), (objs) => readAs(info, objs[0]!));
  return readAs(info, info.storage ? info.storage.fromStorage(obj) : obj);
}

/** Stored objects as the client sees them: one conversion for all of them. */
function allFromStorage(info: KindInfo, objs: KubeObject[]): MaybePromise<KubeObject[]> {
  if (info.conversion)
    return then(info.conversion.fromStorage(objs, true), (converted) => converted.map((o) => readAs(info, o)));
  return info.storage || info.onRead
    ? objs.map((o) => readAs(info, info.storage ? info.storage.fromStorage(o) : o))
    : objs;
}

function readAs(info: KindInfo, obj: KubeObject): KubeObject {
  return info.onRead ? info.onRead(obj) : obj;
}

function toStorage(info: KindInfo, obj: KubeObject): MaybePromise<KubeObject> {
  if (info.conversion) return info.conversion.toStorage(obj);
  return info.storage ? info.storage.toStorage(obj) : obj;
}

/**
 * Watch events of a shared table, converted for the kind watched. Conversions that call out (a conversion webhook)
 * are started as events come and delivered in the order the events came; one that fails ends the watch with an
 * ERROR event carrying its Status, as kube-apiserver's watch does.
 */
function convertingSink(info: KindInfo, sink: WatchSink): WatchSink {
  const conversion = info.conversion;
  const converted = (event: StoreEvent, objs: KubeObject[]): StoreEvent =>
    new StoreEvent(event.type, readAs(info, objs[0]!), objs[1] && readAs(info, objs[1]), event.revision);
  if (!conversion)
    return {
      send: (type, event) =>
        sink.send(
          type,
          converted(
            event,
            event.prevObject
              ? [sync(fromStorage(info, event.object)), sync(fromStorage(info, event.prevObject))]
              : [sync(fromStorage(info, event.object))],
          ),
        ),
      close: () => sink.close(),
    };
  let queue: Promise<void> = Promise.resolve();
  let waiting = 0;
  let closed = false;
  const end = (): void => {
    if (closed) return;
    closed = true;
    sink.close();
  };
  return {
    send: (type, event) => {
      if (closed) return false;
      const result = conversion.fromStorage(event.prevObject ? [event.object, event.prevObject] : [event.object]);
      if (!(result instanceof Promise) && waiting === 0) return sink.send(type, converted(event, result));
      waiting++;
      queue = queue.then(() =>
        Promise.resolve(result).then(
          (objs) => {
            waiting--;
            if (!closed && !sink.send(type, converted(event, objs))) end();
          },
          (err: unknown) => {
            waiting--;
            if (closed) return;
            const status = (err instanceof ApiError ? err : Errors.internal(String(err))).toStatus();
            sink.send('ERROR', new StoreEvent('ADDED', status as unknown as KubeObject, undefined, event.revision));
            end();
          },
        ),
      );
      return true;
    },
    close: end,
  };
}

/** managedFields as stored: absent rather than empty (Go omitempty). */
function setManagedFields(obj: KubeObject, entries: unknown[]): void {
  const meta = { ...obj.metadata };
  if (entries.length > 0) meta.managedFields = entries;
  else delete meta.managedFields;
  obj.metadata = meta;
}

function hasGeneration(info: KindInfo): boolean {
  return info.generation === true;
}

function scoped(info: KindInfo, namespace: string | undefined): string | undefined {
  return info.namespaced ? namespace : undefined;
}

/** Fields the server owns: a client's update may not change them (rest.BeforeUpdate). */
function keepServerOwnedMeta(next: KubeObject, current: KubeObject): void {
  const meta = next.metadata;
  meta.uid = current.metadata.uid;
  meta.creationTimestamp = current.metadata.creationTimestamp;
  meta.resourceVersion = current.metadata.resourceVersion;
  if (current.metadata.namespace !== undefined) meta.namespace = current.metadata.namespace;
  if (current.metadata.generation !== undefined) meta.generation = current.metadata.generation;
  for (const f of ['deletionTimestamp', 'deletionGracePeriodSeconds'] as const) {
    if (current.metadata[f] === undefined) delete meta[f];
    else meta[f] = current.metadata[f] as never;
  }
  delete meta.selfLink;
}

/** An object being deleted goes once its finalizers are gone and its grace period is over. */
/** The Go package of a built-in kind's internal type, as reflect names it: core.ConfigMap, apps.Deployment, rbac.Role. */
function internalPackage(info: KindInfo): string {
  if (info.group === '' || info.group === 'events.k8s.io') return 'core';
  return info.group.split('.')[0]!;
}

function shouldDeleteDuringUpdate(info: KindInfo, obj: KubeObject): boolean {
  const meta = obj.metadata;
  return (
    meta.deletionTimestamp !== undefined &&
    (meta.finalizers ?? []).length === 0 &&
    (info.strategy?.specFinalizers?.(obj) ?? []).length === 0 &&
    (meta.deletionGracePeriodSeconds ?? 0) === 0
  );
}

function successStatus(info: KindInfo, obj: KubeObject): Status {
  const details = orderedDetails({
    name: obj.metadata.name!,
    group: info.group,
    kind: info.resource,
    uid: obj.metadata.uid!,
  });
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details, code: 200 };
}

/** The continue token kube-apiserver hands out: base64 of {v, rv, start} (start = the key to resume after). */
function encodeContinue(revision: number, after: string): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: revision, start: `${after}\u0000` })).toString(
    'base64url',
  );
}

function decodeContinue(token: string): { revision: number; after: string } {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (
      isPlainObject(parsed) &&
      parsed.v === 'meta.k8s.io/v1' &&
      typeof parsed.rv === 'number' &&
      typeof parsed.start === 'string'
    ) {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: kube-apiserver's continue keys end in a NUL
      return { revision: parsed.rv, after: parsed.start.replace(/\u0000$/, '') };
    }
  } catch {
    // fall through to the error below
  }
  throw Errors.badRequest(
    'continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
  );
}
