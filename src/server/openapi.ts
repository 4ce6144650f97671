import { createHash } from 'node:crypto';
import {
  reachableTypes,
  schemaNameForKind,
  typeInfo,
  type Property,
  type Shape,
  type TypeInfo,
} from '../api/schema/schema.js';
import type { Registry } from '../registry/registry.js';
import { groupVersion, type KindInfo } from '../registry/types.js';
import { KUBERNETES_VERSION } from '../api/version.js';
import { subresourcesOf } from './discovery.js';

/**
 * OpenAPI v3, derived from the registry and the built-in schemas: the index at /openapi/v3 and one document per
 * group-version, each serialised once. kubectl reads it for `explain` (components.schemas, found through the
 * x-kubernetes-group-version-kind of a path's operations), to learn that the server validates fields itself (a
 * PATCH operation with a `fieldValidation` parameter), and to compute client-side apply's strategic patches
 * (x-kubernetes-patch-merge-key / x-kubernetes-patch-strategy).
 */
const REF = '#/components/schemas/';

/** The schema name kubectl finds a kind under; kinds without a built-in schema (CRDs) get a loose one. */
export function schemaName(info: Pick<KindInfo, 'group' | 'version' | 'kind'>): string {
  const known = schemaNameForKind(info.group, info.version, info.kind);
  if (known) return known;
  const pkg = info.group === '' ? 'core' : info.group.split('.')[0]!;
  return `io.k8s.api.${pkg}.${info.version}.${info.kind}`;
}

const queryParam = (name: string, description: string): unknown => ({
  name,
  in: 'query',
  description,
  schema: { type: 'string', uniqueItems: true },
});
const boolParam = (name: string, description: string): unknown => ({
  name,
  in: 'query',
  description,
  schema: { type: 'boolean', uniqueItems: true },
});
const DRY_RUN = queryParam(
  'dryRun',
  'When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed',
);
const FIELD_MANAGER = queryParam(
  'fieldManager',
  'fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.',
);
const FIELD_VALIDATION = queryParam(
  'fieldValidation',
  'fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.',
);
const FORCE = boolParam(
  'force',
  'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.',
);
const PRETTY = queryParam(
  'pretty',
  "If 'true', then the output is pretty printed. Defaults to 'false' unless the user agent indicates a browser or command-line HTTP tool (curl and wget).",
);
const writeParams = [DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
const listParams = [
  boolParam('allowWatchBookmarks', 'allowWatchBookmarks requests watch events with type "BOOKMARK".'),
  queryParam('continue', 'The continue option should be set when retrieving more results from the server.'),
  queryParam(
    'fieldSelector',
    'A selector to restrict the list of returned objects by their fields. Defaults to everything.',
  ),
  queryParam(
    'labelSelector',
    'A selector to restrict the list of returned objects by their labels. Defaults to everything.',
  ),
  {
    name: 'limit',
    in: 'query',
    description: 'limit is a maximum number of responses to return for a list call.',
    schema: { type: 'integer', uniqueItems: true },
  },
  queryParam(
    'resourceVersion',
    'resourceVersion sets a constraint on what resource versions a request may be served from.',
  ),
  queryParam('resourceVersionMatch', 'resourceVersionMatch determines how resourceVersion is applied to list calls.'),
  boolParam('sendInitialEvents', '`sendInitialEvents=true` may be set together with `watch=true`.'),
  {
    name: 'timeoutSeconds',
    in: 'query',
    description: 'Timeout for the list/watch call.',
    schema: { type: 'integer', uniqueItems: true },
  },
  boolParam(
    'watch',
    'Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.',
  ),
];
const MEDIA = ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf'];

function operation(
  gvk: { group: string; version: string; kind: string },
  action: string,
  id: string,
  description: string,
  ref: string,
  params: unknown[],
  codes: string[] = ['200'],
): Record<string, unknown> {
  const content = Object.fromEntries(MEDIA.map((m) => [m, { schema: { $ref: ref } }]));
  return {
    tags: [gvk.group === '' ? `core_${gvk.version}` : `${gvk.group.split('.')[0]}_${gvk.version}`],
    description,
    operationId: id,
    parameters: params,
    responses: Object.fromEntries(
      codes.map((c) => [c, { description: c === '201' ? 'Created' : c === '202' ? 'Accepted' : 'OK', content }]),
    ),
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': gvk,
  };
}

function withBody(op: Record<string, unknown>, ref: string, types = ['*/*']): Record<string, unknown> {
  return {
    ...op,
    requestBody: { content: Object.fromEntries(types.map((t) => [t, { schema: { $ref: ref } }])), required: true },
  };
}

const PATCH_TYPES = [
  'application/apply-patch+yaml',
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
];
const PATCH_REF = '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch';

function pathsFor(info: KindInfo): Record<string, unknown> {
  const prefix = info.group === '' ? `/api/${info.version}` : `/apis/${info.group}/${info.version}`;
  const collection = info.namespaced
    ? `${prefix}/namespaces/{namespace}/${info.resource}`
    : `${prefix}/${info.resource}`;
  const name = schemaName(info);
  const ref = `${REF}${name}`;
  const listRef = `${REF}${name}List`;
  const gvk = { group: info.group, version: info.version, kind: info.kind };
  const id = (verb: string, suffix = ''): string =>
    `${verb}${info.namespaced ? 'Namespaced' : ''}${info.kind}${suffix}`;
  const nameParam = {
    name: 'name',
    in: 'path',
    description: `name of the ${info.kind}`,
    required: true,
    schema: { type: 'string', uniqueItems: true },
  };
  const nsParam = {
    name: 'namespace',
    in: 'path',
    description: 'object name and auth scope, such as for teams and projects',
    required: true,
    schema: { type: 'string', uniqueItems: true },
  };
  const common = info.namespaced ? [nsParam, PRETTY] : [PRETTY];
  const verbs = new Set(
    info.verbs ?? ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
  );
  const paths: Record<string, unknown> = {};
  const list: Record<string, unknown> = { parameters: common };
  if (verbs.has('list'))
    list.get = operation(
      gvk,
      'list',
      id('list'),
      `list or watch objects of kind ${info.kind}`,
      typeInfo(`${name}List`) ? listRef : ref,
      listParams,
    );
  if (verbs.has('create'))
    list.post = withBody(
      operation(gvk, 'post', id('create'), `create a ${info.kind}`, ref, writeParams, ['200', '201', '202']),
      ref,
    );
  if (verbs.has('deletecollection'))
    list.delete = operation(
      gvk,
      'deletecollection',
      id('delete', 'Collection'),
      `delete collection of ${info.kind}`,
      `${REF}io.k8s.apimachinery.pkg.apis.meta.v1.Status`,
      [DRY_RUN, ...listParams],
    );
  paths[collection] = list;
  if (verbs.has('get') || verbs.has('update') || verbs.has('patch') || verbs.has('delete')) {
    const named: Record<string, unknown> = { parameters: [nameParam, ...common] };
    if (verbs.has('get')) named.get = operation(gvk, 'get', id('read'), `read the specified ${info.kind}`, ref, []);
    if (verbs.has('update'))
      named.put = withBody(
        operation(gvk, 'put', id('replace'), `replace the specified ${info.kind}`, ref, writeParams, ['200', '201']),
        ref,
      );
    if (verbs.has('patch'))
      named.patch = withBody(
        operation(
          gvk,
          'patch',
          id('patch'),
          `partially update the specified ${info.kind}`,
          ref,
          [...writeParams, FORCE],
          ['200', '201'],
        ),
        PATCH_REF,
        PATCH_TYPES,
      );
    if (verbs.has('delete')) {
      named.delete = operation(
        gvk,
        'delete',
        id('delete'),
        `delete a ${info.kind}`,
        `${REF}io.k8s.apimachinery.pkg.apis.meta.v1.Status`,
        [
          DRY_RUN,
          {
            name: 'gracePeriodSeconds',
            in: 'query',
            description: 'The duration in seconds before the object should be deleted.',
            schema: { type: 'integer', uniqueItems: true },
          },
          queryParam('propagationPolicy', 'Whether and how garbage collection will be performed.'),
        ],
        ['200', '202'],
      );
    }
    paths[`${collection}/{name}`] = named;
  }
  for (const sub of subresourcesOf(info)) {
    if (sub.name !== 'status' && sub.name !== 'scale') continue;
    const subGvk = { group: sub.group ?? info.group, version: sub.version ?? info.version, kind: sub.kind };
    const subRef = `${REF}${schemaName(subGvk)}`;
    const suffix = sub.name === 'status' ? 'Status' : 'Scale';
    paths[`${collection}/{name}/${sub.name}`] = {
      parameters: [nameParam, ...common],
      get: operation(subGvk, 'get', id('read', suffix), `read ${sub.name} of the specified ${info.kind}`, subRef, []),
      put: withBody(
        operation(
          subGvk,
          'put',
          id('replace', suffix),
          `replace ${sub.name} of the specified ${info.kind}`,
          subRef,
          writeParams,
          ['200', '201'],
        ),
        subRef,
      ),
      patch: withBody(
        operation(
          subGvk,
          'patch',
          id('patch', suffix),
          `partially update ${sub.name} of the specified ${info.kind}`,
          subRef,
          [...writeParams, FORCE],
          ['200', '201'],
        ),
        PATCH_REF,
        PATCH_TYPES,
      ),
    };
  }
  return paths;
}

/** An element or value schema: references in allOf (as kube-apiserver writes them) with the zero default. */
function valueSchema(shape: Shape): Record<string, unknown> {
  switch (shape.kind) {
    case 'ref':
      return { $ref: `${REF}${shape.name}` };
    case 'scalar': {
      const s: Record<string, unknown> = { type: shape.type };
      if (shape.format) s.format = shape.format;
      return s;
    }
    case 'list':
      return { type: 'array', items: elementSchema(shape.items) };
    case 'map':
      return { type: 'object', additionalProperties: elementSchema(shape.values) };
    case 'any':
      return { type: 'object' };
  }
}

function elementSchema(shape: Shape): Record<string, unknown> {
  if (shape.kind === 'ref') {
    const target = typeInfo(shape.name);
    return target?.scalar ? { $ref: `${REF}${shape.name}` } : { allOf: [{ $ref: `${REF}${shape.name}` }], default: {} };
  }
  const s = valueSchema(shape);
  if (shape.kind === 'scalar') s.default = shape.type === 'string' ? '' : shape.type === 'boolean' ? false : 0;
  return s;
}

function propertySchema(p: Property): Record<string, unknown> {
  let s: Record<string, unknown>;
  if (p.shape.kind === 'ref') s = { allOf: [{ $ref: `${REF}${p.shape.name}` }] };
  else s = valueSchema(p.shape);
  s.description = p.description;
  if (p.enum) s.enum = p.enum;
  const meta = p.meta;
  if (meta) {
    if (meta.list && p.shape.kind === 'list') s['x-kubernetes-list-type'] = meta.list;
    if (meta.mapKeys && meta.list === 'map') s['x-kubernetes-list-map-keys'] = meta.mapKeys;
    if (meta.key) s['x-kubernetes-patch-merge-key'] = meta.key;
    if (meta.strategy) s['x-kubernetes-patch-strategy'] = meta.strategy;
    if (meta.mapType && p.shape.kind === 'map') s['x-kubernetes-map-type'] = meta.mapType;
  }
  return s;
}

export function typeSchema(t: TypeInfo): Record<string, unknown> {
  switch (t.scalar) {
    case 'quantity':
      return { description: t.description, oneOf: [{ type: 'string' }, { type: 'number' }] };
    case 'int-or-string':
      return { description: t.description, format: 'int-or-string', oneOf: [{ type: 'integer' }, { type: 'string' }] };
    case 'date-time':
      return { description: t.description, type: 'string', format: 'date-time' };
    case 'object':
      return { description: t.description, type: 'object' };
  }
  const s: Record<string, unknown> = { description: t.description, type: 'object' };
  if (t.properties.size > 0)
    s.properties = Object.fromEntries([...t.properties.values()].map((p) => [p.name, propertySchema(p)]));
  if (t.required.length > 0) s.required = t.required;
  if (t.gvk) s['x-kubernetes-group-version-kind'] = [{ group: t.gvk.group, kind: t.gvk.kind, version: t.gvk.version }];
  if (t.atomic) s['x-kubernetes-map-type'] = 'atomic';
  return s;
}

/** Kinds with no built-in schema (custom resources): any fields. */
function looseSchema(info: KindInfo): unknown {
  return {
    description: `${info.kind} (${groupVersion(info)})`,
    type: 'object',
    properties: {
      apiVersion: {
        description: 'APIVersion defines the versioned schema of this representation of an object.',
        type: 'string',
      },
      kind: {
        description: 'Kind is a string value representing the REST resource this object represents.',
        type: 'string',
      },
      metadata: {
        description: "Standard object's metadata.",
        allOf: [{ $ref: `${REF}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta` }],
        default: {},
      },
    },
    'x-kubernetes-preserve-unknown-fields': true,
    'x-kubernetes-group-version-kind': [{ group: info.group, kind: info.kind, version: info.version }],
  };
}

const META_TYPES = [
  'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta',
  'io.k8s.apimachinery.pkg.apis.meta.v1.Status',
  'io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions',
  'io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent',
  'io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList',
];

export class OpenApi {
  private cache = new Map<string, { text: string; hash: string }>();
  private index?: string;

  constructor(private readonly registry: Registry) {
    registry.onChange(() => {
      this.cache.clear();
      this.index = undefined;
    });
  }

  /** Document for "api/v1" or "apis/apps/v1". */
  document(path: string): { text: string; hash: string } | undefined {
    const cached = this.cache.get(path);
    if (cached) return cached;
    const gv = this.registry
      .groupVersions()
      .find((g) => (g.group === '' ? `api/${g.version}` : `apis/${g.group}/${g.version}`) === path);
    if (!gv) return undefined;
    const paths: Record<string, unknown> = {};
    const roots = new Set<string>(META_TYPES);
    const loose: Record<string, unknown> = {};
    for (const info of [...gv.kinds].sort((a, b) => a.resource.localeCompare(b.resource))) {
      Object.assign(paths, pathsFor(info));
      const name = schemaNameForKind(info.group, info.version, info.kind);
      if (name) {
        roots.add(name);
        if (typeInfo(`${name}List`)) roots.add(`${name}List`);
      } else loose[schemaName(info)] = info.schema?.openapi ?? looseSchema(info);
      for (const sub of subresourcesOf(info)) {
        const subName = schemaNameForKind(sub.group ?? info.group, sub.version ?? info.version, sub.kind);
        if (subName) roots.add(subName);
      }
    }
    const schemas: Record<string, unknown> = {};
    for (const name of [...reachableTypes(roots)].sort()) schemas[name] = typeSchema(typeInfo(name)!);
    Object.assign(schemas, loose);
    schemas['io.k8s.apimachinery.pkg.apis.meta.v1.Patch'] = {
      description: 'Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.',
      type: 'object',
    };
    const text = JSON.stringify({
      openapi: '3.0.0',
      info: { title: 'Kubernetes', version: KUBERNETES_VERSION.gitVersion },
      paths,
      components: { schemas },
    });
    const entry = { text, hash: createHash('sha512').update(text).digest('hex').toUpperCase() };
    this.cache.set(path, entry);
    return entry;
  }

  indexDocument(): string {
    if (this.index) return this.index;
    const paths: Record<string, unknown> = {};
    for (const g of this.registry.groupVersions()) {
      const path = g.group === '' ? `api/${g.version}` : `apis/${g.group}/${g.version}`;
      paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=${this.document(path)!.hash}` };
    }
    this.index = JSON.stringify({ paths });
    return this.index;
  }
}
