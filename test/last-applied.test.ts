import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Api, assertStatus, cmPath, type Obj } from './helpers/http.js';
import { type SimServer, startServer } from './helpers/server.js';

// kube-apiserver's move from client-side to server-side apply (fieldmanager lastappliedmanager.go and
// lastappliedupdater.go), over plain HTTP: what kubectl relies on, and the edges it does not show.

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
const NS = 'upgrade';

describe('server-side apply after client-side apply', () => {
  let server: SimServer | undefined;
  let api: Api;
  after(() => server?.stop());
  before(async () => {
    server = await startServer();
    api = new Api(server.url);
    await api.namespace(NS);
  });

  /** An object as `kubectl apply` (client-side) creates it: the configuration in the annotation, its manager's fields. */
  const clientSideApplied = (name: string, data: Record<string, string>, apiVersion = 'v1'): Promise<Obj> => {
    const config = { apiVersion, kind: 'ConfigMap', metadata: { annotations: {}, name, namespace: NS }, data };
    return api.expect<Obj>(201, `${cmPath(NS)}?fieldManager=kubectl-client-side-apply`, {
      method: 'POST',
      body: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, annotations: { [LAST_APPLIED]: `${JSON.stringify(config)}\n` } },
        data,
      },
    });
  };
  const apply = (name: string, manager: string, body: unknown, extra = '') =>
    api.request<Obj>(`${cmPath(NS, name)}?fieldManager=${manager}${extra}`, {
      method: 'PATCH',
      body,
      headers: { 'content-type': 'application/apply-patch+yaml' },
    });
  const config = (name: string, data: Record<string, string>, annotations?: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: annotations ? { name, namespace: NS, annotations } : { name, namespace: NS },
    data,
  });
  const managers = (obj: Obj): Record<string, unknown> =>
    Object.fromEntries(
      (obj.metadata.managedFields as Array<{ manager: string; operation: string; fieldsV1: unknown }>).map((e) => [
        `${e.manager}/${e.operation}`,
        e.fieldsV1,
      ]),
    );

  it('"kubectl" takes over the fields it last applied client-side, and rewrites the annotation as Go encodes it', async () => {
    await clientSideApplied('taken', { mode: 'one', size: 'small' });
    const applied = config('taken', { size: 'small', mode: 'two <&> \u2028' });
    const reply = await apply('taken', 'kubectl', applied);
    assert.equal(reply.status, 200, reply.text);
    const live = reply.body;
    assert.deepEqual(live.data, { mode: 'two <&> \u2028', size: 'small' });
    assert.equal(
      live.metadata.annotations?.[LAST_APPLIED],
      '{"apiVersion":"v1","data":{"mode":"two \\u003c\\u0026\\u003e \\u2028","size":"small"},"kind":"ConfigMap","metadata":{"name":"taken","namespace":"upgrade"}}\n',
    );
    // Both applied size (the same value: shared); only kubectl owns mode now. The annotation stays the old owner's.
    assert.deepEqual(managers(live), {
      'kubectl-client-side-apply/Update': {
        'f:data': { '.': {}, 'f:size': {} },
        'f:metadata': { 'f:annotations': { '.': {}, [`f:${LAST_APPLIED}`]: {} } },
      },
      'kubectl/Apply': { 'f:data': { 'f:mode': {}, 'f:size': {} } },
    });
  });

  it('another field manager opts out: the conflict stands and the annotation is left alone', async () => {
    const before = await clientSideApplied('other', { mode: 'one' });
    const reply = await apply('other', 'my-tool', config('other', { mode: 'two' }));
    const status = assertStatus(reply, 409, 'Conflict');
    assert.equal(
      status.message,
      'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.mode',
    );
    const forced = await apply('other', 'my-tool', config('other', { mode: 'two' }), '&force=true');
    assert.equal(forced.status, 200, forced.text);
    assert.equal(forced.body.metadata.annotations?.[LAST_APPLIED], before.metadata.annotations?.[LAST_APPLIED]);
  });

  it('a field changed since it was last applied still conflicts, and the 409 names only such fields', async () => {
    await clientSideApplied('changed', { mode: 'one', size: 'small' });
    await api.expect(200, `${cmPath(NS, 'changed')}?fieldManager=kubectl-edit`, {
      method: 'PATCH',
      body: { data: { size: 'large' } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    const reply = await apply('changed', 'kubectl', config('changed', { mode: 'two', size: 'small' }));
    const status = assertStatus(reply, 409, 'Conflict');
    assert.equal(status.message, 'Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.size');
    assert.deepEqual(
      status.details?.causes?.map((c) => c.field),
      ['.data.size'],
    );
    assert.deepEqual((await api.get(cmPath(NS, 'changed'))).data, { mode: 'one', size: 'large' });
  });

  it('a last-applied-configuration of another apiVersion, or one that does not decode, takes nothing over', async () => {
    await clientSideApplied('old-version', { mode: 'one' }, 'v2');
    assertStatus(await apply('old-version', 'kubectl', config('old-version', { mode: 'two' })), 409, 'Conflict');
    await api.create(cmPath(NS), {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'garbled', annotations: { [LAST_APPLIED]: '{"apiVersion":' } },
      data: { mode: 'one' },
    });
    assertStatus(await apply('garbled', 'kubectl', config('garbled', { mode: 'two' })), 409, 'Conflict');
  });

  it('an annotation that would pass the 256 KiB limit of all annotations is dropped, not refused', async () => {
    await clientSideApplied('big', { mode: 'one' });
    const big = 'x'.repeat(300 * 1024);
    const reply = await apply('big', 'kubectl', config('big', { mode: 'one', blob: big }, { note: 'n'.repeat(100) }));
    assert.equal(reply.status, 200, reply.text.slice(0, 300));
    assert.deepEqual(Object.keys(reply.body.metadata.annotations ?? {}), ['note']);
    assert.equal((reply.body.data as Record<string, string>).blob, big);
  });

  it('a field applied before and no longer is removed, but a map whose members are still applied stays', async () => {
    await clientSideApplied('pruned', { mode: 'one', size: 'small' });
    // What kubectl (1.26+) writes after its first server-side apply: the client-side fields moved to its Apply
    // entry, `.` members of maps included.
    const live = await api.get(cmPath(NS, 'pruned'));
    const entries = [
      {
        manager: 'kubectl',
        operation: 'Apply',
        apiVersion: 'v1',
        time: '2024-01-01T00:00:00Z',
        fieldsType: 'FieldsV1',
        fieldsV1: {
          'f:data': { '.': {}, 'f:mode': {}, 'f:size': {} },
          'f:metadata': { 'f:annotations': { '.': {}, [`f:${LAST_APPLIED}`]: {} } },
        },
      },
    ];
    await api.expect(200, cmPath(NS, 'pruned'), {
      method: 'PATCH',
      body: [
        { op: 'replace', path: '/metadata/managedFields', value: entries },
        { op: 'test', path: '/metadata/resourceVersion', value: live.metadata.resourceVersion },
      ],
      headers: { 'content-type': 'application/json-patch+json' },
    });
    const reply = await apply('pruned', 'kubectl', config('pruned', { mode: 'one' }));
    assert.equal(reply.status, 200, reply.text);
    assert.deepEqual(reply.body.data, { mode: 'one' }, 'size goes, data and mode stay');
    assert.deepEqual(managers(reply.body), { 'kubectl/Apply': { 'f:data': { 'f:mode': {} } } });
    // The annotation kubectl no longer applies goes too: nobody else owns it.
    assert.equal(reply.body.metadata.annotations, undefined);
  });
});
