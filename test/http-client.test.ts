import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import { Resources } from '../src/client/client.js';
import { HttpClient } from '../src/client/http.js';
import { LineSplitter } from '../src/client/watch-lines.js';
import { serverFor } from './helpers/server.js';

// The HTTP KubeClient (what `sim replay --server` drives a server with) posts to subresources that act on an
// object — pods/NAME/binding and pods/NAME/eviction — as the in-process client does, with the server's Status
// back, or its error as an ApiError.

test('HttpClient.createSubresource binds and evicts a pod, and fails with the server’s Status', async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  const client = new HttpClient(server.url);
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'default' },
    spec: { containers: [{ name: 'c', image: 'x' }] },
  };
  await client.create(Resources.pods, 'default', pod);

  const binding = {
    apiVersion: 'v1',
    kind: 'Binding',
    metadata: { name: 'p' },
    target: { kind: 'Node', name: 'node-x' },
  };
  assert.deepEqual(await client.createSubresource(Resources.pods, 'default', 'p', 'binding', binding), {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Success',
    code: 201,
  });
  assert.equal(((await client.get(Resources.pods, 'default', 'p')).spec as { nodeName?: string }).nodeName, 'node-x');

  await assert.rejects(client.createSubresource(Resources.pods, 'default', 'p', 'binding', binding), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.deepEqual(
      [err.code, err.reason, err.message],
      [
        409,
        'Conflict',
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-x"',
      ],
    );
    return true;
  });
  await assert.rejects(
    client.createSubresource(Resources.pods, 'default', 'missing', 'binding', {
      ...binding,
      metadata: { name: 'missing' },
    }),
    (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.deepEqual([err.code, err.reason], [404, 'NotFound']);
      return true;
    },
  );

  const eviction = { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: 'p', namespace: 'default' } };
  await client.createSubresource(Resources.pods, 'default', 'p', 'eviction', eviction);
  // A bound pod is deleted gracefully: it is terminating.
  assert.ok((await client.get(Resources.pods, 'default', 'p')).metadata.deletionTimestamp);
});

test('LineSplitter: watch lines come out whole however the chunks split them', () => {
  const text = '{"type":"ADDED"}\n\n{"type":"MODIFIED","object":{"data":{"a":"ü"}}}\r\n{"type":"DELETED"}\n';
  const expected = ['{"type":"ADDED"}', '{"type":"MODIFIED","object":{"data":{"a":"ü"}}}', '{"type":"DELETED"}'];
  for (let size = 1; size <= text.length; size++) {
    const lines = new LineSplitter();
    const got: string[] = [];
    for (let i = 0; i < text.length; i += size) got.push(...lines.push(text.slice(i, i + size)));
    assert.deepEqual(got, expected, `chunks of ${size}`);
  }
  const open = new LineSplitter();
  assert.deepEqual(open.push('{"type":"ADD'), [], 'an unfinished line waits');
  assert.deepEqual(open.push('ED"}\n{"x"'), ['{"type":"ADDED"}']);
});
