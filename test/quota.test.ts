import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Api, type Obj, type StatusBody } from './helpers/http.js';
import { kubectl, kubectlMissing, type KubectlResult } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { until } from './helpers/wait.js';

// ResourceQuota (quota admission and the resourcequota controller) and LimitRanger admission, driven by the real
// kubectl and checked against kube-apiserver's texts.

const missing = kubectlMissing();

type Status = { hard?: Record<string, string>; used?: Record<string, string> };

/** `kubectl get` output with AGE values blanked and runs of spaces folded. */
function table(out: string): string[] {
  return out
    .trimEnd()
    .split('\n')
    .map((line) =>
      line
        .replace(/\s+\d+(ms|s|m)(\s|$)/g, ' <age>$2')
        .replace(/\s+/g, ' ')
        .trim(),
    );
}

function pod(name: string, resources?: Record<string, unknown>, spec: Record<string, unknown> = {}): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: { containers: [{ name: 'app', image: 'nginx', ...(resources ? { resources } : {}) }], ...spec },
  };
}

describe('ResourceQuota and LimitRange', { skip: missing ?? false }, () => {
  let server: SimServer;
  let api: Api;
  const run = (args: string[], input?: string): Promise<KubectlResult> =>
    kubectl(server.url, args, input === undefined ? {} : { input });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await run(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr}\n${server.stderr()}`);
    assert.equal(r.stderr, '', `kubectl ${args.join(' ')} wrote to stderr`);
    return r.stdout;
  };
  const fails = async (args: string[], input?: string): Promise<string> => {
    const r = await run(args, input);
    assert.notEqual(r.code, 0, `kubectl ${args.join(' ')} should have failed: ${r.stdout}`);
    return r.stderr.trim();
  };
  const quotaStatus = async (ns: string, name: string): Promise<Status> =>
    ((await api.get(`/api/v1/namespaces/${ns}/resourcequotas/${name}`)).status ?? {}) as Status;
  /** Waits until the quota's status.used has these values (the controller's sync). */
  const usedIs = (ns: string, name: string, want: Record<string, string>) =>
    until(
      async () => {
        const used = (await quotaStatus(ns, name)).used ?? {};
        return Object.entries(want).every(([k, v]) => used[k] === v) && used;
      },
      `quota ${ns}/${name} used ${JSON.stringify(want)}`,
    );
  const createPod = (ns: string, body: Obj) =>
    api.request<StatusBody>(`/api/v1/namespaces/${ns}/pods`, { method: 'POST', body });

  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
  });
  after(async () => {
    await server?.stop();
  });

  it('kubectl create quota: status from the controller, kube-apiserver 403 when exceeded, usage given back', async () => {
    await api.namespace('qa');
    assert.equal(await ok(['create', 'quota', 'q', '--hard=pods=1', '-n', 'qa']), 'resourcequota/q created\n');
    await usedIs('qa', 'q', { pods: '0' });
    assert.deepEqual((await quotaStatus('qa', 'q')).hard, { pods: '1' });
    assert.deepEqual(table(await ok(['get', 'quota', '-n', 'qa'])), ['NAME AGE REQUEST LIMIT', 'q <age> pods: 0/1']);
    await ok(['run', 'a', '--image=nginx', '-n', 'qa']);
    assert.equal(
      await fails(['run', 'b', '--image=nginx', '-n', 'qa']),
      'Error from server (Forbidden): pods "b" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1',
    );
    assert.deepEqual(table(await ok(['describe', 'quota', 'q', '-n', 'qa'])), [
      'Name: q',
      'Namespace: qa',
      'Resource Used Hard',
      '-------- ---- ----',
      'pods 1 1',
    ]);
    // The 403 as a Status: reason Forbidden, details naming the pod.
    const refused = await createPod('qa', pod('c'));
    assert.equal(refused.status, 403);
    assert.equal(refused.body.reason, 'Forbidden');
    assert.deepEqual(refused.body.details, { name: 'c', kind: 'pods' });
    // Deleting the pod gives its usage back (the controller), and the next pod fits.
    await ok(['delete', 'pod', 'a', '-n', 'qa', '--wait=false']);
    await usedIs('qa', 'q', { pods: '0' });
    await ok(['run', 'b', '--image=nginx', '-n', 'qa']);
    await usedIs('qa', 'q', { pods: '1' });
  });

  it('concurrent creates never overshoot a quota', async () => {
    await api.namespace('qb');
    await ok(['create', 'quota', 'five', '--hard=pods=5,count/configmaps=4', '-n', 'qb']);
    // kube-root-ca.crt is the namespace's first ConfigMap.
    await usedIs('qb', 'five', { pods: '0', 'count/configmaps': '1' });
    const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => createPod('qb', pod(`p${i}`))));
    const created = replies.filter((r) => r.status === 201).length;
    const refused = replies.filter((r) => r.status === 403);
    assert.equal(created, 5, replies.map((r) => r.status).join(','));
    assert.equal(refused.length, 35);
    assert.match(
      refused[0]!.body.message!,
      /^pods "p\d+" is forbidden: exceeded quota: five, requested: pods=1, used: pods=5, limited: pods=5$/,
    );
    const cms = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        api.request(`/api/v1/namespaces/qb/configmaps`, {
          method: 'POST',
          body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `c${i}` } },
        }),
      ),
    );
    assert.equal(cms.filter((r) => r.status === 201).length, 3);
    await usedIs('qb', 'five', { pods: '5', 'count/configmaps': '4' });
    // The controller's count agrees with admission's charges: it stays there.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual((await quotaStatus('qb', 'five')).used, { 'count/configmaps': '4', pods: '5' });
  });

  it('compute quotas: containers must declare what is limited; requests and limits are summed', async () => {
    await api.namespace('qc');
    await ok([
      'create',
      'quota',
      'compute',
      '--hard=requests.cpu=1,requests.memory=1Gi,limits.cpu=2,limits.memory=2Gi',
      '-n',
      'qc',
    ]);
    await usedIs('qc', 'compute', { 'requests.cpu': '0' });
    assert.equal(
      (await createPod('qc', pod('bare'))).body.message,
      'pods "bare" is forbidden: failed quota: compute: must specify limits.cpu for: app; limits.memory for: app; requests.cpu for: app; requests.memory for: app',
    );
    const sized = (cpu: string) => ({
      requests: { cpu, memory: '256Mi' },
      limits: { cpu: '1', memory: '512Mi' },
    });
    assert.equal((await createPod('qc', pod('one', sized('500m')))).status, 201);
    assert.equal(
      (await createPod('qc', pod('two', sized('600m')))).body.message,
      'pods "two" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1',
    );
    assert.equal((await createPod('qc', pod('three', sized('0.5')))).status, 201);
    await usedIs('qc', 'compute', {
      'requests.cpu': '1',
      'requests.memory': '512Mi',
      'limits.cpu': '2',
      'limits.memory': '1Gi',
    });
    assert.deepEqual(table(await ok(['get', 'quota', 'compute', '-n', 'qc'])), [
      'NAME AGE REQUEST LIMIT',
      'compute <age> requests.cpu: 1/1, requests.memory: 512Mi/1Gi limits.cpu: 2/2, limits.memory: 1Gi/2Gi',
    ]);
  });

  it('scopes: BestEffort, NotBestEffort, Terminating and PriorityClass quotas count only their pods', async () => {
    await api.namespace('qd');
    await ok(['create', 'quota', 'best', '--hard=pods=1', '--scopes=BestEffort', '-n', 'qd']);
    await ok(['create', 'quota', 'short', '--hard=pods=1', '--scopes=Terminating', '-n', 'qd']);
    await ok(['create', 'priorityclass', 'high', '--value=1000']);
    await ok(
      ['apply', '-n', 'qd', '-f', '-'],
      `apiVersion: v1
kind: ResourceQuota
metadata: {name: high}
spec:
  hard: {pods: "1"}
  scopeSelector:
    matchExpressions: [{scopeName: PriorityClass, operator: In, values: [high]}]
`,
    );
    await usedIs('qd', 'high', { pods: '0' });
    await usedIs('qd', 'best', { pods: '0' });
    await usedIs('qd', 'short', { pods: '0' });
    assert.equal((await createPod('qd', pod('be1'))).status, 201);
    assert.match((await createPod('qd', pod('be2'))).body.message!, /exceeded quota: best, requested: pods=1/);
    const burstable = { requests: { cpu: '100m' } };
    assert.equal((await createPod('qd', pod('bu1', burstable))).status, 201);
    assert.equal((await createPod('qd', pod('job1', burstable, { activeDeadlineSeconds: 60 }))).status, 201);
    assert.match(
      (await createPod('qd', pod('job2', burstable, { activeDeadlineSeconds: 60 }))).body.message!,
      /exceeded quota: short/,
    );
    assert.equal((await createPod('qd', pod('hi1', burstable, { priorityClassName: 'high' }))).status, 201);
    assert.match(
      (await createPod('qd', pod('hi2', burstable, { priorityClassName: 'high' }))).body.message!,
      /exceeded quota: high, requested: pods=1, used: pods=1, limited: pods=1/,
    );
    await usedIs('qd', 'best', { pods: '1' });
    await usedIs('qd', 'short', { pods: '1' });
    await usedIs('qd', 'high', { pods: '1' });
    // Scopes that apply to no resource the quota limits are refused, as ValidateResourceQuota refuses them.
    assert.equal(
      await fails(['create', 'quota', 'bad', '--hard=cpu=1', '--scopes=BestEffort', '-n', 'qd']),
      'error: failed to create quota: ResourceQuota "bad" is invalid: spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort"}: unsupported scope applied to resource',
    );
    assert.match(
      await fails(['create', 'quota', 'bad', '--hard=pods=1', '--scopes=BestEffort,NotBestEffort', '-n', 'qd']),
      /spec.scopes: Invalid value: \[\]core.ResourceQuotaScope\{"BestEffort", "NotBestEffort"\}: conflicting scopes/,
    );
  });

  it('services, node ports, load balancers, claims, storage per class and object counts', async () => {
    await api.namespace('qe');
    await ok([
      'create',
      'quota',
      'objects',
      '--hard=services=3,services.nodeports=1,services.loadbalancers=0,persistentvolumeclaims=2,requests.storage=5Gi,gold.storageclass.storage.k8s.io/requests.storage=1Gi,count/deployments.apps=1,secrets=20',
      '-n',
      'qe',
    ]);
    await usedIs('qe', 'objects', { services: '0', 'requests.storage': '0', 'count/deployments.apps': '0' });
    await ok(['create', 'service', 'nodeport', 'np', '--tcp=80:80', '-n', 'qe']);
    assert.equal(
      await fails(['create', 'service', 'nodeport', 'np2', '--tcp=80:80', '-n', 'qe']),
      'error: failed to create NodePort service: services "np2" is forbidden: exceeded quota: objects, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1',
    );
    assert.equal(
      await fails(['create', 'service', 'loadbalancer', 'lb', '--tcp=80:80', '-n', 'qe']),
      'error: failed to create LoadBalancer service: services "lb" is forbidden: exceeded quota: objects, requested: services.loadbalancers=1,services.nodeports=1, used: services.loadbalancers=0,services.nodeports=1, limited: services.loadbalancers=0,services.nodeports=1',
    );
    const claim = (name: string, storage: string, cls: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}}
spec: {storageClassName: ${cls}, accessModes: [ReadWriteOnce], resources: {requests: {storage: ${storage}}}}
`;
    await ok(['apply', '-n', 'qe', '-f', '-'], claim('gold-1', '1Gi', 'gold'));
    assert.match(
      await fails(['apply', '-n', 'qe', '-f', '-'], claim('gold-2', '512Mi', 'gold')),
      /persistentvolumeclaims "gold-2" is forbidden: exceeded quota: objects, requested: gold.storageclass.storage.k8s.io\/requests.storage=512Mi, used: gold.storageclass.storage.k8s.io\/requests.storage=1Gi, limited: gold.storageclass.storage.k8s.io\/requests.storage=1Gi/,
    );
    await ok(['apply', '-n', 'qe', '-f', '-'], claim('silver-1', '3Gi', 'silver'));
    assert.match(
      await fails(['apply', '-n', 'qe', '-f', '-'], claim('silver-2', '2Gi', 'silver')),
      /exceeded quota: objects, requested: persistentvolumeclaims=1,requests.storage=2Gi, used: persistentvolumeclaims=2,requests.storage=4Gi, limited: persistentvolumeclaims=2,requests.storage=5Gi/,
    );
    await ok(['create', 'deployment', 'd1', '--image=nginx', '--replicas=0', '-n', 'qe']);
    assert.equal(
      await fails(['create', 'deployment', 'd2', '--image=nginx', '-n', 'qe']),
      'error: failed to create deployment: deployments.apps "d2" is forbidden: exceeded quota: objects, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1',
    );
    const used = await usedIs('qe', 'objects', {
      services: '1',
      'services.nodeports': '1',
      'services.loadbalancers': '0',
      persistentvolumeclaims: '2',
      'requests.storage': '4Gi',
      'gold.storageclass.storage.k8s.io/requests.storage': '1Gi',
      'count/deployments.apps': '1',
    });
    assert.ok(Number(used.secrets) >= 0, `secrets counted: ${JSON.stringify(used)}`);
  });

  it('a Deployment held back by a quota gets FailedCreate events and scales once the quota grows', async () => {
    await api.namespace('qf');
    await ok(['create', 'quota', 'q', '--hard=pods=2', '-n', 'qf']);
    await usedIs('qf', 'q', { pods: '0' });
    await ok(['create', 'deployment', 'web', '--image=nginx', '--replicas=3', '-n', 'qf']);
    await usedIs('qf', 'q', { pods: '2' });
    const events = await until(async () => {
      const out = await ok(['get', 'events', '-n', 'qf', '--field-selector', 'reason=FailedCreate', '-o', 'json']);
      const items = (JSON.parse(out) as { items: Array<{ message: string }> }).items;
      return items.length > 0 && items;
    }, 'a FailedCreate event');
    assert.match(
      events[0]!.message,
      /^Error creating: pods "web-[a-z0-9]+-[a-z0-9]{5}" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2$/,
    );
    await ok(['patch', 'quota', 'q', '-n', 'qf', '-p', '{"spec":{"hard":{"pods":"3"}}}']);
    await until(
      async () => ((await api.list('/api/v1/namespaces/qf/pods')).items.length === 3 ? true : undefined),
      'the third pod',
      20_000,
    );
    await usedIs('qf', 'q', { pods: '3' });
  });

  it('LimitRange: defaults and default requests given to containers, with the limit-ranger annotation', async () => {
    await api.namespace('la');
    await ok(
      ['apply', '-n', 'la', '-f', '-'],
      `apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 256Mi}
    defaultRequest: {cpu: "0.25"}
    max: {cpu: "1", memory: 1Gi}
    min: {cpu: 100m}
    maxLimitRequestRatio: {cpu: "4"}
`,
    );
    const range = await api.get('/api/v1/namespaces/la/limitranges/limits');
    assert.deepEqual((range.spec as { limits: unknown[] }).limits[0], {
      type: 'Container',
      default: { cpu: '500m', memory: '256Mi' },
      defaultRequest: { cpu: '250m', memory: '256Mi' },
      max: { cpu: '1', memory: '1Gi' },
      min: { cpu: '100m' },
      maxLimitRequestRatio: { cpu: '4' },
    });
    await ok(['run', 'p', '--image=nginx', '-n', 'la']);
    const p = await api.get('/api/v1/namespaces/la/pods/p');
    const spec = p.spec as { containers: Array<{ resources: unknown }> };
    assert.deepEqual(spec.containers[0]!.resources, {
      limits: { cpu: '500m', memory: '256Mi' },
      requests: { cpu: '250m', memory: '256Mi' },
    });
    assert.equal(
      p.metadata.annotations?.['kubernetes.io/limit-ranger'],
      'LimitRanger plugin set: cpu, memory request for container p; cpu, memory limit for container p',
    );
    assert.equal((p.status as { qosClass: string }).qosClass, 'Burstable');
    // What a container sets itself is kept.
    const own = await createPod('la', pod('own', { limits: { cpu: '1' } }));
    assert.equal(own.status, 201);
    assert.deepEqual((own.body as unknown as Obj & { spec: typeof spec }).spec.containers[0]!.resources, {
      limits: { cpu: '1', memory: '256Mi' },
      requests: { cpu: '1', memory: '256Mi' },
    });
    assert.equal(
      await fails([
        'run',
        'big',
        '--image=nginx',
        '-n',
        'la',
        '--overrides',
        '{"spec":{"containers":[{"name":"big","image":"nginx","resources":{"limits":{"cpu":"2"}}}]}}',
      ]),
      'Error from server (Forbidden): pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2',
    );
    assert.equal(
      (await createPod('la', pod('tiny', { requests: { cpu: '50m' }, limits: { cpu: '1' } }))).body.message,
      'pods "tiny" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, cpu max limit to request ratio per Container is 4, but provided ratio is 20.000000]',
    );
  });

  it('LimitRange: Pod and PersistentVolumeClaim limits, and its validation', async () => {
    await api.namespace('lb');
    await ok(
      ['apply', '-n', 'lb', '-f', '-'],
      `apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - {type: Pod, max: {memory: 1Gi}}
  - {type: PersistentVolumeClaim, min: {storage: 1Gi}, max: {storage: 10Gi}}
`,
    );
    const two = pod('pair');
    const containers = [
      { name: 'a', image: 'nginx', resources: { limits: { memory: '600Mi' } } },
      { name: 'b', image: 'nginx', resources: { limits: { memory: '600Mi' } } },
    ];
    (two.spec as Record<string, unknown>).containers = containers;
    assert.equal(
      (await createPod('lb', two)).body.message,
      'pods "pair" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 1200Mi',
    );
    const claim = (name: string, storage: string) => ({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage } } },
    });
    const claims = '/api/v1/namespaces/lb/persistentvolumeclaims';
    assert.equal(
      (await api.request<StatusBody>(claims, { method: 'POST', body: claim('huge', '20Gi') })).body.message,
      'persistentvolumeclaims "huge" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi',
    );
    assert.equal(
      (await api.request<StatusBody>(claims, { method: 'POST', body: claim('small', '100Mi') })).body.message,
      'persistentvolumeclaims "small" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 100Mi',
    );
    await api.create(claims, claim('fine', '5Gi'));
    const bad = await run(
      ['apply', '-n', 'lb', '-f', '-'],
      `apiVersion: v1
kind: LimitRange
metadata: {name: bad}
spec:
  limits:
  - {type: Container, min: {cpu: "2"}, max: {cpu: "1"}}
  - {type: Pod, default: {cpu: "1"}}
`,
    );
    assert.notEqual(bad.code, 0);
    // SetDefaults_LimitRangeItem made default and defaultRequest the max, so the min is above those too.
    assert.deepEqual(bad.stderr.trimEnd().split('\n'), [
      'The LimitRange "bad" is invalid: ',
      '* spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1',
      '* spec.limits[0].defaultRequest[cpu]: Invalid value: "1": min value 2 is greater than default request value 1',
      '* spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1',
      "* spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'",
    ]);
  });
});
