import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Cluster } from '../src/cluster/cluster.js';
import { arrayBody, listJson, STREAMED_LIST_ITEMS } from '../src/storage/encoding.js';
import { tableOf } from '../src/server/table.js';
import { buildServer } from '../src/server/server.js';
import { httpWatch } from './helpers/watch.js';

/**
 * A long list is a stream that is serialised as the client reads it and never holds up the server: kube-apiserver
 * keeps serving others (node Lease renewals among them) while it sends a big list.
 */
const ITEMS = 20_000;

describe('a long list is streamed without holding up the server', () => {
  let cluster: Cluster;
  let app: FastifyInstance;
  let base: string;
  const finished: string[] = [];

  before(async () => {
    cluster = await Cluster.start({ seed: 5, clock: 'virtual' });
    const namespaces = cluster.kind('', 'v1', 'namespaces');
    const configmaps = cluster.kind('', 'v1', 'configmaps');
    for (const ns of ['big', 'other']) cluster.api.create(namespaces, undefined, { metadata: { name: ns } });
    // ~1 KB each, 20 MB in all: far more than the loopback socket buffers hold, so a reader that stops reading
    // leaves the server with most of the list still to send.
    for (let i = 0; i < ITEMS; i++)
      cluster.api.create(configmaps, 'big', {
        metadata: { name: `cm-${i}` },
        data: { text: `${i} ✓ ${'x'.repeat(1000)}` },
      });
    app = buildServer(cluster);
    app.addHook('onResponse', (request, _reply, done) => {
      finished.push(request.url);
      done();
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await app?.close();
    await cluster?.close();
  });

  test('while a slow reader takes a 20,000-item list, /healthz and watch events are served, and the list is the snapshot it started as', async () => {
    const configmaps = cluster.kind('', 'v1', 'configmaps');
    const snapshot = cluster.api.list(configmaps, 'big', {});
    const expected = `${listJson(snapshot, snapshot.items)}\n`;
    const watch = await httpWatch(base, '/api/v1/namespaces/other/configmaps?watch=true');

    const listPath = '/api/v1/namespaces/big/configmaps';
    const chunks: Buffer[] = [];
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get(base + listPath, { agent: false }, resolve).on('error', reject);
    });
    // A failed assertion must not leave the response open: the server's close would wait for it.
    after(() => response.destroy());
    assert.equal(response.statusCode, 200);
    // Read one piece, then stop reading: the server's socket fills and the list waits for it to drain.
    await new Promise<void>((resolve) =>
      response.once('data', (chunk: Buffer) => {
        chunks.push(chunk);
        resolve();
      }),
    );
    response.pause();

    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(await health.text(), 'ok');
    // A write in the middle of the list: its watch event goes out at once, and the list does not show it.
    cluster.api.create(configmaps, 'other', { metadata: { name: 'during-the-list' } });
    cluster.api.create(configmaps, 'big', { metadata: { name: 'cm-after-the-snapshot' } });
    await watch.until(
      (events) => events.some((e) => e.type === 'ADDED' && e.object.metadata?.name === 'during-the-list'),
      'the ADDED event of during-the-list',
    );
    assert.ok(
      !finished.includes(listPath),
      'the list response had already been sent whole: the test did not catch it mid-stream',
    );
    watch.close();

    response.on('data', (chunk: Buffer) => chunks.push(chunk)).resume();
    await new Promise<void>((resolve, reject) => response.on('end', resolve).on('error', reject));
    const body = Buffer.concat(chunks).toString('utf8');
    assert.equal(body, expected);
    assert.equal((JSON.parse(body) as { items: unknown[] }).items.length, ITEMS);
  });

  test('a long Table list (as kubectl asks without paging) is streamed and is exactly tableOf', async () => {
    const configmaps = cluster.kind('', 'v1', 'configmaps');
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
    const res = await fetch(`${base}/api/v1/namespaces/big/configmaps`, { headers: { accept } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('transfer-encoding'), 'chunked');
    const body = await res.text();
    const list = cluster.api.list(configmaps, 'big', {});
    // Same clock (virtual, not advanced), same objects: the streamed rows must be JSON.stringify(tableOf(...)).
    const table = tableOf(
      cluster.kind('', 'v1', 'configmaps'),
      list.items,
      cluster.clock.now(),
      'Metadata',
      list.metadata,
    );
    assert.equal(body, `${JSON.stringify(table)}\n`);
  });

  test('a client that goes away mid-list ends the work and the server keeps serving', async () => {
    const before = finished.length;
    await new Promise<void>((resolve, reject) => {
      const request = http.get(`${base}/api/v1/namespaces/big/configmaps`, { agent: false }, (res) => {
        res.once('data', () => {
          request.destroy();
          resolve();
        });
      });
      request.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
    });
    const health = await fetch(`${base}/healthz`);
    assert.equal(health.status, 200);
    assert.ok(finished.length > before);
  });
});

describe('ListStream', () => {
  const items = Array.from({ length: STREAMED_LIST_ITEMS * 5 }, (_, i) => ({ i, text: 'y'.repeat(300) }));

  test('makes each piece in a turn of the event loop of its own, even for a reader that never waits', async () => {
    let serialised = 0;
    const body = arrayBody(
      '[',
      items,
      (item) => {
        serialised++;
        return JSON.stringify(item);
      },
      ']',
    );
    assert.ok(body instanceof Readable);
    let turns = 0;
    let ticking = true;
    const tick = (): void => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    ticking = false;
    assert.equal(Buffer.concat(chunks).toString('utf8'), JSON.stringify(items));
    assert.equal(serialised, items.length);
    assert.ok(chunks.length >= 5, `only ${chunks.length} pieces`);
    // Other work (here a ticker on setImmediate) ran between the pieces.
    assert.ok(turns >= chunks.length - 1, `${turns} turns of the event loop for ${chunks.length} pieces`);
  });

  test('destroyed after its first piece, it serialises nothing more', async () => {
    let serialised = 0;
    const body = arrayBody(
      '[',
      items,
      (item) => {
        serialised++;
        return JSON.stringify(item);
      },
      ']',
    ) as Readable;
    await new Promise<void>((resolve) => body.once('data', () => resolve()));
    body.destroy();
    const atDestroy = serialised;
    assert.ok(
      atDestroy < items.length / 2,
      `${atDestroy} of ${items.length} serialised before the first piece was read`,
    );
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(serialised, atDestroy);
  });
});
