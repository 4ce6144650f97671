import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateCrd } from '../src/registry/crd/kind.js';
import { rowsOf } from '../src/registry/crd/serve.js';
import { applyDefaults, prune, validateSchema, type JSONSchemaProps } from '../src/registry/crd/schema-validation.js';
import { validateRules } from '../src/registry/crd/cel.js';
import type { KubeObject } from '../src/api/types.js';

// CRD structural schemas: pruning, defaulting and validation with kube-apiserver's field paths and messages,
// and the CRD's own validation.

const schema: JSONSchemaProps = {
  type: 'object',
  properties: {
    spec: {
      type: 'object',
      required: ['size'],
      properties: {
        size: { type: 'string', minLength: 2, maxLength: 5 },
        replicas: { type: 'integer', minimum: 1, maximum: 10, default: 1 },
        mode: { type: 'string', enum: ['a', 'b'] },
        name: { type: 'string', pattern: '^[a-z]+$' },
        port: { 'x-kubernetes-int-or-string': true },
        tags: { type: 'array', items: { type: 'string' }, maxItems: 2, minItems: 1, 'x-kubernetes-list-type': 'set' },
        ports: {
          type: 'array',
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
          items: { type: 'object', properties: { name: { type: 'string' }, port: { type: 'integer', default: 80 } } },
        },
        note: { type: 'string', nullable: true },
        extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
        labels: { type: 'object', additionalProperties: { type: 'string' } },
      },
    },
    status: { type: 'object', properties: { ready: { type: 'boolean' } } },
  },
};

const messages = (obj: Record<string, unknown>): string[] =>
  validateSchema(obj, schema).map((c) => `${c.field}: ${c.message}`);

describe('CRD schema validation', () => {
  it('reports kube-apiserver messages with field paths', () => {
    assert.deepEqual(messages({ spec: { size: 'ab', replicas: 11 } }), [
      'spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10',
    ]);
    assert.deepEqual(messages({ spec: {} }), ['spec.size: Required value']);
    assert.deepEqual(messages({ spec: { size: 'ab', mode: 'x' } }), [
      'spec.mode: Unsupported value: "x": supported values: "a", "b"',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', replicas: 0 } }), [
      'spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', replicas: 'x' } }), [
      'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
    ]);
    assert.deepEqual(messages({ spec: { size: 'a' } }), [
      'spec.size: Invalid value: "a": spec.size in body should be at least 2 chars long',
    ]);
    assert.deepEqual(messages({ spec: { size: 'abcdef' } }), ['spec.size: Too long: may not be more than 5 bytes']);
    assert.deepEqual(messages({ spec: { size: 'ab', name: 'X' } }), [
      'spec.name: Invalid value: "X": spec.name in body should match \'^[a-z]+$\'',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', tags: ['a', 'b', 'c'] } }), [
      'spec.tags: Too many: 3: must have at most 2 items',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', tags: [] } }), [
      'spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', tags: ['a', 'a'] } }), ['spec.tags[1]: Duplicate value: "a"']);
    assert.deepEqual(messages({ spec: { size: 'ab', ports: [{ name: 'x' }, { name: 'x' }] } }), [
      'spec.ports[1]: Duplicate value: {"name":"x"}',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', labels: { a: 1 } } }), [
      'spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer"',
    ]);
    assert.deepEqual(messages({ spec: { size: 'ab', mode: null } }), [
      'spec.mode: Invalid value: "null": spec.mode in body must be of type string: "null"',
    ]);
  });

  it('accepts valid objects, int-or-string and nullable fields', () => {
    assert.deepEqual(messages({ spec: { size: 'ab', port: 80, note: null, extra: { any: { thing: 1 } } } }), []);
    assert.deepEqual(messages({ spec: { size: 'ab', port: 'http' } }), []);
    assert.deepEqual(messages({ spec: { size: 'ab', port: 1.5 } }), [
      'spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number"',
    ]);
  });

  it('prunes unknown fields, keeping preserved ones, and names them', () => {
    const obj = {
      apiVersion: 'x/v1',
      kind: 'X',
      metadata: { name: 'a' },
      spec: { size: 'ab', foo: 1, extra: { kept: true }, ports: [{ name: 'a', bar: 2 }] },
      other: 1,
    };
    assert.deepEqual(prune(obj, schema).sort(), ['other', 'spec.foo', 'spec.ports[0].bar']);
    assert.deepEqual(obj, {
      apiVersion: 'x/v1',
      kind: 'X',
      metadata: { name: 'a' },
      spec: { size: 'ab', extra: { kept: true }, ports: [{ name: 'a' }] },
    });
  });

  it('applies defaults, in list items too', () => {
    const obj: Record<string, unknown> = { spec: { size: 'ab', ports: [{ name: 'a' }, { name: 'b', port: 8080 }] } };
    applyDefaults(obj, schema);
    assert.deepEqual(obj, {
      spec: {
        size: 'ab',
        replicas: 1,
        ports: [
          { name: 'a', port: 80 },
          { name: 'b', port: 8080 },
        ],
      },
    });
  });
});

function crd(spec: Record<string, unknown>, name = 'widgets.example.com'): KubeObject {
  return { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name }, spec };
}

const good = {
  group: 'example.com',
  scope: 'Namespaced',
  names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList', shortNames: ['wd'] },
  versions: [
    { name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema } },
    {
      name: 'v1beta1',
      served: true,
      storage: false,
      schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
    },
  ],
};

describe('CustomResourceDefinition validation', () => {
  const check = (spec: Record<string, unknown>, name?: string): string[] =>
    validateCrd(crd(spec, name)).map((c) => `${c.field}: ${c.message}`);

  it('accepts a well-formed CRD', () => {
    assert.deepEqual(check(good), []);
  });

  it("rejects the common mistakes with kube-apiserver's messages", () => {
    assert.deepEqual(check(good, 'widget.example.com'), [
      'metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group',
    ]);
    assert.deepEqual(check({ ...good, group: 'example' }, 'widgets.example'), [
      'spec.group: Invalid value: "example": should be a domain with at least one dot',
    ]);
    assert.deepEqual(check({ ...good, group: 'example.k8s.io' }, 'widgets.example.k8s.io'), [
      'metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111',
    ]);
    assert.deepEqual(check({ ...good, scope: 'Global' }), [
      'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
    ]);
    const twoStorage = good.versions.map((v) => ({ ...v, storage: true }));
    assert.match(
      check({ ...good, versions: twoStorage })[0]!,
      /^spec\.versions: Invalid value: .*: must have exactly one version marked as storage version$/,
    );
    assert.deepEqual(check({ ...good, names: { ...good.names, kind: '' } }), ['spec.names.kind: Required value']);
    assert.deepEqual(check({ ...good, names: { ...good.names, plural: '' } }, '.example.com'), [
      'spec.names.plural: Required value',
    ]);
    assert.deepEqual(check({ ...good, versions: [{ name: 'v1', served: true, storage: true }] }), [
      'spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required',
    ]);
    assert.deepEqual(
      check({
        ...good,
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', properties: { spec: {} } } },
          },
        ],
      }),
      [
        'spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields',
      ],
    );
  });

  it('serves every served version, the storage version first, the others converted by apiVersion', () => {
    const rows = rowsOf(crd({ ...good, versions: [...good.versions].reverse() }));
    assert.deepEqual(
      rows.map((r) => r.version),
      ['v1', 'v1beta1'],
    );
    assert.equal(rows[0]!.storage, undefined);
    const obj = { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'a' } };
    assert.equal(rows[1]!.storage!.fromStorage(obj).apiVersion, 'example.com/v1beta1');
    assert.equal(
      rows[1]!.storage!.toStorage({ ...obj, apiVersion: 'example.com/v1beta1' }).apiVersion,
      'example.com/v1',
    );
    assert.deepEqual(rows[0]!.shortNames, ['wd']);
  });
});

describe('CEL x-kubernetes-validations', () => {
  const ruled: JSONSchemaProps = {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        'x-kubernetes-validations': [
          {
            rule: '!has(self.minReplicas) || self.minReplicas <= self.replicas',
            message: 'minReplicas must not exceed replicas',
          },
          { rule: 'self.replicas < 100' },
          {
            rule: "self.name.startsWith('x')",
            messageExpression: "'name ' + self.name + ' must start with x'",
            fieldPath: '.name',
          },
        ],
        properties: {
          replicas: { type: 'integer' },
          minReplicas: { type: 'integer' },
          name: {
            type: 'string',
            'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'name is immutable' }],
          },
          items: {
            type: 'array',
            'x-kubernetes-list-type': 'map',
            'x-kubernetes-list-map-keys': ['id'],
            items: {
              type: 'object',
              properties: {
                id: { type: 'string' },
                size: {
                  type: 'integer',
                  'x-kubernetes-validations': [{ rule: 'self >= oldSelf', message: 'size may only grow' }],
                },
              },
            },
          },
        },
      },
    },
  };
  const run = (obj: unknown, old?: unknown): string[] =>
    validateRules(obj, ruled, old).map((c) => `${c.field}: ${c.message}`);

  it("reports a failed rule with its message, messageExpression or the rule, at the rule's node or fieldPath", () => {
    assert.deepEqual(run({ spec: { replicas: 2, name: 'xa' } }), []);
    assert.deepEqual(run({ spec: { replicas: 2, minReplicas: 3, name: 'xa' } }), [
      'spec: Invalid value: "object": minReplicas must not exceed replicas',
    ]);
    assert.deepEqual(run({ spec: { replicas: 200, name: 'ya' } }), [
      'spec: Invalid value: "object": failed rule: self.replicas < 100',
      'spec.name: Invalid value: "object": name ya must start with x',
    ]);
  });

  it('runs transition rules only on updates, with oldSelf (keyed list items correlated by key)', () => {
    assert.deepEqual(run({ spec: { replicas: 1, name: 'xb' } }, { spec: { replicas: 1, name: 'xb' } }), []);
    assert.deepEqual(run({ spec: { replicas: 1, name: 'xc' } }, { spec: { replicas: 1, name: 'xb' } }), [
      'spec.name: Invalid value: "string": name is immutable',
    ]);
    const items = (a: number, b: number): unknown => ({
      spec: {
        replicas: 1,
        name: 'x',
        items: [
          { id: 'a', size: a },
          { id: 'b', size: b },
        ],
      },
    });
    assert.deepEqual(run(items(2, 1), items(1, 1)), []);
    assert.deepEqual(run(items(2, 0), items(1, 1)), [
      'spec.items[1].size: Invalid value: "integer": size may only grow',
    ]);
  });

  it('rejects rules that do not compile in the CRD', () => {
    const bad = {
      ...good,
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-validations': [{ rule: 'self.replicas <' }] } },
        },
      ],
    };
    const causes = validateCrd(crd(bad));
    assert.equal(causes.length, 1);
    assert.equal(causes[0]!.field, 'spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule');
    assert.match(causes[0]!.message, /^Invalid value: "self.replicas <": compilation failed: /);
  });
});
