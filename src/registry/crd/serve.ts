import { ApiError } from '../../api/errors.js';
import { settle } from '../../api/maybe-async.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { evaluateJsonPath } from '../../api/jsonpath.js';
import type { MemoryStore } from '../../storage/memory-store.js';
import type { GenericStore } from '../generic-store.js';
import { field, humanDuration } from '../printers.js';
import type { Registry } from '../registry.js';
import { resourceKey, type KindInfo, type TableColumn } from '../types.js';
import {
  CLEANUP_FINALIZER,
  crdSpec,
  customResourceDefinitions,
  isServed,
  servedNames,
  setCondition,
  type CrdNames,
  type CrdSpec,
  type CrdVersion,
} from './kind.js';
import { defineCrdTypes, forgetCrdTypes } from './apply-types.js';
import { webhookConversion } from './conversion.js';
import type { WebhookClients } from '../webhook-client.js';
import type { SeededRandom } from '../../clock/random.js';
import { hasRules, validateRules } from './cel.js';
import { applyDefaults, hasDefaults, prune, validateSchema, type JSONSchemaProps } from './schema-validation.js';

/** What conversion webhooks are called with. */
export interface ConversionClients {
  clients: WebhookClients;
  random: SeededRandom;
}

/**
 * Serves the custom resources of every CustomResourceDefinition as registry rows, kept in step with the CRD
 * table: a row per served version (objects stored once, under the storage version's table; the other versions
 * are the same objects with their apiVersion rewritten — conversion strategy None), and, when a CRD is being
 * deleted, the instance cleanup that ends with removing its customresourcecleanup finalizer.
 */
const CRD_KEY = resourceKey(customResourceDefinitions);
const OBJECT_META_REF = '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';

export function serveCustomResources(
  registry: Registry,
  store: MemoryStore,
  api: GenericStore,
  conversions?: ConversionClients,
): void {
  const rows = new Map<string, KindInfo[]>();
  /** CRDs being deleted, by the table of their instances (a change there may let the cleanup finish). */
  const terminating = new Map<string, string>();
  /** Every CRD being deleted, served or not (one never Established has no table). */
  const deleting = new Set<string>();
  let pending = false;

  const sync = (crd: KubeObject): void => {
    const name = crd.metadata.name!;
    // Not served until its names are accepted (a conflict with another CRD of the group keeps it off).
    const next = (isServed(crd) ? rowsOf(crd, conversions) : []).filter((info) => {
      const existing = registry.lookup(info.group, info.version, info.resource);
      return !existing || (rows.get(name) ?? []).includes(existing);
    });
    // The storage version's row first: it registers the table the others share.
    for (const info of next) registry.add(info);
    for (const old of rows.get(name) ?? []) {
      if (next.some((n) => n.version === old.version && n.resource === old.resource)) continue;
      registry.remove(old);
      if (!next.some((n) => n.version === old.version && n.kind === old.kind))
        forgetCrdTypes(old.group, old.version, old.kind);
    }
    rows.set(name, next);
    if (crd.metadata.deletionTimestamp) {
      deleting.add(name);
      if (next[0]) terminating.set(resourceKey(next[0]), name);
    }
  };

  const drop = (name: string): void => {
    const old = rows.get(name) ?? [];
    // Non-storage versions first, so the table goes with the last row.
    for (const info of [...old].reverse()) {
      registry.remove(info);
      forgetCrdTypes(info.group, info.version, info.kind);
    }
    rows.delete(name);
    deleting.delete(name);
    for (const [key, crd] of terminating) if (crd === name) terminating.delete(key);
  };

  const cleanup = (): void => {
    pending = false;
    for (const name of [...deleting]) {
      const crd = store.get(CRD_KEY, undefined, name);
      if (!crd?.metadata.deletionTimestamp || !(crd.metadata.finalizers ?? []).includes(CLEANUP_FINALIZER)) continue;
      const storage = rows.get(name)?.[0];
      if (storage) {
        for (const obj of store.all(resourceKey(storage))) {
          if (obj.metadata.deletionTimestamp) continue;
          try {
            const deleted = api.delete(storage, obj.metadata.namespace, obj.metadata.name!, { internal: true });
            // An instance kept in an older version waits for its conversion webhook; its deletion brings us back.
            if (deleted instanceof Promise) deleted.catch(() => undefined);
          } catch (err) {
            if (!(err instanceof ApiError && err.code === 404)) throw err;
          }
        }
        // Instances held by finalizers of their own: the next change to the table looks again.
        if (store.all(resourceKey(storage)).length > 0) continue;
      }
      const finalized = api.writeUpdate(
        customResourceDefinitions,
        undefined,
        name,
        {},
        (current) => {
          const next = deepCopy(current);
          next.metadata.finalizers = (next.metadata.finalizers ?? []).filter((f) => f !== CLEANUP_FINALIZER);
          // Never served (its names refused): no instances to remove, as kube-apiserver's finalizer says.
          const outcome = storage
            ? { reason: 'InstanceDeletionCompleted', message: 'removed all instances' }
            : { reason: 'NeverEstablished', message: 'resource was never established' };
          setCondition(next, {
            type: 'Terminating',
            status: 'False',
            lastTransitionTime: next.metadata.deletionTimestamp ?? '',
            ...outcome,
          });
          return next;
        },
        { internal: true },
      );
      // With etcd, another API server may have finished the same CRD first: its change brings us back, if need be.
      settle(finalized, () => undefined);
    }
  };

  const schedule = (): void => {
    if (pending) return;
    pending = true;
    queueMicrotask(() => {
      try {
        cleanup();
      } catch {
        // A conflicting write: the change it made brings us back here.
      }
    });
  };

  /**
   * Names another CRD of the group gave up (it went, or was granted other names) may be what a waiting CRD
   * asked for: its strategy looks again (NamingConditionController's requeueAllOtherGroupCRDs). A CRD whose
   * names are all granted is left alone, so the no-op writes end there.
   */
  const reconsiderGroup = (group: string, except: string): void => {
    queueMicrotask(() => {
      for (const crd of store.all(CRD_KEY)) {
        const name = crd.metadata.name!;
        if (name === except || crdSpec(crd).group !== group || crd.metadata.deletionTimestamp) continue;
        if (deepEqual(servedNames(crd), crdSpec(crd).names)) continue;
        try {
          api.writeUpdate(customResourceDefinitions, undefined, name, {}, (current) => deepCopy(current), {
            internal: true,
          });
        } catch (err) {
          // Gone meanwhile: nothing to reconsider.
          if (!(err instanceof ApiError && err.code === 404)) throw err;
        }
      }
    });
  };

  store.onChange((key, event) => {
    if (key === CRD_KEY) {
      if (event.type === 'DELETED') drop(event.object.metadata.name!);
      else sync(event.object);
      if (event.type !== 'DELETED' && event.object.metadata.deletionTimestamp) schedule();
      const released =
        event.type === 'DELETED' ||
        (event.prevObject !== undefined &&
          !deepEqual(acceptedNamesOf(event.prevObject), acceptedNamesOf(event.object)));
      if (released) reconsiderGroup(crdSpec(event.object).group, event.object.metadata.name!);
    } else if (terminating.has(key)) schedule();
  });
  for (const crd of store.all(CRD_KEY)) sync(crd);
  if (deleting.size > 0) schedule();
}

function acceptedNamesOf(crd: KubeObject): unknown {
  return isPlainObject(crd.status) ? crd.status.acceptedNames : undefined;
}

/** The registry rows of a CRD, under the names it was granted: one per served version, the storage version's first. */
export function rowsOf(crd: KubeObject, conversions?: ConversionClients): KindInfo[] {
  const spec = crdSpec(crd);
  const names = servedNames(crd);
  const storage = spec.versions?.find((v) => v.storage);
  if (!storage || !names?.plural || !names.kind) return [];
  const served = spec.versions.filter((v) => v.served);
  served.sort((a, b) => (a === storage ? -1 : b === storage ? 1 : 0));
  const terminating = crd.metadata.deletionTimestamp !== undefined;
  return served.map((v) => {
    const row = rowOf(spec, names, v, v === storage ? undefined : storage.name, terminating);
    if (conversions && spec.conversion?.strategy === 'Webhook')
      row.conversion = webhookConversion(conversions.clients, conversions.random, spec.conversion, {
        group: spec.group,
        kind: names.kind,
        version: v.name,
        storageVersion: storage.name,
      });
    return row;
  });
}

function rowOf(
  spec: CrdSpec,
  names: CrdNames,
  version: CrdVersion,
  storageVersion: string | undefined,
  terminating: boolean,
): KindInfo {
  const schema: JSONSchemaProps = version.schema?.openAPIV3Schema ?? {
    type: 'object',
    'x-kubernetes-preserve-unknown-fields': true,
  };
  const rules = hasRules(schema);
  const info: KindInfo = {
    group: spec.group,
    version: version.name,
    kind: names.kind,
    resource: names.plural,
    singular: names.singular || names.kind.toLowerCase(),
    namespaced: spec.scope !== 'Cluster',
    generation: true,
    strategy: {
      defaults(obj) {
        prune(obj, schema);
        applyDefaults(obj, schema);
      },
      validate: (obj) => {
        const causes = validateSchema(obj, schema);
        return rules && causes.length === 0 ? validateRules(obj, schema) : causes;
      },
      validateUpdate: (next, old) => (rules ? validateRules(next, schema, old) : []),
      prepareForCreate() {
        if (terminating)
          throw new ApiError(
            405,
            'MethodNotAllowed',
            'create not allowed while custom resource definition is terminating',
          );
      },
    },
    schema: {
      openapi: openapiSchema(spec.group, names.kind, version.name, schema),
      pruneUnknownFields: (obj) => prune(obj, schema),
      typeName: defineCrdTypes(spec.group, version.name, names.kind, schema),
      strategicMergePatch: false,
    },
  };
  if (names.shortNames?.length) info.shortNames = names.shortNames;
  if (names.categories?.length) info.categories = names.categories;
  if (version.subresources?.status) info.status = true;
  const scale = version.subresources?.scale;
  if (scale)
    info.scale = {
      specReplicasPath: scale.specReplicasPath.replace(/^\./, ''),
      statusReplicasPath: scale.statusReplicasPath.replace(/^\./, ''),
    };
  if (hasDefaults(schema)) {
    // Defaults apply on read too: objects stored before a default was added show it.
    info.onRead = (obj) => {
      const copy = deepCopy(obj);
      applyDefaults(copy, schema);
      return deepEqual(copy, obj) ? obj : copy;
    };
  }
  if (version.selectableFields?.length) {
    // `kubectl get --field-selector spec.color=blue` (CustomResourceFieldSelectors, on in 1.32).
    info.selectableFields = Object.fromEntries(
      version.selectableFields.map((f) => {
        const path = f.jsonPath.replace(/^\./, '');
        return [
          path,
          (obj: KubeObject) => {
            const v = field(obj, path);
            return v === undefined || v === null ? undefined : String(v);
          },
        ];
      }),
    );
  }
  if (version.additionalPrinterColumns?.length) {
    info.columns = version.additionalPrinterColumns.map(printerColumn);
    info.noAge = true;
  }
  if (storageVersion) {
    const gv = (v: string): string => `${spec.group}/${v}`;
    info.storage = {
      group: spec.group,
      resource: names.plural,
      toStorage: (obj) => ({ ...obj, apiVersion: gv(storageVersion) }),
      fromStorage: (obj) => ({ ...obj, apiVersion: gv(version.name) }),
    };
  }
  return info;
}

/** An additionalPrinterColumn: its JSONPath's first value; dates as an age, as kube-apiserver's table convertor prints them. */
function printerColumn(c: NonNullable<CrdVersion['additionalPrinterColumns']>[number]): TableColumn {
  const type = (['integer', 'number', 'boolean', 'date'].includes(c.type) ? c.type : 'string') as TableColumn['type'];
  const column: TableColumn = {
    name: c.name,
    type,
    description: c.description ?? '',
    cell(obj, now) {
      let values: unknown[];
      try {
        values = evaluateJsonPath(obj, `{${c.jsonPath}}`);
      } catch {
        values = [];
      }
      const value = values[0];
      if (value === undefined || value === null) return null as unknown as string;
      if (type === 'date' && typeof value === 'string') {
        const t = Date.parse(value);
        return Number.isNaN(t) ? value : humanDuration(now - t);
      }
      if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
      return JSON.stringify(value);
    },
  };
  if (c.format) column.format = c.format;
  if (c.priority) column.priority = c.priority;
  return column;
}

/** The version's schema as /openapi/v3 publishes it (kubectl explain reads it): apiVersion, kind and metadata added. */
function openapiSchema(group: string, kind: string, version: string, schema: JSONSchemaProps): Record<string, unknown> {
  const copy = deepCopy(schema) as Record<string, unknown>;
  const properties = isPlainObject(copy.properties) ? copy.properties : {};
  copy.properties = {
    apiVersion: {
      description:
        'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources',
      type: 'string',
    },
    kind: {
      description:
        'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
      type: 'string',
    },
    metadata: {},
    ...properties,
  };
  (copy.properties as Record<string, unknown>).metadata = {
    description:
      "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    allOf: [{ $ref: OBJECT_META_REF }],
  };
  copy['x-kubernetes-group-version-kind'] = [{ group, kind, version }];
  return copy;
}
