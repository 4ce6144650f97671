import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { optionalQueryBool, queryBool } from '../src/api/query-params.js';
import { requestAttributes } from '../src/auth/request-info.js';
import { Api, cmPath, configMap, type Obj } from './helpers/http.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch } from './helpers/watch.js';

// Boolean query parameters are converted as apimachinery's Convert_Slice_string_To_bool: only absent, `0` and
// `false` (any case) are false. The official Python client sends `watch=True` and `stdout=True`.

test('queryBool is Convert_Slice_string_To_bool: absent, 0 and false in any case are false; the rest true', () => {
  for (const v of [undefined, null, '0', 'false', 'False', 'FALSE', 'fAlSe', [], ['false', 'true']])
    assert.equal(queryBool(v), false, JSON.stringify(v));
  for (const v of ['1', 'true', 'True', 'TRUE', 'yes', 'no', 'f', 'off', '', ' ', '00', ['True', 'false']])
    assert.equal(queryBool(v), true, JSON.stringify(v));
  assert.equal(optionalQueryBool(undefined), undefined);
  assert.equal(optionalQueryBool('False'), false);
  assert.equal(optionalQueryBool(''), true);
});

test('RBAC reads the watch verb with the same conversion', () => {
  const verb = (query: string): string => requestAttributes('GET', `/api/v1/namespaces/a/pods?${query}`).verb;
  assert.equal(verb('watch=True'), 'watch');
  assert.equal(verb('watch='), 'watch');
  assert.equal(verb('watch=yes'), 'watch');
  assert.equal(verb('watch=FALSE'), 'list');
  assert.equal(verb('watch=0'), 'list');
  assert.equal(verb('watch=0&watch=1'), 'list', 'the first value counts, as in Go');
});

describe('boolean query parameters over the wire', () => {
  let server: SimServer;
  let api: Api;
  const ns = 'bools';
  let podName = '';

  before(async () => {
    server = await startServer(['--nodes', '1', '--clock', 'real']);
    api = new Api(server.url);
    await api.namespace(ns);
    await api.create(cmPath(ns), configMap('one', { k: 'v' }));
    const pod = await api.create(`/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p' },
      spec: { containers: [{ name: 'c', image: 'nginx' }] },
    });
    podName = pod.metadata.name!;
    for (let i = 0; i < 200; i++) {
      const p = await api.get(`/api/v1/namespaces/${ns}/pods/${podName}`);
      if ((p.status as { phase?: string } | undefined)?.phase === 'Running') return;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail('the pod never ran');
  });
  after(() => server?.stop());

  for (const value of ['True', 'yes', '']) {
    test(`watch=${value} watches`, async () => {
      const watch = await httpWatch(server.url, `${cmPath(ns)}?watch=${value}`);
      try {
        // The namespace's ConfigMaps as ADDED: ours and the root-ca-cert-publisher's kube-root-ca.crt.
        await watch.count(2);
        assert.deepEqual(
          watch.events.map((e) => [e.type, e.object.metadata.name]),
          [
            ['ADDED', 'kube-root-ca.crt'],
            ['ADDED', 'one'],
          ],
        );
      } finally {
        watch.close();
      }
    });
  }

  for (const value of ['FALSE', 'False', '0']) {
    test(`watch=${value} lists`, async () => {
      const list = await api.list(`${cmPath(ns)}?watch=${value}`);
      assert.equal(list.kind, 'ConfigMapList');
    });
  }

  test('allowWatchBookmarks=True with sendInitialEvents=True ends the initial events with a bookmark', async () => {
    const watch = await httpWatch(
      server.url,
      `${cmPath(ns)}?watch=True&allowWatchBookmarks=True&sendInitialEvents=True&resourceVersionMatch=NotOlderThan`,
    );
    try {
      await watch.until((events) => events.some((e) => e.type === 'BOOKMARK'), 'the initial-events-end bookmark');
      const bookmark = watch.events.find((e) => e.type === 'BOOKMARK')!;
      assert.equal(bookmark.object.metadata.annotations?.['k8s.io/initial-events-end'], 'true');
    } finally {
      watch.close();
    }
  });

  test('exec with stdout=True runs the command over WebSocket', async () => {
    const path = `/api/v1/namespaces/${ns}/pods/${podName}/exec?command=echo&command=hi&stdout=True&stderr=True`;
    const frames: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(server.url.replace(/^http/, 'ws') + path, ['v5.channel.k8s.io']);
      ws.on('message', (data: Buffer) => frames.push(data));
      ws.on('close', () => resolve());
      ws.on('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => reject(new Error(`exec refused: ${res.statusCode} ${text}`)));
      });
      ws.on('error', reject);
    });
    const stdout = frames
      .filter((f) => f[0] === 1)
      .map((f) => f.subarray(1).toString())
      .join('');
    assert.equal(stdout, 'hi\n');
    const status = frames.find((f) => f[0] === 3);
    assert.deepEqual(JSON.parse(status!.subarray(1).toString()), { metadata: {}, status: 'Success' });
  });

  test('log follow=True streams; timestamps=True stamps the lines', async () => {
    const path = `/api/v1/namespaces/${ns}/pods/${podName}/log?follow=True&timestamps=True`;
    const first = await new Promise<{ chunked: boolean; text: string }>((resolve, reject) => {
      const req = http.get(server.url + path, { agent: false }, (res) => {
        res.once('data', (chunk: Buffer) => {
          resolve({ chunked: res.headers['transfer-encoding'] === 'chunked', text: String(chunk) });
          req.destroy();
        });
      });
      req.on('error', reject);
    });
    assert.ok(first.chunked, 'a followed log is a chunked stream');
    assert.match(first.text, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z /);
  });

  test('force=True takes over fields another manager applied; force=False conflicts; any force on a non-apply patch is 422', async () => {
    const apply = (manager: string, force: string, value: string) =>
      api.request(`${cmPath(ns)}/owned?fieldManager=${manager}&force=${force}`, {
        method: 'PATCH',
        body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owned' }, data: { k: value } }),
        headers: { 'content-type': 'application/apply-patch+yaml' },
      });
    assert.equal((await apply('first', 'False', 'v')).status, 201);
    assert.equal((await apply('second', 'False', 'w')).status, 409, 'force=False is no force');
    const forced = await apply('second', 'True', 'w');
    assert.equal(forced.status, 200, forced.text);
    assert.deepEqual((forced.body as Obj & { data: unknown }).data, { k: 'w' });
    // ValidatePatchOptions refuses force on a merge patch whatever its value, before reading the body.
    for (const force of ['True', 'false']) {
      const reply = await api.request(`${cmPath(ns)}/one?force=${force}`, {
        method: 'PATCH',
        body: { data: { k: 'x' } },
        headers: { 'content-type': 'application/merge-patch+json' },
      });
      assert.equal(reply.status, 422, reply.text);
      assert.equal(
        (reply.body as { message: string }).message,
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch',
      );
    }
    const kept = await api.get(`${cmPath(ns)}/one`);
    assert.deepEqual((kept as Obj & { data: unknown }).data, { k: 'v' });
  });
});
