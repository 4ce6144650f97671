import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { etcdMissing, startEtcdCluster, type EtcdCluster } from './helpers/etcd.js';
import { Api, type Obj } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { runSim } from './helpers/sim.js';
import { startComponents } from './helpers/components.js';

/**
 * `sim serve --components` over etcd: two processes running the API server and the controllers (one leads the
 * kube-controller-manager Lease, with kube-controller-manager's timings), and one running only the scheduler and
 * the kubelets. Killing the leading controller process lets a Deployment rollout finish under the new leader.
 */
const missing = etcdMissing() ?? kubectlMissing();
const LEASES = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases';

describe('sim serve --components over etcd: leader election and fail-over', { skip: missing }, () => {
  let etcd: EtcdCluster;
  const servers: SimServer[] = [];
  let nodes: { stop(): Promise<void>; stderr(): string };
  const logs = (): string =>
    `${servers.map((s, i) => `\n--- apiserver,controllers ${i} ---\n${s.stderr()}`).join('')}\n--- scheduler,kubelets ---\n${nodes?.stderr()}`;

  before(async () => {
    etcd = await startEtcdCluster(1);
    const flags = ['--etcd-servers', etcd.endpoints, '--etcd-compaction-interval', '0', '--log-level', 'info'];
    for (let i = 0; i < 2; i++)
      servers.push(await startServer([...flags, '--nodes', '0', '--components', 'apiserver,controllers']));
    nodes = await startComponents([...flags, '--nodes', '2', '--components', 'scheduler,kubelets']);
  });

  after(async () => {
    for (const s of servers) await s.stop();
    await nodes?.stop();
    await etcd?.stop();
  });

  const lease = async (api: Api, name: string): Promise<Obj & { spec: Record<string, unknown> }> =>
    (await api.get(`${LEASES}/${name}`)) as Obj & { spec: Record<string, unknown> };

  /** The server whose log says it leads kube-controller-manager as `identity`. */
  const leaderOf = (identity: string): SimServer | undefined =>
    servers.find((s) => s.stderr().includes(`leader election: ${identity} leads kube-controller-manager`));

  it('one process leads each Lease, with kube-controller-manager timings, and a rollout survives the leader’s kill -9', async () => {
    const api = new Api(servers[1]!.url);
    let holder = '';
    for (let i = 0; ; i++) {
      const l = await api.request<Obj & { spec: Record<string, unknown> }>(`${LEASES}/kube-controller-manager`);
      holder = l.status === 200 ? String(l.body.spec.holderIdentity ?? '') : '';
      if (holder && leaderOf(holder)) break;
      if (i > 100) assert.fail(`no leader for kube-controller-manager: ${JSON.stringify(l.body)}${logs()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const first = await lease(api, 'kube-controller-manager');
    assert.equal(first.spec.leaseDurationSeconds, 15);
    assert.match(String(first.spec.renewTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.equal(servers.filter((s) => s.stderr().includes('leads kube-controller-manager')).length, 1);
    const scheduler = await lease(api, 'kube-scheduler');
    assert.ok(scheduler.spec.holderIdentity, 'the scheduler process leads kube-scheduler');

    const leader = leaderOf(holder)!;
    const survivor = servers.find((s) => s !== leader)!;
    const k = kubectlAgainst(survivor, logs);
    await k.ok(['create', 'deployment', 'web', '--image=nginx', '--replicas=3']);
    await k.ok(['rollout', 'status', 'deployment/web', '--timeout=60s'], undefined, 70_000);

    await leader.kill();
    await k.ok(['set', 'image', 'deployment/web', 'nginx=nginx:1.27']);
    // The new leader takes the Lease once it has stood still for 15 s, and finishes the rollout.
    await k.ok(['rollout', 'status', 'deployment/web', '--timeout=90s'], undefined, 100_000);
    const taken = await lease(new Api(survivor.url), 'kube-controller-manager');
    assert.notEqual(taken.spec.holderIdentity, holder);
    assert.ok(leaderOf(String(taken.spec.holderIdentity)) === survivor, logs());
    assert.equal(taken.spec.leaseTransitions, Number(first.spec.leaseTransitions ?? 0) + 1);
    // The old pods go once their containers have stopped (the kubelets' grace period).
    for (let i = 0; ; i++) {
      const images = await k.ok([
        'get',
        'pods',
        '-l',
        'app=web',
        '-o',
        'jsonpath={.items[*].spec.containers[0].image}',
      ]);
      if (images.split(' ').sort().join(' ') === 'nginx:1.27 nginx:1.27 nginx:1.27') break;
      if (i > 120) assert.fail(`pods after the rollout: ${images}${logs()}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  });
});

describe('sim serve --components', () => {
  it('refuses an unknown component, and none but apiserver without etcd, in one line', async () => {
    const unknown = await runSim(['serve', '--port', '0', '--components', 'apiserver,kubelet']);
    assert.equal(unknown.code, 1);
    assert.match(
      unknown.stderr,
      /--components: unknown component "kubelet" \(known: apiserver, controllers, scheduler, kubelets\)/,
    );
    const alone = await runSim(['serve', '--port', '0', '--components', 'controllers']);
    assert.equal(alone.code, 1);
    assert.match(alone.stderr, /--components without apiserver needs --kubeconfig FILE .* or --etcd-servers/);
  });
});
