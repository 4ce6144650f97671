import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { kubectl, kubectlMissing, type KubectlResult } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { until } from './helpers/wait.js';

// Persistent volumes as on kind: the default StorageClass `standard` (rancher.io/local-path, WaitForFirstConsumer),
// the simulated provisioner, the PV controller binding static and provisioned volumes, the scheduler's VolumeBinding
// plugin, protection finalizers and generic ephemeral volumes; driven by the real kubectl.

const missing = kubectlMissing();

type Spec = Record<string, unknown>;

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

describe('persistent volumes', { skip: missing ?? false }, () => {
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
  const get = (path: string) => api.get(path);
  const phase = (o: Obj): string => String((o.status as Spec | undefined)?.phase ?? '');
  const claim = (ns: string, name: string) => get(`/api/v1/namespaces/${ns}/persistentvolumeclaims/${name}`);
  const boundClaim = (ns: string, name: string) =>
    until(async () => {
      const c = await claim(ns, name);
      return phase(c) === 'Bound' && c;
    }, `claim ${ns}/${name} Bound`);
  const events = async (ns: string, name: string): Promise<Array<{ reason: string; message: string }>> => {
    const list = await api.list(`/api/v1/namespaces/${ns}/events?fieldSelector=involvedObject.name%3D${name}`);
    return list.items as unknown as Array<{ reason: string; message: string }>;
  };
  /** The FailedScheduling message of a pod, once it has one. */
  const failedScheduling = (ns: string, pod: string) =>
    until(async () => {
      const e = (await events(ns, pod)).find((x) => x.reason === 'FailedScheduling');
      return e?.message;
    }, `FailedScheduling for ${ns}/${pod}`);

  before(async () => {
    server = await startServer(['--nodes', '3']);
    api = new Api(server.url);
  });
  after(async () => {
    await server?.stop();
  });

  it("a new cluster has kind's default StorageClass", async () => {
    assert.deepEqual(table(await ok(['get', 'storageclass'])), [
      'NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE',
      'standard (default) rancher.io/local-path Delete WaitForFirstConsumer false <age>',
    ]);
  });

  it('a StatefulSet on WaitForFirstConsumer: the scheduler picks the node, the claims bind, the pods run there', async () => {
    await api.namespace('sts');
    await ok(
      ['apply', '-n', 'sts', '-f', '-'],
      `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx
        volumeMounts: [{name: www, mountPath: /usr/share/nginx/html}]
  volumeClaimTemplates:
  - metadata: {name: www}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`,
    );
    for (const ordinal of [0, 1]) {
      const name = `web-${ordinal}`;
      const pod = await until(
        async () => {
          const p = await api.request<Obj>(`/api/v1/namespaces/sts/pods/${name}`);
          return p.status === 200 && phase(p.body) === 'Running' && p.body;
        },
        `${name} Running`,
        20_000,
      );
      const node = String((pod.spec as Spec).nodeName);
      const pvc = await boundClaim('sts', `www-${name}`);
      assert.equal(pvc.metadata.annotations?.['volume.kubernetes.io/selected-node'], node);
      assert.equal(pvc.metadata.annotations?.['volume.kubernetes.io/storage-provisioner'], 'rancher.io/local-path');
      assert.equal(pvc.metadata.annotations?.['pv.kubernetes.io/bind-completed'], 'yes');
      assert.deepEqual(pvc.metadata.finalizers, ['kubernetes.io/pvc-protection']);
      assert.equal((pvc.spec as Spec).storageClassName, 'standard');
      const volumeName = String((pvc.spec as Spec).volumeName);
      assert.equal(volumeName, `pvc-${pvc.metadata.uid}`);
      const pv = await get(`/api/v1/persistentvolumes/${volumeName}`);
      assert.equal(phase(pv), 'Bound');
      assert.deepEqual(pv.metadata.finalizers, ['kubernetes.io/pv-protection']);
      const pvSpec = pv.spec as Spec;
      assert.deepEqual(pvSpec.nodeAffinity, {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] },
          ],
        },
      });
      assert.deepEqual(pvSpec.hostPath, {
        path: `/var/local-path-provisioner/${volumeName}_sts_www-${name}`,
        type: 'DirectoryOrCreate',
      });
      assert.equal(pvSpec.persistentVolumeReclaimPolicy, 'Delete');
      assert.equal((pvSpec.claimRef as Spec).uid, pvc.metadata.uid);
      const reasons = (await events('sts', `www-${name}`)).map((e) => e.reason);
      for (const r of ['ExternalProvisioning', 'Provisioning', 'ProvisioningSucceeded'])
        assert.ok(reasons.includes(r), `www-${name} events: ${reasons.join(', ')}`);
      const provisioned = (await events('sts', `www-${name}`)).find((e) => e.reason === 'ProvisioningSucceeded');
      assert.equal(provisioned?.message, `Successfully provisioned volume ${volumeName}`);
    }
    // The claim's volume is mounted writable.
    assert.equal(
      await ok([
        'exec',
        '-n',
        'sts',
        'web-0',
        '--',
        'sh',
        '-c',
        'echo hello > /usr/share/nginx/html/index.html && cat /usr/share/nginx/html/index.html',
      ]),
      'hello\n',
    );
    const pvc = table(await ok(['get', 'pvc', '-n', 'sts']));
    assert.equal(pvc[0], 'NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE');
    assert.match(pvc[1]!, /^www-web-0 Bound pvc-[0-9a-f-]{36} 1Gi RWO standard <unset> <age>$/);
    const pv = table(await ok(['get', 'pv']));
    assert.equal(
      pv[0],
      'NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE',
    );
    assert.ok(
      pv.some((l) => /^pvc-[0-9a-f-]{36} 1Gi RWO Delete Bound sts\/www-web-1 standard <unset> <age>$/.test(l)),
      pv.join('\n'),
    );
  });

  it('a static PV binds to a matching claim, and is Released (Retain) or Failed (Delete) when the claim goes', async () => {
    await api.namespace('static');
    const volume = (name: string, policy: string, size: string) => `apiVersion: v1
kind: PersistentVolume
metadata: {name: ${name}, labels: {type: local}}
spec:
  storageClassName: manual
  capacity: {storage: ${size}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: ${policy}
  hostPath: {path: /mnt/data}
`;
    await ok(
      ['apply', '-f', '-'],
      `${volume('pv-small', 'Retain', '500Mi')}---\n${volume('pv-big', 'Retain', '10Gi')}`,
    );
    await until(async () => phase(await get('/api/v1/persistentvolumes/pv-small')) === 'Available', 'Available');
    const pvClaim = (name: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}}
spec: {storageClassName: manual, accessModes: [ReadWriteOnce], resources: {requests: {storage: 400Mi}}}
`;
    await ok(['apply', '-n', 'static', '-f', '-'], pvClaim('task-pv-claim'));
    const bound = await boundClaim('static', 'task-pv-claim');
    // The smallest volume that fits.
    assert.equal((bound.spec as Spec).volumeName, 'pv-small');
    assert.deepEqual((bound.status as Spec).capacity, { storage: '500Mi' });
    assert.deepEqual(table(await ok(['get', 'pvc', '-n', 'static'])), [
      'NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE',
      'task-pv-claim Bound pv-small 500Mi RWO manual <unset> <age>',
    ]);
    const pv = await until(async () => {
      const v = await get('/api/v1/persistentvolumes/pv-small');
      return phase(v) === 'Bound' && v;
    }, 'pv-small Bound');
    assert.equal(pv.metadata.annotations?.['pv.kubernetes.io/bound-by-controller'], 'yes');
    await ok(['delete', 'pvc', 'task-pv-claim', '-n', 'static']);
    await until(async () => phase(await get('/api/v1/persistentvolumes/pv-small')) === 'Released', 'Released');
    assert.deepEqual(table(await ok(['get', 'pv', 'pv-small'])), [
      'NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE',
      'pv-small 500Mi RWO Retain Released static/task-pv-claim manual <unset> <age>',
    ]);
    // A Released volume is not bound again: the next claim gets the other one.
    await ok(['apply', '-n', 'static', '-f', '-'], pvClaim('second'));
    assert.equal(((await boundClaim('static', 'second')).spec as Spec).volumeName, 'pv-big');

    await ok(['apply', '-f', '-'], volume('pv-delete', 'Delete', '100Mi'));
    await ok(
      ['apply', '-n', 'static', '-f', '-'],
      `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: tiny}
spec: {storageClassName: manual, accessModes: [ReadWriteOnce], resources: {requests: {storage: 50Mi}}}
`,
    );
    assert.equal(((await boundClaim('static', 'tiny')).spec as Spec).volumeName, 'pv-delete');
    await ok(['delete', 'pvc', 'tiny', '-n', 'static']);
    const failed = await until(async () => {
      const v = await get('/api/v1/persistentvolumes/pv-delete');
      return phase(v) === 'Failed' && v;
    }, 'pv-delete Failed');
    assert.equal(
      (failed.status as Spec).message,
      'error getting deleter volume plugin for volume "pv-delete": no deletable volume plugin matched',
    );
  });

  it("the scheduler waits for unbound immediate claims and follows a bound local volume's node affinity", async () => {
    await api.namespace('affinity');
    await ok(
      ['apply', '-f', '-'],
      `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-node-2}
spec:
  storageClassName: local-static
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  local: {path: /mnt/disks/ssd1}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [node-2]}]}]
`,
    );
    const podUsing = (name: string, claimName: string, extra = '') => `apiVersion: v1
kind: Pod
metadata: {name: ${name}}
spec:
  ${extra}
  containers: [{name: app, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: ${claimName}}}]
`;
    const pvClaim = (name: string, cls: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ${name}}
spec: {storageClassName: ${cls}, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`;
    // An Immediate class no one provisions: the claim stays Pending, and its pod is not scheduled.
    await ok(
      ['apply', '-n', 'affinity', '-f', '-'],
      `${pvClaim('waiting', 'local')}---\n${podUsing('stuck', 'waiting')}`,
    );
    assert.equal(
      await failedScheduling('affinity', 'stuck'),
      '0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.',
    );
    await ok(['apply', '-n', 'affinity', '-f', '-'], podUsing('nothing', 'nope'));
    assert.equal(
      await failedScheduling('affinity', 'nothing'),
      '0/3 nodes are available: persistentvolumeclaim "nope" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.',
    );
    // A claim bound to a local volume on node-2: its pods go there, or nowhere.
    await ok(['apply', '-n', 'affinity', '-f', '-'], pvClaim('ssd', 'local-static'));
    await boundClaim('affinity', 'ssd');
    await ok(['apply', '-n', 'affinity', '-f', '-'], podUsing('on-ssd', 'ssd'));
    const placed = await until(async () => {
      const p = await get('/api/v1/namespaces/affinity/pods/on-ssd');
      return (p.spec as Spec).nodeName as string | undefined;
    }, 'on-ssd scheduled');
    assert.equal(placed, 'node-2');
    await ok(
      ['apply', '-n', 'affinity', '-f', '-'],
      podUsing('elsewhere', 'ssd', 'nodeSelector: {kubernetes.io/hostname: node-1}'),
    );
    assert.equal(
      await failedScheduling('affinity', 'elsewhere'),
      "0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    );
  });

  it('a claim in use is Terminating until its pod goes; an Immediate local-path class provisions at once', async () => {
    await api.namespace('protect');
    await ok(
      ['apply', '-n', 'protect', '-f', '-'],
      `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: shared}
provisioner: rancher.io/local-path
volumeBindingMode: Immediate
reclaimPolicy: Delete
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {storageClassName: shared, accessModes: [ReadWriteOnce], resources: {requests: {storage: 2Gi}}}
`,
    );
    const bound = await boundClaim('protect', 'data');
    const volumeName = String((bound.spec as Spec).volumeName);
    assert.equal((await get(`/api/v1/persistentvolumes/${volumeName}`)).spec?.constructor, Object);
    assert.equal(((await get(`/api/v1/persistentvolumes/${volumeName}`)).spec as Spec).nodeAffinity, undefined);
    await ok(
      ['apply', '-n', 'protect', '-f', '-'],
      `apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  containers: [{name: app, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`,
    );
    await until(async () => phase(await get('/api/v1/namespaces/protect/pods/user')) === 'Running', 'user Running');
    await ok(['delete', 'pvc', 'data', '-n', 'protect', '--wait=false']);
    await until(
      async () => table(await ok(['get', 'pvc', 'data', '-n', 'protect']))[1]?.includes(' Terminating '),
      'the claim shown Terminating',
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await api.request(`/api/v1/namespaces/protect/persistentvolumeclaims/data`)).status, 200);
    await api.delete('/api/v1/namespaces/protect/pods/user', { gracePeriodSeconds: 0 });
    await until(
      async () => (await api.request(`/api/v1/namespaces/protect/persistentvolumeclaims/data`)).status === 404,
      'the claim gone with its last user',
    );
    // The provisioned volume goes with it (reclaim policy Delete).
    await until(async () => (await api.request(`/api/v1/persistentvolumes/${volumeName}`)).status === 404, 'PV gone');
  });

  it('a generic ephemeral volume gets a claim <pod>-<volume> owned by the pod, bound, and gone with the pod', async () => {
    await api.namespace('eph');
    await ok(
      ['apply', '-n', 'eph', '-f', '-'],
      `apiVersion: v1
kind: Pod
metadata: {name: scratch}
spec:
  containers: [{name: app, image: busybox, volumeMounts: [{name: cache, mountPath: /cache}]}]
  volumes:
  - name: cache
    ephemeral:
      volumeClaimTemplate:
        metadata: {labels: {type: scratch}}
        spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`,
    );
    const pvc = await boundClaim('eph', 'scratch-cache');
    const pod = await get('/api/v1/namespaces/eph/pods/scratch');
    assert.deepEqual(pvc.metadata.labels, { type: 'scratch' });
    assert.deepEqual(pvc.metadata.ownerReferences, [
      {
        apiVersion: 'v1',
        kind: 'Pod',
        name: 'scratch',
        uid: pod.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    await until(async () => phase(await get('/api/v1/namespaces/eph/pods/scratch')) === 'Running', 'scratch Running');
    await api.delete('/api/v1/namespaces/eph/pods/scratch', { gracePeriodSeconds: 0 });
    await until(
      async () => (await api.request('/api/v1/namespaces/eph/persistentvolumeclaims/scratch-cache')).status === 404,
      'the claim deleted with its pod',
    );
  });
});
