import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { CLIENT_SCRIPTS, RUBY, rubyClientMissing, runClientScript, writeKubeconfig } from './helpers/clients.js';
import { Api } from './helpers/http.js';
import { type SimServer, startServer } from './helpers/server.js';

// Ruby's kubeclient (Debian's ruby-kubeclient) against `sim serve`: test/clients/ruby_client.rb creates, reads,
// updates, patches (strategic, merge, JSON), applies and deletes, watches (kubeclient still uses the /watch/ paths)
// and catches errors as users' scripts do, and prints what it saw for these tests to judge.

const missing = rubyClientMissing();

type KubeclientError = { class: string; code: number; message: string };

describe("Ruby's kubeclient against sim serve", () => {
  let server: SimServer | undefined;
  let api: Api;
  let kubeconfig: string;
  before(async () => {
    if (missing) return;
    server = await startServer();
    api = new Api(server.url);
    kubeconfig = writeKubeconfig(server.url);
  });
  after(() => server?.stop());

  const ruby = async <T>(t: TestContext, mode: string, namespace: string): Promise<T> => {
    await api.namespace(namespace);
    try {
      return await runClientScript<T>(RUBY, [join(CLIENT_SCRIPTS, 'ruby_client.rb'), mode, kubeconfig, namespace]);
    } catch (err) {
      t.diagnostic(server?.stderr() ?? '');
      throw err;
    }
  };

  it('CRUD: create, get, list by label, update, strategic/merge/JSON patch, server-side apply, a Deployment rolled out, delete', async (t) => {
    if (missing) return t.skip(missing);
    const seen = await ruby<Record<string, unknown>>(t, 'crud', 'rb-crud');
    assert.deepEqual(seen, {
      created: ['ConfigMap', 'settings', { mode: 'fast' }],
      got: { mode: 'fast' },
      listed: ['settings'],
      updated: { mode: 'slow' },
      strategic: { mode: 'slow', size: 'big' },
      merge: { mode: 'slow' },
      json: { mode: 'slow', extra: '1' },
      // kubeclient forces its applies: mode changes hands, extra stays with the client that added it.
      applied: [{ mode: 'applied', extra: '1' }, ['rest-client', 'rb-apply']],
      deploymentStatusOnCreate: {},
      deploymentReady: 2,
      pods: ['Running', 'Running'],
      deleted: ['Status', 'Success', 'settings', 'configmaps'],
      afterDelete: {
        class: 'Kubeclient::ResourceNotFoundError',
        code: 404,
        message: 'configmaps "settings" not found',
      },
    });
  });

  it('watch: from a list resourceVersion with a label selector (a change, a new object, a deletion, others filtered out), and one object by name', async (t) => {
    if (missing) return t.skip(missing);
    const seen = await ruby<{ selected: unknown[]; named: unknown[] }>(t, 'watch', 'rb-watch');
    assert.deepEqual(seen.selected, [
      ['MODIFIED', 'watched', { k: '2' }],
      ['ADDED', 'late', { k: '1' }],
      ['DELETED', 'watched', { k: '2' }],
    ]);
    assert.deepEqual(seen.named, [
      ['ADDED', 'late', { k: '1' }],
      ['MODIFIED', 'late', { k: 'last' }],
    ]);
  });

  it('errors: ResourceNotFoundError, HttpError 409 AlreadyExists, 422 Invalid, an apply conflict, an apply body that is not an object', async (t) => {
    if (missing) return t.skip(missing);
    const seen = await ruby<Record<string, KubeclientError>>(t, 'errors', 'rb-errors');
    assert.deepEqual(seen, {
      notFound: { class: 'Kubeclient::ResourceNotFoundError', code: 404, message: 'configmaps "nope" not found' },
      alreadyExists: { class: 'Kubeclient::HttpError', code: 409, message: 'configmaps "twice" already exists' },
      invalid: {
        class: 'Kubeclient::HttpError',
        code: 422,
        message:
          "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
      },
      applyConflict: {
        class: 'Kubeclient::HttpError',
        code: 409,
        message: 'Apply failed with 1 conflict: conflict with "rest-client" using v1: .data.k',
      },
      // What kube-apiserver's sigs.k8s.io/yaml says of a JSON string where an object belongs.
      applyNotAnObject: {
        class: 'Kubeclient::HttpError',
        code: 400,
        message:
          'error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}',
      },
    });
  });
});
