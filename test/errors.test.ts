import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, assertStatus, cmPath, configMap, retryOnConflict, type Obj, type ObjList } from './helpers/http.js';
import { serverFor, startServer, type SimServer } from './helpers/server.js';
import { httpWatch, webSocketWatch, type WatchClient } from './helpers/watch.js';

const CONFLICT =
  'Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply your changes to the latest version and try again';

test('a stale update gets 409 Conflict, and the retry with the latest resourceVersion succeeds', async (t) => {
  const server = await serverFor(t);
  const api = new Api(server.url);
  const path = cmPath('default', 'x');
  const created = await api.create(cmPath('default'), configMap('x', { count: '0' }));

  // Two clients read the same version; the first write wins.
  const readByA = await api.get(path);
  const readByB = await api.get(path);
  const byA = await api.put(path, { ...readByA, data: { count: '1' } });
  assert.ok(Number(byA.metadata.resourceVersion) > Number(created.metadata.resourceVersion));

  const stale = await api.request(path, { method: 'PUT', body: { ...readByB, data: { count: 'from-b' } } });
  const status = assertStatus(stale, 409, 'Conflict');
  assert.equal(status.message, CONFLICT);
  assert.deepEqual(status.details, { name: 'x', kind: 'configmaps' });
  assert.deepEqual((await api.get(path)).data, { count: '1' }, 'the stale write changed nothing');

  // A patch carrying a stale resourceVersion is a precondition too; so is a delete's.
  const stalePatch = await api.request(path, {
    method: 'PATCH',
    body: { metadata: { resourceVersion: readByB.metadata.resourceVersion }, data: { count: 'patched' } },
    headers: { 'content-type': 'application/merge-patch+json' },
  });
  assert.equal(assertStatus(stalePatch, 409, 'Conflict').message, CONFLICT);
  const staleDelete = await api.delete(path, {
    kind: 'DeleteOptions',
    apiVersion: 'v1',
    preconditions: { resourceVersion: readByB.metadata.resourceVersion },
  });
  assert.equal(assertStatus(staleDelete, 409, 'Conflict').message, CONFLICT);
  const wrongUid = await api.delete(path, { preconditions: { uid: '00000000-0000-0000-0000-000000000000' } });
  assert.match(
    assertStatus(wrongUid, 409, 'Conflict').message!,
    /^Operation cannot be fulfilled on configmaps "x": Precondition failed: UID in precondition/,
  );

  // B re-reads and retries: success, on top of A's write.
  const retried = await retryOnConflict(async () => {
    const latest = await api.get(path);
    return api.request<Obj>(path, {
      method: 'PUT',
      body: { ...latest, data: { ...(latest.data as object), fromB: 'yes' } },
    });
  });
  assert.equal(retried.status, 200, retried.text);
  assert.deepEqual(retried.body.data, { count: '1', fromB: 'yes' });
  assert.ok(Number(retried.body.metadata.resourceVersion) > Number(byA.metadata.resourceVersion));
  assert.equal(retried.body.metadata.uid, created.metadata.uid);

  // Concurrent read-modify-write loops lose no increment.
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 5; i++) {
        const reply = await retryOnConflict(async () => {
          const latest = await api.get(path);
          const data = latest.data as Record<string, string>;
          return api.request(path, {
            method: 'PUT',
            body: { ...latest, data: { ...data, count: String(Number(data.count) + 1) } },
          });
        }, 1000);
        assert.equal(reply.status, 200, reply.text);
      }
    }),
  );
  assert.equal(((await api.get(path)).data as Record<string, string>).count, String(1 + 40));
});

describe('every error answers with its Status, and the server is unharmed', () => {
  let server: SimServer;
  let api: Api;
  let snapshot: ObjList;
  const path = cmPath('errors', 'x');

  let writes: WatchClient;
  after(() => {
    writes?.close();
    return server?.stop();
  });
  before(async () => {
    // A tiny watch history, so a 410 is easy to provoke.
    server = await startServer(['--watch-history', '3']);
    api = new Api(server.url);
    await api.namespace('errors');
    await api.create(cmPath('errors'), configMap('x', { k: 'v' }, { app: 'x' }));
    for (let i = 0; i < 5; i++) await api.create(cmPath('errors'), configMap(`filler-${i}`));
    snapshot = await api.list(cmPath('errors'));
    // Any write that slipped through would show up here.
    writes = await httpWatch(
      server.url,
      `${cmPath('errors')}?watch=true&resourceVersion=${snapshot.metadata.resourceVersion}`,
    );
  });

  test('400 BadRequest: malformed JSON', async () => {
    const reply = await api.request(cmPath('errors'), {
      method: 'POST',
      body: '{"metadata": {"name": "broken"',
      headers: { 'content-type': 'application/json' },
    });
    assertStatus(reply, 400, 'BadRequest');
    assertStatus(await api.request(path, { method: 'PUT', body: '{not json}' }), 400, 'BadRequest');
    assertStatus(
      await api.request(path, {
        method: 'PATCH',
        body: '{',
        headers: { 'content-type': 'application/merge-patch+json' },
      }),
      400,
      'BadRequest',
    );
  });

  test('400 BadRequest: namespace in the body differs from the URL', async () => {
    const reply = await api.request(cmPath('errors'), {
      method: 'POST',
      body: { metadata: { name: 'elsewhere', namespace: 'default' } },
    });
    const status = assertStatus(reply, 400, 'BadRequest');
    assert.equal(
      status.message,
      'the namespace of the provided object does not match the namespace sent on the request',
    );
  });

  test('400 BadRequest: a bad label selector', async () => {
    for (const selector of ['app in (x', 'a=b=c', '!', 'app notin ()']) {
      const reply = await api.request(`${cmPath('errors')}?labelSelector=${encodeURIComponent(selector)}`);
      assertStatus(reply, 400, 'BadRequest');
      assert.match(
        (reply.body as { message: string }).message,
        /unable to parse requirement|found|values set can't be empty/,
        selector,
      );
    }
    // A watch checks its parameters before it starts streaming, so it is a plain 400 too.
    assertStatus(
      await api.request(`${cmPath('errors')}?watch=true&labelSelector=${encodeURIComponent('app in (x')}`),
      400,
      'BadRequest',
    );
    await assert.rejects(
      webSocketWatch(server.url, `${cmPath('errors')}?watch=true&labelSelector=${encodeURIComponent('app in (x')}`),
      /Unexpected server response: 400/,
    );
  });

  test('400 BadRequest: an unsupported field selector', async () => {
    const reply = await api.request(`${cmPath('errors')}?fieldSelector=${encodeURIComponent('spec.nodeName=n1')}`);
    assert.equal(assertStatus(reply, 400, 'BadRequest').message, 'field label not supported: spec.nodeName');
    const data = await api.request(`/api/v1/configmaps?fieldSelector=${encodeURIComponent('data.k=v')}`);
    assert.equal(assertStatus(data, 400, 'BadRequest').message, 'field label not supported: data.k');
    assert.equal(
      assertStatus(await api.request(`${cmPath('errors')}?watch=true&fieldSelector=spec.x%3Dy`), 400, 'BadRequest')
        .message,
      'field label not supported: spec.x',
    );
    // The supported ones work.
    const byName = await api.list(`${cmPath('errors')}?fieldSelector=${encodeURIComponent('metadata.name=x')}`);
    assert.deepEqual(
      byName.items.map((o) => o.metadata.name),
      ['x'],
    );
  });

  test('404 NotFound: a missing object, and creating into a missing namespace', async () => {
    const missing = await api.request(cmPath('errors', 'nope'));
    const status = assertStatus(missing, 404, 'NotFound');
    assert.equal(status.message, 'configmaps "nope" not found');
    assert.deepEqual(status.details, { name: 'nope', kind: 'configmaps' });
    assert.equal(
      assertStatus(
        await api.request(cmPath('errors', 'nope'), { method: 'PUT', body: configMap('nope') }),
        404,
        'NotFound',
      ).message,
      'configmaps "nope" not found',
    );
    assert.equal(
      assertStatus(await api.delete(cmPath('errors', 'nope')), 404, 'NotFound').message,
      'configmaps "nope" not found',
    );
    const deployment = await api.request('/apis/apps/v1/namespaces/errors/deployments/nope');
    assert.equal(assertStatus(deployment, 404, 'NotFound').message, 'deployments.apps "nope" not found');

    const intoMissing = await api.request(cmPath('no-such-ns'), { method: 'POST', body: configMap('x') });
    const nsStatus = assertStatus(intoMissing, 404, 'NotFound');
    assert.equal(nsStatus.message, 'namespaces "no-such-ns" not found');
    assert.deepEqual(nsStatus.details, { name: 'no-such-ns', kind: 'namespaces' });

    assert.equal(
      assertStatus(await api.request('/api/v1/nonsense'), 404, 'NotFound').message,
      'the server could not find the requested resource',
    );
  });

  test('405 MethodNotAllowed', async () => {
    assertStatus(await api.request(path, { method: 'POST', body: configMap('x') }), 405, 'MethodNotAllowed');
    assertStatus(await api.request(cmPath('errors'), { method: 'PUT', body: configMap('x') }), 405, 'MethodNotAllowed');
  });

  test('409 AlreadyExists', async () => {
    const reply = await api.request(cmPath('errors'), { method: 'POST', body: configMap('x', { other: 'data' }) });
    const status = assertStatus(reply, 409, 'AlreadyExists');
    assert.equal(status.message, 'configmaps "x" already exists');
    assert.deepEqual(status.details, { name: 'x', kind: 'configmaps' });
  });

  test('409 Conflict', async () => {
    const current = await api.get(path);
    const stale = { ...current, metadata: { ...current.metadata, resourceVersion: '1' }, data: { k: 'stale' } };
    const status = assertStatus(await api.request(path, { method: 'PUT', body: stale }), 409, 'Conflict');
    assert.equal(status.message, CONFLICT);
  });

  test('410 Expired: a watch from a compacted resourceVersion', async () => {
    const watch = await httpWatch(server.url, `${cmPath('errors')}?watch=true&resourceVersion=1`);
    await watch.done;
    assert.equal(watch.status, 200);
    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.kind, e.object.code, e.object.reason]),
      [['ERROR', 'Status', 410, 'Expired']],
    );
  });

  test('413 RequestEntityTooLarge for a body over 3 MiB', async () => {
    const big = JSON.stringify(configMap('big', { blob: 'x'.repeat(3 * 1024 * 1024) }));
    const reply = await api.request(cmPath('errors'), { method: 'POST', body: big });
    assert.equal(
      assertStatus(reply, 413, 'RequestEntityTooLarge').message,
      'Request entity too large: limit is 3145728',
    );
    assertStatus(await api.request(path, { method: 'PUT', body: big }), 413, 'RequestEntityTooLarge');
  });

  test('415 UnsupportedMediaType', async () => {
    assertStatus(
      await api.request(cmPath('errors'), {
        method: 'POST',
        body: 'name: y',
        headers: { 'content-type': 'text/plain' },
      }),
      415,
      'UnsupportedMediaType',
    );
    // A patch must say which kind of patch it is; plain JSON is not one.
    assertStatus(
      await api.request(path, {
        method: 'PATCH',
        body: { data: { k: 'w' } },
        headers: { 'content-type': 'application/json' },
      }),
      415,
      'UnsupportedMediaType',
    );
  });

  test('406 NotAcceptable for Accept: application/vnd.kubernetes.protobuf alone', async () => {
    const reply = await api.request(path, { headers: { accept: 'application/vnd.kubernetes.protobuf' } });
    assertStatus(reply, 406, 'NotAcceptable');
    // With JSON as a fallback it is fine.
    const ok = await api.request(path, {
      headers: { accept: 'application/vnd.kubernetes.protobuf, application/json' },
    });
    assert.equal(ok.status, 200);
    assert.match(ok.headers.get('content-type') ?? '', /^application\/json/);
  });

  test('422 Invalid with details.causes for an invalid name or label', async () => {
    const badName = await api.request(cmPath('errors'), { method: 'POST', body: configMap('Bad_Name') });
    const status = assertStatus(badName, 422, 'Invalid');
    assert.match(
      status.message!,
      /^ConfigMap "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of/,
    );
    assert.equal(status.details?.name, 'Bad_Name');
    assert.equal(status.details?.kind, 'ConfigMap');
    assert.deepEqual(
      status.details?.causes?.map((c) => [c.reason, c.field]),
      [['FieldValueInvalid', 'metadata.name']],
    );

    const badLabel = await api.request(cmPath('errors'), {
      method: 'POST',
      body: configMap('fine-name', {}, { app: '-bad-' }),
    });
    const labelStatus = assertStatus(badLabel, 422, 'Invalid');
    assert.match(labelStatus.message!, /^ConfigMap "fine-name" is invalid: metadata\.labels: Invalid value: "-bad-"/);
    assert.deepEqual(
      labelStatus.details?.causes?.map((c) => [c.reason, c.field]),
      [['FieldValueInvalid', 'metadata.labels']],
    );

    const badKey = await api.request(path, {
      method: 'PATCH',
      body: { metadata: { labels: { 'bad key': 'v' } } },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.deepEqual(
      assertStatus(badKey, 422, 'Invalid').details?.causes?.map((c) => c.field),
      ['metadata.labels'],
    );

    const missingName = await api.request(cmPath('errors'), { method: 'POST', body: { data: {} } });
    assert.deepEqual(
      assertStatus(missingName, 422, 'Invalid').details?.causes?.map((c) => [c.reason, c.field]),
      [['FieldValueRequired', 'metadata.name']],
    );
  });

  test('afterwards the data is unchanged and the server answers correctly', async () => {
    const now = await api.list(cmPath('errors'));
    assert.deepEqual(now.items, snapshot.items, 'no failed request changed any object');
    const created = await api.create(cmPath('errors'), configMap('after', { ok: 'yes' }));
    assert.ok(Number(created.metadata.resourceVersion) > Number(snapshot.metadata.resourceVersion));
    // The first event since the errors began is this create: none of them wrote anything.
    await writes.count(1);
    assert.deepEqual(
      writes.events.map((e) => [e.type, e.object.metadata.name]),
      [['ADDED', 'after']],
    );
    assert.deepEqual((await api.get(path)).data, { k: 'v' });
    assert.equal((await api.request('/version')).status, 200);
    assert.equal((await api.request('/healthz')).text, 'ok');
  });
});
