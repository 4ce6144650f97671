import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Deployment } from '@kubernetes/client-node';
import type { OwnerReference } from '../src/api/types.js';
import { computeStatus, desiredDeployment, updatedDeployment, type Website } from '../fixtures/operator/website.js';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { Replica } from './helpers/operator-replica.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';

// Issue 10: the example Operator in fixtures/operator runs as separate processes against one `sim serve`, with
// the real kubectl driving everything: two replicas elect a leader on a Lease and only the leader reconciles a
// Website into a ConfigMap and a Deployment whose pods become ready; its status shows in the printer columns;
// kill -9 of the leader hands the Lease to the other replica after the lease duration, which then reconciles a
// change made meanwhile; deleting the Website (background and foreground) removes its children through the
// garbage collector.

const missing = kubectlMissing();
const CRD_FILE = join(ROOT, 'fixtures/operator/website-crd.yaml');
const WEBSITE_FILE = join(ROOT, 'fixtures/operator/website.yaml');
// Short, so fail-over takes seconds (client-go's rule leaseDuration > renewDeadline > 1.2 × retryPeriod holds), with
// a renew deadline of four attempts, so a leader on a busy machine does not lose its Lease.
const LEASE_SECONDS = 3;
const ELECTION = ['--lease-duration', String(LEASE_SECONDS), '--renew-deadline', '2', '--retry-period', '0.5'];
const WAIT_TIMEOUT = '--timeout=30s';

describe('the example Website Operator (fixtures/operator)', { skip: missing }, () => {
  let server: SimServer;
  let dir: string;
  let kubeconfig: string;
  const replicas: Replica[] = [];
  let leader: Replica;
  let standby: Replica;

  const operatorLogs = (): string => replicas.map((r) => `--- operator ${r.id}:\n${r.log}`).join('\n');
  // `kubectl wait --timeout=30s` needs more than kubectl()'s default 20 s before it is killed.
  const ok = (args: string[], input?: string): Promise<string> =>
    kubectlAgainst(server, operatorLogs).ok(args, input, 40_000);
  const json = async <T>(args: string[]): Promise<T> => JSON.parse(await ok([...args, '-o', 'json'])) as T;

  before(async () => {
    // Containers stop as soon as they are told to, so deleted pods go without waiting out their grace period.
    server = await startServer(['--stop-delay', '0s']);
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-operator-'));
    kubeconfig = join(dir, 'kubeconfig');
    // The kubeconfig a user would make: `sim kubeconfig --server URL > kubeconfig`.
    writeFileSync(
      kubeconfig,
      execFileSync(process.execPath, [join(ROOT, 'bin/sim.js'), 'kubeconfig', '--server', server.url], {
        encoding: 'utf8',
      }),
    );
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.kill('SIGKILL')));
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('applies the Website CRD with kubectl, which explains the kind', async () => {
    assert.match(
      await ok(['apply', '-f', CRD_FILE]),
      /customresourcedefinition.apiextensions.k8s.io\/websites.example.kube-sim.dev created/,
    );
    await ok(['wait', '--for=condition=Established', 'crd/websites.example.kube-sim.dev', WAIT_TIMEOUT]);
    const explained = await ok(['explain', 'website.spec']);
    assert.match(explained, /content\s+<string> -required-/);
    assert.match(explained, /The page, served as index\.html\./);
  });

  it('starts two replicas, of which one takes the Lease and the other stands by', async () => {
    replicas.push(new Replica('alpha', kubeconfig, ELECTION), new Replica('bravo', kubeconfig, ELECTION));
    // Each replica logs whom it found leading: itself ("I am the leader") or the other ("new leader elected: X").
    await Promise.all(replicas.map((r) => r.until(/I am the leader|new leader elected: \w+/)));
    const lease = await json<{ spec: Record<string, unknown> }>(['get', 'lease', 'website-operator']);
    const holder = replicas.find((r) => r.id === lease.spec.holderIdentity);
    assert.ok(holder, `Lease holder ${String(lease.spec.holderIdentity)} is one of the replicas`);
    leader = holder;
    standby = replicas.find((r) => r !== holder)!;
    assert.match(leader.log, /successfully acquired lease default\/website-operator/);
    assert.match(standby.log, new RegExp(`new leader elected: ${leader.id}`));
    assert.doesNotMatch(standby.log, /became leader/);
    assert.equal(lease.spec.leaseDurationSeconds, LEASE_SECONDS);
    assert.equal(lease.spec.leaseTransitions, 0);
    // MicroTime, as client-go writes it.
    assert.match(String(lease.spec.acquireTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.match(String(lease.spec.renewTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it('refuses invalid Websites with the schema’s field paths', async () => {
    const invalid = async (spec: string): Promise<string> => {
      const r = await kubectlAgainst(server).run(
        ['create', '-f', '-'],
        `apiVersion: example.kube-sim.dev/v1\nkind: Website\nmetadata: {name: bad}\nspec: ${spec}\n`,
      );
      assert.notEqual(r.code, 0);
      return r.stderr;
    };
    assert.match(
      await invalid('{content: x, replicas: 11}'),
      /The Website "bad" is invalid: spec\.replicas: Invalid value: 11: spec\.replicas in body should be less than or equal to 10/,
    );
    assert.match(await invalid('{replicas: 1}'), /The Website "bad" is invalid: spec\.content: Required value/);
    assert.match(
      await invalid('{content: x, replicas: two}'),
      /spec\.replicas: Invalid value: "string": spec\.replicas in body must be of type integer: "string"/,
    );
  });

  it('reconciles a Website into a ConfigMap and a Deployment whose pods become ready, and reports status', async () => {
    await ok(['apply', '-f', WEBSITE_FILE]);
    await ok(['wait', '--for=condition=Ready', 'website/hello', WAIT_TIMEOUT]);
    const site = await json<{
      metadata: { uid: string; generation: number };
      spec: { image: string };
      status: Record<string, unknown>;
    }>(['get', 'website', 'hello']);
    assert.equal(site.spec.image, 'nginx:1.27', 'the schema default');
    assert.deepEqual(
      { ...site.status, conditions: undefined },
      {
        observedGeneration: 1,
        replicas: 2,
        readyReplicas: 2,
        selector: 'app.kubernetes.io/name=website,app.kubernetes.io/instance=hello',
        conditions: undefined,
      },
    );
    // The printer columns show the status.
    assert.match(
      await ok(['get', 'websites']),
      /^NAME\s+REPLICAS\s+READY\s+IMAGE\s+STATUS\s+AGE\nhello\s+2\s+2\s+nginx:1\.27\s+Available\s+\d+s\n$/,
    );

    const expectedOwner: OwnerReference = {
      apiVersion: 'example.kube-sim.dev/v1',
      kind: 'Website',
      name: 'hello',
      uid: site.metadata.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
    const cm = await json<{ data: Record<string, string>; metadata: { ownerReferences: OwnerReference[] } }>([
      'get',
      'configmap',
      'hello-content',
    ]);
    assert.deepEqual(cm.data, { 'index.html': '<h1>Hello from kube-sim</h1>\n' });
    assert.deepEqual(cm.metadata.ownerReferences, [expectedOwner]);
    const deploy = await json<{
      metadata: { ownerReferences: OwnerReference[]; managedFields: Array<{ manager: string }> };
      status: { readyReplicas: number };
    }>(['get', 'deployment', 'hello', '--show-managed-fields']);
    assert.deepEqual(deploy.metadata.ownerReferences, [expectedOwner]);
    assert.ok(
      deploy.metadata.managedFields.some((f) => f.manager === 'website-operator'),
      'the Operator writes as field manager website-operator',
    );
    assert.equal(deploy.status.readyReplicas, 2);
    const pods = await ok([
      'get',
      'pods',
      '-l',
      'app.kubernetes.io/instance=hello',
      '-o',
      'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}',
    ]);
    assert.equal(pods, 'True\nTrue\n');
    // The kubelet mounts the ConfigMap where the web server reads its page.
    assert.equal(
      await ok(['exec', 'deploy/hello', '--', 'cat', '/usr/share/nginx/html/index.html']),
      '<h1>Hello from kube-sim</h1>\n',
    );

    // Only the Lease holder acted: its log and the Events name it; the standby never reconciled.
    assert.match(leader.log, /reconciled default\/hello: created ConfigMap hello-content; created Deployment hello/);
    assert.doesNotMatch(standby.log, /reconciled/);
    const events = await ok([
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=Website,involvedObject.name=hello',
      '-o',
      'jsonpath={range .items[*]}{.reason} {.reportingInstance} {.source.host}{"\\n"}{end}',
    ]);
    assert.match(events, new RegExp(`^Synced ${leader.id} ${leader.id}\\n$`));
    // kubectl describe names the component (source.component); the replica is in source.host / reportingInstance.
    assert.match(
      await ok(['describe', 'website', 'hello']),
      /Normal\s+Synced\s+\S+\s+website-operator\s+Website synced successfully: created ConfigMap hello-content; created Deployment hello\n/,
    );
  });

  it('fails over when the leader is killed: the standby takes the expired Lease and reconciles what changed meanwhile', async () => {
    await leader.kill('SIGKILL');
    // A change nobody is there to act on yet.
    assert.match(await ok(['scale', 'website', 'hello', '--replicas=3']), /website.example.kube-sim.dev\/hello scaled/);
    await ok(['wait', 'lease/website-operator', `--for=jsonpath={.spec.holderIdentity}=${standby.id}`, WAIT_TIMEOUT]);
    await standby.until(/became leader: starting informers/);
    await ok(['wait', 'website/hello', '--for=jsonpath={.status.readyReplicas}=3', WAIT_TIMEOUT]);
    await ok(['wait', '--for=condition=Ready', 'website/hello', WAIT_TIMEOUT]);
    assert.equal(
      await ok(['get', 'deployment', 'hello', '-o', 'jsonpath={.spec.replicas} {.status.readyReplicas}']),
      '3 3',
    );
    assert.match(standby.log, /reconciled default\/hello: updated Deployment hello \(replicas 3, image nginx:1\.27\)/);
    const lease = await json<{ spec: { holderIdentity: string; leaseTransitions: number } }>([
      'get',
      'lease',
      'website-operator',
    ]);
    assert.deepEqual([lease.spec.holderIdentity, lease.spec.leaseTransitions], [standby.id, 1]);
    const reporters = await ok([
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=Website,involvedObject.name=hello',
      '-o',
      'jsonpath={range .items[*]}{.reportingInstance}{"\\n"}{end}',
    ]);
    assert.deepEqual(reporters.trim().split('\n').sort(), [leader.id, standby.id].sort());
    assert.match(await ok(['get', 'website', 'hello']), /hello\s+3\s+3\s+nginx:1\.27\s+Available/);
  });

  it('kubectl delete of the Website removes its ConfigMap, Deployment and pods through the garbage collector', async () => {
    assert.match(await ok(['delete', 'website', 'hello']), /website.example.kube-sim.dev "hello" deleted/);
    await ok(['wait', '--for=delete', 'deployment/hello', 'configmap/hello-content', WAIT_TIMEOUT]);
    await ok(['wait', '--for=delete', 'pods', '-l', 'app.kubernetes.io/instance=hello', WAIT_TIMEOUT]);
    assert.equal(
      await ok([
        'get',
        'deployments,replicasets,pods,configmaps',
        '-l',
        'app.kubernetes.io/instance=hello',
        '-o',
        'name',
      ]),
      '',
    );
  });

  it('foreground deletion keeps the Website until the garbage collector has removed what it owns', async () => {
    await ok(
      ['create', '-f', '-'],
      'apiVersion: example.kube-sim.dev/v1\nkind: Website\nmetadata: {name: fg}\nspec: {replicas: 1, content: bye}\n',
    );
    await ok(['wait', '--for=condition=Ready', 'website/fg', WAIT_TIMEOUT]);
    // kubectl waits for the Website to be gone; in foreground its blocking dependents (blockOwnerDeletion) go first.
    await ok(['delete', 'website', 'fg', '--cascade=foreground', WAIT_TIMEOUT]);
    assert.equal(
      await ok(['get', 'deployments,replicasets,pods,configmaps', '-l', 'app.kubernetes.io/instance=fg', '-o', 'name']),
      '',
    );
    // The Operator left the terminating Website alone rather than re-creating what was being deleted.
    assert.equal(standby.log.match(/reconciled default\/fg: created/g)?.length, 1);
  });

  it('reports a name taken by an object the Website does not own, leaves that object alone, and recovers when it goes', async () => {
    await ok(['create', 'configmap', 'taken-content', '--from-literal=index.html=mine']);
    await ok(
      ['create', '-f', '-'],
      'apiVersion: example.kube-sim.dev/v1\nkind: Website\nmetadata: {name: taken}\nspec: {content: theirs}\n',
    );
    await ok([
      'wait',
      'website/taken',
      '--for=jsonpath={.status.conditions[0].reason}=ErrResourceExists',
      WAIT_TIMEOUT,
    ]);
    assert.equal(
      await ok([
        'get',
        'website',
        'taken',
        '-o',
        'jsonpath={.status.conditions[0].status} {.status.conditions[0].message}',
      ]),
      'False Resource "taken-content" already exists and is not managed by Website',
    );
    assert.equal(
      await ok([
        'get',
        'configmap',
        'taken-content',
        '-o',
        'jsonpath={.data.index\\.html}|{.metadata.ownerReferences}',
      ]),
      'mine|',
    );
    // No pods serving a page the Website does not own.
    assert.match((await kubectlAgainst(server).run(['get', 'deployment', 'taken'])).stderr, /NotFound/);
    assert.equal(
      await ok([
        'get',
        'events',
        '--field-selector',
        'involvedObject.name=taken,type=Warning',
        '-o',
        'jsonpath={.items[*].reason}',
      ]),
      'ErrResourceExists',
    );
    // Once the other ConfigMap goes, the Operator makes its own.
    await ok(['delete', 'configmap', 'taken-content']);
    await ok(['wait', '--for=condition=Ready', 'website/taken', WAIT_TIMEOUT]);
    assert.equal(await ok(['get', 'configmap', 'taken-content', '-o', 'jsonpath={.data.index\\.html}']), 'theirs');
    await ok(['delete', 'website', 'taken']);
  });

  it('gives the Lease up on SIGTERM, so a new replica need not wait for it to expire', async () => {
    await standby.kill('SIGTERM');
    assert.equal(standby.child.exitCode, 0);
    assert.match(standby.log, /SIGTERM: shutting down[\s\S]*released lease default\/website-operator/);
    // client-go's release: no holder, a one-second lease, the transitions kept.
    const lease = await json<{
      spec: { holderIdentity?: string; leaseDurationSeconds: number; leaseTransitions: number };
    }>(['get', 'lease', 'website-operator']);
    assert.deepEqual(
      [lease.spec.holderIdentity ?? '', lease.spec.leaseDurationSeconds, lease.spec.leaseTransitions],
      ['', 1, 1],
    );
    const next = new Replica('charlie', kubeconfig, ELECTION);
    replicas.push(next);
    await next.until(/successfully acquired lease/);
    assert.equal(
      await ok(['get', 'lease', 'website-operator', '-o', 'jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}']),
      'charlie 2',
    );
  });
});

// The Operator's pure part (fixtures/operator/website.ts): what it wants to exist, and the status it reports.
describe('the Website Operator’s plan, without a cluster', () => {
  const site: Website = {
    apiVersion: 'example.kube-sim.dev/v1',
    kind: 'Website',
    metadata: { name: 'hello', namespace: 'default', uid: 'u-1', generation: 2 },
    spec: { content: '<p>hi</p>', image: 'nginx:1.27', replicas: 2 },
  };
  const now = new Date('2025-01-01T00:00:00.500Z');

  it('leaves a matching Deployment alone and changes only the fields it owns', () => {
    const current = { ...desiredDeployment(site), status: { replicas: 2 } };
    current.spec!.template.spec!.dnsPolicy = 'ClusterFirst'; // a server default
    assert.equal(updatedDeployment(site, current), undefined);
    const next = updatedDeployment({ ...site, spec: { ...site.spec, content: '<p>new</p>', replicas: 3 } }, current)!;
    assert.equal(next.spec!.replicas, 3);
    assert.equal(next.spec!.template.spec!.dnsPolicy, 'ClusterFirst');
    assert.notEqual(
      next.spec!.template.metadata!.annotations!['example.kube-sim.dev/content-hash'],
      current.spec!.template.metadata!.annotations!['example.kube-sim.dev/content-hash'],
    );
  });

  it('reports Ready only when every wanted pod of the current template is ready', () => {
    const deployment = (status: Record<string, number>, generation = 1): V1Deployment => ({
      metadata: { generation },
      status: { observedGeneration: 1, ...status },
    });
    const ready = (d: V1Deployment | undefined, problem?: { reason: string; message: string }): unknown => {
      const c = computeStatus(site, d, problem, now).conditions![0]!;
      return [c.status, c.reason, c.message];
    };
    assert.deepEqual(ready(deployment({ replicas: 2, updatedReplicas: 2, readyReplicas: 2 })), [
      'True',
      'Available',
      '2/2 replicas ready',
    ]);
    assert.deepEqual(ready(deployment({ replicas: 2, updatedReplicas: 2, readyReplicas: 1 })), [
      'False',
      'Progressing',
      '1/2 replicas ready',
    ]);
    // The Deployment controller has not seen the latest spec yet.
    assert.deepEqual(ready(deployment({ replicas: 2, updatedReplicas: 2, readyReplicas: 2 }, 2)), [
      'False',
      'Progressing',
      '2/2 replicas ready',
    ]);
    assert.deepEqual(ready(undefined, { reason: 'ErrResourceExists', message: 'taken' }), [
      'False',
      'ErrResourceExists',
      'taken',
    ]);
    const status = computeStatus(
      site,
      deployment({ replicas: 2, updatedReplicas: 2, readyReplicas: 2 }),
      undefined,
      now,
    );
    assert.deepEqual(
      { ...status, conditions: undefined },
      {
        observedGeneration: 2,
        replicas: 2,
        readyReplicas: 2,
        selector: 'app.kubernetes.io/name=website,app.kubernetes.io/instance=hello',
        conditions: undefined,
      },
    );
    assert.equal(status.conditions![0]!.lastTransitionTime, '2025-01-01T00:00:00Z');
    // The transition time moves only when the condition's status does.
    const later = new Date('2025-01-01T00:05:00Z');
    assert.equal(
      computeStatus(
        { ...site, status },
        deployment({ replicas: 2, updatedReplicas: 2, readyReplicas: 2 }),
        undefined,
        later,
      ).conditions![0]!.lastTransitionTime,
      '2025-01-01T00:00:00Z',
    );
    assert.equal(
      computeStatus(
        { ...site, status },
        deployment({ replicas: 2, updatedReplicas: 2, readyReplicas: 1 }),
        undefined,
        later,
      ).conditions![0]!.lastTransitionTime,
      '2025-01-01T00:05:00Z',
    );
  });
});
