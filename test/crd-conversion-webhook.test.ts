import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { startWebhookServer, type HandlerResult, type WebhookServer } from './helpers/webhook-server.js';

// Issue 16: a two-version CRD converted by a real HTTPS conversion webhook (ConversionReview v1), both ways, on
// get, list and watch, through kubectl and the API; a webhook that fails fails the request in kube-apiserver's words.

const missing = kubectlMissing();

type Obj = Record<string, unknown>;

/** v1 keeps `spec.replicas`; v2 has it as `spec.scale.replicas`. */
function convert(obj: Obj, desired: string): Obj {
  const spec = { ...((obj.spec ?? {}) as Obj) };
  if (desired === 'example.com/v2') {
    spec.scale = { replicas: spec.replicas };
    delete spec.replicas;
  } else {
    spec.replicas = ((spec.scale ?? {}) as Obj).replicas;
    delete spec.scale;
  }
  return { ...obj, apiVersion: desired, spec };
}

function converter(request: Obj): HandlerResult {
  const desired = request.desiredAPIVersion as string;
  return {
    response: {
      convertedObjects: (request.objects as Obj[]).map((o) => convert(o, desired)),
      result: { status: 'Success' },
    },
  };
}

const openSchema = { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } };

async function api(
  server: SimServer,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Obj }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Obj) : {} };
}

/** Reads a watch until `count` events came, or the stream ended. */
async function watchEvents(url: string, count: number, signal: AbortSignal): Promise<Obj[]> {
  const res = await fetch(url, { signal });
  const events: Obj[] = [];
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      events.push(JSON.parse(buffer.slice(0, newline)) as Obj);
      buffer = buffer.slice(newline + 1);
      if (events.length >= count) return events;
      newline = buffer.indexOf('\n');
    }
  }
  return events;
}

describe('CRD conversion webhooks', { skip: missing }, () => {
  let server: SimServer;
  let hooks: WebhookServer;
  const cleanups: Array<() => unknown> = [];
  const scope = { after: (fn: () => unknown) => cleanups.push(fn) };

  before(async () => {
    hooks = await startWebhookServer(scope);
    hooks.handle('/convert', (request) => converter(request));
    server = await startServer(['--nodes', '0']);
    cleanups.push(() => server.stop());
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'gadgets.example.com' },
      spec: {
        group: 'example.com',
        scope: 'Namespaced',
        names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
        versions: [
          { name: 'v1', served: true, storage: true, schema: openSchema },
          { name: 'v2', served: true, storage: false, schema: openSchema },
        ],
        conversion: {
          strategy: 'Webhook',
          webhook: {
            conversionReviewVersions: ['v1'],
            clientConfig: { url: `${hooks.url}/convert`, caBundle: hooks.certs.caBundle },
          },
        },
      },
    };
    const made = await api(server, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    for (let i = 0; i < 50; i++) {
      if ((await api(server, 'GET', '/apis/example.com/v2/namespaces/default/gadgets')).status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  it('stores a v2 object as v1 through the webhook, and reads it back as v2 on get and list', async () => {
    const manifest = 'apiVersion: example.com/v2\nkind: Gadget\nmetadata: {name: g1}\nspec: {scale: {replicas: 3}}\n';
    const applied = await kubectl(server.url, ['apply', '-f', '-'], { input: manifest });
    assert.equal(applied.code, 0, applied.stderr);
    const toStorage = hooks.received('/convert').find((r) => (r.request as Obj).desiredAPIVersion === 'example.com/v1');
    assert.ok(toStorage, 'the write went to the storage version through the webhook');
    assert.equal(toStorage.apiVersion, 'apiextensions.k8s.io/v1');
    assert.equal(toStorage.kind, 'ConversionReview');

    const v1 = await api(server, 'GET', '/apis/example.com/v1/namespaces/default/gadgets/g1');
    assert.equal(v1.status, 200);
    assert.equal(v1.body.apiVersion, 'example.com/v1');
    assert.deepEqual(v1.body.spec, { replicas: 3 });

    const got = await kubectl(server.url, ['get', 'gadgets.v2.example.com', 'g1', '-o', 'json']);
    assert.equal(got.code, 0, got.stderr);
    const v2 = JSON.parse(got.stdout) as Obj;
    assert.equal(v2.apiVersion, 'example.com/v2');
    assert.deepEqual(v2.spec, { scale: { replicas: 3 } });
    assert.equal((v2.metadata as Obj).uid, (v1.body.metadata as Obj).uid, 'metadata is kept as stored');

    const patched = await kubectl(server.url, [
      'patch',
      'gadgets.v2.example.com',
      'g1',
      '--type=merge',
      '-p',
      '{"spec":{"scale":{"replicas":4}}}',
    ]);
    assert.equal(patched.code, 0, patched.stderr);
    const afterPatch = await api(server, 'GET', '/apis/example.com/v1/namespaces/default/gadgets/g1');
    assert.deepEqual(afterPatch.body.spec, { replicas: 4 }, 'a patch through v2 is stored as v1');

    const second = await api(server, 'POST', '/apis/example.com/v1/namespaces/default/gadgets', {
      apiVersion: 'example.com/v1',
      kind: 'Gadget',
      metadata: { name: 'g2' },
      spec: { replicas: 5 },
    });
    assert.equal(second.status, 201, JSON.stringify(second.body));
    const calls = hooks.received('/convert').length;
    const listed = await kubectl(server.url, ['get', 'gadgets.v2.example.com', '-o', 'json']);
    assert.equal(listed.code, 0, listed.stderr);
    const items = (JSON.parse(listed.stdout) as { items: Obj[] }).items;
    assert.deepEqual(
      items.map((o) => [o.apiVersion, (o.metadata as Obj).name, o.spec]),
      [
        ['example.com/v2', 'g1', { scale: { replicas: 4 } }],
        ['example.com/v2', 'g2', { scale: { replicas: 5 } }],
      ],
    );
    const listReview = hooks.received('/convert').at(-1)!.request as Obj;
    assert.equal(hooks.received('/convert').length, calls + 1, 'one review for the whole list');
    assert.equal(listReview.desiredAPIVersion, 'example.com/v2');
    assert.equal((listReview.objects as Obj[]).length, 2);
  });

  it('converts watch events for a v2 watcher, in order', async () => {
    const controller = new AbortController();
    const path = '/apis/example.com/v2/namespaces/default/gadgets?watch=true&fieldSelector=metadata.name%3Dw1';
    const events = watchEvents(`${server.url}${path}`, 3, controller.signal);
    await new Promise((r) => setTimeout(r, 200));
    const v1 = '/apis/example.com/v1/namespaces/default/gadgets';
    const made = await api(server, 'POST', v1, {
      apiVersion: 'example.com/v1',
      kind: 'Gadget',
      metadata: { name: 'w1' },
      spec: { replicas: 1 },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const patched = await fetch(`${server.url}${v1}/w1`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { replicas: 2 } }),
    });
    assert.equal(patched.status, 200);
    assert.equal((await api(server, 'DELETE', `${v1}/w1`)).status, 200);
    const seen = await events;
    controller.abort();
    assert.deepEqual(
      seen.map((e) => [e.type, (e.object as Obj).apiVersion, (e.object as Obj).spec]),
      [
        ['ADDED', 'example.com/v2', { scale: { replicas: 1 } }],
        ['MODIFIED', 'example.com/v2', { scale: { replicas: 2 } }],
        ['DELETED', 'example.com/v2', { scale: { replicas: 2 } }],
      ],
    );
  });

  it('fails a read it cannot convert with 500 and the webhook error; reads in the storage version go on', async () => {
    hooks.handle('/convert', () => ({ response: { result: { status: 'Failure', message: 'converter is broken' } } }));
    const got = await api(server, 'GET', '/apis/example.com/v2/namespaces/default/gadgets/g1');
    assert.equal(got.status, 500);
    assert.equal(got.body.message, 'conversion webhook for example.com/v1, Kind=Gadget failed: converter is broken');
    const listed = await kubectl(server.url, ['get', 'gadgets.v2.example.com']);
    assert.notEqual(listed.code, 0);
    assert.match(listed.stderr, /conversion webhook for example\.com\/v1, Kind=GadgetList failed: converter is broken/);
    const stored = await api(server, 'GET', '/apis/example.com/v1/namespaces/default/gadgets/g1');
    assert.equal(stored.status, 200, 'no conversion is needed in the storage version');

    await hooks.close();
    const down = await api(server, 'GET', '/apis/example.com/v2/namespaces/default/gadgets/g1');
    assert.equal(down.status, 500);
    assert.match(
      String(down.body.message),
      /^conversion webhook for example\.com\/v1, Kind=Gadget failed: Post "https:\/\/127\.0\.0\.1:\d+\/convert": dial tcp 127\.0\.0\.1:\d+: connect: connection refused$/,
    );
    const write = await api(server, 'POST', '/apis/example.com/v2/namespaces/default/gadgets', {
      apiVersion: 'example.com/v2',
      kind: 'Gadget',
      metadata: { name: 'g3' },
      spec: { scale: { replicas: 1 } },
    });
    assert.equal(write.status, 500, 'a write that cannot reach the storage version is not stored');
    assert.equal((await api(server, 'GET', '/apis/example.com/v1/namespaces/default/gadgets/g3')).status, 404);
  });
});
