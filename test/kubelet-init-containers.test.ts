import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

type Spec = Record<string, unknown>;

// Issue 21 with the real kubectl on a virtual clock: init containers run their commands in the exec shell as app
// containers do — in order, each to completion before the next; their exit codes decide (a failure fails a pod
// that never restarts, Init:Error, and is restarted with back-off otherwise, Init:CrashLoopBackOff); their output
// is their log. Sidecars (restartPolicy: Always) start and keep running beside the app containers.

type State = { running?: Obj; waiting?: { reason: string }; terminated?: { exitCode: number; reason: string } };
type Status = {
  phase?: string;
  initContainerStatuses?: Array<{ name: string; restartCount: number; state: State }>;
  containerStatuses?: Array<{ name: string; restartCount: number; state: State }>;
};

describe('init containers with kubectl', { skip: kubectlMissing() }, () => {
  let server: SimServer;
  let api: Api;

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--seed', '21', '--nodes', '1']);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  const k = (args: string[], input?: string): Promise<string> => kubectlAgainst(server).ok(args, input);
  const advance = async (by: string): Promise<void> => {
    await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  };
  const status = async (pod: string): Promise<Status> =>
    (await api.expect<Obj>(200, `/api/v1/namespaces/default/pods/${pod}`)).status as Status;
  /** kubectl get pod's READY, STATUS and RESTARTS. */
  const row = async (pod: string): Promise<string> => {
    const line = (await k(['get', 'pod', pod, '--no-headers'])).trim().split(/\s{2,}/);
    return line.slice(1, 4).join(' ');
  };
  const sh = (script: string) => ['sh', '-c', script];
  const pod = (
    name: string,
    restartPolicy: string,
    inits: Spec[],
    containers: Spec[] = [{ name: 'app', image: 'nginx' }],
  ) =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: { restartPolicy, initContainers: inits, containers },
    });

  test('run in order, each to completion before the next; their output is their log; then the app starts', async () => {
    await k(
      ['apply', '-f', '-'],
      pod('ordered', 'Always', [
        { name: 'first', image: 'busybox', command: sh('echo first starts; sleep 5; echo first done') },
        { name: 'second', image: 'busybox', command: sh('echo second at $(date +%S)s; sleep 2') },
      ]),
    );
    await advance('1s');
    let s = await status('ordered');
    assert.ok(s.initContainerStatuses![0]!.state.running, 'the first runs');
    assert.equal(s.initContainerStatuses![1]!.state.waiting?.reason, 'PodInitializing', 'the second waits for it');
    assert.equal(s.containerStatuses![0]!.state.waiting?.reason, 'PodInitializing');
    assert.equal(s.phase, 'Pending');
    assert.equal(await row('ordered'), '0/1 Init:0/2 0');
    await advance('5s');
    s = await status('ordered');
    assert.deepEqual(s.initContainerStatuses![0]!.state.terminated, {
      ...s.initContainerStatuses![0]!.state.terminated,
      exitCode: 0,
      reason: 'Completed',
    });
    assert.ok(s.initContainerStatuses![1]!.state.running, 'the second starts once the first completed');
    assert.equal(await row('ordered'), '0/1 Init:1/2 0');
    await advance('2s');
    s = await status('ordered');
    assert.equal(s.initContainerStatuses![1]!.state.terminated?.exitCode, 0);
    assert.ok(s.containerStatuses![0]!.state.running, 'the app container starts after both');
    assert.equal(s.phase, 'Running');
    assert.equal(await row('ordered'), '1/1 Running 0');
    assert.equal(await k(['logs', 'ordered', '-c', 'first']), 'first starts\nfirst done\n');
    assert.equal(
      await k(['logs', 'ordered', '-c', 'second']),
      'second at 05s\n',
      'it started as the first ended, 5 s in, on the cluster clock',
    );
    await k(['delete', 'pod', 'ordered', '--wait=false']);
  });

  test('a failing init container fails a pod that never restarts: Init:Error, and the app never starts', async () => {
    await k(
      ['apply', '-f', '-'],
      pod('fails', 'Never', [
        { name: 'migrate', image: 'busybox', command: sh('echo migrating; sleep 3; echo no database >&2; exit 3') },
        { name: 'after', image: 'busybox', command: sh('echo never') },
      ]),
    );
    await advance('4s');
    const s = await status('fails');
    assert.equal(s.phase, 'Failed');
    assert.deepEqual(
      [s.initContainerStatuses![0]!.state.terminated?.exitCode, s.initContainerStatuses![0]!.state.terminated?.reason],
      [3, 'Error'],
    );
    assert.equal(s.initContainerStatuses![1]!.state.waiting?.reason, 'PodInitializing');
    assert.equal(s.containerStatuses![0]!.state.waiting?.reason, 'PodInitializing');
    assert.equal(await row('fails'), '0/1 Init:Error 0');
    assert.equal(await k(['logs', 'fails', '-c', 'migrate']), 'migrating\nno database\n');
    await advance('1m');
    assert.equal((await status('fails')).initContainerStatuses![0]!.restartCount, 0, 'never restarted');
    await k(['delete', 'pod', 'fails', '--wait=false']);
  });

  test('under Always a failing init container restarts with back-off: Init:Error, then Init:CrashLoopBackOff', async () => {
    await k(['apply', '-f', '-'], pod('loops', 'Always', [{ name: 'wait', image: 'busybox', command: sh('exit 1') }]));
    await advance('1s');
    let s = await status('loops');
    assert.ok(s.initContainerStatuses![0]!.restartCount >= 1, 'the first restart is at once');
    assert.equal(s.phase, 'Pending');
    assert.match(await row('loops'), /^0\/1 Init:(Error|CrashLoopBackOff) [12]( \(\ds ago\))?$/);
    await advance('5s');
    s = await status('loops');
    assert.equal(s.initContainerStatuses![0]!.state.waiting?.reason, 'CrashLoopBackOff');
    const restarts = s.initContainerStatuses![0]!.restartCount;
    assert.match(await row('loops'), new RegExp(`^0/1 Init:CrashLoopBackOff ${restarts} \\(\\d+s ago\\)$`));
    await advance('2m');
    s = await status('loops');
    assert.ok(s.initContainerStatuses![0]!.restartCount > restarts, 'restarted after its back-off');
    assert.ok(s.initContainerStatuses![0]!.restartCount <= restarts + 4, '10 s, 20 s, 40 s, 80 s: not more often');
    assert.equal(s.containerStatuses![0]!.state.waiting?.reason, 'PodInitializing');
    await k(['delete', 'pod', 'loops', '--wait=false']);
  });

  test('a sidecar (restartPolicy: Always) starts, keeps running beside the app, and the next init goes on', async () => {
    await k(
      ['apply', '-f', '-'],
      pod('sidecar', 'Always', [
        { name: 'proxy', image: 'busybox', restartPolicy: 'Always', command: sh('echo proxy up; sleep 3600') },
        { name: 'setup', image: 'busybox', command: sh('echo setup; sleep 1') },
      ]),
    );
    await advance('1s');
    let s = await status('sidecar');
    assert.ok(s.initContainerStatuses![0]!.state.running, `the sidecar runs: ${JSON.stringify(s)}`);
    await advance('1s');
    s = await status('sidecar');
    assert.ok(s.initContainerStatuses![0]!.state.running, 'and keeps running');
    assert.equal(s.initContainerStatuses![1]!.state.terminated?.exitCode, 0, 'the init after it ran beside it');
    assert.ok(s.containerStatuses![0]!.state.running);
    assert.equal(await row('sidecar'), '2/2 Running 0');
    assert.equal(await k(['logs', 'sidecar', '-c', 'proxy']), 'proxy up\n');
    await k(['delete', 'pod', 'sidecar', '--wait=false']);
  });
});
