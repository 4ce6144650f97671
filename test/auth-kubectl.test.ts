import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { kubectl, kubectlMissing, spawnKubectl, type KubectlResult } from './helpers/kubectl.js';
import { ROOT, serverFor, startServer, type SimServer } from './helpers/server.js';
import { startSeedScript } from './helpers/seed-script.js';

// The real kubectl against `sim serve --auth`: tokens from `kubectl create token`, impersonation with --as,
// `auth can-i [--list]`, `auth whoami`, and the seed's rbac.yaml giving the config-watcher ServiceAccount exactly
// what it grants. kubectl sends credentials only over TLS, so the servers run with --tls.

const ADMIN = 'admin-token';
const SA = 'system:serviceaccount:default:config-watcher-controller';
const missing = kubectlMissing();

describe('kubectl with --auth', { skip: missing }, () => {
  let server: SimServer;
  let dir: string;
  let saToken: string;

  const run = (token: string | undefined, args: string[], input?: string): Promise<KubectlResult> =>
    kubectl(
      server.url,
      ['--insecure-skip-tls-verify', ...(token === undefined ? [] : ['--token', token]), ...args],
      input === undefined ? {} : { input },
    );
  const ok = async (token: string | undefined, args: string[], input?: string): Promise<string> => {
    const result = await run(token, args, input);
    assert.equal(result.code, 0, `kubectl ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  const refused = async (token: string | undefined, args: string[], message: string): Promise<void> => {
    const result = await run(token, args);
    assert.equal(result.code, 1, `kubectl ${args.join(' ')} should fail: ${result.stdout}`);
    assert.equal(result.stderr.trim(), message);
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-auth-kubectl-'));
    writeFileSync(join(dir, 'tokens.csv'), `${ADMIN},admin,uid-admin,system:masters\nbob-token,bob,uid-bob\n`);
    server = await startServer([
      '--auth',
      '--tls',
      '--kubeconfig',
      join(dir, 'kubeconfig'),
      '--token-auth-file',
      join(dir, 'tokens.csv'),
      '--nodes',
      '0',
    ]);
  });

  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a wrong token: "You must be logged in to the server (Unauthorized)"; no token: kubectl asks for credentials', async () => {
    const wrong = await run('wrong', ['get', 'configmaps']);
    assert.equal(wrong.code, 1);
    assert.match(
      wrong.stderr,
      /error: You must be logged in to the server \(the server has asked for the client to provide credentials\)\n$/,
    );
    // With no credentials at all, kubectl answers a 401 by prompting for a username (stdin is empty here).
    const none = await run(undefined, ['get', 'configmaps']);
    assert.equal(none.code, 1);
    assert.match(none.stdout + none.stderr, /Please enter Username: error: EOF/);
  });

  test('the seed: rbac.yaml lets the config-watcher ServiceAccount watch ConfigMaps and delete pods, and nothing more', async () => {
    assert.match(
      await ok(ADMIN, ['apply', '-f', join(ROOT, 'fixtures/seed/rbac.yaml')]),
      /serviceaccount\/config-watcher-controller created/,
    );
    saToken = (await ok(ADMIN, ['create', 'token', 'config-watcher-controller'])).trim();
    assert.match(saToken, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.match(await ok(saToken, ['auth', 'whoami']), new RegExp(`Username\\s+${SA}\\n`));

    // Watch ConfigMaps: sees one the admin creates.
    const watch = spawnKubectl(server.url, [
      '--insecure-skip-tls-verify',
      '--token',
      saToken,
      'get',
      'configmaps',
      '-w',
      '-o',
      'name',
    ]);
    try {
      await ok(ADMIN, ['create', 'configmap', 'app-config', '--from-literal=greeting=hello']);
      await watch.until((out) => out.includes('configmap/app-config'), 'the watch to see app-config');
    } finally {
      await watch.stop();
    }
    assert.match(await ok(saToken, ['get', 'configmap', 'app-config', '-o', 'jsonpath={.data.greeting}']), /^hello$/);

    // Delete pods in its namespace.
    await ok(ADMIN, ['run', 'web', '--image=nginx']);
    await ok(ADMIN, ['run', 'api', '--image=nginx']);
    assert.match(await ok(saToken, ['get', 'pods']), /^NAME\s+READY/);
    assert.match(await ok(saToken, ['delete', 'pod', 'web', '--wait=false']), /pod "web" deleted/);

    // Nothing more.
    const no = (verb: string, resource: string, scope = 'in the namespace "default"', group = '') =>
      `User "${SA}" cannot ${verb} resource "${resource}" in API group "${group}" ${scope}`;
    await refused(
      saToken,
      ['delete', 'configmap', 'app-config'],
      `Error from server (Forbidden): configmaps "app-config" is forbidden: ${no('delete', 'configmaps')}`,
    );
    await refused(
      saToken,
      ['get', 'secrets'],
      `Error from server (Forbidden): secrets is forbidden: ${no('list', 'secrets')}`,
    );
    await refused(
      saToken,
      ['get', 'configmaps', '-n', 'kube-system'],
      `Error from server (Forbidden): configmaps is forbidden: ${no('list', 'configmaps', 'in the namespace "kube-system"')}`,
    );
    await refused(
      saToken,
      ['create', 'configmap', 'mine'],
      `error: failed to create configmap: configmaps is forbidden: ${no('create', 'configmaps')}`,
    );
    await refused(
      saToken,
      ['get', 'nodes'],
      `Error from server (Forbidden): nodes is forbidden: ${no('list', 'nodes', 'at the cluster scope')}`,
    );
    await refused(
      saToken,
      ['get', 'deployments'],
      `Error from server (Forbidden): deployments.apps is forbidden: ${no('list', 'deployments', 'in the namespace "default"', 'apps')}`,
    );
    await refused(
      saToken,
      ['logs', 'api'],
      `Error from server (Forbidden): pods "api" is forbidden: ${no('get', 'pods/log')}`,
    );

    // can-i answers from the same evaluator, for the token's user or an impersonated one.
    const canI = async (token: string, args: string[]): Promise<string> =>
      (await run(token, ['auth', 'can-i', ...args])).stdout.trim();
    assert.equal(await canI(saToken, ['watch', 'configmaps']), 'yes');
    assert.equal(await canI(saToken, ['watch', 'pods']), 'no', 'rbac.yaml gives pods get, list and delete only');
    assert.equal(await canI(ADMIN, ['delete', 'pods', `--as=${SA}`]), 'yes');
    assert.equal(await canI(ADMIN, ['delete', 'pods', `--as=${SA}`, '-n', 'kube-system']), 'no');
    assert.equal(await canI(ADMIN, ['delete', 'configmaps', `--as=${SA}`]), 'no');
    assert.equal((await run(ADMIN, ['auth', 'can-i', 'delete', 'configmaps', `--as=${SA}`])).code, 1);

    const list = await ok(ADMIN, ['auth', 'can-i', '--list', `--as=${SA}`]);
    const resources = list
      .split('\n')
      .slice(1)
      .filter((line) => line !== '' && !line.startsWith(' '))
      .map((line) => line.split(/\s{2,}/))
      .map(([resource, , , verbs]) => `${resource} ${verbs}`)
      .sort();
    assert.deepEqual(resources, [
      'configmaps [get list watch]',
      'pods [get list delete]',
      'selfsubjectaccessreviews.authorization.k8s.io [create]',
      'selfsubjectreviews.authentication.k8s.io [create]',
      'selfsubjectrulesreviews.authorization.k8s.io [create]',
    ]);
  });

  test("kubectl create token: a token for another ServiceAccount carries only that one's rights; --duration is checked", async () => {
    await ok(ADMIN, ['create', 'serviceaccount', 'idle']);
    const token = (await ok(ADMIN, ['create', 'token', 'idle', '--duration=20m'])).trim();
    assert.match(await ok(token, ['auth', 'whoami']), /Username\s+system:serviceaccount:default:idle\n/);
    assert.equal((await run(token, ['auth', 'can-i', 'get', 'configmaps'])).stdout.trim(), 'no');
    await refused(
      ADMIN,
      ['create', 'token', 'idle', '--duration=1m'],
      'error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes',
    );
    // kubectl create -f of a TokenReview checks the token as the server's authenticator does (validated against
    // /openapi/v2, since the kind has no PATCH for kubectl's /openapi/v3 check to find).
    const review = JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } });
    const reviewed = parseYaml(await ok(ADMIN, ['create', '-f', '-', '-o', 'yaml'], review)) as {
      status: { authenticated: boolean; user: { username: string }; audiences: string[] };
    };
    assert.equal(reviewed.status.authenticated, true);
    assert.equal(reviewed.status.user.username, 'system:serviceaccount:default:idle');
    assert.deepEqual(reviewed.status.audiences, ['https://kubernetes.default.svc.cluster.local']);
    // bob may not list CRDs, which kubectl's client-side validation does for such a kind: skip it to reach the server.
    const bobReview = await run('bob-token', ['create', '--validate=false', '-f', '-'], review);
    assert.equal(bobReview.code, 1);
    assert.equal(
      bobReview.stderr.trim(),
      'Error from server (Forbidden): error when creating "STDIN": tokenreviews.authentication.k8s.io is forbidden: User "bob" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope',
    );
  });

  test('impersonation: admins may --as, others get the 403', async () => {
    assert.match(
      await ok(ADMIN, ['auth', 'whoami', `--as=${SA}`]),
      /Groups\s+\[system:serviceaccounts system:serviceaccounts:default system:authenticated\]/,
    );
    // Several --as-group flags are several Impersonate-Group headers.
    assert.match(
      await ok(ADMIN, ['auth', 'whoami', '--as=jane', '--as-group=devs', '--as-group=ops']),
      /Username\s+jane\nGroups\s+\[devs ops system:authenticated\]\n/,
    );
    await refused(
      'bob-token',
      ['get', 'pods', `--as=${SA}`],
      `Error from server (Forbidden): serviceaccounts "config-watcher-controller" is forbidden: User "bob" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "default"`,
    );
  });

  test('kubectl debug needs a grant of its own: admin and edit give pods/exec but not pods/ephemeralcontainers', async () => {
    // As kube-apiserver's bootstrap policy: adding an ephemeral container bypasses admission written before they
    // existed, so its maintainers keep the subresource out of the admin and edit roles (kubernetes#109332, #121217).
    await ok(ADMIN, ['create', 'namespace', 'debugging']);
    await ok(ADMIN, ['create', 'rolebinding', 'bob-admin', '--clusterrole=admin', '--user=bob', '-n', 'debugging']);
    const canI = async (args: string[]): Promise<string> =>
      (await run('bob-token', ['auth', 'can-i', '-n', 'debugging', ...args])).stdout.trim();
    assert.equal(await canI(['create', 'pods/exec']), 'yes');
    assert.equal(await canI(['patch', 'pods', '--subresource=ephemeralcontainers']), 'no');
    assert.equal(await canI(['create', 'pods/portforward']), 'yes');
    await ok('bob-token', ['run', 'web', '--image=nginx', '-n', 'debugging']);
    await refused(
      'bob-token',
      ['debug', 'web', '--image=busybox', '--profile=general', '-n', 'debugging'],
      'Error from server (Forbidden): pods "web" is forbidden: User "bob" cannot patch resource "pods/ephemeralcontainers" in API group "" in the namespace "debugging"',
    );
    // A role aggregated into edit (as the docs advise) grants it.
    await ok(
      ADMIN,
      ['apply', '-f', '-'],
      'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: debug-pods\n  labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}\nrules:\n- {apiGroups: [""], resources: [pods/ephemeralcontainers], verbs: [patch, update]}\n',
    );
    let answer = '';
    for (let i = 0; i < 50 && answer !== 'yes'; i++) {
      answer = await canI(['patch', 'pods', '--subresource=ephemeralcontainers']);
      if (answer !== 'yes') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(answer, 'yes');
    await ok('bob-token', ['debug', 'web', '--image=busybox', '--profile=general', '-n', 'debugging']);
  });

  test('the kubeconfig sim kubeconfig --token --certificate-authority writes works as is', async () => {
    // The server's CA, from the kubeconfig sim serve --tls wrote.
    const written = parseYaml(readFileSync(join(dir, 'kubeconfig'), 'utf8')) as {
      clusters: Array<{ cluster: { 'certificate-authority-data': string } }>;
    };
    writeFileSync(
      join(dir, 'ca.crt'),
      Buffer.from(written.clusters[0]!.cluster['certificate-authority-data'], 'base64'),
    );
    const out = join(dir, 'bob.kubeconfig');
    writeFileSync(
      out,
      execFileSync(
        process.execPath,
        [
          join(ROOT, 'bin/sim.js'),
          'kubeconfig',
          '--server',
          server.url,
          '--token',
          'bob-token',
          '--certificate-authority',
          join(dir, 'ca.crt'),
        ],
        { encoding: 'utf8' },
      ),
    );
    const result = await kubectl(undefined, ['auth', 'whoami'], { env: { KUBECONFIG: out } });
    assert.equal(result.code, 0, result.stderr + readFileSync(out, 'utf8'));
    assert.match(result.stdout, /Username\s+bob\n/);
  });
});

// The article's architecture under --auth: its shell controller talks plain HTTP to a `kubectl proxy` ambassador
// that carries the config-watcher ServiceAccount's token, so rbac.yaml alone decides what the script may do.
test("the seed's shell controller through a kubectl proxy with the ServiceAccount's token", {
  skip: missing,
}, async (t) => {
  const tools = ['curl', 'jq', 'bash'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
  if (tools.length > 0) {
    t.skip(`the article's script needs ${tools.join(', ')}, not installed here`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-auth-seed-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tokens.csv'), `${ADMIN},admin,uid-admin,system:masters\n`);
  const server = await serverFor(t, [
    '--auth',
    '--tls',
    '--kubeconfig',
    join(dir, 'kubeconfig'),
    '--token-auth-file',
    join(dir, 'tokens.csv'),
    '--controllers',
    '*,-configwatcher',
    '--stop-delay',
    '1s',
  ]);
  const as = async (token: string, args: string[]): Promise<string> => {
    const result = await kubectl(server.url, ['--insecure-skip-tls-verify', '--token', token, ...args], {
      timeoutMs: 30_000,
    });
    assert.equal(result.code, 0, `kubectl ${args.join(' ')}: ${result.stderr}`);
    return result.stdout;
  };
  for (const file of ['rbac.yaml', 'webapp.yaml']) await as(ADMIN, ['apply', '-f', join(ROOT, 'fixtures/seed', file)]);
  await as(ADMIN, ['wait', '--for=condition=Available', 'deploy/webapp', '--timeout=30s']);
  const old = (await as(ADMIN, ['get', 'pods', '-l', 'app=webapp', '-o', 'jsonpath={.items[0].metadata.name}'])).trim();
  const saToken = (await as(ADMIN, ['create', 'token', 'config-watcher-controller'])).trim();
  // exec's WebSocket upgrade is authenticated and authorized like any request.
  assert.equal(
    (await as(ADMIN, ['exec', old, '--', 'printenv', 'MESSAGE'])).trim(),
    'Welcome to Kubernetes Patterns !',
  );
  const exec = await kubectl(server.url, ['--insecure-skip-tls-verify', '--token', saToken, 'exec', old, '--', 'true']);
  assert.equal(exec.code, 1);
  // kubectl tries the WebSocket (GET, a 403), falls back to SPDY (POST): the error is the create's.
  assert.equal(
    exec.stderr.trim(),
    `Error from server (Forbidden): pods "${old}" is forbidden: User "${SA}" cannot create resource "pods/exec" in API group "" in the namespace "default"`,
  );

  const ambassador = spawnKubectl(server.url, [
    '--insecure-skip-tls-verify',
    '--token',
    saToken,
    'proxy',
    '--port',
    '0',
  ]);
  t.after(() => ambassador.stop());
  await ambassador.until((out) => /Starting to serve on \S+:\d+/.test(out), 'kubectl proxy to listen');
  const port = /Starting to serve on \S+:(\d+)/.exec(ambassador.stdout)![1];
  // The ambassador's own requests are judged as the ServiceAccount: it may not read secrets.
  const secrets = await fetch(`http://127.0.0.1:${port}/api/v1/namespaces/default/secrets`);
  assert.equal(secrets.status, 403);
  assert.match(
    await secrets.text(),
    /secrets is forbidden: User \\"system:serviceaccount:default:config-watcher-controller\\" cannot list resource \\"secrets\\"/,
  );

  const script = startSeedScript(t, `http://127.0.0.1:${port}`);
  await as(ADMIN, [
    'patch',
    'configmap',
    'webapp-config',
    '--patch',
    JSON.stringify({ data: { message: 'Hello, Updated World!' } }),
  ]);
  await script.nudgeUntilItActs(
    (label) => as(ADMIN, ['label', 'configmap', 'webapp-config', label, '--overwrite']),
    20,
  );
  assert.match(script.output(), new RegExp(`Deleting pod: ${old}`));
  await as(ADMIN, ['wait', '--for=delete', `pod/${old}`, '--timeout=30s']);
});

// With --tls too, the kubeconfig sim serve writes carries the CA and the admin token: plain kubectl just works.
test('--tls --auth: the written kubeconfig makes kubectl the admin; other tokens ride on it with --token', {
  skip: missing,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-auth-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  const server = await serverFor(t, ['--auth', '--tls', '--nodes', '0', '--kubeconfig', kubeconfig]);
  // No --server: kubectl goes where the written kubeconfig says.
  const run = (args: string[]): Promise<KubectlResult> => kubectl(undefined, args, { env: { KUBECONFIG: kubeconfig } });
  assert.equal(
    (parseYaml(readFileSync(kubeconfig, 'utf8')) as { clusters: Array<{ cluster: { server: string } }> }).clusters[0]!
      .cluster.server,
    server.url,
  );
  const whoami = await run(['auth', 'whoami']);
  assert.equal(whoami.code, 0, whoami.stderr);
  assert.match(whoami.stdout, /Username\s+kubernetes-admin\nGroups\s+\[system:masters system:authenticated\]\n/);
  assert.equal((await run(['create', 'serviceaccount', 'robot'])).code, 0);
  const token = (await run(['create', 'token', 'robot'])).stdout.trim();
  const robot = await run(['--token', token, 'get', 'pods']);
  assert.equal(robot.code, 1);
  assert.equal(
    robot.stderr.trim(),
    'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" in the namespace "default"',
  );
  const wrong = await run(['--token', 'wrong', 'get', 'pods']);
  assert.match(wrong.stderr, /error: You must be logged in to the server \(Unauthorized\)/);
});
