/**
 * The live view (/sim/ui/) driven in a real headless chromium: it follows the cluster through its watches and acts
 * through the public APIs. Screenshots go to dist/screenshots/ (KUBE_SIM_SCREENSHOTS elsewhere).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { browserMissing, openBrowser, screenshot, waitForCount } from './helpers/browser.js';
import { Api } from './helpers/http.js';
import { kubectl, kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';

const skip = browserMissing() ?? kubectlMissing();

/** Each lane's pods as `name=state`, by node. */
function lanes(page: Page): Promise<Record<string, string[]>> {
  return page.$$eval('.lane[data-node]', (els) =>
    Object.fromEntries(
      els.map((lane) => [
        lane.dataset.node ?? '',
        [...lane.querySelectorAll('.pods .pod:not(.leaving)')].map((p) => `${p.dataset.pod}=${p.dataset.state}`),
      ]),
    ),
  );
}

/** The ReplicaSets of a Deployment card as `name desired/ready`, newest revision first. */
function replicaSets(page: Page, deployment: string): Promise<string[]> {
  return page.$$eval(`[data-deployment="${deployment}"] .rs`, (rows) =>
    rows.map((row) => {
      const counts = row.querySelector('.counts')!;
      return `${row.dataset.rs} ${counts.dataset.desired}/${counts.dataset.ready}`;
    }),
  );
}

test('sim serve serves the page at /sim/ui/ (without a token, even with --auth: the page asks for one), only its own files', async (t) => {
  const server = await serverFor(t, ['--auth', '--nodes', '0']);
  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { headers, redirect: 'manual' });
  assert.match(server.stdout(), /live view: http:\/\/127\.0\.0\.1:\d+\/sim\/ui\//, 'the start-up line links it');
  const bare = await get('/sim/ui');
  assert.equal(bare.status, 301);
  assert.equal(bare.headers.get('location'), '/sim/ui/');
  const page = await get('/sim/ui/');
  assert.equal(page.status, 200);
  assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/, 'nothing from elsewhere');
  const html = await page.text();
  assert.match(html, /<script type="module" src="main.js"><\/script>/);
  const script = await get('/sim/ui/main.js');
  assert.equal(script.status, 200);
  assert.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.doesNotMatch(await script.text(), /https?:\/\/(cdn|unpkg|esm\.sh)/, 'loads no library from the internet');
  const etag = script.headers.get('etag')!;
  assert.equal((await get('/sim/ui/main.js', { 'if-none-match': etag })).status, 304);
  assert.equal((await get('/sim/ui/main.css')).headers.get('content-type'), 'text/css; charset=utf-8');
  for (const path of ['/sim/ui/nope.js', '/sim/ui/..%2Fpackage.json', '/sim/ui/%2e%2e%2fpackage.json', '/sim/ui/a/b'])
    assert.equal((await get(path)).status, 404, path);
  // The API itself still wants a token.
  assert.equal((await get('/api/v1/namespaces')).status, 401);
  assert.equal((await get('/sim/v1/clock')).status, 401);
});

async function click(page: Page, action: string): Promise<void> {
  await page.locator(`[data-action="${action}"]:enabled`).first().click();
  // Done when no action is running (its button is busy while the request runs).
  await waitForCount(page, '[data-busy]', 0);
}

test('the live view: a Deployment made with kubectl appears, its rolling update moves the ReplicaSets, a node failed from the page goes NotReady and its pods are evicted', {
  skip,
}, async (t) => {
  const server = await serverFor(t, [
    '--clock',
    'virtual',
    '--seed',
    '5',
    '--ready-delay',
    '15s',
    '--stop-delay',
    '2s',
  ]);
  const api = new Api(server.url);
  const k = kubectlAgainst(server);
  const { page, errors } = await openBrowser(t);
  await page.goto(`${server.url}/sim/ui/`);
  await page.waitForSelector('[data-watches="live"]');
  assert.deepEqual(Object.keys(await lanes(page)), ['node-1', 'node-2', 'node-3']);
  assert.equal(await page.textContent('.clock-face .badge'), 'virtual, paused');

  // kubectl creates it; the page sees its pods appear (bound, starting) without being told anything.
  await k.ok(['create', 'deployment', 'web', '--image=nginx', '--replicas=4']);
  await waitForCount(page, '.lane[data-node] .pod', 4);
  // Ready after 15 s of cluster time: two clicks of +10s.
  await click(page, '+10s');
  await click(page, '+10s');
  await waitForCount(page, '.lane .pod[data-state="ready"]', 4);
  const [firstRs] = await replicaSets(page, 'web');
  assert.match(firstRs!, /^web-\w+ 4\/4$/);
  t.diagnostic(`screenshot: ${await screenshot(page, 'ui-1-deployment')}`);

  // A rolling update: each +10s step moves the ReplicaSets' counts, within maxSurge 1 / maxUnavailable 1.
  await k.ok(['set', 'image', 'deployment/web', 'nginx=nginx:1.27']);
  await waitForCount(page, '[data-deployment="web"] .rs', 2);
  const seen: string[] = [(await replicaSets(page, 'web')).join(', ')];
  for (let step = 0; step < 12; step++) {
    if (step === 1) t.diagnostic(`screenshot: ${await screenshot(page, 'ui-2-rollout')}`);
    await click(page, '+10s');
    await page.waitForTimeout(100);
    const now = (await replicaSets(page, 'web')).join(', ');
    if (now !== seen.at(-1)) seen.push(now);
    if (/ 4\/4, web-\S+ 0\/0$/.test(now)) break;
  }
  t.diagnostic(`ReplicaSets (new, old) as the page showed them: ${seen.join(' → ')}`);
  assert.match(seen.at(-1)!, /^web-\S+ 4\/4, web-\S+ 0\/0$/, 'the rollout finished');
  assert.ok(seen.length >= 3, `the counts moved in steps: ${seen.join(' → ')}`);
  for (const state of seen) {
    const [newer, older] = state.split(', ').map((rs) => Number(rs.split(' ')[1]!.split('/')[0]));
    assert.ok(newer! + older! <= 5, `at most replicas + maxSurge pods are wanted: ${state}`);
  }
  const dep = await api.get('/apis/apps/v1/namespaces/default/deployments/web');
  assert.equal(
    await page.textContent('[data-deployment="web"] [data-count="updated"]'),
    `updated ${(dep.status as { updatedReplicas: number }).updatedReplicas}`,
  );

  // Fail node-2 from the page: its inspector's button, through POST /sim/v1/nodes/node-2/fail.
  const before = await lanes(page);
  const victims = before['node-2']!.map((p) => p.split('=')[0]!);
  assert.ok(victims.length > 0, `node-2 runs pods of web: ${JSON.stringify(before)}`);
  await page.click('[data-node="node-2"] .lane-name');
  await page.waitForSelector('[data-inspecting="Node/node-2"]');
  await click(page, 'fail node');
  await page.waitForSelector('[data-node="node-2"] .badge:text("kubelet stopped")');
  // The node lifecycle controller marks it NotReady once its lease is 40 s old.
  await click(page, '+1m');
  await page.waitForSelector('[data-node="node-2"] [data-ready="Unknown"]');
  assert.equal(await page.textContent('[data-node="node-2"] [data-ready]'), 'NotReady');
  const node = await api.get('/api/v1/nodes/node-2');
  const ready = (node.status as { conditions: Array<{ type: string; status: string }> }).conditions.find(
    (c) => c.type === 'Ready',
  );
  assert.equal(ready?.status, 'Unknown', 'the page shows what the API says');
  t.diagnostic(`screenshot: ${await screenshot(page, 'ui-3-node-notready')}`);

  // After the pods' 300 s toleration of node.kubernetes.io/unreachable, they are evicted and replaced elsewhere.
  await click(page, '+5m');
  await click(page, '+1m');
  const readyElsewhere =
    '.lane[data-node="node-1"] .pod[data-state="ready"], .lane[data-node="node-3"] .pod[data-state="ready"]';
  await waitForCount(page, readyElsewhere, 4, 10_000).catch(async (err: Error) => {
    const pods = await k.ok(['get', 'pods', '-o', 'wide', '--no-headers']);
    throw new Error(`${err.message}\nthe page: ${JSON.stringify(await lanes(page))}\nthe API:\n${pods}`);
  });
  const after = await lanes(page);
  for (const victim of victims)
    assert.ok(
      !after['node-2']!.includes(`${victim}=ready`),
      `${victim} was evicted from node-2 (still ${after['node-2']!.join(', ')})`,
    );
  assert.ok(
    after['node-2']!.every((p) => p.endsWith('=terminating')),
    `node-2 keeps only terminating pods: ${after['node-2']!.join(', ')}`,
  );
  const moved = await page.$$eval('.pod[data-moved]', (els) =>
    els.map((e) => `${e.dataset.pod} in ${e.closest('[data-node], [data-rs]')?.getAttribute('data-node')}`),
  );
  assert.ok(
    moved.length > 0,
    `a replacement flew in from the evicted pod: ${moved.join(', ')} ${JSON.stringify(after)}`,
  );
  await page.waitForSelector('.events td.reason:text("TaintManagerEviction")');
  t.diagnostic(`screenshot: ${await screenshot(page, 'ui-4-evicted')}`);
  assert.deepEqual(errors, []);
});

test('the live view with --auth --tls: it asks for a token, watches with it over wss, and is read-only for a user RBAC lets only read', {
  skip,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-ui-auth-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tokens.csv'), 'reader-token,reader,uid-reader\n');
  const kubeconfig = join(dir, 'kubeconfig');
  const server = await serverFor(t, [
    '--auth',
    '--tls',
    '--kubeconfig',
    kubeconfig,
    '--token-auth-file',
    join(dir, 'tokens.csv'),
    '--clock',
    'virtual',
    '--nodes',
    '1',
  ]);
  const admin = /admin token \(user kubernetes-admin, group system:masters\): (\S+)/.exec(server.stdout())?.[1];
  assert.ok(admin, server.stdout());
  const k = async (...args: string[]) => {
    const r = await kubectl(undefined, args, { env: { KUBECONFIG: kubeconfig } });
    assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
  };
  // The reader may get, list and watch everything, and read the clock: nothing more.
  await k('create', 'clusterrole', 'reader', '--verb=get,list,watch', '--resource=*.*');
  await k('create', 'clusterrole', 'sim-reader', '--verb=get', '--non-resource-url=/sim/v1/*');
  await k('create', 'clusterrolebinding', 'reader', '--clusterrole=reader', '--user=reader');
  await k('create', 'clusterrolebinding', 'sim-reader', '--clusterrole=sim-reader', '--user=reader');
  await k('create', 'deployment', 'web', '--image=nginx', '--replicas=2');

  const { page, errors } = await openBrowser(t);
  await page.goto(`${server.url}/sim/ui/`);
  const dialog = page.locator('form.dialog');
  await dialog.waitFor();
  assert.match((await dialog.textContent()) ?? '', /requires a bearer token/);
  // A token the server does not know: the dialog comes back and says so.
  await dialog.locator('input[name="token"]').fill('no-such-token');
  await dialog.locator('button[type="submit"]').click();
  await page.waitForSelector('form.dialog:has-text("did not accept this token (401 Unauthorized)")');
  await dialog.locator('input[name="token"]').fill('reader-token');
  await dialog.locator('button[type="submit"]').click();
  await page.waitForSelector('[data-watches="live"]');
  await waitForCount(page, '.lane[data-node="node-1"] .pod', 2);
  assert.equal(await page.textContent('button.user'), 'as reader');
  await page.waitForSelector('[data-banner="read-only"]');
  const advance = page.locator('[data-action="+10s"]');
  assert.equal(await advance.isDisabled(), true);
  assert.match((await advance.getAttribute('title')) ?? '', /you may not post \/sim\/v1\/clock\/advance/);
  await page.click('[data-node="node-1"] .lane-name');
  await page.waitForSelector('[data-inspecting="Node/node-1"]');
  await page.waitForSelector('[data-action="fail node"][title^="you may not"]');
  assert.equal(await page.locator('[data-action="cordon"]').isDisabled(), true);
  assert.equal(await page.locator('[data-deployment="web"] .scale button').first().isDisabled(), true);
  assert.equal(await page.locator('[data-action="drain"]').isDisabled(), true);
  t.diagnostic(`screenshot: ${await screenshot(page, 'ui-5-read-only')}`);
  // A pod's inspector: deleting it is not the reader's either.
  await page.locator('.lane[data-node="node-1"] .pod').first().click();
  await page.waitForSelector('[data-inspecting^="Pod/default/web-"]');
  await page.waitForSelector('[data-action="delete pod"][title^="you may not delete pods in namespace default"]');
  assert.equal(await page.locator('[data-action="delete pod"]').isDisabled(), true);

  // The admin's token: every button is enabled, and acts.
  await page.click('button.user');
  await dialog.locator('input[name="token"]').fill(admin);
  await dialog.locator('button[type="submit"]').click();
  await page.waitForSelector('button.user:text("as kubernetes-admin")');
  await page.waitForSelector('[data-action="+10s"]:enabled');
  await page.locator('[data-banner="read-only"]').waitFor({ state: 'detached' });
  await click(page, '+10s');
  assert.equal(await page.getAttribute('.clock-face', 'data-now'), '2025-01-01T00:00:10Z');
  await page.waitForSelector('[data-watches="live"]');
  assert.deepEqual(
    errors.filter((e) => !/401|403/.test(e)),
    [],
  );
});

const WORKLOADS = `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 3
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: fluentd}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  completions: 3
  parallelism: 2
  template:
    metadata: {annotations: {kube-sim.dev/duration: 20s}}
    spec: {restartPolicy: Never, containers: [{name: work, image: busybox}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "*/1 * * * *"
  jobTemplate:
    spec:
      template:
        metadata: {annotations: {kube-sim.dev/duration: 5s}}
        spec: {restartPolicy: Never, containers: [{name: tick, image: busybox}]}
`;

test('the live view of workloads: StatefulSet ordinals, DaemonSet per node, a Job and a CronJob history; scale, delete a pod, cordon and filter events from the page', {
  skip,
}, async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--seed', '3', '--ready-delay', '5s']);
  const api = new Api(server.url);
  const k = kubectlAgainst(server);
  const { page, errors } = await openBrowser(t);
  await page.goto(`${server.url}/sim/ui/`);
  await page.waitForSelector('[data-watches="live"]');
  await k.ok(['apply', '-f', '-'], WORKLOADS);
  // OrderedReady: db-1 only once db-0 is ready, db-2 once db-1 is.
  for (let i = 0; i < 4; i++) await click(page, '+10s');
  const ordinals = () =>
    page.$$eval('[data-statefulset="db"] .ordinal', (els) =>
      els.map(
        (el) =>
          `${el.querySelector('.ordinal-n')?.textContent}:${el.querySelector('.pod')?.getAttribute('data-pod') ?? ''}`,
      ),
    );
  await waitForCount(page, '[data-statefulset="db"] .ordinal .pod[data-state="ready"]', 3);
  assert.deepEqual(await ordinals(), ['0:db-0', '1:db-1', '2:db-2']);
  const perNode = await page.$$eval('[data-daemonset="agent"] .per-node-cell', (els) =>
    els.map((el) => `${el.getAttribute('title')}:${el.querySelectorAll('.pod[data-pod^="agent-"]').length}`),
  );
  assert.deepEqual(perNode, ['node-1:1', 'node-2:1', 'node-3:1']);
  // Two pods of 20 s at a time, then the third; the CronJob's first Job at the minute.
  await click(page, '+1m');
  await page.waitForSelector('[data-job="batch"] .badge:text("Complete")');
  assert.match((await page.textContent('[data-job="batch"] .rollout-text')) ?? '', /succeeded 3\/3/);
  await page.waitForSelector('[data-cronjob="tick"] .history li .link');
  t.diagnostic(`screenshot: ${await screenshot(page, 'ui-6-workloads')}`);

  // Scale the StatefulSet up from the page: PATCH …/statefulsets/db/scale.
  await page.click('[data-statefulset="db"] .scale button[aria-label="scale up"]');
  await page.waitForSelector('[data-statefulset="db"] .replicas[data-replicas="4"]');
  assert.equal(
    ((await api.get('/apis/apps/v1/namespaces/default/statefulsets/db')).spec as { replicas: number }).replicas,
    4,
  );
  await click(page, '+10s');
  await page.waitForSelector('[data-statefulset="db"] .ordinal .pod[data-pod="db-3"]');

  // Delete db-1 from its inspector: the StatefulSet makes it again, under the same name.
  const uid = (await api.get('/api/v1/namespaces/default/pods/db-1')).metadata.uid;
  await page.click('[data-statefulset="db"] .pod[data-pod="db-1"]');
  await page.waitForSelector('[data-inspecting="Pod/default/db-1"]');
  assert.match((await page.textContent('.inspector .chain')) ?? '', /StatefulSet\/db.*Pod\/db-1/s);
  await click(page, 'delete pod');
  await page.waitForSelector('[data-inspecting="Pod/default/db-1"] .state.s-terminating');
  // Its 30 s grace period, then the StatefulSet's new db-1 starts and gets ready.
  await click(page, '+1m');
  const again = await api.get('/api/v1/namespaces/default/pods/db-1');
  assert.notEqual(again.metadata.uid, uid, 'a new db-1');
  await page.waitForSelector('[data-inspecting="Pod/default/db-1"] .state.s-ready');

  // Cordon node-3 from its inspector.
  await page.click('[data-node="node-3"] .lane-name');
  await page.waitForSelector('[data-inspecting="Node/node-3"]');
  await click(page, 'cordon');
  await page.waitForSelector('[data-node="node-3"] .badge:text("cordoned")');
  assert.equal(((await api.get('/api/v1/nodes/node-3')).spec as { unschedulable?: boolean }).unschedulable, true);
  await page.click('.inspector .close');

  // The events feed, filtered to one object.
  await page.fill('.events-bar input', 'Pod/db-0');
  const objects = await page.$$eval('.events td.object', (els) => [...new Set(els.map((el) => el.textContent))]);
  assert.deepEqual(objects, ['Pod/db-0']);
  t.diagnostic(`screenshot: ${await screenshot(page, 'ui-7-filtered')}`);
  assert.deepEqual(errors, []);
});

test('past ?maxPods the live view keeps a sample of the pods and says so', { skip }, async (t) => {
  // Deleted pods go at once (no 30 s grace period), so that scaling down is seen at once.
  const server = await serverFor(t, ['--nodes', '1', '--stop-delay', '0s']);
  const k = kubectlAgainst(server);
  await k.ok(['create', 'deployment', 'web', '--image=nginx', '--replicas=5']);
  const api = new Api(server.url);
  for (let i = 0; i < 100; i++) {
    const pods = await api.list('/api/v1/namespaces/default/pods');
    if (pods.items.length === 5) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const { page, errors } = await openBrowser(t);
  await page.goto(`${server.url}/sim/ui/?maxPods=3`);
  await page.waitForSelector('[data-watches="live"]');
  await waitForCount(page, '.lane[data-node="node-1"] .pod', 3);
  assert.match((await page.textContent('[data-banner="sample"]')) ?? '', /Showing a sample: 3 of 5 pods/);
  assert.match((await page.textContent('.totals')) ?? '', /5 pods/, 'the header counts them all');
  // Scaled down to 2: the sample follows, and the banner goes once every pod is shown.
  await k.ok(['scale', 'deployment', 'web', '--replicas=2']);
  await page.locator('[data-banner="sample"]').waitFor({ state: 'detached' });
  // Whichever pods the sample held, the two that are left are shown (the thinned sample is listed again).
  await waitForCount(page, '.lane[data-node="node-1"] .pod:not(.leaving)', 2);
  assert.deepEqual(errors, []);
});

test('past ?maxEvents the events feed keeps the newest: an event that comes in once the kept ones are many still shows', {
  skip,
}, async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  const api = new Api(server.url);
  const event = (n: number, reason: string) => ({
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `probe.${n}`, namespace: 'default' },
    involvedObject: { kind: 'ConfigMap', name: 'probe', namespace: 'default' },
    reason,
    message: `event ${n}`,
    type: 'Normal',
    count: 1,
    firstTimestamp: `2025-01-01T00:00:0${n}Z`,
    lastTimestamp: `2025-01-01T00:00:0${n}Z`,
  });
  for (let n = 1; n <= 5; n++) await api.create('/api/v1/namespaces/default/events', event(n, `Old${n}`));
  const { page, errors } = await openBrowser(t);
  await page.goto(`${server.url}/sim/ui/?maxEvents=3`);
  await page.waitForSelector('[data-watches="live"]');
  await waitForCount(page, '.events td.reason', 3);
  // A sample of three was listed; the feed is for what happens next, so a new event joins and an old one goes.
  await api.create('/api/v1/namespaces/default/events', event(6, 'Newest'));
  await page.waitForSelector('.events td.reason:text("Newest")');
  await waitForCount(page, '.events td.reason', 3);
  assert.equal(await page.textContent('.events tbody tr:first-child td.reason'), 'Newest', 'newest first');
  assert.deepEqual(errors, []);
});
