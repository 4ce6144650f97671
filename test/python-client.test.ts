import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { CLIENT_SCRIPTS, PYTHON, pythonClientMissing, runClientScript, writeKubeconfig } from './helpers/clients.js';
import { Api } from './helpers/http.js';
import { type SimServer, startServer } from './helpers/server.js';

// The official Python client (Debian's python3-kubernetes, run by /usr/bin/python3) against `sim serve`: the
// scripts in test/clients/python_client.py do what users' scripts do — watch.Watch().stream, utils.create_from_yaml,
// kubernetes.stream.stream exec, ApiException handling — and print what they saw for these tests to judge.

const missing = pythonClientMissing();

interface ApiError {
  status: number;
  reason: string;
  body: string;
  contentType: string;
}

/** A Status as kube-apiserver writes it: Go's struct field order, and the newline its JSON encoder ends with. */
function goStatus(code: number, reason: string, message: string, details: Record<string, unknown>): string {
  const { name, group, kind, causes } = details;
  return `${JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    details: { name, group, kind, causes },
    code,
  })}\n`;
}

const INVALID_NAME =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

describe('the official Python client (python3-kubernetes) against sim serve', () => {
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

  /** Runs one mode of python_client.py in a namespace of its own; undefined (the test skipped) without the client. */
  const python = async <T>(t: TestContext, mode: string, namespace: string, ...args: string[]): Promise<T> => {
    await api.namespace(namespace);
    try {
      return await runClientScript<T>(PYTHON, [
        join(CLIENT_SCRIPTS, 'python_client.py'),
        mode,
        kubeconfig,
        namespace,
        ...args,
      ]);
    } catch (err) {
      t.diagnostic(server?.stderr() ?? '');
      throw err;
    }
  };

  it('watch.Watch().stream: the initial ADDED events, every change from a resourceVersion in order, a selector transition as DELETED, timeout_seconds ending the stream', async (t) => {
    if (missing) return t.skip(missing);
    type Change = { type: string; labels: Record<string, string>; phase: string; terminating: boolean };
    const seen = await python<{
      listed: string[];
      initial: Array<[string, string, string]>;
      changes: Change[];
      selected: unknown[];
      timedOut: { events: string[]; seconds: number };
    }>(t, 'watch', 'py-watch');

    assert.ok(seen.listed.includes('py-watch') && seen.listed.includes('default'), seen.listed.join());
    assert.deepEqual(
      seen.initial.map(([type, cls]) => `${type} ${cls}`),
      seen.listed.map(() => 'ADDED V1Namespace'),
    );
    assert.deepEqual(seen.initial.map(([, , name]) => name).sort(), seen.listed);

    const [added, labelled, ...rest] = seen.changes;
    const deleted = rest.pop();
    const name = { 'kubernetes.io/metadata.name': 'py-watch-watched' };
    assert.deepEqual(added, { type: 'ADDED', labels: name, phase: 'Active', terminating: false });
    assert.deepEqual(labelled, {
      type: 'MODIFIED',
      labels: { ...name, seen: 'yes' },
      phase: 'Active',
      terminating: false,
    });
    // The namespace controller empties it and removes its finalizer: MODIFIED while Terminating, then DELETED.
    assert.ok(rest.length >= 1, JSON.stringify(seen.changes));
    for (const c of rest)
      assert.deepEqual(c, {
        type: 'MODIFIED',
        labels: { ...name, seen: 'yes' },
        phase: 'Terminating',
        terminating: true,
      });
    assert.deepEqual(deleted, {
      type: 'DELETED',
      labels: { ...name, seen: 'yes' },
      phase: 'Terminating',
      terminating: true,
    });

    // Relabelled out of app=py: the watcher gets DELETED with the object as it last matched.
    assert.deepEqual(seen.selected, [
      ['MODIFIED', { k: '2' }, { app: 'py' }],
      ['DELETED', { k: '2' }, { app: 'py' }],
    ]);
    const configMaps = (await api.list('/api/v1/namespaces/py-watch/configmaps')).items;
    assert.deepEqual(
      seen.timedOut.events,
      configMaps.map(() => 'ADDED'),
    );
    assert.ok(seen.timedOut.seconds >= 0.9, `the watch ended after ${seen.timedOut.seconds} s, before its timeout`);
  });

  it('a watch from a resourceVersion older than the watch history: ApiException 410 "Expired: too old resource version"', async (t) => {
    if (missing) return t.skip(missing);
    const small = await startServer(['--watch-history', '10']);
    t.after(() => small.stop());
    await new Api(small.url).namespace('py-expired');
    const seen = await runClientScript<{ status: number; reason: string; from: string }>(PYTHON, [
      join(CLIENT_SCRIPTS, 'python_client.py'),
      'watch-expired',
      writeKubeconfig(small.url),
      'py-expired',
    ]);
    assert.equal(seen.status, 410, JSON.stringify(seen));
    assert.match(seen.reason, new RegExp(`^Expired: too old resource version: ${seen.from} \\(\\d+\\)$`));
  });

  it('discovery through the typed APIs (/version/, /api/, /apis/ with their trailing slash) and the dynamic client', async (t) => {
    if (missing) return t.skip(missing);
    const seen = await python<{
      version: string;
      coreVersions: string[];
      groups: string[];
      appsPreferred: string;
      appsResources: string[];
      dynamic: { patched: Record<string, string>; listed: string[]; watched: string[][] };
    }>(t, 'discovery', 'py-discovery');
    const version = await api.get('/version');
    assert.equal(seen.version, (version as unknown as { gitVersion: string }).gitVersion);
    assert.deepEqual(seen.coreVersions, ['v1']);
    assert.ok(seen.groups.includes('apps') && seen.groups.includes('batch'), seen.groups.join());
    assert.equal(seen.appsPreferred, 'apps/v1');
    assert.ok(seen.appsResources.includes('deployments/scale'), seen.appsResources.join());
    // The namespace's kube-root-ca.crt (the root-ca-cert-publisher's) is listed and watched beside it.
    assert.deepEqual(seen.dynamic, {
      patched: { a: '1', b: '2' },
      listed: ['dyn', 'kube-root-ca.crt'],
      watched: [
        ['ADDED', 'dyn'],
        ['ADDED', 'kube-root-ca.crt'],
      ],
    });
  });

  it('utils.create_from_yaml of a multi-document file creates every object; again, FailToCreateError holds a 409 AlreadyExists for each', async (t) => {
    if (missing) return t.skip(missing);
    const file = join(dirname(kubeconfig), 'app.yaml');
    writeFileSync(
      file,
      `apiVersion: v1
kind: Namespace
metadata:
  name: py-yaml-app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: py-yaml-app
data:
  mode: fast
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: py-yaml-app
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: py-yaml-app
spec:
  selector: {app: web}
  ports:
  - port: 80
`,
    );
    const result = await python<{ created: string[][]; again: ApiError[] | null }>(
      t,
      'create-from-yaml',
      'py-yaml',
      file,
    );
    assert.deepEqual(result.created, [
      ['Namespace/py-yaml-app'],
      ['ConfigMap/settings'],
      ['Deployment/web'],
      ['Service/web'],
    ]);
    assert.deepEqual((await api.get('/api/v1/namespaces/py-yaml-app/configmaps/settings')).data, { mode: 'fast' });
    assert.equal(
      ((await api.get('/apis/apps/v1/namespaces/py-yaml-app/deployments/web')).spec as { replicas: number }).replicas,
      2,
    );
    assert.ok(
      ((await api.get('/api/v1/namespaces/py-yaml-app/services/web')).spec as { clusterIP?: string }).clusterIP,
    );

    assert.ok(result.again, 'the second run raised FailToCreateError');
    assert.deepEqual(
      result.again.map((e) => {
        const body = JSON.parse(e.body) as { reason: string; message: string; code: number };
        return [e.status, e.reason, body.code, body.reason, body.message];
      }),
      [
        [409, 'Conflict', 409, 'AlreadyExists', 'namespaces "py-yaml-app" already exists'],
        [409, 'Conflict', 409, 'AlreadyExists', 'configmaps "settings" already exists'],
        [409, 'Conflict', 409, 'AlreadyExists', 'deployments.apps "web" already exists'],
        [409, 'Conflict', 409, 'AlreadyExists', 'services "web" already exists'],
      ],
    );
  });

  it('exec with kubernetes.stream.stream: the whole output, stdout and stderr apart, exit codes from the error channel (returncode)', async (t) => {
    if (missing) return t.skip(missing);
    const result = await python<{
      preloaded: string;
      failed: { stdout: string; stderr: string; returncode: number };
      succeeded: { stdout: string; returncode: number };
    }>(t, 'exec', 'py-exec');
    assert.equal(result.preloaded, 'hello\nshell\n');
    assert.deepEqual(result.failed, {
      stdout: 'out\n',
      stderr: 'cat: /missing: No such file or directory\n',
      returncode: 3,
    });
    assert.deepEqual(result.succeeded, { stdout: 'shell\n', returncode: 0 });
  });

  it('exec with stdin fed line by line: each line runs as it arrives, and exit ends the session with its code', async (t) => {
    if (missing) return t.skip(missing);
    const result = await python<{
      answers: Array<{ line: string; stdout: string; stderr: string }>;
      returncode: number;
      open: boolean;
    }>(t, 'exec-stdin', 'py-stdin');
    assert.deepEqual(result.answers, [
      { line: 'echo one', stdout: 'one\n', stderr: '' },
      { line: 'echo two; echo three', stdout: 'two\nthree\n', stderr: '' },
      { line: 'cat /missing', stdout: '', stderr: 'cat: /missing: No such file or directory\n' },
    ]);
    assert.equal(result.returncode, 4);
    assert.equal(result.open, false);
  });

  it("port-forward with kubernetes.stream.portforward: two ports over channels, each refused with the runtime's message as nothing listens in a simulated pod", async (t) => {
    if (missing) return t.skip(missing);
    const result = await python<Record<string, { data: string; error: string | null }>>(
      t,
      'port-forward',
      'py-forward',
    );
    for (const port of ['8080', '9090']) {
      assert.equal(result[port]?.data, '', port);
      assert.match(
        result[port]?.error ?? '',
        new RegExp(
          `^error forwarding port ${port} to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace "/var/run/netns/cni-[0-9a-f-]{36}": failed to connect to localhost:${port} inside namespace "[0-9a-f]{64}", IPv4: dial tcp4 127\\.0\\.0\\.1:${port}: connect: connection refused IPv6 dial tcp6 \\[::1\\]:${port}: connect: connection refused $`,
        ),
        port,
      );
    }
  });

  type Errors = Record<'notFound' | 'alreadyExists' | 'invalid' | 'conflict', ApiError>;
  const expectedErrors = (): Record<keyof Errors, [number, string, string]> => ({
    notFound: [
      404,
      'Not Found',
      goStatus(404, 'NotFound', 'configmaps "nope" not found', { name: 'nope', kind: 'configmaps' }),
    ],
    alreadyExists: [
      409,
      'Conflict',
      goStatus(409, 'AlreadyExists', 'configmaps "twice" already exists', { name: 'twice', kind: 'configmaps' }),
    ],
    invalid: [
      422,
      'Unprocessable Entity',
      goStatus(
        422,
        'Invalid',
        `ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": ${INVALID_NAME}`,
        {
          name: 'Bad_Name',
          kind: 'ConfigMap',
          causes: [
            {
              reason: 'FieldValueInvalid',
              message: `Invalid value: "Bad_Name": ${INVALID_NAME}`,
              field: 'metadata.name',
            },
          ],
        },
      ),
    ],
    conflict: [
      409,
      'Conflict',
      goStatus(
        409,
        'Conflict',
        `Operation cannot be fulfilled on configmaps "twice": the object has been modified; please apply your changes to the latest version and try again`,
        { name: 'twice', kind: 'configmaps' },
      ),
    ],
  });

  it('ApiException of a 404, a 409 AlreadyExists, a 409 Conflict and a 422 Invalid: status, reason and the Status body', async (t) => {
    if (missing) return t.skip(missing);
    const errors = await python<Errors>(t, 'errors', 'py-errors');
    const expected = expectedErrors();
    for (const key of Object.keys(expected) as Array<keyof Errors>) {
      const [status, reason, body] = expected[key];
      assert.equal(errors[key].status, status, key);
      assert.equal(errors[key].reason, reason, key);
      assert.deepEqual(JSON.parse(errors[key].body), JSON.parse(body), key);
      assert.match(errors[key].contentType, /^application\/json\b/, key);
    }
  });

  it('ApiException bodies are byte for byte what kube-apiserver writes (Go field order, a trailing newline)', async (t) => {
    if (missing) return t.skip(missing);
    const errors = await python<Errors>(t, 'errors', 'py-errors-bytes');
    const expected = expectedErrors();
    for (const key of Object.keys(expected) as Array<keyof Errors>)
      assert.equal(errors[key].body, expected[key][2], key);
  });
});
