import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Api, cmPath, configMap } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch, webSocketWatch } from './helpers/watch.js';

test('--data keeps objects and the resourceVersion counter across a restart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-data-'));
  const data = join(dir, 'cluster.json');
  const servers: SimServer[] = [];
  // One hook, servers first: a running server may still be writing its data file into the directory.
  t.after(async () => {
    for (const server of servers) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const first = await startServer(['--data', data]);
  servers.push(first);
  let api = new Api(first.url);
  await api.namespace('keep');
  const kept = await api.create(cmPath('keep'), configMap('kept', { k: 'v' }, { app: 'kept' }));
  const secret = await api.create('/api/v1/namespaces/keep/secrets', {
    metadata: { name: 'token' },
    stringData: { t: 's3cret' },
  });
  await api.create(cmPath('keep'), configMap('doomed'));
  await api.mergePatch(cmPath('keep', 'kept'), { metadata: { annotations: { touched: 'yes' } } });
  await api.delete(cmPath('keep', 'doomed'));
  const before = await api.get(cmPath('keep', 'kept'));
  // The deletion took the last revision: a list's resourceVersion is the store's, above every object's.
  const revision = Number((await api.list(cmPath('keep'))).metadata.resourceVersion);
  assert.ok(revision > Number(before.metadata.resourceVersion));
  const namespaces = (await api.list('/api/v1/namespaces')).items.map((n) => n.metadata.name).sort();

  const stopped = await first.stop();
  assert.deepEqual(stopped, { code: 0, signal: null, forced: false }, 'SIGTERM shuts down cleanly');

  const second = await startServer(['--data', data]);
  servers.push(second);
  api = new Api(second.url);
  assert.deepEqual(
    await api.get(cmPath('keep', 'kept')),
    before,
    'the object comes back as it was: uid, timestamps, resourceVersion',
  );
  const token = await api.get('/api/v1/namespaces/keep/secrets/token');
  assert.equal(token.metadata.uid, secret.metadata.uid);
  assert.equal(Buffer.from((token.data as Record<string, string>).t!, 'base64').toString(), 's3cret');
  assert.equal((await api.request(cmPath('keep', 'doomed'))).status, 404, 'a deletion is kept too');
  assert.equal(before.metadata.uid, kept.metadata.uid);
  assert.deepEqual(
    (await api.list('/api/v1/namespaces')).items.map((n) => n.metadata.name).sort(),
    namespaces,
    'no namespace created twice',
  );

  const listed = Number((await api.list(cmPath('keep'))).metadata.resourceVersion);
  assert.ok(listed >= revision, `the counter continues: list resourceVersion ${listed} ≥ ${revision}`);
  const fresh = await api.create(cmPath('keep'), configMap('after-restart'));
  assert.ok(
    Number(fresh.metadata.resourceVersion) > revision,
    `new writes get higher resourceVersions (${fresh.metadata.resourceVersion} > ${revision})`,
  );
  const updated = await api.mergePatch(cmPath('keep', 'kept'), { data: { k: 'w' } });
  assert.ok(Number(updated.metadata.resourceVersion) > Number(fresh.metadata.resourceVersion));

  // Optimistic locking still holds against the restored version.
  const stale = await api.request(cmPath('keep', 'kept'), { method: 'PUT', body: before });
  assert.equal(stale.status, 409);
});

test('SIGTERM ends open HTTP and WebSocket watches and exits promptly', async (t) => {
  const server = await startServer();
  t.after(async () => {
    await server.stop();
  });
  const api = new Api(server.url);
  await api.create(cmPath('default'), configMap('seen'));
  const overHttp = await httpWatch(server.url, `${cmPath('default')}?watch=true`);
  const overWs = await webSocketWatch(server.url, `${cmPath('default')}?watch=true`);
  t.after(() => {
    overHttp.close();
    overWs.close();
  });
  await overHttp.count(1);
  await overWs.count(1);
  const started = Date.now();
  const result = await server.stop();
  assert.deepEqual(
    result,
    { code: 0, signal: null, forced: false },
    `the server must exit by itself (took ${Date.now() - started} ms)`,
  );
  await overHttp.done;
  await overWs.done;
});
