import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Api } from './helpers/http.js';
import { TestRandom } from './helpers/random.js';
import { SpdyClient, type UpgradeAnswer } from './helpers/spdy-client.js';
import { startServer, type SimServer } from './helpers/server.js';

// pods/exec, pods/attach and pods/portforward over SPDY/3.1 frame by frame, as client-go's spdystream sends them:
// what kubectl shows is tested in kubectl-commands (run with every kubectl 1.27-1.33); this file checks the wire.

const V4 = 'v4.channel.k8s.io';

describe('SPDY/3.1 streaming (exec, attach, port-forward)', () => {
  let server: SimServer;
  let api: Api;
  const clients: SpdyClient[] = [];

  before(async () => {
    server = await startServer(['--nodes', '1']);
    api = new Api(server.url);
    await api.create('/api/v1/namespaces/default/pods', {
      metadata: { name: 'box' },
      spec: { containers: [{ name: 'main', image: 'nginx' }] },
    });
    for (let i = 0; i < 100; i++) {
      const pod = await api.get('/api/v1/namespaces/default/pods/box');
      const ready = (pod.status as { containerStatuses?: Array<{ ready: boolean }> }).containerStatuses?.[0]?.ready;
      if (ready) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
  after(async () => {
    for (const c of clients) c.close();
    await server?.stop();
  });

  const upgrade = async (
    path: string,
    protocols: string[] = [V4],
    headers: Record<string, string | string[]> = {},
  ): Promise<SpdyClient | UpgradeAnswer> =>
    SpdyClient.upgrade(server.url, 'POST', path, { 'X-Stream-Protocol-Version': protocols, ...headers });
  const session = async (path: string, protocols: string[] = [V4]): Promise<SpdyClient> => {
    const client = await upgrade(path, protocols);
    assert.ok(client instanceof SpdyClient, `expected 101, got ${JSON.stringify(client)}`);
    clients.push(client);
    return client;
  };
  const exec = (command: string[], flags: string): string =>
    `/api/v1/namespaces/default/pods/box/exec?${command.map((c) => `command=${encodeURIComponent(c)}`).join('&')}&${flags}`;

  it('exec: 101 with the negotiated protocol, a SYN_REPLY per stream, output, the Status, then resets and GOAWAY', async () => {
    const client = await session(exec(['sh', '-c', 'echo out; cat /nope; exit 3'], 'stdout=true&stderr=true'));
    assert.equal(client.answer.headers['x-stream-protocol-version'], V4);
    assert.equal(client.answer.headers.upgrade, 'SPDY/3.1');
    const error = await client.open({ streamtype: 'error' });
    const stdout = await client.open({ streamtype: 'stdout' });
    const stderr = await client.open({ streamtype: 'stderr' });
    await client.until(() => client.frames.some((f) => f.type === 'goaway'), 'the end of the session');
    assert.deepEqual(
      client.frames.filter((f) => f.type === 'syn_reply').map((f) => f.id),
      [error, stdout, stderr],
    );
    await client.until(() => client.replyHeaderCounts.length === 3, 'the reply headers to inflate');
    assert.deepEqual(client.replyHeaderCounts, [0, 0, 0], 'each SYN_REPLY is a valid zlib block with no headers');
    assert.equal(client.data(stdout), 'out\n');
    assert.equal(client.data(stderr), 'cat: /nope: No such file or directory\n');
    assert.deepEqual(JSON.parse(client.data(error)), {
      metadata: {},
      status: 'Failure',
      message:
        'command terminated with non-zero exit code: error executing command [sh -c echo out; cat /nope; exit 3], exit code 3',
      reason: 'NonZeroExitCode',
      details: { causes: [{ reason: 'ExitCode', message: '3' }] },
    });
    // As kubelet's connection.Close: every stream reset (CANCEL), then GOAWAY OK.
    const ends = client.frames
      .filter((f) => f.type === 'rst' || f.type === 'goaway')
      .map((f) => `${f.type}:${f.id}:${f.status}`);
    assert.deepEqual(ends, [`rst:${error}:5`, `rst:${stdout}:5`, `rst:${stderr}:5`, `goaway:${stderr}:0`]);
  });

  it('exec: stdin is read as it arrives and its FIN ends it; pings are answered', async () => {
    const client = await session(exec(['cat'], 'stdin=true&stdout=true'));
    const error = await client.open({ streamtype: 'error' });
    const stdin = await client.open({ streamtype: 'stdin' });
    const stdout = await client.open({ streamtype: 'stdout' });
    client.ping(1);
    await client.until(() => client.frames.some((f) => f.type === 'ping' && f.id === 1), 'the ping answer');
    // A multi-byte character split across two DATA frames.
    const text = Buffer.from('héllo\n');
    client.send(stdin, text.subarray(0, 2));
    client.send(stdin, text.subarray(2));
    client.send(stdin, 'world\n', true);
    await client.until(() => client.frames.some((f) => f.type === 'goaway'), 'cat to end');
    assert.equal(client.data(stdout), 'héllo\nworld\n');
    assert.deepEqual(JSON.parse(client.data(error)), { metadata: {}, status: 'Success' });
  });

  it('exec with a terminal: one output stream, a resize stream, CR LF from the shell', async () => {
    const client = await session(exec(['sh'], 'stdin=true&stdout=true&stderr=true&tty=true'));
    const error = await client.open({ streamtype: 'error' });
    const stdin = await client.open({ streamtype: 'stdin' });
    const stdout = await client.open({ streamtype: 'stdout' });
    // With tty kubelet expects no stderr stream but a resize one: four streams start the session.
    const resize = await client.open({ streamtype: 'resize' });
    client.send(resize, '{"Width":120,"Height":40}{"Width":100,"Height":30}');
    client.send(stdin, 'echo hi\r');
    await client.until(() => client.data(stdout).includes('hi\r\n'), 'the echo');
    client.send(stdin, 'exit 2\r');
    await client.until(() => client.frames.some((f) => f.type === 'goaway'), 'the shell to exit');
    assert.equal(JSON.parse(client.data(error)).reason, 'NonZeroExitCode');
  });

  it('older protocols: v3 and v2 write only a failure message on the error stream', async () => {
    const v3 = await session(exec(['sh', '-c', 'exit 4'], 'stdout=true'), ['v3.channel.k8s.io']);
    assert.equal(v3.answer.headers['x-stream-protocol-version'], 'v3.channel.k8s.io');
    const error = await v3.open({ streamtype: 'error' });
    await v3.open({ streamtype: 'stdout' });
    await v3.until(() => v3.frames.some((f) => f.type === 'goaway'), 'the end');
    assert.equal(
      v3.data(error),
      'command terminated with non-zero exit code: error executing command [sh -c exit 4], exit code 4',
    );
    const v2 = await session(exec(['true'], 'stdout=true'), ['v2.channel.k8s.io']);
    const ok = await v2.open({ streamtype: 'error' });
    await v2.open({ streamtype: 'stdout' });
    await v2.until(() => v2.frames.some((f) => f.type === 'goaway'), 'the end');
    assert.equal(v2.data(ok), '');
  });

  it("handshake refusals are kubelet's plain-text answers; the API server's checks come first as a Status", async () => {
    const none = (await SpdyClient.upgrade(server.url, 'POST', exec(['true'], 'stdout=true'), {})) as UpgradeAnswer;
    assert.equal(none.status, 400);
    assert.equal(none.body, 'unable to upgrade: X-Stream-Protocol-Version is required');
    const unknown = (await upgrade(exec(['true'], 'stdout=true'), ['v9.channel.k8s.io', 'x'])) as UpgradeAnswer;
    assert.equal(unknown.status, 403);
    assert.equal(
      unknown.body,
      'unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io x], server accepts [v4.channel.k8s.io v3.channel.k8s.io v2.channel.k8s.io channel.k8s.io]',
    );
    const forward = (await upgrade('/api/v1/namespaces/default/pods/box/portforward', [V4])) as UpgradeAnswer;
    assert.equal(forward.status, 403);
    assert.match(forward.body, /server accepts \[portforward\.k8s\.io\]$/);
    const missing = (await upgrade(
      '/api/v1/namespaces/default/pods/nope/exec?command=true&stdout=true',
    )) as UpgradeAnswer;
    assert.equal(missing.status, 404);
    assert.equal(JSON.parse(missing.body).message, 'pods "nope" not found');
    const container = (await upgrade(exec(['true'], 'stdout=true&container=side'))) as UpgradeAnswer;
    assert.equal(container.status, 400);
    assert.equal(JSON.parse(container.body).message, 'container side is not valid for pod box');
    // The server still serves.
    assert.equal((await api.request('/healthz')).text, 'ok');
  });

  it('port-forward: streams paired by requestID, the refusal on the error stream, both closed; bad streams reset', async () => {
    const client = await session('/api/v1/namespaces/default/pods/box/portforward', ['portforward.k8s.io']);
    assert.equal(client.answer.headers['x-stream-protocol-version'], 'portforward.k8s.io');
    const error = await client.open({ streamtype: 'error', port: '8080', requestid: '0' });
    const data = await client.open({ streamtype: 'data', port: '8080', requestid: '0' });
    await client.until(
      () => client.frames.some((f) => f.type === 'data' && f.id === data && f.flags & 1),
      'the data stream to close',
    );
    await client.until(
      () => client.frames.some((f) => f.type === 'data' && f.id === error && f.flags & 1),
      'the error stream to close',
    );
    assert.match(
      client.data(error),
      /^error forwarding port 8080 to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace "\/var\/run\/netns\/cni-[0-9a-f-]{36}": failed to connect to localhost:8080 inside namespace "[0-9a-f]{64}", IPv4: dial tcp4 127\.0\.0\.1:8080: connect: connection refused IPv6 dial tcp6 \[::1\]:8080: connect: connection refused $/,
    );
    assert.equal(client.data(data), '');
    // Without a port, or with an unknown stream type, a stream is reset without a reply (kubelet's httpStreamReceived).
    const portless = await client.open({ streamtype: 'data', requestid: '1' });
    const odd = await client.open({ streamtype: 'video', port: '80', requestid: '1' });
    await client.until(() => client.frames.filter((f) => f.type === 'rst').length >= 2, 'the resets');
    assert.deepEqual(
      client.frames.filter((f) => f.type === 'rst').map((f) => `${f.id}:${f.status}`),
      [`${portless}:3`, `${odd}:3`],
    );
    assert.ok(!client.frames.some((f) => f.type === 'syn_reply' && (f.id === portless || f.id === odd)));
    // Older clients send no requestID: the pair is the error stream and the one two ids after it.
    const oldError = await client.open({ streamtype: 'error', port: '9090' });
    await client.open({ streamtype: 'data', port: '9090' });
    await client.until(() => client.data(oldError).includes('port 9090'), 'the second refusal');
    // The connection stays for more forwarded connections until the client closes it.
    assert.ok(!client.frames.some((f) => f.type === 'goaway'));
  });

  it('protocol errors end one session with GOAWAY; the server and other sessions go on', async () => {
    const bystander = await session(exec(['sleep', '30'], 'stdout=true'));
    await bystander.open({ streamtype: 'error' });
    await bystander.open({ streamtype: 'stdout' });

    // A control frame of an unknown version.
    const badVersion = await session(exec(['true'], 'stdout=true'));
    badVersion.socket.write(Buffer.from([0x80, 0x09, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1]));
    await badVersion.until(() => badVersion.frames.some((f) => f.type === 'goaway') && badVersion.closed, 'GOAWAY');
    assert.equal(badVersion.frames.find((f) => f.type === 'goaway')!.status, 1);

    // A header block that is no zlib stream.
    const garbage = await session(exec(['true'], 'stdout=true'));
    const body = Buffer.alloc(10 + 8);
    body.writeUInt32BE(1, 0);
    body.write('notzlib!', 10);
    garbage.control(1, 0, body);
    await garbage.until(() => garbage.closed, 'the session to close');
    assert.equal(garbage.frames.find((f) => f.type === 'goaway')?.status, 1);

    // DATA for a stream never opened; a stream id going backwards.
    const confused = await session(exec(['sleep', '30'], 'stdout=true'));
    confused.send(7, 'hello');
    await confused.until(() => confused.frames.some((f) => f.type === 'rst' && f.id === 7), 'the reset');
    assert.equal(confused.frames.find((f) => f.type === 'rst')!.status, 2, 'INVALID_STREAM');

    // A frame cut off mid-way, then the connection dropped.
    const cut = await session(exec(['sleep', '30'], 'stdout=true'));
    await cut.open({ streamtype: 'error' });
    cut.socket.write(Buffer.from([0x80, 0x03, 0x00, 0x01, 0, 0, 0, 40, 0, 0, 0]));
    cut.close();

    // A stream the client resets before the session starts, then abandons.
    const abandoned = await session(exec(['sleep', '30'], 'stdout=true'));
    const early = await abandoned.open({ streamtype: 'error' });
    abandoned.reset(early);
    abandoned.close();

    assert.equal((await api.request('/healthz')).text, 'ok');
    // The bystander's sleep is still running: its connection has seen nothing but its own replies.
    assert.deepEqual(
      bystander.frames.map((f) => f.type),
      ['syn_reply', 'syn_reply'],
    );
    assert.ok(!bystander.closed && !bystander.frames.some((f) => f.type === 'goaway'));
  });

  it('seeded chaos: random frames on exec, attach and port-forward sessions never stop the server', async () => {
    const seed = process.env.KUBE_SIM_TEST_SEED ? Number(process.env.KUBE_SIM_TEST_SEED) : Date.now() % 2 ** 31;
    const rng = new TestRandom(seed);
    const paths: Array<[string, string[]]> = [
      [exec(['cat'], 'stdin=true&stdout=true&stderr=true'), [V4]],
      [exec(['sh'], 'stdin=true&stdout=true&tty=true'), [V4]],
      [exec(['echo', 'hi'], 'stdout=true'), ['v3.channel.k8s.io']],
      ['/api/v1/namespaces/default/pods/box/attach?container=main&stdin=true&stdout=true', [V4]],
      ['/api/v1/namespaces/default/pods/box/portforward', ['portforward.k8s.io']],
    ];
    const types = ['error', 'stdin', 'stdout', 'stderr', 'resize', 'data', 'bogus', ''];
    const actions: Array<(c: SpdyClient) => Promise<void> | void> = [
      async (c) => {
        const headers: Record<string, string> = { streamtype: rng.pick(types) };
        if (rng.int(2)) headers.port = rng.pick(['80', '0', '70000', 'x', '8080']);
        if (rng.int(2)) headers.requestid = String(rng.int(3));
        await c.open(headers, rng.pick([0, 0, 1, 2, 3]));
      },
      (c) => c.send(1 + 2 * rng.int(6), randomBytes(rng.int(3000)), rng.int(3) === 0),
      (c) => c.reset(1 + 2 * rng.int(6), 1 + rng.int(11)),
      (c) => c.ping(rng.int(10)),
      (c) => c.control(rng.pick([4, 7, 8, 9, 5, 10, 0xf000]), rng.int(256), randomBytes(rng.int(40))),
      (c) => c.control(1, 0, randomBytes(rng.int(30))),
      (c) => void c.socket.write(randomBytes(1 + rng.int(64))),
      (c) => void c.socket.write(Buffer.from([0x80, 0x03, 0x00, 0x01, 0xff, 0xff, 0xff, 0xff])),
      (c) => void c.socket.write(Buffer.from([0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x10, 0x00, 1, 2, 3])),
    ];
    const counts = { switched: 0, refused: 0 };
    const one = async (): Promise<void> => {
      const [path, protocols] = rng.pick(paths);
      const client = await upgrade(path, protocols);
      if (!(client instanceof SpdyClient)) {
        counts.refused++;
        return;
      }
      counts.switched++;
      for (let i = rng.int(8); i > 0 && !client.closed; i--) {
        await rng.pick(actions)(client);
        if (rng.int(3) === 0) await new Promise((resolve) => setTimeout(resolve, rng.int(15)));
      }
      if (rng.int(2)) client.socket.end();
      else client.close();
    };
    for (let round = 0; round < 60; round++) await Promise.all(Array.from({ length: 8 }, one));
    assert.ok(counts.switched > 400, `seed ${seed}: ${JSON.stringify(counts)}`);
    assert.equal((await api.request('/healthz')).text, 'ok', `seed ${seed}`);
    assert.equal((await api.get('/api/v1/namespaces/default/pods/box')).metadata.name, 'box');
    assert.doesNotMatch(server.stderr(), /internal error|Uncaught|ERR_/i, `seed ${seed}`);
    // The box still runs commands, over SPDY.
    const client = await session(exec(['echo', 'still'], 'stdout=true'));
    await client.open({ streamtype: 'error' });
    const stdout = await client.open({ streamtype: 'stdout' });
    await client.until(() => client.frames.some((f) => f.type === 'goaway'), `seed ${seed}: the last exec`);
    assert.equal(client.data(stdout), 'still\n');
  });

  it('attach: output written after the attach, then Success when the container exits', async () => {
    await api.create('/api/v1/namespaces/default/pods', {
      metadata: { name: 'short', annotations: { 'kube-sim.dev/stop-delay': '0s' } },
      spec: { containers: [{ name: 'main', image: 'nginx' }] },
    });
    for (let i = 0; i < 100; i++) {
      const pod = await api.get('/api/v1/namespaces/default/pods/short');
      if ((pod.status as { phase?: string }).phase === 'Running') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const client = await session('/api/v1/namespaces/default/pods/short/attach?container=main&stdout=true&stderr=true');
    const error = await client.open({ streamtype: 'error' });
    const stdout = await client.open({ streamtype: 'stdout' });
    await client.open({ streamtype: 'stderr' });
    await client.until(() => client.replyHeaderCounts.length === 3, 'the replies');
    await api.delete('/api/v1/namespaces/default/pods/short');
    await client.until(() => client.frames.some((f) => f.type === 'goaway'), 'the container to exit');
    assert.match(client.data(stdout), /\[kube-sim\] container main exited with code 0\n$/);
    assert.deepEqual(JSON.parse(client.data(error)), { metadata: {}, status: 'Success' });
  });
});
