import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Api, assertStatus, cmPath, configMap } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';
import { encodeRecord } from '../src/storage/wal.js';
import { httpWatch, summarize } from './helpers/watch.js';

/** A --data directory and the servers started on it, all cleaned up when the test ends. */
function dataDir(t: { after: (fn: () => Promise<void>) => void }): {
  dir: string;
  servers: SimServer[];
  start: (extra?: string[]) => Promise<SimServer>;
} {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-wal-'));
  const servers: SimServer[] = [];
  t.after(async () => {
    for (const server of servers) await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async (extra: string[] = []): Promise<SimServer> => {
    const server = await startServer(['--data', join(dir, 'data'), '--nodes', '0', ...extra]);
    servers.push(server);
    return server;
  };
  return { dir, servers, start };
}

/** Lines of the log with their byte offsets. */
function walLines(file: string): Array<{ offset: number; text: string }> {
  const buf = readFileSync(file);
  const lines: Array<{ offset: number; text: string }> = [];
  let pos = 0;
  while (pos < buf.length) {
    const nl = buf.indexOf(0x0a, pos);
    const end = nl < 0 ? buf.length : nl;
    lines.push({ offset: pos, text: buf.toString('utf8', pos, end) });
    pos = end + 1;
  }
  return lines;
}

async function createMany(api: Api, namespace: string, n: number, prefix = 'cm'): Promise<Map<string, string>> {
  const created = await Promise.all(
    Array.from({ length: n }, (_, i) => api.create(cmPath(namespace), configMap(`${prefix}-${i}`, { i: String(i) }))),
  );
  return new Map(created.map((o) => [o.metadata.name!, o.metadata.resourceVersion!]));
}

test('--data: 500 concurrent acknowledged writes survive kill -9 with their resourceVersions; a watch from before the crash resumes without a gap', async (t) => {
  const { start } = dataDir(t);
  const first = await start();
  let api = new Api(first.url);
  await api.namespace('crash');
  const before = Number((await api.list(cmPath('crash'))).metadata.resourceVersion);
  const acked = await createMany(api, 'crash', 500);
  const updated = await api.mergePatch(cmPath('crash', 'cm-7'), { data: { touched: 'yes' } });
  acked.set('cm-7', updated.metadata.resourceVersion!);
  assert.equal(new Set(acked.values()).size, 500, 'every write got its own resourceVersion');
  const last = Math.max(...[...acked.values()].map(Number));
  assert.equal((await first.kill()).signal, 'SIGKILL');

  const second = await start();
  api = new Api(second.url);
  const list = await api.list(cmPath('crash'));
  // Every namespace also has the root-ca-cert-publisher's kube-root-ca.crt.
  const found = new Map(
    list.items
      .filter((o) => o.metadata.name !== 'kube-root-ca.crt')
      .map((o) => [o.metadata.name!, o.metadata.resourceVersion!]),
  );
  assert.equal(found.size, 500, 'all 500 objects are back');
  assert.deepEqual(found, acked, 'with the resourceVersions their writes were acknowledged with');
  assert.deepEqual((await api.get(cmPath('crash', 'cm-7'))).data, { i: '7', touched: 'yes' });
  assert.ok(
    Number(list.metadata.resourceVersion) >= last,
    `the counter continues from ${last} (list at ${list.metadata.resourceVersion})`,
  );
  const fresh = await api.create(cmPath('crash'), configMap('after'));
  assert.ok(
    Number(fresh.metadata.resourceVersion) > last,
    'new writes get higher resourceVersions, never a reused one',
  );

  // A watch from a resourceVersion before the crash: every change after it, in order, or 410 — never a gap.
  const watch = await httpWatch(second.url, `${cmPath('crash')}?watch=true&resourceVersion=${before}`);
  t.after(() => watch.close());
  await watch.until(
    (events) => events.some((e) => e.type === 'ERROR' || e.object.metadata?.name === 'after'),
    'the post-restart write or 410',
  );
  if (watch.events[0]!.type === 'ERROR') {
    assert.equal(watch.events[0]!.object.code, 410, summarize(watch.events));
  } else {
    const revisions = watch.events.map((e) => Number(e.object.metadata!.resourceVersion));
    assert.deepEqual(
      revisions,
      [...revisions].sort((a, b) => a - b),
      'in order',
    );
    const seen = new Map(watch.events.map((e) => [e.object.metadata!.name!, e.object.metadata!.resourceVersion!]));
    for (const [name, rv] of acked)
      assert.equal(seen.get(name), rv, `the watch resumed across the crash and saw ${name}@${rv}`);
  }

  // A resourceVersion this server never reached: 504 ResourceVersionTooLarge, so that clients relist.
  const future = Number(fresh.metadata.resourceVersion) + 1000;
  for (const path of [
    `${cmPath('crash')}?resourceVersion=${future}`,
    `${cmPath('crash')}?watch=true&resourceVersion=${future}`,
  ]) {
    const status = assertStatus(await api.request(path), 504, 'Timeout');
    assert.equal(status.message, `Too large resource version: ${future}, current: ${fresh.metadata.resourceVersion}`);
    assert.equal(status.details?.causes?.[0]?.reason, 'ResourceVersionTooLarge');
  }
});

test('--data: a torn record at the end of the log is discarded on start', async (t) => {
  const { dir, start } = dataDir(t);
  const first = await start();
  let api = new Api(first.url);
  const acked = await createMany(api, 'default', 20, 'torn');
  await first.kill();
  const wal = join(dir, 'data', 'wal.log');
  const lines = walLines(wal);
  assert.ok(lines.length > 20, 'the log holds the writes');
  // Half of a record, as a crash in the middle of a write leaves it (never acknowledged).
  const lastRecord = lines[lines.length - 1]!.text;
  const record = `${lastRecord.slice(0, 9)}{"r":${Number(/"r":(\d+)/.exec(lastRecord)![1]) + 1},"k":"/configmaps","t":"A","o":{"metadata":{"na`;
  appendFileSync(wal, record);

  const second = await start();
  api = new Api(second.url);
  assert.match(second.stderr(), /discarded a torn record at the end of .*wal\.log/);
  const found = new Map(
    (await api.list(cmPath('default'))).items
      .filter((o) => o.metadata.name!.startsWith('torn-'))
      .map((o) => [o.metadata.name!, o.metadata.resourceVersion!]),
  );
  assert.deepEqual(found, acked);
  // The torn bytes are gone: writes after the restart are not stuck behind them.
  await api.create(cmPath('default'), configMap('after-torn'));
  await second.kill();
  // A crash can also leave a hole inside the last commit with valid records after it (pages written out of
  // order): still a torn tail, since no later commit follows.
  const last = Number(/"r":(\d+)/.exec(walLines(wal).at(-1)!.text)![1]);
  const ghost = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'ghost', namespace: 'default', resourceVersion: String(last + 2) },
  };
  appendFileSync(
    wal,
    encodeRecord({ t: 'B', r: last }) +
      '\0'.repeat(300) +
      '\n' +
      encodeRecord({ r: last + 2, k: '/configmaps', t: 'A', o: ghost }),
  );
  const third = await start();
  assert.match(third.stderr(), /discarded a torn record/);
  api = new Api(third.url);
  assert.equal((await api.get(cmPath('default', 'after-torn'))).metadata.name, 'after-torn');
  assert.equal((await api.request(cmPath('default', 'ghost'))).status, 404, 'nothing of the torn commit is applied');
});

test('--data: corruption in the middle of the log stops start-up naming the file and offset; --repair truncates there', async (t) => {
  const { dir, start } = dataDir(t);
  const first = await start();
  let api = new Api(first.url);
  const acked = await createMany(api, 'default', 30, 'mid');
  await api.create(cmPath('default'), configMap('later')); // a later commit: the damage below is not a torn tail
  await first.kill();
  const wal = join(dir, 'data', 'wal.log');
  const lines = walLines(wal);
  const victim = lines.filter((l) => l.text.includes('"name":"mid-'))[10]!;
  const victimName = /"name":"(mid-\d+)"/.exec(victim.text)![1]!;
  const buf = readFileSync(wal);
  const at = victim.offset + victim.text.indexOf('"data"') + 2;
  buf[at] = buf[at] === 0x61 ? 0x62 : 0x61; // one flipped byte inside a record, valid records after it
  writeFileSync(wal, buf);

  await assert.rejects(start(), (err: Error) => {
    assert.match(err.message, /exited \(1\) before serving/);
    assert.ok(err.message.includes(`${wal} is corrupt at byte offset ${victim.offset}`), err.message);
    assert.match(err.message, /checksum mismatch/);
    assert.match(err.message, /--repair/);
    return true;
  });
  assert.equal(readFileSync(wal).length, buf.length, 'a refused start leaves the log as it was');

  const repaired = await start(['--repair']);
  assert.match(repaired.stderr(), new RegExp(`--repair: truncated .*wal\\.log at byte offset ${victim.offset}`));
  api = new Api(repaired.url);
  const found = new Map(
    (await api.list(cmPath('default'))).items
      .filter((o) => o.metadata.name!.startsWith('mid-'))
      .map((o) => [o.metadata.name!, o.metadata.resourceVersion!]),
  );
  const victimRv = Number(acked.get(victimName));
  const expected = new Map([...acked].filter(([, rv]) => Number(rv) < victimRv));
  assert.deepEqual(found, expected, 'the records before the bad one are kept, the rest is gone');
  assert.ok(existsSync(join(dir, 'data', 'snapshot.json')));
});

test('a watcher that stops reading is disconnected once its buffer passes the bound; the server stays responsive', async (t) => {
  const server = await startServer(['--nodes', '0', '--watch-history', '50']);
  t.after(async () => {
    await server.stop();
  });
  const api = new Api(server.url);
  const payload = 'x'.repeat(36 * 1024);
  const names = Array.from({ length: 10 }, (_, i) => `big-${i}`);
  for (const name of names) await api.create(cmPath('default'), configMap(name, { v: '0' }));

  // A raw client that sends a watch request and never reads a byte of the chunked stream.
  const socket = net.connect(server.port, '127.0.0.1');
  socket.pause();
  let closed = false;
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(`GET ${cmPath('default')}?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n`);
  await new Promise((resolve) => setTimeout(resolve, 100));

  const rss = (): number => {
    const status = existsSync(`/proc/${server.pid}/status`) ? readFileSync(`/proc/${server.pid}/status`, 'utf8') : '';
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
  };
  const rssBefore = rss();
  const writes = 2000;
  let written = 0;
  for (let i = 0; i < writes; i += names.length) {
    await Promise.all(
      names.map((name, j) => api.mergePatch(cmPath('default', name), { data: { v: `${payload}${i + j}` } })),
    );
    written += names.length * (payload.length + 200);
  }
  const started = Date.now();
  await api.get('/version');
  assert.ok(Date.now() - started < 1000, 'the server answers promptly after the burst');
  const growth = rss() - rssBefore;
  if (rssBefore > 0)
    assert.ok(growth < 256 * 1024 * 1024, `server memory stays bounded (grew ${Math.round(growth / 1048576)} MiB)`);

  // Now read what the server had sent before it cut the stream: bounded, and the stream is over.
  let received = 0;
  socket.on('data', (chunk: Buffer) => (received += chunk.length));
  socket.resume();
  await new Promise<void>((resolve, reject) => {
    if (closed) return resolve();
    const timer = setTimeout(
      () => reject(new Error(`the slow watcher's connection is still open after ${received} bytes`)),
      10_000,
    );
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  assert.ok(
    received < 40 * 1024 * 1024,
    `the slow watcher got ${received} bytes before it was cut (of ~${written} written)`,
  );
  assert.ok(received < written, `cut before the end: ${received} < ${written}`);
});

test('--data: CustomResourceDefinitions and their objects come back from the snapshot and from the log', async (t) => {
  const { start } = dataDir(t);
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'widgets.example.com' },
    spec: {
      group: 'example.com',
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
  const path = '/apis/example.com/v1/namespaces/default/widgets';
  const widget = (name: string): object => ({
    apiVersion: 'example.com/v1',
    kind: 'Widget',
    metadata: { name },
    spec: { size: name },
  });
  const first = await start();
  let api = new Api(first.url);
  await api.create('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  const inSnapshot = await api.create(path, widget('snap'));
  assert.equal((await first.stop()).code, 0, 'a clean stop compacts the log into the snapshot');

  const second = await start();
  api = new Api(second.url);
  assert.equal((await api.get(`${path}/snap`)).metadata.resourceVersion, inSnapshot.metadata.resourceVersion);
  const inLog = await api.create(path, widget('logged'));
  await second.kill();

  const third = await start();
  api = new Api(third.url);
  assert.equal((await api.get(`${path}/snap`)).metadata.uid, inSnapshot.metadata.uid);
  assert.equal((await api.get(`${path}/logged`)).metadata.resourceVersion, inLog.metadata.resourceVersion);
  assert.doesNotMatch(third.stderr(), /dropped logged changes/);
});

test('--data on a virtual clock: advancing waits for changes whose watch events wait for their fsync', async (t) => {
  const { start } = dataDir(t);
  const server = await start(['--clock', 'virtual', '--nodes', '1']);
  const api = new Api(server.url);
  await api.create('/api/v1/namespaces/default/pods', {
    metadata: { name: 'p' },
    spec: { containers: [{ name: 'c', image: 'nginx' }] },
  });
  await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by: '5s' } });
  const pod = await api.get('/api/v1/namespaces/default/pods/p');
  assert.equal((pod.status as { phase?: string } | undefined)?.phase, 'Running', JSON.stringify(pod.status));
  assert.equal((pod.spec as { nodeName?: string }).nodeName, 'node-1');
});
