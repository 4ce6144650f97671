import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiError } from '../src/api/errors.js';
import type { KubeObject } from '../src/api/types.js';
import { Resources } from '../src/client/client.js';
import { connectionFetch, HttpClient } from '../src/client/http.js';
import { readKubeconfig } from '../src/client/kubeconfig.js';
import { etcdMissing, startEtcdCluster, type EtcdCluster } from './helpers/etcd.js';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

/**
 * What the API servers over one etcd share, as kube-apiservers do: ClusterIPs and NodePorts are allocated
 * cluster-wide in kube-apiserver's bitmaps (/registry/ranges/serviceips, /registry/ranges/servicenodeports), and
 * every server trusts one CA, one ServiceAccount signing key and one admin token. 64 NodePort Services of 3 ports
 * each, created at once through both servers, would share a node port (of 2,768) nearly always without them.
 */
const missing = etcdMissing() ?? kubectlMissing();
const NS = 'default';

type Svc = KubeObject & {
  spec: { clusterIP?: string; ports: Array<{ port: number; nodePort?: number }>; healthCheckNodePort?: number };
};

describe('sim serve --etcd-servers: what two API servers share', { skip: missing }, () => {
  let etcd: EtcdCluster;
  let dir: string;
  const servers: SimServer[] = [];
  const clients: HttpClient[] = [];
  const kubeconfigs = [0, 1].map((i) => (): string => join(dir, `kc-${i}`));
  const logs = (): string =>
    `${servers.map((s, i) => `\n--- server ${i} ---\n${s.stderr()}`).join('')}\n--- etcd ---\n${etcd?.log().slice(-2000)}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-etcd-shared-'));
    etcd = await startEtcdCluster(1);
    for (const i of [0, 1]) {
      servers.push(
        await startServer([
          '--etcd-servers',
          etcd.endpoints,
          '--etcd-compaction-interval',
          '0',
          '--components',
          'apiserver',
          '--tls',
          '--auth',
          '--kubeconfig',
          kubeconfigs[i]!(),
        ]),
      );
      const connection = readKubeconfig(kubeconfigs[i]!());
      clients.push(new HttpClient(connection.server, undefined, await connectionFetch(connection)));
    }
  });

  after(async () => {
    for (const s of servers) await s.stop();
    await etcd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('allocates ClusterIPs and NodePorts cluster-wide: concurrent creates on both servers never share one', async () => {
    const service = (name: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name },
      spec: {
        type: 'NodePort',
        selector: { app: name },
        ports: [
          { name: 'http', port: 80 },
          { name: 'https', port: 443 },
          { name: 'metrics', port: 9090 },
        ],
      },
    });
    const created = (await Promise.all(
      Array.from({ length: 64 }, (_, i) => clients[i % 2]!.create(Resources.services, NS, service(`svc-${i}`))),
    )) as Svc[];
    const ips = created.map((s) => s.spec.clusterIP);
    assert.equal(new Set(ips).size, ips.length, `duplicate ClusterIPs: ${ips.join(' ')}${logs()}`);
    const ports = created.flatMap((s) => s.spec.ports.map((p) => p.nodePort));
    assert.equal(new Set(ports).size, ports.length, `duplicate NodePorts: ${ports.join(' ')}${logs()}`);
    // What each server answered is what both serve.
    for (const svc of created) {
      const other = (await clients[1]!.get(Resources.services, NS, svc.metadata.name!)) as Svc;
      assert.equal(other.spec.clusterIP, svc.spec.clusterIP);
    }
    // kube-apiserver's keys hold the bitmaps.
    for (const key of ['/registry/ranges/serviceips', '/registry/ranges/servicenodeports']) {
      const raw = JSON.parse(etcd.ctl(['get', key, '--print-value-only'])) as { kind: string; range: string };
      assert.equal(raw.kind, 'RangeAllocation');
    }
    const nodePortRange = JSON.parse(etcd.ctl(['get', '/registry/ranges/servicenodeports', '--print-value-only'])) as {
      range: string;
      data: string;
    };
    assert.equal(nodePortRange.range, '30000-32767');
    const bitmap = Buffer.from(nodePortRange.data, 'base64');
    const set = (port: number): boolean => {
      const offset = port - 30000;
      const byte = bitmap.length - 1 - (offset >> 3);
      return byte >= 0 && (bitmap[byte]! & (1 << (offset & 7))) !== 0;
    };
    for (const port of ports) assert.ok(set(port!), `node port ${port} is not marked in the bitmap`);
  });

  it('refuses a node port another server holds with 422, and frees it when its Service goes', async () => {
    // A port none of the Services above drew.
    const held = new Set(
      ((await clients[0]!.list(Resources.services, NS)).items as Svc[]).flatMap((s) =>
        s.spec.ports.map((p) => p.nodePort),
      ),
    );
    let pinned = 31555;
    while (held.has(pinned)) pinned++;
    const withPort = (name: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name },
      spec: { type: 'NodePort', ports: [{ port: 80, nodePort: pinned }] },
    });
    const results = await Promise.allSettled([
      clients[0]!.create(Resources.services, NS, withPort('pinned-a')),
      clients[1]!.create(Resources.services, NS, withPort('pinned-b')),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    assert.equal(won.length, 1, `exactly one of two concurrent creates of nodePort ${pinned} succeeds${logs()}`);
    const error = lost[0]!.reason as ApiError;
    assert.ok(error instanceof ApiError);
    assert.equal(error.code, 422);
    assert.match(
      error.message,
      new RegExp(`spec\\.ports\\[0\\]\\.nodePort: Invalid value: ${pinned}: provided port is already allocated`),
    );
    const winner = results[0]!.status === 'fulfilled' ? 'pinned-a' : 'pinned-b';
    await clients[0]!.delete(Resources.services, NS, winner);
    const again = (await clients[1]!.create(Resources.services, NS, withPort('pinned-c'))) as Svc;
    assert.equal(again.spec.ports[0]!.nodePort, pinned);
  });

  it('trusts one CA and one admin token: either kubeconfig works against either server', async () => {
    for (const [file, server] of [
      [kubeconfigs[0]!(), servers[1]!],
      [kubeconfigs[1]!(), servers[0]!],
    ] as const) {
      const r = await kubectl(server.url, ['get', 'namespaces', 'kube-system', '-o', 'name'], {
        env: { KUBECONFIG: file },
      });
      assert.equal(r.code, 0, `${r.stderr}${logs()}`);
      assert.equal(r.stdout.trim(), 'namespace/kube-system');
    }
    assert.equal(readKubeconfig(kubeconfigs[0]!()).caCert, readKubeconfig(kubeconfigs[1]!()).caCert);
  });

  it('accepts on one server a ServiceAccount token the other issued', async () => {
    const env = { KUBECONFIG: kubeconfigs[0]!() };
    const made = await kubectl(servers[0]!.url, ['create', 'serviceaccount', 'robot'], { env });
    assert.equal(made.code, 0, made.stderr);
    const token = await kubectl(servers[0]!.url, ['create', 'token', 'robot'], { env });
    assert.equal(token.code, 0, token.stderr);
    const whoami = await kubectl(
      servers[1]!.url,
      ['auth', 'whoami', '--token', token.stdout.trim(), '-o', 'jsonpath={.status.userInfo.username}'],
      { env: { KUBECONFIG: kubeconfigs[1]!() } },
    );
    assert.equal(whoami.code, 0, `${whoami.stderr}${logs()}`);
    assert.equal(whoami.stdout, 'system:serviceaccount:default:robot');
  });
});
