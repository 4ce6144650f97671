import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Api, assertStatus } from './helpers/http.js';
import { kubectl, kubectlMissing, type KubectlResult } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// The kinds a typical app manifest or Helm chart carries beyond workloads: Ingress, IngressClass, NetworkPolicy,
// PriorityClass, StorageClass and HorizontalPodAutoscaler (v2, and v1 through the conversion), with the admission
// plugins that touch them (Priority, DefaultIngressClass, DefaultStorageClass), driven by the real kubectl.

const APP = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: example.com/fast
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
description: for the web tier
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      priorityClassName: high
      containers: [{name: web, image: nginx}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop}
spec:
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  egress: [{ports: [{port: 53}]}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  metrics:
  - {type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}}
  - {type: Resource, resource: {name: memory, target: {type: AverageValue, averageValue: 500Mi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`;

/** `kubectl get` output with the AGE column's values blanked (they depend on the wall clock). */
function table(out: string): string[] {
  return out
    .trimEnd()
    .split('\n')
    .map((line) =>
      line
        .replace(/\s+\d+s(\s|$)/g, ' <age>$1')
        .replace(/\s+/g, ' ')
        .trim(),
    );
}

type Spec = Record<string, unknown>;

const missing = kubectlMissing();

describe('Ingress, IngressClass, NetworkPolicy, PriorityClass, StorageClass, HPA', { skip: missing ?? false }, () => {
  let server: SimServer;
  let api: Api;
  const run = (args: string[], input?: string): Promise<KubectlResult> =>
    kubectl(server.url, args, input === undefined ? {} : { input });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await run(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    assert.equal(r.stderr, '', `kubectl ${args.join(' ')} wrote to stderr`);
    return r.stdout;
  };
  /** Runs kubectl expecting it to fail, and returns what it wrote on stderr. */
  const fails = async (args: string[], input?: string): Promise<string> => {
    const r = await run(args, input);
    assert.notEqual(r.code, 0, `kubectl ${args.join(' ')} should have failed: ${r.stdout}`);
    return r.stderr.trim();
  };

  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
  });
  after(async () => {
    await server?.stop();
  });

  it('kubectl apply of an app manifest with every kind, and their kubectl get columns', async () => {
    const applied = await ok(['apply', '-f', '-'], APP);
    for (const line of [
      'ingressclass.networking.k8s.io/nginx created',
      'storageclass.storage.k8s.io/fast created',
      'priorityclass.scheduling.k8s.io/high created',
      'ingress.networking.k8s.io/web created',
      'networkpolicy.networking.k8s.io/web created',
      'horizontalpodautoscaler.autoscaling/web created',
    ]) {
      assert.ok(applied.includes(`${line}\n`), `apply printed ${line}: ${applied}`);
    }
    assert.deepEqual(table(await ok(['get', 'ingress', '-n', 'shop'])), [
      'NAME CLASS HOSTS ADDRESS PORTS AGE',
      'web nginx shop.example.com 80, 443 <age>',
    ]);
    assert.deepEqual(table(await ok(['get', 'ingressclass'])), [
      'NAME CONTROLLER PARAMETERS AGE',
      'nginx k8s.io/ingress-nginx <none> <age>',
    ]);
    assert.deepEqual(table(await ok(['get', 'netpol', '-n', 'shop'])), ['NAME POD-SELECTOR AGE', 'web app=web <age>']);
    // Beside kind's `standard`, which every new cluster has.
    assert.deepEqual(table(await ok(['get', 'sc'])), [
      'NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE',
      'fast (default) example.com/fast Delete Immediate false <age>',
      'standard (default) rancher.io/local-path Delete WaitForFirstConsumer false <age>',
    ]);
    assert.deepEqual(table(await ok(['get', 'pc'])), [
      'NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY',
      'high 1000 false <age> PreemptLowerPriority',
      'system-cluster-critical 2000000000 false <age> PreemptLowerPriority',
      'system-node-critical 2000001000 false <age> PreemptLowerPriority',
    ]);
    assert.deepEqual(table(await ok(['get', 'hpa', '-n', 'shop'])), [
      'NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE',
      'web Deployment/web cpu: <unknown>/70%, memory: <unknown>/500Mi 2 5 0 <age>',
    ]);
    // Defaults and admission: policyTypes from the rules, the default classes filled in.
    const policy = await api.get('/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies/web');
    assert.deepEqual((policy.spec as Spec).policyTypes, ['Ingress', 'Egress']);
    const ingress = await api.get('/apis/networking.k8s.io/v1/namespaces/shop/ingresses/web');
    assert.equal((ingress.spec as Spec).ingressClassName, 'nginx');
    assert.deepEqual(ingress.status, { loadBalancer: {} });
    assert.equal(ingress.metadata.generation, 1);
    const claim = await api.get('/api/v1/namespaces/shop/persistentvolumeclaims/data');
    // Of two default classes, the newer.
    assert.equal((claim.spec as Spec).storageClassName, 'fast');
    // The Deployment's pods got their priority from the class.
    let pods = await api.list('/api/v1/namespaces/shop/pods');
    for (let i = 0; i < 50 && pods.items.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      pods = await api.list('/api/v1/namespaces/shop/pods');
    }
    assert.ok(pods.items.length > 0, 'the deployment made pods');
    for (const pod of pods.items)
      assert.deepEqual(
        [(pod.spec as Spec).priority, (pod.spec as Spec).preemptionPolicy],
        [1000, 'PreemptLowerPriority'],
      );
  });

  it('kubectl autoscale creates an HPA (autoscaling/v1 before kubectl 1.33) served as v2 with the CPU target', async () => {
    assert.equal(
      await ok(['autoscale', 'deployment', 'web', '-n', 'shop', '--max=4', '--cpu-percent=60', '--name=cpu']),
      'horizontalpodautoscaler.autoscaling/cpu autoscaled\n',
    );
    assert.deepEqual(table(await ok(['get', 'hpa', 'cpu', '-n', 'shop'])), [
      'NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE',
      'cpu Deployment/web cpu: <unknown>/60% 1 4 0 <age>',
    ]);
    const v2 = await api.get('/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/cpu');
    assert.deepEqual((v2.spec as Spec).metrics, [
      { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 60 } } },
    ]);
    assert.equal((v2.spec as Spec).minReplicas, 1);
  });

  it('autoscaling/v1 reads carry what v1 cannot say in annotations, and a v1 round trip keeps it', async () => {
    const path = '/apis/autoscaling/v1/namespaces/shop/horizontalpodautoscalers/web';
    const v1 = await api.get(path);
    assert.equal(v1.apiVersion, 'autoscaling/v1');
    assert.deepEqual(v1.spec, {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
      minReplicas: 2,
      maxReplicas: 5,
      targetCPUUtilizationPercentage: 70,
    });
    assert.deepEqual(JSON.parse(v1.metadata.annotations!['autoscaling.alpha.kubernetes.io/metrics']!), [
      { type: 'Resource', resource: { name: 'memory', targetAverageValue: '500Mi' } },
    ]);
    assert.deepEqual(v1.status, { currentReplicas: 0, desiredReplicas: 0 });
    // A v1 client changes maxReplicas; the memory metric survives (after the CPU one, as Go's conversion orders them).
    await api.put(path, { ...v1, spec: { ...(v1.spec as Record<string, unknown>), maxReplicas: 6 } });
    const v2 = await api.get('/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/web');
    assert.equal((v2.spec as Spec).maxReplicas, 6);
    assert.deepEqual(
      ((v2.spec as Spec).metrics as Spec[]).map((m) => (m.resource as Spec).name),
      ['memory', 'cpu'],
    );
    assert.equal(v2.metadata.annotations?.['autoscaling.alpha.kubernetes.io/metrics'], undefined);
    // Validation runs on the v2 form, whichever version was sent.
    const bad = await api.request('/apis/autoscaling/v1/namespaces/shop/horizontalpodautoscalers', {
      method: 'POST',
      body: {
        metadata: { name: 'bad' },
        spec: { scaleTargetRef: { kind: 'Deployment', name: 'web' }, minReplicas: 3, maxReplicas: 2 },
      },
    });
    assert.equal(
      assertStatus(bad, 422, 'Invalid').message,
      'HorizontalPodAutoscaler.autoscaling "bad" is invalid: spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`',
    );
  });

  it('NetworkPolicy validation: selectors, peers and ipBlock CIDRs, as kube-apiserver words it', async () => {
    const create = async (spec: Record<string, unknown>): Promise<string> =>
      assertStatus(
        await api.request('/apis/networking.k8s.io/v1/namespaces/shop/networkpolicies', {
          method: 'POST',
          body: { metadata: { name: 'bad' }, spec },
        }),
        422,
        'Invalid',
      ).message ?? '';
    assert.equal(
      await create({ podSelector: { matchExpressions: [{ key: 'tier', operator: 'In' }] }, ingress: [{ from: [{}] }] }),
      "NetworkPolicy.networking.k8s.io \"bad\" is invalid: [spec.podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn', spec.ingress[0].from[0]: Required value: must specify a peer]",
    );
    assert.equal(
      await create({
        podSelector: {},
        egress: [
          { to: [{ ipBlock: { cidr: '10.0.0.0/8', except: ['10.1.0.0/16', '11.0.0.0/16'] }, namespaceSelector: {} }] },
        ],
      }),
      'NetworkPolicy.networking.k8s.io "bad" is invalid: [spec.egress[0].to[0].ipBlock.except[1]: Invalid value: "11.0.0.0/16": must be a strict subset of `cidr`, spec.egress[0].to[0]: Forbidden: may not specify both ipBlock and another peer]',
    );
    assert.equal(
      await create({ podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/33' } }] }] }),
      'NetworkPolicy.networking.k8s.io "bad" is invalid: spec.egress[0].to[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": not a valid CIDR',
    );
  });

  it('kubectl create ingress and priorityclass; validation messages', async () => {
    assert.equal(
      await ok(['create', 'ingress', 'simple', '-n', 'shop', '--rule=foo.com/bar=svc1:8080']),
      'ingress.networking.k8s.io/simple created\n',
    );
    assert.deepEqual(table(await ok(['get', 'ing', 'simple', '-n', 'shop'])), [
      'NAME CLASS HOSTS ADDRESS PORTS AGE',
      'simple nginx foo.com 80 <age>',
    ]);
    assert.equal(
      await fails(
        ['apply', '-f', '-'],
        'apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: empty, namespace: shop}\nspec: {}\n',
      ),
      'The Ingress "empty" is invalid: spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified',
    );
    assert.equal(
      await ok([
        'create',
        'priorityclass',
        'batch',
        '--value=100',
        '--preemption-policy=Never',
        '--description=batch jobs',
      ]),
      'priorityclass.scheduling.k8s.io/batch created\n',
    );
    assert.equal(
      await fails(['create', 'priorityclass', 'huge', '--value=2000000000']),
      'error: failed to create priorityclass: PriorityClass.scheduling.k8s.io "huge" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000',
    );
    assert.equal(
      await fails(['create', 'priorityclass', 'system-mine', '--value=1']),
      `error: failed to create priorityclass: PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class`,
    );
    assert.equal(
      await fails(['patch', 'pc', 'batch', '-p', '{"value":5}']),
      'The PriorityClass "batch" is invalid: value: Forbidden: may not be changed in an update.',
    );
    assert.equal(
      await fails(['delete', 'pc', 'system-node-critical']),
      'Error from server (Forbidden): priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system priority class and cannot be deleted',
    );
  });

  it('Priority admission: unknown class, a priority or preemptionPolicy of its own, the globalDefault class', async () => {
    const pod = (name: string, spec: Record<string, unknown>): string =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: 'shop' },
        spec: { containers: [{ name: 'c', image: 'busybox' }], ...spec },
      });
    assert.equal(
      await fails(['create', '-f', '-'], pod('ghost', { priorityClassName: 'nope' })),
      'Error from server (Forbidden): error when creating "STDIN": pods "ghost" is forbidden: no PriorityClass with name nope was found',
    );
    assert.equal(
      await fails(['create', '-f', '-'], pod('self', { priority: 7 })),
      'Error from server (Forbidden): error when creating "STDIN": pods "self" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name',
    );
    assert.equal(
      await fails(['create', '-f', '-'], pod('never', { preemptionPolicy: 'Never' })),
      'Error from server (Forbidden): error when creating "STDIN": pods "never" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name',
    );
    // A priority that agrees with the class is accepted; the class's preemptionPolicy is taken.
    await ok(['create', '-f', '-'], pod('agrees', { priorityClassName: 'batch', priority: 100 }));
    const agrees = await api.get('/api/v1/namespaces/shop/pods/agrees');
    assert.deepEqual([(agrees.spec as Spec).priority, (agrees.spec as Spec).preemptionPolicy], [100, 'Never']);
    // One globalDefault class at most; pods without a class get its name and value.
    await ok(['create', 'priorityclass', 'normal', '--value=10', '--global-default']);
    assert.equal(
      await fails(['create', 'priorityclass', 'other', '--value=20', '--global-default']),
      'error: failed to create priorityclass: priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass normal is already marked as default. Only one default can exist',
    );
    await ok(['create', '-f', '-'], pod('plain', {}));
    const plain = await api.get('/api/v1/namespaces/shop/pods/plain');
    assert.deepEqual([(plain.spec as Spec).priorityClassName, (plain.spec as Spec).priority], ['normal', 10]);
    // An update that leaves priority out keeps it (the plugin restores it; validation would refuse a change).
    await ok(['label', 'pod', 'plain', '-n', 'shop', 'tier=x']);
    assert.equal(((await api.get('/api/v1/namespaces/shop/pods/plain')).spec as Spec).priority, 10);
  });
});
