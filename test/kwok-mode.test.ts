import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readKubeconfig } from '../src/client/kubeconfig.js';
import { startComponents, type ComponentsProcess } from './helpers/components.js';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { runSim } from './helpers/sim.js';

/**
 * The KWOK-like mode: `sim serve --components controllers,scheduler,kubelets --kubeconfig FILE` attaches the
 * components to an API server in another process over HTTP(S), here a kube-sim started with `--components
 * apiserver`. Its simulated nodes register, renew their Leases and run the pods bound to them; Nodes that are not
 * simulated (no kwok.x-k8s.io/node=fake annotation) are left alone. Everything is checked with kubectl.
 */
const missing = kubectlMissing();

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** kubectl with the kubeconfig the API server wrote (its server, CA and token). */
function kubectlWith(file: string, logs: () => string) {
  return async (args: string[], input?: string): Promise<string> => {
    const r = await kubectl(undefined, args, {
      env: { KUBECONFIG: file },
      timeoutMs: 60_000,
      ...(input === undefined ? {} : { input }),
    });
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.stderr}${logs()}`);
    return r.stdout;
  };
}

/** Waits until `check` returns true (it is given the last output to show when it never does). */
async function until(what: string, check: () => Promise<boolean>, logs: () => string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms / 1000} s${logs()}`);
    await sleep(250);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe('sim serve --components … --kubeconfig: components attached to another API server', { skip: missing }, () => {
  let dir: string;
  let apiserver: SimServer;
  let components: ComponentsProcess;
  let port: number;
  const kubeconfig = (): string => join(dir, 'kubeconfig');
  const logs = (): string => `\n--- apiserver ---\n${apiserver?.stderr()}\n--- components ---\n${components?.stderr()}`;
  const apiserverArgs = (): string[] => [
    '--components',
    'apiserver',
    '--port',
    String(port),
    '--data',
    join(dir, 'data'),
    '--kubeconfig',
    kubeconfig(),
  ];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-kwok-'));
    port = await freePort();
    apiserver = await startServer(apiserverArgs());
    components = await startComponents([
      '--components',
      'controllers,scheduler,kubelets',
      '--nodes',
      '3',
      '--kubeconfig',
      kubeconfig(),
    ]);
  });

  after(async () => {
    await components?.stop();
    await apiserver?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers its nodes Ready with Leases, and a Deployment’s pods are scheduled onto them and run', async () => {
    const k = kubectlWith(kubeconfig(), logs);
    assert.match(
      components.stdout(),
      /kube-sim components running: controllers, scheduler, kubelets \(attached to http:\/\/127\.0\.0\.1:\d+, from the kubeconfig .*kubeconfig\)/,
    );
    await until(
      'three Ready nodes',
      async () => {
        const out = await k(['get', 'nodes', '--no-headers']);
        return (out.match(/^node-[123]\s+Ready\s/gm) ?? []).length === 3;
      },
      logs,
    );
    const annotations = JSON.parse(
      await k(['get', 'node', 'node-1', '-o', 'jsonpath={.metadata.annotations}']),
    ) as Record<string, string>;
    assert.equal(annotations['kwok.x-k8s.io/node'], 'fake');
    const lease = JSON.parse(await k(['get', 'lease', '-n', 'kube-node-lease', 'node-2', '-o', 'json'])) as {
      spec: { holderIdentity: string; leaseDurationSeconds: number };
    };
    assert.equal(lease.spec.holderIdentity, 'node-2');
    assert.equal(lease.spec.leaseDurationSeconds, 40);

    await k(['create', 'deployment', 'web', '--image=nginx', '--replicas=3']);
    await k(['rollout', 'status', 'deployment/web', '--timeout=60s']);
    const pods = JSON.parse(await k(['get', 'pods', '-l', 'app=web', '-o', 'json'])) as {
      items: Array<{ spec: { nodeName?: string }; status: { phase?: string; podIP?: string; hostIP?: string } }>;
    };
    assert.equal(pods.items.length, 3);
    for (const pod of pods.items) {
      assert.match(pod.spec.nodeName ?? '', /^node-[123]$/);
      assert.equal(pod.status.phase, 'Running');
      assert.match(pod.status.podIP ?? '', /^10\.244\.\d+\.\d+$/);
      assert.ok(pod.status.hostIP);
    }
    // The controller manager and the scheduler of the attached process lead their Leases.
    for (const name of ['kube-controller-manager', 'kube-scheduler'])
      assert.ok(await k(['get', 'lease', '-n', 'kube-system', name, '-o', 'jsonpath={.spec.holderIdentity}']));
  });

  it('leaves a Node alone that is not simulated, and adopts one that carries KWOK’s annotation', async () => {
    const k = kubectlWith(kubeconfig(), logs);
    const node = (name: string, annotations: Record<string, string>): string =>
      JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name, annotations } });
    await k(['create', '-f', '-'], node('real-node', {}));
    await k(['create', '-f', '-'], node('kwok-node-0', { 'kwok.x-k8s.io/node': 'fake' }));
    await until(
      'kwok-node-0 Ready',
      async () => /^kwok-node-0\s+Ready\s/m.test(await k(['get', 'nodes', '--no-headers'])),
      logs,
    );
    // By now the real node would have had its first heartbeat too: it has no Lease and no status.
    const leases = await k(['get', 'leases', '-n', 'kube-node-lease', '-o', 'name']);
    assert.ok(leases.includes('lease.coordination.k8s.io/kwok-node-0'), leases);
    assert.ok(!leases.includes('real-node'), leases);
    assert.match(await k(['get', 'nodes', '--no-headers']), /^real-node\s+Unknown\s/m);
  });

  it('keeps working across a restart of the API server: the informers list and watch again', async () => {
    const k = kubectlWith(kubeconfig(), logs);
    await apiserver.stop();
    await sleep(1500);
    apiserver = await startServer(apiserverArgs());
    await k(['scale', 'deployment/web', '--replicas=5']);
    await k(['rollout', 'status', 'deployment/web', '--timeout=90s']);
    const phases = await k(['get', 'pods', '-l', 'app=web', '-o', 'jsonpath={.items[*].status.phase}']);
    assert.equal(phases, 'Running Running Running Running Running');
  });
});

describe('sim serve --components … --kubeconfig over TLS with token auth', { skip: missing }, () => {
  let dir: string;
  let apiserver: SimServer;
  let components: ComponentsProcess;
  const logs = (): string => `\n--- apiserver ---\n${apiserver?.stderr()}\n--- components ---\n${components?.stderr()}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-kwok-tls-'));
    apiserver = await startServer(['--components', 'apiserver', '--tls', '--auth', '--kubeconfig', join(dir, 'kc')]);
    components = await startComponents([
      '--components',
      'controllers,scheduler,kubelets',
      '--nodes',
      '2',
      '--kubeconfig',
      join(dir, 'kc'),
    ]);
  });

  after(async () => {
    await components?.stop();
    await apiserver?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('attaches with the kubeconfig’s CA and token: pods run, and kube-root-ca.crt is that CA', async () => {
    const file = join(dir, 'kc');
    const k = kubectlWith(file, logs);
    assert.match(apiserver.url, /^https:/);
    await k(['create', 'deployment', 'api', '--image=nginx', '--replicas=2']);
    await k(['rollout', 'status', 'deployment/api', '--timeout=60s']);
    assert.match(await k(['get', 'nodes', '--no-headers']), /^node-1\s+Ready\s[\s\S]*^node-2\s+Ready\s/m);
    const ca = readKubeconfig(file).caCert;
    assert.ok(ca);
    await until(
      'kube-root-ca.crt in default',
      async () =>
        (
          await kubectl(undefined, ['get', 'configmap', 'kube-root-ca.crt', '-o', 'jsonpath={.data.ca\\.crt}'], {
            env: { KUBECONFIG: file },
          })
        ).stdout === ca,
      logs,
    );
  });

  it('says why when the credentials are refused, in one line', async () => {
    const file = join(dir, 'kc');
    const bad = join(dir, 'bad-token');
    writeFileSync(bad, readFileSync(file, 'utf8').replace(/token: .*/, 'token: "not-a-token"'));
    const run = await runSim(['serve', '--components', 'kubelets', '--nodes', '1', '--kubeconfig', bad]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /cannot start: https:\/\/127\.0\.0\.1:\d+ answered 401 Unauthorized/);
  });
});

describe('sim serve --components without apiserver: --kubeconfig is read, and API server flags are refused', () => {
  it('refuses flags of the API server and --etcd-servers beside --kubeconfig, each in one line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-sim-kwok-flags-'));
    try {
      const file = join(dir, 'kc');
      writeFileSync(
        file,
        'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
      );
      const tls = await runSim(['serve', '--components', 'kubelets', '--kubeconfig', file, '--tls']);
      assert.equal(tls.code, 1);
      assert.match(
        tls.stderr,
        /cannot start: --tls belongs to the API server; with --components kubelets --kubeconfig this process attaches to one/,
      );
      const both = await runSim([
        'serve',
        '--components',
        'kubelets',
        '--kubeconfig',
        file,
        '--etcd-servers',
        'http://127.0.0.1:2379',
      ]);
      assert.equal(both.code, 1);
      assert.match(both.stderr, /--kubeconfig FILE \(attach to an API server\) or --etcd-servers, not both/);
      const absent = await runSim(['serve', '--components', 'kubelets', '--kubeconfig', join(dir, 'none')]);
      assert.equal(absent.code, 1);
      assert.match(absent.stderr, /cannot start: .*none/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
