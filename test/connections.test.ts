import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { test } from 'node:test';
import { Api, cmPath, configMap } from './helpers/http.js';
import { serverFor } from './helpers/server.js';
import { onLines } from '../src/client/watch-lines.js';

const CONNECTIONS = 1000;

/** The open-files limit this process (and the server it starts) runs under; raised by nothing here. */
function openFileLimit(): number {
  try {
    return Number(execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim());
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** Sends the head of a write and part of its body, then destroys the socket before the rest is sent. */
function cutMidBody(url: string, method: string, path: string, contentType: string, body: string): Promise<void> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      const half = body.slice(0, Math.floor(body.length / 2));
      socket.write(
        `${method} ${path} HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-type: ${contentType}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${half}`,
        () => {
          // Give the server time to read the head and the half body and start on the request, then vanish.
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 100);
        },
      );
    });
    socket.on('error', reject);
  });
}

test(`${CONNECTIONS} concurrent connections: open watches all get every event, and requests are served meanwhile`, {
  timeout: 120_000,
}, async (t) => {
  const limit = openFileLimit();
  // Each connection costs the test one descriptor and the server one; both run under the same limit.
  if (limit < CONNECTIONS + 200) {
    t.skip(`ulimit -n is ${limit}: ${CONNECTIONS} connections need more descriptors than this machine allows`);
    return;
  }
  const server = await serverFor(t, ['--nodes', '0']);
  const api = new Api(server.url);
  await api.namespace('conns');
  await api.create(cmPath('conns'), configMap('before'));
  const { resourceVersion } = (await api.list(cmPath('conns'))).metadata;

  // Every connection holds a watch open (so all of them are open at once); GETs run on further connections meanwhile.
  const watchers = CONNECTIONS;
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  t.after(() => agent.destroy());
  const watches: Array<{ req: http.ClientRequest; events: string[]; gotAdded: Promise<void> }> = [];
  const opened: Array<Promise<void>> = [];
  for (let i = 0; i < watchers; i++) {
    const events: string[] = [];
    let gotAdded!: () => void;
    const added = new Promise<void>((resolve) => (gotAdded = resolve));
    const req = http.get(`${server.url}${cmPath('conns')}?watch=true&resourceVersion=${resourceVersion}`, { agent });
    opened.push(
      new Promise((resolve, reject) => {
        req.on('response', (res) => {
          assert.equal(res.statusCode, 200);
          resolve();
          onLines(res, (line) => {
            const event = JSON.parse(line) as { type: string; object: { metadata: { name: string } } };
            events.push(`${event.type} ${event.object.metadata.name}`);
            if (event.object.metadata.name === 'after') gotAdded();
          });
        });
        req.on('error', reject);
      }),
    );
    watches.push({ req, events, gotAdded: added });
  }
  await Promise.all(opened);
  const watchSockets = Object.values(agent.sockets).reduce((n, list) => n + (list?.length ?? 0), 0);
  assert.equal(watchSockets, CONNECTIONS, 'one connection per watch');
  const gets = Array.from(
    { length: 200 },
    () =>
      new Promise<number>((resolve, reject) => {
        http
          .get(`${server.url}${cmPath('conns', 'before')}`, { agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          })
          .on('error', reject);
      }),
  );
  assert.deepEqual(new Set(await Promise.all(gets)), new Set([200]), 'every GET answered 200');

  // Every watch is live: one write reaches all of them.
  await api.create(cmPath('conns'), configMap('after'));
  await Promise.all(watches.map((w) => w.gotAdded));
  for (const w of watches) assert.deepEqual(w.events, ['ADDED after']);
  for (const w of watches) w.req.destroy();
  // And the server still answers new clients.
  assert.equal((await api.request('/healthz')).text, 'ok');
});

test('a client that disconnects mid-request leaves no half-written object', async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  const api = new Api(server.url);
  await api.namespace('cut');
  const { resourceVersion } = (await api.list(cmPath('cut'))).metadata;

  // A create cut after half its body: nothing is created, and the same name can be created afterwards.
  const create = JSON.stringify(configMap('half', { payload: 'p'.repeat(64 * 1024) }));
  await cutMidBody(server.url, 'POST', cmPath('cut'), 'application/json', create);
  const missing = await api.request(cmPath('cut', 'half'));
  assert.equal(missing.status, 404, missing.text.slice(0, 200));
  const created = await api.create(cmPath('cut'), configMap('half', { payload: 'whole' }));
  assert.equal((created.data as Record<string, string>).payload, 'whole');

  // A PUT and a PATCH of every kind cut mid-body leave the object exactly as it was.
  const before = await api.request(cmPath('cut', 'half'));
  const update = JSON.stringify({ ...created, data: { payload: 'q'.repeat(64 * 1024) } });
  await cutMidBody(server.url, 'PUT', cmPath('cut', 'half'), 'application/json', update);
  const patch = JSON.stringify({ data: { payload: 'r'.repeat(64 * 1024) } });
  for (const type of ['application/merge-patch+json', 'application/strategic-merge-patch+json']) {
    await cutMidBody(server.url, 'PATCH', cmPath('cut', 'half'), type, patch);
  }
  await cutMidBody(
    server.url,
    'PATCH',
    `${cmPath('cut', 'half')}?fieldManager=cut`,
    'application/apply-patch+yaml',
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'half' },
      data: { payload: 's'.repeat(64 * 1024) },
    }),
  );
  await cutMidBody(
    server.url,
    'PATCH',
    cmPath('cut', 'half'),
    'application/json-patch+json',
    JSON.stringify([{ op: 'replace', path: '/data/payload', value: 't'.repeat(64 * 1024) }]),
  );
  await cutMidBody(
    server.url,
    'DELETE',
    cmPath('cut', 'half'),
    'application/json',
    JSON.stringify({
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      gracePeriodSeconds: 0,
      propagationPolicy: 'Background'.padEnd(64 * 1024, ' '),
    }),
  );
  const after = await api.request(cmPath('cut', 'half'));
  assert.equal(after.text, before.text, 'the cut writes changed nothing');

  // The only changes since the namespace was made are the one create that completed.
  const events = await api.request<{ items: unknown[] }>(
    `${cmPath('cut')}?watch=true&resourceVersion=${resourceVersion}&timeoutSeconds=1`,
  );
  const lines = events.text
    .trim()
    .split('\n')
    .map(
      (line) =>
        JSON.parse(line) as { type: string; object: { metadata: { name: string }; data: Record<string, string> } },
    );
  assert.deepEqual(
    lines.map((e) => [e.type, e.object.metadata.name, e.object.data.payload]),
    [['ADDED', 'half', 'whole']],
  );
  // Cut requests are no errors of the server's.
  assert.doesNotMatch(server.stderr(), /internal error/);
});
