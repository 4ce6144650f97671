import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { kubectl, skipWithoutKubectl, spawnKubectl } from './helpers/kubectl.js';
import { startSeedScript } from './helpers/seed-script.js';
import { ROOT, serverFor } from './helpers/server.js';

/**
 * The first seed article's walkthrough ("Kubernetes Patterns", ch. 27), verbatim against sim serve with the
 * real kubectl: apply the manifests in the article's order, change the ConfigMap, watch the webapp pod
 * being replaced, and read the new value from the new container's environment. Once with the built-in
 * config-watcher, once with the article's own shell script (curl + jq) running on the host.
 */
const SEED = join(ROOT, 'fixtures/seed');
const UPDATED = 'Hello, Updated World!';

async function k(_t: TestContext, url: string, args: string[]): Promise<string> {
  const r = await kubectl(url, args, { timeoutMs: 30_000 });
  assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

async function webappPod(t: TestContext, url: string): Promise<string> {
  const out = await k(t, url, [
    'get',
    'pods',
    '-l',
    'app=webapp',
    '-o',
    'jsonpath={range .items[?(@.metadata.deletionTimestamp)]}{""}{end}{range .items[*]}{.metadata.name}{"\\n"}{end}',
  ]);
  const names = out.split('\n').filter(Boolean);
  assert.equal(names.length, 1, `one webapp pod: ${out}`);
  return names[0]!;
}

/** Changes the ConfigMap and follows `kubectl get pods -l app=webapp -w` until the old pod is replaced. */
async function patchAndWatchReplacement(t: TestContext, url: string, repatch?: () => Promise<void>): Promise<void> {
  const old = await webappPod(t, url);
  const watch = spawnKubectl(url, ['get', 'pods', '-l', 'app=webapp', '-w']);
  t.after(() => watch.stop());
  await watch.until((out) => new RegExp(`${old}\\s+1/1\\s+Running`).test(out), 'the running webapp pod');
  await k(t, url, ['patch', 'configmap', 'webapp-config', '--patch', JSON.stringify({ data: { message: UPDATED } })]);
  if (repatch) await repatch();
  await watch.until((out) => new RegExp(`${old}\\s+\\d/1\\s+Terminating`).test(out), 'the old pod Terminating', 15_000);
  await watch.until(
    (out) => out.split('\n').some((l) => !l.startsWith(old) && /^webapp-\S+\s+1\/1\s+Running/.test(l)),
    'a new pod Running',
    15_000,
  );
  const fresh = watch.lines.find((l) => l.startsWith('webapp-') && !l.startsWith(old))!.split(/\s+/)[0]!;
  const states = watch.lines.filter((l) => l.startsWith(fresh)).map((l) => l.split(/\s+/)[2]);
  const order = ['Pending', 'ContainerCreating', 'Running'].map((s) => states.indexOf(s));
  assert.ok(
    order.every((i) => i >= 0) && order[0]! < order[1]! && order[1]! < order[2]!,
    `new pod went Pending → ContainerCreating → Running: ${states.join(' → ')}`,
  );
  await k(t, url, ['wait', '--for=delete', `pod/${old}`, '--timeout=60s']);
  assert.equal((await k(t, url, ['exec', 'deploy/webapp', '--', 'printenv', 'MESSAGE'])).trim(), UPDATED);
}

test('seed walkthrough with the built-in config-watcher', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server = await serverFor(t, ['--stop-delay', '1s']);
  for (const file of ['rbac.yaml', 'controller-deployment.yaml', 'webapp.yaml'])
    await k(t, server.url, ['apply', '-f', join(SEED, file)]);
  await k(t, server.url, [
    'wait',
    '--for=condition=Available',
    'deploy/webapp',
    'deploy/config-watcher-controller',
    '--timeout=30s',
  ]);
  const pods = await k(t, server.url, ['get', 'pods']);
  assert.match(pods, /^config-watcher-controller-\S+\s+2\/2\s+Running\s+0\s/m);
  assert.match(pods, /^webapp-\S+\s+1\/1\s+Running\s+0\s/m);
  assert.equal(
    (await k(t, server.url, ['exec', 'deploy/webapp', '--', 'printenv', 'MESSAGE'])).trim(),
    'Welcome to Kubernetes Patterns !',
  );
  await patchAndWatchReplacement(t, server.url);
  const events = await k(t, server.url, [
    'get',
    'events',
    '--field-selector',
    'reason=PodDeleted',
    '-o',
    'jsonpath={.items[*].message}',
  ]);
  assert.match(events, /Deleted pod webapp-\S+ matching app=webapp/);
});

test("seed walkthrough with the article's shell script on the host (built-in config-watcher off)", async (t) => {
  if (skipWithoutKubectl(t)) return;
  const missing = ['curl', 'jq', 'bash'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
  if (missing.length > 0) {
    t.skip(`the article's script needs ${missing.join(', ')}, not installed here`);
    return;
  }
  const server = await serverFor(t, ['--controllers', '*,-configwatcher', '--stop-delay', '1s']);
  await k(t, server.url, ['apply', '-f', join(SEED, 'webapp.yaml')]);
  await k(t, server.url, ['wait', '--for=condition=Available', 'deploy/webapp', '--timeout=30s']);
  const script = startSeedScript(t, server.url);
  const nudge = (): Promise<void> =>
    script.nudgeUntilItActs(
      (label) => k(t, server.url, ['label', 'configmap', 'webapp-config', label, '--overwrite']),
      10,
    );
  await patchAndWatchReplacement(t, server.url, nudge);
  assert.match(script.output(), /ConfigMap changed, selector: app=webapp/);
  assert.match(script.output(), /Deleting pod: webapp-/);
});
