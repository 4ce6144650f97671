import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { kubectl, skipWithoutKubectl } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';

// kubectl 1.32+ (what /usr/bin/kubectl dispatches to for this server) sends the bodies of its typed commands as
// protobuf; these must create the same objects the JSON bodies of older kubectls do.

const PROTOBUF_REQUEST = /Content-Type: application\/vnd\.kubernetes\.protobuf/;

interface Spec {
  [key: string]: unknown;
}
type PodSpec = { containers: Array<Spec & { name: string; image: string }> } & Spec;

test('kubectl typed commands (create …, run) with protobuf bodies create the right objects', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server = await serverFor(t);
  const api = new Api(server.url);

  /** Runs a command at -v=8 and checks whether its request body went out as protobuf. */
  const run = async (args: string[], protobuf: boolean): Promise<void> => {
    const result = await kubectl(server.url, ['-v=8', ...args]);
    assert.equal(
      result.code,
      0,
      `kubectl ${args.join(' ')}: ${result.stderr
        .split('\n')
        .filter((l) => !l.startsWith('I'))
        .join('\n')}`,
    );
    if (protobuf) assert.match(result.stderr, PROTOBUF_REQUEST, `kubectl ${args.join(' ')} did not send protobuf`);
    else assert.doesNotMatch(result.stderr, PROTOBUF_REQUEST);
  };

  await run(['create', 'configmap', 'x', '--from-literal=a=b'], true);
  const cm = await api.get('/api/v1/namespaces/default/configmaps/x');
  assert.deepEqual(cm.data, { a: 'b' });

  await run(
    ['create', 'secret', 'generic', 'creds', '--from-literal=user=admin', '--from-literal=password=s3cr3t'],
    true,
  );
  const secret = await api.get('/api/v1/namespaces/default/secrets/creds');
  assert.equal(secret.type, 'Opaque');
  assert.deepEqual(secret.data, {
    user: Buffer.from('admin').toString('base64'),
    password: Buffer.from('s3cr3t').toString('base64'),
  });

  await run(['create', 'deployment', 'web', '--image=nginx', '--replicas=2'], true);
  const web = await api.get('/apis/apps/v1/namespaces/default/deployments/web');
  const webSpec = web.spec as {
    replicas: number;
    selector: Spec;
    template: { metadata: Obj['metadata']; spec: PodSpec };
  };
  assert.equal(webSpec.replicas, 2);
  assert.deepEqual(webSpec.selector, { matchLabels: { app: 'web' } });
  assert.deepEqual(webSpec.template.metadata.labels, { app: 'web' });
  assert.equal(webSpec.template.spec.containers[0]!.name, 'nginx');
  assert.equal(webSpec.template.spec.containers[0]!.image, 'nginx');

  // replicas is a pointer: an explicit 0 must survive (JSON's omitempty would not drop it either).
  await run(['create', 'deployment', 'idle', '--image=nginx', '--replicas=0'], true);
  const idle = await api.get('/apis/apps/v1/namespaces/default/deployments/idle');
  assert.equal((idle.spec as Spec).replicas, 0);

  await run(['create', 'namespace', 'team-b'], true);
  const ns = await api.get('/api/v1/namespaces/team-b');
  assert.equal(ns.metadata.name, 'team-b');

  await run(['create', 'job', 'once', '--image=busybox', '--', 'echo', 'hi'], true);
  const job = await api.get('/apis/batch/v1/namespaces/default/jobs/once');
  const jobPod = (job.spec as { template: { spec: PodSpec } }).template.spec;
  assert.deepEqual(jobPod.containers[0]!.command, ['echo', 'hi']);
  assert.equal(jobPod.containers[0]!.image, 'busybox');
  assert.equal(jobPod.restartPolicy, 'Never');

  await run(['create', 'cronjob', 'tick', '--image=busybox', '--schedule=*/5 * * * *', '--', 'date'], true);
  const cron = await api.get('/apis/batch/v1/namespaces/default/cronjobs/tick');
  const cronSpec = cron.spec as { schedule: string; jobTemplate: { spec: { template: { spec: PodSpec } } } };
  assert.equal(cronSpec.schedule, '*/5 * * * *');
  assert.deepEqual(cronSpec.jobTemplate.spec.template.spec.containers[0]!.command, ['date']);
  assert.equal(cronSpec.jobTemplate.spec.template.spec.restartPolicy, 'OnFailure');

  // The Job's pod template is the server's (defaulted) CronJob template, sent back as protobuf.
  await run(['create', 'job', 'tick-now', '--from=cronjob/tick'], true);
  const manual = await api.get('/apis/batch/v1/namespaces/default/jobs/tick-now');
  assert.equal((manual.metadata.ownerReferences as Array<{ kind: string; name: string }>)[0]!.name, 'tick');
  assert.deepEqual((manual.spec as { template: { spec: PodSpec } }).template.spec.containers[0]!.command, ['date']);

  await run(['create', 'service', 'clusterip', 'svc', '--tcp=80:8080'], true);
  const svc = await api.get('/api/v1/namespaces/default/services/svc');
  const svcSpec = svc.spec as { type: string; selector: Spec; ports: Spec[] };
  assert.equal(svcSpec.type, 'ClusterIP');
  assert.deepEqual(svcSpec.selector, { app: 'svc' });
  assert.deepEqual(svcSpec.ports, [{ name: '80-8080', protocol: 'TCP', port: 80, targetPort: 8080 }]);

  await run(['create', 'serviceaccount', 'builder'], true);
  assert.equal((await api.get('/api/v1/namespaces/default/serviceaccounts/builder')).metadata.name, 'builder');

  await run(['create', 'role', 'reader', '--verb=get,list', '--resource=pods'], true);
  const role = await api.get('/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/reader');
  assert.deepEqual(role.rules, [{ verbs: ['get', 'list'], apiGroups: [''], resources: ['pods'] }]);
  await run(['create', 'rolebinding', 'read', '--role=reader', '--serviceaccount=default:builder'], true);
  const binding = await api.get('/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/read');
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'builder', namespace: 'default' }]);
  assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' });

  // run builds its Pod with the dynamic client: JSON.
  await run(['run', 'pod1', '--image=nginx', '--labels=app=p', '--env=A=1', '--port=8080', '--restart=Never'], false);
  const pod = await api.get('/api/v1/namespaces/default/pods/pod1');
  const podSpec = pod.spec as PodSpec;
  assert.deepEqual(pod.metadata.labels, { app: 'p' });
  assert.deepEqual(podSpec.containers[0]!.env, [{ name: 'A', value: '1' }]);
  assert.deepEqual(podSpec.containers[0]!.ports, [{ containerPort: 8080, protocol: 'TCP' }]);

  const listed = await kubectl(server.url, [
    'get',
    'configmap/x',
    'secret/creds',
    'deployment/web',
    'job/once',
    'cronjob/tick',
    'service/svc',
    'serviceaccount/builder',
    'pod/pod1',
    '-o',
    'name',
  ]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(listed.stdout.trim().split('\n'), [
    'configmap/x',
    'secret/creds',
    'deployment.apps/web',
    'job.batch/once',
    'cronjob.batch/tick',
    'service/svc',
    'serviceaccount/builder',
    'pod/pod1',
  ]);
});
