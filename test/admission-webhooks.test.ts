import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import {
  allow,
  deny,
  hostAddress,
  makeCertificates,
  startWebhookServer,
  type WebhookServer,
} from './helpers/webhook-server.js';

// Issue 16: admission webhooks as kube-apiserver calls them — real HTTPS servers with certificates made here, an
// AdmissionReview v1 each, patches stored, denials and call failures in kube-apiserver's words.

const missing = kubectlMissing();

type Obj = Record<string, unknown>;

async function api(
  server: SimServer,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Obj; warnings: string[] }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const warnings = (res.headers.get('warning') ?? '')
    .split(/,\s*(?=299 )/)
    .filter((w) => w !== '')
    .map((w) => JSON.parse(w.replace(/^299 - /, '')) as string);
  return { status: res.status, body: text ? (JSON.parse(text) as Obj) : {}, warnings };
}

function webhookConfiguration(kind: 'Mutating' | 'Validating', name: string, hooks: Obj[]): Obj {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: `${kind}WebhookConfiguration`,
    metadata: { name },
    webhooks: hooks.map((h) => ({ sideEffects: 'None', admissionReviewVersions: ['v1'], ...h })),
  };
}

function rule(resources: string[], operations = ['CREATE', 'UPDATE'], apiGroups = [''], apiVersions = ['v1']): Obj {
  return { operations, apiGroups, apiVersions, resources };
}

const configMaps = '/api/v1/namespaces/default/configmaps';

describe('admission webhooks', { skip: missing }, () => {
  let server: SimServer;
  let hooks: WebhookServer;
  const configs: string[] = [];

  const cleanups: Array<() => unknown> = [];
  const scope = { after: (fn: () => unknown) => cleanups.push(fn) };
  let mapped: WebhookServer;
  before(async () => {
    hooks = await startWebhookServer(scope, makeCertificates(['localhost']));
    mapped = await startWebhookServer(scope, makeCertificates(['webhook-service.system.svc']));
    server = await startServer(['--map-service', `system/webhook-service=127.0.0.1:${mapped.port}`]);
    cleanups.push(() => server.stop());
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  async function install(kind: 'Mutating' | 'Validating', name: string, webhooks: Obj[]): Promise<void> {
    const plural = kind === 'Mutating' ? 'mutatingwebhookconfigurations' : 'validatingwebhookconfigurations';
    const r = await api(
      server,
      'POST',
      `/apis/admissionregistration.k8s.io/v1/${plural}`,
      webhookConfiguration(kind, name, webhooks),
    );
    assert.equal(r.status, 201, JSON.stringify(r.body));
    configs.push(`${plural}/${name}`);
  }

  async function uninstallAll(): Promise<void> {
    for (const c of configs.splice(0)) await api(server, 'DELETE', `/apis/admissionregistration.k8s.io/v1/${c}`);
  }

  it("stores a mutating webhook's JSONPatch, and sends its warnings to kubectl", async () => {
    hooks.handle('/mutate', (request) => {
      assert.equal(request.operation, 'CREATE');
      return allow([{ op: 'add', path: '/metadata/labels', value: { injected: 'yes' } }], {
        warnings: ['configmaps are mutated here'],
      });
    });
    await install('Mutating', 'inject', [
      {
        name: 'inject.example.com',
        clientConfig: { url: `${hooks.url}/mutate`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
      },
    ]);
    const r = await kubectl(server.url, ['create', 'configmap', 'patched', '--from-literal=a=1']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Warning: configmaps are mutated here/);
    const stored = await api(server, 'GET', `${configMaps}/patched`);
    assert.deepEqual((stored.body.metadata as Obj).labels, { injected: 'yes' });
    const review = hooks.received('/mutate').at(-1)!;
    assert.equal(review.apiVersion, 'admission.k8s.io/v1');
    const request = review.request as Obj;
    assert.deepEqual(request.kind, { group: '', version: 'v1', kind: 'ConfigMap' });
    assert.deepEqual(request.resource, { group: '', version: 'v1', resource: 'configmaps' });
    assert.equal(request.namespace, 'default');
    assert.equal(request.name, 'patched');
    assert.equal(request.oldObject, null);
    assert.equal(request.dryRun, false);
    assert.equal((request.options as Obj).kind, 'CreateOptions');
    assert.deepEqual((request.object as Obj).data, { a: '1' });
    await uninstallAll();
  });

  it("answers a denial with the webhook's message through kubectl", async () => {
    hooks.handle('/deny', (request) =>
      (request.object?.data as Obj | undefined)?.forbidden !== undefined
        ? deny('the key "forbidden" is not allowed')
        : allow(),
    );
    await install('Validating', 'deny', [
      {
        name: 'deny.example.com',
        clientConfig: { url: `${hooks.url}/deny`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
      },
    ]);
    const manifest = 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: refused}\ndata: {forbidden: "1"}\n';
    const r = await kubectl(server.url, ['apply', '-f', '-'], { input: manifest });
    assert.notEqual(r.code, 0);
    assert.equal(
      r.stderr.trim(),
      'Error from server (Forbidden): error when creating "STDIN": admission webhook "deny.example.com" denied the request: the key "forbidden" is not allowed',
    );
    const generator = await kubectl(server.url, ['create', 'configmap', 'refused', '--from-literal=forbidden=1']);
    assert.equal(
      generator.stderr.trim(),
      'error: failed to create configmap: admission webhook "deny.example.com" denied the request: the key "forbidden" is not allowed',
    );
    const fine = await kubectl(server.url, ['create', 'configmap', 'allowed', '--from-literal=ok=1']);
    assert.equal(fine.code, 0, fine.stderr);
    await uninstallAll();
  });

  it('fails closed (Fail) or open (Ignore) when the server is down or too slow', async () => {
    const down = await startWebhookServer(scope, hooks.certs);
    const downPort = down.port;
    await down.close();
    hooks.handle('/slow', () => ({ ...allow(), delayMs: 3000 }));
    const failing = (name: string, url: string, failurePolicy: string, timeoutSeconds = 10): Obj => ({
      name,
      failurePolicy,
      timeoutSeconds,
      clientConfig: { url, caBundle: hooks.certs.caBundle },
      rules: [rule(['configmaps'])],
      objectSelector: { matchLabels: { case: name.split('.')[0] } },
    });
    await install('Validating', 'failures', [
      failing('down-fail.example.com', `https://127.0.0.1:${downPort}/x`, 'Fail'),
      failing('down-ignore.example.com', `https://127.0.0.1:${downPort}/x`, 'Ignore'),
      failing('slow-fail.example.com', `${hooks.url}/slow`, 'Fail', 1),
      failing('slow-ignore.example.com', `${hooks.url}/slow`, 'Ignore', 1),
    ]);
    const create = (label: string) =>
      api(server, 'POST', configMaps, { metadata: { generateName: `${label}-`, labels: { case: label } } });
    const downFail = await create('down-fail');
    assert.equal(downFail.status, 500);
    assert.equal(
      downFail.body.message,
      `Internal error occurred: failed calling webhook "down-fail.example.com": failed to call webhook: Post "https://127.0.0.1:${downPort}/x?timeout=10s": dial tcp 127.0.0.1:${downPort}: connect: connection refused`,
    );
    assert.equal((await create('down-ignore')).status, 201);
    const started = Date.now();
    const slowFail = await create('slow-fail');
    assert.equal(slowFail.status, 500);
    assert.equal(
      slowFail.body.message,
      `Internal error occurred: failed calling webhook "slow-fail.example.com": failed to call webhook: Post "${hooks.url}/slow?timeout=1s": context deadline exceeded`,
    );
    assert.ok(Date.now() - started < 2900, 'the timeout, not the server, ended the call');
    assert.equal((await create('slow-ignore')).status, 201);
    await uninstallAll();
  });

  it('calls a webhook only for objects and namespaces its selectors pick and its matchConditions accept', async () => {
    hooks.handle('/selected', () => deny('selected'));
    await api(server, 'POST', '/api/v1/namespaces', { metadata: { name: 'guarded', labels: { guard: 'on' } } });
    await install('Validating', 'selectors', [
      {
        name: 'by-object.example.com',
        clientConfig: { url: `${hooks.url}/selected`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
        objectSelector: { matchExpressions: [{ key: 'guarded', operator: 'Exists' }] },
      },
      {
        name: 'by-namespace.example.com',
        clientConfig: { url: `${hooks.url}/selected`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
        namespaceSelector: { matchLabels: { guard: 'on' } },
        matchConditions: [
          {
            name: 'not-exempt',
            expression: "!has(object.metadata.annotations) || !('exempt' in object.metadata.annotations)",
          },
        ],
      },
    ]);
    const plain = await api(server, 'POST', configMaps, { metadata: { name: 'plain' } });
    assert.equal(plain.status, 201);
    const labelled = await api(server, 'POST', configMaps, { metadata: { name: 'labelled', labels: { guarded: '' } } });
    assert.equal(labelled.status, 403);
    assert.equal(labelled.body.message, 'admission webhook "by-object.example.com" denied the request: selected');
    const inGuarded = await api(server, 'POST', '/api/v1/namespaces/guarded/configmaps', { metadata: { name: 'x' } });
    assert.equal(inGuarded.status, 403);
    assert.match(String(inGuarded.body.message), /by-namespace\.example\.com/);
    const exempt = await api(server, 'POST', '/api/v1/namespaces/guarded/configmaps', {
      metadata: { name: 'y', annotations: { exempt: 'true' } },
    });
    assert.equal(exempt.status, 201, JSON.stringify(exempt.body));
    await uninstallAll();
  });

  it('sees updates with their oldObject and deletes with only it; a DELETE cannot be patched', async () => {
    hooks.handle('/guard', (request) => {
      if (request.operation === 'DELETE') {
        assert.equal(request.object, null);
        const labels = ((request.oldObject?.metadata as Obj | undefined)?.labels ?? {}) as Obj;
        return labels.protected === 'true' ? deny('protected objects stay') : allow();
      }
      const before = (request.oldObject?.data as Obj | undefined)?.v;
      const now = (request.object?.data as Obj | undefined)?.v;
      return before === 'frozen' && now !== 'frozen' ? deny(`v was ${String(before)}`) : allow();
    });
    hooks.handle('/patch-delete', () => allow([{ op: 'add', path: '/metadata/labels', value: { x: 'y' } }]));
    await install('Validating', 'guard', [
      {
        name: 'guard.example.com',
        clientConfig: { url: `${hooks.url}/guard`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'], ['UPDATE', 'DELETE'])],
      },
    ]);
    await api(server, 'POST', configMaps, {
      metadata: { name: 'frozen', labels: { protected: 'true' } },
      data: { v: 'frozen' },
    });
    const patch = await fetch(`${server.url}${configMaps}/frozen`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ data: { v: 'thawed' } }),
    });
    assert.equal(patch.status, 403);
    assert.equal(
      ((await patch.json()) as Obj).message,
      'admission webhook "guard.example.com" denied the request: v was frozen',
    );
    const del = await kubectl(server.url, ['delete', 'configmap', 'frozen']);
    assert.notEqual(del.code, 0);
    assert.match(del.stderr, /admission webhook "guard\.example\.com" denied the request: protected objects stay/);
    const review = hooks.received('/guard').at(-1)!.request as Obj;
    assert.equal(review.operation, 'DELETE');
    assert.equal((review.options as Obj).kind, 'DeleteOptions');
    await uninstallAll();
    await install('Mutating', 'patch-delete', [
      {
        name: 'patch-delete.example.com',
        clientConfig: { url: `${hooks.url}/patch-delete`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'], ['DELETE'])],
      },
    ]);
    const patchedDelete = await api(server, 'DELETE', `${configMaps}/frozen`);
    assert.equal(patchedDelete.status, 500);
    assert.equal(
      patchedDelete.body.message,
      'Internal error occurred: admission webhook "patch-delete.example.com" attempted to modify the object, which is not supported for this operation',
    );
    await uninstallAll();
    assert.equal((await api(server, 'DELETE', `${configMaps}/frozen`)).status, 200);
  });

  it('calls webhooks on a dry run with dryRun set, and stores nothing', async () => {
    hooks.handle('/dry', () => allow([{ op: 'add', path: '/metadata/annotations', value: { seen: 'dry' } }]));
    const refused = await api(
      server,
      'POST',
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      webhookConfiguration('Mutating', 'effects', [
        {
          name: 'effects.example.com',
          sideEffects: 'Some',
          clientConfig: { url: `${hooks.url}/dry` },
          rules: [rule(['configmaps'])],
        },
      ]),
    );
    assert.equal(refused.status, 422, 'admissionregistration/v1 knows no webhook with side effects on a dry run');
    await install('Mutating', 'dry', [
      {
        name: 'on-dry-run.example.com',
        sideEffects: 'NoneOnDryRun',
        clientConfig: { url: `${hooks.url}/dry`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
        objectSelector: { matchLabels: { dry: 'run' } },
      },
    ]);
    const before = hooks.received('/dry').length;
    const dry = await api(server, 'POST', `${configMaps}?dryRun=All`, {
      metadata: { name: 'd2', labels: { dry: 'run' } },
    });
    assert.equal(dry.status, 201, JSON.stringify(dry.body));
    assert.deepEqual((dry.body.metadata as Obj).annotations, { seen: 'dry' }, 'the answer shows the patch');
    assert.equal(hooks.received('/dry').length, before + 1);
    assert.equal((hooks.received('/dry').at(-1)!.request as Obj).dryRun, true);
    assert.deepEqual(((hooks.received('/dry').at(-1)!.request as Obj).options as Obj).dryRun, ['All']);
    assert.equal((await api(server, 'GET', `${configMaps}/d2`)).status, 404, 'a dry run stores nothing');
    await uninstallAll();
  });

  it('reinvokes an IfNeeded webhook once a later webhook changed the object', async () => {
    const seen: string[] = [];
    hooks.handle('/first', (request) => {
      const labels = ((request.object?.metadata as Obj | undefined)?.labels ?? {}) as Obj;
      seen.push(`first:${Object.keys(labels).sort().join(',')}`);
      return allow();
    });
    hooks.handle('/second', (request) => {
      const labels = ((request.object?.metadata as Obj | undefined)?.labels ?? {}) as Obj;
      seen.push(`second:${Object.keys(labels).sort().join(',')}`);
      return labels.second ? allow() : allow([{ op: 'add', path: '/metadata/labels/second', value: 'added' }]);
    });
    await install('Mutating', 'a-first', [
      {
        name: 'first.example.com',
        reinvocationPolicy: 'IfNeeded',
        clientConfig: { url: `${hooks.url}/first`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
      },
    ]);
    await install('Mutating', 'b-second', [
      {
        name: 'second.example.com',
        clientConfig: { url: `${hooks.url}/second`, caBundle: hooks.certs.caBundle },
        rules: [rule(['configmaps'])],
      },
    ]);
    const r = await api(server, 'POST', configMaps, { metadata: { name: 'reinvoked', labels: { start: 'x' } } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.deepEqual(seen, ['first:start', 'second:start', 'first:second,start']);
    assert.equal(((r.body.metadata as Obj).labels as Obj).second, 'added');
    await uninstallAll();
  });

  it('checks the caBundle: a certificate another CA signed fails the call', async () => {
    const other = makeCertificates(['localhost']);
    hooks.handle('/ca', () => allow());
    await install('Validating', 'ca', [
      {
        name: 'ca.example.com',
        clientConfig: { url: `${hooks.url}/ca`, caBundle: other.caBundle },
        rules: [rule(['configmaps'])],
        objectSelector: { matchLabels: { ca: 'check' } },
      },
    ]);
    const r = await api(server, 'POST', configMaps, { metadata: { name: 'ca', labels: { ca: 'check' } } });
    assert.equal(r.status, 500);
    assert.equal(
      r.body.message,
      `Internal error occurred: failed calling webhook "ca.example.com": failed to call webhook: Post "${hooks.url}/ca?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
    );
    await uninstallAll();
  });

  it("reaches a Service's webhook through its Endpoints, checking the certificate for NAME.NAMESPACE.svc", async (t) => {
    const address = hostAddress();
    if (!address) return t.skip('this machine has no address but loopback, which Endpoints may not name');
    const certs = makeCertificates(['webhook-svc.default.svc']);
    const svcHooks = await startWebhookServer(scope, certs, address);
    svcHooks.handle('/svc', () => deny('served by the service'));
    await api(server, 'POST', '/api/v1/namespaces/default/services', {
      metadata: { name: 'webhook-svc' },
      spec: { ports: [{ name: 'https', port: 443, targetPort: 9443 }] },
    });
    const endpoints = await api(server, 'POST', '/api/v1/namespaces/default/endpoints', {
      metadata: { name: 'webhook-svc' },
      subsets: [{ addresses: [{ ip: address }], ports: [{ name: 'https', port: svcHooks.port }] }],
    });
    assert.equal(endpoints.status, 201, JSON.stringify(endpoints.body));
    await install('Validating', 'svc', [
      {
        name: 'svc.example.com',
        clientConfig: {
          service: { namespace: 'default', name: 'webhook-svc', path: '/svc' },
          caBundle: certs.caBundle,
        },
        rules: [rule(['configmaps'])],
        objectSelector: { matchLabels: { via: 'service' } },
      },
    ]);
    const r = await api(server, 'POST', configMaps, { metadata: { name: 'svc', labels: { via: 'service' } } });
    assert.equal(r.status, 403, JSON.stringify(r.body));
    assert.equal(r.body.message, 'admission webhook "svc.example.com" denied the request: served by the service');
    await svcHooks.close();
    const gone = await api(server, 'POST', configMaps, { metadata: { name: 'svc2', labels: { via: 'service' } } });
    assert.equal(gone.status, 500);
    assert.equal(
      gone.body.message,
      `Internal error occurred: failed calling webhook "svc.example.com": failed to call webhook: Post "https://webhook-svc.default.svc:443/svc?timeout=10s": dial tcp ${address}:${svcHooks.port}: connect: connection refused`,
    );
    await uninstallAll();
  });

  it('reaches a Service mapped to a server on the host with sim serve --map-service, as envtest does', async () => {
    mapped.handle('/validate', (request) => (request.name === 'mapped-no' ? deny('mapped says no') : allow()));
    await install('Validating', 'mapped', [
      {
        name: 'mapped.example.com',
        clientConfig: {
          service: { namespace: 'system', name: 'webhook-service', path: '/validate' },
          caBundle: mapped.certs.caBundle,
        },
        rules: [rule(['configmaps'])],
      },
    ]);
    const no = await api(server, 'POST', configMaps, { metadata: { name: 'mapped-no' } });
    assert.equal(no.status, 403);
    assert.equal(no.body.message, 'admission webhook "mapped.example.com" denied the request: mapped says no');
    assert.equal((await api(server, 'POST', configMaps, { metadata: { name: 'mapped-yes' } })).status, 201);
    await uninstallAll();
  });

  it('checks what comes back: a patch that breaks the object fails validation; a bad answer is a failed call', async () => {
    hooks.handle('/break', () => allow([{ op: 'add', path: '/data', value: { 'bad key': 'x' } }]));
    hooks.handle('/garbage', () => ({ status: 200, body: 'not json', contentType: 'application/json' }));
    hooks.handle('/wrong-uid', () => ({
      review: { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'other', allowed: true } },
    }));
    hooks.handle('/crash', () => ({ status: 500, body: 'boom', contentType: 'text/plain' }));
    const hook = (name: string, path: string): Obj => ({
      name: `${name}.example.com`,
      clientConfig: { url: `${hooks.url}${path}`, caBundle: hooks.certs.caBundle },
      rules: [rule(['configmaps'], ['CREATE'])],
      objectSelector: { matchLabels: { answer: name } },
    });
    await install('Mutating', 'answers', [
      hook('break', '/break'),
      hook('garbage', '/garbage'),
      hook('wrong-uid', '/wrong-uid'),
      hook('crash', '/crash'),
    ]);
    const create = (answer: string) =>
      api(server, 'POST', configMaps, { metadata: { name: `answer-${answer}`, labels: { answer } } });
    const broken = await create('break');
    assert.equal(broken.status, 422, JSON.stringify(broken.body));
    // The patched object is validated again (the key's path is the validation's own business).
    assert.match(
      String(broken.body.message),
      /^ConfigMap "answer-break" is invalid: data\S*: Invalid value: "bad key"/,
    );
    const prefix = (name: string) =>
      `Internal error occurred: failed calling webhook "${name}.example.com": failed to call webhook: `;
    const garbage = await create('garbage');
    assert.equal(garbage.status, 500);
    assert.equal(
      garbage.body.message,
      `${prefix('garbage')}couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u')`,
    );
    const wrongUid = await create('wrong-uid');
    assert.equal(wrongUid.status, 500);
    assert.match(
      String(wrongUid.body.message),
      /^Internal error occurred: failed calling webhook "wrong-uid\.example\.com": received invalid webhook response: expected response\.uid="[0-9a-f-]{36}", got "other"$/,
    );
    const crash = await create('crash');
    assert.equal(crash.status, 500);
    assert.equal(
      crash.body.message,
      `${prefix('crash')}an error on the server ("boom") has prevented the request from succeeding`,
    );
    for (const answer of ['break', 'garbage', 'wrong-uid', 'crash'])
      assert.equal((await api(server, 'GET', `${configMaps}/answer-${answer}`)).status, 404, 'nothing was stored');
    await uninstallAll();
  });

  it('matchPolicy Equivalent sees a write through another version in the version it names; Exact does not', async () => {
    const version = (name: string, storage: boolean): Obj => ({
      name,
      served: true,
      storage,
      schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
    });
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'gadgets.example.com' },
      spec: {
        group: 'example.com',
        scope: 'Namespaced',
        names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
        versions: [version('v1', true), version('v2', false)],
      },
    };
    const made = await api(server, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    assert.equal(made.status, 201, JSON.stringify(made.body));
    hooks.handle('/equivalent', () => allow());
    hooks.handle('/exact', () => allow());
    const hook = (name: string, path: string, matchPolicy: string): Obj => ({
      name,
      matchPolicy,
      clientConfig: { url: `${hooks.url}${path}`, caBundle: hooks.certs.caBundle },
      rules: [rule(['gadgets'], ['CREATE'], ['example.com'], ['v1'])],
    });
    await install('Validating', 'policies', [
      hook('equivalent.example.com', '/equivalent', 'Equivalent'),
      hook('exact.example.com', '/exact', 'Exact'),
    ]);
    const gadgets = '/apis/example.com/v2/namespaces/default/gadgets';
    let created: { status: number; body: Obj } = { status: 0, body: {} };
    for (let i = 0; i < 50 && created.status !== 201; i++) {
      created = await api(server, 'POST', gadgets, {
        apiVersion: 'example.com/v2',
        kind: 'Gadget',
        metadata: { name: 'g' },
        spec: { n: 1 },
      });
      if (created.status === 404) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(hooks.received('/exact').length, 0, 'Exact matches v1 writes only');
    const review = hooks.received('/equivalent').at(-1)!.request as Obj;
    assert.deepEqual(review.kind, { group: 'example.com', version: 'v1', kind: 'Gadget' });
    assert.deepEqual(review.resource, { group: 'example.com', version: 'v1', resource: 'gadgets' });
    assert.deepEqual(review.requestKind, { group: 'example.com', version: 'v2', kind: 'Gadget' });
    assert.equal((review.object as Obj).apiVersion, 'example.com/v1');
    await uninstallAll();
  });

  it('admits custom resources, the writes of controllers, and exec (CONNECT)', async () => {
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
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } } },
              },
            },
          },
        ],
      },
    };
    assert.equal(
      (await api(server, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status,
      201,
    );
    hooks.handle('/widgets', (request) => {
      const size = ((request.object?.spec ?? {}) as Obj).size;
      return typeof size === 'number' && size > 10
        ? deny(`size ${size} is too big`)
        : allow([{ op: 'add', path: '/metadata/annotations', value: { checked: 'yes' } }]);
    });
    hooks.handle('/pods', () => allow([{ op: 'add', path: '/metadata/labels/sidecar', value: 'injected' }]));
    hooks.handle('/exec', (request) => {
      const options = request.object as Obj;
      return (options.command as string[]).includes('rm') ? deny('no rm in exec') : allow();
    });
    await install('Mutating', 'widgets', [
      {
        name: 'widgets.example.com',
        clientConfig: { url: `${hooks.url}/widgets`, caBundle: hooks.certs.caBundle },
        rules: [rule(['widgets'], ['CREATE'], ['example.com'], ['*'])],
      },
      {
        name: 'pods.example.com',
        clientConfig: { url: `${hooks.url}/pods`, caBundle: hooks.certs.caBundle },
        rules: [rule(['pods'], ['CREATE'])],
      },
    ]);
    await install('Validating', 'exec', [
      {
        name: 'exec.example.com',
        clientConfig: { url: `${hooks.url}/exec`, caBundle: hooks.certs.caBundle },
        rules: [rule(['pods/exec'], ['CONNECT'])],
      },
    ]);
    const widgets = '/apis/example.com/v1/namespaces/default/widgets';
    let created: { status: number; body: Obj } = { status: 0, body: {} };
    for (let i = 0; i < 50 && created.status !== 201; i++) {
      created = await api(server, 'POST', widgets, {
        apiVersion: 'example.com/v1',
        kind: 'Widget',
        metadata: { name: 'w' },
        spec: { size: 3 },
      });
      if (created.status === 404) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual((created.body.metadata as Obj).annotations, { checked: 'yes' });
    const big = await api(server, 'POST', widgets, {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      metadata: { name: 'big' },
      spec: { size: 11 },
    });
    assert.equal(big.status, 403);
    assert.equal(big.body.message, 'admission webhook "widgets.example.com" denied the request: size 11 is too big');

    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } },
      },
    };
    assert.equal((await api(server, 'POST', '/apis/apps/v1/namespaces/default/deployments', deployment)).status, 201);
    let pods: Obj[] = [];
    for (let i = 0; i < 100 && pods.length === 0; i++) {
      pods = (await api(server, 'GET', '/api/v1/namespaces/default/pods?labelSelector=app%3Dweb')).body.items as Obj[];
      if (pods.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(pods.length, 1, 'the ReplicaSet controller made its pod');
    assert.equal(
      ((pods[0]!.metadata as Obj).labels as Obj).sidecar,
      'injected',
      "the controller's create was admitted",
    );
    const pod = (pods[0]!.metadata as Obj).name as string;
    let running = false;
    for (let i = 0; i < 100 && !running; i++) {
      const p = await api(server, 'GET', `/api/v1/namespaces/default/pods/${pod}`);
      running = ((p.body.status ?? {}) as Obj).phase === 'Running';
      if (!running) await new Promise((r) => setTimeout(r, 100));
    }
    const refused = await kubectl(server.url, ['exec', pod, '--', 'rm', '-rf', '/']);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /admission webhook "exec\.example\.com" denied the request: no rm in exec/);
    const ok = await kubectl(server.url, ['exec', pod, '--', 'echo', 'hello']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(ok.stdout.trim(), 'hello');
    const review = hooks.received('/exec').at(-1)!.request as Obj;
    assert.equal(review.operation, 'CONNECT');
    assert.equal(review.subResource, 'exec');
    assert.deepEqual((review.object as Obj).command, ['echo', 'hello']);
    await uninstallAll();
  });
});
