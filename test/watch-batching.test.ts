import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, cmPath, configMap } from './helpers/http.js';
import { startServer } from './helpers/server.js';
import { httpWatch, webSocketWatch, type WatchClient } from './helpers/watch.js';

/**
 * A deletecollection removes every object in one turn of the server's event loop, so each watcher gets a burst:
 * the first event written at once, the rest held on the corked socket until the turn ends (watch-stream.ts).
 * Every event must still arrive whole, once and in order — as one line each over HTTP, as one text message each
 * over WebSocket — for watchers on the same and on different encodings (JSON and Table share nothing).
 */
test('a burst of events in one turn reaches every HTTP and WebSocket watcher whole, once and in order', async (t) => {
  const server = await startServer(['--nodes', '0']);
  t.after(() => server.stop());
  const api = new Api(server.url);
  await api.namespace('burst');
  const count = 40;
  for (let i = 0; i < count; i++)
    await api.create(
      cmPath('burst'),
      configMap(`cm-${String(i).padStart(2, '0')}`, { value: 'x'.repeat(200 + i) }, { app: 'burst' }),
    );
  const rv = (await api.list(cmPath('burst'))).metadata.resourceVersion;
  const path = `${cmPath('burst')}?watch=true&resourceVersion=${rv}`;
  const watchers: WatchClient[] = [];
  for (let i = 0; i < 3; i++) watchers.push(await httpWatch(server.url, path), await webSocketWatch(server.url, path));
  const selected = await httpWatch(server.url, `${path}&labelSelector=app%3Dburst`);
  const table = await httpWatch(server.url, path, { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' });
  watchers.push(selected, table);
  t.after(() => {
    for (const w of watchers) w.close();
  });

  // Ours only: kube-root-ca.crt would be deleted too, and made again by its controller.
  const reply = await api.request(`${cmPath('burst')}?labelSelector=app%3Dburst`, { method: 'DELETE' });
  assert.equal(reply.status, 200, reply.text);

  for (const w of watchers) {
    await w.count(count);
    assert.equal(w.events.length, count, `${w.description}: exactly ${count} events`);
    assert.ok(
      w.events.every((e) => e.type === 'DELETED'),
      `${w.description}: all DELETED`,
    );
    const versions = w.events.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      versions,
      [...versions].sort((a, b) => a - b),
      `${w.description}: in resourceVersion order`,
    );
    assert.equal(new Set(versions).size, count, `${w.description}: no duplicates`);
  }
  const names = (w: WatchClient): string[] => w.events.map((e) => e.object.metadata.name!).sort();
  assert.deepEqual(
    names(watchers[0]!),
    Array.from({ length: count }, (_, i) => `cm-${String(i).padStart(2, '0')}`),
  );
  assert.equal(table.events[0]!.object.kind, 'Table', 'the Table watcher gets its own encoding');
  assert.equal(watchers[0]!.events[5]!.object.kind, 'ConfigMap');
  assert.equal(
    (watchers[0]!.events[5]!.object.data as Record<string, string>).value,
    (watchers[1]!.events[5]!.object.data as Record<string, string>).value,
  );

  // After the burst the sockets are uncorked: a single later write still arrives at once to each watcher.
  await api.create(cmPath('burst'), configMap('after', {}, { app: 'burst' }));
  for (const w of watchers) await w.count(count + 1);
  assert.ok(watchers.every((w) => w.events[count]!.type === 'ADDED'));
});
