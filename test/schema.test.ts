import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { managedFieldsAfterUpdate, renderPath, serverSideApply, type WriteContext } from '../src/api/managed-fields.js';
import { applyStrategicMergePatch } from '../src/api/patch.js';
import { pruneUnknownFields, strictDecodingMessage, typeMismatch } from '../src/api/schema/field-validation.js';
import { PATCH_META } from '../src/api/schema/patch-meta.js';
import { propertyOf, schemaNameForKind, schemaTypes, typeInfo } from '../src/api/schema/schema.js';
import type { KubeObject } from '../src/api/types.js';
import { eventToCore, eventToV1 } from '../src/registry/builtin/events.js';
import { podRestarts, podRow } from '../src/registry/pod-printer.js';
import { typeSchema } from '../src/server/openapi.js';

const DEPLOYMENT = 'io.k8s.api.apps.v1.Deployment';

describe('built-in schemas', () => {
  it('name every served kind and carry descriptions, enums, formats and required fields', () => {
    assert.equal(schemaNameForKind('apps', 'v1', 'Deployment'), DEPLOYMENT);
    assert.equal(schemaNameForKind('', 'v1', 'ConfigMap'), 'io.k8s.api.core.v1.ConfigMap');
    assert.equal(schemaNameForKind('events.k8s.io', 'v1', 'Event'), 'io.k8s.api.events.v1.Event');
    const type = propertyOf('io.k8s.api.apps.v1.DeploymentStrategy', 'type')!;
    assert.deepEqual(type.enum, ['Recreate', 'RollingUpdate']);
    assert.match(type.description, /Possible enum values:/);
    assert.deepEqual(propertyOf('io.k8s.api.apps.v1.DeploymentSpec', 'replicas')!.shape, {
      kind: 'scalar',
      type: 'integer',
      format: 'int32',
    });
    assert.deepEqual(typeInfo('io.k8s.api.apps.v1.DeploymentSpec')!.required, ['selector', 'template']);
    assert.deepEqual(propertyOf('io.k8s.api.core.v1.Container', 'ports')!.shape, {
      kind: 'list',
      items: { kind: 'ref', name: 'io.k8s.api.core.v1.ContainerPort' },
    });
  });

  it('every patch-meta entry names a real type and field', () => {
    for (const [type, fields] of Object.entries(PATCH_META)) {
      assert.ok(schemaTypes().has(type), `${type} is a generated type`);
      for (const field of Object.keys(fields)) assert.ok(propertyOf(type, field), `${type}.${field} exists`);
    }
  });

  it('renders OpenAPI v3 schemas with the kubernetes extensions', () => {
    const spec = typeSchema(typeInfo('io.k8s.api.core.v1.PodSpec')!) as {
      properties: Record<string, Record<string, unknown>>;
    };
    assert.deepEqual(
      { ...spec.properties.containers, description: undefined, items: undefined },
      {
        type: 'array',
        description: undefined,
        items: undefined,
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
        'x-kubernetes-patch-merge-key': 'name',
        'x-kubernetes-patch-strategy': 'merge',
      },
    );
    const deploy = typeSchema(typeInfo(DEPLOYMENT)!) as Record<string, unknown>;
    assert.deepEqual(deploy['x-kubernetes-group-version-kind'], [{ group: 'apps', kind: 'Deployment', version: 'v1' }]);
    assert.deepEqual(typeSchema(typeInfo('io.k8s.apimachinery.pkg.util.intstr.IntOrString')!).oneOf, [
      { type: 'integer' },
      { type: 'string' },
    ]);
  });
});

describe('strategic merge patch from the schema', () => {
  const deployment = (): KubeObject => ({
    metadata: { name: 'd', finalizers: ['a'] },
    spec: {
      template: {
        spec: {
          containers: [
            { name: 'main', image: 'a', env: [{ name: 'X', value: '1' }], ports: [{ containerPort: 80 }] },
            { name: 'side', image: 'b' },
          ],
          tolerations: [{ key: 'k' }],
        },
      },
    },
  });

  it('merges containers by name and env by name, replaces atomic lists, merges finalizers as a set', () => {
    const out = applyStrategicMergePatch(
      deployment(),
      {
        metadata: { finalizers: ['b'] },
        spec: {
          template: {
            spec: {
              containers: [{ name: 'main', image: 'c', env: [{ name: 'Y', value: '2' }] }],
              tolerations: [{ key: 'z' }],
            },
          },
        },
      },
      DEPLOYMENT,
    ) as KubeObject;
    const spec = (
      out.spec as { template: { spec: { containers: Array<Record<string, unknown>>; tolerations: unknown } } }
    ).template.spec;
    assert.deepEqual(
      spec.containers.map((c) => c.image),
      ['c', 'b'],
    );
    assert.deepEqual(spec.containers[0]!.env, [
      { name: 'X', value: '1' },
      { name: 'Y', value: '2' },
    ]);
    assert.deepEqual(spec.tolerations, [{ key: 'z' }]);
    assert.deepEqual(out.metadata.finalizers, ['a', 'b']);
  });

  it('honours $patch: delete, $setElementOrder, $retainKeys and $deleteFromPrimitiveList', () => {
    const out = applyStrategicMergePatch(
      deployment(),
      {
        metadata: { '$deleteFromPrimitiveList/finalizers': ['a'] },
        spec: {
          strategy: { $retainKeys: ['type'], type: 'Recreate' },
          template: {
            spec: {
              '$setElementOrder/containers': [{ name: 'side' }, { name: 'main' }],
              containers: [{ name: 'main', ports: [{ containerPort: 80, $patch: 'delete' }] }],
            },
          },
        },
      },
      DEPLOYMENT,
    ) as KubeObject;
    const spec = out.spec as { strategy: unknown; template: { spec: { containers: Array<Record<string, unknown>> } } };
    assert.deepEqual(
      spec.template.spec.containers.map((c) => c.name),
      ['side', 'main'],
    );
    assert.deepEqual(spec.template.spec.containers[1]!.ports, []);
    assert.deepEqual(spec.strategy, { type: 'Recreate' });
    assert.deepEqual(out.metadata.finalizers, []);
  });

  it('replaces lists whole when the type is unknown', () => {
    const out = applyStrategicMergePatch({ items: [{ name: 'a' }] }, { items: [{ name: 'b' }] }) as Record<
      string,
      unknown
    >;
    assert.deepEqual(out.items, [{ name: 'b' }]);
  });
});

describe('field validation', () => {
  it('finds and prunes undeclared fields at any depth', () => {
    const obj = {
      metadata: { name: 'x', bogus: 1 },
      spec: { foo: 1, template: { spec: { containers: [{ name: 'c', imagee: 'x' }] } } },
    };
    assert.deepEqual(pruneUnknownFields(obj, DEPLOYMENT), [
      'metadata.bogus',
      'spec.foo',
      'spec.template.spec.containers[0].imagee',
    ]);
    assert.deepEqual(obj, { metadata: { name: 'x' }, spec: { template: { spec: { containers: [{ name: 'c' }] } } } });
    assert.equal(
      strictDecodingMessage('Deployment', 'v1', ['spec.foo']),
      'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.foo"',
    );
  });

  it('words type mismatches as the Go JSON decoder does', () => {
    assert.equal(
      typeMismatch({ spec: { replicas: '3' } }, DEPLOYMENT),
      'json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32',
    );
    assert.equal(
      typeMismatch({ data: { a: 1 } }, 'io.k8s.api.core.v1.ConfigMap'),
      'json: cannot unmarshal number into Go struct field ConfigMap.data of type string',
    );
    assert.equal(
      typeMismatch({ spec: { template: { spec: { containers: {} } } } }, DEPLOYMENT),
      'json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container',
    );
    assert.equal(
      typeMismatch(
        {
          spec: { replicas: 3, strategy: { rollingUpdate: { maxSurge: '25%', maxUnavailable: 1 } } },
          metadata: { creationTimestamp: null },
        },
        DEPLOYMENT,
      ),
      undefined,
    );
  });
});

describe('managed fields and server-side apply', () => {
  const ctx = (manager: string): WriteContext => ({
    manager,
    apiVersion: 'v1',
    time: '2025-01-01T00:00:00Z',
    typeName: 'io.k8s.api.core.v1.ConfigMap',
    hasStatus: false,
  });
  const cm = (data: Record<string, string>, extra: Partial<KubeObject> = {}): KubeObject => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'c', namespace: 'd' },
    data,
    ...extra,
  });
  const gr = { group: '', resource: 'configmaps' };

  it('an Update owns what it changed and takes it from the others', () => {
    const created = cm({ a: '1', b: '2' });
    created.metadata.managedFields = managedFieldsAfterUpdate(undefined, created, undefined, ctx('creator'));
    assert.deepEqual(created.metadata.managedFields, [
      {
        manager: 'creator',
        operation: 'Update',
        apiVersion: 'v1',
        time: '2025-01-01T00:00:00Z',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:data': { '.': {}, 'f:a': {}, 'f:b': {} } },
      },
    ]);
    const next = cm({ a: '9', b: '2' });
    const entries = managedFieldsAfterUpdate(created, next, created.metadata.managedFields, ctx('editor'));
    assert.deepEqual(
      entries.map((e) => [e.manager, e.fieldsV1]),
      [
        ['creator', { 'f:data': { '.': {}, 'f:b': {} } }],
        ['editor', { 'f:data': { 'f:a': {} } }],
      ],
    );
  });

  it('Apply conflicts on fields another manager owns with another value, unless forced', () => {
    const live = cm({ a: '1' });
    live.metadata.managedFields = managedFieldsAfterUpdate(undefined, live, undefined, ctx('kubectl-patch'));
    assert.throws(
      () => serverSideApply(live, cm({ a: '2' }), ctx('kubectl'), false, gr, 'c'),
      (err: Error & { code?: number; details?: { causes?: unknown[] } }) => {
        assert.equal(err.code, 409);
        assert.equal(err.message, 'Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.a');
        assert.deepEqual(err.details?.causes, [
          { reason: 'FieldManagerConflict', message: 'conflict with "kubectl-patch" using v1', field: '.data.a' },
        ]);
        return true;
      },
    );
    // The same value is shared ownership, not a conflict.
    const shared = serverSideApply(live, cm({ a: '1' }), ctx('kubectl'), false, gr, 'c');
    assert.deepEqual(
      shared.managedFields.map((e) => e.manager),
      ['kubectl-patch', 'kubectl'],
    );
    const forced = serverSideApply(live, cm({ a: '2' }), ctx('kubectl'), true, gr, 'c');
    assert.deepEqual(forced.object.data, { a: '2' });
    // The forced field changes hands; the patcher keeps only its claim on the data map itself.
    assert.deepEqual(
      forced.managedFields.map((e) => [e.manager, e.operation, e.fieldsV1]),
      [
        ['kubectl-patch', 'Update', { 'f:data': { '.': {} } }],
        ['kubectl', 'Apply', { 'f:data': { 'f:a': {} } }],
      ],
    );
  });

  it('Apply removes what its manager stopped applying, unless someone else owns it', () => {
    const first = serverSideApply(undefined, cm({ a: '1', b: '2' }), ctx('kubectl'), false, gr, 'c');
    const live = { ...first.object, metadata: { ...first.object.metadata, managedFields: first.managedFields } };
    const second = serverSideApply(live, cm({ a: '1' }), ctx('kubectl'), false, gr, 'c');
    assert.deepEqual(second.object.data, { a: '1' });
  });

  it('renders keyed paths as kube-apiserver does', () => {
    assert.equal(
      renderPath('f:spec\u0000f:containers\u0000k:{"name":"nginx"}\u0000f:image'),
      '.spec.containers[name="nginx"].image',
    );
  });
});

describe('printers and conversions', () => {
  it('pod STATUS, READY and RESTARTS follow printPod', () => {
    const now = Date.parse('2025-01-01T00:01:00Z');
    const pod: KubeObject = {
      metadata: { name: 'p' },
      spec: {
        initContainers: [{ name: 'init' }, { name: 'sidecar', restartPolicy: 'Always' }],
        containers: [{ name: 'a' }, { name: 'b' }],
      },
      status: {
        phase: 'Running',
        conditions: [{ type: 'Initialized', status: 'True' }],
        initContainerStatuses: [
          { name: 'init', restartCount: 0, state: { terminated: { exitCode: 0 } } },
          {
            name: 'sidecar',
            restartCount: 1,
            started: true,
            ready: true,
            state: { running: {} },
            lastState: { terminated: { finishedAt: '2025-01-01T00:00:30Z' } },
          },
        ],
        containerStatuses: [
          { name: 'a', ready: true, restartCount: 0, state: { running: {} } },
          {
            name: 'b',
            ready: false,
            restartCount: 3,
            state: { waiting: { reason: 'CrashLoopBackOff' } },
            lastState: { terminated: { finishedAt: '2025-01-01T00:00:15Z' } },
          },
        ],
      },
    };
    assert.deepEqual(podRow(pod), {
      ready: 2,
      total: 3,
      reason: 'CrashLoopBackOff',
      restarts: 4,
      lastRestart: Date.parse('2025-01-01T00:00:30Z'),
    });
    assert.equal(podRestarts(pod, now), '4 (30s ago)');
    assert.equal(
      podRow({
        metadata: { name: 'q' },
        spec: { containers: [{ name: 'a' }] },
        status: {
          phase: 'Pending',
          conditions: [{ type: 'PodScheduled', status: 'False', reason: 'SchedulingGated' }],
        },
      }).reason,
      'SchedulingGated',
    );
    assert.equal(
      podRow({
        metadata: { name: 'q', deletionTimestamp: 'x' },
        spec: { containers: [] },
        status: { phase: 'Succeeded' },
      }).reason,
      'Succeeded',
    );
  });

  it('events.k8s.io/v1 and core/v1 Events convert both ways', () => {
    const v1: KubeObject = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: 'e' },
      regarding: { kind: 'Pod', name: 'p' },
      note: 'hi',
      reportingController: 'me',
      deprecatedCount: 2,
      reason: 'R',
    };
    const core = eventToCore(v1);
    assert.deepEqual(core, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: 'e' },
      involvedObject: { kind: 'Pod', name: 'p' },
      message: 'hi',
      reportingComponent: 'me',
      count: 2,
      reason: 'R',
    });
    assert.deepEqual(eventToV1(core), v1);
  });
});
