import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { kubectl, skipWithoutKubectl } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';
import { runSim } from './helpers/sim.js';

/** `sim clock`, `sim node`, `sim kubeconfig --merge` and `sim serve --name` against real servers. */

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-commands-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// biome-ignore lint/suspicious/noExplicitAny: JSON from the server, read field by field in assertions
type Json = Record<string, any>;

async function getJson(url: string): Promise<Json> {
  return (await (await fetch(url)).json()) as Json;
}

const readyOf = (node: Json): string | undefined =>
  (node.status?.conditions as Array<{ type: string; status: string }> | undefined)?.find((c) => c.type === 'Ready')
    ?.status;

/** A KUBECONFIG of its own, so no test reads or writes the real ~/.kube/config. */
function ownKubeconfig(t: TestContext, content?: string): { file: string; env: NodeJS.ProcessEnv } {
  const file = join(tempDir(t), 'config');
  if (content !== undefined) writeFileSync(file, content);
  return { file, env: { KUBECONFIG: file, HOME: tempDir(t) } };
}

const PROD = `apiVersion: v1
kind: Config
clusters: [{name: prod, cluster: {server: 'https://prod.example:6443'}}]
users: [{name: prod, user: {token: secret}}]
contexts: [{name: prod, context: {cluster: prod, user: prod}}]
current-context: prod
`;

test('sim clock and sim clock advance on a virtual clock; a real clock and a bad duration are refused', async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--nodes', '1']);
  const now = await runSim(['clock', '--server', server.url]);
  assert.equal(now.stdout, '2025-01-01T00:00:00Z (virtual clock)\n', now.stderr);
  const advanced = await runSim(['clock', 'advance', '5m', '--server', server.url]);
  assert.equal(advanced.code, 0, advanced.stderr);
  assert.equal(advanced.stdout, '2025-01-01T00:05:00Z (virtual clock, advanced 5m from 2025-01-01T00:00:00Z)\n');
  assert.equal((await getJson(`${server.url}/sim/v1/clock`)).now, '2025-01-01T00:05:00Z');
  const bad = await runSim(['clock', 'advance', 'five', '--server', server.url]);
  assert.equal(bad.code, 1);
  assert.equal(bad.stderr, 'error: "five" is not a duration (e.g. 90s, 5m, 1h30m, 7d)\n');

  const real = await serverFor(t, ['--nodes', '0']);
  const refused = await runSim(['clock', 'advance', '1m', '--server', real.url]);
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /^error: the clock of http:\S+ is real: time passes by itself \(start sim serve with --clock virtual to move it\)\n$/,
  );
  assert.match((await runSim(['clock', '--server', real.url])).stdout, /^\d{4}-\d\d-\d\dT\S+Z \(real clock\)\n$/);
});

test('sim node fail / recover / add', async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--nodes', '2']);
  const failed = await runSim(['node', 'fail', 'node-2', '--server', server.url]);
  assert.equal(failed.code, 0, failed.stderr);
  assert.match(failed.stdout, /^node node-2 failed: its kubelet stopped/);
  await runSim(['clock', 'advance', '1m', '--server', server.url]);
  assert.equal(readyOf(await getJson(`${server.url}/api/v1/nodes/node-2`)), 'Unknown');
  const recovered = await runSim(['node', 'recover', 'node-2', '--server', server.url]);
  assert.match(recovered.stdout, /^node node-2 recovered/);
  await runSim(['clock', 'advance', '10s', '--server', server.url]);
  assert.equal(readyOf(await getJson(`${server.url}/api/v1/nodes/node-2`)), 'True');
  const missing = await runSim(['node', 'fail', 'node-9', '--server', server.url]);
  assert.equal(missing.code, 1);
  assert.equal(missing.stderr, 'error: nodes "node-9" not found\n');

  const added = await runSim(['node', 'add', '--server', server.url]);
  assert.equal(added.code, 0, added.stderr);
  assert.equal(added.stdout, 'node/node-3 added and Ready (cpu=4, memory=16Gi, pods=110)\n');
  const big = await runSim([
    'node',
    'add',
    'big-1',
    '--capacity',
    'cpu=16,memory=64Gi',
    '--label',
    'pool=big',
    '--taint',
    'dedicated=big:NoSchedule',
    '--server',
    server.url,
  ]);
  assert.equal(big.stdout, 'node/big-1 added and Ready (cpu=16, memory=64Gi, pods=110)\n', big.stderr);
  const node = await getJson(`${server.url}/api/v1/nodes/big-1`);
  assert.equal(node.metadata.labels.pool, 'big');
  assert.equal(node.metadata.labels['kubernetes.io/hostname'], 'big-1');
  assert.deepEqual(node.spec.taints, [{ key: 'dedicated', value: 'big', effect: 'NoSchedule' }]);
  assert.match(node.spec.podCIDR, /^10\.244\.\d+\.0\/24$/);
  const again = await runSim(['node', 'add', 'big-1', '--server', server.url]);
  assert.equal(again.code, 1);
  assert.equal(again.stderr, 'error: nodes "big-1" already exists\n');
  const badTaint = await runSim(['node', 'add', '--taint', 'x', '--server', server.url]);
  assert.match(
    badTaint.stderr,
    /^error: --taint "x": expected key\[=value\]:NoSchedule\|PreferNoSchedule\|NoExecute\n$/,
  );
});

test('sim serve --name adds a kube-sim-NAME context and switches to it; sim clock then finds the server by itself', async (t) => {
  const own = ownKubeconfig(t, PROD);
  const server = await serverFor(t, ['--clock', 'virtual', '--nodes', '0', '--name', 'lab'], own.env);
  assert.match(
    server.stdout(),
    new RegExp(
      `context kube-sim-lab \\(${server.url}\\) written to ${own.file}, now the current context \\(it was "prod": kubectl config use-context prod goes back\\)`,
    ),
  );
  const config = parseYaml(readFileSync(own.file, 'utf8')) as Json;
  assert.equal(config['current-context'], 'kube-sim-lab');
  assert.deepEqual(
    config.contexts.map((c: { name: string }) => c.name),
    ['prod', 'kube-sim-lab'],
  );
  assert.equal(config.users[0].user.token, 'secret', 'the other entries are kept as they were');
  assert.equal(statSync(own.file).mode & 0o777, 0o600);
  const found = await runSim(['clock'], { env: own.env });
  assert.equal(found.stdout, '2025-01-01T00:00:00Z (virtual clock)\n', found.stderr);
  if (!skipWithoutKubectl(t)) {
    const r = await kubectl(undefined, ['get', 'ns', 'default', '-o', 'name'], { env: { KUBECONFIG: own.file } });
    assert.equal(r.stdout.trim(), 'namespace/default', r.stderr);
  }
});

test('the control commands refuse a current context that kube-sim did not write; --context picks one', async (t) => {
  const own = ownKubeconfig(t, PROD);
  const refused = await runSim(['node', 'fail', 'node-1'], { env: own.env });
  assert.equal(refused.code, 1);
  assert.equal(
    refused.stderr,
    `error: the current context "prod" (${own.file}) is not a kube-sim one: give --server URL, --context NAME or --kubeconfig FILE (sim serve --name NAME makes a context kube-sim-NAME)\n`,
  );
  const server = await serverFor(t, ['--clock', 'virtual', '--nodes', '0']);
  const merged = await runSim(['kubeconfig', '--merge', '--name', 'side', '--no-switch', '--server', server.url], {
    env: own.env,
  });
  assert.equal(
    merged.stdout,
    `context kube-sim-side (${server.url}) written to ${own.file}; the current context stays "prod": kubectl --context kube-sim-side get ns\n`,
    merged.stderr,
  );
  assert.equal((parseYaml(readFileSync(own.file, 'utf8')) as Record<string, unknown>)['current-context'], 'prod');
  assert.equal((await runSim(['clock', '--context', 'kube-sim-side'], { env: own.env })).code, 0);
  // Merging again replaces the entry instead of adding a second one; without --no-switch it becomes current.
  await runSim(['kubeconfig', '--merge', '--name', 'side', '--server', server.url], { env: own.env });
  const config = parseYaml(readFileSync(own.file, 'utf8')) as Json;
  assert.equal(config['current-context'], 'kube-sim-side');
  assert.equal(config.clusters.filter((c: { name: string }) => c.name === 'kube-sim-side').length, 1);
  assert.equal((await runSim(['clock'], { env: own.env })).code, 0);
});

test("with no kubeconfig at all, the control commands go to sim serve's default address", async (t) => {
  const own = ownKubeconfig(t);
  const busy = await new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port: 8080 }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
  if (busy) {
    t.skip('something listens on 127.0.0.1:8080 here');
    return;
  }
  const r = await runSim(['clock'], { env: own.env });
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr,
    `error: cannot reach http://127.0.0.1:8080 (sim serve's default address (no kubeconfig at ${own.file})): connection refused: is sim serve running?\n`,
  );
});

test('sim serve --nodes past the default CIDR widens it, saying so once; a --cluster-cidr too small is refused in one line', async (t) => {
  const server = await serverFor(t, ['--nodes', '300', '--log-level', 'info']);
  const log = server.stderr();
  assert.match(
    log,
    /^INFO {2}--nodes 300: the default cluster CIDR 10\.244\.0\.0\/16 holds 256 nodes \(a \/24 each\); using 10\.244\.0\.0\/15 \(512 \/24s\) instead$/m,
  );
  assert.doesNotMatch(log, /^WARN/m);
  const nodes = (await getJson(`${server.url}/api/v1/nodes`)).items as Json[];
  assert.equal(nodes.length, 300);
  assert.equal(new Set(nodes.map((n) => n.spec.podCIDR)).size, 300);
  assert.ok(nodes.some((n) => String(n.spec.podCIDR).startsWith('10.245.')));

  const small = await runSim(['serve', '--port', '0', '--nodes', '3', '--cluster-cidr', '10.1.0.0/23']);
  assert.equal(small.code, 1);
  assert.equal(
    small.stderr,
    'ERROR cannot start: --cluster-cidr 10.1.0.0/23 has 2 /24s for 3 nodes: give a /22 or larger (e.g. --cluster-cidr 10.0.0.0/22)\n',
  );
});
