import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing, spawnKubectl, type KubectlProcess } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// The simulated apps behind pods' ports, reached as a user reaches them on a cluster: `kubectl port-forward` to a pod
// or a Service, and `kubectl proxy` to the API server's pods and services proxy. Every containerPort of a Ready
// container answers HTTP (what the image catalog says nginx and httpd answer, else what the kube-sim.dev/http-body
// annotation says, else a line naming the pod); a Service spreads requests over its ready endpoints; what cannot be
// reached gets kube-apiserver's and kubectl's refusals.

type Obj = Record<string, unknown>;
const missing = kubectlMissing();

const WEB = (version: string) => `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata:
      labels: {app: web}
      annotations:
        kube-sim.dev/http-body: "${version} from \${name} ($(APP_COLOR))\\n"
        kube-sim.dev/ready-delay: 1s
    spec:
      containers:
      - name: app
        image: registry.example/shop:${version}
        env: [{name: APP_COLOR, value: blue}]
        ports: [{name: http, containerPort: 8080}, {name: https, containerPort: 8443}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
  - {name: https, port: 443, targetPort: https}
`;

describe('simulated apps behind ports', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;
  let proxy: KubectlProcess;
  let proxyUrl: string;
  const forwards: KubectlProcess[] = [];
  let kc: ReturnType<typeof kubectlAgainst>;

  before(async () => {
    server = await startServer(['--nodes', '2']);
    api = new Api(server.url);
    kc = kubectlAgainst(server);
    proxy = spawnKubectl(server.url, ['proxy', '--port=0']);
    await proxy.until((out) => /Starting to serve on 127\.0\.0\.1:\d+/.test(out), 'kubectl proxy to listen');
    proxyUrl = `http://127.0.0.1:${/127\.0\.0\.1:(\d+)/.exec(proxy.stdout)![1]}`;
    await kc.ok(['run', 'nginx', '--image=nginx:1.27', '--port=80']);
    await kc.ok(['run', 'httpd', '--image=httpd:2.4', '--port=80']);
    await kc.ok(['apply', '-f', '-'], WEB('v1'));
    await kc.ok(['wait', '--for=condition=Ready', 'pod/nginx', 'pod/httpd', '--timeout=30s']);
    await kc.ok(['rollout', 'status', 'deployment/web', '--timeout=30s']);
  });
  after(async () => {
    for (const f of forwards) await f.stop();
    await proxy?.stop();
    await server?.stop();
  });

  /** GET through kubectl proxy: the status, headers and body as curl would show them. */
  async function viaProxy(path: string): Promise<{ status: number; headers: Headers; body: string }> {
    const res = await fetch(`${proxyUrl}${path}`, { redirect: 'manual' });
    return { status: res.status, headers: res.headers, body: await res.text() };
  }

  /** `kubectl port-forward TARGET :PORT`: the local port it listens on (forwarding to the pod's `podPort`). */
  async function portForward(target: string, port: number, podPort = port): Promise<number> {
    const forward = spawnKubectl(server.url, ['port-forward', target, `:${port}`]);
    forwards.push(forward);
    await forward.until((out) => new RegExp(`Forwarding from 127\\.0\\.0\\.1:\\d+ -> ${podPort}\\n`).test(out), target);
    return Number(/Forwarding from 127\.0\.0\.1:(\d+)/.exec(forward.stdout)![1]);
  }

  async function webPods(): Promise<string[]> {
    const pods = await api.list('/api/v1/namespaces/default/pods?labelSelector=app%3Dweb');
    return pods.items
      .filter((p) => (p.metadata as Obj).deletionTimestamp === undefined)
      .map((p) => String((p.metadata as Obj).name))
      .sort();
  }

  test('kubectl port-forward pod/nginx: the welcome page of nginx, and its 404 elsewhere', async () => {
    const port = await portForward('pod/nginx', 80);
    const res = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('server'), 'nginx/1.27.3');
    assert.equal(res.headers.get('content-type'), 'text/html');
    const page = await res.text();
    assert.match(page, /^<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!<\/title>/);
    assert.equal(page.length, 615);
    const gone = await fetch(`http://127.0.0.1:${port}/nope`);
    assert.equal(gone.status, 404);
    assert.match(await gone.text(), /<center><h1>404 Not Found<\/h1><\/center>/);
  });

  test('kubectl proxy to pods/NAME/proxy: the first declared port by default, or the one named; httpd says It works!', async () => {
    const nginx = await viaProxy('/api/v1/namespaces/default/pods/nginx/proxy/');
    assert.equal(nginx.status, 200);
    assert.match(nginx.body, /<h1>Welcome to nginx!<\/h1>/);
    assert.equal((await viaProxy('/api/v1/namespaces/default/pods/http:nginx:80/proxy/index.html')).status, 200);
    const httpd = await viaProxy('/api/v1/namespaces/default/pods/httpd:80/proxy/');
    assert.equal(httpd.body, '<html><body><h1>It works!</h1></body></html>\n');
    assert.equal(httpd.headers.get('server'), 'Apache/2.4.62 (Unix)');
    // Without the trailing slash, kube-apiserver redirects to the path that has it.
    const bare = await viaProxy('/api/v1/namespaces/default/pods/nginx/proxy?x=1');
    assert.equal(bare.status, 301);
    assert.equal(bare.headers.get('location'), '/api/v1/namespaces/default/pods/nginx/proxy/?x=1');
  });

  test('a Service spreads requests over its ready endpoints, by port number, port name or https:NAME:PORT', async () => {
    const pods = await webPods();
    assert.equal(pods.length, 2);
    const bodies: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await viaProxy('/api/v1/namespaces/default/services/web:80/proxy/');
      assert.equal(res.status, 200, res.body);
      bodies.push(res.body);
    }
    // The body the template's annotation asks for: the pod's name and the container's environment filled in.
    assert.deepEqual(
      [...new Set(bodies)].sort(),
      pods.map((p) => `v1 from ${p} (blue)\n`),
    );
    const named = await viaProxy('/api/v1/namespaces/default/services/web:http/proxy/a/b?c=d');
    assert.match(named.body, /^v1 from web-/);
    const tls = await viaProxy('/api/v1/namespaces/default/services/https:web:443/proxy/');
    assert.equal(tls.status, 200);
    assert.match(tls.body, /^v1 from web-/);
  });

  test('kubectl port-forward svc/web 80: a pod of the Service answers on its target port', async () => {
    // kubectl picks a pod of the Service and forwards to the container port the Service's port targets.
    const port = await portForward('svc/web', 80, 8080);
    const body = await (await fetch(`http://127.0.0.1:${port}/`)).text();
    const pods = await webPods();
    assert.ok(
      pods.some((p) => body === `v1 from ${p} (blue)\n`),
      `${body} names one of ${pods.join(', ')}`,
    );
  });

  test('through a rolling update the Service answers from old pods, then from the new ones only', async () => {
    const before = await webPods();
    // Requests go on while kubectl applies the new template, as a user's curl loop would.
    const applied = kc.ok(['apply', '-f', '-'], WEB('v2'));
    const seen: string[] = [];
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await viaProxy('/api/v1/namespaces/default/services/web:80/proxy/');
      if (res.status === 200) seen.push(res.body);
      const done = seen.slice(-4);
      if (done.length === 4 && done.every((b) => b.startsWith('v2 '))) break;
      assert.ok(Date.now() < deadline, `the rollout did not finish: ${seen.join('')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await applied;
    await kc.ok(['rollout', 'status', 'deployment/web', '--timeout=30s']);
    const after = await webPods();
    assert.equal(after.filter((p) => before.includes(p)).length, 0, 'every pod was replaced');
    // Old pods answered first; once a v2 answer came, every answer was from a pod of the new ReplicaSet.
    assert.match(seen[0]!, /^v1 /, seen.join(''));
    const first = seen.findIndex((b) => b.startsWith('v2 '));
    for (const body of seen.slice(first)) {
      const name = /^v\d from (\S+) /.exec(body)![1]!;
      if (body.startsWith('v1 ')) assert.ok(before.includes(name), body);
    }
    const lastFour = new Set(seen.slice(-4).map((b) => /^v2 from (\S+) /.exec(b)![1]!));
    for (const name of lastFour) assert.ok(after.includes(name), `${name} is a new pod`);
    // kubectl port-forward svc/web picks a pod when it starts: after the rollout, one of the new ones.
    const port = await portForward('svc/web', 80, 8080);
    const body = await (await fetch(`http://127.0.0.1:${port}/`)).text();
    assert.ok(
      after.some((p) => body === `v2 from ${p} (blue)\n`),
      `${body} names one of the new pods ${after.join(', ')}`,
    );
  });

  test('refusals: no endpoints, no such service port, a port nobody listens on, a pod not running', async () => {
    await kc.ok(['create', 'service', 'clusterip', 'empty', '--tcp=80:80']);
    let empty = await viaProxy('/api/v1/namespaces/default/services/empty:80/proxy/');
    for (let i = 0; i < 50 && empty.status === 404; i++) {
      await new Promise((r) => setTimeout(r, 100));
      empty = await viaProxy('/api/v1/namespaces/default/services/empty:80/proxy/');
    }
    assert.equal(empty.status, 503);
    assert.deepEqual(JSON.parse(empty.body), {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'no endpoints available for service "empty"',
      reason: 'ServiceUnavailable',
      code: 503,
    });
    const noPort = await viaProxy('/api/v1/namespaces/default/services/web:81/proxy/');
    assert.equal(noPort.status, 503);
    assert.equal(JSON.parse(noPort.body).message, 'no service port 81 found for service "web"');

    const nginxIP = ((await api.get('/api/v1/namespaces/default/pods/nginx')).status as Obj).podIP;
    const refused = await viaProxy('/api/v1/namespaces/default/pods/nginx:81/proxy/');
    assert.equal(refused.status, 503);
    assert.equal(
      JSON.parse(refused.body).message,
      `error trying to reach service: dial tcp ${nginxIP}:81: connect: connection refused`,
    );

    // A pod that cannot be scheduled: no IP for the proxy, and kubectl port-forward refuses it itself.
    await kc.ok(['run', 'stuck', '--image=nginx', '--port=80', '--overrides={"spec":{"nodeSelector":{"no":"such"}}}']);
    const pending = await viaProxy('/api/v1/namespaces/default/pods/stuck/proxy/');
    assert.equal(pending.status, 400);
    assert.equal(JSON.parse(pending.body).message, 'address not allowed');
    const forward = await kc.run(['port-forward', 'pod/stuck', ':80']);
    assert.equal(forward.code, 1);
    assert.equal(forward.stderr, 'error: unable to forward port because pod is not running. Current status=Pending\n');

    // A pod whose container is not Ready yet: no ready endpoint for its Service, nothing answers on its port.
    await kc.ok(['apply', '-f', '-'], SLOW);
    let slow = await viaProxy('/api/v1/namespaces/default/services/slow:80/proxy/');
    for (let i = 0; i < 50 && slow.status !== 503; i++) {
      await new Promise((r) => setTimeout(r, 100));
      slow = await viaProxy('/api/v1/namespaces/default/services/slow:80/proxy/');
    }
    assert.equal(JSON.parse(slow.body).message, 'no endpoints available for service "slow:80"');
    const slowIP = ((await api.get('/api/v1/namespaces/default/pods/slow')).status as Obj).podIP;
    assert.equal(
      JSON.parse((await viaProxy('/api/v1/namespaces/default/pods/slow/proxy/')).body).message,
      `error trying to reach service: dial tcp ${slowIP}:80: connect: connection refused`,
    );
    // kubectl port-forward to it: kubectl listens (the pod is Running), the connection is refused inside the pod.
    const toSlow = spawnKubectl(server.url, ['port-forward', 'pod/slow', ':80']);
    forwards.push(toSlow);
    await toSlow.until((out) => /Forwarding from 127\.0\.0\.1:\d+ -> 80\n/.test(out), 'the listener');
    const local = Number(/Forwarding from 127\.0\.0\.1:(\d+)/.exec(toSlow.stdout)![1]);
    await assert.rejects(fetch(`http://127.0.0.1:${local}/`));
    await toSlow.exited;
    assert.match(
      toSlow.stderr,
      /an error occurred forwarding \d+ -> 80: .*dial tcp4 127\.0\.0\.1:80: connect: connection refused/,
    );
  });

  test('HEAD through the proxy: the headers of the answer, no body', async () => {
    const res = await fetch(`${proxyUrl}/api/v1/namespaces/default/pods/nginx/proxy/`, { method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), '615');
    assert.equal(await res.text(), '');
  });
});

const SLOW = `apiVersion: v1
kind: Pod
metadata:
  name: slow
  labels: {app: slow}
  annotations: {kube-sim.dev/ready-delay: 1h}
spec:
  containers: [{name: app, image: nginx, ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: slow}
spec:
  selector: {app: slow}
  ports: [{port: 80}]
`;
