import { createHash } from 'node:crypto';
import type { Registry } from '../registry/registry.js';
import { groupVersion, type KindInfo } from '../registry/types.js';
import { KUBERNETES_VERSION } from './discovery.js';

/**
 * OpenAPI v3, derived from the registry: the index at /openapi/v3 and one document per group-version. kubectl
 * reads it to decide that the server validates fields itself (a PATCH operation carrying the kind's
 * x-kubernetes-group-version-kind and a `fieldValidation` parameter) and for `kubectl explain`.
 */
export function schemaName(info: Pick<KindInfo, 'group' | 'version' | 'kind'>): string {
  const pkg = info.group === '' ? 'core' : info.group.split('.')[0]!;
  return `io.k8s.api.${pkg}.${info.version}.${info.kind}`;
}

const queryParam = (name: string, description: string): unknown => ({ name, in: 'query', description, schema: { type: 'string', uniqueItems: true } });
const writeParams = [
  queryParam('dryRun', 'When present, indicates that modifications should not be persisted.'),
  queryParam('fieldManager', 'fieldManager is a name associated with the actor or entity that is making these changes.'),
  queryParam('fieldValidation', 'fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.'),
];

function operation(info: KindInfo, action: string, ref: string, params: unknown[]): unknown {
  return {
    description: `${action} ${info.kind}`,
    operationId: `${action}${info.kind}`,
    parameters: params,
    responses: { '200': { description: 'OK', content: { 'application/json': { schema: { $ref: ref } } } } },
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': { group: info.group, version: info.version, kind: info.kind },
  };
}

function pathsFor(info: KindInfo): Record<string, unknown> {
  const prefix = info.group === '' ? `/api/${info.version}` : `/apis/${info.group}/${info.version}`;
  const collection = info.namespaced ? `${prefix}/namespaces/{namespace}/${info.resource}` : `${prefix}/${info.resource}`;
  const ref = `#/components/schemas/${schemaName(info)}`;
  const pathParams: unknown[] = [{ name: 'name', in: 'path', required: true, schema: { type: 'string', uniqueItems: true } }];
  if (info.namespaced) pathParams.push({ name: 'namespace', in: 'path', required: true, schema: { type: 'string', uniqueItems: true } });
  const named = {
    get: operation(info, 'get', ref, []),
    put: operation(info, 'put', ref, writeParams),
    patch: { ...(operation(info, 'patch', ref, [...writeParams, queryParam('force', 'Force is going to "force" Apply requests.')]) as object), requestBody: { content: { 'application/merge-patch+json': { schema: { type: 'object' } }, 'application/strategic-merge-patch+json': { schema: { type: 'object' } }, 'application/json-patch+json': { schema: { type: 'object' } }, 'application/apply-patch+yaml': { schema: { type: 'object' } } } } },
    delete: operation(info, 'delete', ref, [queryParam('dryRun', ''), queryParam('gracePeriodSeconds', ''), queryParam('propagationPolicy', '')]),
    parameters: pathParams,
  };
  const list = {
    get: operation(info, 'list', ref, [queryParam('labelSelector', ''), queryParam('fieldSelector', ''), queryParam('limit', ''), queryParam('continue', ''), queryParam('watch', '')]),
    post: operation(info, 'post', ref, writeParams),
    parameters: info.namespaced ? [{ name: 'namespace', in: 'path', required: true, schema: { type: 'string', uniqueItems: true } }] : [],
  };
  return { [collection]: list, [`${collection}/{name}`]: named };
}

function schemaFor(info: KindInfo): unknown {
  return {
    description: `${info.kind} (${groupVersion(info)})`,
    type: 'object',
    properties: {
      apiVersion: { description: 'APIVersion defines the versioned schema of this representation of an object.', type: 'string' },
      kind: { description: 'Kind is a string value representing the REST resource this object represents.', type: 'string' },
      metadata: { description: "Standard object's metadata.", allOf: [{ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' }], default: {} },
    },
    'x-kubernetes-preserve-unknown-fields': true,
    'x-kubernetes-group-version-kind': [{ group: info.group, kind: info.kind, version: info.version }],
  };
}

const objectMetaSchema = {
  description: 'ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.',
  type: 'object',
  'x-kubernetes-preserve-unknown-fields': true,
  properties: {
    name: { type: 'string' },
    namespace: { type: 'string' },
    labels: { type: 'object', additionalProperties: { type: 'string', default: '' } },
    annotations: { type: 'object', additionalProperties: { type: 'string', default: '' } },
    resourceVersion: { type: 'string' },
    uid: { type: 'string' },
  },
};

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
    const gv = this.registry.groupVersions().find((g) => (g.group === '' ? `api/${g.version}` : `apis/${g.group}/${g.version}`) === path);
    if (!gv) return undefined;
    const paths: Record<string, unknown> = {};
    const schemas: Record<string, unknown> = { 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta': objectMetaSchema };
    for (const info of gv.kinds) {
      Object.assign(paths, pathsFor(info));
      schemas[schemaName(info)] = schemaFor(info);
    }
    const text = JSON.stringify({ openapi: '3.0.0', info: { title: 'Kubernetes', version: KUBERNETES_VERSION.gitVersion }, paths, components: { schemas } });
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
