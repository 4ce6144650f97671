import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { requestAttributes } from '../src/auth/request-info.js';
import { parseCsv } from '../src/auth/token-file.js';
import { request, type Reply, type StatusBody } from './helpers/http.js';
import { serverFor, startServer, type SimServer } from './helpers/server.js';

// `sim serve --auth` over plain HTTP (curl-like requests): 401s, RBAC and its 403 messages, wildcards,
// aggregation, impersonation, TokenRequest tokens, and the access reviews; and that nothing changes without it.

const ADMIN = 'admin-token';
const TOKENS = [
  `${ADMIN},admin,uid-admin,system:masters`,
  'alice-token,alice,uid-alice,"dev,qa"',
  'bob-token,bob,uid-bob',
].join('\n');

type Json = Record<string, unknown>;

let server: SimServer;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kube-sim-auth-'));
  writeFileSync(join(dir, 'tokens.csv'), TOKENS);
  server = await startServer([
    '--auth',
    '--token-auth-file',
    join(dir, 'tokens.csv'),
    '--nodes',
    '0',
    '--clock',
    'virtual',
  ]);
});

after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

function as(
  token: string | undefined,
  path: string,
  options: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers = { ...(options.headers ?? {}) };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return request(server.url, path, { ...options, headers });
}

const admin = (
  path: string,
  options: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> => as(ADMIN, path, options);

async function create(path: string, body: Json): Promise<Json> {
  const reply = await admin(path, { method: 'POST', body });
  assert.equal(reply.status, 201, reply.text);
  return reply.body as Json;
}

function forbidden(reply: Reply, message: string, details: Json): void {
  assert.equal(reply.status, 403, reply.text);
  assert.deepEqual(reply.body, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: 'Forbidden',
    code: 403,
    details,
  });
}

const UNAUTHORIZED = {
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message: 'Unauthorized',
  reason: 'Unauthorized',
  code: 401,
};

/** Binds a ClusterRole (created with these rules) to a user, cluster-wide or in a namespace. */
async function grant(name: string, user: string, rules: Json[], namespace?: string): Promise<void> {
  await create('/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name }, rules });
  const binding = {
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [{ kind: 'User', name: user, apiGroup: 'rbac.authorization.k8s.io' }],
  };
  if (namespace) await create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`, binding);
  else await create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', binding);
}

/** SubjectAccessReview for `user` (with system:authenticated, as an authenticated request would have). */
async function review(user: string, attributes: Json): Promise<{ allowed: boolean; reason?: string }> {
  const spec = 'path' in attributes ? { nonResourceAttributes: attributes } : { resourceAttributes: attributes };
  const reply = await admin('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
    method: 'POST',
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { ...spec, user, groups: ['system:authenticated'] },
    },
  });
  assert.equal(reply.status, 201, reply.text);
  return (reply.body as { status: { allowed: boolean; reason?: string } }).status;
}

async function eventually(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('authentication', () => {
  test('no token, a wrong token or a non-bearer scheme get the 401 Status, on resources and discovery alike', async () => {
    for (const path of ['/api/v1/pods', '/api', '/apis', '/apis/apps/v1', '/openapi/v3', '/sim/v1/clock']) {
      const reply = await as(undefined, path);
      assert.equal(reply.status, 401, path);
      assert.deepEqual(reply.body, UNAUTHORIZED);
    }
    assert.deepEqual((await as('not-a-token', '/api/v1/namespaces')).body, UNAUTHORIZED);
    assert.deepEqual(
      (await request(server.url, '/api/v1/namespaces', { headers: { authorization: 'Basic YWRtaW46YWRtaW4=' } })).body,
      UNAUTHORIZED,
    );
    // A 401 comes before anything is decoded: even a garbage body to an unknown resource.
    assert.equal(
      (await as('nope', '/api/v1/namespaces/default/whatever', { method: 'POST', body: 'not json' })).status,
      401,
    );
  });

  test('WebSocket watches are authenticated and authorized too', async () => {
    const WATCH = '/api/v1/namespaces/default/configmaps?watch=true';
    /** The subprotocol the server chose on a successful upgrade, or the refusal's status code. */
    const connect = (protocols: string[], token?: string): Promise<string | number> =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(
          server.url.replace(/^http/, 'ws') + WATCH,
          protocols,
          token ? { headers: { authorization: `Bearer ${token}` } } : {},
        );
        ws.once('open', () => {
          resolve(ws.protocol);
          ws.terminate();
        });
        ws.once('unexpected-response', (_req, res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          ws.terminate();
        });
        ws.once('error', reject);
      });
    assert.equal(await connect([]), 401);
    assert.equal(await connect([], 'bob-token'), 403);
    assert.equal(await connect([], ADMIN), '');

    // The token as a subprotocol, as browsers send it (they cannot set headers): kube-apiserver's
    // base64url.bearer.authorization.k8s.io.<token>, beside a real subprotocol, which is the one chosen.
    const tokenProtocol = (token: string): string =>
      `base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString('base64url')}`;
    assert.equal(await connect([tokenProtocol(ADMIN), 'v4.channel.k8s.io']), 'v4.channel.k8s.io');
    assert.equal(await connect([tokenProtocol('bob-token'), 'v4.channel.k8s.io']), 403);
    assert.equal(await connect([tokenProtocol('wrong'), 'v4.channel.k8s.io']), 401);
    assert.equal(await connect([tokenProtocol(ADMIN)]), 401, 'a token needs a real subprotocol beside it');
  });

  test('health and version stay open to anonymous requests (system:public-info-viewer)', async () => {
    for (const path of ['/healthz', '/livez', '/readyz']) assert.equal((await as(undefined, path)).text, 'ok');
    assert.equal((await as(undefined, '/version')).status, 200);
  });

  test('token-file users are who the file says, in system:authenticated', async () => {
    const reply = await as('alice-token', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual((reply.body as Json).status, {
      userInfo: { username: 'alice', uid: 'uid-alice', groups: ['dev', 'qa', 'system:authenticated'] },
    });
  });

  test('sim serve --auth prints an admin token that works', async () => {
    const printed = /admin token \(user kubernetes-admin, group system:masters\): (\S+)/.exec(server.stdout());
    assert.ok(printed, server.stdout());
    const reply = await as(printed[1], '/api/v1/namespaces');
    assert.equal(reply.status, 200, reply.text);
  });

  test("a token file line with fewer than 3 columns stops the server with kube-apiserver's message", async () => {
    writeFileSync(join(dir, 'bad.csv'), 'only-token,user\n');
    await assert.rejects(
      startServer(['--auth', '--token-auth-file', join(dir, 'bad.csv'), '--nodes', '0']),
      /must have at least 3 columns \(token, user name, user uid\), found 2/,
    );
    await assert.rejects(
      startServer(['--token-auth-file', join(dir, 'tokens.csv'), '--nodes', '0']),
      /--token-auth-file needs --auth/,
      'a token file alone must not leave the server open',
    );
  });
});

describe('RBAC', () => {
  test('403 messages: namespaced, cluster-scoped, named with a subresource, non-resource path', async () => {
    forbidden(
      await as('bob-token', '/api/v1/namespaces/default/pods'),
      'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"',
      { kind: 'pods' },
    );
    forbidden(
      await as('bob-token', '/apis/apps/v1/deployments?watch=true'),
      'deployments.apps is forbidden: User "bob" cannot watch resource "deployments" in API group "apps" at the cluster scope',
      { group: 'apps', kind: 'deployments' },
    );
    forbidden(
      await as('bob-token', '/api/v1/namespaces/default/pods/web/log'),
      'pods "web" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the namespace "default"',
      { name: 'web', kind: 'pods' },
    );
    forbidden(
      await as('bob-token', '/api/v1/namespaces/default/configmaps/x', { method: 'DELETE' }),
      'configmaps "x" is forbidden: User "bob" cannot delete resource "configmaps" in API group "" in the namespace "default"',
      { name: 'x', kind: 'configmaps' },
    );
    forbidden(
      await as('bob-token', '/api/v1/namespaces/default/configmaps', { method: 'DELETE' }),
      'configmaps is forbidden: User "bob" cannot deletecollection resource "configmaps" in API group "" in the namespace "default"',
      { kind: 'configmaps' },
    );
    forbidden(await as('bob-token', '/foo/bar'), 'forbidden: User "bob" cannot get path "/foo/bar"', {});
    forbidden(
      await as('bob-token', '/sim/v1/clock/advance', { method: 'POST', body: { by: '1s' } }),
      'forbidden: User "bob" cannot post path "/sim/v1/clock/advance"',
      {},
    );
    // A namespace is its own namespace: get namespaces/x is checked in namespace x.
    forbidden(
      await as('bob-token', '/api/v1/namespaces/kube-system'),
      'namespaces "kube-system" is forbidden: User "bob" cannot get resource "namespaces" in API group "" in the namespace "kube-system"',
      { name: 'kube-system', kind: 'namespaces' },
    );
    // Authorization comes before routing: an unknown resource is a 403 for bob, a 404 for the admin.
    assert.equal((await as('bob-token', '/api/v1/nosuchthings')).status, 403);
    assert.equal((await admin('/api/v1/nosuchthings')).status, 404);
    // Discovery is open to every authenticated user (system:discovery).
    assert.equal((await as('bob-token', '/apis')).status, 200);
  });

  test('RBAC objects are validated and defaulted as kube-apiserver does', async () => {
    const invalid = async (path: string, body: Json, message: string): Promise<void> => {
      const reply = await admin(path, { method: 'POST', body });
      assert.equal(reply.status, 422, reply.text);
      assert.equal((reply.body as StatusBody).message, message);
    };
    await invalid(
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles',
      { metadata: { name: 'r' }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] },
      'Role.rbac.authorization.k8s.io "r" is invalid: rules[0].nonResourceURLs: Invalid value: ["/metrics"]: namespaced rules cannot apply to non-resource URLs',
    );
    await invalid(
      '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      { metadata: { name: 'r' }, rules: [{ resources: ['pods'] }] },
      'ClusterRole.rbac.authorization.k8s.io "r" is invalid: [rules[0].verbs: Required value: verbs must contain at least one value, rules[0].apiGroups: Required value: resource rules must supply at least one api group]',
    );
    await invalid(
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        metadata: { name: 'b' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ kind: 'ServiceAccount', name: 'x' }],
      },
      'ClusterRoleBinding.rbac.authorization.k8s.io "b" is invalid: subjects[0].namespace: Required value',
    );
    await invalid(
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        metadata: { name: 'b' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ kind: 'Robot', name: 'x' }],
      },
      'ClusterRoleBinding.rbac.authorization.k8s.io "b" is invalid: subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
    );
    const created = await create('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      metadata: { name: 'defaults' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [
        { kind: 'User', name: 'u' },
        { kind: 'ServiceAccount', name: 'sa' },
      ],
    });
    assert.deepEqual(created.subjects, [
      { kind: 'User', name: 'u', apiGroup: 'rbac.authorization.k8s.io' },
      { kind: 'ServiceAccount', name: 'sa' },
    ]);
  });

  test("a binding to a missing role adds RBAC's reason to the 403", async () => {
    await create('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      metadata: { name: 'dangling' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'nope' },
      subjects: [{ kind: 'User', name: 'carol' }],
    });
    const decision = await review('carol', { namespace: 'default', verb: 'get', resource: 'pods' });
    assert.deepEqual(decision, { allowed: false, reason: 'RBAC: role.rbac.authorization.k8s.io "nope" not found' });
  });

  test('wildcards: verbs, groups and resources "*", "*/subresource", resourceNames, non-resource "prefix*"', async () => {
    await grant('wild-any', 'wanda', [{ apiGroups: ['*'], resources: ['deployments'], verbs: ['*'] }]);
    assert.equal(
      (await review('wanda', { verb: 'delete', group: 'apps', resource: 'deployments', namespace: 'x' })).allowed,
      true,
    );
    assert.equal(
      (await review('wanda', { verb: 'escalate', group: 'example.com', resource: 'deployments' })).allowed,
      true,
    );
    assert.equal(
      (await review('wanda', { verb: 'get', group: 'apps', resource: 'deployments', subresource: 'scale' })).allowed,
      false,
      'a resource does not cover its subresources',
    );

    await grant('wild-sub', 'sam', [{ apiGroups: [''], resources: ['*/log', 'pods/*'], verbs: ['get'] }]);
    assert.equal((await review('sam', { verb: 'get', resource: 'pods', subresource: 'log', name: 'p' })).allowed, true);
    assert.equal(
      (await review('sam', { verb: 'get', resource: 'widgets', subresource: 'log', name: 'p' })).allowed,
      true,
    );
    assert.equal(
      (await review('sam', { verb: 'get', resource: 'pods', subresource: 'exec', name: 'p' })).allowed,
      false,
      '"pods/*" is not a wildcard in Kubernetes',
    );
    assert.equal((await review('sam', { verb: 'get', resource: 'pods', name: 'p' })).allowed, false);

    await grant(
      'named',
      'nina',
      [{ apiGroups: [''], resources: ['configmaps'], resourceNames: ['settings'], verbs: ['get', 'list', 'watch'] }],
      'default',
    );
    assert.equal(
      (await review('nina', { namespace: 'default', verb: 'get', resource: 'configmaps', name: 'settings' })).allowed,
      true,
    );
    assert.equal(
      (await review('nina', { namespace: 'default', verb: 'get', resource: 'configmaps', name: 'other' })).allowed,
      false,
    );
    assert.equal((await review('nina', { namespace: 'default', verb: 'list', resource: 'configmaps' })).allowed, false);
    assert.equal(
      (await review('nina', { namespace: 'other', verb: 'get', resource: 'configmaps', name: 'settings' })).allowed,
      false,
      'a RoleBinding grants in its namespace only',
    );
    // A list narrowed to the name by a field selector is a request on that name, so resourceNames allow it.
    await create('/api/v1/namespaces/default/configmaps', { metadata: { name: 'settings' } });
    const asNina = { headers: { 'impersonate-user': 'nina' } };
    const narrowed = await admin(
      '/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dsettings',
      asNina,
    );
    assert.equal(narrowed.status, 200, narrowed.text);
    assert.deepEqual(
      (narrowed.body as { items: Array<{ metadata: Json }> }).items.map((i) => i.metadata.name),
      ['settings'],
    );
    assert.equal((await admin('/api/v1/namespaces/default/configmaps', asNina)).status, 403);

    await grant('paths', 'pat', [{ nonResourceURLs: ['/metrics', '/logs/*'], verbs: ['get'] }]);
    assert.equal((await review('pat', { path: '/logs/kube-apiserver.log', verb: 'get' })).allowed, true);
    assert.equal((await review('pat', { path: '/metrics', verb: 'get' })).allowed, true);
    assert.equal((await review('pat', { path: '/metrics/x', verb: 'get' })).allowed, false);
    assert.equal((await review('pat', { path: '/logs/x', verb: 'post' })).allowed, false);
  });

  test('a request allowed by a RoleBinding reaches the resource; the review names the binding', async () => {
    await grant(
      'cm-reader',
      'alice',
      [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
      'default',
    );
    assert.equal((await as('alice-token', '/api/v1/namespaces/default/configmaps')).status, 200);
    assert.equal((await as('alice-token', '/api/v1/namespaces/default/configmaps/missing')).status, 404);
    assert.equal((await as('alice-token', '/api/v1/namespaces/kube-system/configmaps')).status, 403);
    assert.deepEqual(await review('alice', { namespace: 'default', verb: 'list', resource: 'configmaps' }), {
      allowed: true,
      reason: 'RBAC: allowed by RoleBinding "cm-reader/default" of ClusterRole "cm-reader" to User "alice"',
    });
    // Groups bind too: alice is in "qa".
    await create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'qa-nodes' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'Group', name: 'qa' }],
    });
    assert.equal((await as('alice-token', '/api/v1/namespaces/kube-system/pods')).status, 200);
    // Deleting the binding takes the access away at once.
    assert.equal(
      (await admin('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/qa-nodes', { method: 'DELETE' })).status,
      200,
    );
    assert.equal((await as('alice-token', '/api/v1/namespaces/kube-system/pods')).status, 403);
  });

  test('aggregation: a ClusterRole with an aggregationRule holds the rules of the roles it selects, kept current', async () => {
    await create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: 'monitoring' },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'example.com/aggregate-to-monitoring': 'true' } }] },
    });
    await create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: 'monitoring-endpoints', labels: { 'example.com/aggregate-to-monitoring': 'true' } },
      rules: [{ apiGroups: [''], resources: ['endpoints'], verbs: ['get'] }],
    });
    const rulesOf = async (name: string): Promise<unknown> =>
      ((await admin(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`)).body as Json).rules;
    await eventually(
      'monitoring to aggregate',
      async () =>
        JSON.stringify(await rulesOf('monitoring')) ===
        JSON.stringify([{ apiGroups: [''], resources: ['endpoints'], verbs: ['get'] }]),
    );
    await create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'mon' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'monitoring' },
      subjects: [{ kind: 'User', name: 'mo' }],
    });
    assert.equal((await review('mo', { verb: 'get', resource: 'endpoints', namespace: 'a' })).allowed, true);
    await create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: 'monitoring-pods', labels: { 'example.com/aggregate-to-monitoring': 'true' } },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
    });
    await eventually(
      'the new role to join',
      async () => (await review('mo', { verb: 'list', resource: 'pods' })).allowed,
    );
    assert.equal(
      (await admin('/apis/rbac.authorization.k8s.io/v1/clusterroles/monitoring-endpoints', { method: 'DELETE' }))
        .status,
      200,
    );
    await eventually(
      'the deleted role to leave',
      async () => !(await review('mo', { verb: 'get', resource: 'endpoints', namespace: 'a' })).allowed,
    );
    // The bootstrap roles aggregate the same way: admin ⊃ edit ⊃ view.
    await grant('placeholder', 'nobody', []);
    await create('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      metadata: { name: 'ed' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
      subjects: [{ kind: 'User', name: 'ed' }],
    });
    assert.equal(
      (await review('ed', { namespace: 'default', verb: 'delete', group: 'apps', resource: 'deployments' })).allowed,
      true,
      'from edit',
    );
    assert.equal(
      (await review('ed', { namespace: 'default', verb: 'watch', group: 'batch', resource: 'jobs' })).allowed,
      true,
      'from view',
    );
    assert.equal(
      (
        await review('ed', {
          namespace: 'default',
          verb: 'create',
          group: 'rbac.authorization.k8s.io',
          resource: 'rolebindings',
        })
      ).allowed,
      true,
      "admin's own",
    );
    assert.equal((await review('ed', { verb: 'list', resource: 'nodes' })).allowed, false);
  });
});

describe('escalation prevention', () => {
  const asDana = (path: string, body: Json, method = 'POST'): Promise<Reply> =>
    admin(path, { method, body, headers: { 'impersonate-user': 'dana' } });
  const roles = '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles';
  const bindings = '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings';
  const nodeReader = {
    metadata: { name: 'node-reader' },
    rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['list', 'get'] }],
  };
  const bindTo = (name: string, kind: string, role: string): Json => ({
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name: role },
    subjects: [{ kind: 'User', name: 'someone' }],
  });

  test('a namespace admin may grant what they hold, and nothing more', async () => {
    await create(bindings, bindTo('dana-admin', 'ClusterRole', 'admin'));
    await admin(`${bindings}/dana-admin`, {
      method: 'PATCH',
      body: { subjects: [{ kind: 'User', name: 'dana' }] },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    assert.equal(
      (
        await asDana(roles, {
          metadata: { name: 'pod-reader' },
          rules: [{ apiGroups: [''], resources: ['pods', 'pods/log'], verbs: ['get', 'list'] }],
        })
      ).status,
      201,
    );
    assert.equal(
      (await asDana(bindings, bindTo('viewers', 'ClusterRole', 'view'))).status,
      201,
      'admin holds everything view has',
    );
    forbidden(
      await asDana(roles, nodeReader),
      'roles.rbac.authorization.k8s.io "node-reader" is forbidden: user "dana" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["nodes"], Verbs:["list" "get"]}',
      { name: 'node-reader', group: 'rbac.authorization.k8s.io', kind: 'roles' },
    );
    const clusterAdmin = await asDana(bindings, bindTo('root', 'ClusterRole', 'cluster-admin'));
    assert.equal(clusterAdmin.status, 403);
    assert.match(
      (clusterAdmin.body as StatusBody).message!,
      /^rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "dana" .* is attempting to grant RBAC permissions not currently held:\n\{APIGroups:\["\*"\], Resources:\["\*"\], Verbs:\["\*"\]\}\n\{NonResourceURLs:\["\*"\], Verbs:\["\*"\]\}$/,
    );
    // Updating a role she may not grant (a label that would feed an aggregation, say) is refused the same way.
    await create(roles, nodeReader);
    const relabel = await admin(`${roles}/node-reader`, {
      method: 'PATCH',
      body: { metadata: { labels: { team: 'x' } } },
      headers: { 'content-type': 'application/merge-patch+json', 'impersonate-user': 'dana' },
    });
    assert.equal(relabel.status, 403, relabel.text);
  });

  test('`escalate` on roles and `bind` on a role lift the check', async () => {
    await grant('dana-escalate', 'dana', [
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles'], verbs: ['escalate'] },
    ]);
    assert.equal((await asDana(roles, { ...nodeReader, metadata: { name: 'node-reader-2' } })).status, 201);
    await grant('dana-bind', 'dana', [
      {
        apiGroups: ['rbac.authorization.k8s.io'],
        resources: ['clusterroles'],
        resourceNames: ['cluster-admin'],
        verbs: ['bind'],
      },
    ]);
    assert.equal((await asDana(bindings, bindTo('root', 'ClusterRole', 'cluster-admin'))).status, 201);
    const missingRole = await asDana(bindings, bindTo('ghost', 'Role', 'no-such-role'));
    forbidden(
      missingRole,
      'rolebindings.rbac.authorization.k8s.io "ghost" is forbidden: role.rbac.authorization.k8s.io "no-such-role" not found',
      { name: 'ghost', group: 'rbac.authorization.k8s.io', kind: 'rolebindings' },
    );
  });
});

describe('impersonation', () => {
  const whoami = async (token: string, headers: Record<string, string>): Promise<Reply> =>
    as(token, '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      headers,
    });

  test('an admin may act as a ServiceAccount (with its groups) or a user with groups', async () => {
    let reply = await whoami(ADMIN, { 'impersonate-user': 'system:serviceaccount:default:robot' });
    assert.deepEqual((reply.body as Json).status, {
      userInfo: {
        username: 'system:serviceaccount:default:robot',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:default', 'system:authenticated'],
      },
    });
    reply = await whoami(ADMIN, { 'impersonate-user': 'jane', 'impersonate-group': 'devs', 'impersonate-uid': 'u-1' });
    assert.deepEqual((reply.body as Json).status, {
      userInfo: { username: 'jane', uid: 'u-1', groups: ['devs', 'system:authenticated'] },
    });
    // …and is then judged as them.
    forbidden(
      await as(ADMIN, '/api/v1/namespaces/default/secrets', { headers: { 'impersonate-user': 'jane' } }),
      'secrets is forbidden: User "jane" cannot list resource "secrets" in API group "" in the namespace "default"',
      { kind: 'secrets' },
    );
  });

  test('others get a 403 naming what they may not impersonate, until RBAC grants it', async () => {
    forbidden(
      await whoami('bob-token', { 'impersonate-user': 'jane' }),
      'users "jane" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope',
      { name: 'jane', kind: 'users' },
    );
    forbidden(
      await whoami('bob-token', { 'impersonate-user': 'system:serviceaccount:ops:deployer' }),
      'serviceaccounts "deployer" is forbidden: User "bob" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ops"',
      { name: 'deployer', kind: 'serviceaccounts' },
    );
    await grant('impersonate-jane', 'bob', [
      { apiGroups: [''], resources: ['users'], resourceNames: ['jane'], verbs: ['impersonate'] },
    ]);
    assert.equal((await whoami('bob-token', { 'impersonate-user': 'jane' })).status, 201);
    forbidden(
      await whoami('bob-token', { 'impersonate-user': 'jane', 'impersonate-group': 'system:masters' }),
      'groups "system:masters" is forbidden: User "bob" cannot impersonate resource "groups" in API group "" at the cluster scope',
      {
        name: 'system:masters',
        kind: 'groups',
      },
    );
    const groupOnly = await whoami(ADMIN, { 'impersonate-group': 'devs' });
    assert.equal(groupOnly.status, 500, 'a group without a user is refused (kube-apiserver answers 500 too)');
    assert.match((groupOnly.body as StatusBody).message!, /requested group "devs" without impersonating a user/);
    // Extra keys are percent-decoded.
    const reply = await whoami(ADMIN, { 'impersonate-user': 'jane', 'impersonate-extra-scopes%2Fv1': 'read' });
    assert.deepEqual((reply.body as Json).status, {
      userInfo: { username: 'jane', groups: ['system:authenticated'], extra: { 'scopes/v1': ['read'] } },
    });
    // Asking for system:unauthenticated keeps system:authenticated out, and with it system:basic-user's rights.
    forbidden(
      await whoami(ADMIN, { 'impersonate-user': 'jane', 'impersonate-group': 'system:unauthenticated' }),
      'selfsubjectreviews.authentication.k8s.io is forbidden: User "jane" cannot create resource "selfsubjectreviews" in API group "authentication.k8s.io" at the cluster scope',
      { group: 'authentication.k8s.io', kind: 'selfsubjectreviews' },
    );
  });
});

describe('ServiceAccount tokens (TokenRequest)', () => {
  const tokenFor = async (name: string, spec: Json = {}): Promise<Reply> =>
    admin(`/api/v1/namespaces/default/serviceaccounts/${name}/token`, {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec },
    });

  test('a token names the ServiceAccount, expires with the clock, and dies with the account', async () => {
    await create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'robot' } });
    const reply = await tokenFor('robot');
    assert.equal(reply.status, 201, reply.text);
    const tr = reply.body as { metadata: Json; spec: Json; status: { token: string; expirationTimestamp: string } };
    assert.deepEqual(tr.spec, {
      audiences: ['https://kubernetes.default.svc.cluster.local'],
      expirationSeconds: 3600,
      boundObjectRef: null,
    });
    assert.deepEqual(tr.metadata, { name: 'robot', namespace: 'default', creationTimestamp: '2025-01-01T00:00:00Z' });
    assert.equal(tr.status.expirationTimestamp, '2025-01-01T01:00:00Z');
    const [, payload] = tr.status.token.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Json;
    assert.equal(claims.sub, 'system:serviceaccount:default:robot');
    assert.deepEqual(claims.aud, ['https://kubernetes.default.svc.cluster.local']);

    const me = await as(tr.status.token, '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    const userInfo = ((me.body as Json).status as { userInfo: Json }).userInfo;
    assert.equal(userInfo.username, 'system:serviceaccount:default:robot');
    assert.deepEqual(userInfo.groups, [
      'system:serviceaccounts',
      'system:serviceaccounts:default',
      'system:authenticated',
    ]);
    forbidden(
      await as(tr.status.token, '/api/v1/namespaces/default/pods'),
      'pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource "pods" in API group "" in the namespace "default"',
      { kind: 'pods' },
    );

    // A token for another audience is not for the API server.
    const foreign = ((await tokenFor('robot', { audiences: ['vault'] })).body as { status: { token: string } }).status
      .token;
    assert.deepEqual((await as(foreign, '/api')).body, UNAUTHORIZED);
    // A tampered token fails its signature.
    const [h, , s] = tr.status.token.split('.');
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'system:serviceaccount:kube-system:admin' })).toString('base64url')}.${s}`;
    assert.deepEqual((await as(forged, '/api')).body, UNAUTHORIZED);

    // Recreated with the same name, the account has a new uid: old tokens stop working.
    assert.equal((await admin('/api/v1/namespaces/default/serviceaccounts/robot', { method: 'DELETE' })).status, 200);
    await create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'robot' } });
    assert.deepEqual((await as(tr.status.token, '/api')).body, UNAUTHORIZED);

    // Expiry follows the cluster clock (virtual here), with kube-apiserver's minute of leeway.
    const fresh = ((await tokenFor('robot', { expirationSeconds: 600 })).body as { status: { token: string } }).status
      .token;
    assert.equal((await as(fresh, '/api')).status, 200);
    assert.equal((await admin('/sim/v1/clock/advance', { method: 'POST', body: { by: '601s' } })).status, 200);
    assert.equal((await as(fresh, '/api')).status, 200, 'a second past expiry, within the leeway');
    assert.equal((await admin('/sim/v1/clock/advance', { method: 'POST', body: { by: '60s' } })).status, 200);
    assert.deepEqual((await as(fresh, '/api')).body, UNAUTHORIZED);
  });

  test('a token bound to a Pod names it and dies with it; binding is checked', async () => {
    await create('/api/v1/namespaces/default/pods', {
      metadata: { name: 'runner' },
      spec: { serviceAccountName: 'robot', containers: [{ name: 'c', image: 'busybox' }] },
    });
    const reply = await tokenFor('robot', { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'runner' } });
    assert.equal(reply.status, 201, reply.text);
    const token = (reply.body as { status: { token: string } }).status.token;
    const me = await as(token, '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    const extra = (((me.body as Json).status as { userInfo: Json }).userInfo.extra ?? {}) as Record<string, string[]>;
    assert.deepEqual(extra['authentication.kubernetes.io/pod-name'], ['runner']);
    assert.equal(extra['authentication.kubernetes.io/pod-uid']?.length, 1);
    assert.equal(
      (await admin('/api/v1/namespaces/default/pods/runner?gracePeriodSeconds=0', { method: 'DELETE' })).status,
      200,
    );
    assert.deepEqual((await as(token, '/api')).body, UNAUTHORIZED);

    await create('/api/v1/namespaces/default/pods', {
      metadata: { name: 'other' },
      spec: { containers: [{ name: 'c', image: 'busybox' }] },
    });
    const wrongAccount = await tokenFor('robot', { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'other' } });
    assert.equal(wrongAccount.status, 400);
    assert.equal(
      (wrongAccount.body as StatusBody).message,
      'cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name.',
    );
    const wrongKind = await tokenFor('robot', { boundObjectRef: { apiVersion: 'v1', kind: 'ConfigMap', name: 'x' } });
    assert.equal((wrongKind.body as StatusBody).message, 'cannot bind token to object of type /v1, Kind=ConfigMap');
    const gone = await tokenFor('robot', { boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: 'nope' } });
    assert.equal(gone.status, 404);
  });

  test('TokenRequest validation and a missing ServiceAccount', async () => {
    const short = await tokenFor('robot', { expirationSeconds: 60 });
    assert.equal(short.status, 422);
    assert.equal(
      (short.body as StatusBody).message,
      'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes',
    );
    assert.equal((await tokenFor('robot', { expirationSeconds: 0 })).status, 422, 'an explicit 0 is not the default');
    const missing = await tokenFor('ghost', { expirationSeconds: 60 });
    assert.equal(missing.status, 404);
    assert.equal((missing.body as StatusBody).message, 'serviceaccounts "ghost" not found');
  });
});

describe('TokenReview', () => {
  const API_AUDIENCE = 'https://kubernetes.default.svc.cluster.local';
  const tokenReview = (as_: string, spec: Json): Promise<Reply> =>
    as(as_, '/apis/authentication.k8s.io/v1/tokenreviews', {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec },
    });
  const statusOf = async (spec: Json): Promise<Json> => {
    const reply = await tokenReview(ADMIN, spec);
    assert.equal(reply.status, 201, reply.text);
    const body = reply.body as Json;
    assert.deepEqual(body.spec, spec, 'the spec comes back as sent');
    assert.deepEqual(body.metadata, { creationTimestamp: null });
    return body.status as Json;
  };
  const issue = async (name: string, spec: Json = {}): Promise<string> => {
    const reply = await admin(`/api/v1/namespaces/default/serviceaccounts/${name}/token`, {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec },
    });
    assert.equal(reply.status, 201, reply.text);
    return (reply.body as { status: { token: string } }).status.token;
  };

  test('answers from the request authenticator: static and ServiceAccount tokens, audiences, and why a token fails', async () => {
    assert.deepEqual(await statusOf({ token: 'alice-token' }), {
      authenticated: true,
      user: { username: 'alice', uid: 'uid-alice', groups: ['dev', 'qa', 'system:authenticated'] },
      audiences: [API_AUDIENCE],
    });
    // A static token is audience-agnostic: good for the API server's audience only.
    assert.deepEqual(await statusOf({ token: 'alice-token', audiences: ['vault'] }), {
      user: {},
      error: 'invalid bearer token',
    });
    assert.deepEqual(await statusOf({ token: 'not-a-token' }), { user: {}, error: 'invalid bearer token' });

    await create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'reviewed' } });
    const token = await issue('reviewed');
    const jti = (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { jti: string }).jti;
    const account = (await admin('/api/v1/namespaces/default/serviceaccounts/reviewed')).body as {
      metadata: { uid: string };
    };
    assert.deepEqual(await statusOf({ token }), {
      authenticated: true,
      user: {
        username: 'system:serviceaccount:default:reviewed',
        uid: account.metadata.uid,
        groups: ['system:serviceaccounts', 'system:serviceaccounts:default', 'system:authenticated'],
        extra: { 'authentication.kubernetes.io/credential-id': [`JTI=${jti}`] },
      },
      audiences: [API_AUDIENCE],
    });
    // A token for another audience passes a review for that audience (and only that one) only.
    const vault = await issue('reviewed', { audiences: ['vault', 'other'] });
    const forVault = await statusOf({ token: vault, audiences: ['vault', 'elsewhere'] });
    assert.equal(forVault.authenticated, true);
    assert.deepEqual(forVault.audiences, ['vault']);
    assert.deepEqual(await statusOf({ token: vault }), {
      user: {},
      error: `[invalid bearer token, token audiences ["vault" "other"] is invalid for the target audiences ["${API_AUDIENCE}"]]`,
    });
    // A forged signature, and an account recreated under the same name.
    const [h, p] = token.split('.');
    assert.deepEqual(await statusOf({ token: `${h}.${p}.${Buffer.alloc(64).toString('base64url')}` }), {
      user: {},
      error: '[invalid bearer token, go-jose/go-jose: error in cryptographic primitive]',
    });
    assert.equal(
      (await admin('/api/v1/namespaces/default/serviceaccounts/reviewed', { method: 'DELETE' })).status,
      200,
    );
    assert.deepEqual(await statusOf({ token }), {
      user: {},
      error: '[invalid bearer token, serviceaccounts "reviewed" not found]',
    });
    await create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'reviewed' } });
    const recreated = (await admin('/api/v1/namespaces/default/serviceaccounts/reviewed')).body as {
      metadata: { uid: string };
    };
    assert.deepEqual(await statusOf({ token }), {
      user: {},
      error: `[invalid bearer token, service account UID (${recreated.metadata.uid}) does not match claim (${account.metadata.uid})]`,
    });
    // A pod-bound token stays good while the pod terminates gracefully, and for a minute after its grace period.
    // (On a Node that exists but has no kubelet, so nothing finishes the deletion, nor garbage-collects the pod.)
    await create('/api/v1/nodes', { metadata: { name: 'parked' } });
    await create('/api/v1/namespaces/default/pods', {
      metadata: { name: 'leaving' },
      spec: { serviceAccountName: 'reviewed', nodeName: 'parked', containers: [{ name: 'c', image: 'busybox' }] },
    });
    const podToken = await issue('reviewed', { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'leaving' } });
    assert.equal(
      (await admin('/api/v1/namespaces/default/pods/leaving?gracePeriodSeconds=30', { method: 'DELETE' })).status,
      200,
    );
    assert.equal((await statusOf({ token: podToken })).authenticated, true, 'terminating, not gone');
    assert.equal((await admin('/sim/v1/clock/advance', { method: 'POST', body: { by: '89s' } })).status, 200);
    assert.equal(
      (await statusOf({ token: podToken })).authenticated,
      true,
      'within a minute of the end of the grace period',
    );
    assert.equal((await admin('/sim/v1/clock/advance', { method: 'POST', body: { by: '2s' } })).status, 200);
    assert.deepEqual(await statusOf({ token: podToken }), {
      user: {},
      error: '[invalid bearer token, service account token has been invalidated]',
    });
    // Expired (past the minute of leeway) on the cluster clock.
    const short = await issue('reviewed', { expirationSeconds: 600 });
    assert.equal((await admin('/sim/v1/clock/advance', { method: 'POST', body: { by: '661s' } })).status, 200);
    assert.deepEqual(await statusOf({ token: short }), {
      user: {},
      error: '[invalid bearer token, service account token has expired]',
    });
  });

  test('needs a token, and the right to create tokenreviews (system:auth-delegator)', async () => {
    const empty = await tokenReview(ADMIN, {});
    assert.equal(empty.status, 400);
    assert.equal((empty.body as StatusBody).message, 'token is required for TokenReview in authentication');
    forbidden(
      await tokenReview('bob-token', { token: 'alice-token' }),
      'tokenreviews.authentication.k8s.io is forbidden: User "bob" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope',
      { group: 'authentication.k8s.io', kind: 'tokenreviews' },
    );
    await create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'bob-delegator' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: [{ kind: 'User', name: 'bob', apiGroup: 'rbac.authorization.k8s.io' }],
    });
    await eventually(
      'bob to be allowed tokenreviews',
      async () => (await tokenReview('bob-token', { token: 'alice-token' })).status === 201,
    );
    const sar = await as('bob-token', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      method: 'POST',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user: 'alice', resourceAttributes: { verb: 'get', resource: 'pods' } },
      },
    });
    assert.equal(sar.status, 201, 'system:auth-delegator also grants subjectaccessreviews');
    assert.equal(
      (await admin('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/bob-delegator', { method: 'DELETE' }))
        .status,
      200,
    );
  });
});

describe('access reviews', () => {
  test("SelfSubjectAccessReview answers for the requester, SubjectAccessReview for the spec's user", async () => {
    const ssar = async (token: string, attributes: Json): Promise<Json> => {
      const reply = await as(token, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        method: 'POST',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: attributes },
        },
      });
      assert.equal(reply.status, 201, reply.text);
      return (reply.body as Json).status as Json;
    };
    assert.deepEqual(await ssar('bob-token', { namespace: 'default', verb: 'list', resource: 'pods' }), {
      allowed: false,
    });
    assert.deepEqual(await ssar(ADMIN, { namespace: 'default', verb: 'list', resource: 'pods' }), { allowed: true });
    // SubjectAccessReview needs the right to create it: bob has not.
    const denied = await as('bob-token', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      method: 'POST',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user: 'x', resourceAttributes: { verb: 'get', resource: 'pods' } },
      },
    });
    assert.equal(denied.status, 403);
    // Validation.
    const noUser = await admin('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      method: 'POST',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { resourceAttributes: { verb: 'get', resource: 'pods' } },
      },
    });
    assert.equal(noUser.status, 422);
    assert.match(
      (noUser.body as StatusBody).message!,
      /spec.user: Invalid value: "": at least one of user or group must be specified/,
    );
    const neither = await admin('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      method: 'POST',
      body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: {} },
    });
    assert.equal(neither.status, 422);
    assert.match(
      (neither.body as StatusBody).message!,
      /exactly one of nonResourceAttributes or resourceAttributes must be specified/,
    );
    // LocalSubjectAccessReview: the namespace of the URL.
    const local = await admin('/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews', {
      method: 'POST',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'LocalSubjectAccessReview',
        metadata: { namespace: 'default' },
        spec: { user: 'alice', resourceAttributes: { namespace: 'default', verb: 'get', resource: 'configmaps' } },
      },
    });
    assert.equal(local.status, 201, local.text);
    assert.equal(((local.body as Json).status as Json).allowed, true);
  });

  test('SelfSubjectRulesReview lists what RBAC grants in the namespace (system:masters: everything)', async () => {
    const rules = async (token: string, namespace: string): Promise<Json> => {
      const reply = await as(token, '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews', {
        method: 'POST',
        body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectRulesReview', spec: { namespace } },
      });
      assert.equal(reply.status, 201, reply.text);
      return (reply.body as Json).status as Json;
    };
    const bob = await rules('bob-token', 'default');
    // ClusterRoleBindings in name order: impersonate-jane, then system:basic-user.
    assert.deepEqual(bob.resourceRules, [
      { verbs: ['impersonate'], apiGroups: [''], resources: ['users'], resourceNames: ['jane'] },
      {
        verbs: ['create'],
        apiGroups: ['authorization.k8s.io'],
        resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
      },
      { verbs: ['create'], apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'] },
    ]);
    assert.equal(bob.incomplete, false);
    const adminRules = await rules(ADMIN, 'default');
    assert.deepEqual((adminRules.resourceRules as Json[])[0], { verbs: ['*'], apiGroups: ['*'], resources: ['*'] });
  });
});

test('with --data, bindings made before a restart still authorize after it (the RBAC cache loads from the store)', async () => {
  const data = join(dir, 'data');
  const args = ['--auth', '--token-auth-file', join(dir, 'tokens.csv'), '--nodes', '0', '--data', data];
  const first = await startServer(args);
  try {
    const reply = await request(first.url, '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings', {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}` },
      body: {
        metadata: { name: 'bob-view' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ kind: 'User', name: 'bob' }],
      },
    });
    assert.equal(reply.status, 201, reply.text);
  } finally {
    await first.stop();
  }
  const second = await startServer(args);
  try {
    assert.equal(
      (await request(second.url, '/api/v1/namespaces/default/pods', { headers: { authorization: 'Bearer bob-token' } }))
        .status,
      200,
    );
    assert.equal(
      (
        await request(second.url, '/api/v1/namespaces/kube-system/pods', {
          headers: { authorization: 'Bearer bob-token' },
        })
      ).status,
      403,
    );
    const roles = await request<{ items: Array<{ metadata: { name: string } }> }>(
      second.url,
      '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      { headers: { authorization: `Bearer ${ADMIN}` } },
    );
    assert.equal(
      roles.body.items.filter((r) => r.metadata.name === 'cluster-admin').length,
      1,
      'bootstrap roles are not created twice',
    );
  } finally {
    await second.stop();
  }
});

test('without --auth nothing changes: no token needed, every review allowed, no bootstrap roles', async (t) => {
  const open = await serverFor(t, ['--nodes', '0']);
  assert.equal((await request(open.url, '/api/v1/namespaces/default/pods')).status, 200);
  assert.equal(
    (await request(open.url, '/api/v1/namespaces/default/pods', { headers: { authorization: 'Bearer whatever' } }))
      .status,
    200,
  );
  const list = await request<{ items: unknown[] }>(open.url, '/apis/rbac.authorization.k8s.io/v1/clusterroles');
  assert.deepEqual(list.body.items, []);
  const reply = await request(open.url, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    method: 'POST',
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { verb: 'delete', resource: 'nodes' } },
    },
  });
  assert.equal(((reply.body as Json).status as Json).allowed, true);
  // TokenReview is served (kube-apiserver always serves it) but, with no authenticator, authenticates nothing.
  const resources = await request<{ resources: Array<{ name: string; verbs: string[] }> }>(
    open.url,
    '/apis/authentication.k8s.io/v1',
  );
  assert.deepEqual(resources.body.resources.find((r) => r.name === 'tokenreviews')?.verbs, ['create']);
  const tr = await request(open.url, '/apis/authentication.k8s.io/v1/tokenreviews', {
    method: 'POST',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'whatever' } },
  });
  assert.equal(tr.status, 201, tr.text);
  assert.deepEqual((tr.body as Json).status, {
    user: {},
    error: 'no authenticator is configured (sim serve runs without --auth): tokens are not checked',
  });
  assert.doesNotMatch(open.stdout(), /token/);
});

describe('request attributes (RequestInfoFactory) and the token file format', () => {
  const attrs = (method: string, url: string) => {
    const a = requestAttributes(method, url);
    return a.resourceRequest
      ? `${a.verb} ${a.apiGroup}/${a.apiVersion} ns=${a.namespace} ${a.resource}${a.subresource ? `/${a.subresource}` : ''} name=${a.name}`
      : `${a.verb} path ${a.path}`;
  };

  test('verbs from the method and the URL', () => {
    assert.equal(attrs('GET', '/api/v1/pods'), 'list /v1 ns= pods name=');
    assert.equal(attrs('GET', '/api/v1/namespaces/a/pods?watch=true'), 'watch /v1 ns=a pods name=');
    assert.equal(attrs('GET', '/api/v1/namespaces/a/pods?watch=1'), 'watch /v1 ns=a pods name=');
    assert.equal(attrs('GET', '/api/v1/namespaces/a/pods?watch=false'), 'list /v1 ns=a pods name=');
    assert.equal(attrs('GET', '/api/v1/watch/namespaces/a/pods/p'), 'watch /v1 ns=a pods name=p');
    assert.equal(
      attrs('GET', '/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dp'),
      'list /v1 ns=a pods name=p',
    );
    assert.equal(
      attrs('GET', '/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Dp,spec.nodeName%3Dn'),
      'list /v1 ns=a pods name=p',
    );
    assert.equal(
      attrs('DELETE', '/apis/apps/v1/namespaces/a/deployments'),
      'deletecollection apps/v1 ns=a deployments name=',
    );
    assert.equal(attrs('DELETE', '/apis/apps/v1/namespaces/a/deployments/d'), 'delete apps/v1 ns=a deployments name=d');
    assert.equal(
      attrs('PATCH', '/apis/apps/v1/namespaces/a/deployments/d/scale'),
      'patch apps/v1 ns=a deployments/scale name=d',
    );
    assert.equal(
      attrs('POST', '/api/v1/namespaces/a/serviceaccounts/sa/token'),
      'create /v1 ns=a serviceaccounts/token name=sa',
    );
    assert.equal(attrs('HEAD', '/api/v1/nodes/n'), 'get /v1 ns= nodes name=n');
  });

  test('namespaces: a namespace is its own namespace; status and finalize are its subresources', () => {
    assert.equal(attrs('GET', '/api/v1/namespaces'), 'list /v1 ns= namespaces name=');
    assert.equal(attrs('GET', '/api/v1/namespaces/a'), 'get /v1 ns=a namespaces name=a');
    assert.equal(attrs('PUT', '/api/v1/namespaces/a/finalize'), 'update /v1 ns=a namespaces/finalize name=a');
  });

  test('non-resource paths: discovery, health, anything outside /api and /apis', () => {
    assert.equal(attrs('GET', '/api'), 'get path /api');
    assert.equal(attrs('GET', '/api/v1'), 'get path /api/v1');
    assert.equal(attrs('GET', '/apis/apps'), 'get path /apis/apps');
    assert.equal(attrs('GET', '/apis/apps/v1'), 'get path /apis/apps/v1');
    assert.equal(attrs('POST', '/sim/v1/clock/advance'), 'post path /sim/v1/clock/advance');
    assert.equal(attrs('GET', '/healthz?verbose'), 'get path /healthz');
  });

  test('token file CSV: quoted groups, quotes, blank lines', () => {
    assert.deepEqual(parseCsv('t1,alice,u1,"a,b"\n\nt2,bob,u2\r\nt3,"say ""hi""",u3\n'), [
      ['t1', 'alice', 'u1', 'a,b'],
      ['t2', 'bob', 'u2'],
      ['t3', 'say "hi"', 'u3'],
    ]);
  });
});

test('with --data, ServiceAccount tokens outlive a restart: the signing key is kept beside the CA', async (t) => {
  const data = join(dir, 'restart-data');
  const args = ['--auth', '--token-auth-file', join(dir, 'tokens.csv'), '--nodes', '0', '--data', data];
  let running = await startServer(args);
  t.after(() => running.stop());
  const call = (token: string, path: string, options: { method?: string; body?: unknown } = {}): Promise<Reply> =>
    request(running.url, path, { ...options, headers: { authorization: `Bearer ${token}` } });
  assert.equal(
    (
      await call(ADMIN, '/api/v1/namespaces/default/serviceaccounts', {
        method: 'POST',
        body: { metadata: { name: 'survivor' } },
      })
    ).status,
    201,
  );
  const issued = await call(ADMIN, '/api/v1/namespaces/default/serviceaccounts/survivor/token', {
    method: 'POST',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} },
  });
  assert.equal(issued.status, 201, issued.text);
  const token = (issued.body as { status: { token: string } }).status.token;
  const whoami = async (): Promise<Reply> =>
    call(token, '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
  assert.equal((await whoami()).status, 201);

  await running.stop();
  running = await startServer(args);
  const after = await whoami();
  assert.equal(after.status, 201, after.text);
  assert.equal(
    ((after.body as Json).status as { userInfo: Json }).userInfo.username,
    'system:serviceaccount:default:survivor',
  );
});
