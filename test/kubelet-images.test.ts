import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { kubectlMissing, kubectlAgainst } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 21 with the real kubectl on a virtual clock: images that cannot be pulled. The classic exercise — set a bad
// image, watch the rollout stall in ImagePullBackOff with maxUnavailable respected, see ProgressDeadlineExceeded,
// roll back — and the kubelet's messages, events and back-off for references it cannot parse and images no registry
// has (the catalog's markers, `--missing-images`, the kube-sim.dev/missing-images annotation).

const missing = kubectlMissing();

function rows(table: string): string[][] {
  return table
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s{2,}/));
}

describe('image pulls with kubectl', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;

  before(async () => {
    server = await startServer([
      '--clock',
      'virtual',
      '--seed',
      '21',
      '--nodes',
      '3',
      '--missing-images',
      'registry.example.com/team/web:2.0,ghcr.io/acme/*',
    ]);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  const run = (args: string[], input?: string) => kubectlAgainst(server).run(args, input);
  const k = (args: string[], input?: string): Promise<string> => kubectlAgainst(server).ok(args, input);
  const advance = async (by: string): Promise<void> => {
    await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  };
  const pods = async (selector: string): Promise<Obj[]> =>
    (await api.list(`/api/v1/namespaces/default/pods?labelSelector=${encodeURIComponent(selector)}`)).items;
  const waiting = (pod: Obj): string | undefined =>
    (pod.status as { containerStatuses?: Array<{ state?: { waiting?: { reason?: string } } }> } | undefined)
      ?.containerStatuses?.[0]?.state?.waiting?.reason;
  const eventCount = async (pod: string, reason: string, message: RegExp): Promise<number> => {
    const list = JSON.parse(
      await k(['get', 'events', '--field-selector', `involvedObject.name=${pod},reason=${reason}`, '-o', 'json']),
    ) as { items: Array<{ message: string; count?: number }> };
    return list.items.filter((e) => message.test(e.message)).reduce((n, e) => n + (e.count ?? 1), 0);
  };

  test('set image to a tag that does not exist, the rollout stalls in ImagePullBackOff, rollout undo recovers', async () => {
    await k(['create', 'deployment', 'web', '--image=nginx:1.27', '--replicas=3']);
    await advance('1s');
    assert.match(await k(['rollout', 'status', 'deploy/web', '--timeout=5s']), /successfully rolled out/);

    await k(['set', 'image', 'deploy/web', 'nginx=nginx:does-not-exist']);
    await advance('0s');
    let all = await pods('app=web');
    const bad = all.filter(
      (p) => (p.spec as { containers: Array<{ image: string }> }).containers[0]!.image === 'nginx:does-not-exist',
    );
    assert.equal(bad.length, 1, 'maxSurge 25% of 3: one new pod');
    const name = bad[0]!.metadata.name!;
    assert.equal(waiting(bad[0]!), 'ImagePullBackOff');
    assert.match(await k(['get', 'pod', name]), new RegExp(`^${name}\\s+0/1\\s+ImagePullBackOff\\s+0\\s`, 'm'));
    const ready = all.filter((p) => p.metadata.name !== name);
    assert.equal(ready.length, 3, 'maxUnavailable 25% of 3 is 0: every old pod stays');
    assert.ok(ready.every((p) => (p.status as { phase: string }).phase === 'Running'));

    const described = await k(['describe', 'pod', name]);
    assert.match(described, /State:\s+Waiting\n\s+Reason:\s+ImagePullBackOff/);
    assert.match(described, /Normal\s+Pulling\s+.*kubelet\s+Pulling image "nginx:does-not-exist"/);
    assert.match(
      described,
      /Warning\s+Failed\s+.*kubelet\s+Failed to pull image "nginx:does-not-exist": rpc error: code = NotFound desc = failed to pull and unpack image "docker\.io\/library\/nginx:does-not-exist": failed to resolve reference "docker\.io\/library\/nginx:does-not-exist": docker\.io\/library\/nginx:does-not-exist: not found/,
    );
    assert.match(described, /Warning\s+Failed\s+.*kubelet\s+Error: ErrImagePull/);
    assert.match(described, /Normal\s+BackOff\s+.*kubelet\s+Back-off pulling image "nginx:does-not-exist"/);
    assert.match(described, /Warning\s+Failed\s+.*kubelet\s+Error: ImagePullBackOff/);
    const message = await k([
      'get',
      'pod',
      name,
      '-o',
      'jsonpath={.status.containerStatuses[0].state.waiting.message}',
    ]);
    assert.match(message, /^Back-off pulling image "nginx:does-not-exist": ErrImagePull: rpc error: code = NotFound/);
    const logs = await run(['logs', name]);
    assert.match(
      logs.stderr,
      new RegExp(`container "nginx" in pod "${name}" is waiting to start: trying and failing to pull image`),
    );

    // The kubelet's back-off: pulls at 0 s, then 10 s, 20 s, 40 s, 80 s after each failure (10, 30, 70, 150 s).
    const pulls = async (): Promise<number> => eventCount(name, 'Pulling', /nginx:does-not-exist/);
    assert.equal(await pulls(), 1);
    for (const [by, expected] of [
      ['9s', 1],
      ['1s', 2],
      ['19s', 2],
      ['1s', 3],
      ['40s', 4],
      ['80s', 5],
    ] as const) {
      await advance(by);
      assert.equal(await pulls(), expected, `pulls after another ${by}`);
    }
    all = await pods('app=web');
    assert.equal(all.length, 4, 'the rollout stalls: no old pod is taken down');

    const stalled = await run(['rollout', 'status', 'deploy/web', '--timeout=2s']);
    assert.notEqual(stalled.code, 0);
    assert.match(
      stalled.stdout,
      /Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated/,
    );
    await advance('10m');
    assert.match(
      await k(['get', 'deploy', 'web', '-o', 'jsonpath={.status.conditions[?(@.type=="Progressing")].reason}']),
      /^ProgressDeadlineExceeded$/,
    );
    const exceeded = await run(['rollout', 'status', 'deploy/web', '--timeout=5s']);
    assert.notEqual(exceeded.code, 0);
    assert.match(exceeded.stderr, /error: deployment "web" exceeded its progress deadline/);

    assert.match(await k(['rollout', 'undo', 'deploy/web']), /deployment\.apps\/web rolled back/);
    await advance('2s');
    assert.match(await k(['rollout', 'status', 'deploy/web', '--timeout=5s']), /successfully rolled out/);
    all = await pods('app=web');
    assert.equal(
      all.length,
      3,
      `the bad pod is gone at once (it ran no container): ${all.map((p) => p.metadata.name).join(' ')}`,
    );
    assert.ok(
      all.every((p) => (p.spec as { containers: Array<{ image: string }> }).containers[0]!.image === 'nginx:1.27'),
    );
    await k(['delete', 'deployment', 'web']);
  });

  test('a reference the kubelet cannot parse waits in InvalidImageName', async () => {
    // kubectl run refuses the reference itself; the API server takes it (as kube-apiserver does) and the kubelet judges.
    await k(
      ['apply', '-f', '-'],
      'apiVersion: v1\nkind: Pod\nmetadata: {name: shouty}\nspec: {containers: [{name: c, image: "Nginx:1.27"}]}\n',
    );
    await advance('0s');
    assert.match(await k(['get', 'pod', 'shouty']), /^shouty\s+0\/1\s+InvalidImageName\s+0\s/m);
    const described = await k(['describe', 'pod', 'shouty']);
    assert.match(
      described,
      /Warning\s+InspectFailed\s+.*kubelet\s+Failed to apply default image tag "Nginx:1\.27": couldn't parse image name "Nginx:1\.27": invalid reference format: repository name \(library\/Nginx\) must be lowercase/,
    );
    assert.match(described, /Warning\s+Failed\s+.*kubelet\s+Error: InvalidImageName/);
    await advance('5m');
    assert.equal(await eventCount('shouty', 'InspectFailed', /./), 1, 'never pulled, nothing to retry');
  });

  test('--missing-images and the kube-sim.dev/missing-images annotation name images no registry has', async () => {
    await k(['run', 'listed', '--image=registry.example.com/team/web:2.0']);
    await k(['run', 'globbed', '--image=ghcr.io/acme/tool:1']);
    await k(['run', 'fine', '--image=registry.example.com/team/web:1.0']);
    await k(
      ['apply', '-f', '-'],
      'apiVersion: v1\nkind: Pod\nmetadata: {name: annotated, annotations: {kube-sim.dev/missing-images: "myapp:3"}}\nspec: {containers: [{name: c, image: "myapp:3"}]}\n',
    );
    await advance('0s');
    const status = async (pod: string): Promise<string> => rows(await k(['get', 'pod', pod]))[1]![2]!;
    assert.equal(await status('listed'), 'ImagePullBackOff');
    assert.equal(await status('globbed'), 'ImagePullBackOff');
    assert.equal(await status('annotated'), 'ImagePullBackOff');
    assert.equal(await status('fine'), 'Running', 'another tag of a listed image exists');
    await k(['delete', 'pod', 'listed', 'globbed', 'fine', 'annotated', 'shouty', '--wait=false']);
  });
});
