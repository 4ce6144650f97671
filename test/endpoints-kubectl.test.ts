import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Api, assertStatus } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// The Services a user makes, seen through the real kubectl: Endpoints and EndpointSlices following readiness and a
// rollout, headless Services with StatefulSet hostnames, node ports and load balancers, ReplicationControllers,
// the API server's own `kubernetes` endpoints, and `kubectl apply --prune` (whose default list names v1
// ReplicationController).

type Obj = Record<string, unknown>;

const APP = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {kube-sim.dev/ready-delay: 2s}
    spec:
      terminationGracePeriodSeconds: 4
      containers:
      - {name: web, image: nginx:1.27, ports: [{name: http, containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {tier: front}}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`;

async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

const ips = (list: unknown): string[] => (Array.isArray(list) ? (list as Obj[]) : []).map((a) => String(a.ip)).sort();

describe('Endpoints and EndpointSlices with kubectl', { skip: kubectlMissing() }, () => {
  let server: SimServer;
  let api: Api;
  let k: ReturnType<typeof kubectlAgainst>;
  before(async () => {
    server = await startServer(['--nodes', '2']);
    api = new Api(server.url);
    k = kubectlAgainst(server);
  });
  after(async () => {
    await server.stop();
  });

  const endpoints = async (name: string): Promise<Obj> =>
    JSON.parse(await k.ok(['get', 'endpoints', name, '-o', 'json'])) as Obj;
  const slices = async (service: string): Promise<Obj[]> =>
    (
      JSON.parse(
        await k.ok(['get', 'endpointslices', '-l', `kubernetes.io/service-name=${service}`, '-o', 'json']),
      ) as { items: Obj[] }
    ).items;
  const podIPs = async (selector: string): Promise<string[]> =>
    (JSON.parse(await k.ok(['get', 'pods', '-l', selector, '-o', 'json'])) as { items: Obj[] }).items
      .filter((p) => !(p.metadata as Obj).deletionTimestamp)
      .map((p) => String((p.status as Obj).podIP ?? ''))
      .filter((ip) => ip !== '')
      .sort();
  const sliceEndpoints = async (service: string): Promise<Obj[]> =>
    (await slices(service)).flatMap((s) => (Array.isArray(s.endpoints) ? (s.endpoints as Obj[]) : []));

  it('lists pods not ready, then ready, in the Endpoints and the EndpointSlice', async () => {
    await k.ok(['apply', '-f', '-'], APP);
    // Running but inside their ready delay: notReadyAddresses, and slice endpoints neither ready nor serving.
    const notReady = await eventually('two not-ready addresses', async () => {
      const ep = await endpoints('web');
      const subset = ((ep.subsets as Obj[] | undefined) ?? [])[0];
      return subset && ips(subset.notReadyAddresses).length === 2 && !subset.addresses ? subset : undefined;
    });
    assert.deepEqual(notReady.ports, [{ name: 'http', port: 8080, protocol: 'TCP' }]);
    const conditions = (await sliceEndpoints('web')).map((e) => e.conditions);
    assert.ok(
      conditions.every((c) => (c as Obj).ready === false && (c as Obj).serving === false),
      JSON.stringify(conditions),
    );
    // Ready after 2 s: both under addresses, at the pods' IPs, and ready in the slice.
    const ready = await eventually('two ready addresses', async () => {
      const subset = (((await endpoints('web')).subsets as Obj[] | undefined) ?? [])[0];
      return subset && ips(subset.addresses).length === 2 && !subset.notReadyAddresses ? subset : undefined;
    });
    assert.deepEqual(ips(ready.addresses), await podIPs('app=web'));
    const address = (ready.addresses as Obj[])[0]!;
    assert.equal((address.targetRef as Obj).kind, 'Pod');
    assert.match(String(address.nodeName), /^node-\d$/);
    await eventually('two ready slice endpoints', async () => {
      const all = await sliceEndpoints('web');
      return all.length === 2 && all.every((e) => (e.conditions as Obj).ready === true) ? all : undefined;
    });
    const [slice] = await slices('web');
    const labels = (slice!.metadata as Obj).labels as Record<string, string>;
    assert.equal(labels['endpointslice.kubernetes.io/managed-by'], 'endpointslice-controller.k8s.io');
    assert.equal(labels.tier, 'front');
    assert.equal(((slice!.metadata as Obj).ownerReferences as Obj[])[0]!.kind, 'Service');
    assert.deepEqual(slice!.ports, [{ name: 'http', port: 8080, protocol: 'TCP' }]);

    const table = await k.ok(['get', 'endpoints', 'web']);
    assert.match(table, /^NAME\s+ENDPOINTS\s+AGE\n/);
    for (const ip of await podIPs('app=web')) assert.ok(table.includes(`${ip}:8080`), table);
    const sliceTable = await k.ok(['get', 'endpointslices', '-l', 'kubernetes.io/service-name=web']);
    assert.match(sliceTable, /^NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE\n\S+\s+IPv4\s+8080\s+\S+/);
    const described = await k.ok(['describe', 'service', 'web']);
    const line = described.split('\n').find((l) => l.startsWith('Endpoints:')) ?? '';
    for (const ip of await podIPs('app=web')) assert.ok(line.includes(`${ip}:8080`), described);
  });

  it('follows a rollout: the old pods terminate in the slice, then leave; the new ones become the endpoints', async () => {
    const before = await podIPs('app=web');
    const oldNames = (
      JSON.parse(await k.ok(['get', 'pods', '-l', 'app=web', '-o', 'json'])) as { items: Obj[] }
    ).items.map((p) => String((p.metadata as Obj).name));
    await k.ok(['set', 'image', 'deployment/web', 'web=nginx:1.28']);
    // An old pod being deleted stays in the slice as terminating (and out of the Endpoints' ready addresses).
    const terminating = await eventually('a terminating endpoint', async () => {
      const found = (await sliceEndpoints('web')).find((e) => (e.conditions as Obj).terminating === true);
      return found;
    });
    assert.equal((terminating.conditions as Obj).ready, false);
    const oldIp = (terminating.addresses as string[])[0]!;
    assert.ok(before.includes(oldIp));
    const ep = await endpoints('web');
    assert.ok(
      !ips(((ep.subsets as Obj[] | undefined) ?? []).flatMap((s) => (s.addresses as Obj[]) ?? [])).includes(oldIp),
    );
    await k.ok(['rollout', 'status', 'deployment/web', '--timeout=60s'], undefined, 70_000);
    const after = await eventually(
      'the new pods as the only endpoints',
      async () => {
        const now = await podIPs('app=web');
        const subset = (((await endpoints('web')).subsets as Obj[] | undefined) ?? [])[0];
        const inSlices = (await sliceEndpoints('web')).map((e) => (e.addresses as string[])[0]!).sort();
        return now.length === 2 &&
          subset &&
          JSON.stringify(ips(subset.addresses)) === JSON.stringify(now) &&
          !subset.notReadyAddresses &&
          JSON.stringify(inSlices) === JSON.stringify(now)
          ? now
          : undefined;
      },
      60_000,
    );
    assert.equal(after.length, 2);
    // The endpoints are the new ReplicaSet's pods, none of the old ones.
    const names = (((await endpoints('web')).subsets as Obj[])[0]!.addresses as Obj[]).map((a) =>
      String((a.targetRef as Obj).name),
    );
    assert.equal(names.filter((n) => oldNames.includes(n)).length, 0, `${names} vs ${oldNames}`);
  });

  it('gives a headless StatefulSet Service the pods’ hostnames', async () => {
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None, selector: {app: db}, ports: [{port: 5432}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
`,
    );
    const subset = await eventually('two hostnames', async () => {
      const s = (((await endpoints('db')).subsets as Obj[] | undefined) ?? [])[0];
      return s && ((s.addresses as Obj[] | undefined) ?? []).length === 2 ? s : undefined;
    });
    assert.deepEqual(((subset.addresses as Obj[]).map((a) => a.hostname) as string[]).sort(), ['db-0', 'db-1']);
    const ep = await endpoints('db');
    assert.equal(((ep.metadata as Obj).labels as Record<string, string>)['service.kubernetes.io/headless'], '');
    const hostnames = (await sliceEndpoints('db')).map((e) => e.hostname).sort();
    assert.deepEqual(hostnames, ['db-0', 'db-1']);
  });

  it('allocates node ports in 30000-32767, refuses one taken, leaves a LoadBalancer pending', async () => {
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: Service
metadata: {name: np}
spec: {type: NodePort, selector: {app: web}, ports: [{port: 80, targetPort: http, nodePort: 30080}]}
---
apiVersion: v1
kind: Service
metadata: {name: lb}
spec: {type: LoadBalancer, selector: {app: web}, ports: [{port: 80, targetPort: http}]}
`,
    );
    const lb = JSON.parse(await k.ok(['get', 'svc', 'lb', '-o', 'json'])) as Obj;
    const nodePort = Number(((lb.spec as Obj).ports as Obj[])[0]!.nodePort);
    assert.ok(nodePort >= 30000 && nodePort <= 32767, String(nodePort));
    assert.equal((lb.spec as Obj).externalTrafficPolicy, 'Cluster');
    assert.equal((lb.spec as Obj).allocateLoadBalancerNodePorts, true);
    const table = await k.ok(['get', 'svc', 'np', 'lb']);
    assert.match(table, /\nnp\s+NodePort\s+\S+\s+<none>\s+80:30080\/TCP\s+/);
    assert.match(table, new RegExp(`\\nlb\\s+LoadBalancer\\s+\\S+\\s+<pending>\\s+80:${nodePort}/TCP\\s+`));
    const conflict = await k.run(
      ['create', '-f', '-'],
      `apiVersion: v1
kind: Service
metadata: {name: np2}
spec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}
`,
    );
    assert.notEqual(conflict.code, 0);
    assert.match(
      conflict.stderr,
      /The Service "np2" is invalid: spec.ports\[0\].nodePort: Invalid value: 30080: provided port is already allocated/,
    );
    const outside = await api.request('/api/v1/namespaces/default/services', {
      method: 'POST',
      body: { metadata: { name: 'np3' }, spec: { type: 'NodePort', ports: [{ port: 80, nodePort: 80 }] } },
    });
    const status = assertStatus(outside, 422, 'Invalid');
    assert.equal(
      status.details?.causes?.[0]?.message,
      'Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767',
    );
    // Deleting the Service frees its port.
    await k.ok(['delete', 'svc', 'np']);
    await k.ok(
      ['create', '-f', '-'],
      `apiVersion: v1
kind: Service
metadata: {name: np2}
spec: {type: NodePort, ports: [{port: 80, nodePort: 30080}]}
`,
    );
  });

  it('scales a ReplicationController with the replication manager', async () => {
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: app, image: nginx}]}
`,
    );
    const rcReady = async (n: number): Promise<string | undefined> => {
      const table = await k.ok(['get', 'rc', 'legacy']);
      return new RegExp(`\\nlegacy\\s+${n}\\s+${n}\\s+${n}\\s+`).test(table) ? table : undefined;
    };
    const table = await eventually('2 ready replicas', () => rcReady(2));
    assert.match(table, /^NAME\s+DESIRED\s+CURRENT\s+READY\s+AGE\n/);
    await k.ok(['scale', 'rc', 'legacy', '--replicas=4']);
    await eventually('4 ready replicas', () => rcReady(4));
    const pods = (JSON.parse(await k.ok(['get', 'pods', '-l', 'app=legacy', '-o', 'json'])) as { items: Obj[] }).items;
    assert.equal(pods.length, 4);
    const ref = ((pods[0]!.metadata as Obj).ownerReferences as Obj[])[0]!;
    assert.deepEqual(
      [ref.apiVersion, ref.kind, ref.name, ref.controller],
      ['v1', 'ReplicationController', 'legacy', true],
    );
    assert.match(String((pods[0]!.metadata as Obj).name), /^legacy-[a-z0-9]{5}$/);
    await k.ok(['scale', 'rc', 'legacy', '--replicas=1']);
    await eventually('1 replica', () => rcReady(1));
    const wide = await k.ok(['get', 'rc', 'legacy', '-o', 'wide']);
    assert.match(wide, /\nlegacy\s+1\s+1\s+1\s+\S+\s+app\s+nginx\s+app=legacy\n/);
    const events = await k.ok(['get', 'events', '--field-selector', 'involvedObject.kind=ReplicationController']);
    assert.match(events, /SuccessfulCreate\s+replicationcontroller\/legacy\s+Created pod: legacy-/);
  });

  it('keeps the kubernetes Service’s Endpoints and EndpointSlice as the API server keeps them', async () => {
    const ep = await endpoints('kubernetes');
    assert.deepEqual(ep.subsets, [
      { addresses: [{ ip: '172.18.0.1' }], ports: [{ name: 'https', port: 6443, protocol: 'TCP' }] },
    ]);
    assert.equal(
      ((ep.metadata as Obj).labels as Record<string, string>)['endpointslice.kubernetes.io/skip-mirror'],
      'true',
    );
    const slice = JSON.parse(await k.ok(['get', 'endpointslice', 'kubernetes', '-o', 'json'])) as Obj;
    assert.deepEqual(slice.endpoints, [{ addresses: ['172.18.0.1'], conditions: { ready: true } }]);
    // Changed or deleted by someone else: put back.
    await k.ok([
      'patch',
      'endpoints',
      'kubernetes',
      '--type=merge',
      '-p',
      '{"subsets":[{"addresses":[{"ip":"10.9.9.9"}]}]}',
    ]);
    await eventually('the API server’s address again', async () => {
      const e = await endpoints('kubernetes');
      return ips((e.subsets as Obj[])[0]!.addresses)[0] === '172.18.0.1' ? e : undefined;
    });
    await k.ok(['delete', 'endpointslice', 'kubernetes']);
    await eventually('the kubernetes EndpointSlice again', async () => {
      const r = await k.run(['get', 'endpointslice', 'kubernetes']);
      return r.code === 0 ? r : undefined;
    });
  });

  it('validates and defaults Endpoints written by clients, and mirrors them into EndpointSlices', async () => {
    const bad = await k.run(
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: Endpoints
metadata: {name: ext}
subsets: [{addresses: [{ip: 127.0.0.1}, {ip: 169.254.169.254}], ports: [{port: 5432}]}]
`,
    );
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /The Endpoints "ext" is invalid: \n/);
    assert.match(
      bad.stderr,
      /subsets\[0\]\.addresses\[0\]\.ip: Invalid value: "127\.0\.0\.1": may not be in the loopback range \(127\.0\.0\.0\/8, ::1\/128\)/,
    );
    assert.match(
      bad.stderr,
      /subsets\[0\]\.addresses\[1\]\.ip: Invalid value: "169\.254\.169\.254": may not be in the link-local range \(169\.254\.0\.0\/16, fe80::\/10\)/,
    );
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: Service
metadata: {name: ext}
spec: {ports: [{port: 5432}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: ext}
subsets: [{addresses: [{ip: 192.0.2.10, hostname: null}], ports: [{port: 5432}]}]
`,
    );
    const ep = await endpoints('ext');
    // The protocol defaults to TCP; the null hostname is not stored (a Go struct has no null string).
    assert.deepEqual(ep.subsets, [{ addresses: [{ ip: '192.0.2.10' }], ports: [{ port: 5432, protocol: 'TCP' }] }]);
    await k.ok([
      'patch',
      'endpoints',
      'ext',
      '-p',
      '{"subsets":[{"addresses":[{"ip":"192.0.2.11","hostname":null,"nodeName":null}],"ports":[{"port":5432}]}]}',
    ]);
    assert.deepEqual((await endpoints('ext')).subsets, [
      { addresses: [{ ip: '192.0.2.11' }], ports: [{ port: 5432, protocol: 'TCP' }] },
    ]);
    const mirrored = await eventually('a mirrored slice', async () => {
      const found = await slices('ext');
      return found.length === 1 && JSON.stringify(found[0]!.endpoints).includes('192.0.2.11') ? found[0] : undefined;
    });
    assert.equal(
      ((mirrored.metadata as Obj).labels as Record<string, string>)['endpointslice.kubernetes.io/managed-by'],
      'endpointslicemirroring-controller.k8s.io',
    );
    assert.deepEqual(mirrored.endpoints, [{ addresses: ['192.0.2.11'], conditions: { ready: true } }]);
  });

  it('prunes with kubectl apply --prune and shows it with kubectl diff --prune', async () => {
    const both = `apiVersion: v1
kind: ConfigMap
metadata: {name: keep, labels: {set: p}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: drop, labels: {set: p}}
`;
    const one = `apiVersion: v1
kind: ConfigMap
metadata: {name: keep, labels: {set: p}}
`;
    await k.ok(['apply', '-f', '-'], both);
    const diff = await k.run(['diff', '--prune', '-l', 'set=p', '-f', '-'], one);
    assert.equal(diff.code, 1, diff.stderr);
    assert.match(diff.stdout, /v1\.ConfigMap\.default\.drop/);
    const applied = await k.ok(['apply', '--prune', '-l', 'set=p', '-f', '-'], one);
    assert.match(applied, /configmap\/keep unchanged\nconfigmap\/drop pruned\n/);
    const left = await k.ok(['get', 'configmaps', '-l', 'set=p', '-o', 'name']);
    assert.equal(left, 'configmap/keep\n');
  });
});
