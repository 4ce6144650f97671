import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import { decodeProtobuf, PROTOBUF_MAGIC, protobufType, type Json } from '../src/server/protobuf/decode.js';
import { KINDS, SCHEMA } from '../src/server/protobuf/schema.js';
import { request, type Obj, type StatusBody } from './helpers/http.js';
import { ROOT, serverFor } from './helpers/server.js';

// Real kubectl 1.32 protobuf bodies next to the JSON kubectl 1.31 sent for the same command (see the README there).
const FIXTURES = join(ROOT, 'test/fixtures/protobuf');
const PROTOBUF = 'application/vnd.kubernetes.protobuf';
const META = 'k8s.io.apimachinery.pkg.apis.meta.v1';

const fixture = (name: string): Buffer => readFileSync(join(FIXTURES, `${name}.pb`));
const expected = (name: string): Json => JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8')) as Json;
const decoded = (name: string): Record<string, unknown> => decodeProtobuf(fixture(name)) as Record<string, unknown>;

/** Go's JSON writes null for nil fields without omitempty, which protobuf cannot carry; they mean "absent". */
function withoutNulls(value: Json): Json {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value === null || typeof value !== 'object') return value;
  const out: { [key: string]: Json } = {};
  for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = withoutNulls(v);
  return out;
}

function encode(typeName: string, value: Record<string, unknown>): Uint8Array {
  const type = protobufType(typeName);
  return type.encode(type.fromObject(value)).finish();
}

/** A body as client-go frames it: magic, then runtime.Unknown around the object's message. */
function envelope(apiVersion: string, kind: string, raw: Uint8Array, extra: Record<string, unknown> = {}): Buffer {
  const unknown = encode('k8s.io.apimachinery.pkg.runtime.Unknown', {
    typeMeta: { apiVersion, kind },
    raw,
    contentEncoding: '',
    contentType: '',
    ...extra,
  });
  return Buffer.concat([PROTOBUF_MAGIC, unknown]);
}

const body = (apiVersion: string, kind: string, typeName: string, value: Record<string, unknown>): Buffer =>
  envelope(apiVersion, kind, encode(typeName, value));

function assertBadRequest(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ApiError, `expected an ApiError, got ${String(err)}`);
    assert.equal(err.code, 400);
    assert.equal(err.reason, 'BadRequest');
    assert.match(err.message, message);
    return true;
  });
}

describe('protobuf bodies from kubectl 1.32', () => {
  const names = readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.pb'))
    .map((f) => f.slice(0, -3));

  test('there are fixtures', () => assert.ok(names.length >= 20, `only ${names.length} fixtures`));

  for (const name of names) {
    test(`${name} decodes to the JSON kubectl 1.31 sends`, () => {
      assert.deepEqual(withoutNulls(decodeProtobuf(fixture(name))), withoutNulls(expected(name)));
    });
  }

  test('most bodies match the JSON exactly, nulls included (creationTimestamp: null, status: {} …)', () => {
    for (const name of [
      'create-configmap',
      'create-deployment',
      'create-job',
      'create-cronjob',
      'create-service-clusterip',
      'create-clusterrolebinding',
      'create-job-from-cronjob',
    ]) {
      assert.deepEqual(decodeProtobuf(fixture(name)), expected(name), name);
    }
  });

  test('Go pointers keep their zero values; value fields drop them as omitempty does', () => {
    const zero = decoded('create-deployment-zero-replicas') as { spec: { replicas?: number } };
    assert.equal(zero.spec.replicas, 0);
    const job = decoded('create-job-from-cronjob') as {
      spec: Record<string, unknown> & {
        template: { spec: Record<string, unknown> & { containers: Array<Record<string, unknown>> } };
      };
    };
    assert.equal(job.spec.backoffLimit, 0);
    assert.equal(job.spec.ttlSecondsAfterFinished, 0);
    const pod = job.spec.template.spec;
    assert.equal(pod.terminationGracePeriodSeconds, 0);
    assert.equal(pod.automountServiceAccountToken, false);
    assert.equal(pod.enableServiceLinks, false);
    assert.equal(pod.priority, 0);
    assert.equal('hostNetwork' in pod, false, 'hostNetwork: false is omitempty');
    assert.equal('nodeName' in pod, false);
    const main = pod.containers[0]!;
    assert.deepEqual((main.env as unknown[])[1], { name: 'EMPTY' });
    assert.equal('tty' in main, false);
    assert.equal(main.stdin, true);
  });

  test('Kubernetes JSON forms: quantities, int-or-strings, []byte, inlined members', () => {
    const secret = decoded('create-secret-generic') as { data: Record<string, string> };
    assert.deepEqual(secret.data, {
      pw: Buffer.from('p@ss').toString('base64'),
      user: Buffer.from('admin').toString('base64'),
    });
    const svc = decoded('create-service-clusterip') as { spec: { ports: Array<Record<string, unknown>> } };
    assert.deepEqual(svc.spec.ports, [{ name: '80-8080', protocol: 'TCP', port: 80, targetPort: 8080 }]);
    const quota = decoded('create-quota') as { spec: { hard: Record<string, string> } };
    assert.deepEqual(quota.spec.hard, { cpu: '1', memory: '1Gi', pods: '10' });
    const job = decoded('create-job-from-cronjob') as {
      spec: {
        template: { spec: { volumes: Array<Record<string, unknown>>; containers: Array<Record<string, unknown>> } };
      };
    };
    const [cfg, , tmp] = job.spec.template.spec.volumes;
    assert.deepEqual(cfg, {
      name: 'cfg',
      configMap: { name: 'cm1', items: [{ key: 'a', path: 'a.txt', mode: 0 }], defaultMode: 420, optional: false },
    });
    assert.deepEqual(tmp, { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } });
    const main = job.spec.template.spec.containers[0]!;
    assert.deepEqual(main.livenessProbe, {
      httpGet: { path: '/healthz', port: 'http', scheme: 'HTTP', httpHeaders: [{ name: 'X', value: 'yes' }] },
      periodSeconds: 10,
      failureThreshold: 3,
    });
    assert.deepEqual(main.readinessProbe, { tcpSocket: { port: 80 }, timeoutSeconds: 2 });
    assert.deepEqual((main.resources as { limits: unknown }).limits, {
      cpu: '1',
      memory: '1Gi',
      'nvidia.com/gpu': '0',
    });
  });

  test('request kinds: SelfSubjectAccessReview, SelfSubjectRulesReview, TokenRequest, DeleteOptions', () => {
    assert.deepEqual((decoded('auth-can-i-subresource').spec as Record<string, unknown>).resourceAttributes, {
      namespace: 'kube-system',
      verb: 'create',
      group: 'apps',
      resource: 'deployments',
      subresource: 'scale',
    });
    assert.deepEqual(decoded('auth-can-i-list').spec, { namespace: 'default' });
    assert.deepEqual(decoded('create-token-audiences').spec, { audiences: ['api', 'vault'], expirationSeconds: 600 });
    // client-go sends DeleteOptions under the group version of the request (v1 for pods).
    assert.deepEqual(decoded('drain-delete-pod'), { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 5 });
  });
});

describe('protobuf special types', () => {
  test('every kind in the table has a message', () => {
    for (const [gvk, typeName] of Object.entries(KINDS)) {
      const pkg = typeName.slice(0, typeName.lastIndexOf('.'));
      assert.ok(SCHEMA[pkg]?.[typeName.slice(pkg.length + 1)], `${gvk} → ${typeName}`);
      assert.doesNotThrow(() => protobufType(typeName));
    }
  });

  test('Time and MicroTime are RFC 3339 in UTC; the zero time (an empty message) is null', () => {
    const lease = body('coordination.k8s.io/v1', 'Lease', 'k8s.io.api.coordination.v1.Lease', {
      metadata: {
        name: 'l',
        namespace: 'kube-node-lease',
        creationTimestamp: {},
        generation: 0,
        deletionGracePeriodSeconds: 0,
      },
      spec: {
        holderIdentity: 'node-1',
        leaseDurationSeconds: 0,
        acquireTime: { seconds: 1_700_000_000, nanos: 123_456_789 },
        renewTime: { seconds: 1_700_000_040 },
      },
    });
    assert.deepEqual(decodeProtobuf(lease), {
      kind: 'Lease',
      apiVersion: 'coordination.k8s.io/v1',
      metadata: { name: 'l', namespace: 'kube-node-lease', creationTimestamp: null, deletionGracePeriodSeconds: 0 },
      spec: {
        holderIdentity: 'node-1',
        leaseDurationSeconds: 0,
        acquireTime: '2023-11-14T22:13:20.123456Z',
        renewTime: '2023-11-14T22:14:00.000000Z',
      },
    });
    const cm = body('v1', 'ConfigMap', 'k8s.io.api.core.v1.ConfigMap', {
      metadata: { name: 'c', creationTimestamp: { seconds: 1_700_000_000, nanos: 999 } },
    });
    assert.deepEqual((decodeProtobuf(cm) as Obj).metadata, { name: 'c', creationTimestamp: '2023-11-14T22:13:20Z' });
  });

  test('events.k8s.io Event: MicroTime eventTime, series, ObjectReference', () => {
    const event = body('events.k8s.io/v1', 'Event', 'k8s.io.api.events.v1.Event', {
      metadata: { name: 'e1', namespace: 'default' },
      eventTime: { seconds: 1_700_000_000, nanos: 1_000 },
      series: { count: 2, lastObservedTime: { seconds: 1_700_000_060 } },
      reportingController: 'kubelet',
      reportingInstance: 'node-1',
      action: 'Pulling',
      reason: 'Pulling',
      regarding: { kind: 'Pod', namespace: 'default', name: 'p', apiVersion: 'v1' },
      type: 'Normal',
      deprecatedFirstTimestamp: {},
      deprecatedCount: 0,
    });
    assert.deepEqual(decodeProtobuf(event), {
      kind: 'Event',
      apiVersion: 'events.k8s.io/v1',
      metadata: { name: 'e1', namespace: 'default' },
      eventTime: '2023-11-14T22:13:20.000001Z',
      series: { count: 2, lastObservedTime: '2023-11-14T22:14:20.000000Z' },
      reportingController: 'kubelet',
      reportingInstance: 'node-1',
      action: 'Pulling',
      reason: 'Pulling',
      regarding: { kind: 'Pod', namespace: 'default', name: 'p', apiVersion: 'v1' },
      type: 'Normal',
      deprecatedFirstTimestamp: null,
    });
  });

  test('RawExtension and FieldsV1 carry JSON; binaryData is base64', () => {
    const rev = body('apps/v1', 'ControllerRevision', 'k8s.io.api.apps.v1.ControllerRevision', {
      metadata: {
        name: 'web-1',
        managedFields: [
          {
            manager: 'kubectl',
            operation: 'Update',
            apiVersion: 'apps/v1',
            time: { seconds: 1_700_000_000 },
            fieldsType: 'FieldsV1',
            fieldsV1: { Raw: Buffer.from('{"f:data":{}}') },
          },
        ],
      },
      data: { raw: Buffer.from('{"spec":{"template":{"$patch":"replace"}}}') },
      revision: 0,
    });
    assert.deepEqual(decodeProtobuf(rev), {
      kind: 'ControllerRevision',
      apiVersion: 'apps/v1',
      metadata: {
        name: 'web-1',
        managedFields: [
          {
            manager: 'kubectl',
            operation: 'Update',
            apiVersion: 'apps/v1',
            time: '2023-11-14T22:13:20Z',
            fieldsType: 'FieldsV1',
            fieldsV1: { 'f:data': {} },
          },
        ],
      },
      data: { spec: { template: { $patch: 'replace' } } },
      revision: 0,
    });
    const cm = body('v1', 'ConfigMap', 'k8s.io.api.core.v1.ConfigMap', {
      metadata: { name: 'bin' },
      binaryData: { blob: Buffer.from([0, 1, 2, 255]), empty: Buffer.alloc(0) },
      data: { a: '' },
    });
    assert.deepEqual(decodeProtobuf(cm), {
      kind: 'ConfigMap',
      apiVersion: 'v1',
      metadata: { name: 'bin' },
      data: { a: '' },
      binaryData: { blob: 'AAEC/w==', empty: '' },
    });
  });

  test('IntOrString: type 0 is the int, type 1 the string', () => {
    const deploy = body('apps/v1', 'Deployment', 'k8s.io.api.apps.v1.Deployment', {
      metadata: { name: 'd' },
      spec: {
        strategy: {
          type: 'RollingUpdate',
          rollingUpdate: { maxSurge: { type: 1, strVal: '25%' }, maxUnavailable: { type: 0, intVal: 0 } },
        },
      },
    });
    assert.deepEqual((decodeProtobuf(deploy) as { spec: unknown }).spec, {
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: 0 } },
    });
  });

  test('ExtraValue ([]string) is a JSON array; Eviction keeps its DeleteOptions', () => {
    const sar = body(
      'authorization.k8s.io/v1',
      'SubjectAccessReview',
      'k8s.io.api.authorization.v1.SubjectAccessReview',
      {
        metadata: {},
        spec: {
          user: 'bob',
          groups: ['dev'],
          extra: { scopes: { items: ['a', 'b'] } },
          resourceAttributes: { verb: 'get', resource: 'pods' },
        },
      },
    );
    assert.deepEqual((decodeProtobuf(sar) as { spec: unknown }).spec, {
      user: 'bob',
      groups: ['dev'],
      extra: { scopes: ['a', 'b'] },
      resourceAttributes: { verb: 'get', resource: 'pods' },
    });
    const eviction = body('policy/v1', 'Eviction', 'k8s.io.api.policy.v1.Eviction', {
      metadata: { name: 'p', namespace: 'default' },
      deleteOptions: { gracePeriodSeconds: 0, preconditions: { uid: 'u-1' }, dryRun: ['All'] },
    });
    assert.deepEqual(decodeProtobuf(eviction), {
      kind: 'Eviction',
      apiVersion: 'policy/v1',
      metadata: { name: 'p', namespace: 'default' },
      deleteOptions: { gracePeriodSeconds: 0, preconditions: { uid: 'u-1' }, dryRun: ['All'] },
    });
    const options = body('meta.k8s.io/v1', 'DeleteOptions', `${META}.DeleteOptions`, {
      propagationPolicy: 'Foreground',
      orphanDependents: false,
    });
    assert.deepEqual(decodeProtobuf(options), {
      kind: 'DeleteOptions',
      apiVersion: 'meta.k8s.io/v1',
      orphanDependents: false,
      propagationPolicy: 'Foreground',
    });
  });
});

describe('bodies that do not decode are 400s', () => {
  test('no magic, empty, or JSON sent with the protobuf content type', () => {
    assertBadRequest(() => decodeProtobuf(Buffer.alloc(0)), /prefix/);
    assertBadRequest(() => decodeProtobuf(Buffer.from('{"kind":"ConfigMap"}')), /prefix "k8s\\x00"/);
  });

  test('truncated bodies', () => {
    const whole = fixture('create-deployment');
    for (const cut of [5, 10, whole.length - 20, whole.length - 1]) {
      assertBadRequest(() => decodeProtobuf(whole.subarray(0, cut)), /unable to decode the protobuf/);
    }
  });

  test('unknown kinds, encodings and content types', () => {
    assertBadRequest(
      () => decodeProtobuf(envelope('v1', 'Frobnicator', new Uint8Array(0))),
      /no kind "Frobnicator" is registered for version "v1"/,
    );
    assertBadRequest(
      () => decodeProtobuf(envelope('v2', 'ConfigMap', new Uint8Array(0))),
      /no kind "ConfigMap" is registered for version "v2"/,
    );
    assertBadRequest(() => decodeProtobuf(envelope('', '', new Uint8Array(0))), /does not name a kind/);
    assertBadRequest(
      () => decodeProtobuf(envelope('v1', 'ConfigMap', new Uint8Array(0), { contentEncoding: 'gzip' })),
      /content encoding "gzip"/,
    );
    assertBadRequest(
      () => decodeProtobuf(envelope('v1', 'ConfigMap', new Uint8Array(0), { contentType: 'application/cbor' })),
      /content type "application\/cbor"/,
    );
  });

  test('garbage objects, hostile nesting and out-of-range values', () => {
    assertBadRequest(
      () => decodeProtobuf(envelope('v1', 'ConfigMap', Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))),
      /ConfigMap object/,
    );
    // 200k nested start-group tags of an unknown field
    assertBadRequest(
      () => decodeProtobuf(envelope('v1', 'ConfigMap', Buffer.alloc(200_000, 0x7b))),
      /ConfigMap object/,
    );
    const farFuture = body('v1', 'ConfigMap', 'k8s.io.api.core.v1.ConfigMap', {
      metadata: { name: 'c', creationTimestamp: { seconds: 1e15 } },
    });
    assertBadRequest(() => decodeProtobuf(farFuture), /unable to convert/);
    const notJson = body('apps/v1', 'ControllerRevision', 'k8s.io.api.apps.v1.ControllerRevision', {
      metadata: { name: 'r' },
      data: { raw: Buffer.from('not json') },
    });
    assertBadRequest(() => decodeProtobuf(notJson), /RawExtension in the protobuf body is not valid JSON/);
    const deep = body('apps/v1', 'ControllerRevision', 'k8s.io.api.apps.v1.ControllerRevision', {
      metadata: { name: 'r' },
      data: { raw: Buffer.from('['.repeat(20_000)) },
    });
    assertBadRequest(() => decodeProtobuf(deep), /max depth/);
  });
});

describe('protobuf bodies through the server', () => {
  test('POST and DELETE with protobuf bodies; a bad body is a 400 Status', async (t) => {
    const server = await serverFor(t);
    const post = (path: string, data: Buffer) =>
      request<Obj>(server.url, path, {
        method: 'POST',
        body: data,
        headers: { 'content-type': PROTOBUF, accept: `${PROTOBUF}, application/json` },
      });

    const created = await post('/api/v1/namespaces/default/configmaps', fixture('create-configmap'));
    assert.equal(created.status, 201, created.text);
    const got = await request<Obj>(server.url, '/api/v1/namespaces/default/configmaps/cm1');
    assert.deepEqual(got.body.data, { a: 'b', c: 'd' });

    const deployment = await post(
      '/apis/apps/v1/namespaces/default/deployments',
      fixture('create-deployment-zero-replicas'),
    );
    assert.equal(deployment.status, 201, deployment.text);
    assert.equal((deployment.body.spec as { replicas: number }).replicas, 0);

    // A kind that does not match the URL is refused as it is for JSON.
    const mismatch = await post('/api/v1/namespaces/default/secrets', fixture('create-configmap'));
    assert.equal(mismatch.status, 400, mismatch.text);

    for (const bad of [
      Buffer.from('k8s\0\xff\xff\xff', 'latin1'),
      Buffer.from('nope'),
      fixture('create-configmap').subarray(0, 30),
    ]) {
      const reply = await request<StatusBody>(server.url, '/api/v1/namespaces/default/configmaps', {
        method: 'POST',
        body: bad,
        headers: { 'content-type': PROTOBUF },
      });
      assert.equal(reply.status, 400, reply.text);
      assert.equal(reply.body.kind, 'Status');
      assert.equal(reply.body.reason, 'BadRequest');
    }

    const pod = await request<Obj>(server.url, '/api/v1/namespaces/default/pods', {
      method: 'POST',
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'dp1' },
        spec: { nodeName: 'node1', containers: [{ name: 'c', image: 'nginx' }] },
      },
    });
    assert.equal(pod.status, 201, pod.text);
    const deleted = await request<Obj>(server.url, '/api/v1/namespaces/default/pods/dp1', {
      method: 'DELETE',
      body: fixture('drain-delete-pod'),
      headers: { 'content-type': PROTOBUF },
    });
    assert.ok(deleted.status === 200 || deleted.status === 202, deleted.text);
    assert.equal(deleted.body.metadata.deletionGracePeriodSeconds, 5);
  });
});
