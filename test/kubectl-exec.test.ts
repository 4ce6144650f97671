import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api } from './helpers/http.js';
import { KUBECTL, kubectl, kubectlMissing, spawnKubectl, type KubectlProcess } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// The exec shell through the real kubectl (WebSocket v5): the scripts client test suites run, exit codes, and
// a non-tty `sh` fed on stdin that answers each line while stdin is still open.

const missing = kubectlMissing();

describe('kubectl exec into the simulated shell', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;
  const background: KubectlProcess[] = [];

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--nodes', '1']);
    api = new Api(server.url);
    const pod =
      'apiVersion: v1\nkind: Pod\nmetadata: {name: box}\nspec: {containers: [{name: app, image: busybox, command: [sleep, 1d]}]}\n';
    const applied = await kubectl(server.url, ['apply', '-f', '-'], { input: pod });
    assert.equal(applied.code, 0, applied.stderr);
    await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by: '5s' } });
  });
  after(async () => {
    for (const p of background) await p.stop();
    await server.stop();
  });

  const run = (args: string[]) => kubectl(server.url, args, { timeoutMs: 30_000 });

  test('a for loop over $(seq 1 3) prints the cluster date three times', async () => {
    const { now } = await api.expect<{ now: string }>(200, '/sim/v1/clock');
    const r = await run(['exec', 'box', '--', 'sh', '-c', 'for i in $(seq 1 3); do date; done']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 3);
    const d = new Date(now);
    for (const line of lines)
      assert.match(line, new RegExp(`^\\w{3} \\w{3} [ \\d]\\d \\d\\d:\\d\\d:\\d\\d UTC ${d.getUTCFullYear()}$`));
  });

  test('exit codes: sh -c "exit 3" exits 3; a failing command in a pipeline, redirections and $?', async () => {
    const three = await run(['exec', 'box', '--', 'sh', '-c', 'exit 3']);
    assert.equal(three.code, 3);
    assert.equal(three.stderr, 'command terminated with exit code 3\n');
    const r = await run([
      'exec',
      'box',
      '--',
      'sh',
      '-c',
      'ls /nope 2>/dev/null; echo "status $?"; ls /nope 2>&1 | wc -l; echo done >&2',
    ]);
    assert.equal(r.code, 0);
    assert.equal(r.stdout, 'status 2\n1\n');
    assert.equal(r.stderr, 'done\n');
  });

  test('kubectl exec -i POD -- sh answers each line before stdin closes', async () => {
    const p = spawnKubectl(server.url, ['exec', '-i', 'box', '--', 'sh'], KUBECTL, true);
    background.push(p);
    p.child.stdin!.write('echo first\n');
    await p.until((out) => out === 'first\n', 'the answer to the first line');
    p.child.stdin!.write('read name\nkube-sim\necho "hello $name"\n');
    await p.until((out) => out === 'first\nhello kube-sim\n', 'the answer to the read');
    p.child.stdin!.write('echo last > /tmp/state\n');
    p.child.stdin!.end('cat /tmp/state\n');
    assert.equal(await p.exited, 0);
    assert.equal(p.stdout, 'first\nhello kube-sim\nlast\n');
  });
});
