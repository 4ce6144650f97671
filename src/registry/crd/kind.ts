import { rfc3339 } from '../../clock/clock.js';
import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { col } from '../printers.js';
import type { KindInfo, StrategyContext } from '../types.js';
import { validateRuleSyntax } from './cel.js';
import { validateStructural, type JSONSchemaProps } from './schema-validation.js';

/**
 * apiextensions.k8s.io/v1 CustomResourceDefinition as a built-in kind: defaults and validation with
 * kube-apiserver's messages, names accepted and Established at once, and the CustomResourceCleanup finalizer
 * with a Terminating condition when a deletion starts (serve.ts removes the instances, then the finalizer).
 */
export const CRD_GROUP = 'apiextensions.k8s.io';
export const CLEANUP_FINALIZER = 'customresourcecleanup.apiextensions.k8s.io';

export interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  deprecated?: boolean;
  deprecationWarning?: string;
  schema?: { openAPIV3Schema?: JSONSchemaProps };
  subresources?: {
    status?: object;
    scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
  };
  additionalPrinterColumns?: Array<{
    name: string;
    type: string;
    format?: string;
    description?: string;
    priority?: number;
    jsonPath: string;
  }>;
  selectableFields?: Array<{ jsonPath: string }>;
}

export interface CrdNames {
  plural: string;
  singular?: string;
  kind: string;
  listKind?: string;
  shortNames?: string[];
  categories?: string[];
}

export interface CrdSpec {
  group: string;
  names: CrdNames;
  scope: 'Namespaced' | 'Cluster';
  versions: CrdVersion[];
  conversion?: CrdConversion;
}

/** spec.conversion: None (apiVersion rewritten), or a ConversionReview webhook. */
export interface CrdConversion {
  strategy?: string;
  webhook?: { clientConfig?: Record<string, unknown>; conversionReviewVersions?: string[] };
}

/**
 * validateCustomResourceConversion, its errors under the internal field names kube-apiserver reports
 * (webhookClientConfig, conversionReviewVersions) as it does for v1 objects too.
 */
function validateConversion(conversion: CrdConversion | undefined): StatusCause[] {
  if (!isPlainObject(conversion)) return [];
  const causes: StatusCause[] = [];
  const strategy = conversion.strategy;
  if (strategy !== 'None' && strategy !== 'Webhook') {
    causes.push(FieldErrors.notSupported('spec.conversion.strategy', strategy ?? '', ['None', 'Webhook']));
    return causes;
  }
  const webhook = isPlainObject(conversion.webhook) ? conversion.webhook : undefined;
  const clientConfig = webhook && isPlainObject(webhook.clientConfig) ? webhook.clientConfig : undefined;
  if (strategy === 'Webhook') {
    if (!clientConfig)
      causes.push(
        FieldErrors.required('spec.conversion.webhookClientConfig', 'required when strategy is set to Webhook'),
      );
    else if ((clientConfig.url === undefined) === (clientConfig.service === undefined))
      causes.push(
        FieldErrors.required('spec.conversion.webhookClientConfig', 'exactly one of url or service is required'),
      );
    const versions = Array.isArray(webhook?.conversionReviewVersions) ? webhook.conversionReviewVersions : [];
    if (!versions.some((v) => v === 'v1' || v === 'v1beta1'))
      causes.push(
        FieldErrors.required('spec.conversion.conversionReviewVersions', 'must include at least one of v1, v1beta1'),
      );
  } else if (clientConfig)
    causes.push(
      FieldErrors.forbidden(
        'spec.conversion.webhookClientConfig',
        'should not be set when strategy is not set to Webhook',
      ),
    );
  return causes;
}

export function crdSpec(obj: KubeObject): CrdSpec {
  return (isPlainObject(obj.spec) ? obj.spec : {}) as unknown as CrdSpec;
}

interface Condition {
  type: string;
  status: string;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/**
 * Sets (or replaces) a condition, keeping lastTransitionTime when the status did not change. Copy on write: the
 * store's update and delete paths hand strategies objects whose status is still the stored object's.
 */
export function setCondition(obj: KubeObject, condition: Condition): void {
  const status = { ...(isPlainObject(obj.status) ? obj.status : {}) } as { conditions?: Condition[] };
  const list = Array.isArray(status.conditions) ? [...status.conditions] : [];
  const i = list.findIndex((c) => c.type === condition.type);
  if (i < 0) list.push(condition);
  else
    list[i] =
      list[i]!.status === condition.status
        ? { ...condition, lastTransitionTime: list[i]!.lastTransitionTime }
        : condition;
  status.conditions = list;
  obj.status = status;
}

const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_MESSAGE =
  "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_MESSAGE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

function defaults(obj: KubeObject): void {
  if (!isPlainObject(obj.spec)) return;
  const spec = obj.spec as Record<string, unknown>;
  if (isPlainObject(spec.names)) {
    const names = spec.names as Record<string, unknown>;
    if (!names.singular && typeof names.kind === 'string') names.singular = names.kind.toLowerCase();
    if (!names.listKind && typeof names.kind === 'string' && names.kind) names.listKind = `${names.kind}List`;
  }
  // SetDefaults_CustomResourceDefinitionSpec; a conversion emptied by an apply that dropped the defaulted strategy
  // (kubectl's client-side to server-side apply migration) is None again, as the defaulted field comes back in Go.
  if (!isPlainObject(spec.conversion)) spec.conversion = { strategy: 'None' };
  else if (spec.conversion.strategy === undefined) spec.conversion.strategy = 'None';
  for (const v of Array.isArray(spec.versions) ? spec.versions : []) {
    if (!isPlainObject(v)) continue;
    for (const c of Array.isArray(v.additionalPrinterColumns) ? v.additionalPrinterColumns : []) {
      if (isPlainObject(c) && c.priority === undefined) c.priority = 0;
    }
  }
}

/**
 * What the CRD strategy needs besides StrategyContext: the stored CRDs of a group, whose status.acceptedNames
 * are the names taken there. The cluster's strategy context provides it.
 */
export interface CrdNamesLookup {
  crdsOfGroup(group: string): readonly KubeObject[];
}

function hasNamesLookup(ctx: StrategyContext): ctx is StrategyContext & CrdNamesLookup {
  return typeof (ctx as Partial<CrdNamesLookup>).crdsOfGroup === 'function';
}

/** CustomResourceDefinitionNames as Go serialises it: plural and kind always, the rest when set. */
function namesJson(names: Partial<CrdNames>): Record<string, unknown> {
  const out: Record<string, unknown> = { plural: names.plural ?? '' };
  if (names.singular) out.singular = names.singular;
  if (names.shortNames?.length) out.shortNames = names.shortNames;
  out.kind = names.kind ?? '';
  if (names.listKind) out.listKind = names.listKind;
  if (names.categories?.length) out.categories = names.categories;
  return out;
}

/** equalToAcceptedOrFresh: a requested name is fine if it is already ours or nobody in the group has it. */
function nameConflict(
  requested: string | undefined,
  accepted: string | undefined,
  used: ReadonlySet<string>,
): string | undefined {
  if ((requested ?? '') === (accepted ?? '')) return undefined;
  return used.has(requested ?? '') ? `"${requested ?? ''}" is already in use` : undefined;
}

/**
 * status as the apiextensions controllers leave it: the names granted (NamingConditionController: a name another
 * CRD of the group was granted — its plural, singular or a short name; its kind or list kind — is refused, the
 * rest granted, and NamesAccepted says which conflict came last), Established once the names were accepted (at
 * once here, where kube-apiserver's establishing controller takes a moment), the storage version recorded.
 * Established, once True, stays True: the CRD keeps serving under the names it was granted.
 */
function acceptNames(obj: KubeObject, ctx: StrategyContext): void {
  const spec = crdSpec(obj);
  const now = rfc3339(ctx.clock.now());
  // A copy: on update the generic store hands over the stored object's status itself, which must not change.
  const status = (isPlainObject(obj.status) ? deepCopy(obj.status) : {}) as Record<string, unknown>;
  obj.status = status;
  const storage = (spec.versions ?? []).find((v) => v.storage)?.name;
  const stored = Array.isArray(status.storedVersions) ? (status.storedVersions as string[]) : [];
  if (storage && !stored.includes(storage)) stored.push(storage);
  status.storedVersions = stored;

  const requested = (isPlainObject(spec.names) ? spec.names : {}) as Partial<CrdNames>;
  const accepted = (isPlainObject(status.acceptedNames) ? status.acceptedNames : {}) as Partial<CrdNames>;
  if (deepEqual(namesJson(requested), namesJson(accepted)) && isPlainObject(status.acceptedNames)) return;

  // Every CRD of the group counts, this one included (its stored self), as in kube-apiserver.
  const resources = new Set<string>();
  const kinds = new Set<string>();
  for (const other of hasNamesLookup(ctx) ? ctx.crdsOfGroup(spec.group) : []) {
    const names = (
      isPlainObject(other.status) && isPlainObject(other.status.acceptedNames) ? other.status.acceptedNames : {}
    ) as Partial<CrdNames>;
    for (const n of [names.plural, names.singular, ...(names.shortNames ?? [])]) resources.add(n ?? '');
    kinds.add(names.kind ?? '');
    kinds.add(names.listKind ?? '');
  }

  const granted: Partial<CrdNames> = { ...accepted };
  let conflict: { reason: string; message: string } | undefined;
  const check = (
    field: 'plural' | 'singular' | 'kind' | 'listKind',
    used: ReadonlySet<string>,
    reason: string,
  ): void => {
    const message = nameConflict(requested[field], accepted[field], used);
    if (message) conflict = { reason, message };
    else granted[field] = requested[field] as string;
  };
  check('plural', resources, 'PluralConflict');
  check('singular', resources, 'SingularConflict');
  if (!deepEqual(requested.shortNames ?? [], accepted.shortNames ?? [])) {
    const ours = new Set(accepted.shortNames ?? []);
    const taken = (requested.shortNames ?? []).flatMap((short) => {
      // Already ours, or our own plural/singular (which the set above holds because it includes us): no conflict.
      if (ours.has(short) || short === accepted.plural || short === accepted.singular) return [];
      const message = nameConflict(short, '', resources);
      return message ? [message] : [];
    });
    // utilerrors.NewAggregate: one error as is, several as a bracketed list.
    if (taken.length > 0)
      conflict = { reason: 'ShortNamesConflict', message: taken.length === 1 ? taken[0]! : `[${taken.join(', ')}]` };
    else granted.shortNames = requested.shortNames;
  }
  check('kind', kinds, 'KindConflict');
  check('listKind', kinds, 'ListKindConflict');
  granted.categories = requested.categories;
  status.acceptedNames = namesJson(granted);

  setCondition(
    obj,
    conflict
      ? { type: 'NamesAccepted', status: 'False', lastTransitionTime: now, ...conflict }
      : {
          type: 'NamesAccepted',
          status: 'True',
          lastTransitionTime: now,
          reason: 'NoConflicts',
          message: 'no conflicts found',
        },
  );
  const established = (status.conditions as Condition[] | undefined)?.find((c) => c.type === 'Established');
  if (established?.status === 'True') return;
  setCondition(
    obj,
    conflict
      ? {
          type: 'Established',
          status: 'False',
          lastTransitionTime: now,
          reason: 'NotAccepted',
          message: 'not all names are accepted',
        }
      : {
          type: 'Established',
          status: 'True',
          lastTransitionTime: now,
          reason: 'InitialNamesAccepted',
          message: 'the initial names have been accepted',
        },
  );
}

/** Whether kube-apiserver serves the CRD's kind: Established, or at least its names accepted. */
export function isServed(crd: KubeObject): boolean {
  const conditions = (
    isPlainObject(crd.status) && Array.isArray(crd.status.conditions) ? crd.status.conditions : []
  ) as Condition[];
  return conditions.some((c) => (c.type === 'Established' || c.type === 'NamesAccepted') && c.status === 'True');
}

/** The names a CRD is served under: status.acceptedNames once granted (spec.names for a CRD not stored yet). */
export function servedNames(crd: KubeObject): CrdNames {
  const status = isPlainObject(crd.status) ? crd.status : {};
  return (isPlainObject(status.acceptedNames) ? status.acceptedNames : crdSpec(crd).names) as unknown as CrdNames;
}

export function validateCrd(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const spec = crdSpec(obj);
  const names = isPlainObject(spec.names) ? spec.names : ({} as CrdNames);
  const group = typeof spec.group === 'string' ? spec.group : '';
  if (obj.metadata.name && obj.metadata.name !== `${names.plural ?? ''}.${group}`) {
    causes.push(FieldErrors.invalid('metadata.name', obj.metadata.name, 'must be spec.names.plural+"."+spec.group'));
  }
  if (!group) causes.push(FieldErrors.required('spec.group', ''));
  else if (!DNS1123_SUBDOMAIN.test(group)) causes.push(FieldErrors.invalid('spec.group', group, DNS1123_MESSAGE));
  else if (group.split('.').length < 2)
    causes.push(FieldErrors.invalid('spec.group', group, 'should be a domain with at least one dot'));
  // Kubernetes' own groups need the API review's approval (KEP 1111).
  if (/(^|\.)(k8s|kubernetes)\.io$/.test(group) && !obj.metadata.annotations?.['api-approved.kubernetes.io']) {
    causes.push(
      FieldErrors.required(
        'metadata.annotations[api-approved.kubernetes.io]',
        'protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111',
      ),
    );
  }
  if (!spec.scope) causes.push(FieldErrors.required('spec.scope', ''));
  else if (spec.scope !== 'Cluster' && spec.scope !== 'Namespaced')
    causes.push(FieldErrors.notSupported('spec.scope', spec.scope, ['Cluster', 'Namespaced']));
  const versions = Array.isArray(spec.versions) ? spec.versions : [];
  let storageCount = 0;
  const seen = new Set<string>();
  versions.forEach((v, i) => {
    const at = `spec.versions[${i}]`;
    if (v.storage) storageCount++;
    if (!v.name) causes.push(FieldErrors.required(`${at}.name`, ''));
    else if (!DNS1035.test(v.name)) causes.push(FieldErrors.invalid(`${at}.name`, v.name, DNS1035_MESSAGE));
    else if (seen.has(v.name)) causes.push(FieldErrors.duplicate(`${at}.name`, v.name));
    seen.add(v.name);
    const schema = v.schema?.openAPIV3Schema;
    if (!isPlainObject(schema))
      causes.push(FieldErrors.required(`${at}.schema.openAPIV3Schema`, 'schemas are required'));
    else
      causes.push(
        ...validateStructural(schema, `${at}.schema.openAPIV3Schema`),
        ...validateRuleSyntax(schema, `${at}.schema.openAPIV3Schema`),
      );
    const scale = v.subresources?.scale;
    if (scale) {
      if (!scale.specReplicasPath) causes.push(FieldErrors.required(`${at}.subresources.scale.specReplicasPath`, ''));
      else if (!scale.specReplicasPath.startsWith('.spec.'))
        causes.push(
          FieldErrors.invalid(
            `${at}.subresources.scale.specReplicasPath`,
            scale.specReplicasPath,
            'should be a json path under .spec',
          ),
        );
      if (!scale.statusReplicasPath)
        causes.push(FieldErrors.required(`${at}.subresources.scale.statusReplicasPath`, ''));
      else if (!scale.statusReplicasPath.startsWith('.status.'))
        causes.push(
          FieldErrors.invalid(
            `${at}.subresources.scale.statusReplicasPath`,
            scale.statusReplicasPath,
            'should be a json path under .status',
          ),
        );
    }
    (v.additionalPrinterColumns ?? []).forEach((c, j) => {
      const cat = `${at}.additionalPrinterColumns[${j}]`;
      if (!c.name) causes.push(FieldErrors.required(`${cat}.name`, ''));
      if (!c.jsonPath) causes.push(FieldErrors.required(`${cat}.jsonPath`, ''));
      if (!['integer', 'number', 'string', 'boolean', 'date'].includes(c.type))
        causes.push(
          FieldErrors.notSupported(`${cat}.type`, c.type, ['integer', 'number', 'string', 'boolean', 'date']),
        );
    });
  });
  causes.push(...validateConversion(spec.conversion));
  if (versions.length === 0)
    causes.push(
      FieldErrors.invalid('spec.versions', versions, 'must have exactly one version marked as storage version'),
    );
  else if (storageCount !== 1)
    causes.push(
      FieldErrors.invalid('spec.versions', versions, 'must have exactly one version marked as storage version'),
    );
  if (!names.plural) causes.push(FieldErrors.required('spec.names.plural', ''));
  else if (!DNS1035.test(names.plural))
    causes.push(FieldErrors.invalid('spec.names.plural', names.plural, DNS1035_MESSAGE));
  if (names.singular && !DNS1035.test(names.singular))
    causes.push(FieldErrors.invalid('spec.names.singular', names.singular, DNS1035_MESSAGE));
  if (!names.kind) causes.push(FieldErrors.required('spec.names.kind', ''));
  else if (!DNS1035.test(names.kind.toLowerCase()))
    causes.push(
      FieldErrors.invalid(
        'spec.names.kind',
        names.kind,
        `may have mixed case, but should otherwise match: ${DNS1035_MESSAGE}`,
      ),
    );
  if (names.kind && names.kind === names.listKind)
    causes.push(FieldErrors.invalid('spec.names.listKind', names.listKind, 'kind and listKind may not be the same'));
  (names.shortNames ?? []).forEach((s, i) => {
    if (!DNS1035.test(s)) causes.push(FieldErrors.invalid(`spec.names.shortNames[${i}]`, s, DNS1035_MESSAGE));
  });
  return causes;
}

/**
 * The CRD kind's schema in /openapi/v3, to the depth kubectl needs (explain, client-side apply's patches); the
 * JSONSchemaProps inside versions[].schema are left open.
 */
const str = (description: string): Record<string, unknown> => ({ type: 'string', description });
const strings = (description: string): Record<string, unknown> => ({
  type: 'array',
  description,
  items: { type: 'string', default: '' },
  'x-kubernetes-list-type': 'atomic',
});
const open = (description: string): Record<string, unknown> => ({
  type: 'object',
  description,
  'x-kubernetes-preserve-unknown-fields': true,
});
const CRD_OPENAPI: Record<string, unknown> = {
  description:
    'CustomResourceDefinition represents a resource that should be exposed on the API server.  Its name MUST be in the format <.spec.name>.<.spec.group>.',
  type: 'object',
  required: ['spec'],
  properties: {
    apiVersion: str('APIVersion defines the versioned schema of this representation of an object.'),
    kind: str('Kind is a string value representing the REST resource this object represents.'),
    metadata: {
      description: "Standard object's metadata.",
      allOf: [{ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' }],
      default: {},
    },
    spec: {
      description: 'spec describes how the user wants the resources to appear',
      type: 'object',
      required: ['group', 'names', 'scope', 'versions'],
      properties: {
        group: str(
          'group is the API group of the defined custom resource. The custom resources are served under `/apis/<group>/...`. Must match the name of the CustomResourceDefinition (in the form `<names.plural>.<group>`).',
        ),
        names: {
          description: 'names specify the resource and kind names for the custom resource.',
          type: 'object',
          required: ['plural', 'kind'],
          properties: {
            categories: strings(
              "categories is a list of grouped resources this custom resource belongs to (e.g. 'all').",
            ),
            kind: str('kind is the serialized kind of the resource. It is normally CamelCase and singular.'),
            listKind: str('listKind is the serialized kind of the list for this resource. Defaults to "`kind`List".'),
            plural: str(
              'plural is the plural name of the resource to serve. The custom resources are served under `/apis/<group>/<version>/.../<plural>`.',
            ),
            shortNames: strings('shortNames are short names for the resource, exposed in API discovery documents.'),
            singular: str(
              'singular is the singular name of the resource. It must be all lowercase. Defaults to lowercased `kind`.',
            ),
          },
        },
        scope: str(
          'scope indicates whether the defined custom resource is cluster- or namespace-scoped. Allowed values are `Cluster` and `Namespaced`.',
        ),
        versions: {
          description: 'versions is the list of all API versions of the defined custom resource.',
          type: 'array',
          'x-kubernetes-list-type': 'atomic',
          items: {
            type: 'object',
            default: {},
            required: ['name', 'served', 'storage'],
            properties: {
              additionalPrinterColumns: {
                type: 'array',
                description: 'additionalPrinterColumns specifies additional columns returned in Table output.',
                'x-kubernetes-list-type': 'atomic',
                items: open('CustomResourceColumnDefinition specifies a column for server side printing.'),
              },
              deprecated: {
                type: 'boolean',
                description: 'deprecated indicates this version of the custom resource API is deprecated.',
              },
              deprecationWarning: str('deprecationWarning overrides the default warning returned to API clients.'),
              name: str('name is the version name, e.g. "v1", "v2beta1", etc.'),
              schema: open(
                'schema describes the schema used for validation, pruning, and defaulting of this version of the custom resource.',
              ),
              selectableFields: {
                type: 'array',
                description: 'selectableFields specifies paths to fields that may be used as field selectors.',
                'x-kubernetes-list-type': 'atomic',
                items: open(
                  'SelectableField specifies the JSON path of a field that may be used with field selectors.',
                ),
              },
              served: {
                type: 'boolean',
                description: 'served is a flag enabling/disabling this version from being served via REST APIs',
              },
              storage: {
                type: 'boolean',
                description:
                  'storage indicates this version should be used when persisting custom resources to storage. There must be exactly one version with storage=true.',
              },
              subresources: open(
                'subresources specify what subresources this version of the defined custom resource have.',
              ),
            },
          },
        },
        conversion: open('conversion defines conversion settings for the CRD.'),
        preserveUnknownFields: {
          type: 'boolean',
          description:
            'preserveUnknownFields indicates that object fields which are not specified in the OpenAPI schema should be preserved when persisting to storage.',
        },
      },
    },
    status: open('status indicates the actual state of the CustomResourceDefinition'),
  },
  'x-kubernetes-group-version-kind': [
    { group: 'apiextensions.k8s.io', kind: 'CustomResourceDefinition', version: 'v1' },
  ],
};

export const customResourceDefinitions: KindInfo = {
  group: CRD_GROUP,
  version: 'v1',
  kind: 'CustomResourceDefinition',
  resource: 'customresourcedefinitions',
  singular: 'customresourcedefinition',
  namespaced: false,
  shortNames: ['crd', 'crds'],
  categories: ['api-extensions'],
  status: true,
  generation: true,
  columns: [
    col('Created At', (o) => o.metadata.creationTimestamp ?? '', {
      type: 'date',
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
  ],
  noAge: true,
  schema: { openapi: CRD_OPENAPI, pruneUnknownFields: () => [] },
  strategy: {
    defaults,
    prepareForCreate(obj, ctx) {
      acceptNames(obj, ctx);
    },
    prepareForUpdate(next, _old, ctx) {
      if (!next.metadata.deletionTimestamp) acceptNames(next, ctx);
    },
    validate: validateCrd,
    validateUpdate(next, old) {
      const causes: StatusCause[] = [];
      const a = crdSpec(next);
      const b = crdSpec(old);
      if (a.group !== b.group) causes.push(FieldErrors.invalid('spec.group', a.group, 'field is immutable'));
      if (a.names?.plural !== b.names?.plural)
        causes.push(FieldErrors.invalid('spec.names.plural', a.names?.plural, 'field is immutable'));
      if (a.scope !== b.scope) causes.push(FieldErrors.invalid('spec.scope', a.scope, 'field is immutable'));
      return causes;
    },
    finalizersOnDelete: () => [CLEANUP_FINALIZER],
    prepareForDelete(obj) {
      setCondition(obj, {
        type: 'Terminating',
        status: 'True',
        lastTransitionTime: obj.metadata.deletionTimestamp ?? '',
        reason: 'InstanceDeletionPending',
        message: 'CustomResourceDefinition marked for deletion; instance deletion is pending',
      });
    },
  },
};
