import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, type StatusBody } from './helpers/http.js';
import { kubectl, kubectlMissing, spawnKubectl } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// `kubectl debug` through the pods/ephemeralcontainers subresource: the container added, validated as
// kube-apiserver's ValidatePodEphemeralContainersUpdate, started by the kubelet, and reached by attach; and
// `kubectl debug --copy-to`, which makes a copy of the pod with the debugging container in it.

type Obj = Record<string, unknown>;
const missing = kubectlMissing();
const POD = '/api/v1/namespaces/default/pods/web';
const EPHEMERAL = `${POD}/ephemeralcontainers`;
const SMP = { 'content-type': 'application/strategic-merge-patch+json' };

function ephemeralContainers(pod: Obj): Obj[] {
  return ((pod.spec as Obj).ephemeralContainers as Obj[] | undefined) ?? [];
}

function ephemeralStatus(pod: Obj, name: string): Obj | undefined {
  const list = ((pod.status as Obj).ephemeralContainerStatuses as Obj[] | undefined) ?? [];
  return list.find((cs) => cs.name === name);
}

describe('kubectl debug adds ephemeral containers', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;

  before(async () => {
    server = await startServer(['--nodes', '1']);
    api = new Api(server.url);
    const pod =
      'apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: web, image: nginx:1.27}]}\n';
    const applied = await kubectl(server.url, ['apply', '-f', '-'], { input: pod });
    assert.equal(applied.code, 0, applied.stderr);
    await until(async () => ((await api.get(POD)).status as Obj).phase === 'Running', 'the pod to run');
  });
  after(async () => {
    await server.stop();
  });

  const run = (args: string[], input?: string) =>
    kubectl(server.url, args, { timeoutMs: 30_000, ...(input === undefined ? {} : { input }) });

  async function until(check: () => Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 100; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`timed out waiting for ${what}`);
  }

  test('discovery lists pods/ephemeralcontainers as a Pod subresource with get, patch and update', async () => {
    const list = await api.get('/api/v1');
    const entry = (list.resources as Obj[]).find((r) => r.name === 'pods/ephemeralcontainers');
    assert.deepEqual(entry && { kind: entry.kind, verbs: entry.verbs, namespaced: entry.namespaced }, {
      kind: 'Pod',
      verbs: ['get', 'patch', 'update'],
      namespaced: true,
    });
  });

  test('kubectl debug pod/web --image=busybox adds a debugger container the kubelet starts; its sh exits at once', async () => {
    const r = await run(['debug', 'pod/web', '--image=busybox']);
    assert.equal(r.code, 0, r.stderr);
    const name = /^Defaulting debug container name to (debugger-[a-z0-9]{5})\.$/m.exec(r.stdout)?.[1];
    assert.ok(name, r.stdout);
    let pod: Obj = {};
    // Without -i, busybox's `sh` finds no input and exits 0, as on a cluster: the container is Completed, not restarted.
    await until(async () => {
      pod = await api.get(POD);
      return (ephemeralStatus(pod, name)?.state as Obj | undefined)?.terminated !== undefined;
    }, 'the ephemeral container to exit');
    const added = ephemeralContainers(pod).find((c) => c.name === name);
    // Defaulted as any container: pull policy from the untagged image, termination message path and policy.
    assert.deepEqual(added, {
      image: 'busybox',
      imagePullPolicy: 'Always',
      name,
      resources: {},
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'File',
    });
    const status = ephemeralStatus(pod, name)!;
    assert.equal(status.image, 'docker.io/library/busybox:latest');
    assert.equal(status.ready, false);
    assert.equal(status.restartCount, 0);
    assert.equal(status.started, undefined);
    const terminated = (status.state as Obj).terminated as Obj;
    assert.deepEqual([terminated.exitCode, terminated.reason], [0, 'Completed']);
    assert.ok(terminated.startedAt && terminated.finishedAt);
    assert.match(String(status.containerID), /^containerd:\/\/[0-9a-f]{64}$/);
    // The pod's own container is as it was, and the pod still Ready.
    assert.equal(((pod.status as Obj).containerStatuses as Obj[]).length, 1);

    const events = await api.list(
      `/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=web,involvedObject.fieldPath=${encodeURIComponent(`spec.ephemeralContainers{${name}}`)}`,
    );
    assert.deepEqual(
      events.items.map((e) => [e.reason, e.message]),
      [
        ['Pulling', 'Pulling image "busybox"'],
        ['Pulled', 'Successfully pulled image "busybox" in 0s (0s including waiting). Image size: 0 bytes.'],
        ['Created', `Created container: ${name}`],
        ['Started', `Started container ${name}`],
      ],
    );
    const described = await run(['describe', 'pod', 'web']);
    assert.equal(described.code, 0, described.stderr);
    assert.match(described.stdout, new RegExp(`Ephemeral Containers:\\n  ${name}:\\n`));
  });

  async function terminatedState(container: string): Promise<Obj> {
    let state: Obj | undefined;
    await until(async () => {
      state = (ephemeralStatus(await api.get(POD), container)?.state as Obj | undefined)?.terminated as Obj | undefined;
      return state !== undefined;
    }, `ephemeral container ${container} to exit`);
    return state!;
  }

  test('kubectl debug -i --target runs the shell on stdin; its exit code ends the container, its output is the log', async () => {
    const r = await run(
      ['debug', '-it', 'pod/web', '--image=busybox', '--target=web', '-c', 'shell', '--', 'sh'],
      'echo "hello from $HOSTNAME"\nexit 3\n',
    );
    assert.equal(r.code, 0, r.stderr);
    const [targeting, ...answer] = r.stdout.split('\n');
    assert.match(targeting!, /^Targeting container "web"\./);
    assert.deepEqual(answer, ['hello from web', '']);
    const pod = await api.get(POD);
    assert.equal(ephemeralContainers(pod).find((c) => c.name === 'shell')?.targetContainerName, 'web');
    const terminated = await terminatedState('shell');
    assert.deepEqual([terminated.exitCode, terminated.reason], [3, 'Error']);
    assert.equal((await run(['logs', 'web', '-c', 'shell'])).stdout, 'hello from web\n');
    // The pod's own container runs on, Ready.
    const conditions = ((await api.get(POD)).status as Obj).conditions as Obj[];
    assert.equal(conditions.find((c) => c.type === 'Ready')?.status, 'True');
  });

  test('a client that goes away leaves the shell running; kubectl attach -i reaches it, and its exit ends it', async (t) => {
    const first = spawnKubectl(
      server.url,
      ['debug', '-i', 'pod/web', '--image=busybox', '-c', 'keeper', '--', 'sh'],
      undefined,
      true,
    );
    t.after(() => first.stop());
    first.child.stdin!.write('echo first\n');
    await first.until((out) => out.includes('first\n'), 'the shell to answer', 20_000);
    await first.stop();
    // Its stdin stays open (no stdinOnce): the shell still runs.
    const state = ephemeralStatus(await api.get(POD), 'keeper')?.state as Obj;
    assert.ok((state.running as Obj).startedAt, JSON.stringify(state));

    const attached = await run(['attach', '-i', 'web', '-c', 'keeper'], 'echo attached to $HOSTNAME\nexit 0\n');
    assert.equal(attached.code, 0, attached.stderr);
    assert.equal(attached.stdout, 'attached to web\n');
    const terminated = await terminatedState('keeper');
    assert.deepEqual([terminated.exitCode, terminated.reason], [0, 'Completed']);
  });

  test('a debugging image no registry has: ErrImagePull, then ImagePullBackOff, as any container', async () => {
    const r = await run(['debug', 'pod/web', '--image=busybox:nonexistent', '-c', 'broken']);
    assert.equal(r.code, 0, r.stderr);
    let waiting: Obj | undefined;
    await until(async () => {
      const state = ephemeralStatus(await api.get(POD), 'broken')?.state as Obj | undefined;
      waiting = state?.waiting as Obj | undefined;
      return waiting?.reason === 'ImagePullBackOff';
    }, 'the back-off');
    assert.match(String(waiting!.message), /^Back-off pulling image "busybox:nonexistent": ErrImagePull: /);
    const events = await api.list(
      `/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=web,involvedObject.fieldPath=${encodeURIComponent('spec.ephemeralContainers{broken}')}`,
    );
    assert.deepEqual(
      events.items.map((e) => e.reason),
      ['Pulling', 'Failed', 'Failed', 'BackOff', 'Failed'],
    );
  });

  test('kubectl debug -- sleep runs the command in the exec shell; kubectl exec reaches the container', async () => {
    const r = await run(['debug', 'pod/web', '--image=busybox', '-c', 'sleeper', '--', 'sleep', '3600']);
    assert.equal(r.code, 0, r.stderr);
    await until(
      async () =>
        ((ephemeralStatus(await api.get(POD), 'sleeper')?.state as Obj | undefined)?.running ?? null) !== null,
      'the sleeper to run',
    );
    const exec = await run(['exec', 'web', '-c', 'sleeper', '--', 'sh', '-c', 'echo exec works in $HOSTNAME']);
    assert.equal(exec.code, 0, exec.stderr);
    assert.equal(exec.stdout, 'exec works in web\n');
  });

  test('GET pods/web/ephemeralcontainers answers the Pod; writes through it change only ephemeral containers', async () => {
    const pod = await api.get(EPHEMERAL);
    assert.equal(pod.kind, 'Pod');
    assert.equal((pod.metadata as Obj).name, 'web');
    const spec = pod.spec as Obj;
    const containers = spec.containers as Obj[];
    const body = {
      ...pod,
      metadata: { ...(pod.metadata as Obj), labels: { dropped: 'yes' } },
      spec: {
        ...spec,
        containers: [{ ...containers[0], image: 'nginx:1.28' }],
        ephemeralContainers: [...ephemeralContainers(pod), { name: 'viaput', image: 'alpine:3.20', stdin: true }],
      },
    };
    const put = await api.put(EPHEMERAL, body);
    assert.equal((put.metadata as Obj).labels, undefined);
    assert.equal(((put.spec as Obj).containers as Obj[])[0]!.image, 'nginx:1.27');
    const viaput = ephemeralContainers(put).find((c) => c.name === 'viaput');
    assert.equal(viaput?.imagePullPolicy, 'IfNotPresent');
    assert.equal(viaput?.stdin, true);
  });

  test('ephemeral containers may only be added: removal, change and invalid fields are 422s', async () => {
    const invalid = async (path: string, method: string, body: unknown, headers?: Record<string, string>) => {
      const reply = await api.request<StatusBody>(path, { method, body, ...(headers ? { headers } : {}) });
      assert.equal(reply.status, 422, reply.text);
      assert.equal(reply.body.reason, 'Invalid');
      return reply.body;
    };
    const pod = await api.get(EPHEMERAL);
    const existing = ephemeralContainers(pod);
    const removed = await invalid(EPHEMERAL, 'PUT', {
      ...pod,
      spec: { ...(pod.spec as Obj), ephemeralContainers: existing.filter((c) => c.name !== 'shell') },
    });
    assert.deepEqual(removed.details?.causes, [
      {
        reason: 'FieldValueForbidden',
        message: 'Forbidden: existing ephemeral containers "shell" may not be removed\n',
        field: 'spec.ephemeralContainers',
      },
    ]);
    const changed = await invalid(
      EPHEMERAL,
      'PATCH',
      { spec: { ephemeralContainers: [{ name: 'shell', image: 'alpine' }] } },
      SMP,
    );
    assert.match(changed.message ?? '', /existing ephemeral containers "shell" may not be changed/);

    const bad = await invalid(
      EPHEMERAL,
      'PATCH',
      {
        spec: {
          ephemeralContainers: [
            {
              name: 'web',
              image: 'busybox',
              targetContainerName: 'nope',
              ports: [{ containerPort: 80 }],
              resources: { limits: { cpu: '1' } },
              readinessProbe: { exec: { command: ['true'] } },
              lifecycle: { preStop: { exec: { command: ['true'] } } },
              volumeMounts: [{ name: 'v', mountPath: '/v', subPath: 'x' }],
            },
          ],
        },
      },
      SMP,
    );
    const at = `spec.ephemeralContainers[${existing.length}]`;
    assert.deepEqual(
      bad.details?.causes?.map((c) => [c.field, c.message]),
      [
        [`${at}.name`, 'Duplicate value: "web"'],
        [`${at}.targetContainerName`, 'Not found: "nope"'],
        [`${at}.ports`, 'Forbidden: cannot be set for an Ephemeral Container'],
        [`${at}.resources`, 'Forbidden: cannot be set for an Ephemeral Container'],
        [`${at}.readinessProbe`, 'Forbidden: cannot be set for an Ephemeral Container'],
        [`${at}.lifecycle`, 'Forbidden: cannot be set for an Ephemeral Container'],
        [`${at}.volumeMounts[0].subPath`, 'Forbidden: cannot be set for an Ephemeral Container'],
      ],
    );
    // Nothing of a refused write is stored.
    assert.deepEqual(ephemeralContainers(await api.get(POD)), existing);

    // Not through the pod itself, and not on create.
    const update = await invalid(
      POD,
      'PATCH',
      { spec: { ephemeralContainers: [{ name: 'x', image: 'busybox' }] } },
      SMP,
    );
    assert.match(update.message ?? '', /spec: Forbidden: pod updates may not change fields other than/);
    const created = await invalid('/api/v1/namespaces/default/pods', 'POST', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'born-debugged' },
      spec: { containers: [{ name: 'a', image: 'busybox' }], ephemeralContainers: [{ name: 'x', image: 'busybox' }] },
    });
    assert.deepEqual(
      created.details?.causes?.map((c) => [c.field, c.message]),
      [['spec.ephemeralContainers', 'Forbidden: cannot be set on create']],
    );
  });

  test('kubectl debug --copy-to makes a running copy of the pod with the debugging container added', async () => {
    const r = await run([
      'debug',
      'web',
      '--copy-to=web-copy',
      '--image=busybox',
      '-c',
      'debugger',
      '--',
      'sleep',
      '1d',
    ]);
    assert.equal(r.code, 0, r.stderr);
    let copy: Obj = {};
    await until(async () => {
      const reply = await api.request<Obj>('/api/v1/namespaces/default/pods/web-copy');
      copy = reply.body;
      return reply.status === 200 && (copy.status as Obj).phase === 'Running';
    }, 'the copy to run');
    assert.deepEqual(
      ((copy.spec as Obj).containers as Obj[]).map((c) => [c.name, c.image]),
      [
        ['web', 'nginx:1.27'],
        ['debugger', 'busybox'],
      ],
    );
    assert.equal((copy.spec as Obj).ephemeralContainers, undefined);
    assert.deepEqual(
      ((copy.status as Obj).containerStatuses as Obj[]).map((cs) => [cs.name, Object.keys(cs.state as Obj)]),
      [
        ['web', ['running']],
        ['debugger', ['running']],
      ],
    );
  });

  test('kubectl debug node/node-1 runs a debugging pod on that node with the host namespaces', async () => {
    // A command that keeps it running (busybox's sh without -i exits at once, and the pod, restartPolicy Never, ends).
    const r = await run(['debug', 'node/node-1', '--image=busybox', '--', 'sleep', '1d']);
    assert.equal(r.code, 0, r.stderr);
    const name =
      /^Creating debugging pod (node-debugger-node-1-[a-z0-9]{5}) with container debugger on node node-1\.$/m.exec(
        r.stdout,
      )?.[1];
    assert.ok(name, r.stdout);
    let pod: Obj = {};
    await until(async () => {
      pod = await api.get(`/api/v1/namespaces/default/pods/${name}`);
      return (pod.status as Obj).phase === 'Running';
    }, 'the node debugging pod to run');
    const spec = pod.spec as Obj;
    assert.equal(spec.nodeName, 'node-1');
    assert.equal(spec.hostPID, true);
    assert.equal(spec.hostNetwork, true);
  });
});
