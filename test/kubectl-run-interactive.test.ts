import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { KUBECTL, kubectl, kubectlMissing } from './helpers/kubectl.js';
import { track } from './helpers/processes.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 21: `kubectl run -it NAME --image=busybox --restart=Never -- sh` and `kubectl attach -it` run what the user
// types. The container's shell reads the attach's stdin (kubectl sends it over the attach stream), its output comes
// back (and is its log), and `exit` ends the container with its code: the pod Succeeded (Completed) or Failed, and
// with --rm kubectl deletes it. A terminal (`script` gives kubectl one) gets the shell's prompt and echo.

const hasScript = spawnSync('sh', ['-c', 'command -v script']).status === 0;

describe('kubectl run -it and kubectl attach -it', { skip: kubectlMissing() }, () => {
  let server: SimServer;
  let api: Api;

  before(async () => {
    server = await startServer(['--nodes', '1']);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  const run = (args: string[], input?: string) =>
    kubectl(server.url, args, { timeoutMs: 60_000, ...(input === undefined ? {} : { input }) });
  const status = async (pod: string): Promise<Obj['status'] & { phase?: string; containerStatuses?: Obj[] }> =>
    (await api.expect<Obj>(200, `/api/v1/namespaces/default/pods/${pod}`)).status as never;

  async function until(check: () => Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 100; i++) {
      if (await check()) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.fail(`timed out waiting for ${what}`);
  }

  test('kubectl run -i --rm: the shell runs what stdin says, exit ends it, and the pod is deleted', async () => {
    const r = await run(
      ['run', '-i', 'once', '--image=busybox', '--restart=Never', '--rm', '--', 'sh'],
      'echo "hello from $HOSTNAME"\necho $((6 * 7))\nexit 0\n',
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'hello from once\n42\npod "once" deleted\n');
    assert.equal((await api.request(`/api/v1/namespaces/default/pods/once`)).status, 404);
  });

  test('kubectl run -it on a terminal: prompt and echo; exit 3 fails the pod and is kubectl’s exit code', {
    skip: !hasScript && 'script (util-linux) is not installed',
  }, async () => {
    // `script` gives kubectl a terminal; what is typed goes in once the attach is there (its prompt is shown).
    const child = track(
      spawn(
        'script',
        ['-qec', `${KUBECTL} --server ${server.url} run -it tty --image=busybox --restart=Never -- sh`, '/dev/null'],
        {
          env: { ...process.env, KUBECONFIG: '/dev/null', HOME: '/tmp' },
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      ),
    );
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const seen = async (text: string): Promise<void> => until(async () => out.includes(text), JSON.stringify(text));
    await seen('/ # ');
    child.stdin!.write('echo typed $((1 + 2))\r');
    await seen('typed 3');
    child.stdin!.write('exit 3\r');
    assert.equal(await exited, 3, out);
    const lines = out.replaceAll('\r', '').split('\n');
    assert.ok(lines.includes('/ # echo typed $((1 + 2))'), 'the terminal echoes what is typed after the prompt');
    assert.ok(lines.includes('typed 3'));
    const s = await status('tty');
    assert.equal(s.phase, 'Failed');
    const terminated = ((s.containerStatuses![0]!.state as Obj).terminated ?? {}) as { exitCode?: number };
    assert.equal(terminated.exitCode, 3);
    assert.match((await run(['logs', 'tty'])).stdout, /typed 3/);
  });

  test('kubectl attach -i reaches the shell of a container that reads stdin; exit completes the pod', async () => {
    await run(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'waits' },
        spec: { restartPolicy: 'Never', containers: [{ name: 'sh', image: 'busybox', stdin: true, command: ['sh'] }] },
      }),
    );
    await until(async () => (await status('waits')).phase === 'Running', 'the pod to run');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal((await status('waits')).phase, 'Running', 'its shell waits for input, not exiting at once');
    const r = await run(['attach', '-i', 'waits'], 'echo attached to $HOSTNAME\nexit\n');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'attached to waits\n');
    await until(async () => (await status('waits')).phase === 'Succeeded', 'the pod to succeed');
    assert.match((await run(['get', 'pod', 'waits'])).stdout, /waits\s+0\/1\s+Completed\s+0/);
  });
});
