import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Api } from './helpers/http.js';
import { KUBECTL, kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// `kubectl cp` both ways, as kubectl drives it: `test -d DEST` to see whether the destination is a directory,
// `tar -xmf - -C DIR` with the archive on stdin (the WebSocket v5 protocol's close signal ends it), and
// `tar cf - PATH` read back. The binaries: $KUBE_SIM_KUBECTL when set (the matrix runs one version at a time),
// else the dispatcher (1.32) and 1.30, the oldest that speaks WebSocket.

const missing = kubectlMissing();
const versions = process.env.KUBE_SIM_KUBECTL
  ? [KUBECTL]
  : [KUBECTL, '/usr/lib/google-cloud-sdk/bin/kubectl.1.30'].filter((b) => existsSync(b));

const manifests = `
apiVersion: v1
kind: ConfigMap
metadata: {name: cp-config}
data: {app.conf: "mode=fast\\n"}
---
apiVersion: v1
kind: Pod
metadata: {name: box}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, 1d]
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: config, mountPath: /etc/config}
  volumes:
  - {name: data, emptyDir: {}}
  - {name: config, configMap: {name: cp-config}}
`;

describe('kubectl cp to and from a pod', { skip: missing }, () => {
  let server: SimServer;
  let work: string;

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--nodes', '1']);
    work = mkdtempSync(join(tmpdir(), 'kube-sim-cp-'));
    const applied = await kubectl(server.url, ['apply', '-f', '-'], { input: manifests });
    assert.equal(applied.code, 0, applied.stderr);
    await new Api(server.url).expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by: '5s' } });
  });
  after(async () => {
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  });

  for (const binary of versions) {
    const version = /kubectl\.(1\.\d+)$/.exec(binary)?.[1] ?? '1.32 (dispatcher)';
    const run = (args: string[]) => kubectl(server.url, args, { binary, timeoutMs: 30_000 });
    const ok = async (args: string[]): Promise<string> => {
      const r = await run(args);
      assert.equal(
        r.code,
        0,
        `kubectl ${args.join(' ')} failed (${r.code}): ${r.stderr}\n${server.stderr().slice(-2000)}`,
      );
      return r.stdout;
    };
    const dir = (name: string): string => {
      const d = join(work, `${version.replace(/\W+/g, '-')}-${name}`);
      mkdirSync(d, { recursive: true });
      return d;
    };

    test(`kubectl ${version}: a file, a binary file and a directory into the pod and back`, async () => {
      const local = dir('up');
      writeFileSync(join(local, 'hello.txt'), 'hello from the laptop\n');
      const blob = randomBytes(300_000);
      writeFileSync(join(local, 'blob.bin'), blob);
      mkdirSync(join(local, 'tree', 'sub'), { recursive: true });
      writeFileSync(join(local, 'tree', 'a.txt'), 'A\n');
      writeFileSync(join(local, 'tree', 'sub', 'b.txt'), 'B\n');
      const at = `/tmp/${version.replace(/\W+/g, '')}`;

      // a directory to a new path, a file to a file path, a file to a directory (it keeps its name)
      await ok(['cp', join(local, 'tree'), `box:${at}`]);
      await ok(['cp', join(local, 'hello.txt'), `box:${at}/greeting.txt`]);
      await ok(['cp', join(local, 'blob.bin'), `box:${at}`]);
      assert.equal(await ok(['exec', 'box', '--', 'cat', `${at}/greeting.txt`]), 'hello from the laptop\n');
      assert.equal(await ok(['exec', 'box', '--', 'ls', at]), 'a.txt\nblob.bin\ngreeting.txt\nsub\n');
      assert.equal(await ok(['exec', 'box', '--', 'cat', `${at}/sub/b.txt`]), 'B\n');

      // and back: byte for byte, the directory with everything under it
      const down = dir('down');
      const back = await run(['cp', `box:${at}/blob.bin`, join(down, 'blob.bin')]);
      assert.equal(back.code, 0, back.stderr);
      assert.ok(readFileSync(join(down, 'blob.bin')).equals(blob), 'the binary file comes back unchanged');
      await ok(['cp', `box:${at}`, join(down, 'tree')]);
      assert.equal(readFileSync(join(down, 'tree', 'a.txt'), 'utf8'), 'A\n');
      assert.equal(readFileSync(join(down, 'tree', 'sub', 'b.txt'), 'utf8'), 'B\n');
    });

    test(`kubectl ${version}: an emptyDir keeps what was copied; a ConfigMap volume is read-only`, async () => {
      const local = dir('volumes');
      writeFileSync(join(local, 'state.json'), '{"n":1}\n');
      await ok(['cp', join(local, 'state.json'), 'box:/data/state.json']);
      assert.equal(await ok(['exec', 'box', '--', 'cat', '/data/state.json']), '{"n":1}\n');

      const refused = await run(['cp', join(local, 'state.json'), 'box:/etc/config/state.json']);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /tar: state\.json: Cannot open: Read-only file system/);
      assert.equal(await ok(['exec', 'box', '--', 'cat', '/etc/config/app.conf']), 'mode=fast\n');
    });

    test(`kubectl ${version}: copying a file that is not there, or into a directory that is not there`, async () => {
      const local = dir('missing');
      await run(['cp', 'box:/tmp/nope.txt', join(local, 'nope.txt')]);
      assert.equal(existsSync(join(local, 'nope.txt')), false);
      // kubectl stops reading once the (empty) archive ends, so what tar said is checked on an exec of its own
      const packed = await run(['exec', 'box', '--', 'tar', 'cf', '-', '/tmp/nope.txt']);
      assert.equal(packed.code, 2);
      assert.equal(
        packed.stderr,
        "tar: Removing leading `/' from member names\ntar: /tmp/nope.txt: Cannot stat: No such file or directory\n" +
          'tar: Exiting with failure status due to previous errors\ncommand terminated with exit code 2\n',
      );

      writeFileSync(join(local, 'x.txt'), 'x');
      const to = await run(['cp', join(local, 'x.txt'), 'box:/no/such/dir/x.txt']);
      assert.notEqual(to.code, 0);
      assert.match(to.stderr, /tar: \/no\/such\/dir: Cannot open: No such file or directory/);
    });
  }
});
