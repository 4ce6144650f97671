import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import {
  KUBECTL,
  kubectl,
  kubectlClientMinor,
  kubectlMissing,
  spawnKubectl,
  type KubectlResult,
} from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 7's kubectl suite: the commands a person who knows Kubernetes types, against `sim serve`, checking what
// kubectl prints (columns, values, exit codes) and that it prints no warning. The binary under test is
// $KUBE_SIM_KUBECTL (default: the /usr/bin/kubectl dispatcher, i.e. 1.32); `npm run test:kubectl-1.27` … `1.33`
// run the same suite with another version (1.27 and 1.28 read /openapi/v2, later ones /openapi/v3).

const missing = kubectlMissing();
/** kubectl 1.27 reports `annotate` as "configmap/x annotate" (its own wording; fixed in 1.28). */
const ANNOTATED = missing || kubectlClientMinor() >= 28 ? 'annotated' : 'annotate';

/** One object of each kind that has no controller making it (for the column check). */
const KINDS = `apiVersion: v1
kind: Namespace
metadata: {name: kinds}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain, namespace: kinds}
data: {k: v}
---
apiVersion: v1
kind: Secret
metadata: {name: plain, namespace: kinds}
stringData: {k: v}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: kinds}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: kinds}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: web, namespace: kinds}
subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 80}]}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: kinds-pv}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim, namespace: kinds}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute, namespace: kinds}
spec: {hard: {pods: "10", limits.cpu: "2"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: defaults, namespace: kinds}
spec: {limits: [{type: Container, default: {cpu: 500m}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: kinds}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: kinds}
spec: {replicas: 1, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: nginx}]}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: kinds}
spec: {serviceName: db, replicas: 1, selector: {matchLabels: {app: db}}, template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: busybox}]}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kinds}
spec: {selector: {matchLabels: {app: agent}}, template: {metadata: {labels: {app: agent}}, spec: {containers: [{name: c, image: busybox}]}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: kinds}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: kinds}
spec: {schedule: "0 3 * * *", jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader, namespace: kinds}
spec: {holderIdentity: me}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: kinds}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: kinds}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kinds-reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kinds-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kinds-reader}
subjects: [{kind: User, name: alice}]
---
apiVersion: v1
kind: Node
metadata: {name: kinds-node}
---
apiVersion: v1
kind: Event
metadata: {name: solo.1, namespace: kinds}
involvedObject: {kind: Pod, name: solo, namespace: kinds}
reason: Tested
message: hello
type: Normal
`;
const version = KUBECTL.match(/kubectl\.(1\.\d+)$/)?.[1] ?? '1.32 (dispatcher)';

describe(`kubectl ${version} against sim serve`, { skip: missing ?? false }, () => {
  let server: SimServer;
  let api: Api;
  let dir: string;
  const run = (
    args: string[],
    options: { input?: string; env?: Record<string, string> } = {},
  ): Promise<KubectlResult> => kubectl(server.url, args, options);
  /** Runs kubectl and insists on exit 0 and an empty stderr (no warning, no fallback notice). */
  const ok = async (
    args: string[],
    options: { input?: string; env?: Record<string, string> } = {},
  ): Promise<string> => {
    const r = await run(args, options);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    assert.equal(r.stderr, '', `kubectl ${args.join(' ')} wrote to stderr`);
    return r.stdout;
  };
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  before(async () => {
    server = await startServer();
    api = new Api(server.url);
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-commands-'));
  });
  after(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('explain deployment.spec.strategy --recursive prints the fields, types and enum', async () => {
    const out = await ok(['explain', 'deployment.spec.strategy', '--recursive']);
    assert.match(out, /^GROUP:\s+apps\nKIND:\s+Deployment\nVERSION:\s+v1\n\nFIELD: strategy <DeploymentStrategy>\n/);
    assert.match(
      out,
      /DESCRIPTION:\n\s+The deployment strategy to use to replace existing pods with new ones\.\n\s+DeploymentStrategy describes how to replace existing pods with new ones\./,
    );
    assert.match(
      out,
      /FIELDS:\n {2}rollingUpdate\t<RollingUpdateDeployment>\n {4}maxSurge\t<IntOrString>\n {4}maxUnavailable\t<IntOrString>\n {2}type\t<string>\n/,
    );
    // kubectl prints a field's enum from 1.30 on; the documents carry it for every version.
    if (kubectlClientMinor() >= 30) assert.match(out, /\n {2}type\t<string>\n {2}enum: Recreate, RollingUpdate\n/);
    const containers = await ok(['explain', 'pods.spec.containers.ports']);
    assert.match(containers, /containerPort\t<integer> -required-/);
    assert.match(containers, /protocol\t<string>\n/);
    if (kubectlClientMinor() >= 30) assert.match(containers, /protocol\t<string>\n\s+enum: SCTP, TCP, UDP/);
    const meta = await ok(['explain', 'configmap.metadata.creationTimestamp']);
    assert.match(meta, /FIELD: creationTimestamp <string>/);
  });

  it('create deployment|configmap|secret|job|namespace', async () => {
    assert.equal(await ok(['create', 'namespace', 'cmds']), 'namespace/cmds created\n');
    assert.equal(
      await ok(['create', 'deployment', 'web', '-n', 'cmds', '--image=nginx:1.25', '--replicas=2']),
      'deployment.apps/web created\n',
    );
    assert.equal(
      await ok(['create', 'configmap', 'settings', '-n', 'cmds', '--from-literal=mode=fast']),
      'configmap/settings created\n',
    );
    assert.equal(
      await ok(['create', 'secret', 'generic', 'creds', '-n', 'cmds', '--from-literal=password=hunter2']),
      'secret/creds created\n',
    );
    assert.equal(await ok(['create', 'job', 'once', '-n', 'cmds', '--image=busybox']), 'job.batch/once created\n');
    const deploy = await api.get('/apis/apps/v1/namespaces/cmds/deployments/web');
    const managers = (deploy.metadata.managedFields as Array<{ manager: string; operation: string }>).map(
      (m) => `${m.manager}/${m.operation}`,
    );
    assert.ok(managers.includes('kubectl-create/Update'), `managedFields name kubectl-create: ${managers.join(', ')}`);
  });

  it('client-side apply: create, strategic-merge update without warnings, unchanged', async () => {
    const manifest = (image: string, extra = ''): string => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: cmds
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: main
        image: ${image}
        env: [{name: MODE, value: fast}]
${extra}`;
    assert.equal(await ok(['apply', '-f', file('api.yaml', manifest('nginx:1.25'))]), 'deployment.apps/api created\n');
    const sidecar = '      - name: sidecar\n        image: busybox\n';
    assert.equal(
      await ok(['apply', '-f', file('api.yaml', manifest('nginx:1.26', sidecar))]),
      'deployment.apps/api configured\n',
    );
    let live = await api.get('/apis/apps/v1/namespaces/cmds/deployments/api');
    const containers = (
      live.spec as { template: { spec: { containers: Array<{ name: string; image: string; env?: unknown[] }> } } }
    ).template.spec.containers;
    assert.deepEqual(
      containers.map((c) => `${c.name}=${c.image}`),
      ['main=nginx:1.26', 'sidecar=busybox'],
    );
    assert.deepEqual(containers[0]!.env, [{ name: 'MODE', value: 'fast' }]);
    assert.equal(
      await ok(['apply', '-f', file('api.yaml', manifest('nginx:1.26', sidecar))]),
      'deployment.apps/api unchanged\n',
    );
    // Dropping the sidecar from the manifest removes it (a $patch: delete by merge key).
    assert.equal(
      await ok(['apply', '-f', file('api.yaml', manifest('nginx:1.26'))]),
      'deployment.apps/api configured\n',
    );
    live = await api.get('/apis/apps/v1/namespaces/cmds/deployments/api');
    assert.equal((live.spec as { template: { spec: { containers: unknown[] } } }).template.spec.containers.length, 1);
    // An existing object made by create: apply adds last-applied-configuration (kubectl warns about that itself).
    const cm = file(
      'settings.yaml',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: cmds}\ndata: {mode: slow}\n',
    );
    const r = await run(['apply', '-f', cm]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /openapi|unable to find api field/);
    assert.deepEqual((await api.get('/api/v1/namespaces/cmds/configmaps/settings')).data, { mode: 'slow' });
  });

  it('fieldValidation: Strict rejects unknown fields, warn warns, false keeps quiet', async () => {
    const bad = file(
      'bad.yaml',
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: cmds}\ndata: {a: b}\nspec: {foo: 1}\n',
    );
    const strict = await run(['create', '-f', bad]);
    assert.equal(strict.code, 1);
    assert.match(
      strict.stderr,
      /Error from server \(BadRequest\): error when creating ".*bad\.yaml": ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "spec"/,
    );
    const warn = await run(['create', '-f', bad, '--validate=warn']);
    assert.equal(warn.code, 0, warn.stderr);
    assert.equal(warn.stderr, 'Warning: unknown field "spec"\n');
    assert.equal(warn.stdout, 'configmap/bad created\n');
    assert.equal(
      (await api.get('/api/v1/namespaces/cmds/configmaps/bad')).spec,
      undefined,
      'the unknown field is dropped',
    );
    await ok(['delete', 'cm', 'bad', '-n', 'cmds']);
    assert.equal(await ok(['create', '-f', bad, '--validate=false']), 'configmap/bad created\n');
    const nested = file(
      'nested.yaml',
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nested, namespace: cmds}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: c, image: i, imagee: typo}]\n',
    );
    const typo = await run(['apply', '-f', nested]);
    assert.equal(typo.code, 1);
    assert.match(typo.stderr, /unknown field "spec\.template\.spec\.containers\[0\]\.imagee"/);
  });

  it('server-side apply: create, conflict with the manager named, --force-conflicts, removal of fields no longer applied', async () => {
    const manifest = (data: string): string =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n  namespace: cmds\n  labels: {team: a}\ndata:\n${data}`;
    assert.equal(
      await ok(['apply', '--server-side', '-f', file('ssa.yaml', manifest('  x: "1"\n  z: "2"\n'))]),
      'configmap/ssa serverside-applied\n',
    );
    const rv = (await api.get('/api/v1/namespaces/cmds/configmaps/ssa')).metadata.resourceVersion;
    assert.equal(
      await ok(['apply', '--server-side', '-f', file('ssa.yaml', manifest('  x: "1"\n  z: "2"\n'))]),
      'configmap/ssa serverside-applied\n',
    );
    assert.equal(
      (await api.get('/api/v1/namespaces/cmds/configmaps/ssa')).metadata.resourceVersion,
      rv,
      'an unchanged apply is a no-op',
    );
    assert.equal(
      await ok(['patch', 'cm', 'ssa', '-n', 'cmds', '--type=merge', '-p', '{"data":{"x":"patched"}}']),
      'configmap/ssa patched\n',
    );
    const conflict = await run(['apply', '--server-side', '-f', file('ssa.yaml', manifest('  x: "1"\n  z: "2"\n'))]);
    assert.equal(conflict.code, 1);
    assert.match(
      conflict.stderr,
      /^error: Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: \.data\.x$/m,
    );
    assert.equal(
      await ok([
        'apply',
        '--server-side',
        '--force-conflicts',
        '-f',
        file('ssa.yaml', manifest('  x: "1"\n  z: "2"\n')),
      ]),
      'configmap/ssa serverside-applied\n',
    );
    let live = await api.get('/api/v1/namespaces/cmds/configmaps/ssa');
    assert.deepEqual(live.data, { x: '1', z: '2' });
    // z is no longer applied: it goes; the label stays applied.
    await ok(['apply', '--server-side', '-f', file('ssa.yaml', manifest('  x: "1"\n'))]);
    live = await api.get('/api/v1/namespaces/cmds/configmaps/ssa');
    assert.deepEqual(live.data, { x: '1' });
    assert.deepEqual(live.metadata.labels, { team: 'a' });
    const entries = live.metadata.managedFields as Array<{ manager: string; operation: string; fieldsV1: unknown }>;
    assert.deepEqual(
      entries.map((e) => `${e.manager}/${e.operation}`),
      ['kubectl/Apply'],
    );
    assert.deepEqual(entries[0]!.fieldsV1, { 'f:data': { 'f:x': {} }, 'f:metadata': { 'f:labels': { 'f:team': {} } } });
  });

  it('client-side apply, then diff and apply --server-side with a change: kubectl takes over what it applied and keeps last-applied-configuration in step', async () => {
    const manifest = (mode: string): string =>
      file(
        'upgraded.yaml',
        `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: upgraded\n  namespace: cmds\n  labels: {team: a}\ndata:\n  mode: ${mode}\n  size: small\n`,
      );
    const path = '/api/v1/namespaces/cmds/configmaps/upgraded';
    const lastApplied = (obj: Obj): Record<string, unknown> => {
      const text = obj.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration'];
      assert.ok(text?.endsWith('}\n'), `last-applied-configuration: ${text}`);
      return JSON.parse(text ?? '') as Record<string, unknown>;
    };
    assert.equal(await ok(['apply', '-f', manifest('one')]), 'configmap/upgraded created\n');

    const diff = await run(['diff', '--server-side', '-f', manifest('two')]);
    assert.equal(diff.code, 1, `kubectl diff --server-side exited ${diff.code}: ${diff.stderr}`);
    assert.equal(diff.stderr, '', 'no conflict, no "keeps changing" retries');
    assert.match(diff.stdout, /^-\s+mode: one$/m);
    assert.match(diff.stdout, /^\+\s+mode: two$/m);
    assert.deepEqual((await api.get(path)).data, { mode: 'one', size: 'small' }, 'diff changes nothing');

    assert.equal(
      await ok(['apply', '--server-side', '-f', manifest('two')]),
      'configmap/upgraded serverside-applied\n',
    );
    let live = await api.get(path);
    assert.deepEqual(live.data, { mode: 'two', size: 'small' });
    assert.deepEqual(live.metadata.labels, { team: 'a' });
    assert.deepEqual(lastApplied(live).data, { mode: 'two', size: 'small' }, 'the annotation follows the apply');
    const owners = (obj: Obj, field: string): string[] =>
      (obj.metadata.managedFields as Array<{ manager: string; operation: string; fieldsV1: Record<string, unknown> }>)
        .filter((e) => field in ((e.fieldsV1['f:data'] as Record<string, unknown> | undefined) ?? {}))
        .map((e) => `${e.manager}/${e.operation}`);
    assert.deepEqual(owners(live, 'f:mode'), ['kubectl/Apply']);

    // Client-side apply again diffs against the annotation the server-side apply wrote.
    assert.equal(await ok(['apply', '-f', manifest('three')]), 'configmap/upgraded configured\n');
    live = await api.get(path);
    assert.deepEqual(live.data, { mode: 'three', size: 'small' });
    assert.deepEqual(lastApplied(live).data, { mode: 'three', size: 'small' });

    // A field another manager changed since it was last applied still conflicts, and only that one is named.
    await ok(['patch', 'cm', 'upgraded', '-n', 'cmds', '--type=merge', '-p', '{"data":{"size":"large"}}']);
    const conflict = await run(['apply', '--server-side', '-f', manifest('four')]);
    assert.equal(conflict.code, 1, conflict.stderr);
    assert.match(
      conflict.stderr,
      /^error: Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: \.data\.size$/m,
    );
    live = await api.get(path);
    assert.deepEqual(live.data, { mode: 'three', size: 'large' }, 'a refused apply changes nothing');
    assert.deepEqual(lastApplied(live).data, { mode: 'three', size: 'small' });
  });

  it('patch: strategic by merge key, $patch: delete, --type=merge and --type=json', async () => {
    await ok([
      'patch',
      'deployment',
      'api',
      '-n',
      'cmds',
      '-p',
      '{"spec":{"template":{"spec":{"containers":[{"name":"main","env":[{"name":"EXTRA","value":"1"}]}]}}}}',
    ]);
    let live = await api.get('/apis/apps/v1/namespaces/cmds/deployments/api');
    const env = (o: Obj): unknown =>
      (o.spec as { template: { spec: { containers: Array<{ env?: unknown }> } } }).template.spec.containers[0]!.env;
    assert.deepEqual(env(live), [
      { name: 'MODE', value: 'fast' },
      { name: 'EXTRA', value: '1' },
    ]);
    await ok([
      'patch',
      'deployment',
      'api',
      '-n',
      'cmds',
      '-p',
      '{"spec":{"template":{"spec":{"containers":[{"name":"main","env":[{"name":"MODE","$patch":"delete"}]}]}}}}',
    ]);
    live = await api.get('/apis/apps/v1/namespaces/cmds/deployments/api');
    assert.deepEqual(env(live), [{ name: 'EXTRA', value: '1' }]);
    assert.equal(
      await ok(['patch', 'cm', 'settings', '-n', 'cmds', '--type=merge', '-p', '{"data":{"extra":"x"}}']),
      'configmap/settings patched\n',
    );
    assert.equal(
      await ok([
        'patch',
        'cm',
        'settings',
        '-n',
        'cmds',
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/data/extra"}]',
      ]),
      'configmap/settings patched\n',
    );
    assert.equal(
      await ok(['patch', 'cm', 'settings', '-n', 'cmds', '--type=merge', '-p', '{"data":{"mode":"slow"}}']),
      'configmap/settings patched (no change)\n',
    );
  });

  it('get: -o jsonpath|custom-columns|name|wide, --show-labels, -L, -A, get all, --raw', async () => {
    assert.equal(await ok(['get', 'cm', 'settings', '-n', 'cmds', '-o', 'jsonpath={.data.mode}']), 'slow');
    assert.equal(
      await ok([
        'get',
        'deploy',
        'web',
        '-n',
        'cmds',
        '-o',
        'custom-columns=NAME:.metadata.name,IMAGE:.spec.template.spec.containers[0].image',
      ]),
      'NAME   IMAGE\nweb    nginx:1.25\n',
    );
    assert.equal(await ok(['get', 'deploy', '-n', 'cmds', '-o', 'name']), 'deployment.apps/api\ndeployment.apps/web\n');
    const wide = await ok(['get', 'deploy', 'web', '-n', 'cmds', '-o', 'wide']);
    assert.match(wide, /^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s+CONTAINERS\s+IMAGES\s+SELECTOR\n/);
    assert.match(wide, /^web\s+\d\/2\s+\d\s+\d\s+\S+\s+nginx\s+nginx:1\.25\s+app=web\n/m);
    const labels = await ok(['get', 'ns', 'cmds', '--show-labels']);
    assert.match(labels, /^NAME\s+STATUS\s+AGE\s+LABELS\ncmds\s+Active\s+\S+\s+kubernetes\.io\/metadata\.name=cmds\n$/);
    const column = await ok(['get', 'deploy', 'web', '-n', 'cmds', '-L', 'app']);
    assert.match(column, /^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s+APP\nweb\s+.*\s+web\n$/);
    const all = await ok(['get', 'all', '-n', 'cmds']);
    assert.match(all, /^deployment\.apps\/web\s/m);
    assert.match(all, /^job\.batch\/once\s/m);
    const everywhere = await ok(['get', 'cm', '-A']);
    assert.match(everywhere, /^NAMESPACE\s+NAME\s+DATA\s+AGE\n/);
    assert.match(everywhere, /^cmds\s+settings\s+1\s/m);
    const raw = JSON.parse(await ok(['get', '--raw', '/api/v1/namespaces/cmds/configmaps/settings'])) as Obj;
    assert.equal(raw.kind, 'ConfigMap');
    assert.equal(JSON.parse(await ok(['get', '--raw', '/version'])).gitVersion, 'v1.32.0');
  });

  it("get prints the columns of kube-apiserver's printers for every built-in kind", async () => {
    await ok(['apply', '-f', file('kinds.yaml', KINDS)]);
    const headers: Record<string, string> = {
      namespaces: 'NAME STATUS AGE',
      nodes: 'NAME STATUS ROLES AGE VERSION',
      pods: 'NAME READY STATUS RESTARTS AGE',
      services: 'NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE',
      endpoints: 'NAME ENDPOINTS AGE',
      configmaps: 'NAME DATA AGE',
      secrets: 'NAME TYPE DATA AGE',
      serviceaccounts: 'NAME SECRETS AGE',
      persistentvolumeclaims: 'NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE',
      persistentvolumes:
        'NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE',
      events: 'LAST SEEN TYPE REASON OBJECT MESSAGE',
      'events.events.k8s.io': 'LAST SEEN TYPE REASON OBJECT MESSAGE',
      resourcequotas: 'NAME AGE REQUEST LIMIT',
      limitranges: 'NAME CREATED AT',
      deployments: 'NAME READY UP-TO-DATE AVAILABLE AGE',
      replicasets: 'NAME DESIRED CURRENT READY AGE',
      statefulsets: 'NAME READY AGE',
      daemonsets: 'NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE',
      controllerrevisions: 'NAME CONTROLLER REVISION AGE',
      jobs: 'NAME STATUS COMPLETIONS DURATION AGE',
      cronjobs: 'NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE',
      leases: 'NAME HOLDER AGE',
      roles: 'NAME CREATED AT',
      rolebindings: 'NAME ROLE AGE',
      clusterroles: 'NAME CREATED AT',
      clusterrolebindings: 'NAME ROLE AGE',
    };
    for (const [resource, header] of Object.entries(headers)) {
      const out = await ok(['get', resource, '-n', 'kinds']);
      assert.equal(
        out
          .split('\n')[0]!
          .trim()
          .split(/\s{2,}/)
          .join(' '),
        header,
        `kubectl get ${resource}`,
      );
    }
    const cj = await ok(['get', 'cronjob', 'nightly', '-n', 'kinds']);
    assert.match(cj, /^nightly\s+0 3 \* \* \*\s+<none>\s+False\s+0\s+<none>\s+\S+\n$/m);
    const quota = await ok(['get', 'quota', 'compute', '-n', 'kinds']);
    // status from the resourcequota controller: what the namespace's pods use (LimitRange gave them limits.cpu).
    assert.match(quota, /^compute\s+\S+\s+pods: \d+\/10\s+limits\.cpu: \d+m?\/2\n$/m);
    for (const resource of Object.keys(headers)) {
      if (resource.startsWith('events')) continue;
      const out = await ok(['describe', resource, '-n', 'kinds']);
      assert.match(out, /^Name:\s+\S+/m, `kubectl describe ${resource}`);
    }
    const json = JSON.parse(await ok(['get', 'cm', 'plain', '-n', 'kinds', '-o', 'json'])) as Obj;
    assert.deepEqual([json.kind, json.data], ['ConfigMap', { k: 'v' }]);
    const yaml = await ok(['get', 'cm', 'plain', '-n', 'kinds', '-o', 'yaml']);
    assert.match(yaml, /^apiVersion: v1\ndata:\n {2}k: v\nkind: ConfigMap\nmetadata:\n/);
    assert.doesNotMatch(yaml, /managedFields/, 'kubectl hides managedFields unless --show-managed-fields');
  });

  it('get -w prints a table row per change, with --output-watch-events', async () => {
    const rows = spawnKubectl(server.url, ['get', 'cm', '-n', 'kinds', '-w', '--output-watch-events'], KUBECTL);
    try {
      await rows.until((out) => /^ADDED\s+plain\s+1\s/m.test(out), 'the initial row');
      await api.create('/api/v1/namespaces/kinds/configmaps', {
        metadata: { name: 'watched' },
        data: { a: '1', b: '2' },
      });
      await api.mergePatch('/api/v1/namespaces/kinds/configmaps/watched', { data: { c: '3' } });
      await api.delete('/api/v1/namespaces/kinds/configmaps/watched');
      await rows.until((out) => /^DELETED\s+watched\s/m.test(out), 'the DELETED row');
      assert.deepEqual(
        rows.lines.filter((l) => /\swatched\s/.test(l)).map((l) => l.split(/\s+/).slice(0, 3).join(' ')),
        ['ADDED watched 2', 'MODIFIED watched 3', 'DELETED watched 3'],
      );
      assert.equal(rows.lines.filter((l) => l.startsWith('EVENT ')).length, 1, 'one header');
      assert.equal(rows.stderr, '');
    } finally {
      await rows.stop();
    }
  });

  it('label and annotate (--overwrite), set image and set env', async () => {
    assert.equal(await ok(['label', 'cm', 'settings', '-n', 'cmds', 'tier=backend']), 'configmap/settings labeled\n');
    const clash = await run(['label', 'cm', 'settings', '-n', 'cmds', 'tier=frontend']);
    assert.equal(clash.code, 1);
    assert.match(clash.stderr, /'tier' already has a value \(backend\), and --overwrite is false/);
    assert.equal(
      await ok(['label', 'cm', 'settings', '-n', 'cmds', 'tier=frontend', '--overwrite']),
      'configmap/settings labeled\n',
    );
    assert.equal(
      await ok(['annotate', 'cm', 'settings', '-n', 'cmds', 'owner=a']),
      `configmap/settings ${ANNOTATED}\n`,
    );
    assert.equal(
      await ok(['annotate', 'cm', 'settings', '-n', 'cmds', 'owner=b', '--overwrite']),
      `configmap/settings ${ANNOTATED}\n`,
    );
    const cm = await api.get('/api/v1/namespaces/cmds/configmaps/settings');
    assert.equal(cm.metadata.labels?.tier, 'frontend');
    assert.equal(cm.metadata.annotations?.owner, 'b');
    assert.equal(
      await ok(['set', 'image', 'deployment/web', '-n', 'cmds', 'nginx=nginx:1.27']),
      'deployment.apps/web image updated\n',
    );
    assert.equal(
      await ok(['set', 'env', 'deployment/web', '-n', 'cmds', 'COLOR=blue']),
      'deployment.apps/web env updated\n',
    );
    const web = await api.get('/apis/apps/v1/namespaces/cmds/deployments/web');
    const c = (web.spec as { template: { spec: { containers: Array<{ image: string; env: unknown }> } } }).template.spec
      .containers[0]!;
    assert.equal(c.image, 'nginx:1.27');
    assert.deepEqual(c.env, [{ name: 'COLOR', value: 'blue' }]);
  });

  it('describe prints the object and the events found by field selector', async () => {
    const cm = await api.get('/api/v1/namespaces/cmds/configmaps/settings');
    await api.create('/api/v1/namespaces/cmds/events', {
      metadata: { name: 'settings.1' },
      involvedObject: {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        name: 'settings',
        namespace: 'cmds',
        uid: cm.metadata.uid,
      },
      reason: 'Reloaded',
      message: 'configuration reloaded',
      type: 'Normal',
      source: { component: 'config-watcher' },
      count: 1,
      firstTimestamp: cm.metadata.creationTimestamp,
      lastTimestamp: cm.metadata.creationTimestamp,
    });
    const out = await ok(['describe', 'cm', 'settings', '-n', 'cmds']);
    assert.match(out, /^Name:\s+settings\nNamespace:\s+cmds\nLabels:\s+tier=frontend\n/);
    assert.match(
      out,
      /Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message\n\s+----.*\n\s+Normal\s+Reloaded\s+\S+\s+config-watcher\s+configuration reloaded\n/,
    );
    const ns = await ok(['describe', 'ns', 'cmds']);
    assert.match(ns, /Status:\s+Active\n\nNo resource quota\.\n\nNo LimitRange resource\.\n/);
    const deploy = await ok(['describe', 'deployment', 'web', '-n', 'cmds']);
    assert.match(deploy, /^Name:\s+web\n/);
    assert.match(deploy, /^Replicas:\s+2 desired/m);
    assert.match(deploy, /^StrategyType:\s+RollingUpdate\n/m);
    assert.match(deploy, /^NewReplicaSet:\s+web-[a-z0-9]+ /m);
    assert.match(deploy, /Normal\s+ScalingReplicaSet\s+.*deployment-controller\s+Scaled up replica set web-/);
    for (const target of [
      ['secret', 'creds'],
      ['job', 'once'],
      ['svc', 'kubernetes', '-n', 'default'],
      ['sa', 'default'],
    ]) {
      const r = await run(['describe', ...target, ...(target.includes('-n') ? [] : ['-n', 'cmds'])]);
      if (target[0] === 'sa' && r.code !== 0) continue; // no service-account controller creates "default" yet
      assert.equal(r.code, 0, `describe ${target.join(' ')}: ${r.stderr}`);
    }
  });

  it('wait --for=condition|jsonpath|delete and delete --wait', async () => {
    await ok([
      'apply',
      '-f',
      file(
        'claim.yaml',
        'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: claim, namespace: cmds}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n',
      ),
    ]);
    const cond = spawnKubectl(
      server.url,
      ['wait', '--for=condition=Resizing', 'pvc/claim', '-n', 'cmds', '--timeout=20s'],
      KUBECTL,
    );
    const path = spawnKubectl(
      server.url,
      ['wait', '--for=jsonpath={.data.mode}=fastest', 'cm/settings', '-n', 'cmds', '--timeout=20s'],
      KUBECTL,
    );
    await api.expect(200, '/api/v1/namespaces/cmds/persistentvolumeclaims/claim/status', {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: { status: { conditions: [{ type: 'Resizing', status: 'True' }] } },
    });
    await api.mergePatch('/api/v1/namespaces/cmds/configmaps/settings', { data: { mode: 'fastest' } });
    assert.equal(await cond.exited, 0, cond.stderr);
    assert.equal(cond.stdout, 'persistentvolumeclaim/claim condition met\n');
    assert.equal(await path.exited, 0, path.stderr);
    assert.equal(path.stdout, 'configmap/settings condition met\n');

    // delete --wait on an object held by a finalizer returns once the finalizer is gone.
    await api.create('/api/v1/namespaces/cmds/configmaps', {
      metadata: { name: 'held', finalizers: ['example.com/hold'] },
    });
    const gone = spawnKubectl(
      server.url,
      ['wait', '--for=delete', 'cm/held', '-n', 'cmds', '--timeout=20s', '-v=6'],
      KUBECTL,
    );
    // Only a wait that saw the object prints "condition met": one that starts after it is gone succeeds silently.
    await gone.untilStderr(
      (log) => /configmaps\/held\S* 200 OK|configmaps\/held" status="200 OK"/.test(log),
      'kubectl wait to find the ConfigMap',
    );
    const deleting = spawnKubectl(
      server.url,
      ['delete', 'cm', 'held', '-n', 'cmds', '--wait=true', '--timeout=20s'],
      KUBECTL,
    );
    await deleting.until((out) => out.includes('configmap "held" deleted'), 'the delete to be accepted');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(deleting.child.exitCode, null, 'delete --wait waits for the finalizer');
    await api.mergePatch('/api/v1/namespaces/cmds/configmaps/held', { metadata: { finalizers: null } });
    assert.equal(await deleting.exited, 0, deleting.stderr);
    assert.equal(await gone.exited, 0, gone.stderr);
    assert.match(gone.stdout, /^configmap\/held condition met\n$/);
  });

  it('edit with a scripted EDITOR, and diff against a server dry-run', async () => {
    const editor = file('editor.sh', '#!/bin/sh\nsed -i \'s/mode: fastest/mode: edited/\' "$1"\n');
    chmodSync(editor, 0o755);
    assert.equal(
      await ok(['edit', 'cm', 'settings', '-n', 'cmds'], { env: { EDITOR: editor, KUBE_EDITOR: editor } }),
      'configmap/settings edited\n',
    );
    const cm = await api.get('/api/v1/namespaces/cmds/configmaps/settings');
    assert.equal((cm.data as Record<string, string>).mode, 'edited');
    assert.ok((cm.metadata.managedFields as Array<{ manager: string }>).some((m) => m.manager === 'kubectl-edit'));

    const manifest = (mode: string): string =>
      file(
        'diff.yaml',
        `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: cmds\n  labels: {tier: frontend}\n  annotations: {owner: b}\ndata:\n  mode: ${mode}\n`,
      );
    const changed = await run(['diff', '-f', manifest('planned')]);
    assert.equal(changed.code, 1, changed.stderr);
    assert.equal(changed.stderr, '');
    assert.match(changed.stdout, /^-\s+mode: edited$/m);
    assert.match(changed.stdout, /^\+\s+mode: planned$/m);
    assert.equal(
      ((await api.get('/api/v1/namespaces/cmds/configmaps/settings')).data as Record<string, string>).mode,
      'edited',
      'diff changes nothing',
    );
    // The live values already: a server-side diff changes only last-applied-configuration (settings was applied
    // client-side), which kube-apiserver rewrites to every configuration kubectl applies server-side.
    const same = await run(['diff', '-f', manifest('edited'), '--server-side']);
    assert.equal(same.code, 1, `${same.stdout}${same.stderr}`);
    assert.equal(same.stderr, '');
    assert.deepEqual(
      same.stdout.split('\n').filter((l) => /^[-+](?![-+]{2} )/.test(l)),
      [
        '-      {"apiVersion":"v1","data":{"mode":"slow"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"settings","namespace":"cmds"}}',
        '+      {"apiVersion":"v1","data":{"mode":"edited"},"kind":"ConfigMap","metadata":{"annotations":{"owner":"b"},"labels":{"tier":"frontend"},"name":"settings","namespace":"cmds"}}',
      ],
    );
  });

  it('auth can-i [--list] and auth whoami', async () => {
    assert.equal(await ok(['auth', 'can-i', 'create', 'pods']), 'yes\n');
    assert.equal(await ok(['auth', 'can-i', 'delete', 'deployments', '-n', 'cmds']), 'yes\n');
    const list = await ok(['auth', 'can-i', '--list']);
    assert.match(
      list,
      /^Resources\s+Non-Resource URLs\s+Resource Names\s+Verbs\n\*\.\*\s+\[\]\s+\[\]\s+\[\*\]\n\s+\[\*\]\s+\[\]\s+\[\*\]\n$/,
    );
    // kubectl 1.27 asks for SelfSubjectReview in v1beta1 or v1alpha1 only; kube-sim serves v1 (GA since 1.28).
    if (kubectlClientMinor() >= 28)
      assert.match(await ok(['auth', 'whoami']), /^ATTRIBUTE\s+VALUE\nUsername\s+kubernetes-admin\n/);
  });

  it('exec: stdout, stderr and the exit code, stdin with -i (SPDY before 1.30, WebSocket after)', async () => {
    await ok(['run', 'shell', '-n', 'cmds', '--image=busybox', '--', 'sleep', '3600']);
    await ok(['wait', '--for=condition=Ready', 'pod/shell', '-n', 'cmds', '--timeout=30s']);
    assert.equal(await ok(['exec', 'shell', '-n', 'cmds', '--', 'echo', 'hello', 'world']), 'hello world\n');
    const failed = await run(['exec', 'shell', '-n', 'cmds', '--', 'cat', '/etc/hostname', '/nope']);
    assert.equal(failed.code, 1, failed.stderr);
    assert.equal(failed.stdout, 'shell\n');
    assert.equal(failed.stderr, 'cat: /nope: No such file or directory\ncommand terminated with exit code 1\n');
    const script = await run(['exec', 'shell', '-n', 'cmds', '--', 'sh', '-c', 'echo $HOSTNAME; exit 3']);
    assert.equal(script.code, 3, script.stderr);
    assert.equal(script.stdout, 'shell\n');
    assert.equal(script.stderr, 'command terminated with exit code 3\n');
    const missing = await run(['exec', 'shell', '-n', 'cmds', '--', 'frobnicate']);
    assert.equal(missing.code, 127);
    assert.match(missing.stderr, /frobnicate: command not found\ncommand terminated with exit code 127\n$/);
    // stdin: what kubectl reads goes to the process, and its end reaches it.
    const text = 'first line\nsecond line, ünïcödé\n';
    assert.equal(await ok(['exec', '-i', 'shell', '-n', 'cmds', '--', 'cat'], { input: text }), text);
    const lines = await run(['exec', '-i', 'shell', '-n', 'cmds', '--', 'sh'], {
      input: 'echo one\necho two\nexit 5\n',
    });
    assert.equal(lines.code, 5, lines.stderr);
    assert.equal(lines.stdout, 'one\ntwo\n');
    // The API server's checks come first, as a Status.
    const wrong = await run(['exec', 'shell', '-n', 'cmds', '-c', 'nope', '--', 'true']);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /Error from server \(BadRequest\): container nope is not valid for pod shell/);
  });

  it("attach: a running container's output as it is written, until the container exits", async () => {
    await ok([
      'apply',
      '-f',
      file(
        'attached.yaml',
        'apiVersion: v1\nkind: Pod\nmetadata: {name: attached, namespace: cmds, annotations: {kube-sim.dev/stop-delay: 1s}}\nspec: {containers: [{name: main, image: nginx}]}\n',
      ),
    ]);
    await ok(['wait', '--for=condition=Ready', 'pod/attached', '-n', 'cmds', '--timeout=30s']);
    const attach = spawnKubectl(server.url, ['attach', 'attached', '-n', 'cmds', '-v=6'], KUBECTL);
    try {
      // -v=6 logs the upgrade's answer: from then on the container's output reaches kubectl.
      await attach.untilStderr((log) => /\/attach\?.*101 Switching Protocols/.test(log), 'the attach to be upgraded');
      // Deleting the pod stops the container: what it writes meanwhile is what attach shows, then it ends.
      await ok(['delete', 'pod', 'attached', '-n', 'cmds', '--wait=false']);
      assert.equal(await attach.exited, 0, attach.stderr);
      assert.equal(
        attach.stdout,
        '[kube-sim] container main received SIGTERM\n[kube-sim] container main exited with code 0\n',
      );
    } finally {
      await attach.stop();
    }
    const none = await run(['attach', 'attached', '-n', 'cmds']);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /pods "attached" not found/);
  });

  it('port-forward: kubectl listens; nothing listens in the simulated pod, so the connection is refused as containerd refuses it', async () => {
    const forward = spawnKubectl(server.url, ['port-forward', 'pod/shell', '-n', 'cmds', ':8080'], KUBECTL);
    try {
      await forward.until((out) => /Forwarding from 127\.0\.0\.1:\d+ -> 8080\n/.test(out), 'the local listener');
      const port = Number(/Forwarding from 127\.0\.0\.1:(\d+)/.exec(forward.stdout)![1]);
      const received = await new Promise<string>((resolve) => {
        let data = '';
        const socket = connect(port, '127.0.0.1');
        socket.setEncoding('utf8').on('data', (chunk: string) => (data += chunk));
        socket.on('error', () => resolve(data));
        socket.on('close', () => resolve(data));
      });
      assert.equal(received, '', 'the forwarded connection closes without data');
      // kubectl reports the kubelet's error and, as it does on a real cluster, gives up on the pod.
      assert.equal(await forward.exited, 1);
      assert.match(
        forward.stderr,
        /an error occurred forwarding \d+ -> 8080: error forwarding port 8080 to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace \\?"\/var\/run\/netns\/cni-[0-9a-f-]{36}\\?": failed to connect to localhost:8080 inside namespace \\?"[0-9a-f]{64}\\?", IPv4: dial tcp4 127\.0\.0\.1:8080: connect: connection refused IPv6 dial tcp6 \[::1\]:8080: connect: connection refused/,
      );
      assert.match(forward.stderr, /error: lost connection to pod\n$/);
    } finally {
      await forward.stop();
    }
  });

  it('scale and kubectl proxy in front of the simulator', async () => {
    assert.equal(
      await ok(['scale', 'deployment', 'web', '-n', 'cmds', '--replicas=3']),
      'deployment.apps/web scaled\n',
    );
    assert.equal(
      ((await api.get('/apis/apps/v1/namespaces/cmds/deployments/web')).spec as { replicas: number }).replicas,
      3,
    );
    const proxy = spawnKubectl(server.url, ['proxy', '--port=0'], KUBECTL);
    try {
      await proxy.until((out) => /Starting to serve on 127\.0\.0\.1:\d+/.test(out), 'the proxy to listen');
      const port = /127\.0\.0\.1:(\d+)/.exec(proxy.stdout)![1]!;
      const viaProxy = await kubectl(`http://127.0.0.1:${port}`, [
        'get',
        'cm',
        'settings',
        '-n',
        'cmds',
        '-o',
        'jsonpath={.data.mode}',
      ]);
      assert.equal(viaProxy.code, 0, viaProxy.stderr);
      assert.equal(viaProxy.stdout, 'edited');
    } finally {
      await proxy.stop();
    }
  });
});
